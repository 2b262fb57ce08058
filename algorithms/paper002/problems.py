"""Test problems of paper 002: regularized GLMs, l1-ball GLMs, and their exact optima.

Wang, Ye and Xu 2017 ("DP-ERM revisited") minimise F^r(x) = (1/n) sum_i f(x, z_i) + r(x)
(eq. 1, line 119) with r a "simple" possibly nonsmooth regularizer used only through its
prox, or F over a centrally symmetric set C such as an l1 ball (eq. 8, line 225). Their
experiments (App. A, lines 390-400) use logistic regression on Covertype (200000 x 54),
with an l2 regularizer of 1e-2 or none. Covertype cannot be fetched here, so
:func:`covtype_like` draws data of the same shape: 10 continuous features and two one-hot
groups (4 wilderness areas, 40 soil types), every row scaled to norm <= 1 (a public
per-record bound, so the logistic loss is 1-Lipschitz), labels from a logistic model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize

from algorithms.losses import get_loss
from dpverify.core.data import Dataset, synthetic_regression
from dpverify.core.registry import Problem


def _np_xp() -> Any:
    import array_api_compat.numpy as xp

    return xp


@dataclass(frozen=True)
class Regularizer:
    """r(x) = l1 ||x||_1 + (l2 / 2) ||x||_2^2, used through its prox.

    Data-independent, so it adds nothing to any sensitivity: the algorithms apply it
    exactly, after the noisy gradient step.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> r = Regularizer(l1=0.5, l2=1.0)
    >>> r.prox(xp, np.array([[2.0, 0.2]]), 1.0).tolist()
    [[0.75, 0.0]]
    >>> float(r.value(np.array([[1.0, -1.0]]))[0])
    2.0
    """

    l1: float = 0.0
    l2: float = 0.0

    def value(self, theta: np.ndarray) -> np.ndarray:
        """r at each row of ``theta`` (NumPy, for metrics)."""
        theta = np.atleast_2d(theta)
        return self.l1 * np.sum(np.abs(theta), axis=1) + 0.5 * self.l2 * np.sum(theta**2, axis=1)

    def prox(self, xp: Any, y: Any, eta: float) -> Any:
        """prox_{eta r}(y) = soft(y, eta l1) / (1 + eta l2), row by row (Array API).

        Soft-thresholding then shrinking is the prox of the elastic net (Zou and Hastie
        2005); paper 002 needs only that it is nonexpansive (Lemma B.2, line 551).
        """
        if self.l1 > 0:
            y = xp.sign(y) * xp.clip(xp.abs(y) - eta * self.l1, min=0.0)
        if self.l2 > 0:
            y = y / (1.0 + eta * self.l2)
        return y


def project_l1_ball(v: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection of each row of ``v`` onto the l1 ball of ``radius``.

    The sort-based algorithm of Duchi, Shalev-Shwartz, Singer and Chandra (2008), Fig. 1.

    Examples
    --------
    >>> project_l1_ball(np.array([[3.0, 1.0, 0.0]]), 2.0).tolist()
    [[2.0, 0.0, 0.0]]
    """
    v = np.atleast_2d(np.asarray(v, dtype=float))
    a = np.abs(v)
    inside = a.sum(axis=1) <= radius
    u = -np.sort(-a, axis=1)
    css = np.cumsum(u, axis=1) - radius
    j = np.arange(1, v.shape[1] + 1)
    rho = np.sum(u - css / j > 0, axis=1)  # count of active coordinates
    tau = css[np.arange(v.shape[0]), np.maximum(rho, 1) - 1] / np.maximum(rho, 1)
    out = np.sign(v) * np.maximum(a - tau[:, None], 0.0)
    return np.where(inside[:, None], v, out)


