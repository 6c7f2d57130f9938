"""``PrivateClipper``: private bounds as a pipeline step."""

from __future__ import annotations

import numpy as np

from ..cluster._base import check_epsilon, is_dask_input
from ..cluster.bounds import plan_bounds_items, private_bounds
from ..privacy import Budget, Mechanisms, PrivacyReport, resolve_random_state
from ._base import PrivateTransformerMixin


class PrivateClipper(PrivateTransformerMixin):
    """Estimate every feature's range with epsilon-DP, then clip records to it.

    ``fit`` is :func:`privclust.private_bounds` at ``epsilon`` (its release, its report);
    ``transform`` clips to the bounds found (post-processing). The bounds are public from then
    on: ``output_bounds_`` hands them to the next step of a
    :class:`~privclust.pipeline.PrivatePipeline`, so a table with no known range can be
    clustered with nothing but a budget.

    Parameters
    ----------
    epsilon : float, default 0.1
        The budget of the bounds release.
    random_state : None, int or Generator
        None: secure randomness; an int: reproducible (not secure).
    accountant : Accountant or None
        A shared budget, charged before the data is read.

    Privacy guarantee
    -----------------
    ``epsilon``-DP (add or remove one record), the guarantee of :func:`privclust.private_bounds`.
    ``transform`` reads only the record it transforms and the released bounds.

    Dask input (a dask array, a dask DataFrame or a Parquet path) is fitted on the workers:
    the same release as for the same records in memory (:func:`privclust.private_bounds`).

    Examples
    --------
    >>> import numpy as np
    >>> from privclust.preprocessing import PrivateClipper
    >>> X = np.random.default_rng(0).normal(50, 10, size=(20000, 3))
    >>> clip = PrivateClipper(epsilon=0.1, random_state=0).fit(X)
    >>> bool((clip.output_bounds_[:, 0] < 30).all() and (clip.output_bounds_[:, 1] > 70).all())
    True
    """

    def __init__(self, epsilon: float = 0.1, *, random_state=None, accountant=None):
        self.epsilon = epsilon
        self.random_state = random_state
        self.accountant = accountant

    def fit(self, X, y=None):
        """Estimate the bounds privately. ``y`` is ignored."""
        eps = check_epsilon(self.epsilon)
        part = getattr(self, "_plan_part", None)
        if part is None:
            accountant = self._accountant()
            accountant.check(Budget(eps, 0.0), "PrivateClipper")  # before the data is read
        X = self._check_X(X, reset=True)
        if part is None:
            found = private_bounds(X, eps, random_state=self.random_state, accountant=accountant)
        else:
            found = _bounds_in_part(X, eps, part, self.random_state)
        self.n_features_in_ = X.shape[1]
        self.bounds_ = self.output_bounds_ = found.bounds
        self.privacy_report_ = found.privacy_report_
        return self

    def transform(self, X):
        """``X`` clipped to the private bounds (post-processing); Dask input gives a lazy
        dask array, clipped chunk by chunk on the workers."""
        if is_dask_input(X):
            self._check_fitted()
            data = self._check_X(X, reset=False)
            lo, hi = (self.bounds_[:, i].astype(data.dtype) for i in (0, 1))
            return data.array.map_blocks(np.clip, lo, hi, dtype=data.dtype)
        return self._checked_input(X, "transform")


def _bounds_in_part(X, eps: float, part, random_state):
    """Private bounds as a step of a pipeline: every release draws from the step's line items
    of the pipeline's plan (booked before any data was read), so the noisy record count is
    charged when it is drawn and a refusal on it has spent the budget (refusals are releases)."""
    plan_bounds_items(part, eps, X.shape[1])
    source = resolve_random_state(random_state)
    report = PrivacyReport(estimator="private_bounds", planned=part.reserved(),
                           random_source=source.description)
    found = private_bounds(X, eps, plan=part, mech=Mechanisms(source, report, part))
    report.planned = part.planned()
    part.write_into(report)
    part.check_ledger(report)
    return found
