"""Equilibria of the gradient flow: stable ones (SEVs, the basins' minima) found by Newton and
flow, transition ones (TEVs, index-1 saddles between basins) found by a string search
(Alg. 3, TEVGraph)."""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg as sla
from scipy.optimize import root

from .field import (
    MixtureField,
    _newton,
    _solve_ivp_stacked,
    flow_to_rest,
    integrate_to_rest,
)

# =========================================================================== equilibria


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
    through m^t normal to the string (Departures 23). The plain flow would slide down the string to
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
    Returns the points and the largest f on each straight segment.

    A pair whose ends coincide (two components with equal means) has no segment: its barrier
    is f at the common point, and it yields no point (there is no direction to relax across,
    and no string to bend), so the points are those of the other pairs only."""
    d = field.d
    s = np.arange(1, m + 1) / (m + 1.0)
    u = B - A
    pts = A[:, None, :] + s[None, :, None] * u[:, None, :]
    fv = field.f(pts.reshape(-1, d)).reshape(A.shape[0], m)
    barrier = fv.max(axis=1)
    apart = np.linalg.norm(u, axis=1) > 0
    A, u, pts, fv = A[apart], u[apart], pts[apart], fv[apart]
    P = A.shape[0]
    best = np.argmax(fv, axis=1)
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
