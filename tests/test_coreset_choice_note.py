"""The report says when CoresetKMeans' choice of k had little to go on: few records for the
choice's epsilon make the exponential mechanism's pick close to a draw among the candidates
(public values only: the released record count, the sample's rate, the choice's epsilon)."""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.datasets import make_blobs

from privclust import CoresetKMeans
from privclust.cluster._coreset.select import ODDS_FLOOR, ODDS_GAP, choice_odds_note


def _notes(X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CoresetKMeans(**({"bounds": (-20, 120), "random_state": 0} | kw)).fit(X)
    return [n for n in model.privacy_report_.notes if "little to go on" in n]


def test_the_odds_are_those_of_the_exponential_mechanism():
    note = choice_odds_note(5250, 1.0, 0.00675, 23)
    odds = math.exp(0.00675 * ODDS_GAP * 5250)
    assert note is not None and f"odds of only {odds:.3g} to 1" in note and "23 candidates" in note
    # at the line: the odds reach the floor, no note
    n_at_floor = math.log(ODDS_FLOOR) / (0.01 * ODDS_GAP)
    assert choice_odds_note(n_at_floor * 1.001, 1.0, 0.01, 5) is None
    assert choice_odds_note(n_at_floor * 0.999, 1.0, 0.01, 5) is not None
    # a Poisson sample scores rate * n records
    assert choice_odds_note(1e6, 400 / (0.01 * 1e6), 0.01, 40) is None


def test_small_data_at_small_epsilon_says_so_and_larger_data_does_not():
    X, _ = make_blobs(3000, 2, centers=20, cluster_std=2.0, center_box=(0, 100), random_state=0)
    assert len(_notes(X, epsilon=0.5)) == 1
    assert _notes(X, epsilon=0.5, n_clusters=20) == []  # given k there is no choice
    X_big = np.vstack([X] * 10) + np.random.default_rng(0).normal(0, 0.5, (30000, 2))
    assert _notes(X_big, epsilon=1.0) == []
