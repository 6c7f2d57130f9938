"""The density ``f = -ln p`` of a released Gaussian mixture, its derivatives, and the gradient flow
that carries points to rest (Sec. 4 of the paper: the dynamical system on ``f``)."""

from __future__ import annotations

import math

import numpy as np
from scipy.integrate import solve_ivp

from ..._geometry import project_rows

_LOG_2PI = math.log(2.0 * math.pi)


# =========================================================================== the density
class MixtureField:
    """``f(x) = -ln p(x)`` of a Gaussian mixture with its gradient, Hessian and gradient flow.

    ``metric`` chooses the Riemannian metric ``R(x)`` of the gradient system (7),
    ``dx/dt = -R(x)^{-1} grad f(x)`` (Departures 23: the paper leaves R open):

    * ``"mixture"`` (default): ``R(x) = sum_k omega_k(x) Sigma_k^{-1}``, the posterior-weighted
      precision. Positive definite with condition number at most the largest ratio of the
      components' extreme precision eigenvalues, so Thm 5.3 holds. The flow is then
      ``dx/dt = R(x)^{-1} sum_k omega_k Sigma_k^{-1} mu_k - x``: affine-equivariant, rate ~1 near
      every mode whatever the component's scale (no stiffness), and its Euler step of size 1 is
      the fixed-point mode-finding iteration for Gaussian mixtures (Carreira-Perpinan 2000).
    * ``"euclidean"``: ``R = I`` in the coordinates the field is built in.

    Equilibria (SEVs, TEVs) and their Hessian indices do not depend on R; the basins do, a
    little. Components with weight 0 are left out of the density.
    """

    def __init__(self, weights, means, covariances, metric: str = "mixture"):
        w = np.asarray(weights, dtype=float).reshape(-1)
        mu = np.atleast_2d(np.asarray(means, dtype=float))
        cov = np.asarray(covariances, dtype=float)
        if cov.ndim == 2:
            cov = cov[None]
        k, d = mu.shape
        if w.shape != (k,) or cov.shape != (k, d, d):
            raise ValueError(
                f"mixture shapes do not match: weights {w.shape}, means {mu.shape}, "
                f"covariances {cov.shape}"
            )
        if not (np.isfinite(w).all() and np.isfinite(mu).all() and np.isfinite(cov).all()):
            raise ValueError("the mixture holds non-finite values")
        if (w < 0).any() or not (w > 0).any():
            raise ValueError("mixture weights must be >= 0 with at least one > 0")
        if metric not in ("mixture", "euclidean"):
            raise ValueError(f"metric must be 'mixture' or 'euclidean', got {metric!r}")
        keep = w > 0
        self.components = np.flatnonzero(keep)
        w, mu, cov = w[keep] / w[keep].sum(), mu[keep], cov[keep]
        cov = 0.5 * (cov + np.swapaxes(cov, 1, 2))
        try:
            chol = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            raise ValueError(
                "a covariance matrix is singular or not positive definite; repair it first "
                "(privclust.cluster.mixture.repair_covariances) or use reg_covar"
            ) from None
        self.metric = metric
        self.d = d
        self.weights, self.means, self.covariances = w, mu, cov
        eye = np.eye(d)
        inv_chol = np.linalg.solve(chol, np.broadcast_to(eye, cov.shape))
        self.precisions = np.swapaxes(inv_chol, 1, 2) @ inv_chol
        self.log_norm = (
            np.log(w) - np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1) - 0.5 * d * _LOG_2PI
        )
        self.prec_means = np.einsum("kij,kj->ki", self.precisions, mu)
        self._prec_flat = np.ascontiguousarray(self.precisions.reshape(len(w), d * d))

    # ------------------------------------------------------------------ evaluations
    def _terms(self, X):
        X = np.asarray(X, dtype=float)
        diff = X[None, :, :] - self.means[:, None, :]  # (k, n, d)
        Pd = np.matmul(diff, self.precisions)  # precisions are symmetric
        quad = np.einsum("knd,knd->nk", diff, Pd)
        lt = self.log_norm - 0.5 * quad
        top = lt.max(axis=1, keepdims=True)
        omega = np.exp(lt - top)
        tot = omega.sum(axis=1, keepdims=True)
        omega /= tot
        return Pd.transpose(1, 0, 2), omega, top[:, 0] + np.log(tot[:, 0])

    def f(self, X):
        """``-ln p(x)`` per row."""
        return -self._terms(np.atleast_2d(X))[2]

    def log_terms(self, X):
        """``log(pi_k N(x; mu_k, Sigma_k))`` per row and (live) component. Per-record
        arithmetic (``predict``'s likelihood shortcut reads it): ``P_k (x - mu_k)`` in blocks
        whose shape does not depend on the number of rows
        (:func:`~privclust._geometry.project_rows`), so a row's value, and the component it
        goes to at a near tie, does not depend on the other rows."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        out = np.empty((X.shape[0], self.means.shape[0]))
        for c in range(self.means.shape[0]):
            diff = X - self.means[c]
            # (x - mu) P: P symmetric, passed as the map whose transpose multiplies
            Pd = project_rows(X, self.means[c], self.precisions[c].T)
            out[:, c] = self.log_norm[c] - 0.5 * np.einsum("nd,nd->n", diff, Pd)
        return out

    def grad(self, X):
        """``grad f = sum_k omega_k Sigma_k^{-1} (x - mu_k)`` per row."""
        Pd, omega, _ = self._terms(np.atleast_2d(X))
        return np.einsum("nk,nkd->nd", omega, Pd)

    def hess(self, X):
        """``sum_k omega_k (P_k - g_k g_k^T) + g g^T`` with ``g_k = P_k (x - mu_k)``."""
        Pd, omega, _ = self._terms(np.atleast_2d(X))
        g = np.einsum("nk,nkd->nd", omega, Pd)
        A = (omega @ self._prec_flat).reshape(-1, self.d, self.d)
        B = np.swapaxes(Pd, 1, 2) @ (omega[:, :, None] * Pd)
        return A - B + g[:, :, None] * g[:, None, :]

    def metric_matrix(self, X):
        """``R(x)`` per row."""
        X = np.atleast_2d(X)
        if self.metric == "euclidean":
            return np.broadcast_to(np.eye(self.d), (X.shape[0], self.d, self.d)).copy()
        _, omega, _ = self._terms(X)
        return (omega @ self._prec_flat).reshape(-1, self.d, self.d)

    def velocity(self, X):
        """The right-hand side of (7), ``-R(x)^{-1} grad f(x)``, per row."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        Pd, omega, _ = self._terms(X)
        g = np.einsum("nk,nkd->nd", omega, Pd)
        if self.metric == "euclidean":
            return -g
        R = (omega @ self._prec_flat).reshape(-1, self.d, self.d)
        return -np.linalg.solve(R, g[:, :, None])[:, :, 0]


