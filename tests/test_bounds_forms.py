"""Public bounds in every form users bring: ``(lo, hi)``, rows, a ``(lower, upper)`` pair of
arrays (diffprivlib's form) and the named ``{"lower": ..., "upper": ...}``; the 2 x 2 case that
reads validly both ways is refused with both readings spelled out."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from privclust import DPLloyd
from privclust.cluster._base import check_bounds


@pytest.mark.parametrize("bounds, d, expected", [
    ((0, 1), 3, [[0, 1]] * 3),
    ([[0, 1], [2, 3], [4, 5]], 3, [[0, 1], [2, 3], [4, 5]]),
    (([0, 2, 4], [1, 3, 5]), 3, [[0, 1], [2, 3], [4, 5]]),  # (lower, upper) arrays
    ({"lower": [0, 2, 4], "upper": [1, 3, 5]}, 3, [[0, 1], [2, 3], [4, 5]]),
    ({"lower": 0, "upper": [1, 3]}, 2, [[0, 1], [0, 3]]),
    ([[0, 1], [0, 1]], 2, [[0, 1], [0, 1]]),  # only the rows reading is valid
    ([[-1, -2], [1, 2]], 2, [[-1, 1], [-2, 2]]),  # only the pair reading is valid
])
def test_forms(bounds, d, expected):
    np.testing.assert_array_equal(check_bounds(bounds, d), np.asarray(expected, float))


def test_the_ambiguous_two_by_two_is_refused_with_both_readings():
    with pytest.raises(ValueError) as info:
        check_bounds(([0, 5], [10, 20]), 2)
    msg = str(info.value)
    assert "{'lower': [0, 5], 'upper': [10, 20]}" in msg
    assert "{'lower': [0, 10], 'upper': [5, 20]}" in msg and len(msg) < 300
    # a fitted model's stored rows are never ambiguous
    np.testing.assert_array_equal(check_bounds([[0, 5], [10, 20]], 2, rows=True),
                                  [[0, 5], [10, 20]])


def test_the_pair_form_clips_nothing_it_should_not():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(0, 10, 5000), rng.uniform(5, 20, 5000)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clipped record would warn
        est = DPLloyd(2, epsilon=1.0, bounds={"lower": [0, 5], "upper": [10, 20]},
                      random_state=0).fit(X)
    np.testing.assert_array_equal(est.bounds_, [[0, 10], [5, 20]])


@pytest.mark.parametrize("bad, match", [
    ({"low": 0, "upper": 1}, "exactly the keys 'lower' and 'upper'"),
    ({"lower": [0, 1, 2], "upper": [1, 2]}, "one value per feature"),
    ("wide", "bounds must be numbers"),
])
def test_bad_named_forms(bad, match):
    with pytest.raises(ValueError, match=match):
        check_bounds(bad, 2)
