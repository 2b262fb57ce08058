"""Goldstein (r, beta)-stationarity: certified bounds on ||dbar_r F(x)||.

The Goldstein r-subdifferential d_r F(x) is the convex hull of the Clarke subdifferentials
over the ball B(x, r) (Goldstein 1977); x is (r, beta)-stationary when its minimum-norm
element dbar_r F(x) has norm <= beta (Kornowski, Liu, Talwar, paper 001, Def. 2.1).

* Upper bound (any problem with gradients): gradients at points of B(x, r) lie in d_r F(x),
  so the minimum norm over the hull of sampled gradients is >= ||dbar_r F(x)||. The hull's
  minimum-norm point is found exactly (Lawson-Hanson NNLS, see :func:`min_norm_in_hull`) and
  is itself in the hull, so the bound holds whatever the solver's accuracy.
* Lower bound (piecewise-linear problems): d_r F(x) lies in an outer set C: for
  F = (1/n) sum_i phi_i(<a_i, x>) the set {(1/n) sum_i t_i a_i : t_i in [lo_i, hi_i]} with
  [lo_i, hi_i] the slopes of phi_i on <a_i, x> +- r ||a_i|| (the sum rule), for a
  difference of max-affine functions the sum over records of the hulls of the pieces that
  may be active in the ball. For any direction u, min over C of <u, c> / ||u|| is a lower
  bound on every norm in C (a separating hyperplane), so the bound is certified by the
  direction alone; a fully corrective Frank-Wolfe run picks the direction.

The metric plug-in :func:`goldstein` returns the upper bound for each trial's output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize

from dpverify.core.errors import InputError


def min_norm_in_hull(G: np.ndarray) -> np.ndarray:
    """The minimum-norm point of the convex hull of the rows of ``G`` (N, d).

    The projection of e = (0, ..., 0, 1) onto the cone of the lifted points (g_i, 1) is
    sum_i mu_i (g_i, 1) with mu >= 0 (NNLS, Lawson and Hanson 1974); G^T mu / sum(mu) is the
    minimum-norm point of the hull, and sum(mu) > 0 always.

    Examples
    --------
    >>> (min_norm_in_hull(np.array([[1.0, 1.0], [1.0, -1.0]])).round(12) + 0.0).tolist()
    [1.0, 0.0]
    >>> abs(float(min_norm_in_hull(np.array([[1.0], [-1.0]]))[0])) < 1e-12
    True
    """
    G = np.asarray(G, dtype=float)
    scale = max(float(np.abs(G).max()), 1e-300)
    A = np.vstack([G.T / scale, np.ones((1, G.shape[0]))])
    b = np.zeros(G.shape[1] + 1)
    b[-1] = 1.0
    mu, _ = scipy.optimize.nnls(A, b, maxiter=50 * A.shape[1])
    return G.T @ mu / mu.sum()


def sample_ball(rng: np.random.Generator, center: np.ndarray, r: float, N: int) -> np.ndarray:
    """``N`` points uniform in the ball B(center, r) (center (d,)), shape (N, d).

    Examples
    --------
    >>> P = sample_ball(np.random.default_rng(0), np.zeros(3), 0.5, 100)
    >>> P.shape, bool(np.all(np.linalg.norm(P, axis=1) <= 0.5))
    ((100, 3), True)
    """
    d = center.shape[0]
    g = rng.standard_normal((N, d))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return center + r * rng.random((N, 1)) ** (1.0 / d) * g


def goldstein_upper(grad: Callable[[np.ndarray], np.ndarray], x: np.ndarray, r: float, *,
                    samples: int = 256, rng: np.random.Generator | None = None,
                    extra: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """Upper bounds on ||dbar_r F(x_k)|| for each row of ``x`` (trials, d).

    ``grad(points (N, d)) -> (N, d)`` gives a gradient of F at each point (differentiable
    almost everywhere, so sampled points are almost surely smooth points); ``extra(x_k)``
    may add points of the ball, e.g. next to kinks.

    Examples
    --------
    >>> up = goldstein_upper(np.sign, np.array([[0.0], [1.0]]), 0.5)  # F = |x|
    >>> up.round(12).tolist()
    [0.0, 1.0]
    """
    rng = rng if rng is not None else np.random.default_rng(0)
    x = np.atleast_2d(np.asarray(x, dtype=float))
    out = np.empty(x.shape[0])
    for k, xk in enumerate(x):  # one small QP per trial; gradients are batched per trial
        pts = [xk[None, :], sample_ball(rng, xk, r, samples)]
        if extra is not None:
            pts.append(extra(xk))
        G = grad(np.concatenate(pts, axis=0))
        out[k] = np.linalg.norm(min_norm_in_hull(G))
    return out


def slope_ranges(loss: Any, z: np.ndarray, b: np.ndarray, half: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi]: the hull of the slopes of phi(., b_i) on [z_i - half_i, z_i + half_i].

    ``loss`` exposes ``dphi(z, b, xp)`` and ``kinks(b) -> (n, k)``; slopes are read at the
    midpoints between consecutive breakpoints inside the interval.

    Examples
    --------
    >>> from algorithms.paper001.problems import PiecewiseLinearGLM
    >>> lo, hi = slope_ranges(PiecewiseLinearGLM("amplitude"), np.array([0.0, 3.0]),
    ...                       np.array([1.0, 1.0]), np.array([0.5, 0.5]))
    >>> lo.tolist(), hi.tolist()  # around 0: slopes -1 (z < 0) and +1; far out: +1 only
    ([-1.0, 1.0], [1.0, 1.0])
    """
    import array_api_compat.numpy as xp

    # The ball is closed: a kink on its boundary brings the slope beyond it into the
    # Clarke subdifferential there. Padding the interval keeps a superset (a valid bound).
    half = half * (1.0 + 1e-9) + 1e-12 * (1.0 + np.abs(z))
    zl, zh = z - half, z + half
    kinks = np.clip(loss.kinks(b), zl[..., None], zh[..., None])
    pts = np.sort(np.concatenate([zl[..., None], kinks, zh[..., None]], axis=-1), axis=-1)
    mids = 0.5 * (pts[..., 1:] + pts[..., :-1])
    valid = (pts[..., 1:] - pts[..., :-1]) > 0
    slopes = loss.dphi(mids, np.broadcast_to(b[..., None], mids.shape), xp)
    lo = np.min(np.where(valid, slopes, np.inf), axis=-1)
    hi = np.max(np.where(valid, slopes, -np.inf), axis=-1)
    at = loss.dphi(z, b, xp)  # a zero-length interval: the slope at z
    return np.where(np.isfinite(lo), lo, at), np.where(np.isfinite(hi), hi, at)


