"""Alg. 4 (MergeCluster) over the TEV graph, as a SciPy linkage matrix, and the cut into
``n_clusters`` clusters."""

from __future__ import annotations

import numpy as np
from scipy.cluster import hierarchy

from .equilibria import (
    _root,
)


# =========================================================================== Alg. 4
def merge_clusters(
    sev_of_leaf,
    sev_values,
    tev_edges,
    tev_values,
    line_barrier=None,
    weights=None,
    means=None,
    merge_order="barrier",
):
    """Alg. 4 (MergeCluster) for the whole hierarchy, as a SciPy linkage matrix over the leaves.

    Leaves are the centres. Centres whose flow reaches the same SEV lie in one basin cell and
    merge first, at height 0. The density has no barrier between them, so their order only
    matters when fewer basins than clusters are wanted; it is then Ward's criterion on the
    components (``weights`` and ``means`` given): the pair whose merge least increases the
    weighted within-cluster scatter, ``w_a w_b / (w_a + w_b) |m_a - m_b|^2``, merges first (the
    k-means objective of the model itself; a light or central component never ends up alone,
    which a barrier along a straight segment, the order without weights, does to a broad
    low-weight component). Then the TEV edges in increasing ``f`` (single linkage, Alg. 4
    l. 11): a merge joins the clusters holding the two SEVs. Heights are
    ``f(TEV) - min_j f(SEV_j)`` (Departures 23: ``f = -ln p`` may be negative, SciPy needs
    non-negative heights; a constant shift keeps the order). If the TEV graph is disconnected,
    the remaining clusters are joined by the largest ``f`` on the straight segment between their
    closest-in-barrier centres (an upper bound on the true merge level), heights kept monotone;
    the count of such merges is returned.

    Returns ``(Z, n_fallback)``; ``Z`` is (n_leaves - 1, 4) with finite, non-negative, monotone
    heights.
    """
    sev_of_leaf = np.asarray(sev_of_leaf, dtype=np.int64)
    n = sev_of_leaf.size
    n_sev = len(sev_values)
    f_ref = float(np.min(sev_values)) if n_sev else 0.0
    link = _Linkage(n)
    lb = np.asarray(line_barrier if line_barrier is not None else np.zeros((n, n)), float)
    # centres in one basin cell: height 0 (see the docstring for the order)
    if weights is not None and means is not None:
        cluster_of_leaf = _merge_basin_cells_ward(link, sev_of_leaf, weights, means)
    else:
        cluster_of_leaf = _merge_basin_cells_barrier(link, sev_of_leaf, lb)
    comp_cluster = {int(sev_of_leaf[i]): cluster_of_leaf[i] for i in range(n)}
    seq = _tev_merge_sequence(sev_values, tev_edges, tev_values, merge_order, f_ref)
    parent = list(range(n_sev))
    for a, b, h in seq:
        ra, rb = _root(parent, a), _root(parent, b)
        if ra == rb:
            continue
        parent[rb] = ra
        ca, cb = comp_cluster.pop(ra, None), comp_cluster.pop(rb, None)
        if ca is not None and cb is not None:
            comp_cluster[ra] = link.join(ca, cb, h)
        elif ca is not None or cb is not None:
            comp_cluster[ra] = ca if ca is not None else cb
    n_fallback = 0
    if len(comp_cluster) > 1:
        n_fallback = _join_disconnected(link, comp_cluster, parent, sev_of_leaf, lb, f_ref)
    return np.asarray(link.rows, dtype=float).reshape(-1, 4), n_fallback


class _Linkage:
    """A SciPy linkage matrix built merge by merge, with monotone non-negative heights."""

    def __init__(self, n_leaves: int):
        self.sizes = {i: 1 for i in range(n_leaves)}
        self.rows: list[list[float]] = []
        self.next_id = n_leaves
        self.last = 0.0

    def join(self, ca: int, cb: int, h: float) -> int:
        """Merge clusters ``ca`` and ``cb`` at height ``h``; returns the new cluster's id."""
        h = max(float(h), self.last, 0.0)
        self.last = h
        size = self.sizes[ca] + self.sizes[cb]
        self.rows.append([min(ca, cb), max(ca, cb), h, size])
        self.sizes[self.next_id] = size
        self.next_id += 1
        return self.next_id - 1


