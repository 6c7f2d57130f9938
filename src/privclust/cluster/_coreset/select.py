"""The choice of k: candidate centres from the private coreset (post-processing), one choice
among them by the exponential mechanism on the records' simplified silhouette.

For every k tried, weighted k-means (k-means++ seeding and Lloyd, scikit-learn) on the coreset's
points gives k centres: public, since they are computed from released values only. Each
candidate's score is the sum over the records of the **simplified silhouette** (Hruschka,
Campello, de Castro 2004; the same score as :mod:`privclust.model_selection._score`)

    s(x) = (b - a) / b,   a, b: distances of x to its nearest and second-nearest centre

(0 when ``b = 0``), in ``[0, 1]``. Given the candidates, adding or removing one record adds or
removes its own term and nothing else, so every score moves by at most 1, and all in the same
direction (the term is at least 0): the exponential mechanism with sensitivity 1 and monotone scores
(no factor 2; McSherry and Talwar 2007, Thm. 6) chooses one candidate with ``eps_select``, however
many there are, and releases only its index. Each term is a function of the record and the centres
alone (distances from a k-d tree, computed per record), rounded down to a multiple of ``2**-16`` and
added as integers, so the sums are exact and independent of the records' order.

The choice scores a **Poisson sample** of the records (:func:`poisson_sample`: each record in it
with a public probability, by one public uniform draw of its own, independent of the other
records): the score is a sum over the records of the sample, each term still in ``[0, 1]``, so
adding or removing a record still moves every score by at most 1, in the same direction (the
sampling would also amplify privacy; no amplification is claimed). The candidates are fitted by
:func:`candidate_centres`: one greedy k-means++ seeding per restart up to the largest k, whose
prefixes seed every smaller k, then Lloyd's iterations on the weighted points (NumPy), instead of
one scikit-learn ``KMeans`` per k (measured: 52 candidates on 338 points took 4.9 s on one
thread, 0.1 s now); the seedings read the points' squared distances from one table.

The candidates share most of their centres bit for bit (fitted on the same points, the same
groups give the same means), so :func:`silhouette_sums_near` computes what they share once: per
anchor, a record's squared distance to each distinct near centre, and its term for each distinct
set of near centres. Every candidate's sum is the one it would have alone, bit for bit; only
the work is shared (on gen_many80_2d at epsilon 0.25, 16,000 sampled records and 45
candidates: about 54 distinct centres and 26 distinct sets per anchor, against 135 and 45).

Why not a criterion on the coreset itself: its points are cells of the tree, coarser than the
clusters' own spread. Measured: without the cells' spread, the weighted silhouette, BIC and
Calinski-Harabasz on the coreset grew until k reached the number of points (Synth-10d); with
it, the silhouette chose 68 of 64 clusters on Synth-10d but 23, 25 and 36 on the MNIST
embedding's 10 classes, where the records' silhouette chooses 10.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.spatial import cKDTree
from sklearn.cluster import KMeans

from ..._parallel import on_cores, on_cores_per_thread

__all__ = ["SAMPLE_CAP", "SCORE_UNITS", "candidate_centres", "candidate_ks", "choice_odds_note",
           "fit_centres", "poisson_sample", "score_rate", "silhouette_sum", "silhouette_sums",
           "silhouette_sums_near", "ward_merge"]

#: Terms are rounded down to multiples of ``1 / SCORE_UNITS`` and added as integers.
SCORE_UNITS = 1 << 16
#: Every k up to this is a candidate; above it, k grows by :data:`K_RATIO` per candidate.
DENSE_UP_TO = 16
K_RATIO = 1.08
_ROWS = 1 << 16
#: :func:`score_rate` in at most ``NO_K_MAX_DIMS`` dimensions: at most about this many records
#: are scored (measured in ``CoresetKMeans``' documentation).
SAMPLE_CAP = 16000.0
#: :func:`silhouette_sums_near`: a record's two nearest centres are sought among the centres
#: nearest its anchor, this many of them.
NEAR_CENTRES = 3
#: :func:`silhouette_sums_near`: the records are scored in at least this many chunks (shared
#: among the cores; each chunk's sums are integers, added in any order).
SCORE_CHUNKS = 8
#: :func:`candidate_centres`: Lloyd iterations at most per candidate and restart.
CANDIDATE_MAX_ITER = 100
#: :func:`_seedings`: the points' squared distances to one another are tabled for at most this
#: many points.
SEED_TABLE = 2048


def candidate_ks(k_max: int) -> list[int]:
    """The candidate values of k: every k from 2 to ``min(k_max, DENSE_UP_TO)``, then
    ``K_RATIO`` apart up to ``k_max``."""
    ks = list(range(2, min(k_max, DENSE_UP_TO) + 1))
    k = float(DENSE_UP_TO)
    while k * K_RATIO <= k_max:
        k *= K_RATIO
        if int(round(k)) > ks[-1]:
            ks.append(int(round(k)))
    if k_max > DENSE_UP_TO and ks[-1] != k_max:
        ks.append(int(k_max))
    return ks


def fit_centres(points, weights, k: int, seed: int, n_init: int) -> np.ndarray:
    """k centres by weighted k-means on the coreset; with at most k points, the points
    themselves (then fewer than k centres)."""
    if points.shape[0] <= k:
        return points.copy()
    km = KMeans(n_clusters=k, n_init=n_init, random_state=seed)
    return km.fit(points, sample_weight=weights).cluster_centers_


def _nearest(P, C) -> np.ndarray:
    """The nearest centre of ``C`` to every point of ``P`` (post-processing: both public)."""
    return np.argmin(np.einsum("ij,ij->i", C, C)[None, :] - 2.0 * (P @ C.T), axis=1)


def _draw(cum, u) -> np.ndarray:
    """Indices drawn in proportion to the increments of each row's cumulative sums ``cum``
    (rows, m) at the uniforms ``u`` (rows, draws): for each draw, how many of its row's sums
    lie below ``u`` times the row's total (a row's sums do not decrease: the increments are at
    least 0), which is where ``np.searchsorted`` would put it."""
    m = cum.shape[1]
    idx = np.count_nonzero(cum[:, None, :] < (u * cum[:, -1:])[:, :, None], axis=2)
    return np.minimum(idx, m - 1)


def _pair_sq(P, Q) -> np.ndarray:
    """The squared distances from every row of ``P`` to every row of ``Q``, ``(len(P),
    len(Q))``, each summed over the coordinates as NumPy sums along a last axis; up to two
    coordinates, one coordinate at a time on whole arrays (the same sums: two terms add one
    way)."""
    if P.shape[1] > 2:
        return ((Q[None, :, :] - P[:, None, :]) ** 2).sum(axis=2)
    out = np.zeros((P.shape[0], Q.shape[0]))
    for j in range(P.shape[1]):
        diff = Q[None, :, j] - P[:, j, None]
        out += diff * diff
    return out


def _sq_distances(P, rows) -> np.ndarray:
    """The squared distances from ``P[rows]`` to every point of ``P``, ``(len(rows), m)``."""
    return _pair_sq(P[rows], P)


def _seedings(P, w, k, n_init, rng) -> tuple[np.ndarray, np.ndarray]:
    """``n_init`` greedy k-means++ seedings (Arthur and Vassilvitskii 2007; ``2 + ln k`` trials
    per centre, the best kept, as scikit-learn does) of ``k`` of the weighted points, side by
    side. Each prefix is the seeding of its own length, so one run seeds every candidate k.
    The points' squared distances to one another are computed once when the seedings would
    compute more of them (up to ``SEED_TABLE`` points), then read for each trial.
    Returns ``(indices into P (n_init, k), weighted cost of every prefix (n_init, k))``."""
    m = P.shape[0]
    rows = np.arange(n_init)
    trials = 2 + int(np.log(k))
    table = _sq_distances(P, np.arange(m)) if m <= min(SEED_TABLE, k * n_init * trials) \
        else None
    chosen = np.zeros((n_init, k), dtype=np.int64)
    costs = np.zeros((n_init, k))
    chosen[:, 0] = _draw(np.tile(np.cumsum(w), (n_init, 1)), rng.random((n_init, 1)))[:, 0]
    best = _sq_distances(P, chosen[:, 0]) if table is None else table[chosen[:, 0]]
    costs[:, 0] = (best * w).sum(axis=1)
    for j in range(1, k):
        pot = best * w
        cand = _draw(np.cumsum(pot, axis=1), rng.random((n_init, trials)))
        d2 = _sq_distances(P, cand.ravel()).reshape(n_init, trials, m) if table is None \
            else table[cand]
        new = np.minimum(best[:, None, :], d2)
        cost = (new * w).sum(axis=2)
        i = np.argmin(cost, axis=1)
        chosen[:, j] = cand[rows, i]
        costs[:, j] = cost[rows, i]
        best = new[rows, i]
    return chosen, costs


def _lloyd(P, w, C) -> np.ndarray:
    """Weighted Lloyd iterations from centres ``C`` until the assignment stops changing (at
    most ``CANDIDATE_MAX_ITER``); a centre that loses every point stays where it is."""
    k = C.shape[0]
    wP = w[:, None] * P  # each point's weighted coordinates, summed per centre in points' order
    labels = None
    for _ in range(CANDIDATE_MAX_ITER):
        new = _nearest(P, C)
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        mass = np.bincount(labels, weights=w, minlength=k)
        sums = np.stack([np.bincount(labels, weights=col, minlength=k) for col in wP.T], axis=1)
        C = np.where((mass > 0)[:, None], sums / np.maximum(mass, 1e-300)[:, None], C)
    return C


def candidate_centres(points, weights, ks, seed: int, n_init: int) -> list[np.ndarray]:
    """One set of centres per k of ``ks`` by weighted k-means on the coreset (post-processing of
    released points and weights; ``seed`` public): ``n_init`` greedy k-means++ seedings to the
    largest k; each k starts Lloyd's iterations from the prefix of least weighted cost among
    them. With at most k points, the points themselves (then fewer than k centres). One seeding
    serves every k, so the cost grows with the largest k, not with the sum of the ks."""
    P = np.asarray(points, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    m = P.shape[0]
    rng = np.random.default_rng(seed)
    top = min(max(ks), m)
    if m and top >= 1:
        order, costs = _seedings(P, w, top, n_init, rng)
    out = []
    for k in ks:
        if m <= k:
            out.append(P.copy())
            continue
        best = order[int(np.argmin(costs[:, k - 1]))]
        out.append(_lloyd(P, w, P[best[:k]]))
    return out


def score_rate(n_hat, eps_select, score_sample, cap=float("inf")) -> float:
    """The public rate of the choice's Poisson sample: about ``score_sample / eps_select``
    records (the exponential mechanism then prefers a candidate whose mean silhouette is higher
    by 0.01 with odds ``e^(0.01 * score_sample)``), at most about ``cap`` of them (then the odds
    are ``e^(0.01 * eps_select * cap)``), every record when that is all of them. Public values
    only: the released record count, the choice's epsilon and constants."""
    n = max(float(n_hat), 1.0)
    return min(1.0, score_sample / (eps_select * n), cap / n)


