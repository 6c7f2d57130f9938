"""Private clustering estimators (scikit-learn API)."""

from ._base import data_bounds
from ._tree import SplitTree
from .convergent import KMeansGuarantee, SubClustering
from .dbscan import DPDBSCAN
from .dpm import DPM
from .lloyd import DPLloyd

__all__ = [
    "DPDBSCAN",
    "DPM",
    "DPLloyd",
    "KMeansGuarantee",
    "SplitTree",
    "SubClustering",
    "data_bounds",
]
