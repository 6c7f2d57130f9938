"""Plots of fitted privclust models (needs matplotlib: ``pip install "privclust[plot]"``).

* :func:`plot_clusters`: the data coloured by ``model.predict``, the private centres as large
  markers (area proportional to the noisy size) and, for a 2-D DPM, the released split lines;
  more than two features on two of them, or (``dims="centres"``) projected on
  :func:`centre_directions`, the two directions that separate the private centres most.
* :func:`plot_split_tree`: DPM's split tree as a diagram (split rule and noisy count per node).
* :func:`plot_spans`: DP-DBSCAN's spans as grid cells (2-D).
* :func:`plot_density_clusters`: DPHDBSCAN's dense released cells by cluster (2-D).
* :func:`plot_dendrogram`, :func:`plot_morse_density`: Morse merging's hierarchy, and its
  density, basins and transition points (2-D).
* :func:`save_figure`: write a figure to PNG/PDF/SVG/...

A plot of the data shows the *raw* points: it is for the data holder, not a private release
(only the model is). matplotlib is imported lazily (one module, ``_common``); without a display
the Agg backend is used.
"""

from ._common import FIGURE_FORMATS, check_figure_path, require_matplotlib, save_figure
from .centres import centre_directions, plot_clusters, plot_split_tree
from .density import plot_density_clusters
from .morse import plot_dendrogram, plot_morse_density
from .spans import plot_spans

__all__ = ["FIGURE_FORMATS", "centre_directions", "check_figure_path", "plot_clusters",
           "plot_dendrogram", "plot_density_clusters", "plot_morse_density", "plot_spans",
           "plot_split_tree", "require_matplotlib", "save_figure"]