#: :func:`choice_odds_note`: the report says the choice had little to go on when a candidate
#: whose records' mean silhouette is higher by ``ODDS_GAP`` is preferred with odds below
#: ``ODDS_FLOOR`` (on sipu_a2 at epsilon 0.25, 5,250 records: odds 5.9; on Synth-10d, 400
#: records' worth of the choice's epsilon however large the data: odds 4.9e8).
ODDS_GAP = 0.05
ODDS_FLOOR = 20.0


def choice_odds_note(n_hat, rate, eps_select, candidates: int) -> str | None:
    """The report's line when the choice of k is close to a draw (public values only: the
    released record count, the sample's public rate, the choice's epsilon): the exponential
    mechanism prefers a candidate whose records' mean silhouette is higher by ``ODDS_GAP``
    with odds ``exp(eps_select * ODDS_GAP * rate * n_hat)``. None when those odds reach
    ``ODDS_FLOOR``."""
    scored = max(float(rate) * float(n_hat), 0.0)
    odds = float(np.exp(min(eps_select * ODDS_GAP * scored, 700.0)))
    if odds >= ODDS_FLOOR:
        return None
    return (f"the choice of k had little to go on: about {scored:,.0f} records scored at epsilon "
            f"{eps_select:.3g} prefer a candidate whose mean silhouette is higher by "
            f"{ODDS_GAP:g} with odds of only {odds:.3g} to 1, close to a draw among its "
            f"{candidates} candidates; give n_clusters if it is known, or more epsilon")


