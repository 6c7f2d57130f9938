"""Private clustering estimators (scikit-learn API)."""

from ._base import data_bounds
from ._tree import SplitTree
from .convergent import KMeansGuarantee, SubClustering
from .dbscan import DPDBSCAN
from .dpm import DPM
from .lloyd import DPLloyd
from .mixture import DPGaussianMixture
from .morse import MorseMerging

__all__ = [
    "DPDBSCAN",
    "DPGaussianMixture",
    "DPM",
    "DPLloyd",
    "KMeansGuarantee",
    "MorseMerging",
    "SplitTree",
    "SubClustering",
    "data_bounds",
]
