"""Proposition 5.1 of paper 001 and the counterexample of its notes (4.F8).

Prop. 5.1 (line 349): for an algorithm run on F^D whose output lies in a set of diameter
R, with probability 1 - zeta, ||dbar_alpha F(x_out)|| <= ||dbar_alpha F^D(x_out)|| +
O~(L sqrt(d log(R / zeta) / n)), for every L-Lipschitz loss (Assumption 2.2). Its proof
(lines 544-556) invokes gradient uniform convergence for smooth losses (Mei, Bai, Montanari
2018, Thm 1), where the log of the smoothness constant enters the bound.

The counterexample (notes 001, 4.F8; d = 1): a record is xi = (K, phi) with K ~ U[K0, 2K0]
and phi ~ U[0, 1], and

    f(x; xi) = c |x| + tri(K x + phi) / K,

tri the 1-periodic triangle wave of slopes +-1. Every f is (1 + c)-Lipschitz and >= 0, and
E_phi tri'(K x + phi) = 0, so F'(x) = c sign(x): ||dbar_r F(x)|| = c wherever |x| > r.
The empirical slope is c sign(x) + (1/n) sum_i s_i(x) with s_i = +-1 changing sign every
1/(2K) along x, so inside any ball of radius r the n signs behave like independent fair
coins at the ~2 K0 r cells of the ball: once K0 r is large against 1 / P(Bin(n, 1/2) >=
n (1 + c) / 2), some point of the ball has slope <= 0 and F^D is (r, 0)-stationary there,
while F is not. The gap stays c as n grows, where Prop. 5.1 has it fall as n^-1/2: K0 = 1e8
here, so the gap stays c for n up to ~1e3 at c = 0.2 (P = 1.7e-4 at n = 320).

The metric :func:`generalization_gap` measures ||dbar_r F(x)|| - ||dbar_r F^D(x)||, the
first exactly (F's slope is known) and the second by an upper bound (slopes of F^D at points
of the ball lie in its Goldstein set), so the value is a lower bound on the gap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpverify.checks.rates.metrics import register_metric
from dpverify.core.data import Dataset
from dpverify.core.errors import InputError
from dpverify.core.registry import Problem

#: Points of the ball per output at which F^D's slope is read (chunked, NumPy).
GAP_SAMPLES = 1 << 18
_CHUNK = 1 << 14


@dataclass(frozen=True)
class TriangleWave:
    """f(x; (K, phi)) = c |x| + tri(K x + phi) / K on R (records: X = K, y = phi).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> f = TriangleWave(0.2)
    >>> f.value(np.array([[1.0]]), np.array([[4.0]]), np.array([0.5]), xp).round(6).tolist()
    [0.325]
    >>> f.grad(np.array([[1.1]]), np.array([[4.0]]), np.array([0.0]), xp).round(6).tolist()
    [[1.2]]
    """

    c: float = 0.2
    kind: str = "triangle"

    @property
    def lipschitz(self) -> float:
        return 1.0 + self.c

    def value(self, P: Any, A: Any, b: Any, xp: Any) -> Any:
        x, K = P[..., 0], A[..., 0]
        s = K * x + b
        return self.c * xp.abs(x) + xp.abs(s - xp.round(s)) / K

    def grad(self, P: Any, A: Any, b: Any, xp: Any) -> Any:
        x, K = P[..., 0], A[..., 0]
        s = K * x + b
        return (self.c * xp.sign(x) + xp.sign(s - xp.round(s)))[..., None]

    def mean_grad(self, points: np.ndarray, data: Dataset) -> np.ndarray:
        """grad F^data at each of ``points`` (N, 1)."""
        s = points[:, :1] * data.X[None, :, 0] + data.y[None, :]
        return (self.c * np.sign(points[:, :1])
                + np.mean(np.sign(s - np.round(s)), axis=1, keepdims=True))


def make_triangle_problem(params: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    """The counterexample's distribution and an n-sample of it (d must be 1).

    ``x0`` is +-x0_norm (a public draw), ``phi`` bounds F(x0) - inf F by c |x0| + 1 / (2 K0)
    (f >= 0 and F(0) <= 1 / (2 K0)).

    Examples
    --------
    >>> prob = make_triangle_problem({"n": 5, "d": 1, "K0": 100.0}, np.random.default_rng(0))
    >>> prob.data.X.shape, bool(np.all((prob.data.X >= 100) & (prob.data.X <= 200)))
    ((5, 1), True)
    """
    n, d = int(params["n"]), int(params["d"])
    if d != 1:
        raise InputError(f"the triangle-wave problem is one-dimensional; got d = {d}")
    c, K0 = float(params.get("slope", 0.2)), float(params.get("K0", 1e8))
    x0 = float(params.get("x0_norm", 1.0)) * rng.choice([-1.0, 1.0], size=1)
    X = rng.uniform(K0, 2.0 * K0, size=(n, 1))
    y = rng.random(n)
    loss = TriangleWave(c)
    data = Dataset(X, y)

    def objective(theta: np.ndarray) -> np.ndarray:
        import array_api_compat.numpy as xp

        theta = np.atleast_2d(theta)
        return loss.value(theta[:, None, :], X[None], y[None], xp).mean(axis=1)

    public = {"lipschitz": loss.lipschitz, "phi": c * abs(float(x0[0])) + 0.5 / K0,
              "x0": x0, "kind": "triangle"}
    return Problem(data=data, loss=loss, objective=objective,
                   grad=lambda theta: loss.mean_grad(np.atleast_2d(theta), data),
                   info={**public, "population_slope": c}, public=public)


def empirical_stationarity_upper(loss: Any, data: Dataset, x: float, r: float,
                                 rng: np.random.Generator, samples: int = GAP_SAMPLES) -> float:
    """An upper bound on ||dbar_r F^D(x)|| in one dimension from sampled slopes.

    The Goldstein set is an interval containing every slope read in the ball, so the
    distance from 0 to the hull of the sampled slopes bounds its minimum norm from above.

    Examples
    --------
    >>> D = Dataset(np.array([[1.0]]), np.array([0.0]))  # f = 0.2 |x| + tri(x)
    >>> empirical_stationarity_upper(TriangleWave(0.2), D, 3.0, 0.6, np.random.default_rng(0),
    ...                              samples=1000)
    0.0
    """
    lo, hi = np.inf, -np.inf
    for start in range(0, int(samples), _CHUNK):
        m = min(_CHUNK, int(samples) - start)
        pts = x + r * rng.uniform(-1.0, 1.0, size=(m, 1))
        g = loss.mean_grad(pts, data)[:, 0]
        lo, hi = min(lo, float(g.min())), max(hi, float(g.max()))
        if lo <= 0.0 <= hi:
            return 0.0
    return min(abs(lo), abs(hi))


@register_metric("generalization_gap")
def generalization_gap(problem: Problem, outputs: Any, params: Mapping[str, Any]) -> np.ndarray:
    """Metric plug-in: ||dbar_r F(x_out)|| - ||dbar_r F^D(x_out)|| per trial, r = 2 alpha.

    A lower bound on the gap Prop. 5.1 bounds by O~(L sqrt(d log(R/zeta) / n)): F's term
    exactly (``info["population_slope"]`` c: c where |x| > r, else 0), F^D's by
    :func:`empirical_stationarity_upper` with ``gap_samples`` points of the ball.

    Examples
    --------
    >>> prob = make_triangle_problem({"n": 20, "d": 1}, np.random.default_rng(1))
    >>> generalization_gap(prob, np.array([[1.0], [0.05]]), {"alpha": 0.05}).round(6).tolist()
    [0.2, 0.0]
    """
    c = problem.info.get("population_slope")
    if c is None:
        raise InputError("the generalization_gap metric needs a problem whose population "
                         "slope is known (problem = 'triangle')")
    r = 2.0 * float(params["alpha"])
    x = np.asarray(outputs, dtype=float).reshape(len(outputs), -1)[:, 0]
    rng = np.random.default_rng(int(params.get("goldstein_seed", 0)))
    samples = int(params.get("gap_samples", GAP_SAMPLES))
    out = np.empty(x.shape[0])
    for k, xk in enumerate(x):
        pop = float(c) if abs(xk) > r else 0.0
        out[k] = pop - empirical_stationarity_upper(problem.loss, problem.data, float(xk), r,
                                                    rng, samples)
    return out


__all__ = ["TriangleWave", "empirical_stationarity_upper", "generalization_gap",
           "make_triangle_problem"]