def poisson_sample(n: int, rate: float, generator) -> np.ndarray:
    """Which of ``n`` records a Poisson sample of ``rate`` holds: one public uniform draw per
    record, in the records' order (a record's inclusion is independent of every other record;
    a record added at the end brings its own draw and leaves the others' unchanged). Public
    randomness, not noise: a score summed over the sample still moves by at most one term when a
    record is added or removed. ``rate >= 1``: every record, no draw."""
    if rate >= 1.0:
        return np.ones(n, dtype=bool)
    return generator.random(n) < rate


def silhouette_sum(Y, centres) -> float:
    """``sum_x s(x)`` over the rows of ``Y`` against ``centres`` (module docstring), each term
    rounded down to a multiple of ``1 / SCORE_UNITS`` and added exactly: one record changes it
    by at most 1. An exact aggregate of the data, passed to the exponential mechanism."""
    C = np.asarray(centres, dtype=np.float64)
    if C.shape[0] < 2 or Y.shape[0] == 0:
        return 0.0
    tree = cKDTree(C)
    total = 0
    for start in range(0, Y.shape[0], _ROWS):
        dist, _ = tree.query(np.asarray(Y[start:start + _ROWS], dtype=np.float64), k=2)
        a, b = dist[:, 0], dist[:, 1]
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.where(b > 0, (b - a) / b, 0.0)
        s = np.clip(s, 0.0, 1.0)
        total += int(np.floor(s * SCORE_UNITS).astype(np.int64).sum())
    return total / SCORE_UNITS


