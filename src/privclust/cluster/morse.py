"""Morse-theory dynamical processing: merge the components of a private mixture along the
transition equilibrium vectors (TEVs) of ``f = -ln p``.

Byun, Choi, Lee, "Improving the Utility of Differentially Private Clustering through Dynamical
Processing": Alg. 1 (the pipeline), Alg. 3 (TEVGraph), Alg. 4 (MergeCluster), Thm 5.3
(inductive prediction) and Thm 5.4 (post-processing); the departures page, item 23, says where
privclust chooses differently.

The code lives along its seams in :mod:`privclust.cluster._morse`: ``field`` (the density and
its gradient flow), ``equilibria`` (SEVs and TEVs), ``hierarchy`` (Alg. 4 as a linkage) and
``estimator`` (:class:`MorseMerging`). Everything except :meth:`MorseMerging.fit`'s optional
covariance pass (Sec. 5.1.2, for centre-only base models) works on the released mixture alone:
no data is read.
"""

from ._morse.equilibria import find_sevs, find_tevs
from ._morse.estimator import MorseMerging, pool_centres
from ._morse.field import MixtureField, flow_to_rest, integrate_to_rest
from ._morse.hierarchy import cut_linkage, merge_clusters

__all__ = [
    "MixtureField",
    "MorseMerging",
    "cut_linkage",
    "find_sevs",
    "find_tevs",
    "flow_to_rest",
    "integrate_to_rest",
    "merge_clusters",
    "pool_centres",
]