# =========================================================================== integration
def _solve_ivp_stacked(field: MixtureField, X, t_span, rtol=1e-6, atol=1e-9, velocity=None):
    """Integrate (7) for all rows of X together with scipy's solve_ivp (the rows are independent,
    so one stacked system integrates them at once)."""
    X = np.asarray(X, dtype=float)
    if X.size == 0 or t_span <= 0:
        return X.copy()
    d = X.shape[1]
    vel = velocity or field.velocity

    def rhs(_t, y):
        return vel(y.reshape(-1, d)).ravel()

    sol = solve_ivp(rhs, (0.0, float(t_span)), X.ravel(), method="RK45", rtol=rtol, atol=atol)
    return sol.y[:, -1].reshape(X.shape)


def _rest_measure(field: MixtureField, X):
    """How far a point is from rest: ``|R_mix(x)^{-1} grad f(x)|`` (about the distance to the
    nearest equilibrium under either metric)."""
    X = np.atleast_2d(X)
    Pd, omega, _ = field._terms(X)
    g = np.einsum("nk,nkd->nd", omega, Pd)
    R = (omega @ field._prec_flat).reshape(-1, field.d, field.d)
    return np.linalg.norm(np.linalg.solve(R, g[:, :, None])[:, :, 0], axis=1)


def integrate_to_rest(
    field: MixtureField, X, tol=1e-3, t_chunk=8.0, max_time=1000.0, rtol=1e-5, atol=1e-8
):
    """Integrate (7) with solve_ivp from every row until it is near rest (Alg. 3 l. 19), then
    finish with Newton steps on grad f = 0 (quadratic convergence to the equilibrium the
    trajectory is approaching)."""
    X = np.array(X, dtype=float)
    todo = np.arange(X.shape[0])
    elapsed = 0.0
    while todo.size and elapsed < max_time:
        X[todo] = _solve_ivp_stacked(field, X[todo], t_chunk, rtol=rtol, atol=atol)
        elapsed += t_chunk
        todo = todo[_newton_distance(field, X[todo]) > tol]
        t_chunk = min(2.0 * t_chunk, max_time - elapsed)
    return _newton(field, X, max_step=10 * tol)


def _newton_distance(field: MixtureField, X):
    """``|H^{-1} grad f|`` where the Hessian is positive definite (the distance to the minimum
    being approached), infinity elsewhere (not yet near a stable equilibrium)."""
    X = np.atleast_2d(X)
    if not len(X):
        return np.zeros(0)
    H = field.hess(X)
    ev = np.linalg.eigvalsh(H)
    out = np.full(len(X), np.inf)
    pd = ev[:, 0] > 1e-12 * np.maximum(ev[:, -1], 1e-300)
    if pd.any():
        step = np.linalg.solve(H[pd], field.grad(X[pd])[:, :, None])[:, :, 0]
        out[pd] = np.linalg.norm(step, axis=1)
    return out


