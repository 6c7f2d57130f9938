"""What the private transformers share: the private fit of the estimators (plan, accountant,
bounds, report) and the bounds their output lies in."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from ..cluster._base import PrivateFitMixin, clip_to_fitted_bounds, is_dask_input, raise_not_fitted


class PrivateTransformerMixin(PrivateFitMixin, TransformerMixin, BaseEstimator):
    """A transformer whose ``fit`` is a private release. After ``fit``, ``output_bounds_``
    (d, 2) holds public bounds of what ``transform`` returns: a function of released values
    only, so the next step may use them as its public bounds."""

    def _check_fitted(self):
        if not hasattr(self, "output_bounds_"):
            raise_not_fitted(self)

    def _checked_input(self, X, what: str) -> np.ndarray:
        """``X`` checked against the fit (features, names) and clipped to the bounds the fit
        used, as the fit clipped its records."""
        self._check_fitted()
        arr = self._check_X(X, reset=False)
        if is_dask_input(arr):
            raise ValueError(f"{type(self).__name__}.{what} works on in-memory data; pass a "
                             "NumPy array or DataFrame")
        if arr.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {arr.shape[1]} features; {type(self).__name__} was fitted "
                             f"on {self.n_features_in_}")
        return clip_to_fitted_bounds(self, arr)
