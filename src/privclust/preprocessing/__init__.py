"""Private preprocessing: scikit-learn transformers whose fit is a differentially private
release, so they compose with privclust estimators under one budget.

* :class:`PrivateClipper` estimates every feature's range privately and clips records to it;
* :class:`PrivateScaler` standardises every feature with a noisy centre and spread.

Each is epsilon-DP on its own (with an ``accountant`` like any estimator); in a
:class:`privclust.pipeline.PrivatePipeline` every step's line items belong to the pipeline's one
plan, and each step hands the next the public bounds of its output (``output_bounds_``), so the
estimator at the end needs no bounds of its own.
"""

from .clipper import PrivateClipper
from .scaler import PrivateScaler

__all__ = ["PrivateClipper", "PrivateScaler"]
