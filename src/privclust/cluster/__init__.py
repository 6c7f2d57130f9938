"""Private clustering estimators (scikit-learn API)."""

from ._base import data_bounds
from ._tree import SplitTree
from .convergent import KMeansGuarantee, SubClustering
from .coreset import CoresetKMeans
from .dbscan import DPDBSCAN
from .dpm import DPM
from .lloyd import DPLloyd
from .mixture import DPGaussianMixture
from .morse import MorseMerging

__all__ = [
    "CoresetKMeans",
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
