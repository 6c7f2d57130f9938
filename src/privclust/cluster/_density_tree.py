"""The cluster tree of DPHDBSCAN: post-processing of one private shifted grid tree's released
counts (:mod:`privclust.cluster._shifted_tree`).

At every level the dense released cells (noisy count at least the release's significance
floor, below a dense parent) form connected components (cells adjacent in the grid, diagonal
neighbours included). A component's cells have their parents in one component of the level
above, so the components of all levels form a tree. Condensed as HDBSCAN condenses its
single-linkage tree (Campello, Moulavi, Sander 2013): a cluster continues down the levels while
at most one of its components' children holds ``min_cluster_size`` records (noisy mass); where
two or more do, it ends and each becomes a cluster of its own; children lighter than that fall
out of it. The clusters kept are those of greatest excess of mass (EOM): the stability of a
cluster is the mass it holds at each of its levels (its birth level included) times the step in
``lambda = 1 / cell width`` from that level to the next, summed over its levels, and a cluster
is kept unless the sum of its kept descendants' stability beats its own by more than
``SPLIT_MARGIN`` standard deviations of the noise on that difference (stability is a sum of
released counts, so its noise scale is public; levels that carry no noise scale take no
margin: HDBSCAN's rule). Everything here reads released values and public geometry only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from .._parallel import on_cores
from ._shifted_tree import SIGNIFICANT_MARGIN, lookup_rows

#: Records labelled at a time by :func:`labels_from_grid` (a few MB of float64 per chunk).
_LABEL_ROWS = 1 << 16

#: Standard deviations of the noise on the difference by which a split's children must beat
#: their parent's stability (where the levels carry their cells' noise scale: the grid).
SPLIT_MARGIN = 2.0
#: :func:`refine_tree`: the fewest entries every cluster kept in a refined cluster's place
#: lasts.
REFINE_PERSIST = 2

__all__ = ["ClusterTree", "build_cluster_tree", "dense_levels", "labels_from_cells",
           "labels_from_grid", "refine_tree", "spread_labels"]


@dataclass
class DenseLevel:
    """The dense cells of one level, their noisy counts, their component and the position of
    their parent among the dense cells of the level above."""

    level: int
    cells: np.ndarray
    counts: np.ndarray
    component: np.ndarray
    parent: np.ndarray
    n_components: int
    #: the level whose cells these are when not ``level`` (several entries of one grid level:
    #: neighbourhoods of two sizes), and the entry's density level as a power of two above
    #: that level's ``1 / cell width``
    width_level: int = 0
    lam_shift: float = 0.0
    #: the standard deviation of the noise on one of these cells' counts (public: from
    #: epsilon and the level); 0 where the extraction takes no margin for it
    cell_sd: float = 0.0

    @property
    def grid_level(self) -> int:
        """The level of the grid whose cells these are."""
        return self.width_level or self.level


def _pairs(cells: np.ndarray) -> np.ndarray:
    """Pairs of cells adjacent in the grid (Chebyshev distance 1 between their integer
    indices: a face, an edge or a corner in common), (p, 2)."""
    if cells.shape[0] < 2:
        return np.zeros((0, 2), dtype=np.int64)
    return cKDTree(cells).query_pairs(1.0, p=np.inf, output_type="ndarray").astype(np.int64)


def _components(m: int, pairs: np.ndarray) -> tuple[np.ndarray, int]:
    """Connected components of ``m`` cells under ``pairs``."""
    if m == 0:
        return np.zeros(0, dtype=np.int64), 0
    graph = coo_matrix((np.ones(pairs.shape[0], dtype=np.int8), (pairs[:, 0], pairs[:, 1])),
                       shape=(m, m))
    n, lab = connected_components(graph, directed=False)
    return lab.astype(np.int64), int(n)


def neighbourhood_sums(counts: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Every cell's noisy count plus its released neighbours' (post-processing)."""
    out = counts.astype(float).copy()
    np.add.at(out, pairs[:, 0], counts[pairs[:, 1]])
    np.add.at(out, pairs[:, 1], counts[pairs[:, 0]])
    return out


