"""The bad inputs every k-means-family estimator refuses the same way, and the check: each
test file adds its estimator's own parameters between the shared rows."""

from __future__ import annotations

import numpy as np
import pytest

#: (kwargs, X, message) rows: the budget and the number of clusters.
BAD_EPSILON_AND_K = [
    ({"epsilon": 0}, None, "epsilon"),
    ({"epsilon": -1.0}, None, "epsilon"),
    ({"epsilon": float("nan")}, None, "epsilon"),
    ({"n_clusters": 0}, None, "n_clusters"),
    ({"n_clusters": 2.5}, None, "n_clusters"),
]
#: (kwargs, X, message) rows: the public bounds and the data.
BAD_BOUNDS_AND_DATA = [
    ({"bounds": None}, None, "bounds are required"),
    ({"bounds": (1, 0)}, None, "lo < hi"),
    ({"bounds": [[0, 1]] * 3}, None, "shape"),
    ({}, [[0.1, np.nan]], "NaN"),
    ({}, [0.1, 0.2], "2-D"),
    ({}, np.zeros((0, 2)), "0 samples"),
]


def assert_clear_error(cls, kwargs, X, match) -> None:
    """``cls(**params).fit(X)`` raises a ValueError or TypeError matching ``match``, with
    ``kwargs`` over a valid 2-cluster fit of 20 points in the unit square."""
    params = {"n_clusters": 2, "epsilon": 1.0, "bounds": (0, 1), "random_state": 0, **kwargs}
    X = np.random.default_rng(0).uniform(0, 1, (20, 2)) if X is None else X
    with pytest.raises((ValueError, TypeError), match=match):
        cls(**params).fit(X)
