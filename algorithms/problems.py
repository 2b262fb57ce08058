"""Test problems: regularized generalized linear models on synthetic data.

F(theta) = (1/n) sum_i phi(x_i . theta, y_i) + (lam / 2) ||theta||^2 over the ball of
``radius``; with lam > 0 it is lam-strongly convex, the setting of the excess-risk
theorems of noisy GD (Bassily, Smith and Thakurta 2014, Theorem 2.4).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize

from algorithms.losses import Logistic, get_loss
from dpverify.core.backends.base import NumpyBackend
from dpverify.core.data import Dataset, synthetic_classification, synthetic_regression
from dpverify.core.registry import Problem


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
    public = {"lipschitz": loss.lipschitz, "smoothness": getattr(loss, "smoothness", None),
              "lam": lam, "radius": radius}
    return Problem(data=data, loss=loss, objective=objective, grad=grad, optimum=optimum,
                   info={**public, "w_true": w}, public=public)


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
# facts about X (row norms, finiteness) are computed once per data array instead of once
# per step, and passes over the (trials, n) arrays are skipped when they provably change
# nothing. Every result is bit-identical to the generic path above.


@dataclass
class _Rows:
    """What the NumPy path reuses about one data array (X, y) across steps."""

    X: Any  # weak references: the cache must not keep finished runs' data alive
    y: Any
    shape: tuple[int, ...]
    all_ok: bool
    xnorm: np.ndarray
    xmax: float
    scaled: tuple[np.ndarray, np.ndarray] | None | bool = False  # False: not computed yet


_ROW_STATS: dict[tuple[int, int], _Rows] = {}


def _rows(X: np.ndarray, y: np.ndarray) -> _Rows:
    key = (id(X), id(y))
    hit = _ROW_STATS.get(key)
    if hit is not None and hit.X() is X and hit.y() is y and hit.shape == X.shape:
        return hit
    ok = np.all(np.isfinite(X), axis=1) & np.isfinite(y)
    all_ok = bool(ok.all())
    # Norms of the rows the generic path would see (non-finite rows zeroed).
    xnorm = _np_xp().linalg.vector_norm(X if all_ok else np.where(ok[:, None], X, 0.0), axis=1)
    if len(_ROW_STATS) > 64:  # data arrays of finished runs; ids may be reused
        _ROW_STATS.clear()
    rows = _Rows(weakref.ref(X), weakref.ref(y), X.shape, all_ok, xnorm,
                 float(np.max(xnorm, initial=0.0)))
    _ROW_STATS[key] = rows
    return rows


def _exact_scaling_range(dtype: Any) -> tuple[float, float]:
    """Magnitudes within which scaling by 1/2 commutes with every rounding of a GEMM.

    Entries of theta and X in [lo, hi] (or 0) keep every product and partial sum of
    theta @ X.T either 0 or far inside the normal range (no underflow, no overflow), where
    multiplying by a power of two is exact and so commutes with rounding.
    """
    return (2.0**-400, 2.0**400) if np.dtype(dtype).itemsize >= 8 else (2.0**-30, 2.0**30)


def _in_range(a: np.ndarray, lo: float, hi: float) -> bool:
    m = np.abs(a)
    return bool(np.all((m == 0) | ((m >= lo) & (m <= hi))))


def _logistic_scaled(rows: _Rows, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """(X * (y/2), X * (-y/2)) when labels are +-1 and X's entries are in range."""
    if rows.scaled is False:
        lo, hi = _exact_scaling_range(X.dtype)
        if rows.all_ok and X.dtype == y.dtype and np.all(np.abs(y) == 1) and _in_range(X, lo, hi):
            rows.scaled = (X * (0.5 * y)[:, None], X * (-y * 0.5)[:, None])
        else:
            rows.scaled = None
    return rows.scaled  # type: ignore[return-value]


def _clipped_grad_sum_numpy(X: np.ndarray, y: np.ndarray, w: np.ndarray, theta: np.ndarray,
                            loss: Any, backend: Any, clip: float | None,
                            guard_nonfinite: bool, w_all_ones: bool) -> np.ndarray:
    xp = backend.xp
    rows = None
    if guard_nonfinite:
        rows = _rows(X, y)
        xnorm, xmax = rows.xnorm, rows.xmax
        if not rows.all_ok:
            ok = np.all(np.isfinite(X), axis=1) & np.isfinite(y)
            X = np.where(ok[:, None], X, np.zeros_like(X))
            y = np.where(ok, y, np.zeros_like(y))
            w = w * ok.astype(w.dtype)
            w_all_ones = False
    else:
        xnorm = xp.linalg.vector_norm(X, axis=1)
        xmax = float(np.max(xnorm, initial=0.0))
    numpy_logistic = (type(loss) is Logistic and type(backend).glm_coefficients
                      is NumpyBackend.glm_coefficients and theta.dtype == X.dtype == y.dtype)
    scaled = _logistic_scaled(rows, X, y) if numpy_logistic and rows is not None else None
    if scaled is not None and _in_range(theta, *_exact_scaling_range(theta.dtype)):
        # Logistic.dvalue is -(y/2) (1 - tanh((y/2) z)). With y = +-1, y/2 is a signed
        # power of two, so it can be moved into X exactly (see _exact_scaling_range):
        # theta @ (X y/2).T is (y/2) z bit for bit, and the coefficient's factor -(y/2)
        # goes into the second product. Two passes over the block instead of six.
        Xa, Xb = scaled
        U = theta @ Xa.T
        np.tanh(U, out=U)
        np.subtract(1.0, U, out=U)  # |coef_i| = U_i / 2 exactly
        if w_all_ones and (clip is None or 0.5 * float(np.max(U, initial=0.0)) * xmax
                           * (1.0 + 1e-6) <= clip):
            return U @ Xb  # no clip factor differs from 1 (see the bound below)
        U *= -y * 0.5
        coef = U
    elif numpy_logistic:
        # Logistic.dvalue's operations in its order, in place in Z (ours, fresh): four
        # temporaries the size of the block cost a quarter of the step.
        Z = theta @ X.T
        Z *= 0.5 * y
        np.tanh(Z, out=Z)
        np.subtract(1.0, Z, out=Z)
        Z *= -y * 0.5
        coef = Z
    else:
        coef = backend.glm_coefficients(loss, theta @ X.T, y)
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