def dense_levels(released, factor: float) -> list[DenseLevel]:
    """The dense cells of every released level (:class:`~privclust.cluster._shifted_tree.
    Level`): the released cells whose noisy count plus their released neighbours' reaches
    ``factor`` times the level's threshold and, below level 1, whose parent is dense; their
    components. Stops at the first level with no dense cell."""
    out: list[DenseLevel] = []
    prev_pos = None  # per released cell of the level above: its position among the dense
    for lv in released:
        pairs = _pairs(lv.cells)
        threshold = lv.floor - SIGNIFICANT_MARGIN / lv.epsilon
        dense = neighbourhood_sums(lv.counts, pairs) >= factor * threshold
        if prev_pos is not None:
            up = prev_pos[lv.parent]
            dense &= up >= 0
        else:
            up = np.full(lv.cells.shape[0], -1, dtype=np.int64)
        idx = np.flatnonzero(dense)
        if idx.size == 0:
            break
        pos = np.full(lv.cells.shape[0], -1, dtype=np.int64)
        pos[idx] = np.arange(idx.size)
        sub = pos[pairs]
        sub = sub[(sub >= 0).all(axis=1)]
        comp, n_comp = _components(idx.size, sub)
        out.append(DenseLevel(lv.level, lv.cells[idx], lv.counts[idx].astype(float), comp,
                              up[idx], n_comp))
        prev_pos = pos
    return out


@dataclass
class ClusterTree:
    """The condensed cluster tree. Cluster ``c``: ``parent[c]`` (-1: a child of the whole
    data), its ``birth`` and ``death`` levels, its ``stability``; ``of[i]`` maps the components
    of ``levels[i]`` to their cluster (-1: fallen out); ``selected`` marks the clusters kept;
    ``label[c]`` is the kept cluster at or above ``c`` (-1: none)."""

    levels: list
    parent: np.ndarray
    birth: np.ndarray
    death: np.ndarray
    stability: np.ndarray
    of: list
    selected: np.ndarray
    label: np.ndarray
    #: the standard deviation of the noise on every cluster's stability (public)
    noise: np.ndarray | None = None

    def cell_labels(self, i: int) -> np.ndarray:
        """The label of every dense cell of ``levels[i]`` (-1: in no kept cluster)."""
        lv = self.levels[i]
        cl = self.of[i][lv.component]
        if self.label.size == 0:  # no cluster at all: every cell is noise
            return np.full(cl.shape, -1, dtype=np.int64)
        return np.where(cl >= 0, self.label[np.maximum(cl, 0)], -1)


def build_cluster_tree(levels: list[DenseLevel], min_cluster_size: float,
                       lambdas: np.ndarray) -> ClusterTree:
    """Condense the components of ``levels`` into clusters and keep those of greatest excess
    of mass (module docstring). ``lambdas[i]``: the density level of ``levels[i]`` (increasing;
    one more entry for the level below the last)."""
    parent, birth, death, stab, noise = [], [], [], [], []
    of = []
    prev = None  # cluster of every component of the level above (the root: the whole data)
    for i, lv in enumerate(levels):
        mass = np.bincount(lv.component, weights=lv.counts, minlength=lv.n_components)
        mass_sd = lv.cell_sd * np.sqrt(np.bincount(lv.component, minlength=lv.n_components))
        if prev is None:
            up = np.full(lv.n_components, -1, dtype=np.int64)  # under the root
        else:
            first = np.zeros(lv.n_components, dtype=np.int64)
            first[lv.component[::-1]] = np.arange(lv.component.size)[::-1]
            up = prev[levels[i - 1].component[lv.parent[first]]]
        big = mass >= min_cluster_size
        mine = np.full(lv.n_components, -1, dtype=np.int64)
        # per cluster above (or the root, -1): how many heavy children its components have
        keys = np.where(big, up, -2)
        heavy = {k: np.flatnonzero(keys == k) for k in np.unique(keys[big])}
        for k, comps in heavy.items():
            if k >= 0 and comps.size == 1:
                mine[comps[0]] = k  # the cluster goes on (lighter children fall out)
                continue
            if k >= 0:
                death[k] = lv.level - 1  # split: the cluster ends at the level above
            for c in comps:
                mine[c] = len(parent)
                parent.append(int(k))
                birth.append(lv.level)
                death.append(lv.level)
                stab.append(0.0)
                noise.append(0.0)
        if prev is not None:
            ended = set(np.unique(prev[prev >= 0]).tolist()) - set(np.unique(mine[mine >= 0])
                                                                     .tolist())
            for k in ended:  # no heavy child and not split: ended at the level above
                if death[k] >= lv.level:
                    death[k] = lv.level - 1
        for c in np.flatnonzero(mine >= 0):
            k = mine[c]
            # its records stay in the cluster from this level's lambda to the next's
            stab[k] += mass[c] * (lambdas[i + 1] - lambdas[i])
            # its noise: at most the sum of the levels' (correlated: sums of one release)
            noise[k] += mass_sd[c] * (lambdas[i + 1] - lambdas[i])
            death[k] = max(death[k], lv.level)
        of.append(mine)
        prev = mine
    parent_a = np.asarray(parent, dtype=np.int64)
    stab_a = np.asarray(stab, dtype=float)
    # one cluster at the top holds the whole data (HDBSCAN's root): never kept on its own
    tops = np.flatnonzero(parent_a < 0)
    selected = _excess_of_mass(parent_a, stab_a, int(tops[0]) if tops.size == 1 else -1,
                               np.asarray(noise, dtype=float))
    label = _labels(parent_a, selected)
    return ClusterTree(levels, parent_a, np.asarray(birth, dtype=np.int64),
                       np.asarray(death, dtype=np.int64), stab_a, of, selected, label,
                       np.asarray(noise, dtype=float))


