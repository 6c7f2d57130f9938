"""privclust: differentially private clustering with a stated, checked (epsilon, delta) guarantee.

>>> from privclust import DPM
>>> model = DPM(epsilon=1.0, bounds=(-100, 100), random_state=0).fit(X)   # doctest: +SKIP
>>> model.cluster_centers_, model.privacy_report_                        # doctest: +SKIP
"""

from ._version import __version__
from .cluster import (
    DPDBSCAN,
    DPM,
    DPGaussianMixture,
    DPLloyd,
    KMeansGuarantee,
    MorseMerging,
    SplitTree,
    SubClustering,
    data_bounds,
)
from .cluster._base import NotFittedError
from .privacy import (
    Accountant,
    Budget,
    BudgetExceededError,
    PrivacyLeakWarning,
    PrivacyReport,
)

__all__ = [
    "DPDBSCAN",
    "DPM",
    "Accountant",
    "DPGaussianMixture",
    "DPLloyd",
    "KMeansGuarantee",
    "MorseMerging",
    "SubClustering",
    "Budget",
    "BudgetExceededError",
    "NotFittedError",
    "PrivacyLeakWarning",
    "PrivacyReport",
    "SplitTree",
    "__version__",
    "data_bounds",
]
