"""Test problems of paper 003: minimax objectives whose value function has known strict saddles.

Paper 003 minimises Phi(x) = max_{y in Y} f(x, y) for f nonconvex in x and mu-strongly
concave in y (eq. 1-2, lines 71-85). Two data-driven families, each record a row of the
curator's ``X`` (the label column is unused):

* ``cosine``, the "cosine saddle" of the notes (TP1): record (A_i, b_i) with
  A_i = beta I + s_A G_i (G_i Rademacher / sqrt(d)) and b_i = s_b g_i (g_i uniform on the
  unit sphere), per-sample loss F(x, y; xi) = a cos(x_1) + y^T (A x - b) - (mu/2) ||y||^2 on
  Y = {||y|| <= R_Y}. The population Phi(x) = a cos(x_1) + beta^2 ||x||^2 / (2 mu) has a
  strict saddle at 0 with lambda_min = -(a - beta^2/mu); the empirical Phi_S(x) =
  a cos(x_1) + ||A_bar x - b_bar||^2 / (2 mu) has one nearby.
* ``matrix_sensing``, the experiment of Section 5.1 (line 346): record (A_i, b_i),
  F(U, V, y; xi_i) = y_i (<A_i, U V^T> - b_i) - y_i^2 / 2 with one dual coordinate per
  record, so y lives in R^n. Phi(U, V) = (1/(2n)) sum_i (<A_i, U V^T> - b_i)^2 has a strict
  saddle at (0, 0) with lambda_min = -sigma_max((1/n) sum_i b_i A_i).

Each family has two faces: a per-sample gradient model in the Array API (``xp``), which the
algorithms' curator queries call, and a NumPy objective with Hessian blocks, which the
second-order metrics of :mod:`dpverify.checks.rates.sosp` evaluate. The algorithms see only the
first; the metrics never touch the curator.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpverify.checks.rates.sosp import phi_at, phi_grad
from dpverify.core.data import Dataset
from dpverify.core.errors import InputError
from dpverify.core.ranges import ANY, COUNT, COUNT0, NONNEGATIVE, POSITIVE, one_of
from dpverify.core.registry import Problem, Setting

# Per-sample models (Array API) ------------------------------------------------------------


def guard_records(xp: Any, X: Any, w: Any) -> tuple[Any, Any]:
    """Zero out records holding non-finite values and give them weight 0.

    A NaN record would otherwise pass through a per-sample clip (NaN > C is False).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> X, w = guard_records(xp, np.array([[1.0], [np.nan]]), np.ones((1, 2)))
    >>> X.tolist(), w.tolist()
    ([[1.0], [0.0]], [[1.0, 0.0]])
    """
    ok = xp.all(xp.isfinite(X), axis=1)
    X = xp.where(ok[:, None], X, xp.zeros_like(X))
    return X, w * xp.astype(ok, w.dtype)


@dataclass(frozen=True)
class CosineModel:
    """Per-sample gradients of F(x, y; A, b) = a cos(x_1) + y^T (A x - b) - (mu/2)||y||^2.

    Records are rows ``[vec(A) (d*d, row-major), b (d)]``; x and y are both in R^d.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> m = CosineModel(d=2, a=1.0, mu=1.0)
    >>> X = np.array([[1.0, 0.0, 0.0, 1.0, 0.5, 0.0]])  # A = I, b = (0.5, 0)
    >>> gx, gy = m.per_sample(xp, X, np.zeros((1, 2)), np.ones((1, 2)))
    >>> gx.tolist(), gy.tolist()
    ([[[1.0, 1.0]]], [[[-1.5, -1.0]]])
    """

    d: int
    a: float
    mu: float
    y_per_record: bool = False

    @property
    def d1(self) -> int:
        return self.d

    def d2(self, slots: int) -> int:
        return self.d

    def per_sample(self, xp: Any, X: Any, x: Any, y: Any) -> tuple[Any, Any]:
        """Per-sample (grad_x F, grad_y F), each of shape (trials, slots, d)."""
        d = self.d
        A = xp.reshape(X[:, : d * d], (X.shape[0], d, d))
        b = X[:, d * d : d * d + d]
        e1 = xp.reshape(xp.astype(xp.arange(d) == 0, x.dtype), (1, 1, d))
        # grad_x F = -a sin(x_1) e_1 + A^T y; grad_y F = A x - b - mu y (the cosine term
        # belongs to every record: it is part of F, so it is clipped with the rest).
        gx = xp.einsum("nij,ti->tnj", A, y) - self.a * xp.sin(x[:, 0])[:, None, None] * e1
        gy = xp.einsum("nij,tj->tni", A, x) - b[None, :, :] - self.mu * y[:, None, :]
        return gx, gy


@dataclass(frozen=True)
class MatrixSensingModel:
    """Per-sample gradients of F(U, V, y; A_i, b_i) = y_i (<A_i, U V^T> - b_i) - y_i^2 / 2.

    Records are rows ``[vec(A_i) (p*q, row-major), b_i]``; x = (vec U, vec V) in
    R^{(p+q) r}; y has one coordinate per record slot, so ``grad_y F_i`` is the scalar
    ``r_i - y_i`` at coordinate i (``y_per_record``).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> m = MatrixSensingModel(p=1, q=1, r=1)
    >>> gx, gy = m.per_sample(xp, np.array([[2.0, 1.0]]), np.ones((1, 2)), np.ones((1, 1)))
    >>> gx.tolist(), gy.tolist()  # r = 2*1*1 - 1 = 1
    ([[[2.0, 2.0]]], [[0.0]])
    """

    p: int
    q: int
    r: int
    y_per_record: bool = True

    @property
    def d1(self) -> int:
        return (self.p + self.q) * self.r

    def d2(self, slots: int) -> int:
        return slots

    def per_sample(self, xp: Any, X: Any, x: Any, y: Any) -> tuple[Any, Any]:
        """Per-sample grad_x F (trials, slots, d1) and grad_{y_i} F_i (trials, slots)."""
        p, q, r = self.p, self.q, self.r
        n, t = X.shape[0], x.shape[0]
        A = xp.reshape(X[:, : p * q], (n, p, q))
        b = X[:, p * q]
        U = xp.reshape(x[:, : p * r], (t, p, r))
        V = xp.reshape(x[:, p * r :], (t, q, r))
        AV = xp.einsum("npq,tqr->tnpr", A, V)
        AU = xp.einsum("npq,tpr->tnqr", A, U)
        resid = xp.einsum("tnpr,tpr->tn", AV, U) - b[None, :]  # <A_i, U V^T> - b_i
        gx = xp.concat([xp.reshape(AV, (t, n, p * r)), xp.reshape(AU, (t, n, q * r))], axis=2)
        return gx * y[:, :, None], resid - y


def _clip_factor(xp: Any, norms: Any, clip: Any) -> Any:
    """min(1, clip / norm) elementwise, 1 where the norm is 0 (nothing to scale)."""
    big = norms > clip
    return xp.where(big, clip / xp.where(big, norms, xp.ones_like(norms)), xp.ones_like(norms))


def _as_clip(xp: Any, clip: Any, like: Any) -> Any:
    if clip is None or isinstance(clip, (int, float)):
        return clip
    return xp.reshape(clip, (like.shape[0], 1))  # one threshold per trial


def joint_sum(model: Any, xp: Any, X: Any, w: Any, x: Any, y: Any, clip: Any,
              guard: bool = True) -> Any:
    """sum_i w_i clip_C((grad_x F_i, grad_y F_i)) for every trial: shape (trials, d1 + d2).

    The per-sample gradient is clipped as one joint vector (notes A3-6: one release of
    (v, u)). ``clip`` is None (no clipping), a float, or one threshold per trial.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> m = CosineModel(d=1, a=0.0, mu=1.0)
    >>> X = np.array([[1.0, 0.0], [1.0, 3.0]])
    >>> joint_sum(m, xp, X, np.ones((1, 2)), np.zeros((1, 1)), np.zeros((1, 1)), 1.0).tolist()
    [[0.0, -1.0]]
    """
    if guard:
        X, w = guard_records(xp, X, w)
    gx, gy = model.per_sample(xp, X, x, y)
    return _weighted_clipped(model, xp, gx, gy, w, _as_clip(xp, clip, x))


def joint_diff_sum(model: Any, xp: Any, X: Any, w: Any, x1: Any, y1: Any, x0: Any, y0: Any,
                   clip: Any, guard: bool = True) -> Any:
    """sum_i w_i clip_C(grad F_i(x1, y1) - grad F_i(x0, y0)), joint over (x, y) blocks.

    The SPIDER increment (Alg. 3, lines 14-15) with each per-sample DIFFERENCE clipped,
    which is what bounds its sensitivity for any record (notes P-4).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> m = CosineModel(d=1, a=0.0, mu=1.0)
    >>> X = np.array([[2.0, 0.0]])
    >>> joint_diff_sum(m, xp, X, np.ones((1, 1)), np.ones((1, 1)), np.zeros((1, 1)),
    ...                np.zeros((1, 1)), np.zeros((1, 1)), None).tolist()
    [[0.0, 2.0]]
    """
    if guard:
        X, w = guard_records(xp, X, w)
    gx1, gy1 = model.per_sample(xp, X, x1, y1)
    gx0, gy0 = model.per_sample(xp, X, x0, y0)
    return _weighted_clipped(model, xp, gx1 - gx0, gy1 - gy0, w, _as_clip(xp, clip, x1))


def _weighted_clipped(model: Any, xp: Any, gx: Any, gy: Any, w: Any, clip: Any) -> Any:
    sq = xp.sum(gx * gx, axis=2)
    sq = sq + (gy * gy if model.y_per_record else xp.sum(gy * gy, axis=2))
    coef = w if clip is None else w * _clip_factor(xp, xp.sqrt(sq), clip)
    sx = xp.einsum("tn,tnd->td", coef, gx)
    sy = coef * gy if model.y_per_record else xp.einsum("tn,tnd->td", coef, gy)
    return xp.concat([sx, sy], axis=1)


# NumPy objectives with Hessian blocks (for the metrics) -----------------------------------


@dataclass(frozen=True)
class CosineObjective:
    """f(x, y) = a cos(x_1) + y^T (A x - b) - (mu/2) ||y||^2 on Y = {||y|| <= y_radius}.

    The empirical f_S has A = mean A_i, b = mean b_i; the population f has A = beta I,
    b = 0 (E G = 0, E g = 0). Inside Y, y*(x) = (A x - b)/mu and
    Phi(x) = a cos(x_1) + ||A x - b||^2 / (2 mu) (notes TP1).

    Examples
    --------
    >>> f = CosineObjective(a=1.0, mu=1.0, A=0.5 * np.eye(2), b=np.zeros(2))
    >>> float(f.phi_closed(np.zeros((1, 2)))[0])
    1.0
    """

    a: float
    mu: float
    A: np.ndarray
    b: np.ndarray
    y_radius: float | None = None

    @property
    def d1(self) -> int:
        return int(self.A.shape[1])

    @property
    def d2(self) -> int:
        return int(self.A.shape[0])

    def value(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        r = x @ self.A.T - self.b
        return self.a * np.cos(x[:, 0]) + np.sum(y * r, axis=1) - 0.5 * self.mu * np.sum(y * y, 1)

    def grad_x(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        g = y @ self.A
        g[:, 0] -= self.a * np.sin(x[:, 0])
        return g

    def grad_y(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x @ self.A.T - self.b - self.mu * y

    def hess_xx(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        H = np.zeros((x.shape[0], self.d1, self.d1))
        H[:, 0, 0] = -self.a * np.cos(x[:, 0])
        return H

    def hess_xy(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self.A.T, (x.shape[0], self.d1, self.d2)).copy()

    def hess_yy(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.broadcast_to(-self.mu * np.eye(self.d2), (x.shape[0], self.d2, self.d2)).copy()

    def project_y(self, y: np.ndarray) -> np.ndarray:
        return _project_ball(y, self.y_radius)

    def y_star_closed(self, x: np.ndarray) -> np.ndarray:
        """The unconstrained maximiser (A x - b)/mu, projected onto Y."""
        return self.project_y((x @ self.A.T - self.b) / self.mu)

    def phi_closed(self, x: np.ndarray) -> np.ndarray:
        """Phi(x) when y*(x) is interior to Y (notes TP1)."""
        r = x @ self.A.T - self.b
        return self.a * np.cos(x[:, 0]) + np.sum(r * r, axis=1) / (2.0 * self.mu)


@dataclass(frozen=True)
class MatrixSensingObjective:
    """f(U, V, y) = (1/n) sum_i (y_i (<A_i, U V^T> - b_i) - y_i^2 / 2) (Section 5.1, line 346).

    y*(x) = residuals and Phi = (1/(2n)) sum_i r_i^2 (notes Section 6); Y = R^n, or a ball
    of radius ``y_radius``.

    Examples
    --------
    >>> f = MatrixSensingObjective(np.ones((2, 1, 1)), np.array([1.0, -1.0]), 1, 1, 1)
    >>> float(f.phi_closed(np.zeros((1, 2)))[0])
    0.5
    """

    A: np.ndarray  # (n, p, q)
    b: np.ndarray  # (n,)
    p: int
    q: int
    r: int
    y_radius: float | None = None

    @property
    def n(self) -> int:
        return int(self.b.shape[0])

    @property
    def mu(self) -> float:
        return 1.0 / self.n

    @property
    def d1(self) -> int:
        return (self.p + self.q) * self.r

    @property
    def d2(self) -> int:
        return self.n

    def _uv(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t, p, q, r = x.shape[0], self.p, self.q, self.r
        return x[:, : p * r].reshape(t, p, r), x[:, p * r :].reshape(t, q, r)

    def residuals(self, x: np.ndarray) -> np.ndarray:
        U, V = self._uv(x)
        return np.einsum("npq,tpq->tn", self.A, U @ V.transpose(0, 2, 1)) - self.b

    def _g(self, x: np.ndarray) -> np.ndarray:
        """grad_x <A_i, U V^T> for every i: (trials, n, d1)."""
        U, V = self._uv(x)
        t, n = x.shape[0], self.n
        AV = np.einsum("npq,tqr->tnpr", self.A, V).reshape(t, n, -1)
        AU = np.einsum("npq,tpr->tnqr", self.A, U).reshape(t, n, -1)
        return np.concatenate([AV, AU], axis=2)

    def value(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.mean(y * self.residuals(x) - 0.5 * y * y, axis=1)

    def grad_x(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.einsum("tn,tnd->td", y, self._g(x)) / self.n

    def grad_y(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (self.residuals(x) - y) / self.n

    def hess_xx(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        # sum_i c_i <A_i, U V^T> with c = y/n is bilinear in (U, V): its Hessian has the
        # off-diagonal blocks d^2/dU_{ja} dV_{kb} = M_{jk} delta_{ab}, M = sum_i c_i A_i.
        p, q, r = self.p, self.q, self.r
        M = np.einsum("tn,npq->tpq", y, self.A) / self.n
        B = np.einsum("tpq,ab->tpaqb", M, np.eye(r)).reshape(x.shape[0], p * r, q * r)
        H = np.zeros((x.shape[0], self.d1, self.d1))
        H[:, : p * r, p * r :] = B
        H[:, p * r :, : p * r] = B.transpose(0, 2, 1)
        return H

    def hess_xy(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self._g(x).transpose(0, 2, 1) / self.n

    def hess_yy(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.broadcast_to(-np.eye(self.n) / self.n, (x.shape[0], self.n, self.n)).copy()

    def project_y(self, y: np.ndarray) -> np.ndarray:
        return _project_ball(y, self.y_radius)

    def y_star_closed(self, x: np.ndarray) -> np.ndarray:
        return self.project_y(self.residuals(x))

    def phi_closed(self, x: np.ndarray) -> np.ndarray:
        r = self.residuals(x)
        return 0.5 * np.mean(r * r, axis=1)


def _project_ball(y: np.ndarray, radius: float | None) -> np.ndarray:
    if radius is None:
        return y
    nrm = np.linalg.norm(y, axis=1, keepdims=True)
    return y * np.minimum(1.0, radius / np.maximum(nrm, 1e-300))


# Data ------------------------------------------------------------------------------------


def cosine_records(n: int, d: int, beta: float, s_A: float, s_b: float,
                   rng: np.random.Generator) -> np.ndarray:
    """Rows [vec(A_i), b_i] of the cosine-saddle problem (notes TP1).

    Examples
    --------
    >>> X = cosine_records(4, 2, 0.5, 0.0, 1.0, np.random.default_rng(0))
    >>> X.shape, X[0, :4].tolist(), bool(np.allclose(np.linalg.norm(X[:, 4:], axis=1), 1))
    ((4, 6), [0.5, 0.0, 0.0, 0.5], True)
    """
    G = rng.choice([-1.0, 1.0], size=(n, d, d)) / math.sqrt(d)
    A = beta * np.eye(d)[None] + s_A * G
    g = rng.standard_normal((n, d))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return np.concatenate([A.reshape(n, d * d), s_b * g], axis=1)


def matrix_sensing_records(n: int, p: int, q: int, r: int, noise: float, scale: float,
                           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows [vec(A_i), b_i] of the experiment (Section 5.1, lines 348-350) and the truth X*.

    A_i has N(0, 1/(pq)) entries; X* = U* V*^T with Gaussian factors rescaled so that
    ||X*||_F = ``scale`` (the paper's rescaling is not given); b_i = <A_i, X*> + N(0, noise^2).

    Examples
    --------
    >>> X, Xs = matrix_sensing_records(5, 3, 3, 1, 0.01, 2.0, np.random.default_rng(0))
    >>> X.shape, round(float(np.linalg.norm(Xs)), 6)
    ((5, 10), 2.0)
    """
    A = rng.standard_normal((n, p, q)) / math.sqrt(p * q)
    Xs = rng.standard_normal((p, r)) @ rng.standard_normal((q, r)).T
    Xs *= scale / np.linalg.norm(Xs)
    b = np.einsum("npq,pq->n", A, Xs) + noise * rng.standard_normal(n)
    return np.concatenate([A.reshape(n, p * q), b[:, None]], axis=1), Xs


