"""Noise draws against the ledger, for the estimators built on sparse histograms (HSTKMeans,
DPCube, EMMC): a recorder of every draw, and the epsilon each release really spent."""

from __future__ import annotations

import math

import numpy as np

import privclust.privacy.histogram as histogram
import privclust.privacy.mechanisms as mechanisms


class DrawRecorder:
    """Records every noise draw (kind, parameter): geometric, Laplace, Gaussian, Gumbel (the
    exponential mechanism) and every sparse histogram. ``histogram_factor`` / ``em_factor``
    != 1 plant a bug: noise drawn at that multiple of the epsilon the ledger records."""

    def __init__(self, monkeypatch, histogram_factor: float = 1.0, em_factor: float = 1.0):
        self.draws: list[tuple[str, float]] = []
        self.histograms: list[tuple[np.ndarray, np.ndarray, int]] = []
        m = mechanisms
        geo, lap, gau, gum = (m._draw_two_sided_geometric, m._draw_laplace, m._draw_gaussian,
                              m._draw_gumbel)
        sparse = histogram.sparse_histogram
        em = m.exponential_mechanism

        def rec(kind, fn):
            def wrapped(rng, param, size):
                self.draws.append((kind, float(np.max(param))))
                return fn(rng, param, size)
            return wrapped

        def sparse_rec(rng, keys, counts, n_cells, epsilon, threshold, noise="geometric", **kw):
            self.histograms.append((np.array(keys), np.array(counts), int(n_cells)))
            self.draws.append(("histogram", float(epsilon)))
            return sparse(rng, keys, counts, n_cells, epsilon * histogram_factor, threshold,
                          noise, **kw)

        def em_planted(rng, scores, sensitivity, epsilon, monotone=False):
            return em(rng, scores, sensitivity, epsilon * em_factor, monotone)

        monkeypatch.setattr(m, "_draw_two_sided_geometric", rec("geometric", geo))
        monkeypatch.setattr(m, "_draw_laplace", rec("laplace", lap))
        monkeypatch.setattr(m, "_draw_gaussian", rec("gaussian", gau))
        monkeypatch.setattr(m, "_draw_gumbel", rec("gumbel", gum))
        monkeypatch.setattr(m, "exponential_mechanism", em_planted)
        monkeypatch.setattr(histogram, "sparse_histogram", sparse_rec)


def true_spend(report, rec: DrawRecorder, d: int) -> list[float]:
    """The epsilon each release really spent, from its noise draws and the sensitivity known
    here independently: cell counts, candidate counts, sizes and max-cover scores 1 (the
    exponential mechanism's Gumbel scale is 2 * 1 / eps), unit sums d."""
    draws = list(rec.draws)
    spent = []
    for r in report.releases:
        kind, param = draws.pop(0)
        if r.mechanism.endswith("sparse hist"):
            assert kind == "histogram"
            geo_kind, geo_eps = draws.pop(0)
            assert geo_kind == "geometric"
            tail_kind, tail_scale = draws.pop(0)
            assert tail_kind == "laplace" and math.isclose(tail_scale, 1.0 / geo_eps,
                                                           rel_tol=1e-12)
            spent.append(geo_eps)
        elif r.mechanism == "exponential":
            assert kind == "gumbel"
            spent.append(2.0 * 1.0 / param)
        elif r.mechanism == "two-sided geometric":
            assert kind == "geometric"
            spent.append(param)
        elif r.mechanism == "laplace":
            assert kind == "laplace"
            spent.append(d / param)
        else:
            raise AssertionError(f"unexpected release {r.mechanism}")
    assert draws == [], f"draws without a ledger line: {draws}"
    return spent
