"""The public split tree that DPM releases (splits are private outputs, so the tree is public)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SplitTree"]


@dataclass
class SplitTree:
    """Axis-aligned binary tree over the public bounds.

    Node ``i``: ``feature[i]``/``threshold[i]`` (-1/nan for leaves), children ``left[i]``
    (``x[feature] <= threshold``) and ``right[i]``, ``depth[i]``, the noisy count ``n_hat[i]``,
    its box ``box_lo[i]``/``box_hi[i]`` and, for leaves, ``halt_reason[i]`` and ``leaf_index[i]``
    (the row of ``cluster_centers_`` it produced).
    """

    feature: list = field(default_factory=list)
    threshold: list = field(default_factory=list)
    left: list = field(default_factory=list)
    right: list = field(default_factory=list)
    depth: list = field(default_factory=list)
    n_hat: list = field(default_factory=list)
    box_lo: list = field(default_factory=list)
    box_hi: list = field(default_factory=list)
    halt_reason: list = field(default_factory=list)
    leaf_index: list = field(default_factory=list)

    def add(self, depth: int, n_hat: int, lo, hi) -> int:
        self.feature.append(-1)
        self.threshold.append(float("nan"))
        self.left.append(-1)
        self.right.append(-1)
        self.depth.append(int(depth))
        self.n_hat.append(int(n_hat))
        self.box_lo.append(np.asarray(lo, dtype=float))
        self.box_hi.append(np.asarray(hi, dtype=float))
        self.halt_reason.append("")
        self.leaf_index.append(-1)
        return len(self.feature) - 1

    @property
    def n_nodes(self) -> int:
        return len(self.feature)

    def is_leaf(self, i: int) -> bool:
        return self.left[i] < 0

    def leaves(self) -> list[int]:
        return [i for i in range(self.n_nodes) if self.is_leaf(i)]

    def apply(self, X) -> np.ndarray:
        """Leaf index (row of ``cluster_centers_``) of every row of X; vectorised per depth."""
        X = np.asarray(X, dtype=float)
        node = np.zeros(X.shape[0], dtype=np.int64)
        feature = np.asarray(self.feature)
        threshold = np.asarray(self.threshold, dtype=float)
        left, right = np.asarray(self.left), np.asarray(self.right)
        for _ in range(max(self.depth, default=0) + 1):
            f = feature[node]
            internal = f >= 0
            if not internal.any():
                break
            rows = np.flatnonzero(internal)
            go_left = X[rows, f[rows]] <= threshold[node[rows]]
            node[rows] = np.where(go_left, left[node[rows]], right[node[rows]])
        return np.asarray(self.leaf_index)[node]

    def to_dict(self) -> dict:
        return {
            "feature": [int(v) for v in self.feature],
            "threshold": [None if np.isnan(v) else float(v) for v in self.threshold],
            "left": [int(v) for v in self.left],
            "right": [int(v) for v in self.right],
            "depth": [int(v) for v in self.depth],
            "n_hat": [int(v) for v in self.n_hat],
            "box_lo": [np.asarray(v).tolist() for v in self.box_lo],
            "box_hi": [np.asarray(v).tolist() for v in self.box_hi],
            "halt_reason": list(self.halt_reason),
            "leaf_index": [int(v) for v in self.leaf_index],
        }

    @classmethod
    def from_dict(cls, d: dict) -> SplitTree:
        t = cls()
        t.feature = list(d["feature"])
        t.threshold = [float("nan") if v is None else float(v) for v in d["threshold"]]
        t.left, t.right, t.depth = list(d["left"]), list(d["right"]), list(d["depth"])
        t.n_hat = list(d["n_hat"])
        t.box_lo = [np.asarray(v, dtype=float) for v in d["box_lo"]]
        t.box_hi = [np.asarray(v, dtype=float) for v in d["box_hi"]]
        t.halt_reason, t.leaf_index = list(d["halt_reason"]), list(d["leaf_index"])
        return t
