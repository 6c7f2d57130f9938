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
    parent = list(range(n_sev))

    def find(a):
        return _root(parent, a)

    comp_cluster: dict[int, int] = {}
    sizes = {i: 1 for i in range(n)}
    rows: list[list[float]] = []
    next_id = n
    last = 0.0

    def join(ca, cb, h):
        nonlocal next_id, last
        h = max(float(h), last, 0.0)
        last = h
        rows.append([min(ca, cb), max(ca, cb), h, sizes[ca] + sizes[cb]])
        sizes[next_id] = sizes[ca] + sizes[cb]
        next_id += 1
        return next_id - 1

    # centres in one basin cell: height 0 (see the docstring for the order)
    lb = np.asarray(line_barrier if line_barrier is not None else np.zeros((n, n)), float)
    lparent = list(range(n))
    cid = list(range(n))

    def lroot(a):
        return _root(lparent, a)

    if weights is not None and means is not None:
        w = np.asarray(weights, dtype=float).copy()
        m = np.atleast_2d(np.asarray(means, dtype=float)).copy()
        alive = np.ones(n, dtype=bool)
        inf = np.inf
        while True:  # n <= a few dozen leaves: O(n^3) in NumPy is negligible
            same = (sev_of_leaf[:, None] == sev_of_leaf[None, :]) & alive[:, None] & alive[None]
            np.fill_diagonal(same, False)
            if not same.any():
                break
            d2 = ((m[:, None, :] - m[None, :, :]) ** 2).sum(axis=2)
            ww = w[:, None] * w[None, :] / np.maximum(w[:, None] + w[None, :], 1e-300)
            cost = np.where(same, ww * d2, inf)
            a, b = np.unravel_index(np.argmin(cost), cost.shape)
            a, b = (int(a), int(b)) if a < b else (int(b), int(a))
            m[a] = (w[a] * m[a] + w[b] * m[b]) / max(w[a] + w[b], 1e-300)
            w[a] += w[b]
            alive[b] = False
            lparent[b] = a
            cid[a] = join(cid[a], cid[b], 0.0)
    else:  # increasing straight-segment barrier
        ii, jj = np.triu_indices(n, k=1)
        same = sev_of_leaf[ii] == sev_of_leaf[jj]
        ii, jj = ii[same], jj[same]
        for t in np.argsort(np.nan_to_num(lb[ii, jj], nan=np.inf), kind="stable"):
            ra, rb = lroot(int(ii[t])), lroot(int(jj[t]))
            if ra != rb:
                lparent[rb] = ra
                cid[ra] = join(cid[ra], cid[rb], 0.0)
    for i in range(n):
        comp_cluster[int(sev_of_leaf[i])] = cid[lroot(i)]
    tv = np.asarray(tev_values, dtype=float).reshape(-1)
    edges = np.asarray(tev_edges, dtype=np.int64).reshape(-1, 2)
    order = np.argsort(tv, kind="stable")
    if merge_order == "persistence":
        # the elder rule of 0-dimensional persistence: sweep the TEVs upwards; where two
        # components of {f <= f(TEV)} meet, the one with the higher minimum (the younger mode)
        # dies, with persistence f(TEV) - its minimum; the merges are then replayed in
        # increasing persistence
        birth = np.asarray(sev_values, dtype=float).copy()
        p0 = list(range(n_sev))

        def find0(a):
            return _root(p0, a)

        events = []
        for t in order:
            ra, rb = find0(int(edges[t, 0])), find0(int(edges[t, 1]))
            if ra == rb:
                continue
            young, old = (ra, rb) if birth[ra] >= birth[rb] else (rb, ra)
            p0[young] = old
            events.append((float(tv[t] - birth[young]), young, old))
        seq = [
            events[i][1:] + (events[i][0],)
            for i in sorted(range(len(events)), key=lambda i: events[i][0])
        ]
    else:
        seq = [(int(edges[t, 0]), int(edges[t, 1]), float(tv[t]) - f_ref) for t in order]
    for a, b, h in seq:
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        parent[rb] = ra
        ca, cb = comp_cluster.pop(ra, None), comp_cluster.pop(rb, None)
        if ca is not None and cb is not None:
            comp_cluster[ra] = join(ca, cb, h)
        elif ca is not None or cb is not None:
            comp_cluster[ra] = ca if ca is not None else cb
    n_fallback = 0
    if len(comp_cluster) > 1:
        # clusters of the leaves at this point
        leaf_cluster = {}
        for r in comp_cluster:
            for i in range(n):
                if find(int(sev_of_leaf[i])) == r:
                    leaf_cluster[i] = r
        ii, jj = np.triu_indices(n, k=1)
        w = np.nan_to_num(lb[ii, jj], nan=np.inf)
        lparent = {r: r for r in comp_cluster}

        def lfind(a):
            return _root(lparent, a)

        for t in np.argsort(w, kind="stable"):
            ra, rb = lfind(leaf_cluster[ii[t]]), lfind(leaf_cluster[jj[t]])
            if ra == rb:
                continue
            lparent[rb] = ra
            height = w[t] - f_ref if np.isfinite(w[t]) else last
            comp_cluster[ra] = join(comp_cluster[ra], comp_cluster.pop(rb), height)
            n_fallback += 1
    Z = np.asarray(rows, dtype=float).reshape(-1, 4)
    return Z, n_fallback


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
