"""Test problems: regularized generalized linear models on synthetic data.

F(theta) = (1/n) sum_i phi(x_i . theta, y_i) + (lam / 2) ||theta||^2 over the ball of
``radius``; with lam > 0 it is lam-strongly convex, the setting of the excess-risk
theorems of noisy GD (Bassily, Smith and Thakurta 2014, Theorem 2.4).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.optimize

from algorithms.losses import Logistic, get_loss
from dpverify.backends.base import NumpyBackend
from dpverify.data import Dataset, synthetic_classification, synthetic_regression
from dpverify.registry import Problem


def _np_xp() -> Any:
    import array_api_compat.numpy as xp

    return xp


def glm_objective(loss: Any, data: Dataset, lam: float):
    """Objective and gradient of the regularized empirical risk, vectorized over trials."""
    xp = _np_xp()
    X, y, n = data.X, data.y, data.n

    def objective(theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(theta)
        Z = theta @ X.T
        return np.mean(loss.value(Z, y, xp), axis=1) + 0.5 * lam * np.sum(theta**2, axis=1)

    def grad(theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(theta)
        Z = theta @ X.T
        return loss.dvalue(Z, y, xp) @ X / n + lam * theta

    return objective, grad


def project_ball(theta: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection of each row onto the ball of ``radius``."""
    nrm = np.linalg.norm(theta, axis=-1, keepdims=True)
    return theta * np.minimum(1.0, radius / np.maximum(nrm, 1e-300))


def solve_glm(loss: Any, data: Dataset, lam: float, radius: float) -> np.ndarray:
    """The constrained minimiser to high precision (projected L-BFGS, then a check)."""
    objective, grad = glm_objective(loss, data, lam)
    f = lambda t: float(objective(t)[0])  # noqa: E731
    g = lambda t: grad(t)[0]  # noqa: E731
    res = scipy.optimize.minimize(f, np.zeros(data.d), jac=g, method="L-BFGS-B",
                                  options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10000})
    theta = res.x
    if np.linalg.norm(theta) > radius:
        # On the boundary: projected gradient descent with a smoothness-based step.
        step = 1.0 / (getattr(loss, "smoothness", 1.0) + lam + 1e-12)
        theta = project_ball(theta, radius)
        for _ in range(20000):
            new = project_ball(theta - step * g(theta), radius)
            if np.linalg.norm(new - theta) < 1e-14:
                break
            theta = new
    return theta