def _merge_basin_cells_ward(link: _Linkage, sev_of_leaf, weights, means) -> list[int]:
    """Centres of one basin cell merged at height 0 in Ward's order; the cluster of each."""
    n = sev_of_leaf.size
    cid = list(range(n))
    owner = list(range(n))
    w = np.asarray(weights, dtype=float).copy()
    m = np.atleast_2d(np.asarray(means, dtype=float)).copy()
    alive = np.ones(n, dtype=bool)
    while True:  # n <= a few dozen leaves: O(n^3) in NumPy is negligible
        same = (sev_of_leaf[:, None] == sev_of_leaf[None, :]) & alive[:, None] & alive[None]
        np.fill_diagonal(same, False)
        if not same.any():
            break
        d2 = ((m[:, None, :] - m[None, :, :]) ** 2).sum(axis=2)
        ww = w[:, None] * w[None, :] / np.maximum(w[:, None] + w[None, :], 1e-300)
        cost = np.where(same, ww * d2, np.inf)
        a, b = np.unravel_index(np.argmin(cost), cost.shape)
        a, b = (int(a), int(b)) if a < b else (int(b), int(a))
        m[a] = (w[a] * m[a] + w[b] * m[b]) / max(w[a] + w[b], 1e-300)
        w[a] += w[b]
        alive[b] = False
        owner[b] = a
        cid[a] = link.join(cid[a], cid[b], 0.0)
    return [cid[_root(owner, i)] for i in range(n)]


def _merge_basin_cells_barrier(link: _Linkage, sev_of_leaf, lb) -> list[int]:
    """Centres of one basin cell merged at height 0 in increasing straight-segment barrier."""
    n = sev_of_leaf.size
    cid = list(range(n))
    owner = list(range(n))
    ii, jj = np.triu_indices(n, k=1)
    same = sev_of_leaf[ii] == sev_of_leaf[jj]
    ii, jj = ii[same], jj[same]
    for t in np.argsort(np.nan_to_num(lb[ii, jj], nan=np.inf), kind="stable"):
        ra, rb = _root(owner, int(ii[t])), _root(owner, int(jj[t]))
        if ra != rb:
            owner[rb] = ra
            cid[ra] = link.join(cid[ra], cid[rb], 0.0)
    return [cid[_root(owner, i)] for i in range(n)]


def _tev_merge_sequence(sev_values, tev_edges, tev_values, merge_order, f_ref):
    """``(sev a, sev b, height)`` in merge order: increasing ``f(TEV)`` (single linkage), or
    the elder rule of 0-dimensional persistence (``merge_order='persistence'``)."""
    tv = np.asarray(tev_values, dtype=float).reshape(-1)
    edges = np.asarray(tev_edges, dtype=np.int64).reshape(-1, 2)
    order = np.argsort(tv, kind="stable")
    if merge_order != "persistence":
        return [(int(edges[t, 0]), int(edges[t, 1]), float(tv[t]) - f_ref) for t in order]
    # sweep the TEVs upwards; where two components of {f <= f(TEV)} meet, the one with the
    # higher minimum (the younger mode) dies, with persistence f(TEV) - its minimum; the
    # merges are then replayed in increasing persistence
    birth = np.asarray(sev_values, dtype=float).copy()
    p0 = list(range(len(birth)))
    events = []
    for t in order:
        ra, rb = _root(p0, int(edges[t, 0])), _root(p0, int(edges[t, 1]))
        if ra == rb:
            continue
        young, old = (ra, rb) if birth[ra] >= birth[rb] else (rb, ra)
        p0[young] = old
        events.append((float(tv[t] - birth[young]), young, old))
    return [
        events[i][1:] + (events[i][0],)
        for i in sorted(range(len(events)), key=lambda i: events[i][0])
    ]


