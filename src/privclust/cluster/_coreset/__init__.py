"""The parts of :class:`privclust.cluster.coreset.CoresetKMeans`: the private tree and its
weighted summary (:mod:`.tree`), the choice of k on the summary (:mod:`.select`,
post-processing) and the private refinement of the centres (:mod:`.refine`)."""
