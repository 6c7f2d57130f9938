"""Morse merging, along its seams: the density field, its equilibria, the merge hierarchy and
the estimator (the public names are in :mod:`privclust.cluster.morse`)."""
