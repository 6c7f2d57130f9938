"""The choice of k on a thin coreset: candidates finer than the coreset, from a split step.

Without k, on data of at most ``NO_K_MAX_DIMS`` features (unprojected), the choice's candidates
are weighted k-means of the refined coreset points, so the largest k it can consider is their
number. On small data at small epsilon the tree's leaves number about the clusters or fewer
(sipu_a1 at epsilon 0.5: 13-14 refined points for 20 clusters of 150 records): many refined
points are the mean of two clusters, the candidates near the true k hold those merged pairs, and
their simplified silhouette is no better than two halves'.

When the released coreset is thin (fewer than :data:`THIN_POINTS` refined points kept: a
released value), the first Lloyd step's budget goes to a **split step** before the choice: every
refined point ``R_i`` is replaced by ``2 d`` seeds ``R_i +- SPLIT_OFFSET * r_i e_j`` (``r_i``
its public ball radius, ``e_j`` the axes), every record goes to its nearest seed and, within the
seed's ball of radius ``r_i``, gives a noisy size and a noisy sum: one release of the same kind
as every refinement step (the seeds' clusters are disjoint; sizes: sensitivity 1, sums of ``(x
- a) / r``: every term in the unit ball). A merged pair of clusters falls into different seeds'
cells along the axis that parts it, so the split points carry what the coreset lost. The
candidates are then those of the refined points (every k up to their number, as on a coreset
that is not thin) and, above that, weighted k-means of the split points with a positive noisy
size, for every k up to the number of split points whose noisy size reaches
:data:`SPLIT_SUPPORT_SCALES` noise scales of the split step's count (post-processing of
released values; the choice's exponential mechanism is unchanged, sensitivity 1, whatever the
number of candidates). Points below that floor still shape the candidates (a cluster's records
are spread over several seeds), but do not raise the largest k: the finest candidates, whose
centres are single noisy split points, score high on data without clusters (the centres' noise
taken off the distances), and a cap on k from the supported points keeps them out.
"""

from __future__ import annotations

import numpy as np

from .._base import nearest_centre
from .combine import candidate_noise2, inverse_variance, merged_centres
from .data import nearest_labels
from .refine import COUNT_SHARE, ball_step, centre_variance
from .select import candidate_centres, candidate_ks

__all__ = ["SPLIT_NOISE_OFF", "SPLIT_OFFSET", "SPLIT_SIZES", "SPLIT_SUMS",
           "SPLIT_SUPPORT_SCALES", "THIN_POINTS", "is_thin", "plan_split", "pooled_centres",
           "split_candidates", "split_kmax", "split_seeds", "split_step"]

#: A coreset of fewer refined points than this (kept for the choice) is thin.
THIN_POINTS = 32
#: The seeds' offset from their refined point, in its ball radius.
SPLIT_OFFSET = 0.25
#: The largest k among the split points' candidates: the number of split points whose noisy
#: size reaches this many noise scales of the split step's count. Measured on seeds 0-39
#: (``benchmarks/no_k_speed.py --table --seeds 40``): 1.25 against 1.5 took the sets of many
#: small clusters up by 0.05-0.07 ARI where the coreset is thin (sipu_a2 at epsilon 0.25: 0.330
#: -> 0.399) and the sets of few wide ones down (fcps_engytime at 0.5: 0.605 -> 0.483), whose
#: clusters the non-private criterion itself does not choose (k = 3 for 2 and for 6 classes).
SPLIT_SUPPORT_SCALES = 1.25
#: The split points' candidates take this share of their centres' expected squared noise off
#: the records' squared distances (the refined points' candidates: ``NOISE_OFF``).
SPLIT_NOISE_OFF = 0.5
#: The split step's line items (its Gaussian sums spend the zCDP block's share).
SPLIT_SIZES = "cluster sizes, split step"
SPLIT_SUMS = "cluster sums, split step"


def is_thin(m: int) -> bool:
    """Whether ``m`` refined points (a released value: those the noisy sizes support) make a
    thin coreset: at least 2 (there is a choice) and fewer than :data:`THIN_POINTS`."""
    return 2 <= m < THIN_POINTS


def split_seeds(points, radius) -> tuple[np.ndarray, np.ndarray]:
    """The split step's seeds (public: released points and public radii): ``2 d`` per point,
    ``points[i] +- SPLIT_OFFSET * radius[i]`` along each axis. Returns ``(seeds (2 d m, d),
    parent (2 d m,))``, ``parent``: each seed's point."""
    P = np.asarray(points, dtype=float)
    d = P.shape[1]
    axes = np.concatenate([np.eye(d), -np.eye(d)])
    r = np.asarray(radius, dtype=float)
    seeds = P[:, None, :] + SPLIT_OFFSET * r[:, None, None] * axes[None, :, :]
    return seeds.reshape(-1, d), np.repeat(np.arange(P.shape[0]), axes.shape[0])


def split_kmax(sizes, eps_count) -> int:
    """The largest k of the split points' candidates: how many noisy sizes reach
    ``SPLIT_SUPPORT_SCALES`` noise scales of the count (``eps_count``: the sizes' epsilon).
    Post-processing of released sizes."""
    return int(np.count_nonzero(np.asarray(sizes) >= SPLIT_SUPPORT_SCALES / eps_count))