def _near_centres(d2, near: int) -> np.ndarray:
    """The ``near`` centres nearest each anchor, ``(m, near)``, from the anchors' squared
    distances to the centres ``d2`` (m, k) (public values only)."""
    q = min(near, d2.shape[1])
    part = np.argpartition(d2, q - 1, axis=1)[:, :q] if q < d2.shape[1] else \
        np.tile(np.arange(q), (d2.shape[0], 1))
    return part


def _anchor_distances(anchors, centres) -> np.ndarray:
    """The squared distances from every anchor to every centre, ``(m, k)``, each distinct
    centre's computed once (candidates fitted on the same points share many centres)."""
    distinct, ident = np.unique(centres, axis=0, return_inverse=True)
    d2 = _pair_sq(anchors, distinct)
    return d2[:, ident.reshape(-1)]


def _two_least(d2):
    """The least and second-least values along the last axis of ``d2`` (exact: ``NEAR_CENTRES``
    = 3 by a sorting network of minima and maxima, otherwise a partition)."""
    if d2.shape[-1] == 3:
        return _two_least_of([d2[..., 0], d2[..., 1], d2[..., 2]])
    part = np.partition(d2, 1, axis=-1)
    return part[..., 0], part[..., 1]


def _two_least_of(planes):
    """:func:`_two_least` of the arrays ``planes`` taken elementwise (three: the sorting
    network, on each array whole)."""
    if len(planes) == 3:
        d0, d1, d2 = planes
        lo, hi = np.minimum(d0, d1), np.maximum(d0, d1)
        return np.minimum(lo, d2), np.minimum(hi, np.maximum(lo, d2))
    return _two_least(np.stack(planes, axis=-1))


