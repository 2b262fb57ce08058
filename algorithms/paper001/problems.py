"""Nonsmooth nonconvex test problems for paper 001 (Kornowski, Liu, Talwar).

The paper has no experiments; these are the problems its notes propose (Section 6), each
globally L-Lipschitz (Assumption 2.2, line 105), nonsmooth, nonconvex and >= 0, so that
Phi = sup_xi f(x0; xi) is a data-independent bound on F(x0) - inf F:

* ``amplitude`` (P1): f(x; (a, b)) = | |<a, x>| - b |, robust amplitude (phase) regression;
* ``capped`` (P2): f = min(|<a, x> - b|, tau), capped absolute deviation with outliers;
* ``relu`` (P3): f = |max(0, <a, x>) - b|, ReLU regression with the L1 loss;
* ``absolute``: f = |<a, x> - b|, least absolute deviation (convex, nonsmooth). Its record
  (a, b) with b below -||x|| is the audit canary of notes 001 Section 6, f = <a, x> - b,
  linear wherever the runs go, and (0, 0) the background record f = 0 whose zero-order
  estimate is exactly 0 (:mod:`algorithms.paper001.canaries`);
* ``dc`` (P4): f = max_k <w_k, x - a> - max_k <v_k, x - a>, a difference of max-affine
  functions with the v_k convex combinations of the w_k (so f >= 0), a record being its
  offset a;
* ``triangle`` (d = 1): Prop. 5.1's counterexample, f = c |x| + tri(K x + phi) / K
  (:mod:`algorithms.paper001.generalization`).

Records are rows a_i of the data (unit norm for P1-P3) with labels b_i. Every loss is written
once in the Array API (``value`` and a subgradient ``grad`` at points of shape (..., d)),
so the same code runs on the NumPy and torch backends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.core.data import Dataset
from dpverify.core.errors import InputError
from dpverify.core.registry import Problem

PROBLEMS = ("amplitude", "capped", "relu", "dc", "absolute")
#: Every name ``make_problem`` takes: those and Prop. 5.1's counterexample.
PROBLEM_NAMES = (*PROBLEMS, "triangle")


def _np_xp() -> Any:
    import array_api_compat.numpy as xp

    return xp


def _like(a: np.ndarray, ref: Any, xp: Any) -> Any:
    """The public constant ``a`` as an array of ``ref``'s namespace, dtype and device."""
    from array_api_compat import device

    return xp.asarray(a, dtype=ref.dtype, device=device(ref))


@dataclass(frozen=True)
class PiecewiseLinearGLM:
    """f(x; (a, b)) = phi(<a, x>, b) with phi piecewise linear in the margin, slopes in [-1, 1].

    ``kinks(b)`` lists, per record, margins where phi may change slope (a superset is fine):
    the exact Goldstein lower bound of :mod:`dpverify.checks.rates.goldstein` uses them.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> f = PiecewiseLinearGLM("amplitude")
    >>> a, b = np.array([[1.0, 0.0]]), np.array([0.5])
    >>> f.value(np.array([[2.0, 7.0]]), a, b, xp).tolist()
    [1.5]
    >>> f.grad(np.array([[-2.0, 7.0]]), np.array([[1.0, 1.0]]), b, xp).tolist()
    [[1.0, 1.0]]
    """

    kind: str
    tau: float = 0.5
    lipschitz: float = 1.0  # |phi'| <= 1 and ||a|| <= 1

    def phi(self, z: Any, b: Any, xp: Any) -> Any:
        if self.kind == "amplitude":
            return xp.abs(xp.abs(z) - b)
        if self.kind == "capped":
            return xp.minimum(xp.abs(z - b), xp.full_like(z, self.tau))
        if self.kind == "relu":
            return xp.abs(xp.maximum(z, xp.zeros_like(z)) - b)
        if self.kind == "absolute":
            return xp.abs(z - b)
        raise InputError(f"unknown piecewise-linear loss {self.kind!r}")

    def dphi(self, z: Any, b: Any, xp: Any) -> Any:
        # A subgradient; which one at a kink does not matter, kinks have measure zero at
        # the perturbed points the algorithms evaluate (notes 001, pitfall 13).
        if self.kind == "amplitude":
            return xp.sign(xp.abs(z) - b) * xp.sign(z)
        if self.kind == "capped":
            r = z - b
            return xp.where(xp.abs(r) < self.tau, xp.sign(r), xp.zeros_like(r))
        if self.kind == "relu":
            pos = xp.astype(z > 0, z.dtype)
            return pos * xp.sign(xp.maximum(z, xp.zeros_like(z)) - b)
        if self.kind == "absolute":
            return xp.sign(z - b)
        raise InputError(f"unknown piecewise-linear loss {self.kind!r}")

    def kinks(self, b: np.ndarray) -> np.ndarray:
        """(n, k) margins where phi may bend, for labels ``b`` (NumPy)."""
        b = np.asarray(b, dtype=float)
        if self.kind == "amplitude":
            return np.stack([np.zeros_like(b), b, -b], axis=-1)
        if self.kind == "capped":
            return np.stack([b - self.tau, b, b + self.tau], axis=-1)
        if self.kind == "absolute":
            return b[..., None]
        return np.stack([np.zeros_like(b), b], axis=-1)

    def value(self, P: Any, A: Any, b: Any, xp: Any) -> Any:
        """f at points ``P`` (..., d) for records ``A`` (..., d), ``b`` (...), broadcast."""
        return self.phi(xp.sum(P * A, axis=-1), b, xp)

    def grad(self, P: Any, A: Any, b: Any, xp: Any) -> Any:
        """A subgradient of f in x, shape (..., d)."""
        return self.dphi(xp.sum(P * A, axis=-1), b, xp)[..., None] * A

    def mean_grad(self, points: np.ndarray, data: Dataset) -> np.ndarray:
        """grad F^data at each of ``points`` (N, d), NumPy, one product for all points."""
        xp = _np_xp()
        return self.dphi(points @ data.X.T, data.y[None, :], xp) @ data.X / data.n


