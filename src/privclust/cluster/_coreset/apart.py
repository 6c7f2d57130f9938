"""Clusters standing apart from the chosen centres (post-processing of released values).

The choice of k scores the records' simplified silhouette, a mean over records: a cluster of a
few hundred records far from every other one moves it little, and a centre of its own brings
the second-nearest centre of a big neighbour's records nearer, so the score prefers to leave
it out (gen_unequal10_5d, clusters of 20,000 down to 150 records: the silhouette at the true
centres is lower than at 6 of them). Its records then pay their whole distance to a far centre
in the k-means cost. :func:`apart_centres` gives such a cluster a centre of its own, from the
refined coreset points alone: released positions, released noisy sizes and public noise
variances. No record is read, so it spends nothing.

A refined point **stands apart** when its squared distance from the nearest centre exceeds
both ``APART^2`` times that centre's spread (the weighted median, over the refined points
nearest the centre, of their squared distance from it plus their own expected squared noise:
a median, so a few far points do not widen the centre they are far from) and ``SPACING^2``
times the squared distance from that centre to the nearest other centre (a cluster covered by
few refined points looks tight, and its pieces must not count as apart). The far point of
largest weighted squared distance seeds a group: the far points nearer to it than half their
distance from their nearest centre (points of one small cluster lie close to one another and
far from every centre; two far clusters far from each other stay apart). The group gets a
centre, its points' weighted mean, when its noisy weight reaches the support floor
(``SUPPORT_SCALES`` noise scales of the refinement's count: an empty coreset point, released by
noise, passes with probability about ``e^-3 / 2``); then the far points are found again against
the centres so far. At most ``limit`` centres are added (the choice's cap on k).
"""

from __future__ import annotations

import numpy as np

from ..._geometry import nearest_centres

__all__ = ["APART", "SPACING", "apart_centres"]

#: A refined point stands apart at more than this many times its nearest centre's spread
#: (module docstring): inside a cluster of any shape the refined points lie within about two
#: spreads of its centre, and touching clusters' points about two spreads from the other's.
APART = 4.0
#: ... and at more than this share of the distance from that centre to the nearest other one
#: (a cluster the refined points cover with few points looks tight: its pieces are not apart).
SPACING = 1.0 / 3.0


def _spreads(d2, labels, w, k) -> np.ndarray:
    """Each centre's squared spread: the ``w``-weighted median of ``d2`` over the points
    whose nearest centre it is (0 for a centre without points)."""
    order = np.lexsort((d2, labels))
    lab, val, wt = labels[order], d2[order], w[order]
    cum = np.cumsum(wt)
    start = np.searchsorted(lab, np.arange(k), side="left")
    stop = np.searchsorted(lab, np.arange(k), side="right")
    before = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0.0)
    total = np.where(stop > start, cum[np.maximum(stop - 1, 0)] - before, 0.0)
    out = np.zeros(k)
    has = stop > start
    # the first point of each centre's run whose cumulative weight reaches half its total
    at = np.searchsorted(cum, before + 0.5 * total, side="left")
    at = np.clip(at, start, np.maximum(stop - 1, start))
    out[has] = val[at[has]]
    return out


def apart_centres(points, weights, extra2, centres, floor: float, limit: int,
                  apart: float = APART) -> np.ndarray:
    """``centres`` (k, d) and one more for every group of refined ``points`` (m, d) standing
    apart from them (module docstring), at most ``limit`` more. ``weights``: the points'
    noisy sizes; ``extra2``: each point's expected squared noise (public);
    ``floor``: the least noisy weight of a group given a centre. Post-processing of released
    values: returns the centres, the chosen ones first."""
    P = np.asarray(points, dtype=np.float64)
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    extra2 = np.asarray(extra2, dtype=np.float64)
    extra2 = np.where(np.isfinite(extra2), extra2, 0.0)
    C = np.asarray(centres, dtype=np.float64)
    keep = w > 0
    P, w, extra2 = P[keep], w[keep], extra2[keep]
    if P.shape[0] == 0 or C.shape[0] == 0 or limit <= 0:
        return C
    done = np.zeros(P.shape[0], dtype=bool)
    added = 0
    far = D2 = None
    while added < limit:
        if far is None:  # the centres changed: the far points again
            labels, D2 = nearest_centres(P, C, return_sq_distance=True)
            D2 = np.maximum(D2, 0.0)
            r2 = _spreads(D2 + extra2, labels, w, C.shape[0])
            gap2 = np.square(C[:, None, :] - C[None, :, :]).sum(axis=2)
            np.fill_diagonal(gap2, np.inf)
            reach2 = np.maximum(apart**2 * r2, SPACING**2 * gap2.min(axis=1))
            far = D2 > reach2[labels]
        seeds = far & ~done
        if not seeds.any():
            break
        s = int(np.argmax(np.where(seeds, w * D2, -1.0)))
        diff = P - P[s]
        group = far & (4.0 * np.einsum("ij,ij->i", diff, diff) < D2)
        group[s] = True
        done |= group
        mass = float(w[group].sum())
        if mass >= floor:
            centre = (w[group, None] * P[group]).sum(axis=0) / mass
            C = np.vstack([C, centre[None]])
            added += 1
            far = None
    return C