def flow_to_rest(
    field: MixtureField, X, tol=1e-4, atol=1e-4, rtol=1e-3, max_steps=1000, h0=0.25, h_max=1.5
):
    """Follow (7) from every row to rest, vectorised over rows: an embedded Runge-Kutta 2(3)
    (Bogacki-Shampine) with one adaptive step size per row, rows frozen once at rest.

    This is the inductive assignment of Thm 5.3 (``predict``); it integrates the same system
    as :func:`integrate_to_rest` with looser tolerances and no per-call overhead, so all points
    of a data set go through a few dozen NumPy passes. ``h_max`` keeps the steps inside the
    method's stability region near a mode (with the mixture metric the linearised flow there has
    rates in (0, 1]), so trajectories converge instead of hovering at the error tolerance.
    Returns the end points and the number of steps.
    """
    X = np.array(X, dtype=float)
    n = X.shape[0]
    if n == 0:
        return X, 0
    if field.metric == "euclidean":  # time runs at the speed of the stiffest component
        stiff = float(np.linalg.eigvalsh(field.precisions)[:, -1].max())
        h0, h_max = h0 / stiff, h_max / stiff
    h = np.full(n, float(h0))
    k1 = field.velocity(X)
    active = np.flatnonzero(_rest_measure(field, X) > tol)
    steps = 0
    while active.size and steps < max_steps:
        steps += 1
        x, v1, hh = X[active], k1[active], h[active][:, None]
        v2 = field.velocity(x + 0.5 * hh * v1)
        v3 = field.velocity(x + 0.75 * hh * v2)
        xn = x + hh * (2.0 / 9.0 * v1 + 1.0 / 3.0 * v2 + 4.0 / 9.0 * v3)
        v4 = field.velocity(xn)
        err = hh * (-5.0 / 72.0 * v1 + 1.0 / 12.0 * v2 + 1.0 / 9.0 * v3 - 1.0 / 8.0 * v4)
        scale = atol + rtol * np.maximum(np.abs(x), np.abs(xn))
        enorm = np.sqrt(np.mean((err / scale) ** 2, axis=1))
        ok = enorm <= 1.0
        acc = active[ok]
        X[acc] = xn[ok]
        k1[acc] = v4[ok]
        factor = np.clip(0.9 * np.maximum(enorm, 1e-10) ** (-1.0 / 3.0), 0.2, 5.0)
        h[active] = np.minimum(hh[:, 0] * factor, h_max)
        if acc.size:
            rest = _rest_measure(field, X[acc]) <= tol
            done = acc[rest]
            if done.size:
                active = np.setdiff1d(active, done, assume_unique=True)
    return X, steps


def _newton(field: MixtureField, X, max_iter=60, tol=1e-11, max_step=0.25):
    """Batched Newton on grad f = 0 (a root of any index) with a backtracking line search on
    ``|grad f|^2``: the Newton direction always decreases it, so each iterate stays near where
    it started and converges to a nearby equilibrium instead of jumping across the space."""
    X = np.array(X, dtype=float)
    if X.size == 0:
        return X
    g = field.grad(X)
    gn = np.linalg.norm(g, axis=1)
    active = np.flatnonzero(gn > 0)
    for _ in range(max_iter):
        if not active.size:
            break
        x, ga = X[active], g[active]
        H = field.hess(x)
        try:
            step = np.linalg.solve(H, ga[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            step = np.array(
                [np.linalg.lstsq(h, gi, rcond=None)[0] for h, gi in zip(H, ga, strict=True)]
            )
        norm = np.linalg.norm(step, axis=1)
        step *= np.minimum(1.0, max_step / np.maximum(norm, 1e-300))[:, None]
        alpha = np.ones(len(active))
        todo = np.arange(len(active))
        for _ls in range(30):
            trial = x[todo] - alpha[todo, None] * step[todo]
            gt = field.grad(trial)
            better = np.linalg.norm(gt, axis=1) < gn[active[todo]] * (1 - 1e-4 * alpha[todo])
            idx = active[todo[better]]
            X[idx], g[idx] = trial[better], gt[better]
            gn[idx] = np.linalg.norm(gt[better], axis=1)
            todo = todo[~better]
            if not todo.size:
                break
            alpha[todo] /= 2.0
        moved = alpha * np.minimum(norm, max_step)
        keep = (moved > tol) & (gn[active] > 0)
        keep[todo] = False  # no decrease possible: a minimum of |grad f| (or converged)
        active = active[keep]
    return X