def refine_tree(base: ClusterTree, finer: ClusterTree, roots: np.ndarray) -> ClusterTree:
    """``base``'s kept clusters, with each of ``roots`` (kept clusters of ``base``) replaced by
    the clusters excess of mass keeps in its own subtree of ``finer``, a tree of the same
    entries followed by more (higher thresholds on the finest cells): the root itself, or its
    descendants where their stability beats its own by the split margin. A replacement is
    taken only when every cluster kept in the root's place lasts at least
    ``REFINE_PERSIST`` entries (a split the noise makes at one threshold is gone at the next).
    Post-processing of released values."""
    parent = finer.parent.copy()
    parent[roots] = -1  # every root's subtree on its own
    sub = _excess_of_mass(parent, finer.stability, -1, finer.noise)
    top = np.full(parent.size, -1, dtype=np.int64)  # the root above every cluster, -1: none
    top[roots] = roots
    for c in range(parent.size):  # parents come first
        if parent[c] >= 0 and top[parent[c]] >= 0:
            top[c] = top[parent[c]]
    selected = np.zeros(parent.size, dtype=bool)
    selected[:base.selected.size] = base.selected
    for r in roots:
        mine = np.flatnonzero(sub & (top == r))
        if np.all(finer.death[mine] - finer.birth[mine] + 1 >= REFINE_PERSIST):
            selected[r] = False
            selected[mine] = True
    return ClusterTree(finer.levels, finer.parent, finer.birth, finer.death, finer.stability,
                       finer.of, selected, _labels(finer.parent, selected), finer.noise)


def _excess_of_mass(parent: np.ndarray, stability: np.ndarray, root: int,
                    noise: np.ndarray | None = None) -> np.ndarray:
    """HDBSCAN's EOM selection: bottom-up, a cluster is kept when its stability is at least
    the sum of its children's best; then its descendants are not. Children are always created
    after their parent, so reverse creation order is bottom-up. ``root`` (-1: none) is never
    kept (HDBSCAN's ``allow_single_cluster=False``). ``noise[c]``: the standard deviation of
    the noise on cluster ``c``'s stability (public); the children replace their parent only
    when their sum beats it by ``SPLIT_MARGIN`` standard deviations of the noise on the
    difference, so a split the noise could make is not taken."""
    n = parent.size
    noise = np.zeros(n) if noise is None else noise
    best = stability.copy()
    best_var = noise**2
    selected = np.zeros(n, dtype=bool)
    child_sum = np.zeros(n)
    child_var = np.zeros(n)
    has_child = np.zeros(n, dtype=bool)
    for c in range(n - 1, -1, -1):
        margin = SPLIT_MARGIN * np.sqrt(noise[c]**2 + child_var[c])
        if c == root or (has_child[c] and child_sum[c] > stability[c] + margin):
            best[c], best_var[c] = child_sum[c], child_var[c]
        else:
            selected[c] = True
        p = parent[c]
        if p >= 0:
            child_sum[p] += best[c]
            child_var[p] += best_var[c]
            has_child[p] = True
    # keep only the top-most selected cluster of every chain
    for c in range(n):
        p = parent[c]
        while p >= 0:
            if selected[p]:
                selected[c] = False
                break
            p = parent[p]
    return selected


def _labels(parent: np.ndarray, selected: np.ndarray) -> np.ndarray:
    """``label[c]``: the index (0, 1, ... in creation order) of the kept cluster at or above
    ``c``, -1 where there is none."""
    n = parent.size
    index = np.cumsum(selected) - 1
    label = np.full(n, -1, dtype=np.int64)
    for c in range(n):  # parents come first
        if selected[c]:
            label[c] = index[c]
        elif parent[c] >= 0:
            label[c] = label[parent[c]]
    return label


def cell_of(X: np.ndarray, origin: np.ndarray, width: np.ndarray) -> np.ndarray:
    """The integer cell of every record (per-record arithmetic: each row from itself and the
    public grid alone)."""
    return np.floor((X - origin) / width).astype(np.int64)