def _distinct_per_row(g, fill: int):
    """The distinct values of each row of ``g`` (m, n): ``(values (m, u), padded with
    ``fill``; where each entry of ``g`` lies among its row's values (m, n); how many values
    each row has (m,))``."""
    order = np.argsort(g, axis=1, kind="stable")
    ranked = np.take_along_axis(g, order, axis=1)
    new = np.ones(ranked.shape, dtype=bool)
    new[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
    rank = np.cumsum(new, axis=1) - 1
    values = np.full((g.shape[0], int(rank[:, -1].max()) + 1), fill, dtype=np.int64)
    values[np.nonzero(new)[0], rank[new]] = ranked[new]
    where = np.empty_like(rank)
    np.put_along_axis(where, order, rank, axis=1)
    return values, where, rank[:, -1] + 1


class _AnchorBlocks(NamedTuple):
    """Per anchor (public values only): its candidates' distinct near ``(centre, offset)``
    pairs, ``centres`` (m, u, d) and ``off`` (m, u), ``pairs`` of them (m,); the distinct
    sets of near pairs among the candidates, ``triples`` (m, t, q) (positions among the
    pairs, in increasing order), ``sets`` of them (m,); and each candidate's set ``of`` (m, L).
    Candidates fitted on the same points share many centres bit for bit: a record's squared
    distance to a shared pair is computed once, and its term for a shared set once."""

    centres: np.ndarray
    off: np.ndarray
    pairs: np.ndarray
    triples: np.ndarray
    sets: np.ndarray
    of: np.ndarray


def _anchor_blocks(stack, off, near) -> _AnchorBlocks:
    """:class:`_AnchorBlocks` of the near centres ``near`` (m, L, q): rows of ``stack`` and
    ``off``, whose last row is the sentinel at infinity (also the padding)."""
    m, n_cands, q = near.shape
    keys = np.concatenate([stack, off[:, None]], axis=1)
    _, first, ident = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    ident = ident.reshape(-1)
    slots, which, pairs = _distinct_per_row(ident[near.reshape(m, -1)], ident[-1])
    rows = first[slots]
    u = slots.shape[1]
    tri = np.sort(which.reshape(m, n_cands, q), axis=2)
    code = (tri * u ** np.arange(q - 1, -1, -1)).sum(axis=2)
    sets, of, n_sets = _distinct_per_row(code, int(code[0, 0]))
    triples = sets[:, :, None] // u ** np.arange(q - 1, -1, -1) % u
    return _AnchorBlocks(stack[rows], off[rows], pairs, triples, n_sets, of)


def _sq_distances_to(x, centres) -> np.ndarray:
    """``(rows, u)`` squared distances from the rows of ``x`` to ``centres``, each summed over
    the coordinates as ``np.einsum`` sums a row's products; up to two coordinates, one
    coordinate at a time on whole arrays (the same sums: two terms add one way)."""
    if x.shape[1] <= 2:
        out = None
        for j in range(x.shape[1]):
            diff = centres[None, :, j] - x[:, j, None]
            out = diff * diff if out is None else out + diff * diff
        return out
    diff = centres[None, :, :] - x[:, None, :]
    return np.einsum("rud,rud->ru", diff, diff)


def _anchor_terms(x, blocks, j, with_off: bool) -> np.ndarray:
    """Every candidate's sum of the terms of the records ``x`` (rows) of anchor ``j``, in units
    of ``1 / SCORE_UNITS`` (:func:`silhouette_sums_near`; ``blocks``: :class:`_AnchorBlocks`)."""
    u, t = blocks.pairs[j], blocks.sets[j]
    d2 = _sq_distances_to(x, blocks.centres[j, :u])
    if with_off:
        d2 = np.maximum(d2 - blocks.off[j, :u], 0.0)
    tri = blocks.triples[j, :t]
    a, b = _two_least_of([d2[:, tri[:, i]] for i in range(tri.shape[1])])
    a, b = np.sqrt(a), np.sqrt(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.clip(np.where(b > 0, (b - a) / b, 0.0), 0.0, 1.0)
    return np.floor(s * SCORE_UNITS).astype(np.int64).sum(axis=0)[blocks.of[j]]


def silhouette_sums_near(Y, candidates, anchors, noise2=None) -> np.ndarray:
    """Every candidate's ``sum_x s(x)`` over the rows of ``Y``, with ``a`` and ``b`` the two
    least distances from ``x`` to the ``NEAR_CENTRES`` centres of the candidate nearest the
    public anchor nearest ``x`` (``anchors``: the points the candidates were fitted on): the
    simplified silhouette wherever the record's two nearest centres are among them, as they
    are for a record near its anchor. A row's anchor is found once for all the candidates (a
    k-d tree over the anchors), and the candidates are scored together, the records of one
    anchor at a time (:class:`_AnchorBlocks`: what the candidates share is computed once).
    ``noise2``: per candidate, the expected squared noise of each centre (public: the noise
    scales of the releases it was made of), taken off the squared distances to that centre
    (at least 0), so that ``a`` and ``b`` estimate the distances to the clusters' means rather
    than to their noisy estimates (a candidate of many noisy centres is not marked down for
    their noise). Each term is a function of the record and public values alone, in
    ``[0, 1]``, rounded down to a multiple of ``1 / SCORE_UNITS`` and added exactly: one
    record changes each sum by at most 1, whatever the other records and the rows' chunks."""
    A = np.asarray(anchors, dtype=np.float64)
    live = [i for i, c in enumerate(candidates) if np.asarray(c).shape[0] >= 2]
    scores = np.zeros(len(candidates))
    if not live or Y.shape[0] == 0 or A.shape[0] == 0:
        return scores
    d = A.shape[1]
    parts = [np.asarray(candidates[i], dtype=np.float64) for i in live]
    d2_at = _anchor_distances(A, np.vstack(parts))
    offs, start = [], 0
    near = np.empty((A.shape[0], len(live), NEAR_CENTRES), np.int64)
    for col, (i, C) in enumerate(zip(live, parts, strict=True)):
        idx = _near_centres(d2_at[:, start:start + C.shape[0]], NEAR_CENTRES)
        near[:, col, :idx.shape[1]] = idx + start
        near[:, col, idx.shape[1]:] = -1  # the sentinel: a centre at infinity
        offs.append(np.zeros(C.shape[0]) if noise2 is None else np.asarray(noise2[i], float))
        start += C.shape[0]
    blocks = _anchor_blocks(np.vstack(parts + [np.full((1, d), np.inf)]),
                            np.concatenate(offs + [np.zeros(1)]), near)
    tree = cKDTree(A)
    rows = max(256, min((1 << 20) // (blocks.centres.shape[1] * d),
                        -(-Y.shape[0] // SCORE_CHUNKS)))
    anchor = np.empty(Y.shape[0], dtype=np.int64)

    def nearest(lo):
        anchor[lo:lo + rows] = tree.query(np.asarray(Y[lo:lo + rows], dtype=np.float64))[1]

    on_cores(nearest, range(0, Y.shape[0], rows))
    order = np.argsort(anchor, kind="stable")  # the records of each anchor together

    def chunk(acc, lo):
        idx = order[lo:lo + rows]
        x, at = np.asarray(Y[idx], dtype=np.float64), anchor[idx]
        cuts = np.flatnonzero(at[1:] != at[:-1]) + 1
        for s0, s1 in zip(np.r_[0, cuts], np.r_[cuts, idx.size], strict=True):
            acc += _anchor_terms(x[s0:s1], blocks, at[s0], noise2 is not None)

    totals = sum(on_cores_per_thread(lambda: np.zeros(len(live), dtype=np.int64), chunk,
                                     range(0, Y.shape[0], rows)), np.zeros(len(live), np.int64))
    scores[live] = totals / SCORE_UNITS
    return scores


def silhouette_sums(Y, candidates, anchors=None, noise2=None) -> np.ndarray:
    """:func:`silhouette_sum` of ``Y`` against every candidate's centres, the candidates shared
    among the cores (each sum is exact: the same whichever thread computes it); with
    ``anchors``, :func:`silhouette_sums_near` (and its ``noise2``)."""
    if anchors is not None:
        return silhouette_sums_near(Y, candidates, anchors, noise2)
    scores = np.zeros(len(candidates))

    def one(i):
        scores[i] = silhouette_sum(Y, candidates[i])

    on_cores(one, range(len(candidates)))
    return scores


def ward_merge(centres, sizes, k: int, var=None):
    """Merge the closest centres until ``k`` are left (post-processing of released centres
    and noisy sizes): each time the pair of least Ward cost ``w_i w_j / (w_i + w_j)
    ||c_i - c_j||^2`` (weights: the noisy sizes, at least 1) becomes its weighted mean with the
    summed size. ``var``: the centres' noise variances, combined as those of the weighted
    mean (``sum w_i^2 var_i / (sum w_i)^2``). Returns ``(centres (k, d), sizes (k,), var)``."""
    C = np.asarray(centres, dtype=float).copy()
    n = np.asarray(sizes).astype(np.int64).copy()
    w = np.maximum(n, 1).astype(float)
    v = np.zeros(n.size) if var is None else np.asarray(var, dtype=float).copy()
    while C.shape[0] > k:
        d2 = ((C[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
        cost = w[:, None] * w[None, :] / (w[:, None] + w[None, :]) * d2
        np.fill_diagonal(cost, np.inf)
        i, j = np.unravel_index(int(np.argmin(cost)), cost.shape)
        C[i] = (w[i] * C[i] + w[j] * C[j]) / (w[i] + w[j])
        v[i] = (w[i] ** 2 * v[i] + w[j] ** 2 * v[j]) / (w[i] + w[j]) ** 2
        w[i] += w[j]
        n[i] += n[j]
        C, w, n, v = (np.delete(C, j, axis=0), np.delete(w, j), np.delete(n, j),
                      np.delete(v, j))
    return C, n, v
