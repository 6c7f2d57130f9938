"""Where the data lives: engines answer exact aggregate queries (no noise here)."""

from .base import Engine, Grouping
from .local import LocalEngine, LocalGrouping

__all__ = ["Engine", "Grouping", "LocalEngine", "LocalGrouping"]
