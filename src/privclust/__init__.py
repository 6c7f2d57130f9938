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
from .cluster.bounds import private_bounds
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
    "private_bounds",
]

# Every registered estimator is public under its class name: a new estimator is its module plus
# its registry entry, nothing here.
from .registry import ENTRIES as _ENTRIES  # noqa: E402

for _entry in _ENTRIES.values():
    globals().setdefault(_entry.cls.__name__, _entry.cls)
__all__ = sorted(set(__all__) | {e.cls.__name__ for e in _ENTRIES.values()})
del _entry
