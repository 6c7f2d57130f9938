"""The private quantiles of :class:`~privclust.cluster.coreset.CoresetKMeans` (the data radius of
projected fits, each Lloyd step's ball radius): distances of the records, one per record, so the
rank of any value moves by at most 1 between neighbours.

Up to ``GRID_QUANTILE_RECORDS`` released records the distances are sorted and the exponential
mechanism runs over the gaps between them (:meth:`~privclust.privacy.Mechanisms.quantile`, log
scale). Above it (a decision from the released record count: public) the distances are counted
into the cells of a public log-spaced grid of ``GRID_POINTS`` candidates between the range's
ends, per chunk where the records live, and the exponential mechanism draws one of the
candidates from those exact counts (:meth:`~privclust.privacy.Mechanisms.grid_quantile`): no
value per record is gathered or sorted on the client, and the release has the grid's resolution
(a ratio of ``(hi / lo) ** (1 / (GRID_POINTS - 1))`` between neighbouring candidates: 0.34% for
the range ``[1e-6 top, top]`` used here). Both forms are epsilon-DP with sensitivity 1.
"""

from __future__ import annotations

from ...privacy.mechanisms import quantile_grid
from .data import corrected_counts, corrected_labels, distance_counts, distances_from

__all__ = ["GRID_POINTS", "GRID_QUANTILE_RECORDS", "corrected_quantile", "distance_quantile",
           "uses_grid"]

#: Above this many released records the quantiles are drawn on a public grid of candidates.
GRID_QUANTILE_RECORDS = 1 << 24
#: Candidates of the grid (log-spaced between the range's ends).
GRID_POINTS = 1 << 12

_NOTE = "one distance per record: the rank of any value moves by at most 1"


def uses_grid(n_hat) -> bool:
    """Whether a fit of ``n_hat`` released records draws its quantiles on the public grid."""
    return int(n_hat) > GRID_QUANTILE_RECORDS


def distance_quantile(engine, mech, n_hat, point, quantile, lo, hi, epsilon, *, target, item):
    """A private ``quantile`` of the records' distances from the public ``point``, in
    ``[lo, hi]``."""
    if uses_grid(n_hat):
        grid = quantile_grid(lo, hi, GRID_POINTS, log_scale=True)
        return mech.grid_quantile(distance_counts(engine, point, grid), grid, quantile, epsilon,
                                  target=target, note=_NOTE, item=item)
    return mech.quantile(distances_from(engine, point), quantile, lo, hi, epsilon, 1.0,
                         target=target, note=_NOTE, log_scale=True, overwrite_input=True,
                         item=item)


def corrected_quantile(engine, mech, n_hat, centres, offset, quantile, lo, hi, epsilon, *,
                       target, item):
    """Every record's label (:func:`~privclust.cluster._coreset.data.corrected_labels`) and a
    private ``quantile`` of the corrected distances, in ``[lo, hi]``: ``(labels, quantile)``."""
    if uses_grid(n_hat):
        grid = quantile_grid(lo, hi, GRID_POINTS, log_scale=True)
        labels, counts = corrected_counts(engine, centres, offset, grid)
        return labels, mech.grid_quantile(counts, grid, quantile, epsilon, target=target,
                                          note=_NOTE, item=item)
    labels, dist = corrected_labels(engine, centres, offset)
    return labels, mech.quantile(dist, quantile, lo, hi, epsilon, 1.0, target=target,
                                 note=_NOTE, log_scale=True, overwrite_input=True, item=item)