def make_glm_problem(params: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    """A synthetic GLM problem from ``n``, ``d``, ``loss``, ``lam``, ``radius``.

    Examples
    --------
    >>> p = make_glm_problem({"n": 50, "d": 3, "loss": "logistic", "lam": 0.1, "radius": 5.0},
    ...                      np.random.default_rng(0))
    >>> bool(np.linalg.norm(p.grad(p.optimum[None])) < 1e-6)
    True
    """
    loss = get_loss(params.get("loss", "logistic"))
    n, d = int(params["n"]), int(params["d"])
    if loss.name in ("squared", "huber"):
        data, w = synthetic_regression(n, d, rng)
    else:
        data, w = synthetic_classification(n, d, rng)
    lam = float(params.get("lam", 0.0))
    radius = float(params.get("radius", 10.0))
    objective, grad = glm_objective(loss, data, lam)
    optimum = solve_glm(loss, data, lam, radius) if loss.name != "linear" else None
    return Problem(
        data=data, loss=loss, objective=objective, grad=grad, optimum=optimum,
        info={"lipschitz": loss.lipschitz, "smoothness": getattr(loss, "smoothness", None),
              "lam": lam, "radius": radius, "w_true": w},
    )


def clipped_grad_sum(cur: Any, loss: Any, theta: Any, clip: float | None, *,
                     guard_nonfinite: bool = True):
    """The query sum_i w_i clip_C(grad phi(x_i . theta, y_i)) for every trial.

    Per-sample gradients of a GLM are ``phi'(z_i) x_i``, so clipping needs only
    |phi'(z_i)| ||x_i||: the whole query is one matrix product per call. Records with a
    non-finite value are dropped (weight 0) unless ``guard_nonfinite`` is off, so a NaN
    record cannot slip through clipping.
    """
    xp, backend = cur.xp, cur.backend
    all_ones = getattr(cur, "all_ones", None)

    def query(X: Any, y: Any, w: Any) -> Any:
        if isinstance(X, np.ndarray):
            return _clipped_grad_sum_numpy(X, y, w, theta, loss, backend, clip,
                                           guard_nonfinite, all_ones is not None and all_ones(w))
        if guard_nonfinite:
            ok = xp.all(xp.isfinite(X), axis=1) & xp.isfinite(y)
            X = xp.where(ok[:, None], X, xp.zeros_like(X))
            y = xp.where(ok, y, xp.zeros_like(y))
            w = w * xp.astype(ok, w.dtype)
        Z = theta @ X.T
        coef = backend.glm_coefficients(loss, Z, y)
        if clip is not None:
            norms = xp.abs(coef) * xp.linalg.vector_norm(X, axis=1)
            factor = xp.where(norms > clip, clip / xp.where(norms > clip, norms, 1.0), 1.0)
            coef = coef * factor
        return (w * coef) @ X

    return query


# The NumPy path of clipped_grad_sum, computing the same numbers with less work per step:
# the row norms and finiteness of X are computed once per data array instead of once per
# step, and the clipping and weighting passes over the (trials, n) arrays are skipped when
# they provably change nothing. Every result is bit-identical to the generic path above.
_ROW_STATS: dict[tuple[int, int], tuple[Any, Any, Any, bool, np.ndarray, float]] = {}


def _row_stats(X: np.ndarray, y: np.ndarray) -> tuple[bool, np.ndarray, float]:
    key = (id(X), id(y))
    hit = _ROW_STATS.get(key)
    if hit is not None and hit[0]() is X and hit[1]() is y and hit[2] == X.shape:
        return hit[3], hit[4], hit[5]
    ok = np.all(np.isfinite(X), axis=1) & np.isfinite(y)
    all_ok = bool(ok.all())
    # Norms of the rows the generic path would see (non-finite rows zeroed).
    xnorm = _np_xp().linalg.vector_norm(X if all_ok else np.where(ok[:, None], X, 0.0), axis=1)
    if len(_ROW_STATS) > 64:  # data arrays of finished runs; ids may be reused
        _ROW_STATS.clear()
    _ROW_STATS[key] = (weakref.ref(X), weakref.ref(y), X.shape, all_ok, xnorm,
                       float(np.max(xnorm, initial=0.0)))
    return all_ok, xnorm, float(np.max(xnorm, initial=0.0))


def _clipped_grad_sum_numpy(X: np.ndarray, y: np.ndarray, w: np.ndarray, theta: np.ndarray,
                            loss: Any, backend: Any, clip: float | None,
                            guard_nonfinite: bool, w_all_ones: bool) -> np.ndarray:
    xp = backend.xp
    if guard_nonfinite:
        all_ok, xnorm, xmax = _row_stats(X, y)
        if not all_ok:
            ok = np.all(np.isfinite(X), axis=1) & np.isfinite(y)
            X = np.where(ok[:, None], X, np.zeros_like(X))
            y = np.where(ok, y, np.zeros_like(y))
            w = w * ok.astype(w.dtype)
            w_all_ones = False
    else:
        xnorm = xp.linalg.vector_norm(X, axis=1)
        xmax = float(np.max(xnorm, initial=0.0))
    Z = theta @ X.T
    if type(loss) is Logistic and type(backend).glm_coefficients is NumpyBackend.glm_coefficients:
        # Logistic.dvalue's operations in its order, in place in Z (ours, fresh): four
        # temporaries the size of the block cost a quarter of the step.
        Z *= 0.5 * y
        np.tanh(Z, out=Z)
        np.subtract(1.0, Z, out=Z)
        Z *= -y * 0.5
        coef = Z
    else:
        coef = backend.glm_coefficients(loss, Z, y)
    if clip is not None and coef.size:
        # Every norm |c_i| ||x_i|| is at most max|c| max||x||; with a margin for rounding
        # (float32 included) no clip factor then differs from 1. NaN fails the test and
        # takes the generic way.
        bound = max(-float(np.min(coef)), float(np.max(coef))) * xmax
        if not bound * (1.0 + 1e-6) <= clip:
            norms = xp.abs(coef) * xnorm
            factor = xp.where(norms > clip, clip / xp.where(norms > clip, norms, 1.0), 1.0)
            coef = coef * factor
    return (coef if w_all_ones else w * coef) @ X
