"""Where the data lives: engines answer exact aggregate queries (no noise here)."""

from .base import AssignmentStats, Engine, Grouping, MostLikelyComponent, NearestCentre
from .local import LocalEngine, LocalGrouping

__all__ = ["AssignmentStats", "Engine", "Grouping", "LocalEngine", "LocalGrouping",
           "MostLikelyComponent", "NearestCentre"]
