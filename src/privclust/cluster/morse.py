"""Morse-theory dynamical processing: merge the components of a private mixture along the
transition equilibrium vectors (TEVs) of ``f = -ln p``.

Byun, Choi, Lee, "Improving the Utility of Differentially Private Clustering through Dynamical
Processing" (``shared/papers/000``): Alg. 1 (the pipeline), Alg. 3 (TEVGraph), Alg. 4
(MergeCluster), Thm 5.3 (inductive prediction) and Thm 5.4 (post-processing), with the choices of
``shared/papers/NOTES.md`` item 23.

Everything here except :meth:`MorseMerging.fit`'s optional covariance pass (Sec. 5.1.2, for
centre-only base models) works on the released mixture alone: no data is read.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings

import numpy as np
from scipy import linalg as sla
from scipy.cluster import hierarchy
from scipy.integrate import solve_ivp
from scipy.optimize import root
from sklearn.base import BaseEstimator, ClusterMixin, clone
from threadpoolctl import threadpool_limits

from ..privacy import (
    NOISY_N_SHARE,
    Accountant,
    Budget,
    Mechanisms,
    PrivacyPlan,
    PrivacyReport,
    Release,
    resolve_random_state,
    zcdp_to_approx_dp,
)
from ._base import (
    check_bounds,
    check_data,
    check_delta,
    check_epsilon,
    check_X,
    feature_names,
    nearest_centre,
    raise_not_fitted,
)
from .mixture import (
    DPGaussianMixture,
    _unit_engine,
    _unit_map,
    private_centre_covariances,
)

__all__ = [
    "MixtureField",
    "MorseMerging",
    "find_tevs",
    "flow_to_rest",
    "merge_clusters",
]

_LOG_2PI = math.log(2.0 * math.pi)


# =========================================================================== the density
class MixtureField:
    """``f(x) = -ln p(x)`` of a Gaussian mixture with its gradient, Hessian and gradient flow.

    ``metric`` chooses the Riemannian metric ``R(x)`` of the gradient system (7),
    ``dx/dt = -R(x)^{-1} grad f(x)`` (NOTES 23: the paper leaves R open):

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
        """``log(pi_k N(x; mu_k, Sigma_k))`` per row and (live) component."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        out = np.empty((X.shape[0], self.means.shape[0]))
        for c in range(self.means.shape[0]):
            diff = X - self.means[c]
            out[:, c] = self.log_norm[c] - 0.5 * np.einsum(
                "nd,nd->n", diff, diff @ self.precisions[c]
            )
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


# =========================================================================== equilibria
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


def _polish(field: MixtureField, x0):
    """Alg. 3 l. 13: scipy.optimize.root on grad f = 0 with the analytic Hessian as Jacobian."""
    sol = root(
        lambda x: field.grad(x[None])[0],
        x0,
        jac=lambda x: field.hess(x[None])[0],
        method="hybr",
        options={"xtol": 1e-12},
    )
    x = sol.x
    if not np.isfinite(x).all():
        return x0
    g_new = np.linalg.norm(field.grad(x[None])[0])
    g_old = np.linalg.norm(field.grad(np.asarray(x0)[None])[0])
    return x if g_new <= g_old else np.asarray(x0, dtype=float)


def _dedupe(X, tol):
    """Indices of representatives and, for every row, the index of its representative."""
    reps: list[int] = []
    which = np.empty(X.shape[0], dtype=np.int64)
    for i, x in enumerate(X):
        if reps:
            dist = np.linalg.norm(X[reps] - x, axis=1)
            j = int(np.argmin(dist))
            if dist[j] <= tol:
                which[i] = j
                continue
        which[i] = len(reps)
        reps.append(i)
    return np.asarray(reps, dtype=np.int64), which


def _index(field: MixtureField, X, rel_tol=1e-9):
    """Number of negative Hessian eigenvalues and whether the point is hyperbolic."""
    ev = np.linalg.eigvalsh(field.hess(np.atleast_2d(X)))
    scale = np.abs(ev).max(axis=1)
    hyperbolic = np.abs(ev).min(axis=1) > rel_tol * np.maximum(scale, 1e-300)
    return (ev < 0).sum(axis=1), hyperbolic


def find_sevs(field: MixtureField, starts, tol=1e-6):
    """Stable equilibria reached from ``starts`` (Alg. 3 uses the centres as vertices; here each
    centre is flowed to its SEV so that centres in one basin share a vertex). Returns
    ``(sevs, which)`` with ``which[i]`` the SEV of start i."""
    ends = integrate_to_rest(field, starts)
    reps, which = _dedupe(ends, tol * 100)
    sevs = np.array([_polish(field, ends[r]) for r in reps]).reshape(len(reps), field.d)
    return sevs, which


def _relax_on_hyperplanes(field: MixtureField, X, tau, t_span):
    """Alg. 3 l. 7 and 12, "integrate (7) from m^t": the flow restricted to the hyperplane
    through m^t normal to the string (NOTES 23). The plain flow would slide down the string to
    a centre, since near a TEV the string runs along the unstable direction; on the hyperplane
    the point descends to the string's crossing of the valley floor, which is what the next
    quadratic string is bent through."""
    if field.d == 1 or X.shape[0] == 0:
        return X
    d = field.d

    def vel(Y):
        # steepest descent of f in the metric R restricted to {v : tau . v = 0}:
        # v = -(R^-1 g - (tau . R^-1 g) / (tau . R^-1 tau) R^-1 tau)
        Pd, omega, _ = field._terms(Y)
        g = np.einsum("nk,nkd->nd", omega, Pd)
        if field.metric == "euclidean":
            return -(g - np.einsum("nd,nd->n", tau, g)[:, None] * tau)
        R = (omega @ field._prec_flat).reshape(-1, d, d)
        ab = np.linalg.solve(R, np.stack([g, tau], axis=2))
        a, b = ab[:, :, 0], ab[:, :, 1]
        lam = np.einsum("nd,nd->n", tau, a) / np.einsum("nd,nd->n", tau, b)
        return -(a - lam[:, None] * b)

    if field.metric == "euclidean":  # time runs at the speed of the stiffest component
        return _solve_ivp_stacked(field, X, t_span, rtol=1e-3, atol=1e-6, velocity=vel).reshape(
            -1, d
        )
    # mixture metric: rates in (0, 1] near a mode, so fixed midpoint steps of at most 1/8 are
    # well inside the stability region. The relaxation only places the point the next string
    # is bent through (Newton then finds the root; string_time 0 and 0.25 give the same
    # hierarchy), so its accuracy does not matter and 2 steps cost 4 evaluations against ~19
    # of an adaptive RK45 at rtol 1e-3.
    n_steps = max(1, math.ceil(float(t_span) / 0.125))
    h = float(t_span) / n_steps
    Y = np.array(X, dtype=float)
    for _ in range(n_steps):
        Y = Y + h * vel(Y + 0.5 * h * vel(Y))
    return Y


def find_tevs(
    field: MixtureField,
    centres,
    *,
    n_points=20,
    n_iter=5,
    perturbation=0.05,
    string_time=0.25,
    sevs=None,
    sev_of_centre=None,
    tol=1e-6,
):
    """Alg. 3 (TEVGraph), vectorised over all pairs of centres.

    For every pair ``(k, l)``: the point of largest ``f`` among ``n_points`` on the segment,
    relaxed (:func:`_relax_on_hyperplanes`); ``n_iter`` times the quadratic string through it
    (l. 9-12); then a root of ``grad f`` from there (batched Newton, then
    ``scipy.optimize.root``, l. 13). Distinct roots with Hessian index 1 (l. 16) are perturbed
    by ``+-perturbation`` along the unstable eigenvector of the linearised flow (for R = I the
    Hessian's negative eigenvector, l. 17-18) and both points are integrated to rest (l. 19);
    the root is a TEV when they reach different SEVs (l. 20). When both reach the same SEV the
    check is repeated once at a tenth of the perturbation (a larger step can overshoot a
    narrow basin).

    Returns a dict: ``sevs`` (s, d), ``sev_of_centre`` (K,), ``tevs`` (t, d), ``tev_values``
    (t,) f at the TEVs, ``tev_edges`` (t, 2) SEV indices, ``index1`` (all index-1 roots found),
    ``line_barrier`` (K, K) the largest f on each straight segment (fallback for MergeCluster).
    """
    centres = np.atleast_2d(np.asarray(centres, dtype=float))
    K, d = centres.shape
    if sevs is None:
        sevs, sev_of_centre = find_sevs(field, centres)
    sevs = np.asarray(sevs, dtype=float).reshape(-1, d)
    out = {
        "sevs": sevs,
        "sev_of_centre": np.asarray(sev_of_centre, dtype=np.int64),
        "tevs": np.zeros((0, d)),
        "tev_values": np.zeros(0),
        "tev_edges": np.zeros((0, 2), dtype=np.int64),
        "index1": np.zeros((0, d)),
        "line_barrier": np.full((K, K), np.nan),
    }
    if K < 2:
        return out
    ka, la = np.triu_indices(K, k=1)
    x, barrier = _string_search(
        field, centres[ka], centres[la], int(n_points), int(n_iter), string_time
    )
    out["line_barrier"][ka, la] = out["line_barrier"][la, ka] = barrier
    cand = _index1_roots(field, x, tol)
    ends, sevs = _classify(field, cand, perturbation, sevs)
    # SEVs left in different components of the graph: search once more between the SEVs
    # themselves (the true minima; a string between two centres can miss a curved valley)
    comp = _components(len(sevs), ends)
    if len(set(comp.tolist())) > 1 and len(sevs) > 1:
        sa, sb = np.triu_indices(len(sevs), k=1)
        cross = comp[sa] != comp[sb]
        if cross.any():
            x2, _ = _string_search(
                field, sevs[sa[cross]], sevs[sb[cross]], int(n_points), int(n_iter), string_time
            )
            new = _index1_roots(field, x2, tol)
            if len(cand) and len(new):
                dist = np.linalg.norm(new[:, None, :] - cand[None], axis=2).min(axis=1)
                new = new[dist > tol * 100]
            if len(new):
                ends2, sevs = _classify(field, new, perturbation, sevs)
                cand = np.vstack([cand, new])
                ends = np.vstack([ends, ends2])
    out["sevs"] = sevs
    out["index1"] = cand
    if not len(cand):
        return out
    is_tev = (ends[:, 0] != ends[:, 1]) & (ends >= 0).all(axis=1)
    out["tevs"] = cand[is_tev]
    out["tev_values"] = field.f(cand[is_tev]) if is_tev.any() else np.zeros(0)
    out["tev_edges"] = np.sort(ends[is_tev], axis=1)
    return out


def _root(parent, a):
    """Root of ``a`` in a union-find forest held as a parent list or dict (path halving: the
    roots never change, only the paths to them shorten)."""
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a

def _components(n, edges):
    parent = list(range(n))

    def find(a):
        return _root(parent, a)

    for a, b in np.asarray(edges, dtype=np.int64).reshape(-1, 2):
        if a >= 0 and b >= 0 and a != b:
            parent[find(int(a))] = find(int(b))
    return np.array([find(i) for i in range(n)], dtype=np.int64)


def _string_search(field, A, B, m, n_iter, string_time):
    """Alg. 3 l. 6-12 for the pairs ``(A[p], B[p])``, all at once: the point of largest f on
    the segment, relaxed, then ``n_iter`` quadratic strings bent through the last point.
    Returns the points and the largest f on each straight segment."""
    d = field.d
    P = A.shape[0]
    s = np.arange(1, m + 1) / (m + 1.0)
    u = B - A
    pts = A[:, None, :] + s[None, :, None] * u[:, None, :]
    fv = field.f(pts.reshape(-1, d)).reshape(P, m)
    best = np.argmax(fv, axis=1)
    barrier = fv.max(axis=1)
    x = pts[np.arange(P), best]
    tau = u / np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-300)
    x = _relax_on_hyperplanes(field, x, tau, string_time)
    for _ in range(n_iter):
        bend = 4.0 * (x - A) - 2.0 * u
        pts = (
            A[:, None, :]
            + s[None, :, None] * u[:, None, :]
            + (s - s * s)[None, :, None] * bend[:, None, :]
        )
        fv = field.f(pts.reshape(-1, d)).reshape(P, m)
        best = np.argmax(fv, axis=1)
        x = pts[np.arange(P), best]
        # tangent of the quadratic string at the chosen point
        tan = u + (1.0 - 2.0 * s[best])[:, None] * bend
        tau = tan / np.maximum(np.linalg.norm(tan, axis=1, keepdims=True), 1e-300)
        x = _relax_on_hyperplanes(field, x, tau, string_time)
    return x, barrier


def _index1_roots(field, x, tol):
    """Alg. 3 l. 13-16: roots of grad f from the string points (batched Newton, then
    scipy.optimize.root), distinct, with Hessian index 1."""
    d = field.d
    x = _newton(field, x)
    x = x[np.isfinite(x).all(axis=1)]
    reps, _ = _dedupe(x, 1e-4)
    x = x[reps]
    if len(x):  # only index-1 roots go on (l. 16); Newton has already converged on them
        n_neg, _ = _index(field, x)
        x = x[n_neg == 1]
    scale = np.linalg.norm(field.precisions, axis=(1, 2)).max()
    cand = x.reshape(len(x), d).copy()
    gnorm = np.linalg.norm(field.grad(cand), axis=1) if len(cand) else np.zeros(0)
    # polish only where the batched Newton has not already met the acceptance test (the
    # polish never makes a root worse, so this changes no outcome, only the time)
    for i in np.flatnonzero(gnorm > 1e-8 * max(scale, 1.0)):
        cand[i] = _polish(field, cand[i])
        gnorm[i] = np.linalg.norm(field.grad(cand[i][None])[0])
    cand = cand[gnorm <= 1e-8 * max(scale, 1.0)]
    if len(cand):
        reps, _ = _dedupe(cand, tol)
        cand = cand[reps]
        n_neg, hyper = _index(field, cand)
        cand = cand[(n_neg == 1) & hyper]
    return cand


def _classify(field, cand, perturbation, sevs):
    """Alg. 3 l. 17-20: the SEVs reached from ``cand +- perturbation e`` (e: the unstable
    direction of the linearised flow); a second try at a tenth of the step where both sides
    reach the same SEV (a larger step can overshoot a narrow basin)."""
    if not len(cand):
        return np.zeros((0, 2), dtype=np.int64), sevs
    H = field.hess(cand)
    R = field.metric_matrix(cand)
    e = np.empty_like(cand)
    for i in range(len(cand)):
        _, vec = sla.eigh(H[i], R[i], subset_by_index=[0, 0])
        e[i] = vec[:, 0] / np.linalg.norm(vec[:, 0])
    ends, sevs = _basins(field, cand, e, perturbation, sevs)
    same = ends[:, 0] == ends[:, 1]
    if same.any():  # once more, closer to the TEV
        ends[same], sevs = _basins(field, cand[same], e[same], perturbation / 10.0, sevs)
    return ends, sevs


def _basins(field: MixtureField, points, e, eps, sevs, tol=1e-5):
    """SEV index reached from ``points +- eps e`` (columns 0: +, 1: -) and the SEVs: end points
    near no known SEV that are local minima become new SEVs."""
    starts = np.concatenate([points + eps * e, points - eps * e])
    # the end points only have to name a basin: the vectorised flow of ``predict`` (one step
    # size per row, rows frozen once at rest, ~1e-4 from the equilibrium), then Newton onto it
    ends, _ = flow_to_rest(field, starts)
    ends = _newton(field, ends, max_step=1e-3)
    sevs = np.asarray(sevs, dtype=float)
    n = len(points)
    which = np.full(2 * n, -1, dtype=np.int64)
    if len(sevs):
        dist = np.linalg.norm(ends[:, None, :] - sevs[None], axis=2)
        near = dist.min(axis=1) <= tol * 100
        which[near] = np.argmin(dist[near], axis=1)
    for i in np.flatnonzero(which < 0):
        x = ends[i]
        if len(sevs):
            dist = np.linalg.norm(sevs - x, axis=1)
            j = int(np.argmin(dist))
            if dist[j] <= tol * 100:
                which[i] = j
                continue
        n_neg, hyper = _index(field, x)
        if n_neg[0] == 0 and hyper[0]:
            sevs = np.vstack([sevs, _polish(field, x)[None]])
            which[i] = len(sevs) - 1
    return np.column_stack([which[:n], which[n:]]), sevs


# =========================================================================== Alg. 4
def merge_clusters(
    sev_of_leaf,
    sev_values,
    tev_edges,
    tev_values,
    line_barrier=None,
    weights=None,
    means=None,
    merge_order="barrier",
):
    """Alg. 4 (MergeCluster) for the whole hierarchy, as a SciPy linkage matrix over the leaves.

    Leaves are the centres. Centres whose flow reaches the same SEV lie in one basin cell and
    merge first, at height 0. The density has no barrier between them, so their order only
    matters when fewer basins than clusters are wanted; it is then Ward's criterion on the
    components (``weights`` and ``means`` given): the pair whose merge least increases the
    weighted within-cluster scatter, ``w_a w_b / (w_a + w_b) |m_a - m_b|^2``, merges first (the
    k-means objective of the model itself; a light or central component never ends up alone,
    which a barrier along a straight segment, the order without weights, does to a broad
    low-weight component). Then the TEV edges in increasing ``f`` (single linkage, Alg. 4
    l. 11): a merge joins the clusters holding the two SEVs. Heights are
    ``f(TEV) - min_j f(SEV_j)`` (NOTES 23: ``f = -ln p`` may be negative, SciPy needs
    non-negative heights; a constant shift keeps the order). If the TEV graph is disconnected,
    the remaining clusters are joined by the largest ``f`` on the straight segment between their
    closest-in-barrier centres (an upper bound on the true merge level), heights kept monotone;
    the count of such merges is returned.

    Returns ``(Z, n_fallback)``; ``Z`` is (n_leaves - 1, 4) with finite, non-negative, monotone
    heights.
    """
    sev_of_leaf = np.asarray(sev_of_leaf, dtype=np.int64)
    n = sev_of_leaf.size
    n_sev = len(sev_values)
    f_ref = float(np.min(sev_values)) if n_sev else 0.0
    parent = list(range(n_sev))

    def find(a):
        return _root(parent, a)

    comp_cluster: dict[int, int] = {}
    sizes = {i: 1 for i in range(n)}
    rows: list[list[float]] = []
    next_id = n
    last = 0.0

    def join(ca, cb, h):
        nonlocal next_id, last
        h = max(float(h), last, 0.0)
        last = h
        rows.append([min(ca, cb), max(ca, cb), h, sizes[ca] + sizes[cb]])
        sizes[next_id] = sizes[ca] + sizes[cb]
        next_id += 1
        return next_id - 1

    # centres in one basin cell: height 0 (see the docstring for the order)
    lb = np.asarray(line_barrier if line_barrier is not None else np.zeros((n, n)), float)
    lparent = list(range(n))
    cid = list(range(n))

    def lroot(a):
        return _root(lparent, a)

    if weights is not None and means is not None:
        w = np.asarray(weights, dtype=float).copy()
        m = np.atleast_2d(np.asarray(means, dtype=float)).copy()
        alive = np.ones(n, dtype=bool)
        inf = np.inf
        while True:  # n <= a few dozen leaves: O(n^3) in NumPy is negligible
            same = (sev_of_leaf[:, None] == sev_of_leaf[None, :]) & alive[:, None] & alive[None]
            np.fill_diagonal(same, False)
            if not same.any():
                break
            d2 = ((m[:, None, :] - m[None, :, :]) ** 2).sum(axis=2)
            ww = w[:, None] * w[None, :] / np.maximum(w[:, None] + w[None, :], 1e-300)
            cost = np.where(same, ww * d2, inf)
            a, b = np.unravel_index(np.argmin(cost), cost.shape)
            a, b = (int(a), int(b)) if a < b else (int(b), int(a))
            m[a] = (w[a] * m[a] + w[b] * m[b]) / max(w[a] + w[b], 1e-300)
            w[a] += w[b]
            alive[b] = False
            lparent[b] = a
            cid[a] = join(cid[a], cid[b], 0.0)
    else:  # increasing straight-segment barrier
        ii, jj = np.triu_indices(n, k=1)
        same = sev_of_leaf[ii] == sev_of_leaf[jj]
        ii, jj = ii[same], jj[same]
        for t in np.argsort(np.nan_to_num(lb[ii, jj], nan=np.inf), kind="stable"):
            ra, rb = lroot(int(ii[t])), lroot(int(jj[t]))
            if ra != rb:
                lparent[rb] = ra
                cid[ra] = join(cid[ra], cid[rb], 0.0)
    for i in range(n):
        comp_cluster[int(sev_of_leaf[i])] = cid[lroot(i)]
    tv = np.asarray(tev_values, dtype=float).reshape(-1)
    edges = np.asarray(tev_edges, dtype=np.int64).reshape(-1, 2)
    order = np.argsort(tv, kind="stable")
    if merge_order == "persistence":
        # the elder rule of 0-dimensional persistence: sweep the TEVs upwards; where two
        # components of {f <= f(TEV)} meet, the one with the higher minimum (the younger mode)
        # dies, with persistence f(TEV) - its minimum; the merges are then replayed in
        # increasing persistence
        birth = np.asarray(sev_values, dtype=float).copy()
        p0 = list(range(n_sev))

        def find0(a):
            return _root(p0, a)

        events = []
        for t in order:
            ra, rb = find0(int(edges[t, 0])), find0(int(edges[t, 1]))
            if ra == rb:
                continue
            young, old = (ra, rb) if birth[ra] >= birth[rb] else (rb, ra)
            p0[young] = old
            events.append((float(tv[t] - birth[young]), young, old))
        seq = [
            events[i][1:] + (events[i][0],)
            for i in sorted(range(len(events)), key=lambda i: events[i][0])
        ]
    else:
        seq = [(int(edges[t, 0]), int(edges[t, 1]), float(tv[t]) - f_ref) for t in order]
    for a, b, h in seq:
        ra, rb = find(a), find(b)
        if ra == rb:
            continue
        parent[rb] = ra
        ca, cb = comp_cluster.pop(ra, None), comp_cluster.pop(rb, None)
        if ca is not None and cb is not None:
            comp_cluster[ra] = join(ca, cb, h)
        elif ca is not None or cb is not None:
            comp_cluster[ra] = ca if ca is not None else cb
    n_fallback = 0
    if len(comp_cluster) > 1:
        # clusters of the leaves at this point
        leaf_cluster = {}
        for r in comp_cluster:
            for i in range(n):
                if find(int(sev_of_leaf[i])) == r:
                    leaf_cluster[i] = r
        ii, jj = np.triu_indices(n, k=1)
        w = np.nan_to_num(lb[ii, jj], nan=np.inf)
        lparent = {r: r for r in comp_cluster}

        def lfind(a):
            return _root(lparent, a)

        for t in np.argsort(w, kind="stable"):
            ra, rb = lfind(leaf_cluster[ii[t]]), lfind(leaf_cluster[jj[t]])
            if ra == rb:
                continue
            lparent[rb] = ra
            height = w[t] - f_ref if np.isfinite(w[t]) else last
            comp_cluster[ra] = join(comp_cluster[ra], comp_cluster.pop(rb), height)
            n_fallback += 1
    Z = np.asarray(rows, dtype=float).reshape(-1, 4)
    return Z, n_fallback


def cut_linkage(
    Z, n_leaves: int, n_clusters: int, weights=None, min_cluster_weight: float = 0.0
) -> np.ndarray:
    """Labels of the leaves after the merges of ``Z`` that leave ``n_clusters`` clusters
    (Alg. 4 l. 8), numbered 0.. in order of their smallest leaf.

    Without ``weights`` (or with ``min_cluster_weight = 0``) this is the first
    ``n_leaves - n_clusters`` merges. With them, clusters whose total weight is below
    ``min_cluster_weight`` are *runts* (Stuetzle 2003's runt pruning, HDBSCAN's minimum cluster
    size): they may not take one of the ``n_clusters`` places while enough heavier clusters
    exist. The merges are applied in the order of ``Z`` (Kruskal on the leaves), except that a
    merge of two non-runts is skipped while there are at most ``n_clusters`` non-runts; it
    stops at ``n_clusters`` clusters. A runt is thereby joined to the cluster it meets first in
    the hierarchy (its lowest barrier); if fewer than ``n_clusters`` non-runts can be formed,
    runts fill the remaining places in the order of ``Z`` (the plain cut's choice).
    """
    n_clusters = max(int(n_clusters), 1)
    if weights is None or not min_cluster_weight > 0:
        parent = list(range(n_leaves + len(Z)))

        def find(a):
            return _root(parent, a)

        for i in range(max(n_leaves - n_clusters, 0)):
            a, b = int(Z[i, 0]), int(Z[i, 1])
            parent[find(a)] = n_leaves + i
            parent[find(b)] = n_leaves + i
        roots = [find(i) for i in range(n_leaves)]
    else:
        w = np.asarray(weights, dtype=float).reshape(n_leaves)
        rep = list(range(n_leaves))  # one leaf of every node of Z
        for i in range(len(Z)):
            rep.append(rep[int(Z[i, 0])])
        parent = list(range(n_leaves))

        def find(a):
            return _root(parent, a)

        mass = {i: float(w[i]) for i in range(n_leaves)}
        thr = float(min_cluster_weight)
        n_total = n_leaves
        n_big = sum(m >= thr for m in mass.values())
        for i in range(len(Z)):
            if n_total <= n_clusters:
                break
            ra, rb = find(rep[int(Z[i, 0])]), find(rep[int(Z[i, 1])])
            if ra == rb:
                continue
            big_a, big_b = mass[ra] >= thr, mass[rb] >= thr
            if big_a and big_b and n_big <= n_clusters:
                continue
            parent[rb] = ra
            mass[ra] += mass.pop(rb)
            n_total -= 1
            n_big += int(mass[ra] >= thr) - int(big_a) - int(big_b)
        roots = [find(i) for i in range(n_leaves)]
    first: dict[int, int] = {}
    return np.array([first.setdefault(r, len(first)) for r in roots], dtype=np.int64)


# =========================================================================== estimator
def pool_centres(centres, sizes=None, max_components: int = 20):
    """Ward agglomeration of a centre model's public centres down to ``max_components``
    (post-processing of released values: the centres and the noisy cluster sizes).

    A centre model may release many more centres than the Morse step needs (DPM finds 60-80
    leaves on uci_shuttle and uci_magic, most holding a few hundred records), and the TEV search
    costs about ``K0^3`` field evaluations. While more than ``max_components`` centres remain,
    the pair whose merge least increases the size-weighted scatter,
    ``n_a n_b / (n_a + n_b) |c_a - c_b|^2``, is replaced by its size-weighted mean. Sizes are the
    released noisy sizes clipped at 1 (equal if none are released). Returns the pooled centres
    and, for every input centre, the index of its pooled centre.
    """
    c = np.atleast_2d(np.asarray(centres, dtype=float)).copy()
    k = c.shape[0]
    owner = np.arange(k)
    if k <= max_components:
        return c, owner
    n = np.ones(k) if sizes is None else np.maximum(np.asarray(sizes, dtype=float), 1.0).copy()
    alive = np.ones(k, dtype=bool)
    d2 = ((c[:, None, :] - c[None, :, :]) ** 2).sum(axis=2)
    for _ in range(k - max(int(max_components), 1)):
        idx = np.flatnonzero(alive)
        nn = n[idx]
        cost = nn[:, None] * nn[None, :] / (nn[:, None] + nn[None, :]) * d2[np.ix_(idx, idx)]
        np.fill_diagonal(cost, np.inf)
        i, j = np.unravel_index(np.argmin(cost), cost.shape)
        a, b = int(idx[min(i, j)]), int(idx[max(i, j)])
        c[a] = (n[a] * c[a] + n[b] * c[b]) / (n[a] + n[b])
        n[a] += n[b]
        alive[b] = False
        owner[owner == b] = a
        d2[a] = d2[:, a] = ((c - c[a]) ** 2).sum(axis=1)
    keep = np.flatnonzero(alive)
    remap = np.full(k, -1, dtype=np.int64)
    remap[keep] = np.arange(keep.size)
    return c[keep], remap[owner]


def _is_fitted(est) -> bool:
    return hasattr(est, "means_") or hasattr(est, "cluster_centers_")


def _is_mixture(est) -> bool:
    if _is_fitted(est):
        return all(hasattr(est, a) for a in ("means_", "covariances_", "weights_"))
    return isinstance(est, DPGaussianMixture)


def _refund_if_unspent(plan) -> None:
    """Give the accountant back a pipeline's reservation when the fit stopped before any
    release (the base refused its input): nothing was published, so nothing was spent."""
    if any(i.spent_epsilon or i.spent_delta or i.spent_rho for i in plan.items.values()):
        return
    accountant, handle = plan.reservation
    accountant.settle(handle, Budget(0.0, 0.0))


def _releases_sizes(est) -> bool:
    """True when the base releases noisy cluster sizes the delta rule can use (privclust's
    centre models do; a fitted model of another kind must show ``cluster_sizes_``)."""
    if _is_fitted(est):
        return getattr(est, "cluster_sizes_", None) is not None
    from .convergent import KMeansGuarantee, SubClustering
    from .dpm import DPM
    from .lloyd import DPLloyd

    return isinstance(est, (DPM, DPLloyd, KMeansGuarantee, SubClustering))


def _base_bounds(est, d):
    b = getattr(est, "bounds_", None)
    if b is None:
        b = getattr(est, "bounds", None)
    if b is None:
        return None
    return check_bounds(b, d)


class MorseMerging(ClusterMixin, BaseEstimator):
    """Dynamical processing (000, Alg. 1): merge a private mixture's components along the TEVs
    of ``f = -ln p`` into ``n_clusters`` clusters of any shape.

    ``base_estimator`` is a privclust estimator, fitted or not: a **mixture**
    (:class:`~privclust.cluster.mixture.DPGaussianMixture`, or anything with ``weights_``,
    ``means_``, ``covariances_``), or a **centre model** (``cluster_centers_``: DPLloyd, DPM,
    KMeansGuarantee, ...), which is turned into a mixture by one private covariance pass
    (Sec. 5.1.2, :func:`~privclust.cluster.mixture.private_centre_covariances`) with its own
    budget share. Then TEVGraph (Alg. 3, :func:`find_tevs`) and MergeCluster (Alg. 4,
    :func:`merge_clusters`) build the whole hierarchy (``linkage_``).

    Privacy guarantee
    -----------------
    The Morse step (the TEV graph, the merging, the hierarchy and ``predict``) reads no data: it
    is a function of the released mixture only, so it costs nothing beyond the releases listed
    in ``privacy_report_`` (post-processing, Thm 5.4 / Remark 3.6). The total is

    * a mixture base: the base's releases;
    * a centre base: the base's releases plus the covariance pass, ``rho``-zCDP at
      ``(eps_cov, delta_cov)`` with ``rho`` the exact inverse of the ledger's conversion and
      the add/remove sensitivity (:func:`~privclust.cluster.mixture.add_remove_r`): counts,
      sums and ``sum u u^T`` per nearest-centre cell (disjoint cells: parallel composition),
      records mapped to ``[-1, 1]^D`` by the public bounds.

    Budget: one plan for the whole pipeline. ``epsilon`` and ``delta`` are the pipeline's
    **totals** (``None``: the unfitted base's own values are the totals; ``delta=None`` on both:
    the delta rule, ``min(1e-5, 1 / n_hat^1.5)``, chosen once for the whole pipeline from the
    first released count, with the cap reserved before any data is read). If the base is **not
    fitted**, ``fit(X)`` fits a clone of it inside the plan: a mixture base gets the whole
    budget; a centre base gets ``(1 - covariance_share)`` of epsilon and the covariance pass
    ``covariance_share``; delta is split the same way when the base uses delta (DPM) and goes
    wholly to the pass when the base is pure epsilon-DP (DPLloyd, the k-means family). The
    base's own epsilon, delta and accountant are replaced by its part's, and MorseMerging's
    ``accountant`` holds the whole total, so the fit runs inside an accountant that has exactly
    that budget. If the base is **fitted**, a mixture needs no data (``fit()`` or ``fit(None)``);
    a centre model needs X and ``epsilon`` (the covariance pass's budget, spent on top of what
    the base spent).

    Choices where the paper is silent (NOTES 23)
    --------------------------------------------
    * Coordinates: the field is built in the unit box ``[-1, 1]^D`` of the base's public bounds
      (the paper's data are rescaled to it), so ``perturbation`` (0.05, Sec. 6.2) and the
      tolerances are in those units.
    * ``R(x)`` (``metric``): the posterior-weighted precision by default (see
      :class:`MixtureField`), or ``"euclidean"`` (R = I in the unit box).
    * "Integrate (7) from m^t" (Alg. 3 l. 7, 12) relaxes the point on the hyperplane normal to
      the string for flow time ``string_time`` (see :func:`_relax_on_hyperplanes`). Measured on
      random 20-component mixtures: 0-0.25 gives the same hierarchy; 1.0 slid strings past
      some low TEVs (different merge heights), so the default is 0.25.
    * The root solve (l. 13) is a batched Newton with a line search on ``|grad f|^2`` (it stays
      near its start), polished by ``scipy.optimize.root``. If the TEV graph is disconnected,
      the string search is run once more between the SEVs of different components (a string
      between two centres can miss a curved valley).
    * Vertices: each centre is flowed to its SEV; centres sharing an SEV merge at height 0.
      The density has no barrier between them, so their order (which matters only when fewer
      basins than ``n_clusters`` exist) is Ward's criterion on the components' weights and
      means (:func:`merge_clusters`); points reaching a basin whose centres ended in different
      clusters are labelled by their most likely component.
    * Heights: ``f(TEV) - min f(SEV)`` (non-negative, Alg. 4's single linkage,
      ``merge_order='barrier'``, the default); ``merge_order='persistence'`` replays the same
      TEVs by the persistence of the younger mode (the elder rule of 0-dimensional persistence,
      as in ToMATo, Chazal et al. 2013). Measured (3 seeds, eps 1-10): neither order wins on
      every set (persistence +0.04 on usps at eps 10, -0.12 on uci_magic at eps 10), so the
      paper's order stays the default. A disconnected TEV graph is completed by
      straight-segment barriers (``n_fallback_merges_`` counts them; a warning is issued when
      they are needed to reach ``n_clusters``).
    * Runts (``min_cluster_weight``, default 0.03): single linkage leaves a light isolated mode
      (a noisy, broad component far from the data) for last, so it takes one of the
      ``n_clusters`` places; with K = 2 all the rest is then one cluster (ARI ~0 on uci_magic
      and uci_htru2 in such runs). The cut (:func:`cut_linkage`) therefore counts only clusters
      holding at least this share of the mixture's weight while enough of them exist, and joins
      each lighter one to the cluster it meets first in the hierarchy. ``linkage_`` is
      unchanged. 0.03 is the share the old ``min_weight`` default was measured at (uci_htru2,
      eps 1-2: 0.01 kept spurious modes; 0.06 lost a real minority component of DPLloyd).
    * Noise-level components: a component whose noisy count is below 2 sigma has a covariance
      that is mostly noise; DPMoG-hard already gives it weight 0 (``min_count``) and so does the
      covariance pass (:func:`~privclust.cluster.mixture.private_centre_covariances`). Such
      components, and any below ``min_weight`` (default 0: the rule above scales with the
      noise, hence with epsilon), are left out of the density; they are not leaves of
      ``linkage_`` and take the cluster of the basin their mean flows to.
    * Many centres (``max_components``, default 20, the largest K0 of Table 2): a centre model
      with more centres (DPM: 60-80 leaves on uci_shuttle, uci_magic) is pooled before the
      covariance pass by :func:`pool_centres` (Ward on the public centres weighted by the
      released noisy sizes; post-processing), which bounds the Morse step's time (about
      ``K0^3`` field evaluations: 45-60 s at K0 ~ 80 against ~1 s at 20). ``pooled_from_`` maps
      every base centre to its pooled component.
    * Prediction (``predict_method='base'``, the default): the base model's own assignment (the
      most likely component for a mixture, the nearest centre for a centre model), then that
      component's cluster, so that Morse merging is exactly a merge of the base's partition.
      The paper's inductive rule (Thm 5.3, ``'flow'``: the basin the flow (7) reaches) follows
      the gradient of the *noisy* density, whose covariances are mostly noise floor at eps <= 2
      (covariance pass) and blur the basins: measured (3 seeds, eps 1, 2, 10, four sets, these
      defaults), ``'flow'`` was below ``'base'`` in 18 of the 24 DPLloyd/DPM cells, by up to
      0.22 ARI (usps DPLloyd-Morse eps 1: 0.451 vs 0.675; uci_shuttle eps 2: 0.227 vs 0.375),
      and above it by at most 0.07 (uci_shuttle DPM-Morse eps 10); within 0.03 for DPMoG-hard.
      On well-estimated mixtures the two agree (tests).

    Parameters
    ----------
    base_estimator : the private model (see above). n_clusters : K, the number of clusters.
    epsilon, delta : the pipeline's totals, see "Budget".
    covariance_share : the covariance pass's share of epsilon when the base is fitted here
        (default 0.15: with the add/remove calibration about the noise sd that 0.3 gave with
        the paper's ``r`` for D = 8-10, and 15% more budget for the base. Measured, DPLloyd and
        DPM on four sets at eps 1, 2, 10, 5 seeds: mean gain over the base +0.100 ARI at 0.15
        against +0.074 at 0.3, worst cell -0.18 against -0.25).
    n_points : m, points on a string (paper: 20). n_iter : tau_2, string iterations (paper: 5).
    perturbation : epsilon of Alg. 3 l. 18 (paper: 0.05). string_time : see above.
    metric : 'mixture' or 'euclidean'. predict_method : 'base' (default, see above: 'likelihood'
        for a mixture base, 'nearest' for a centre model), 'flow' (Thm 5.3: follow (7) to a
        basin, vectorised over points), 'nearest' (the nearest centre, Euclidean in the
        original units, then its component's cluster) or 'likelihood' (the most likely
        component, then its cluster).
    covariance_sensitivity : 'add_remove' (default; proof in
        :func:`~privclust.cluster.mixture.add_remove_r`) or 'paper' (NOTES 21) for the pass.
    reg_covar : eigenvalue floor of the covariance pass (unit-box units).
    min_weight : components below this share of the weight are left out of the density
        (default 0: only the noise-level rule above).
    min_cluster_weight : the runt threshold of the cut (see above; 0 gives Alg. 4's plain cut).
    merge_order : 'barrier' (Alg. 4, default) or 'persistence' (see above).
    max_components : centre models with more centres are pooled to this many (see above).
    random_state, accountant : as everywhere in privclust. A ``random_state`` that is not None
        seeds the whole pipeline: an unfitted base is fitted with the same generator (its own
        ``random_state`` is replaced in the clone), and the covariance pass goes on from where
        the base stopped, so no noise is ever drawn twice from one seed.

    Attributes
    ----------
    base_estimator_ : the fitted base. weights_, means_, covariances_ : the mixture (original
    units). component_labels_ : (K0,) cluster of each base component. n_clusters_ : clusters
    made. sevs_, tevs_ : equilibria (original units). sev_labels_ : cluster of each SEV.
    tev_values_ : f at the TEVs (unit-box density). tev_edges_ : (t, 2) SEV indices.
    sev_of_component_ : (K0,) SEV of each live component (-1: zero weight).
    leaves_ : base component index of every linkage leaf.
    linkage_ : SciPy linkage matrix over the leaves. dendrogram_ : ``scipy.cluster.hierarchy.
    dendrogram(linkage_, no_plot=True)``. n_fallback_merges_ : merges not backed by a TEV.
    morse_time_ : seconds of the Morse step. base_assignment_ : 'likelihood' or 'nearest', the
    base's own rule (``predict_method='base'``). pooled_from_ : (centre models) pooled component
    of every base centre. labels_ : ``predict(X)`` when fit got X
    (post-processing). privacy_report_ : the base's releases plus the covariance pass.
    """

    def __init__(
        self,
        base_estimator=None,
        n_clusters=2,
        *,
        epsilon=None,
        delta=None,
        covariance_share=0.15,
        n_points=20,
        n_iter=5,
        perturbation=0.05,
        string_time=0.25,
        metric="mixture",
        predict_method="base",
        covariance_sensitivity="add_remove",
        reg_covar=1e-4,
        min_weight=0.0,
        min_cluster_weight=0.03,
        merge_order="barrier",
        max_components=20,
        random_state=None,
        accountant=None,
    ):
        self.base_estimator = base_estimator
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.delta = delta
        self.covariance_share = covariance_share
        self.n_points = n_points
        self.n_iter = n_iter
        self.perturbation = perturbation
        self.string_time = string_time
        self.metric = metric
        self.predict_method = predict_method
        self.covariance_sensitivity = covariance_sensitivity
        self.reg_covar = reg_covar
        self.min_weight = min_weight
        self.min_cluster_weight = min_cluster_weight
        self.merge_order = merge_order
        self.max_components = max_components
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------------ checks
    def _check_params(self):
        k = self.n_clusters
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"n_clusters must be an int >= 1, got {k!r}")
        for name in ("n_points", "n_iter", "max_components"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, numbers.Integral)
                or v < (0 if name == "n_iter" else 1)
            ):
                raise ValueError(
                    f"{name} must be a non-negative int (n_points, max_components >= 1), got {v!r}"
                )
        for name in ("perturbation", "reg_covar"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or not v > 0 or not math.isfinite(v):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        for name in ("min_weight", "min_cluster_weight"):
            mw = getattr(self, name)
            if isinstance(mw, bool) or not isinstance(mw, numbers.Real) or not 0 <= mw < 1:
                raise ValueError(f"{name} must be in [0, 1), got {mw!r}")
        st = self.string_time
        if not isinstance(st, numbers.Real) or not st >= 0 or not math.isfinite(st):
            raise ValueError(f"string_time must be a number >= 0, got {st!r}")
        share = self.covariance_share
        if not isinstance(share, numbers.Real) or not 0 < share < 1:
            raise ValueError(f"covariance_share must be in (0, 1), got {share!r}")
        if self.metric not in ("mixture", "euclidean"):
            raise ValueError(f"metric must be 'mixture' or 'euclidean', got {self.metric!r}")
        if self.merge_order not in ("barrier", "persistence"):
            raise ValueError(
                f"merge_order must be 'barrier' or 'persistence', got {self.merge_order!r}"
            )
        if self.predict_method not in ("base", "flow", "nearest", "likelihood"):
            raise ValueError(
                "predict_method must be 'base', 'flow', 'nearest' or 'likelihood', got "
                f"{self.predict_method!r}"
            )
        if self.epsilon is not None:
            check_epsilon(self.epsilon)
        check_delta(self.delta)
        if self.base_estimator is None:
            raise ValueError(
                "MorseMerging needs a base_estimator: a privclust mixture (DPGaussianMixture) or "
                "centre model (DPLloyd, DPM, ...), fitted or not"
            )
        return int(k)

    # ------------------------------------------------------------------ fit
    def fit(self, X=None, y=None):
        """Fit the base if needed (and the covariance pass for a centre model), then the Morse
        step, which reads no data. ``X`` may be None for a fitted mixture base."""
        k = self._check_params()
        names = None if X is None else feature_names(X)
        base = self.base_estimator
        fitted = _is_fitted(base)
        mixture = _is_mixture(base)
        self._check_morse_cost(base, fitted, mixture)
        if not fitted or not mixture:
            if X is None:
                raise ValueError(
                    "X is needed: the base model is not fitted"
                    if not fitted
                    else "X is needed for the private covariance pass of a centre model "
                    "(Sec. 5.1.2)"
                )
        source = resolve_random_state(self.random_state)
        plan = accountant = None
        seeded_base = False
        if not fitted or not mixture:
            plan, accountant, base_part, cov_part = self._open_pipeline_plan(base, fitted,
                                                                             mixture)
        if not fitted:
            base = clone(base)
            params = base.get_params(deep=False)
            if self.random_state is not None and "random_state" in params:
                # one stream for the whole pipeline: the base draws first, the covariance pass
                # goes on from where it stopped (two equal seeds would replay the same noise)
                base.set_params(random_state=source.generator)
                seeded_base = True
            try:
                self._fit_base_in_plan(base, base_part, X)
            except (ValueError, TypeError):
                _refund_if_unspent(plan)  # a user mistake caught before any release
                raise
        self.base_estimator_ = base

        base_report = getattr(base, "privacy_report_", None)
        cov_report = None
        if mixture:
            weights = np.asarray(base.weights_, dtype=float)
            means = np.asarray(base.means_, dtype=float)
            covs = np.asarray(base.covariances_, dtype=float)
            d = means.shape[1]
            bounds = _base_bounds(base, d)
        else:
            means = np.asarray(base.cluster_centers_, dtype=float)
            d = means.shape[1]
            bounds = _base_bounds(base, d)
            if bounds is None:
                raise ValueError("the covariance pass needs the base model's public bounds")
            X = check_data(X)
            means, self.pooled_from_ = pool_centres(
                (means - _unit_map(bounds)[0]) / _unit_map(bounds)[1],
                getattr(base, "cluster_sizes_", None),
                int(self.max_components),
            )
            means = _unit_map(bounds)[0] + _unit_map(bounds)[1] * means
            weights, means, covs, cov_report = self._covariance_pass(
                X, base, means, bounds, cov_part, source
            )
        self.privacy_report_ = self._combined_report(
            base, None if seeded_base else base_report, cov_report, source, base_report
        )
        if plan is not None:
            self._close_pipeline_plan(plan, fitted, accountant)
        self.weights_, self.means_, self.covariances_ = weights, means, covs
        self.base_assignment_ = "likelihood" if mixture else "nearest"
        self.bounds_ = bounds
        self.n_features_in_ = d
        self._morse(k)
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        if X is not None:
            self.labels_ = self.predict(X)
        return self

    def _check_morse_cost(self, base, fitted, mixture) -> None:
        """Refuse up front (before the base spends anything) a Morse step that would run for
        long: it costs about (K0 / 20)^3 s for K0 components (measured: <= 1 s at K0 = 20,
        d <= 16), so more than 43 components is refused with the predicted time."""
        if mixture:
            k0 = (len(base.weights_) if fitted
                  else int(base.get_params(deep=False).get("n_components", 0) or 0))
        else:
            k0 = int(self.max_components)
            if fitted:
                k0 = min(k0, len(base.cluster_centers_))
        predicted = (k0 / 20.0) ** 3
        if predicted > 10.0:
            raise ValueError(
                f"the Morse step over {k0} components would take about {predicted:,.0f} s (its "
                "cost grows like the cube of the number of components); use at most 43 "
                "(n_components of a mixture base, or max_components for a centre model)"
            )

    # ------------------------------------------------------------------ the pipeline's plan
    def _pipeline_budget(self, base, fitted):
        """The pipeline's total ``(epsilon, delta)``: MorseMerging's own when given, else the
        (unfitted) base's. delta None means the delta rule for the whole pipeline."""
        if fitted:  # only the covariance pass spends here, on top of the base's own release
            if self.epsilon is None:
                raise ValueError(
                    "the base centre model is already fitted: pass epsilon=... for the private "
                    "covariance pass (Sec. 5.1.2), or an unfitted base to split one budget"
                )
            return check_epsilon(self.epsilon), check_delta(self.delta)
        params = base.get_params(deep=False)
        total = self.epsilon if self.epsilon is not None else params.get("epsilon")
        if total is None:
            raise ValueError("the base has no epsilon; pass MorseMerging(epsilon=...)")
        delta = self.delta if self.delta is not None else params.get("delta")
        return check_epsilon(total), check_delta(delta)

    def _open_pipeline_plan(self, base, fitted, mixture):
        """One plan for the whole pipeline, checked against the accountant before any data is
        read: the base's part and the covariance pass's part split the user's budget."""
        eps, delta = self._pipeline_budget(base, fitted)
        name = f"MorseMerging({type(base).__name__})"
        plan = PrivacyPlan(name, eps, delta)
        accountant = self.accountant if self.accountant is not None else Accountant()
        if not isinstance(accountant, Accountant):
            raise TypeError("accountant must be a privclust.Accountant or None")
        accountant.check(plan.reserved(), name)  # before any data is read
        base_part = cov_part = None
        if fitted:
            cov_part = plan.part("covariance pass", 1.0, 1.0)
        elif mixture:
            base_part = plan.part("base", 1.0, 1.0)
        else:
            share = float(self.covariance_share)
            base_delta = (1.0 - share) if "delta" in base.get_params(deep=False) else 0.0
            base_part = plan.part("base", 1.0 - share, base_delta)
            cov_part = plan.part("covariance pass", share, 1.0 - base_delta)
        if cov_part is not None:
            eps_n = 0.0
            if plan.delta is None and not _releases_sizes(base):
                eps_n = NOISY_N_SHARE * cov_part.epsilon
                cov_part.add("record count (delta rule)", "two-sided geometric", "pure", eps_n)
            cov_part.add("covariance statistics", "gaussian (zCDP)", "zcdp",
                         cov_part.epsilon - eps_n, 1.0)
            cov_part.validate()
        handle = accountant.reserve(plan.reserved(), name)
        plan.reservation = (accountant, handle)
        if plan.delta_rule:
            plan.on_delta_resolved(lambda actual: accountant.settle(handle, actual))
        return plan, accountant, base_part, cov_part

    @staticmethod
    def _fit_base_in_plan(base, part, X) -> None:
        """Fit the base inside its part of the pipeline's plan (its own epsilon, delta and
        accountant are replaced by the part's, so the parameters say what it spent)."""
        params = base.get_params(deep=False)
        new = {"epsilon": part.epsilon}
        if "delta" in params:
            new["delta"] = part.delta
        if "accountant" in params:
            new["accountant"] = None
        base.set_params(**new)
        base._plan_part = part
        try:
            base.fit(X)
        finally:
            del base._plan_part

    def _close_pipeline_plan(self, plan, fitted, accountant) -> None:
        report = self.privacy_report_
        if fitted:  # the base spent before: the plan covers the covariance pass only
            own = PrivacyReport("pass", plan.planned(), zcdp_delta=report.zcdp_delta,
                                releases=[r for r in report.releases
                                          if r.item.startswith("covariance pass")])
            plan.check_ledger(own)
            report.planned = self.base_estimator_.privacy_report_.planned + plan.planned()
        else:
            plan.check_ledger(report)
            report.planned = plan.planned()
        plan.write_into(report)
        accountant.attach(report)

    def _covariance_pass(self, X, base, centres, bounds, part, source):
        engine = _unit_engine(X, bounds)
        report = PrivacyReport(
            estimator="MorseMerging covariance pass",
            planned=part.reserved(),
            random_source=source.description,
        )
        mech = Mechanisms(source, report, part.parent)
        if part.delta is None:  # the delta rule, from the base's sizes or a noisy count
            sizes = getattr(base, "cluster_sizes_", None)
            if _releases_sizes(base) and sizes is not None and np.size(sizes):
                n_hat = float(np.maximum(np.asarray(sizes, float), 0).sum())
                how = "the sum of the base's released noisy cluster sizes (no extra release)"
            else:
                item = part._name("record count (delta rule)")
                n_hat = float(mech.count(
                    [engine.count(engine.root())[0]], part.parent.item(item).epsilon,
                    target="record count (chooses delta)", item=item)[0])
                how = f"a noisy count ({NOISY_N_SHARE:g} of the pass's epsilon)"
            part.resolve_delta(n_hat, how)
        block = part.item("covariance statistics")
        mid, half = _unit_map(bounds)
        centres_u = (centres - mid) / half
        w, mu_u, cov_u, n_hat_k, sigma = private_centre_covariances(
            engine,
            centres_u,
            mech,
            block.rho,
            item=block.name,
            sensitivity=self.covariance_sensitivity,
            reg_covar=float(self.reg_covar),
        )
        report.notes.append(
            f"covariance pass: epsilon {block.epsilon:.4g} at delta {block.delta:.3g} "
            f"(rho = {block.rho:.4g}), sigma = {sigma:.6g}"
        )
        self.covariance_sigma_ = sigma
        self.covariance_counts_ = n_hat_k
        covs = cov_u * half[:, None] * half[None, :]
        return w, centres.copy(), covs, report

    def _combined_report(self, base, source_report, cov_report, source, base_report):
        """The base's and the covariance pass's releases in one report. Its randomness is the
        base's (``source_report``) when the base drew from its own source, else ours."""
        parts = [r for r in (base_report, cov_report) if r is not None]
        planned = Budget(0.0, 0.0)
        for r in parts:
            planned = planned + r.planned
        report = PrivacyReport(
            estimator=f"MorseMerging({type(base).__name__})",
            planned=planned,
            random_source=source_report.random_source if source_report else source.description,
        )
        zdeltas = {r.zcdp_delta for r in parts if any(x.rho > 0 for x in r.releases)}
        for r in parts:
            convert = len(zdeltas) > 1 and r is cov_report
            if convert:  # two zCDP parts with different deltas: convert this one alone
                rho = sum(x.rho for x in r.releases)
                report.add(
                    Release(
                        "gaussian (zCDP, converted)",
                        "covariance pass",
                        epsilon=zcdp_to_approx_dp(rho, r.zcdp_delta),
                        delta=r.zcdp_delta,
                        note=f"rho = {rho:.6g} converted at delta = {r.zcdp_delta:.3g}",
                        item="covariance pass: covariance statistics",
                    )
                )
            else:
                for x in r.releases:
                    report.add(x)
                if any(x.rho > 0 for x in r.releases):
                    report.zcdp_delta = r.zcdp_delta
            report.notes += [f"{r.estimator}: {n}" for n in r.notes]
        if base_report is None:
            report.notes.append(
                "the base model has no privacy report; only the covariance pass is listed"
            )
        report.notes.append(
            "Morse merging (TEV graph, MergeCluster, hierarchy, predict) reads no data: "
            "post-processing of the released mixture, no privacy cost beyond the releases above "
            "(000 Thm 5.4)"
        )
        return report

    # ------------------------------------------------------------------ the Morse step
    def _to_unit(self, X):
        if self.bounds_ is None:
            return np.asarray(X, dtype=float)
        mid, half = _unit_map(self.bounds_)
        return (np.asarray(X, dtype=float) - mid) / half

    def _from_unit(self, U):
        if self.bounds_ is None:
            return np.asarray(U, dtype=float)
        mid, half = _unit_map(self.bounds_)
        return mid + half * np.asarray(U, dtype=float)

    def _density_weights(self):
        """The weights of the density the Morse step uses: components below ``min_weight`` of
        the total are left out (post-processing; see the class docstring)."""
        w = np.maximum(np.asarray(self.weights_, dtype=float), 0.0)
        if not w.sum() > 0:
            raise ValueError("the base mixture has no component with a positive weight")
        w = w / w.sum()
        keep = w >= float(self.min_weight)
        if not keep.any():
            keep = w == w.max()
        return np.where(keep, w, 0.0)

    def _unit_field(self):
        w = self._density_weights()
        if self.bounds_ is None:
            return MixtureField(w, self.means_, self.covariances_, self.metric)
        _, half = _unit_map(self.bounds_)
        covs = self.covariances_ / (half[:, None] * half[None, :])
        return MixtureField(w, self._to_unit(self.means_), covs, self.metric)

    def _morse(self, k):
        # tiny batched linear algebra: one BLAS thread is faster than many (and than contention)
        with threadpool_limits(limits=1, user_api="blas"):
            return self._morse_step(k)

    def _morse_step(self, k):
        t0 = time.perf_counter()
        field = self._unit_field()
        self._field = field
        live = field.components
        centres_u = self._to_unit(self.means_)[live]
        graph = find_tevs(
            field,
            centres_u,
            n_points=self.n_points,
            n_iter=self.n_iter,
            perturbation=self.perturbation,
            string_time=self.string_time,
        )
        sevs = graph["sevs"]
        sev_values = field.f(sevs)
        Z, n_fallback = merge_clusters(
            graph["sev_of_centre"],
            sev_values,
            graph["tev_edges"],
            graph["tev_values"],
            graph["line_barrier"],
            weights=field.weights,
            means=centres_u,
            merge_order=self.merge_order,
        )
        n_leaves = live.size
        n_clusters = min(k, n_leaves)
        if k > n_leaves:
            warnings.warn(
                f"n_clusters={k} but the base mixture has only {n_leaves} live component(s); "
                f"keeping {n_leaves} clusters",
                UserWarning,
                stacklevel=3,
            )
        leaf_labels = cut_linkage(
            Z, n_leaves, n_clusters, field.weights, float(self.min_cluster_weight)
        )
        used = Z[: max(n_leaves - n_clusters, 0)]
        n_tev_merges = n_leaves - n_fallback - 1
        if n_leaves - n_clusters > n_tev_merges:
            warnings.warn(
                "the TEV graph is disconnected: some merges to reach n_clusters follow "
                "straight-segment barriers instead of TEVs",
                UserWarning,
                stacklevel=3,
            )
        # SEV -> cluster (SEVs reached from no centre: the cluster of the nearest SEV that is)
        sev_cluster = np.full(len(sevs), -1, dtype=np.int64)
        for leaf, s in enumerate(graph["sev_of_centre"]):
            # -2: a basin whose centres ended in different clusters (fewer basins than
            # n_clusters); its points are labelled by their most likely component
            sev_cluster[s] = leaf_labels[leaf] if sev_cluster[s] in (-1, leaf_labels[leaf]) else -2
        orphan = np.flatnonzero(sev_cluster == -1)
        if orphan.size:
            known = np.flatnonzero(sev_cluster != -1)
            for o in orphan:
                j = known[np.argmin(np.linalg.norm(sevs[known] - sevs[o], axis=1))]
                sev_cluster[o] = sev_cluster[j]
        K0 = np.asarray(self.weights_).size
        comp_labels = np.full(K0, -1, dtype=np.int64)
        comp_labels[live] = leaf_labels
        sev_of_component = np.full(K0, -1, dtype=np.int64)
        sev_of_component[live] = graph["sev_of_centre"]
        self.sev_labels_ = sev_cluster
        self._sevs_u = sevs
        self.component_labels_ = comp_labels
        dead = np.flatnonzero(comp_labels < 0)
        if dead.size:  # zero-weight components: the cluster of the basin their mean flows to
            comp_labels[dead] = self._flow_labels(self._to_unit(self.means_)[dead])

        self.component_labels_ = comp_labels
        self.sev_of_component_ = sev_of_component
        self.leaves_ = live
        self.n_clusters_ = int(n_clusters)
        self.sevs_ = self._from_unit(sevs)
        self.tevs_ = self._from_unit(graph["tevs"])
        self.tev_values_ = np.asarray(graph["tev_values"], dtype=float)
        self.tev_edges_ = np.asarray(graph["tev_edges"], dtype=np.int64)
        self.index1_points_ = self._from_unit(graph["index1"])
        self.linkage_ = Z
        self.merge_heights_ = Z[:, 2].copy()
        self.n_fallback_merges_ = int(n_fallback)
        self.n_merges_used_ = int(len(used))
        self.dendrogram_ = _dendrogram(Z, n_leaves)
        self.morse_time_ = time.perf_counter() - t0
        return self

    # ------------------------------------------------------------------ predict
    def _check_fitted(self):
        if not hasattr(self, "component_labels_"):
            raise_not_fitted(self, "fit")

    def _flow_labels(self, U, chunk=8192):
        field = self._field
        out = np.empty(U.shape[0], dtype=np.int64)
        with threadpool_limits(limits=1, user_api="blas"):
            for start in range(0, U.shape[0], chunk):
                part = U[start : start + chunk]
                ends, _ = flow_to_rest(field, part)
                dist = ((ends[:, None, :] - self._sevs_u[None]) ** 2).sum(axis=2)
                lab = self.sev_labels_[np.argmin(dist, axis=1)]
                mixed = lab == -2
                if mixed.any():
                    lt = field.log_terms(part[mixed])
                    lab[mixed] = self.component_labels_[field.components[np.argmax(lt, axis=1)]]
                out[start : start + chunk] = lab
        return out

    def predict(self, X):
        """Cluster of every row: the basin its flow reaches (``predict_method='flow'``, Thm 5.3),
        or the faster component shortcuts (see the class docstring). Post-processing."""
        self._check_fitted()
        arr = check_X(self, X, reset=False)
        if arr.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {arr.shape[1]} features; the model was fitted on {self.n_features_in_}"
            )
        how = self.predict_method
        if how == "base":
            how = getattr(self, "base_assignment_", "likelihood")
        if how == "nearest":
            return self.component_labels_[nearest_centre(arr, self.means_)]
        if how == "likelihood":
            lt = self._field.log_terms(self._to_unit(arr))
            return self.component_labels_[self._field.components[np.argmax(lt, axis=1)]]
        if not hasattr(self, "_field"):
            self._field = self._unit_field()
        return self._flow_labels(self._to_unit(arr))

    def fit_predict(self, X, y=None):
        return self.fit(X).labels_

    def _restore(self):
        """Rebuild what predict derives from the released attributes (after loading a model:
        ``privclust.io`` sets those and calls this); returns self."""
        self.merge_heights_ = self.linkage_[:, 2].copy()
        self.dendrogram_ = _dendrogram(self.linkage_, self.leaves_.size)
        self.base_estimator_ = None
        self._field = self._unit_field()
        self._sevs_u = self._to_unit(self.sevs_)
        return self


def _dendrogram(Z, n_leaves):
    if n_leaves < 2:
        return {
            "icoord": [],
            "dcoord": [],
            "ivl": ["0"] if n_leaves else [],
            "leaves": list(range(n_leaves)),
            "color_list": [],
            "leaves_color_list": [],
        }
    return hierarchy.dendrogram(Z, no_plot=True)
