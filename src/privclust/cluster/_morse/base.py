"""The base model of a Morse merge: pooling its centres, and what it has released."""

from __future__ import annotations

import numpy as np

from ...privacy import (
    Budget,
)
from .._base import (
    check_bounds,
)
from ..mixture import (
    DPGaussianMixture,
)


# =========================================================================== estimator
def pool_centres(centres, sizes=None, max_components: int = 20):
    """Ward agglomeration of a centre model's public centres down to ``max_components``
    (post-processing of released values: the centres and the noisy cluster sizes).

    A centre model may release many more centres than the Morse step needs (DPM finds 60-80
    leaves on uci_shuttle and uci_magic, most holding a few hundred records), and the TEV search
    costs about ``K0^3`` field evaluations. While more than ``max_components`` centres remain,
    the pair whose merge least increases the size-weighted scatter,
    ``n_a n_b / (n_a + n_b) |c_a - c_b|^2``, is replaced by its size-weighted mean. Sizes are the
    released noisy sizes clipped at 1 (equal if none are released). Returns the pooled centres
    and, for every input centre, the index of its pooled centre.
    """
    c = np.atleast_2d(np.asarray(centres, dtype=float)).copy()
    k = c.shape[0]
    owner = np.arange(k)
    if k <= max_components:
        return c, owner
    n = np.ones(k) if sizes is None else np.maximum(np.asarray(sizes, dtype=float), 1.0).copy()
    alive = np.ones(k, dtype=bool)
    d2 = ((c[:, None, :] - c[None, :, :]) ** 2).sum(axis=2)
    for _ in range(k - max(int(max_components), 1)):
        idx = np.flatnonzero(alive)
        nn = n[idx]
        cost = nn[:, None] * nn[None, :] / (nn[:, None] + nn[None, :]) * d2[np.ix_(idx, idx)]
        np.fill_diagonal(cost, np.inf)
        i, j = np.unravel_index(np.argmin(cost), cost.shape)
        a, b = int(idx[min(i, j)]), int(idx[max(i, j)])
        c[a] = (n[a] * c[a] + n[b] * c[b]) / (n[a] + n[b])
        n[a] += n[b]
        alive[b] = False
        owner[owner == b] = a
        d2[a] = d2[:, a] = ((c - c[a]) ** 2).sum(axis=1)
    keep = np.flatnonzero(alive)
    remap = np.full(k, -1, dtype=np.int64)
    remap[keep] = np.arange(keep.size)
    return c[keep], remap[owner]


def _is_fitted(est) -> bool:
    return hasattr(est, "means_") or hasattr(est, "cluster_centers_")


def _is_mixture(est) -> bool:
    if _is_fitted(est):
        return all(hasattr(est, a) for a in ("means_", "covariances_", "weights_"))
    return isinstance(est, DPGaussianMixture)


def _refund_if_unspent(plan) -> None:
    """Give the accountant back a pipeline's reservation when the fit stopped before any
    release (the base refused its input): nothing was published, so nothing was spent."""
    if any(i.spent_epsilon or i.spent_delta or i.spent_rho for i in plan.items.values()):
        return
    accountant, handle = plan.reservation
    accountant.settle(handle, Budget(0.0, 0.0))


def _releases_sizes(est) -> bool:
    """True when the base releases noisy cluster sizes the delta rule can use (privclust's
    centre models do; a fitted model of another kind must show ``cluster_sizes_``)."""
    if _is_fitted(est):
        return getattr(est, "cluster_sizes_", None) is not None
    return bool(getattr(est, "releases_cluster_sizes", False))


def _base_bounds(est, d):
    b = getattr(est, "bounds_", None)
    if b is None:
        b = getattr(est, "bounds", None)
    if b is None:
        return None
    return check_bounds(b, d)