def pooled_centres(centres, refined, split):
    """The chosen centres' noisy sizes and noise variances from the refined points nearest them
    (:func:`~privclust.cluster._coreset.combine.merged_centres`; ``split`` None), or, after a
    split step (``split``: what :func:`split_step` returned), the centres re-estimated from both
    releases (post-processing of released values and public noise scales): for each of
    ``refined`` and the split points (``(points, noisy sizes, noise variances)``), the weighted
    mean of the points nearest each centre and its variance, the two averaged by inverse
    variance; a centre no point of either supports stays. Returns ``(centres, noisy sizes (the
    split step's; the refined points' where no split point is nearest), noise variances per
    coordinate)``."""
    C = np.asarray(centres, dtype=float)
    if split is None:
        return (C, *merged_centres(*refined, C))
    k = C.shape[0]
    means, variances, sizes = [], [], []
    for P, n, var in (refined, split[:3]):
        P = np.asarray(P, dtype=float)
        size, v = merged_centres(P, n, var, C)
        if P.shape[0]:
            lab = nearest_centre(P, C)
            w = np.maximum(np.asarray(n, dtype=float), 0.0)
            den = np.bincount(lab, weights=w, minlength=k)
            num = np.stack([np.bincount(lab, weights=w * P[:, j], minlength=k)
                            for j in range(P.shape[1])], axis=1)
            mean = np.where((den > 0)[:, None], num / np.maximum(den, 1e-300)[:, None], C)
        else:
            mean = C
        means.append(mean)
        variances.append(np.where(np.isfinite(v), v, np.inf))
        sizes.append(size)
    weight, var = inverse_variance(variances[0], variances[1])
    out = np.where(np.isinf(variances[0])[:, None] & np.isinf(variances[1])[:, None], C,
                   np.where(np.isinf(variances[0])[:, None], means[1],
                            means[0] + weight[:, None] * (means[1] - means[0])))
    return out, np.where(sizes[1] > 0, sizes[1], sizes[0]), var


def plan_split(plan, pure: bool) -> None:
    """The split step's line items, planned at 0: its sizes, and with Laplace sums (``pure``)
    its sums (with Gaussian sums it spends the zCDP block's share of the first Lloyd step)."""
    plan.add(SPLIT_SIZES, "two-sided geometric", "pure", 0.0)
    if pure:
        plan.add(SPLIT_SUMS, "laplace", "pure", 0.0)


def split_step(engine, mech, space, R, sizes, radius, lloyd):
    """On a thin coreset (:func:`is_thin` of the refined points of positive noisy size, in a
    plan with the split's items), the first Lloyd step's budget (``lloyd``: its ``Step``: item
    names, epsilon, rho) moved to the split step (a privacy filter: decided from released
    sizes, the plan's total unchanged), and the split step: the records nearest each of
    :func:`split_seeds`, within their point's ``radius``, give noisy sizes and sums
    (:func:`~privclust.cluster._coreset.refine.ball_step`). Returns None when the coreset is
    not thin (nothing spent, nothing drawn), else ``(split points, noisy sizes, noise variances,
    the largest k of their candidates)``, the points of positive noisy size only."""
    plan = mech.plan
    m = int(np.count_nonzero(np.asarray(sizes) > 0))
    if not plan.has_item(SPLIT_SIZES) or not is_thin(m):
        return None
    sizes_name, sums_name, radius_name = lloyd.names
    why = f"thin coreset ({m} refined points): the split step runs before the choice of k"
    plan.spread_unspent([sizes_name, radius_name], [SPLIT_SIZES], why)
    pure = lloyd.rho <= 0
    if pure:  # Laplace sums: a line item per step
        plan.move_unspent([sums_name], SPLIT_SUMS, why)
    eps_count = plan.item(SPLIT_SIZES).epsilon
    eps_sums = plan.item(SPLIT_SUMS).epsilon if pure else 0.0
    seeds, parent = split_seeds(R, radius)
    seeds = np.clip(seeds, space.bounds[:, 0], space.bounds[:, 1])
    rad = np.asarray(radius, dtype=float)[parent]
    S, S_sizes = ball_step(engine, mech, nearest_labels(engine, seeds), seeds, rad,
                           eps_count + eps_sums, items=(SPLIT_SIZES, SPLIT_SUMS if pure
                                                        else sums_name),
                           label="split step", bounds=space.bounds, rho=lloyd.rho,
                           eps_count=eps_count)
    S_var = centre_variance(rad, S_sizes, eps_sums / (1.0 - COUNT_SHARE), lloyd.rho,
                            R.shape[1])
    keep = S_sizes > 0
    return S[keep], S_sizes[keep], S_var[keep], split_kmax(S_sizes, eps_count)


def split_candidates(split, cands, ks, noise2, P, cap, gen, n_init):
    """The choice's candidates (``cands`` for ``ks``, their centres' expected squared noise
    ``noise2``, fitted on the refined points ``P``) with, on a thin coreset (``split``: what
    :func:`split_step` returned; None: unchanged), weighted k-means of the split points for
    every k of :func:`~privclust.cluster._coreset.select.candidate_ks` above ``ks``' largest, up
    to the split's largest k and ``cap`` (public values; ``gen``: public randomness, drawn only
    then), their noise taken off at ``SPLIT_NOISE_OFF``. Returns ``(cands, ks, noise2, anchors,
    whether any was added)``; the anchors of the scores hold the split points too."""
    if split is None:
        return cands, ks, noise2, P, False
    S, s_sizes, s_var, s_top = split
    more_ks = [k for k in candidate_ks(min(s_top, S.shape[0], cap)) if k > ks[-1]]
    if not more_ks:
        return cands, ks, noise2, P, False
    more = candidate_centres(S, s_sizes, more_ks, int(gen.integers(0, 2**31 - 1)), n_init)
    more_noise = [SPLIT_NOISE_OFF * v for v in candidate_noise2(S, s_sizes, s_var, more)]
    return cands + more, ks + more_ks, noise2 + more_noise, np.vstack([P, S]), True
