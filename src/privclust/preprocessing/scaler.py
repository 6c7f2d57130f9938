"""``PrivateScaler``: standardisation with a noisy centre and spread per feature."""

from __future__ import annotations

import numpy as np

from ..cluster._base import check_epsilon
from ..engine import NearestCentre
from ..privacy import Mechanisms, resolve_random_state
from ._base import PrivateTransformerMixin

#: Shares of the scaler's epsilon: the record count, the per-feature sums, the sums of squares.
_SHARES = (0.2, 0.4, 0.4)
#: The smallest spread released, as a share of each feature's bounds width: a noisy variance
#: at or below 0 (a constant feature, or noise) gives this spread instead of a division by 0.
MIN_SPREAD_SHARE = 1e-3


class PrivateScaler(PrivateTransformerMixin):
    """Standardise every feature, ``(x - centre) / spread``, with a private centre and spread.

    The fit releases, within the bounds (public, ``"private"``, or in a
    :class:`~privclust.pipeline.PrivatePipeline` the previous step's ``output_bounds_``):

    1. the number of records (two-sided geometric noise, ``0.2 epsilon``);
    2. per feature, the sum of the records rescaled to ``[-1, 1]`` by the bounds
       (``u = (x - mid) / half_width``; Laplace noise, L1 sensitivity ``d``, ``0.4 epsilon``);
    3. per feature, the sum of ``u^2`` (in ``[0, 1]``; Laplace, L1 sensitivity ``d``,
       ``0.4 epsilon``).

    ``centre_`` and ``scale_`` follow by post-processing (mean and standard deviation; a spread
    at or below 0 after noise becomes ``1e-3`` of the bounds width). ``transform`` clips a
    record to the bounds, as the fit did, then standardises it; ``output_bounds_`` is the image
    of the bounds, so the next step needs no bounds of its own and nothing is clipped twice.

    Parameters
    ----------
    epsilon : float, default 0.1
    bounds : (lo, hi), (d, 2) array, ``"private"`` or None
        The range the records are clipped to. None: given by the previous step of a
        :class:`~privclust.pipeline.PrivatePipeline` (required otherwise).
    random_state : None, int or Generator
    accountant : Accountant or None

    Privacy guarantee
    -----------------
    ``epsilon``-DP (add or remove one record): three releases of sensitivity 1, ``d`` and ``d``
    at 0.2, 0.4 and 0.4 of epsilon, sequential composition (with ``bounds="private"``, a tenth
    of epsilon estimates the bounds first). Sums are exact (fixed point), as in every privclust
    fit, and centred exactly: the engine forms the sums of ``x - mid`` and ``(x - mid)^2`` of the
    rounded records from their integer totals and rounds each once; the only float64 step after
    that is one division by the public ``half_width`` (or its square). So one record moves the
    exact value of each released sum by its own rescaled contribution, at most 1 per feature,
    however far the bounds lie from zero (timestamps, say).

    Examples
    --------
    >>> import numpy as np
    >>> from privclust.preprocessing import PrivateScaler
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.normal(0.05, 0.01, 50000), rng.normal(500, 100, 50000)])
    >>> scaler = PrivateScaler(epsilon=0.5, bounds=[[0, 0.1], [0, 1000]], random_state=0)
    >>> Z = scaler.fit_transform(X)
    >>> bool(np.allclose(Z.std(axis=0), 1, atol=0.05))
    True
    """

    def __init__(self, epsilon: float = 0.1, *, bounds=None, random_state=None,
                 accountant=None):
        self.epsilon = epsilon
        self.bounds = bounds
        self.random_state = random_state
        self.accountant = accountant

    def fit(self, X, y=None):
        """Release the centre and spread of every feature. ``y`` is ignored."""
        eps = check_epsilon(self.epsilon)
        plan, accountant = self._open_plan(eps, 0.0)  # checked before any data is read
        X = self._check_X(X, reset=True)
        bounds = self._fit_bounds(X)
        d = X.shape[1]
        eps_n, eps_s = _SHARES[0] * plan.epsilon, _SHARES[1] * plan.epsilon
        eps_q = plan.epsilon - eps_n - eps_s
        plan.add("record count", "two-sided geometric", "pure", eps_n)
        plan.add("feature sums", "laplace", "pure", eps_s)
        plan.add("feature sums of squares", "laplace", "pure", eps_q)
        self._reserve_plan(plan, accountant, "PrivateScaler")
        source = resolve_random_state(self.random_state)
        engine = self._make_engine(X, bounds)
        report = self._start_report(plan.reserved(), source)
        mech = Mechanisms(source, report, plan)

        mid = bounds.mean(axis=1)
        half = (bounds[:, 1] - bounds[:, 0]) / 2.0
        # the sums of x - mid and (x - mid)^2, centred exactly inside the engine (on the
        # integer totals), then one division each by a public number: centring the rounded
        # sums of x and x^2 here would lose the sensitivity to cancellation far from zero
        stats = engine.assignment_stats(NearestCentre(mid[None, :]), second_moments=True,
                                        about=mid)
        n = int(stats.counts[0])
        u_sums = stats.sums[0] / half
        u_squares = np.diag(stats.moments[0]) / (half * half)
        n_hat = float(mech.count([n], eps_n, target="record count", item="record count")[0])
        # one row each: the d sums are of the same records (L1 sensitivity d)
        s1 = mech.laplace(u_sums[None, :], float(d), eps_s, item="feature sums",
                          target="per-feature sums of rescaled records")[0]
        s2 = mech.laplace(u_squares[None, :], float(d), eps_q, item="feature sums of squares",
                          target="per-feature sums of squared rescaled records")[0]
        n_hat = max(n_hat, 1.0)
        mean_u = np.clip(s1 / n_hat, -1.0, 1.0)
        var_u = s2 / n_hat - mean_u**2
        spread_u = np.sqrt(np.maximum(var_u, (2.0 * MIN_SPREAD_SHARE) ** 2))
        self.centre_ = mid + half * mean_u
        self.scale_ = half * spread_u
        self.n_features_in_ = d
        self.bounds_ = bounds
        self.output_bounds_ = (bounds - self.centre_[:, None]) / self.scale_[:, None]
        report.notes.append("centre and spread per feature: post-processing of the noisy count "
                            "and sums (a spread at or below 0 after noise is "
                            f"{MIN_SPREAD_SHARE:g} of the bounds width)")
        self._close_plan(plan, report, accountant)
        self.privacy_report_ = report
        return self

    def transform(self, X):
        """``(x - centre_) / scale_`` of every record clipped to the bounds (post-processing)."""
        arr = self._checked_input(X, "transform")
        return (arr - self.centre_) / self.scale_

    def inverse_transform(self, X):
        """Back to the original units."""
        self._check_fitted()
        return np.asarray(X, dtype=float) * self.scale_ + self.centre_