def _lmo_glm(loss: Any, X: np.ndarray, y: np.ndarray, x: np.ndarray, r: float):
    n = X.shape[0]
    lo, hi = slope_ranges(loss, X @ x, y, r * np.linalg.norm(X, axis=1))
    A = X / n

    def lmo(u: np.ndarray) -> np.ndarray:
        return np.where(A @ u > 0, lo, hi) @ A

    return lmo


def _lmo_dc(loss: Any, X: np.ndarray, x: np.ndarray, r: float):
    mw, mv = loss.active(x[None, :], X, r)
    mw, mv = mw[0], mv[0]  # (n, K), (n, J)
    W, V, n = loss.W, loss.V, X.shape[0]

    def lmo(u: np.ndarray) -> np.ndarray:
        kw = np.argmin(np.where(mw, (W @ u)[None, :], np.inf), axis=1)
        kv = np.argmax(np.where(mv, (V @ u)[None, :], -np.inf), axis=1)
        return (W[kw] - V[kv]).sum(axis=0) / n

    return lmo


def certified_lower(lmo: Callable[[np.ndarray], np.ndarray], start: np.ndarray, *,
                    iterations: int = 60, tol: float = 1e-10) -> float:
    """A certified lower bound on min ||c|| over the convex set with linear oracle ``lmo``.

    Fully corrective Frank-Wolfe: keep the vertices found, move to the minimum-norm point
    of their hull, ask the oracle for the vertex minimising <x, .>. Every iterate x gives
    the bound max(0, <x, lmo(x)>) / ||x||, valid at any accuracy; the best is returned.

    Examples
    --------
    >>> square = lambda u: np.array([1.0, 0.0]) - 0.5 * np.sign(u)  # [0.5, 1.5] x [-0.5, 0.5]
    >>> round(certified_lower(square, np.ones(2)), 6)
    0.5
    """
    verts = [np.asarray(lmo(np.asarray(start, dtype=float)), dtype=float)]
    best = 0.0
    for _ in range(iterations):
        xk = min_norm_in_hull(np.array(verts))
        nx = float(np.linalg.norm(xk))
        if nx <= tol:
            return 0.0
        s = lmo(xk)
        best = max(best, float(xk @ s) / nx)
        if nx * nx - float(xk @ s) <= tol * max(1.0, nx * nx):  # Frank-Wolfe gap
            break
        verts.append(s)
    return max(best, 0.0)