def labels_from_cells(X: np.ndarray, origin: np.ndarray, widths: list, cells: list,
                      labels: list) -> np.ndarray:
    """Label of every record: the label of its cell at the finest level where that cell is
    labelled (``cells[i]``, ``labels[i]``: the labelled cells of the level of width
    ``widths[i]``); -1 where no level labels it."""
    out = np.full(X.shape[0], -1, dtype=np.int64)
    todo = np.arange(X.shape[0])
    for width, c, lab in zip(widths[::-1], cells[::-1], labels[::-1], strict=True):
        if c.shape[0] == 0 or todo.size == 0:
            continue  # finest level first: a record is looked up until a level labels it
        pos = lookup_rows(c, cell_of(X[todo], origin, width))
        hit = pos >= 0
        out[todo[hit]] = lab[pos[hit]]
        todo = todo[~hit]
    return out


def labels_from_grid(X: np.ndarray, origin: np.ndarray, width: np.ndarray, side: int,
                     sides: list, cells: list, labels: list, bounds=None) -> np.ndarray:
    """:func:`labels_from_cells` for a grid that halves every dimension at every level:
    ``width`` is the finest level's cell width, ``side`` its cells per dimension over the
    root, ``sides[i]`` those of the level of ``cells[i]`` (a power of two, at most ``side``).
    Every level's labels are painted, coarsest first, onto one table of the finest cells (a
    cell of a level covers the finest cells inside it: the widths are the finest's times powers
    of two), and every record is looked up once by its finest cell; records outside the root
    are -1. Same labels, one pass over the records, in chunks of rows on the cores.
    ``bounds``: each chunk is first clipped into them (as float64), so the whole input is never
    copied; each row's label depends on that row alone, however the rows are chunked."""
    d = X.shape[1]
    table = np.full((side,) * d, -1, dtype=np.int32)
    for s, c, lab in zip(sides, cells, labels, strict=True):  # coarsest first: finer win
        if c.shape[0] == 0:
            continue
        s, r = int(s), side // int(s)
        level = np.full((s,) * d, -1, dtype=np.int32)
        level[tuple(c.T)] = lab
        view = table.reshape(sum(((s, r) for _ in range(d)), ()))
        wide = level.reshape(sum(((s, 1) for _ in range(d)), ()))
        np.copyto(view, wide, where=wide >= 0)
    flat = table.ravel()
    out = np.empty(X.shape[0], dtype=np.int64)

    def label_rows(start):
        rows = slice(start, start + _LABEL_ROWS)
        x = np.asarray(X[rows], dtype=np.float64)
        if bounds is not None:
            x = np.clip(x, bounds[:, 0], bounds[:, 1])
        fine = cell_of(x, origin, width)
        inside = ((fine >= 0) & (fine < side)).all(axis=1)
        part = np.full(x.shape[0], -1, dtype=np.int64)
        part[inside] = flat[np.ravel_multi_index(tuple(fine[inside].T), (side,) * d)]
        out[rows] = part

    on_cores(label_rows, range(0, X.shape[0], _LABEL_ROWS), min_chunks=2)
    return out


def spread_labels(levels: list[DenseLevel], labels: list, centres: list,
                  reach: int | None = None, near: list | None = None) -> list:
    """Labels of the dense cells, with every unlabelled cell whose component holds kept cells
    further down (a component the clusters split from) given the label of the nearest of them
    (by cell centre, ``centres[i]`` per level): a record there belongs to the cluster it is
    nearest among those its component splits into, as HDBSCAN's members belong to their
    cluster. Cells of components without kept cells below stay -1. ``reach``: only kept cells
    at most that many levels below count (None: any level below); ``near[i]``: only cells of
    ``levels[i]`` whose centre lies at most that far from the kept cell's (None: any
    distance). Post-processing."""
    n = len(levels)
    out = [np.asarray(lab).copy() for lab in labels]
    for i in range(n - 1):
        todo = np.flatnonzero(out[i] < 0)
        if todo.size == 0:
            continue
        pts, labs, comps = [], [], []
        for j in range(i + 1, n if reach is None else min(n, i + 1 + reach)):
            k = np.flatnonzero(labels[j] >= 0)
            pos = k  # the kept cells' ancestors at level i
            for t in range(j, i, -1):
                pos = levels[t].parent[pos]
            pts.append(centres[j][k])
            labs.append(labels[j][k])
            comps.append(levels[i].component[pos])
        pts, labs, comps = np.concatenate(pts), np.concatenate(labs), np.concatenate(comps)
        todo = todo[np.isin(levels[i].component[todo], comps)]  # components split from
        if labs.size == 0 or todo.size == 0:
            continue
        span = np.ptp(np.vstack([pts, centres[i]]), axis=0).max() * 4.0 + 1.0
        tree = cKDTree(np.column_stack([pts, comps * span]))
        me = levels[i].component[todo]
        dist, hit = tree.query(np.column_stack([centres[i][todo], me * span]))
        same = comps[hit] == me
        if near is not None:  # only cells near a kept cell
            same &= dist <= near[i]
        out[i][todo[same]] = labs[hit[same]]
    return out
