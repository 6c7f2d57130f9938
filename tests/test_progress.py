"""Progress of long fits: nothing for quick ones, a log line per step once a fit runs long."""

from __future__ import annotations

import logging

import numpy as np

from privclust import _progress
from privclust.cluster.mixture import DPGaussianMixture


def test_quick_fits_say_nothing_and_long_ones_log_each_step(caplog, monkeypatch, capsys):
    X = np.random.default_rng(0).uniform(-1, 1, (300, 2))
    with caplog.at_level(logging.INFO, logger="privclust"):
        DPGaussianMixture(n_components=2, delta=1e-6, bounds=(-1, 1), n_iter=3,
                          random_state=0).fit(X)
    assert caplog.records == [] and capsys.readouterr().err == ""
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)  # as if every step came after the delay
    with caplog.at_level(logging.INFO, logger="privclust"):
        DPGaussianMixture(n_components=2, delta=1e-6, bounds=(-1, 1), n_iter=3,
                          random_state=0).fit(X)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and lines[-1].startswith("DPGaussianMixture: step 3 of 3 done")
    caplog.clear()
    with _progress.disabled(), caplog.at_level(logging.INFO, logger="privclust"):
        DPGaussianMixture(n_components=2, delta=1e-6, bounds=(-1, 1), n_iter=3,
                          random_state=0).fit(X)
    assert caplog.records == []
