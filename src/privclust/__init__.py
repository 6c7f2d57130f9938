"""privclust: differentially private clustering with a stated, checked (epsilon, delta) guarantee.

>>> from privclust import DPM
>>> model = DPM(epsilon=1.0, bounds=(-100, 100), random_state=0).fit(X)   # doctest: +SKIP
>>> model.cluster_centers_, model.privacy_report_                        # doctest: +SKIP
"""

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
from .privacy import (
    Accountant,
    Budget,
    BudgetExceededError,
    PrivacyLeakWarning,
    PrivacyReport,
)

__version__ = "0.1.0"

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
    "PrivacyLeakWarning",
    "PrivacyReport",
    "SplitTree",
    "__version__",
    "data_bounds",
]