def goldstein_lower(loss: Any, X: np.ndarray, y: np.ndarray, x: np.ndarray, r: float, *,
                    iterations: int = 60) -> np.ndarray:
    """Certified lower bounds on ||dbar_r F(x_k)|| for F = (1/n) sum_i f(.; (X_i, y_i)).

    For piecewise-linear GLM losses (``dphi`` and ``kinks``) and differences of max-affine
    functions (``active``); ``nan`` for any other loss.

    Examples
    --------
    >>> from algorithms.paper001.problems import PiecewiseLinearGLM
    >>> f = PiecewiseLinearGLM("amplitude")  # | |x| - 0 | = |x| in d = 1
    >>> goldstein_lower(f, np.ones((1, 1)), np.zeros(1), np.array([[0.0], [1.0]]), 0.5).tolist()
    [0.0, 1.0]
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    out = np.full(x.shape[0], np.nan)
    for k, xk in enumerate(x):
        if hasattr(loss, "kinks"):
            lmo = _lmo_glm(loss, X, y, xk, r)
        elif hasattr(loss, "active"):
            lmo = _lmo_dc(loss, X, xk, r)
        else:
            continue
        out[k] = certified_lower(lmo, np.ones_like(xk), iterations=iterations)
    return out


def _kink_points(loss: Any, X: np.ndarray, y: np.ndarray, r: float, limit: int):
    """Points of B(x, r) just either side of the nearest kink hyperplanes of a GLM loss."""

    def extra(x: np.ndarray) -> np.ndarray:
        z = X @ x
        na = np.maximum(np.linalg.norm(X, axis=1), 1e-300)
        gap = (z[:, None] - loss.kinks(y)) / na[:, None]  # signed distance to each kink
        i, j = np.nonzero(np.abs(gap) < r)
        if i.size == 0:
            return np.empty((0, x.shape[0]))
        keep = np.argsort(np.abs(gap[i, j]))[:limit]
        i, j = i[keep], j[keep]
        unit = X[i] / na[i, None]
        foot = x - gap[i, j, None] * unit
        # both sides of the kink, still inside the ball
        step = 0.5 * np.minimum(1e-7 * r, r - np.abs(gap[i, j]))[:, None] * unit
        return np.concatenate([foot + step, foot - step], axis=0)

    return extra


@dataclass(frozen=True)
class GoldsteinBounds:
    """lower <= ||dbar_r F(x)|| <= upper, per trial (lower is nan where not available)."""

    upper: np.ndarray
    lower: np.ndarray
    radius: float


@dataclass(frozen=True)
class GoldsteinSettings:
    """How :func:`goldstein_bounds` computes its bounds.

    Parameters
    ----------
    on
        ``"empirical"`` uses the training data (F^D), ``"population"`` the problem's fresh
        sample ``info["population"]`` (standing in for F).
    samples, seed
        Random points of the ball for the upper bound, and their seed.
    kink_points
        Points placed on both sides of the loss's kinks inside the ball (0: none).
    iterations
        Iterations of the lower bound's minimisation.
    lower
        ``False`` skips the lower bound (then ``nan``).

    Examples
    --------
    >>> GoldsteinSettings(on="population").samples
    256
    """

    on: str = "empirical"
    samples: int = 256
    seed: int = 0
    kink_points: int = 64
    iterations: int = 60
    lower: bool = True


def goldstein_bounds(problem: Any, x: np.ndarray, radius: float,
                     settings: GoldsteinSettings | None = None) -> GoldsteinBounds:
    """Both bounds for the problem's objective at each row of ``x`` (see
    :class:`GoldsteinSettings` for how).

    Examples
    --------
    >>> from algorithms.paper001.problems import make_problem
    >>> prob = make_problem({"problem": "relu", "n": 40, "d": 2}, np.random.default_rng(0))
    >>> bd = goldstein_bounds(prob, np.zeros((2, 2)), 0.2)
    >>> bool(np.all(bd.lower <= bd.upper + 1e-9))
    True
    """
    s = settings or GoldsteinSettings()
    on = s.on
    if on not in ("empirical", "population"):
        raise InputError(f"stationarity must be of 'empirical' or 'population' F, got {on!r}")
    data = problem.data
    if on == "population":
        data = problem.info.get("population")
        if data is None:
            raise InputError("this problem has no population sample (info['population'])")
    loss = problem.loss
    r = float(radius)
    x = np.atleast_2d(np.asarray(x, dtype=float))
    extra = (_kink_points(loss, data.X, data.y, r, s.kink_points)
             if hasattr(loss, "kinks") and s.kink_points > 0 else None)
    upper = goldstein_upper(lambda P: loss.mean_grad(P, data), x, r, samples=s.samples,
                            rng=np.random.default_rng(s.seed), extra=extra)
    low = (goldstein_lower(loss, data.X, data.y, x, r, iterations=s.iterations) if s.lower
           else np.full(x.shape[0], np.nan))
    return GoldsteinBounds(upper, low, r)


def goldstein(problem: Any, outputs: Any, params: Mapping[str, Any]) -> np.ndarray:
    """Metric plug-in: an upper bound on ||dbar_{2 alpha} F(x_out)|| per trial, shape (trials,).

    The theorems of paper 001 bound stationarity at radius 2 alpha (Lemma 2.4, line 135);
    ``params["stationarity_of"]`` says whether F is the population (single-pass
    theorems) or the empirical objective (Theorem 4.1). Optional ``goldstein_radius``,
    ``goldstein_samples`` and ``goldstein_seed`` override the defaults.

    Examples
    --------
    >>> from algorithms.paper001.problems import make_problem
    >>> prob = make_problem({"problem": "amplitude", "n": 30, "d": 2}, np.random.default_rng(0))
    >>> goldstein(prob, np.zeros((3, 2)), {"alpha": 0.1, "stationarity_of": "empirical"}).shape
    (3,)
    """
    radius = params.get("goldstein_radius")
    radius = 2.0 * float(params["alpha"]) if radius is None else float(radius)
    x = np.asarray(outputs, dtype=float).reshape(len(outputs), -1)
    how = GoldsteinSettings(on=str(params.get("stationarity_of", "empirical")),
                            samples=int(params.get("goldstein_samples", 256)),
                            seed=int(params.get("goldstein_seed", 0)), lower=False)
    bd = goldstein_bounds(problem, x, radius, how)
    return bd.upper