@dataclass(frozen=True)
class MaxAffineDifference:
    """f(x; a) = max_k <W_k, x - a> - max_j <V_j, x - a>: piecewise linear, DC, nonconvex.

    With every V_j in conv(W), f >= 0 and f(a) = 0; it is L-Lipschitz with
    L = max ||W_k|| + max ||V_j|| (the label b is not used).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> f = MaxAffineDifference(np.eye(2), np.array([[0.5, 0.5]]))
    >>> f.value(np.array([[1.0, 0.0]]), np.zeros((1, 2)), np.zeros(1), xp).tolist()
    [0.5]
    >>> f.grad(np.array([[1.0, 0.0]]), np.zeros((1, 2)), np.zeros(1), xp).tolist()
    [[0.5, -0.5]]
    """

    W: np.ndarray = field(repr=False)
    V: np.ndarray = field(repr=False)
    kind: str = "dc"

    @property
    def lipschitz(self) -> float:
        return float(np.linalg.norm(self.W, axis=1).max() + np.linalg.norm(self.V, axis=1).max())

    def value(self, P: Any, A: Any, b: Any, xp: Any) -> Any:
        U = P - A
        W, V = _like(self.W, U, xp), _like(self.V, U, xp)
        return xp.max(U @ W.T, axis=-1) - xp.max(U @ V.T, axis=-1)

    def grad(self, P: Any, A: Any, b: Any, xp: Any) -> Any:
        U = P - A
        W, V = _like(self.W, U, xp), _like(self.V, U, xp)
        shape = tuple(U.shape)
        kw = xp.reshape(xp.argmax(U @ W.T, axis=-1), (-1,))
        kv = xp.reshape(xp.argmax(U @ V.T, axis=-1), (-1,))
        g = xp.take(W, kw, axis=0) - xp.take(V, kv, axis=0)
        return xp.reshape(g, shape)

    def mean_grad(self, points: np.ndarray, data: Dataset) -> np.ndarray:
        """grad F^data at each of ``points`` (N, d), NumPy."""
        xp = _np_xp()
        g = self.grad(points[:, None, :], data.X[None, :, :], data.y[None, :], xp)
        return g.mean(axis=1)

    def active(self, x: np.ndarray, A: np.ndarray, r: float) -> tuple[np.ndarray, np.ndarray]:
        """Masks (N, n, K) and (N, n, J) of the pieces that may be active in B(x, r).

        Piece k can be the max at some y only if (W_k - W_j) . (y - a) >= 0 for every j;
        over the ball this needs (W_k - W_j) . (x - a) + r ||W_k - W_j|| >= 0. The test is
        necessary, not sufficient: a superset of the active pieces (what a lower bound on
        the Goldstein subdifferential needs).
        """

        def mask(M: np.ndarray) -> np.ndarray:
            diff = M[:, None, :] - M[None, :, :]  # (K, K, d)
            gap = np.einsum("...d,kjd->...kj", x[:, None, :] - A[None], diff)
            return np.all(gap + r * np.linalg.norm(diff, axis=-1) >= -1e-12, axis=-1)

        return mask(self.W), mask(self.V)


def unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """``n`` points uniform on the unit sphere of R^d.

    Examples
    --------
    >>> bool(np.allclose(np.linalg.norm(unit_rows(np.random.default_rng(0), 4, 3), axis=1), 1))
    True
    """
    g = rng.standard_normal((n, d))
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def _draw(kind: str, n: int, d: int, rng: np.random.Generator, x_star: np.ndarray,
          noise: float, b_max: float, tau: float, offset: float) -> Dataset:
    if kind == "dc":
        u = unit_rows(rng, n, d) * offset * rng.random((n, 1)) ** (1.0 / d)
        return Dataset(u, np.zeros(n))
    A = unit_rows(rng, n, d)
    z = A @ x_star
    eps = noise * rng.standard_normal(n)
    if kind == "amplitude":
        b = np.clip(np.abs(z) + eps, 0.0, b_max)
    elif kind == "absolute":
        b = np.clip(z + eps, -b_max, b_max)
    elif kind == "capped":
        b = z + eps
        out = rng.random(n) < 0.1  # gross outliers, the reason to cap the loss
        b[out] = rng.uniform(-b_max, b_max, int(out.sum()))
        b = np.clip(b, -b_max, b_max)
    else:
        b = np.clip(np.maximum(z, 0.0) + eps, 0.0, b_max)
    return Dataset(A, b)


def make_problem(params: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    """A nonsmooth nonconvex problem from ``problem``, ``n``, ``d`` and its constants.

    ``info`` holds the public constants the algorithms may use: ``lipschitz`` (L), ``x0``
    (the start: a unit direction drawn before any record, times ``x0_norm``; x = 0 is a
    Clarke stationary point of the amplitude and ReLU problems, a poor start) and ``phi``
    (a data-independent bound on F(x0) - inf F, from f >= 0); for metrics only:
    ``population`` (a fresh sample of ``n_population`` records, standing in for the
    population objective F) and ``x_star`` (the parameter the labels come from).

    Examples
    --------
    >>> prob = make_problem({"problem": "amplitude", "n": 50, "d": 3},
    ...                     np.random.default_rng(0))
    >>> prob.data.n, prob.info["lipschitz"], prob.info["phi"], prob.info["population"].n
    (50, 1.0, 3.0, 1000)
    >>> round(float(np.linalg.norm(prob.info["x0"])), 12)
    1.0
    >>> prob.objective(np.zeros((1, 3))).shape
    (1,)
    """
    kind = str(params.get("problem", "amplitude"))
    if kind == "triangle":  # Prop. 5.1's counterexample (notes 001, 4.F8), d = 1
        from algorithms.paper001.generalization import make_triangle_problem

        return make_triangle_problem(params, rng)
    if kind not in PROBLEMS:
        raise InputError(f"unknown problem {kind!r}; known: {PROBLEM_NAMES}")
    n, d = int(params["n"]), int(params["d"])
    noise = float(params.get("label_noise", 0.05))
    n_pop = int(params.get("n_population", 1000))
    b_max, tau, offset = 2.0, 0.5, 0.5
    x0 = float(params.get("x0_norm", 1.0)) * unit_rows(rng, 1, d)[0]
    x_star = unit_rows(rng, 1, d)[0]
    if kind == "dc":
        K = int(params.get("pieces", 4))
        W = unit_rows(rng, K, d)
        mix = rng.dirichlet(np.ones(K), size=max(1, K - 1))
        loss: Any = MaxAffineDifference(W, mix @ W)
        # f(x0; a) <= L ||x0 - a|| and f >= 0
        phi = loss.lipschitz * (float(np.linalg.norm(x0)) + offset)
    else:
        loss = PiecewiseLinearGLM(kind, tau=tau)
        # f(x0; (a, b)) <= |<a, x0>| + |b| <= ||x0|| + b_max (or tau when capped), f >= 0
        phi = tau if kind == "capped" else float(np.linalg.norm(x0)) + b_max
    data = _draw(kind, n, d, rng, x_star, noise, b_max, tau, offset)
    population = _draw(kind, n_pop, d, rng, x_star, noise, b_max, tau, offset)
    objective, grad = objective_and_grad(loss, data)
    return Problem(
        data=data, loss=loss, objective=objective, grad=grad, optimum=None,
        info={"lipschitz": float(loss.lipschitz), "phi": float(phi), "x0": x0,
              "population": population, "x_star": x_star, "kind": kind},
        public={"lipschitz": float(loss.lipschitz), "phi": float(phi), "x0": x0, "kind": kind},
    )


def objective_and_grad(loss: Any, data: Dataset):
    """F^data and a subgradient of it at each row of theta (trials, d), NumPy.

    Examples
    --------
    >>> D = Dataset(np.array([[1.0, 0.0]]), np.array([0.0]))
    >>> F, g = objective_and_grad(PiecewiseLinearGLM("amplitude"), D)
    >>> F(np.array([[-3.0, 1.0]])).tolist(), g(np.array([[-3.0, 1.0]])).tolist()
    ([3.0], [[-1.0, 0.0]])
    """
    xp = _np_xp()

    def objective(theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(theta)
        v = loss.value(theta[:, None, :], data.X[None, :, :], data.y[None, :], xp)
        return v.mean(axis=1)

    def grad(theta: np.ndarray) -> np.ndarray:
        return loss.mean_grad(np.atleast_2d(theta), data)

    return objective, grad
