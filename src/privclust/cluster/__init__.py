"""Private clustering estimators (scikit-learn API)."""

from ._base import data_bounds
from ._tree import SplitTree
from .dbscan import DPDBSCAN
from .dpm import DPM

__all__ = ["DPDBSCAN", "DPM", "SplitTree", "data_bounds"]
