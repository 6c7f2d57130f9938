"""Private model selection: choose the number of clusters or the estimator under one privacy
plan, with the exponential mechanism over a score of sensitivity 1.

>>> from privclust.model_selection import PrivateSelection, select_n_clusters   # doctest: +SKIP
>>> sel = PrivateSelection([DPLloyd(16, bounds=b), HSTKMeans(64, bounds=b)],    # doctest: +SKIP
...                        epsilon=1.0).fit(X)
>>> sel.best_estimator_, sel.privacy_report_                                    # doctest: +SKIP
"""

from ._score import silhouette_sum, simplified_silhouette
from ._selection import PrivateSelection, select_n_clusters

__all__ = ["PrivateSelection", "select_n_clusters", "silhouette_sum", "simplified_silhouette"]