# Problem factories -----------------------------------------------------------------------


@dataclass(frozen=True)
class MinimaxSetting:
    """What an algorithm of paper 003 may know about a problem: its public constants.

    ``L`` bounds every per-sample Hessian on the region the run stays in (A2), ``M`` every
    per-sample gradient there (A1, block-wise), ``mu`` the strong concavity (A4); ``L_phi``
    and ``rho_phi`` are Phi's gradient and Hessian Lipschitz constants; ``F0`` bounds
    Phi(x0) - inf Phi (the notes' reading of Theorem 1's F0) for every dataset the record
    bounds allow: a bound computed from the records themselves would be data the schedule
    uses without a release.
    """

    model: Any
    d1: int
    d2: int
    L: float
    M: float
    mu: float
    L_phi: float
    rho_phi: float
    F0: float
    y_radius: float | None
    x0: np.ndarray


def setting_of(setting: Setting) -> MinimaxSetting:
    """The :class:`MinimaxSetting` a paper-003 problem declares public."""
    s = setting.get("minimax_setting")
    if not isinstance(s, MinimaxSetting):
        raise InputError("this algorithm needs a paper-003 minimax problem "
                         "(algorithms.paper003.problems.make_minimax_problem)")
    return s


def _cosine_problem(p: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    n, d = int(p["n"]), int(p["d"])
    a, mu, beta = float(p["a"]), float(p["mu"]), float(p["beta"])
    s_A, s_b = float(p["s_A"]), float(p["s_b"])
    R_Y = p.get("y_radius")
    R_Y = None if R_Y is None else float(R_Y)
    X = cosine_records(n, d, beta, s_A, s_b, rng)
    data = Dataset(X, np.zeros(n))
    if str(p.get("phi", "empirical")) == "population":
        obj = CosineObjective(a, mu, beta * np.eye(d), np.zeros(d), R_Y)
    else:
        obj = CosineObjective(a, mu, X[:, : d * d].reshape(n, d, d).mean(0), X[:, d * d :].mean(0),
                              R_Y)
    norm_A = beta + s_A * math.sqrt(d)  # ||A_i||_2 <= beta + s_A ||G_i||_F
    x_box = float(p["x_box"])  # the region the constants are stated on: ||x|| <= x_box
    y_box = R_Y if R_Y is not None else norm_A * x_box / mu + s_b / mu
    # A1 block-wise on the region; A2 from the per-sample Hessian [[-a cos, A^T], [A, -mu I]].
    M = max(a + norm_A * y_box, norm_A * x_box + s_b + mu * y_box)
    L = max(a, mu) + norm_A
    x0 = _start(p.get("x0"), d)
    kappa = beta**2 / mu
    s = _cosine_minimum(kappa / a)
    if str(p.get("phi", "empirical")) == "population":
        # The population Phi is public (A = beta I, b = 0): its F0 is exact.
        F0 = max(float(obj.phi_closed(x0[None])[0]) - (a * math.cos(s) + kappa * s * s / 2), 1e-12)
    else:
        # For every dataset of the family: Phi_S(x) = a cos(x_1) + ||A x - b||^2 / (2 mu)
        # (notes TP1; a constrained Y only lowers it) with ||A|| <= norm_A and ||b|| <= s_b for
        # a mean of records, and inf Phi_S >= -a.
        F0 = a * math.cos(x0[0]) + a + (norm_A * float(np.linalg.norm(x0)) + s_b) ** 2 / (2 * mu)
    setting = MinimaxSetting(
        model=CosineModel(d=d, a=a, mu=mu), d1=d, d2=d, L=L, M=M, mu=mu,
        L_phi=a + norm_A**2 / mu, rho_phi=a, F0=F0, y_radius=R_Y, x0=x0,
    )
    extra = {"saddle_gap": a - kappa, "minimum_x1": s}
    return _problem(data, obj, setting, p, extra)


def _start(x0: Any, d: int) -> np.ndarray:
    """The public start: 0, a vector of length d, or a number s for s e_1 (a point on the
    x_1 axis, where the cosine saddle's minimisers lie, in any dimension).

    Examples
    --------
    >>> _start(2.0, 3).tolist(), _start(None, 2).tolist(), _start([1, 2], 2).tolist()
    ([2.0, 0.0, 0.0], [0.0, 0.0], [1.0, 2.0])
    """
    if x0 is None:
        return np.zeros(d)
    arr = np.asarray(x0, dtype=float)
    if arr.ndim == 0:
        return float(arr) * np.eye(d)[0]
    if arr.shape != (d,):
        raise InputError(f"x0 must be a number or a vector of length d = {d}, got shape "
                         f"{arr.shape}")
    return arr.copy()


def _cosine_minimum(c: float) -> float:
    """The s > 0 with sin(s)/s = c, c in (0, 1): x_1 of the population minimisers (TP1).

    Examples
    --------
    >>> s = _cosine_minimum(0.25)
    >>> round(math.sin(s) / s, 12)
    0.25
    """
    import scipy.optimize

    return float(scipy.optimize.brentq(lambda s: math.sin(s) / s - c, 1e-9, math.pi))


def _matrix_sensing_problem(p: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    n, pp, q, r = int(p["n"]), int(p["ms_p"]), int(p["ms_q"]), int(p["ms_rank"])
    X, Xs = matrix_sensing_records(n, pp, q, r, float(p["ms_noise"]),
                                     float(p["ms_truth_scale"]), rng)
    data = Dataset(X, np.zeros(n))
    A, b = X[:, : pp * q].reshape(n, pp, q), X[:, pp * q]
    R_Y = p.get("ms_y_radius")  # Y = R^n in Section 5.1
    R_Y = None if R_Y is None else float(R_Y)
    obj = MatrixSensingObjective(A, b, pp, q, r, R_Y)
    d1 = (pp + q) * r
    init = float(p["ms_init_scale"])  # U0, V0 ~ N(0, 0.1^2) (line 350); drawn once, public
    x0 = init * np.random.default_rng(int(p["ms_init_seed"])).standard_normal(d1)
    # Public nominal constants on ||U||_F, ||V||_F <= x_box, |y_i| <= y_box, from
    # ||A_i||_F <= a_box (A_i has pq entries of variance 1/(pq): ||A_i||_F ~ 1).
    x_box, a_box = float(p["x_box"]), 2.0
    y_box = R_Y if R_Y is not None else a_box * x_box**2 + 1.0
    L = 1.0 + a_box * (2.0 * x_box + y_box)
    M = max(a_box * x_box * y_box, a_box * x_box**2 + 1.0 + y_box)
    Mmat = np.einsum("n,npq->pq", b, A) / n
    # F0: Phi >= 0 (y = 0) and Phi(x0) <= mean_i r_i(x0)^2 / 2 with |r_i| <= a_box ||U0 V0^T||_F
    # + b_box, the declared record bound |b_i| <= a_box ||X*||_F + 5 noise.
    U0, V0 = x0[: pp * r].reshape(pp, r), x0[pp * r :].reshape(q, r)
    b_box = a_box * float(p["ms_truth_scale"]) + 5.0 * float(p["ms_noise"])
    F0 = 0.5 * (a_box * float(np.linalg.norm(U0 @ V0.T)) + b_box) ** 2
    setting = MinimaxSetting(
        model=MatrixSensingModel(p=pp, q=q, r=r), d1=d1, d2=n, L=L, M=M, mu=1.0 / n,
        L_phi=a_box**2 * 4.0 * x_box**2 + a_box * 1.0, rho_phi=6.0 * a_box**2 * x_box,
        F0=F0, y_radius=R_Y, x0=x0,
    )
    extra = {"saddle_lambda_min": -float(np.linalg.norm(Mmat, 2)), "truth": Xs}
    return _problem(data, obj, setting, p, extra)


def _problem(data: Dataset, obj: Any, setting: MinimaxSetting, p: Mapping[str, Any],
             extra: Mapping[str, Any]) -> Problem:
    public = {"minimax_setting": setting, "rho_phi": setting.rho_phi,
              "L_phi": setting.L_phi, "lipschitz": setting.M, "smoothness": setting.L,
              "mu": setting.mu, "F0": setting.F0, "phi": str(p.get("phi", "empirical"))}
    return Problem(
        data=data,
        objective=lambda th: phi_at(obj, np.atleast_2d(th)),
        grad=lambda th: phi_grad(obj, np.atleast_2d(th)),
        info={"minimax": obj, **public, **extra},
        public=public,
    )


def empirical_F0(setting: Setting, data: Dataset, params: Mapping[str, Any]) -> Setting:
    """``setting`` with F0 = Phi_S(x0) - min Phi of the records ``data`` (cosine problems).

    What the schedule used before F0 was a declared bound: a value of the private data,
    read outside the curator. Kept as a planted variant's ``derive_setting``, so the checks
    can show that they see it.

    Examples
    --------
    >>> prob = make_minimax_problem(PROBLEM_DEFAULTS, np.random.default_rng(0))
    >>> s = empirical_F0(prob.setting(), prob.data, PROBLEM_DEFAULTS)
    >>> 0 < s["F0"] < prob.setting()["F0"]
    True
    """
    ms = setting_of(setting)
    if not isinstance(ms.model, CosineModel):
        raise InputError("empirical_F0 reads a cosine problem's records")
    p = {**PROBLEM_DEFAULTS, **dict(params)}
    d, a, mu, beta = ms.d1, float(p["a"]), float(p["mu"]), float(p["beta"])
    X = np.asarray(data.X)
    obj = CosineObjective(a, mu, X[:, : d * d].reshape(-1, d, d).mean(0), X[:, d * d :].mean(0),
                          ms.y_radius)
    kappa = beta**2 / mu
    s = _cosine_minimum(kappa / a)
    F0 = max(float(obj.phi_closed(ms.x0[None])[0]) - (a * math.cos(s) + kappa * s * s / 2.0),
             1e-12)
    return setting.with_constants(minimax_setting=dataclasses.replace(ms, F0=F0), F0=F0)


PROBLEMS = {"cosine": _cosine_problem, "matrix_sensing": _matrix_sensing_problem}
#: Phi_S of the records (Theorem 1) or the population Phi (Theorem 2).
PHIS = ("empirical", "population")

#: Parameters of both families, the defaults of every algorithm of paper 003.
PROBLEM_DEFAULTS: dict[str, Any] = {
    "problem": "cosine", "n": 200, "phi": "empirical",
    # cosine saddle: gap a - beta^2/mu = 0.75 at x = 0
    "d": 3, "a": 1.0, "mu": 1.0, "beta": 0.5, "s_A": 0.3, "s_b": 0.5, "y_radius": 5.0,
    "x_box": 4.0, "x0": None,
    # matrix sensing (Section 5.1: p = q = 20, r = 3, n = 400, noise 0.01, init 0.1)
    "ms_p": 6, "ms_q": 6, "ms_rank": 2, "ms_noise": 0.01, "ms_truth_scale": 1.0,
    "ms_init_scale": 0.1, "ms_init_seed": 0, "ms_y_radius": None,
}
#: The values they take.
PROBLEM_RANGES = {
    "problem": one_of(*PROBLEMS), "phi": one_of(*PHIS), "a": POSITIVE,
    "mu": POSITIVE, "beta": ANY, "s_A": NONNEGATIVE, "s_b": NONNEGATIVE, "y_radius": POSITIVE,
    "x_box": POSITIVE, "ms_p": COUNT, "ms_q": COUNT, "ms_rank": COUNT, "ms_noise": NONNEGATIVE,
    "ms_truth_scale": POSITIVE, "ms_init_scale": NONNEGATIVE, "ms_init_seed": COUNT0,
    "ms_y_radius": POSITIVE,
}


def check_minimax_params(params: Mapping[str, Any]) -> None:
    """Refuse a problem the family does not define: matrix sensing has one dual coordinate
    per record (only ``phi = 'empirical'``), and the cosine saddle needs a > beta^2/mu for
    a strict saddle at 0 (notes TP1).

    Examples
    --------
    >>> check_minimax_params(PROBLEM_DEFAULTS)
    >>> try:
    ...     check_minimax_params({**PROBLEM_DEFAULTS, "beta": 1.5})
    ... except InputError as e:
    ...     print(str(e).partition("got ")[2])
    a = 1.0, mu = 1.0, beta = 1.5 (beta^2/mu = 2.25)
    """
    full = {**PROBLEM_DEFAULTS, **dict(params)}
    kind = str(full["problem"])
    if kind not in PROBLEMS:
        raise InputError(f"unknown paper-003 problem {kind!r}; known: {sorted(PROBLEMS)}")
    if kind == "matrix_sensing" and str(full["phi"]) != "empirical":
        raise InputError("matrix sensing has one dual coordinate per record: only phi = "
                         "'empirical' is defined")
    a, mu, beta = float(full["a"]), float(full["mu"]), float(full["beta"])
    if kind == "cosine" and a <= beta**2 / mu:
        raise InputError(f"the cosine saddle needs a > beta^2/mu for a strict saddle at 0, "
                         f"got a = {full['a']!r}, mu = {full['mu']!r}, beta = "
                         f"{full['beta']!r} (beta^2/mu = {beta**2 / mu:g})")


def make_minimax_problem(params: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    """A paper-003 problem: ``problem`` = ``cosine`` or ``matrix_sensing``.

    ``phi`` = ``empirical`` (Phi_S of the records, Theorem 1) or ``population`` (the
    population Phi, Theorem 2; cosine only). ``info`` holds the NumPy objective the metrics
    use (``minimax``), the public constants (``setting``) and ``rho_phi``.

    Examples
    --------
    >>> prob = make_minimax_problem(PROBLEM_DEFAULTS, np.random.default_rng(0))
    >>> prob.data.X.shape, prob.public["minimax_setting"].d1
    ((200, 12), 3)
    >>> float(np.linalg.norm(prob.grad(np.zeros(3))))  < 0.2  # near the saddle at 0
    True
    """
    check_minimax_params(params)
    full = {**PROBLEM_DEFAULTS, **dict(params)}
    return PROBLEMS[str(full["problem"])](full, rng)