def covtype_like(n: int, d: int, rng: np.random.Generator) -> tuple[Dataset, np.ndarray]:
    """Synthetic data shaped like Covertype (App. A, line 390) for logistic regression.

    Up to 10 continuous features, the rest split into two one-hot groups in Covertype's
    4 : 40 proportion; rows scaled to norm <= 1; labels y in {-1, +1} drawn from a
    logistic model P(y = 1) = 1 / (1 + exp(-4 a.w)).

    Examples
    --------
    >>> D, w = covtype_like(20, 54, np.random.default_rng(0))
    >>> D.X.shape, bool(np.all(np.linalg.norm(D.X, axis=1) <= 1 + 1e-12))
    ((20, 54), True)
    """
    d_cont = min(10, d)
    rest = d - d_cont
    X = np.zeros((n, d))
    X[:, :d_cont] = rng.standard_normal((n, d_cont))
    if rest >= 2:
        g1 = max(1, rest // 11)
        X[np.arange(n), d_cont + rng.integers(0, g1, n)] = 1.0
        X[np.arange(n), d_cont + g1 + rng.integers(0, rest - g1, n)] = 1.0
    elif rest == 1:
        X[:, d_cont] = rng.integers(0, 2, n)
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    p = 1.0 / (1.0 + np.exp(-4.0 * X @ w))
    y = np.where(rng.random(n) < p, 1.0, -1.0)
    return Dataset(X, y), w


def sparse_logistic_data(
    n: int, d: int, rng: np.random.Generator, *, radius: float, support: int = 5
) -> tuple[Dataset, np.ndarray]:
    """High-dimensional logistic data with an l1-sparse truth, for the l1-ball setting.

    Rows are Gaussian scaled to unit norm; the generating parameter has ``support``
    nonzeros and l1 norm ``radius`` (on the boundary of the constraint set of Sec. 5).

    Examples
    --------
    >>> D, w = sparse_logistic_data(10, 40, np.random.default_rng(0), radius=5.0)
    >>> D.X.shape, round(float(np.abs(w).sum()), 6)
    ((10, 40), 5.0)
    """
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w = np.zeros(d)
    idx = rng.choice(d, size=min(support, d), replace=False)
    w[idx] = rng.choice([-1.0, 1.0], size=idx.size) * radius / idx.size
    p = 1.0 / (1.0 + np.exp(-np.sqrt(d) * (X @ w)))
    y = np.where(rng.random(n) < p, 1.0, -1.0)
    return Dataset(X, y), w


# The exact optimum -------------------------------------------------------------------------

_OPTIMA: dict[tuple[Any, ...], np.ndarray] = {}


def _key(data: Dataset, *rest: Any) -> tuple[Any, ...]:
    h = hashlib.sha1(data.X.tobytes())
    h.update(data.y.tobytes())
    return (h.hexdigest(), *rest)


def _smooth_parts(loss: Any, data: Dataset, l2: float):
    xp = _np_xp()
    X, y, n = data.X, data.y, data.n

    def f(theta: np.ndarray) -> float:
        return float(np.mean(loss.value(X @ theta, y, xp)) + 0.5 * l2 * theta @ theta)

    def g(theta: np.ndarray) -> np.ndarray:
        return loss.dvalue(X @ theta, y, xp) @ X / n + l2 * theta

    return f, g


def _smoothness_bound(loss: Any, data: Dataset, l2: float) -> float:
    # L of the smooth part: phi'' <= smoothness, times the top eigenvalue of X^T X / n.
    top = np.linalg.norm(data.X, ord=2) ** 2 / data.n
    return float(loss.smoothness) * top + l2


def solve_composite(
    loss: Any, data: Dataset, reg: Regularizer, radius_l1: float | None = None
) -> np.ndarray:
    """argmin of mean loss + r, or of mean loss over the l1 ball of ``radius_l1``.

    Smooth objectives go to scipy's L-BFGS; an l1 term to L-BFGS-B on the split
    x = u - v with u, v >= 0 (smooth and bound constrained); an l1 ball to accelerated
    projected gradient with adaptive restart (Beck and Teboulle 2009; O'Donoghue and
    Candes 2015). Proximal- or projected-gradient steps then polish the answer until the
    KKT residual (:func:`kkt_residual`) is below 1e-11.

    Examples
    --------
    >>> D, _ = covtype_like(60, 4, np.random.default_rng(1))
    >>> th = solve_composite(get_loss("logistic"), D, Regularizer(l1=0.01, l2=0.1))
    >>> bool(kkt_residual(get_loss("logistic"), D, Regularizer(0.01, 0.1), None, th) < 1e-8)
    True
    """
    key = _key(data, loss.name, reg.l1, reg.l2, radius_l1)
    if key in _OPTIMA:
        return _OPTIMA[key].copy()
    f, g = _smooth_parts(loss, data, reg.l2)
    d = data.d
    L = _smoothness_bound(loss, data, reg.l2)
    prox = _prox_map(reg, radius_l1)
    opts = {"gtol": 1e-13, "ftol": 1e-16, "maxiter": 20000, "maxcor": 30}
    if radius_l1 is not None:
        theta = _accelerated(g, L, prox, np.zeros(d))
    elif reg.l1 == 0:
        theta = scipy.optimize.minimize(f, np.zeros(d), jac=g, method="L-BFGS-B",
                                        options=opts).x
    else:
        theta = _l1_penalized(f, g, d, reg.l1, opts)
    theta = _polish(g, L, prox, theta)
    _OPTIMA[key] = theta.copy()
    return theta


def _prox_map(reg: Regularizer, radius_l1: float | None):
    """x -> prox of the nonsmooth part with step s (the l2 term lives in the smooth part)."""
    if radius_l1 is not None:
        return lambda z, s: project_l1_ball(z, radius_l1)[0]
    nonsmooth = Regularizer(l1=reg.l1)
    xp = _np_xp()
    return lambda z, s: nonsmooth.prox(xp, z[None], s)[0]


def _l1_penalized(f, g, d: int, nu: float, opts: Mapping[str, Any]) -> np.ndarray:
    def fs(uv: np.ndarray) -> float:
        return f(uv[:d] - uv[d:]) + nu * float(np.sum(uv))

    def gs(uv: np.ndarray) -> np.ndarray:
        gt = g(uv[:d] - uv[d:])
        return np.concatenate([gt + nu, -gt + nu])

    res = scipy.optimize.minimize(fs, np.zeros(2 * d), jac=gs, method="L-BFGS-B",
                                  bounds=[(0.0, None)] * (2 * d), options=dict(opts))
    return res.x[:d] - res.x[d:]


def _mapping_norm(g, L: float, prox, theta: np.ndarray) -> float:
    return float(L * np.linalg.norm(theta - prox(theta - g(theta) / L, 1.0 / L)))


def _accelerated(g, L: float, prox, theta: np.ndarray, iters: int = 20000) -> np.ndarray:
    x, yv, tk = theta, theta, 1.0
    for _ in range(iters):
        xn = prox(yv - g(yv) / L, 1.0 / L)
        if np.dot(yv - xn, xn - x) > 0:  # momentum points uphill: restart
            yv, tk = x, 1.0
            continue
        tn = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * tk * tk))
        yv, x, tk = xn + (tk - 1.0) / tn * (xn - x), xn, tn
        if _mapping_norm(g, L, prox, x) < 1e-12:
            break
    return x


