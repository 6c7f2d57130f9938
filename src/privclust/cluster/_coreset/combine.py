"""How :class:`~privclust.cluster.coreset.CoresetKMeans` combines released estimates into
centres (post-processing of released values and public noise scales only): which clusters the
noisy sizes support, averages by inverse noise variance, centres as weighted means of refined
coreset points, and starting centres for a given k beyond the coreset.
"""

from __future__ import annotations

import numpy as np

from .._base import nearest_centre
from .._shifted_tree import significance_floor
from .refine import COUNT_SHARE

__all__ = ["NOISE_OFF", "SUPPORT_SCALES", "candidate_noise2", "extra_centres",
           "inverse_variance", "lost_clusters", "merged_centres", "pass_on_rho",
           "smallest_cluster_note", "support_floor", "supported", "tree_floors"]

#: A refined coreset point (and, for wide data, a recovered cluster) is kept when its noisy
#: size reaches this many noise scales of its count (an empty one passes with probability about
#: ``e^-3 / 2``): unsupported points drew centres of their own, and an empty cluster's fallback
#: centre (the middle of the bounds) can sit among the records when the noise is large.
SUPPORT_SCALES = 3.0
#: Without k: the choice takes this share of each candidate centre's expected squared noise
#: (:func:`candidate_noise2`) off the records' squared distances to it (see the documentation).
NOISE_OFF = 1.0


def extra_centres(P, w, count, box, gen) -> np.ndarray:
    """Centres for a given k the coreset's ``m < k`` points cannot supply (post-processing,
    public randomness): copies of the heaviest points, each moved by a small public random
    offset (1e-3 of the box's width per feature), so the Lloyd steps split the heaviest
    clusters between the copies; without points, uniform draws in the box."""
    d = box.shape[0]
    if count <= 0:
        return np.zeros((0, d))
    if P.shape[0] == 0:
        return gen.uniform(box[:, 0], box[:, 1], size=(count, d))
    order = np.argsort(-np.asarray(w, dtype=float), kind="stable")
    base = P[order[np.arange(count) % order.size]]
    offset = gen.uniform(-1.0, 1.0, size=(count, d)) * 1e-3 * (box[:, 1] - box[:, 0])
    return np.clip(base + offset, box[:, 0], box[:, 1])


def support_floor(eps_step) -> float:
    """``SUPPORT_SCALES`` noise scales of a step's noisy count (public: the step's epsilon)."""
    return SUPPORT_SCALES / (COUNT_SHARE * eps_step)


def supported(sizes, eps_step, at_least: int = 1, scales: float = SUPPORT_SCALES) -> np.ndarray:
    """Which clusters a step's noisy sizes support (post-processing): a noisy size of at
    least ``scales`` noise scales of the step's count; when fewer, the ``at_least``
    largest (ties: the first)."""
    sizes = np.asarray(sizes)
    keep = sizes >= scales / (COUNT_SHARE * eps_step)
    if keep.sum() < min(at_least, sizes.size):
        keep = np.zeros(sizes.size, dtype=bool)
        keep[np.argsort(-sizes, kind="stable")[:at_least]] = True
    return keep


def lost_clusters(sizes, previous, eps_step) -> np.ndarray:
    """Which clusters a Lloyd step's ball lost (post-processing of released sizes): a noisy
    size that, raised by ``SUPPORT_SCALES`` noise scales of its count, is still below half the
    cluster's previous noisy size. The ball then missed most of the cluster (the centre's
    noise was in the upper tail of its estimate), and its mean estimates a fringe of it."""
    return np.asarray(sizes) + support_floor(eps_step) < 0.5 * np.asarray(previous)


def inverse_variance(var, new_var):
    """Weights of new estimates averaged with old ones by inverse noise variance, and the
    averages' variances (inf: no estimate; the new one replaces an unknown old one, an
    unknown new one keeps the old)."""
    old_inf, new_inf = np.isinf(var), np.isinf(new_var)
    both = ~(old_inf | new_inf)
    v, nv = np.where(both, var, 1.0), np.where(both, new_var, 1.0)
    w = np.where(new_inf, 0.0, np.where(old_inf, 1.0, v / np.maximum(v + nv, 1e-300)))
    out = np.where(old_inf, new_var, np.where(new_inf, var, v * nv / np.maximum(v + nv, 1e-300)))
    return w, out


def merged_centres(points, sizes, var, centres):
    """Each centre taken as the weighted mean of the refined points nearest it: its noisy
    size (the points' noisy sizes, at least 0, summed and rounded) and its noise variance per
    coordinate (``sum w_i^2 var_i / (sum w_i)^2``; inf where no point supports it), from one
    assignment. Post-processing of public scales and released sizes."""
    k = centres.shape[0]
    if points.shape[0] == 0:
        return np.zeros(k, dtype=np.int64), np.full(k, np.inf)
    lab = nearest_centre(points, centres)
    w = np.maximum(np.asarray(sizes, dtype=float), 0.0)
    v = np.where(np.isinf(var), 0.0, var)
    num = np.bincount(lab, weights=w**2 * v, minlength=k)
    den = np.bincount(lab, weights=w, minlength=k)
    return (np.rint(den).astype(np.int64),
            np.where(den > 0, num / np.maximum(den**2, 1e-300), np.inf))


def smallest_cluster_note(tree_floors, support) -> str:
    """The report's line on the smallest cluster standing apart that a fit can find (public
    values: the plan's budgets): its records must reach every tree level's significance floor
    (``tree_floors``) in the cell holding it, and its refined points (or its recovered
    cluster) the support floor of a centre of its own (``support``; without k a cluster the
    choice leaves out gets one when it stands apart,
    :func:`~privclust.cluster._coreset.apart.apart_centres`)."""
    tree = max(tree_floors, default=0.0)
    return (f"smallest findable cluster (from public values): about "
            f"{int(np.ceil(max(tree, support)))} records standing apart (tree levels' "
            f"significance floors up to {tree:.0f}, the support floor of a centre of its own "
            f"{support:.0f})")


def pass_on_rho(mech, steps, item):
    """The first refinement step released nothing: its rho goes to the next step (a partly
    spent zCDP block would leave epsilon that no line states); with no next step the block
    (the plan's ``item``) is left unspent whole. ``steps``: the steps' budgets (NamedTuples
    with a ``rho``)."""
    if steps[0].rho <= 0:
        return steps
    if len(steps) == 1:
        mech.plan.leave_unspent(item, "the tree released no cell")
        return steps
    return [steps[0], steps[1]._replace(rho=steps[1].rho + steps[0].rho), *steps[2:]]


def candidate_noise2(points, sizes, var, candidates) -> list[np.ndarray]:
    """Each candidate centre's expected squared noise (post-processing of public scales and
    released sizes): ``NOISE_OFF`` times ``d`` times the noise variance per coordinate of the
    weighted mean of the refined points nearest it (:func:`merged_centres`; 0 where no point
    supports it)."""
    d = np.asarray(points).shape[1]
    return [NOISE_OFF * d * np.where(np.isinf(v), 0.0, v) for v in (
        merged_centres(points, sizes, var, C)[1] for C in candidates)]


def tree_floors(released, budgets, p) -> list[float]:
    """The significance floors of the tree's levels as released (public: each release's
    epsilon; a level released again after a stop: the second release's, which spent the
    budget of the levels below); without any level released, those of the plan's ``budgets``
    (``p`` tree dimensions)."""
    if released:
        return [float(lv.floor) for lv in released]
    return [significance_floor(b, 1 << p) for b in budgets if b > 0]
