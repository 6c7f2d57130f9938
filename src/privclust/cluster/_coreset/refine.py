"""The private refinement of :class:`~privclust.cluster.coreset.CoresetKMeans`: noisy sizes and
noisy sums of the records of every cluster, each cluster's records restricted to a ball around
an anchor (the cluster's current centre, or the middle of the bounds).

A record of cluster ``j`` is kept when ``||x - a_j|| <= r_j`` (records outside are left out of
both the size and the sum); the kept records' sum of ``(x - a_j) / r_j`` has every term in the
unit ball: L2 sensitivity 1 (the Gaussian mechanism, ``rho``-zCDP) or L1 sensitivity
``sqrt(d)`` (Laplace, pure DP) under add/remove of one record, and the clusters are disjoint
(parallel composition). The sums are exact, on a public fixed-point grid whose rounding moves every
coordinate of ``x - a_j`` toward zero (:meth:`privclust.engine.Engine.centred_sums`), so the
rounded term stays in the ball. The anchors, radii and the assignment come from released values
only. The new centre is ``a_j + r_j * v``, ``v`` the noisy mean ``sum_hat / n_hat`` shrunk into
the unit ball; a cluster whose noisy size is below 1 keeps its fallback.

A ball instead of a box: a cluster of spread ``s`` per feature fills a ball of radius about
``s sqrt(d)`` but needs a box of half-width about ``3 s``, whose L2 diameter is ``3 s sqrt(d)``:
in many dimensions the ball's sensitivity is about 3 times smaller.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...privacy import zcdp_gaussian_sigma
from .data import ball_totals, corrected_nearest

__all__ = ["COUNT_SHARE", "Step", "ball_step", "corrected_nearest", "centre_variance",
           "point_radius", "step_rhos"]

#: Share of a step's epsilon for the noisy sizes (the rest goes to the sums: the clusters hold
#: hundreds of records or more, so the sizes need little).
COUNT_SHARE = 0.15


class Step(NamedTuple):
    """One refinement step's budget: its line items (sizes, sums[, ball radius]), its epsilon
    (sizes and sums; the sums' part is what its share of the zCDP block is worth) and its rho
    (0: Laplace sums, pure DP)."""

    names: tuple
    epsilon: float
    rho: float


def ball_step(engine, mech, labels, anchors, radius, epsilon, *, items, label, bounds,
              rho=0.0, fallback=None, eps_count=None):
    """One release of noisy sizes and sums of the ``k`` clusters given by ``labels`` (one per
    record of ``engine``, -1: no cluster; :class:`~privclust.cluster._coreset.data.ChunkLabels`
    on the Dask engine), records restricted to the balls ``anchors`` (k, d),
    ``radius`` (k,). Returns ``(centres, noisy sizes)``; ``items`` names the plan's line items
    for the sizes and the sums; ``rho > 0`` releases the sums with the Gaussian mechanism at
    ``rho``-zCDP (a share of the sums' zCDP block), else with Laplace at the rest of
    ``epsilon`` after the sizes. A cluster whose noisy size is below 1 gets its row of
    ``fallback`` (default: its anchor). ``eps_count``: the sizes' epsilon, when it is not
    ``COUNT_SHARE`` of ``epsilon`` (the sums then spend the rest)."""
    anchors = np.asarray(anchors, dtype=float)
    radius = np.asarray(radius, dtype=float)
    d = anchors.shape[1]
    # exact totals about the public anchors (centred in the engine), one division each by a
    # public radius: a function of the exact totals alone, however far the anchors lie from 0
    counts, sums = ball_totals(engine, labels, anchors, radius)
    units = sums / radius[:, None]
    eps_count = COUNT_SHARE * epsilon if eps_count is None else eps_count
    eps_sum = epsilon - eps_count
    n_hat = mech.count(counts, eps_count, target=f"cluster sizes, {label}",
                       note="records in their cluster's ball; the clusters are disjoint",
                       item=items[0])
    note = "sums of (x - a) / r over each cluster's ball: every term in the unit ball"
    if rho > 0:
        s_hat = mech.gaussian_zcdp(units, 1.0, rho, target=f"cluster sums, {label}",
                                   note=note, item=items[1])
    else:
        s_hat = mech.laplace(units, math.sqrt(d), eps_sum, target=f"cluster sums, {label}",
                             note=note, item=items[1])
    mean = s_hat / np.maximum(n_hat, 1)[:, None]
    norm = np.sqrt(np.einsum("ij,ij->i", mean, mean))
    mean = mean / np.maximum(norm, 1.0)[:, None]
    keep = anchors if fallback is None else np.asarray(fallback, dtype=float)
    centres = np.where((n_hat >= 1)[:, None], anchors + radius[:, None] * mean, keep)
    return np.clip(centres, bounds[:, 0], bounds[:, 1]), n_hat


def centre_variance(radius, sizes, epsilon, rho, d) -> np.ndarray:
    """Noise variance per coordinate of the centres of one :func:`ball_step` (public: its noise
    scale and the released sizes, at most ``radius^2 / d``; inf where the size is below 1 and the
    centre is a fallback)."""
    eps_sum = epsilon * (1 - COUNT_SHARE)
    sd = zcdp_gaussian_sigma(rho, 1.0) if rho > 0 else math.sqrt(2 * d) / eps_sum
    n = np.asarray(sizes, dtype=float)
    r = np.asarray(radius, dtype=float)
    # the noisy mean is shrunk into the unit ball: the noise moves a centre by at most r
    var = np.minimum((r * sd / np.maximum(n, 1.0)) ** 2, r**2 / d)
    return np.where(n >= 1, var, np.inf)


def point_radius(spread2, bounds, factor) -> np.ndarray:
    """The coreset step's ball radius about each coreset point: ``factor`` times the
    root-mean-square distance of a point of its cell from the cell's centre (public: the
    cells' geometry), at most the bounds' half-diagonal."""
    top = float(np.sqrt(np.sum(((bounds[:, 1] - bounds[:, 0]) / 2.0) ** 2)))
    return np.clip(factor * np.sqrt(spread2), 1e-9 * top + 1e-300, top)


def step_rhos(plan, eps_steps, pure, item) -> list[float]:
    """Each step's share of the sums' zCDP block (the plan's ``item``), in proportion to its
    epsilon (0 for pure DP: Laplace sums). Needs delta (fixed by the record count under the
    delta rule)."""
    if pure or not eps_steps:
        return [0.0] * len(eps_steps)
    plan.require_delta()
    rho = plan.item(item).rho
    total = sum(eps_steps)
    return [rho * e / total for e in eps_steps]