def _polish(g, L: float, prox, theta: np.ndarray, iters: int = 5000) -> np.ndarray:
    for _ in range(iters):
        if _mapping_norm(g, L, prox, theta) < 1e-11:
            break
        theta = prox(theta - g(theta) / L, 1.0 / L)
    return theta


def kkt_residual(loss: Any, data: Dataset, reg: Regularizer, radius_l1: float | None,
                 theta: np.ndarray) -> float:
    """Norm of the gradient mapping L (x - prox_{r/L}(x - grad F(x) / L)); 0 iff optimal.

    For a smooth objective it is ||grad F(x)||; with an l1 term or an l1-ball constraint
    it vanishes exactly at the minimisers (first-order optimality of composite problems).

    Examples
    --------
    >>> D, _ = covtype_like(30, 3, np.random.default_rng(2))
    >>> kkt_residual(get_loss("logistic"), D, Regularizer(l2=1.0), None, np.zeros(3)) > 0
    True
    """
    _, g = _smooth_parts(loss, data, reg.l2)
    L = _smoothness_bound(loss, data, reg.l2)
    theta = np.asarray(theta, dtype=float).reshape(-1)
    return _mapping_norm(g, L, _prox_map(reg, radius_l1), theta)


# Problem factories ---------------------------------------------------------------------

def make_problem(params: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    """A paper-002 problem from ``n``, ``d``, ``loss``, ``lam`` (l2), ``lam1`` (l1), ``radius_l1``.

    ``radius_l1`` set (not ``None``) gives the constrained problem of Sec. 5 (eq. 8) on
    sparse high-dimensional data; otherwise F^r = mean loss + r (eq. 1) on
    Covertype-shaped data (regression data for the Huber loss). ``objective`` is F^r,
    ``grad`` the gradient of its smooth part; ``optimum`` is exact to ~1e-10 (None for a
    nonconvex loss, where only gradient norms are measured).

    Examples
    --------
    >>> p = make_problem({"n": 50, "d": 3, "loss": "logistic", "lam": 0.1, "lam1": 0.01},
    ...                  np.random.default_rng(0))
    >>> bool(p.info["kkt_residual"] < 1e-8), p.info["mu"]
    (True, 0.1)
    """
    loss = get_loss(params.get("loss", "logistic"))
    n, d = int(params["n"]), int(params["d"])
    lam = float(params.get("lam", 0.0) or 0.0)
    lam1 = float(params.get("lam1", 0.0) or 0.0)
    radius_l1 = params.get("radius_l1")
    radius_l1 = None if radius_l1 is None else float(radius_l1)
    if radius_l1 is not None:
        data, w = sparse_logistic_data(n, d, rng, radius=radius_l1)
    elif loss.name in ("squared", "huber"):
        data, w = synthetic_regression(n, d, rng)
    else:
        data, w = covtype_like(n, d, rng)
    reg = Regularizer(l1=lam1, l2=lam)
    xp = _np_xp()
    X, y = data.X, data.y

    def objective(theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(theta)
        return np.mean(loss.value(theta @ X.T, y, xp), axis=1) + reg.value(theta)

    def grad(theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(theta)
        return loss.dvalue(theta @ X.T, y, xp) @ X / data.n + lam * theta

    convex = loss.name != "sigmoid"
    optimum = solve_composite(loss, data, reg, radius_l1) if convex else None
    info = {
        "lipschitz": float(loss.lipschitz),  # rows have norm <= 1
        "smoothness": float(loss.smoothness),
        "lam": lam, "lam1": lam1, "mu": lam, "radius_l1": radius_l1,
        "regularizer": reg, "w_true": w, "convex": convex,
        "kkt_residual": (kkt_residual(loss, data, reg, radius_l1, optimum)
                         if optimum is not None else None),
    }
    private = ("w_true", "kkt_residual")
    return Problem(data=data, loss=loss, objective=objective, grad=grad, optimum=optimum,
                   info=info, public={k: v for k, v in info.items() if k not in private})
