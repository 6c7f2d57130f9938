"""Private clustering estimators (scikit-learn API)."""

from ._base import data_bounds
from ._tree import SplitTree
from .dpm import DPM

__all__ = ["DPM", "SplitTree", "data_bounds"]