def _join_disconnected(link: _Linkage, comp_cluster, parent, sev_of_leaf, lb, f_ref) -> int:
    """A disconnected TEV graph: join the remaining clusters by the straight-segment barrier
    between their closest centres; returns the number of such merges."""
    n = sev_of_leaf.size
    leaf_cluster = {}
    for r in comp_cluster:
        for i in range(n):
            if _root(parent, int(sev_of_leaf[i])) == r:
                leaf_cluster[i] = r
    ii, jj = np.triu_indices(n, k=1)
    w = np.nan_to_num(lb[ii, jj], nan=np.inf)
    lparent = {r: r for r in comp_cluster}
    n_fallback = 0
    for t in np.argsort(w, kind="stable"):
        ra, rb = _root(lparent, leaf_cluster[ii[t]]), _root(lparent, leaf_cluster[jj[t]])
        if ra == rb:
            continue
        lparent[rb] = ra
        height = w[t] - f_ref if np.isfinite(w[t]) else link.last
        comp_cluster[ra] = link.join(comp_cluster[ra], comp_cluster.pop(rb), height)
        n_fallback += 1
    return n_fallback


def cut_linkage(
    Z, n_leaves: int, n_clusters: int, weights=None, min_cluster_weight: float = 0.0
) -> np.ndarray:
    """Labels of the leaves after the merges of ``Z`` that leave ``n_clusters`` clusters
    (Alg. 4 l. 8), numbered 0.. in order of their smallest leaf.

    Without ``weights`` (or with ``min_cluster_weight = 0``) this is the first
    ``n_leaves - n_clusters`` merges. With them, clusters whose total weight is below
    ``min_cluster_weight`` are *runts* (Stuetzle 2003's runt pruning, HDBSCAN's minimum cluster
    size): they may not take one of the ``n_clusters`` places while enough heavier clusters
    exist. The merges are applied in the order of ``Z`` (Kruskal on the leaves), except that a
    merge of two non-runts is skipped while there are at most ``n_clusters`` non-runts; it
    stops at ``n_clusters`` clusters. A runt is thereby joined to the cluster it meets first in
    the hierarchy (its lowest barrier); if fewer than ``n_clusters`` non-runts can be formed,
    runts fill the remaining places in the order of ``Z`` (the plain cut's choice).
    """
    n_clusters = max(int(n_clusters), 1)
    if weights is None or not min_cluster_weight > 0:
        parent = list(range(n_leaves + len(Z)))

        def find(a):
            return _root(parent, a)

        for i in range(max(n_leaves - n_clusters, 0)):
            a, b = int(Z[i, 0]), int(Z[i, 1])
            parent[find(a)] = n_leaves + i
            parent[find(b)] = n_leaves + i
        roots = [find(i) for i in range(n_leaves)]
    else:
        w = np.asarray(weights, dtype=float).reshape(n_leaves)
        rep = list(range(n_leaves))  # one leaf of every node of Z
        for i in range(len(Z)):
            rep.append(rep[int(Z[i, 0])])
        parent = list(range(n_leaves))

        def find(a):
            return _root(parent, a)

        mass = {i: float(w[i]) for i in range(n_leaves)}
        thr = float(min_cluster_weight)
        n_total = n_leaves
        n_big = sum(m >= thr for m in mass.values())
        for i in range(len(Z)):
            if n_total <= n_clusters:
                break
            ra, rb = find(rep[int(Z[i, 0])]), find(rep[int(Z[i, 1])])
            if ra == rb:
                continue
            big_a, big_b = mass[ra] >= thr, mass[rb] >= thr
            if big_a and big_b and n_big <= n_clusters:
                continue
            parent[rb] = ra
            mass[ra] += mass.pop(rb)
            n_total -= 1
            n_big += int(mass[ra] >= thr) - int(big_a) - int(big_b)
        roots = [find(i) for i in range(n_leaves)]
    first: dict[int, int] = {}
    return np.array([first.setdefault(r, len(first)) for r in roots], dtype=np.int64)




def _dendrogram(Z, n_leaves):
    if n_leaves < 2:
        return {
            "icoord": [],
            "dcoord": [],
            "ivl": ["0"] if n_leaves else [],
            "leaves": list(range(n_leaves)),
            "color_list": [],
            "leaves_color_list": [],
        }
    return hierarchy.dendrogram(Z, no_plot=True)
