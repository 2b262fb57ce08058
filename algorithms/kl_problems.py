"""Test problems with known Kurdyka-Lojasiewicz parameters, for paper 004.

Paper 004 (Menart, Ullah, Arora, Bassily, Guzman, "Differentially Private Non-Convex
Optimization under the KL Condition with Optimal Rates") states its rates under the
(gamma, kappa)-KL* condition ``F(w) - F* <= gamma^kappa ||grad F(w)||^kappa`` on a region
(Definition 1). The problems here carry (gamma, kappa) that are *proved*, not fitted, so a
measured rate can be compared with the exponent its kappa implies:

``power`` (1 < kappa <= 2)
    ``f(w; x) = a h(||w - x||)`` with ``h(r) = r^p / p`` up to ``r = R0`` and its linear
    extension beyond, ``p = kappa / (kappa - 1)``. The extension makes every per-sample
    loss globally ``a R0^(p-1)``-Lipschitz and ``a (p-1) R0^(p-2)``-smooth, as the
    paper's privacy theorems assume. For p = 2 and all records within R0 of w, F is the
    quadratic ``(a/2)||w - xbar||^2 + const``: PL with ``gamma = 1/sqrt(2a)`` exactly.
    For p > 2 the gradient map of ``|y|^p / p`` is strongly monotone of order p:
    ``<|b|^(p-2) b - |a|^(p-2) a, b - a> >= 2^(2-p) |b - a|^p`` (Lindqvist, "Notes on
    the p-Laplace equation", the inequality for p >= 2). Summed over records at w and
    w*, it gives ``||grad F(w)|| >= a 2^(2-p) ||w - w*||^(p-1)``; with convexity,
    ``F(w) - F* <= ||grad F(w)|| ||w - w*||``, F is (gamma, kappa)-KL with
    ``gamma = (2^(p-2) / a)^(1/p)``. Both hold on the region ``||w - c|| <= R0 - spread``
    where the power part is in force.
    With ``spread = 0`` (every record at the origin) the power problem also serves
    kappa > 2 (1 < p < 2, the sharp growth of Theorem 2's regime): F is then exactly
    ``(a/p)||w||^p`` inside R0, whose KL constant is ``gamma = a^(-1/p) p^(-1/kappa)``,
    and it is not smooth at the record. With records spread out, F is smooth at its
    minimiser and so grows only quadratically there: no kappa > 2 holds, and the problem
    is refused.
``tail`` (``linear`` or ``power``)
    ``linear`` (the default) continues every loss linearly beyond R0, as above.
    ``power`` keeps ``r^p / p`` everywhere: the declared L0 (and L1) then hold only within
    R0 of every record, the paper's own local assumption (f Lipschitz and smooth on a ball,
    Theorems 1 and 2), and a record far from the others has a gradient far above L0. This
    is the problem on which an algorithm that relies on global Lipschitzness without
    clipping (Theorem 3, line 252; Appendix E, line 908) can be caught.
``huber`` (kappa = 1)
    The same loss with p = 2 and a small ``R0 = huber_delta``. Any convex F satisfies
    ``F(w) - F* <= <grad F(w), w - w*> <= ||grad F(w)|| ||w - w*||``, so it is
    (R, 1)-KL on the ball of radius R around w*; we take R = ``radius + spread``, which
    covers the ball of ``radius`` around the data centre.
``theorem8`` (kappa >= 2, d = 1)
    The lower-bound instance of the paper's Theorem 8 (Appendix C.3, lines 610-619),
    with its power branch extended linearly where its slope reaches 1, so the losses are
    1-Lipschitz everywhere as the theorem requires. F is (1, kappa)-KL on the set
    ``[-A - r_L, A + r_L]`` (``r_L`` where the slope reaches 1); the paper claims
    (1, tau)-growth "over all of R" (line 619), which fails far from the minimiser, so
    the region is stated explicitly.

Every per-sample computation is written once in the Array API (``xp``), so the same code
runs on NumPy and on torch; queries take per-trial record weights as the curator hands
them out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize

from dpverify.core.data import Dataset
from dpverify.core.errors import InputError
from dpverify.core.registry import Problem

PROBLEM_KINDS = ("auto", "power", "huber", "theorem8")
TAILS = ("linear", "power")


def _np_xp() -> Any:
    import array_api_compat.numpy as xp

    return xp


def _clip_factor(xp: Any, norms: Any, clip: float | None) -> Any:
    """min(1, clip / norm), safe at norm 0; all ones without a clip."""
    if clip is None:
        return xp.ones_like(norms)
    big = norms > clip
    return xp.where(big, clip / xp.where(big, norms, xp.ones_like(norms)), xp.ones_like(norms))


# Per-dataset quantities reused by every query of a run (the curator hands the same
# arrays to every query). Keyed by identity, a few entries: a run touches one or two worlds.
_CACHE: list[tuple[Any, str, Any]] = []
_CACHE_SIZE = 8


def _cached(obj: Any, tag: str, make: Any) -> Any:
    for ref, t, val in _CACHE:
        if ref is obj and t == tag:
            return val
    val = make()
    _CACHE.insert(0, (obj, tag, val))
    del _CACHE[_CACHE_SIZE:]
    return val


def finite_records(xp: Any, X: Any, y: Any, w: Any) -> tuple[Any, Any, Any]:
    """Zero out records holding non-finite values, so they cannot slip through clipping.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> X = np.array([[1.0], [np.nan]]); y = np.zeros(2)
    >>> Xc, yc, w = finite_records(xp, X, y, np.ones((1, 2)))
    >>> Xc.tolist(), w.tolist()
    ([[1.0], [0.0]], [[1.0, 0.0]])
    """

    def make() -> tuple[Any, Any, Any]:
        ok = xp.all(xp.isfinite(X), axis=1) & xp.isfinite(y)
        Xc = xp.where(ok[:, None], X, xp.zeros_like(X))
        yc = xp.where(ok, y, xp.zeros_like(y))
        return Xc, yc, xp.astype(ok, X.dtype)

    Xc, yc, okf = _cached(X, f"finite:{id(y)}", make)
    return Xc, yc, w * okf


def _sq_norms(xp: Any, X: Any) -> Any:
    return _cached(X, "sq", lambda: xp.sum(X * X, axis=1))


@dataclass(frozen=True)
class RadialLoss:
    """``f(w; x) = a h(||w - x||)``, h a power ``r^p/p`` continued linearly after ``R0``.

    The per-sample gradient is ``c (w - x)`` with ``c = a h'(r) / r``; sums over records
    are then two matrix products, and gradient norms ``a h'(r)`` are closed-form, so
    clipping costs nothing extra.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> loss = RadialLoss(p=2.0, a=1.0, R0=10.0)
    >>> W = np.array([[1.0, 0.0]]); X = np.zeros((2, 2))
    >>> loss.grad_sum(W, X, np.zeros(2), np.ones((1, 2)), xp).tolist()
    [[2.0, 0.0]]
    """

    p: float
    a: float
    R0: float
    name: str = "radial"
    tail: str = "linear"

    @property
    def lipschitz(self) -> float:
        return self.a * self.R0 ** (self.p - 1.0)

    @property
    def smoothness(self) -> float | None:
        # Radial second derivative a (p-1) r^(p-2) inside R0 (largest at R0), tangential
        # a h'(r)/r <= a R0^(p-2) everywhere; for p < 2 both blow up at the record.
        if self.p < 2.0:
            return None
        return self.a * max(self.p - 1.0, 1.0) * self.R0 ** (self.p - 2.0)

    def _clamp(self, r: Any, xp: Any) -> Any:
        """The radius the power part sees: r itself without the linear tail."""
        return r if self.tail == "power" else xp.minimum(r, 0.0 * r + self.R0)

    def _r2(self, W: Any, X: Any, xp: Any) -> Any:
        # ||w - x||^2 for every (trial, record) without a (trials, n, d) intermediate.
        sq = xp.sum(W * W, axis=1)[:, None] - 2.0 * (W @ X.T) + _sq_norms(xp, X)[None, :]
        return xp.maximum(sq, 0.0 * sq)

    def value(self, W: Any, X: Any, y: Any, xp: Any) -> Any:
        """Per-sample losses, (trials, n)."""
        p, R0 = self.p, self.R0
        r = xp.sqrt(self._r2(W, X, xp))
        rc = self._clamp(r, xp)
        # r^p/p inside R0, its tangent line R0^(p-1) (r - R0) + R0^p/p beyond.
        return self.a * (rc**p / p + R0 ** (p - 1.0) * (r - rc))

    def _dh(self, r: Any, xp: Any) -> tuple[Any, Any]:
        """h'(r) and h'(r)/r, elementwise (0 at r = 0, the subgradient of the minimum)."""
        p, R0 = self.p, self.R0
        rc = self._clamp(r, xp)
        # 1 inside R0, R0/r beyond (always 1 without the linear tail)
        outside = (xp.ones_like(r) if self.tail == "power"
                   else R0 / xp.maximum(r, 0.0 * r + R0))
        if p == 2.0:
            return rc, outside
        if p < 2.0:  # r^(p-2) is infinite at r = 0, where the gradient is 0
            pos = rc > 0
            safe = xp.where(pos, rc, xp.ones_like(rc))
            return rc ** (p - 1.0), xp.where(pos, safe ** (p - 2.0) * outside,
                                             xp.zeros_like(rc))
        return rc ** (p - 1.0), rc ** (p - 2.0) * outside

    def coefficients(self, W: Any, X: Any, xp: Any, clip: float | None) -> Any:
        """c (trials, n) with per-sample gradient ``c (w - x)``, clipped to norm ``clip``."""
        dh, ratio = self._dh(xp.sqrt(self._r2(W, X, xp)), xp)
        if clip is None:
            return self.a * ratio
        # a h'(r)/r * min(1, clip / (a h'(r))) = h'(r)/r * min(a, clip / h'(r))
        return ratio * xp.minimum(0.0 * dh + self.a, clip / xp.maximum(dh, 0.0 * dh + 1e-300))

    def grad_sum(self, W: Any, X: Any, y: Any, w: Any, xp: Any,
                 clip: float | None = None) -> Any:
        """sum_i w_i clip(grad f(W; x_i)), (trials, d)."""
        cw = w * self.coefficients(W, X, xp, clip)
        return xp.sum(cw, axis=1)[:, None] * W - cw @ X

    def grad_norms(self, W: Any, X: Any, y: Any, xp: Any) -> Any:
        """||grad f(W; x_i)||, (trials, n)."""
        return self.a * self._dh(xp.sqrt(self._r2(W, X, xp)), xp)[0]

    def diff_sum(self, W1: Any, W0: Any, X: Any, y: Any, w: Any, xp: Any,
                 clip: float | None = None, diff_clip: float | None = None) -> Any:
        """sum_i w_i clip_D(g(W1; x_i) - g(W0; x_i)), g the gradient clipped to ``clip``.

        The difference ``c1 (W1 - x) - c0 (W0 - x) = c1 (W1 - W0) + (c1 - c0)(W0 - x)`` is
        written around the step ``W1 - W0`` so its norm has no cancellation between the
        two (large) gradients.
        """
        c1 = self.coefficients(W1, X, xp, clip)
        c0 = self.coefficients(W0, X, xp, clip)
        if diff_clip is not None:
            step = W1 - W0
            dc = c1 - c0
            s2 = xp.sum(step * step, axis=1)[:, None]
            cross = xp.sum(step * W0, axis=1)[:, None] - step @ X.T  # step . (W0 - x)
            r02 = self._r2(W0, X, xp)
            sq = c1 * c1 * s2 + 2.0 * c1 * dc * cross + dc * dc * r02
            f = _clip_factor(xp, xp.sqrt(xp.maximum(sq, xp.zeros_like(sq))), diff_clip)
            c1, c0 = c1 * f, c0 * f
        a1, a0 = w * c1, w * c0
        return (xp.sum(a1, axis=1)[:, None] * W1 - xp.sum(a0, axis=1)[:, None] * W0
                - (a1 - a0) @ X)


@dataclass(frozen=True)
class Theorem8Loss:
    """The 1-D losses of the paper's Theorem 8 (lines 610-613), kink at ``x`` of a record.

    ``f(w; x, y) = l(y (w - x))`` with ``l(s) = -s`` for s <= 0 and ``s^tau`` for s > 0,
    continued linearly (slope 1) from ``r_L = tau^(-1/(tau-1))`` so that it is 1-Lipschitz
    everywhere (the theorem's losses are 1-Lipschitz on a bounded set).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> loss = Theorem8Loss(tau=2.0)
    >>> X = np.array([[0.5], [-0.5]]); y = np.array([1.0, -1.0])
    >>> loss.grad_sum(np.array([[0.0]]), X, y, np.ones((1, 2)), xp).tolist()
    [[0.0]]
    """

    tau: float
    name: str = "theorem8"
    lipschitz: float = 1.0
    smoothness: float | None = None

    @property
    def r_lin(self) -> float:
        return self.tau ** (-1.0 / (self.tau - 1.0))

    def _slope(self, s: Any, xp: Any) -> Any:
        rl, tau = self.r_lin, self.tau
        pos = xp.where(s > 0, s, xp.zeros_like(s))
        inner = tau * xp.minimum(pos, xp.full_like(pos, rl)) ** (tau - 1.0)
        return xp.where(s <= 0, -xp.ones_like(s), xp.where(s <= rl, inner, xp.ones_like(s)))

    def value(self, W: Any, X: Any, y: Any, xp: Any) -> Any:
        rl, tau = self.r_lin, self.tau
        s = self._s(W, X, y)
        pos = xp.where(s > 0, s, xp.zeros_like(s))
        powv = xp.minimum(pos, xp.full_like(pos, rl)) ** tau
        lin = rl**tau + (pos - rl)
        return xp.where(s <= 0, -s, xp.where(s <= rl, powv, lin))

    def _s(self, W: Any, X: Any, y: Any) -> Any:
        return y[None, :] * (W[:, :1] - X[:, 0][None, :])

    def per_sample(self, W: Any, X: Any, y: Any, xp: Any, clip: float | None) -> Any:
        g = y[None, :] * self._slope(self._s(W, X, y), xp)
        return g * _clip_factor(xp, xp.abs(g), clip)

    def grad_sum(self, W: Any, X: Any, y: Any, w: Any, xp: Any,
                 clip: float | None = None) -> Any:
        return xp.sum(w * self.per_sample(W, X, y, xp, clip), axis=1)[:, None]

    def grad_norms(self, W: Any, X: Any, y: Any, xp: Any) -> Any:
        return xp.abs(self._slope(self._s(W, X, y), xp))

    def diff_sum(self, W1: Any, W0: Any, X: Any, y: Any, w: Any, xp: Any,
                 clip: float | None = None, diff_clip: float | None = None) -> Any:
        dg = self.per_sample(W1, X, y, xp, clip) - self.per_sample(W0, X, y, xp, clip)
        dg = dg * _clip_factor(xp, xp.abs(dg), diff_clip)
        return xp.sum(w * dg, axis=1)[:, None]


def power_gamma(p: float, a: float) -> float:
    """A proved KL constant of ``F = mean_i a h(||w - x_i||)`` with exponent p/(p-1).

    p = 2: F is exactly ``(a/2)||w - xbar||^2 + const``, so ``gamma = 1/sqrt(2a)``. p > 2:
    ``(2^(p-2) / a)^(1/p)``, from strong monotonicity of order p of the gradient and
    convexity (module docstring). 1 < p < 2 (kappa > 2, every record at one point):
    ``F - F* = (a/p) r^p`` and ``||grad F|| = a r^(p-1)``, so the KL inequality is an
    equality at ``gamma = a^(-1/p) p^(-1/kappa)``.

    Examples
    --------
    >>> round(power_gamma(2.0, 1.0), 4)
    0.7071
    >>> round(power_gamma(3.0, 1.0) ** 3, 6)
    2.0
    >>> round(power_gamma(1.5, 1.0) ** 3, 6)  # kappa = 3: gamma^3 = 1/p
    0.666667
    """
    if abs(p - 2.0) < 1e-12:
        return 1.0 / math.sqrt(2.0 * a)
    if p < 2.0:
        kappa = p / (p - 1.0)
        return a ** (-1.0 / p) * p ** (-1.0 / kappa)
    return (2.0 ** (p - 2.0) / a) ** (1.0 / p)


def _ball_points(n: int, d: int, radius: float, rng: np.random.Generator) -> np.ndarray:
    """n points uniform in the d-ball of ``radius``."""
    g = rng.standard_normal((n, d))
    g /= np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-300)
    return g * radius * rng.random((n, 1)) ** (1.0 / d)


def opposed_pair(n: int, d: int, *, spread: float = 0.25, distance: float = 100.0,
                 seed: int = 0) -> tuple[Dataset, Dataset]:
    """A replace-one pair on which a mean of the radial losses' gradients moves by 2 L0/n.

    The records are drawn as :func:`make_kl_problem` draws them (uniform in the ball of
    radius ``spread``); record 0 is ``distance * e_d`` in D and ``-distance * e_d`` in D'.
    Far beyond every branch point R0 both losses are on their linear branch, so their
    gradients have norm exactly L0 and point in nearly opposite directions: near the data
    the replaced record moves a mean gradient by ``2 L0/n (1 - O(|w|^2 / distance^2))``,
    the replace-one worst case (paper 004's Definition 2, line 64), where a declared
    ``L0/n`` (the add/remove sensitivity) is exceeded by a factor of 2.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> D, Dp = opposed_pair(50, 3)
    >>> loss = RadialLoss(p=2.0, a=1.0, R0=2.0)
    >>> W, ones = np.zeros((1, 3)), np.ones((1, 50))
    >>> gap = loss.grad_sum(W, D.X, D.y, ones, xp) - loss.grad_sum(W, Dp.X, Dp.y, ones, xp)
    >>> round(float(np.linalg.norm(gap)) / 50, 6), 2 * loss.lipschitz / 50
    (0.08, 0.08)
    """
    if n < 2 or d < 1 or distance <= 0:
        raise InputError(f"need n >= 2, d >= 1 and distance > 0, got n={n}, d={d}, "
                         f"distance={distance}")
    X = _ball_points(int(n), int(d), float(spread), np.random.default_rng(seed))
    far = np.zeros(int(d))
    far[-1] = float(distance)
    X_D, X_Dp = X.copy(), X.copy()
    X_D[0], X_Dp[0] = far, -far
    y = np.zeros(int(n))
    return Dataset(X_D, y), Dataset(X_Dp, y.copy())


def _objective_fns(loss: Any, data: Dataset):
    xp = _np_xp()
    X, y, n = data.X, data.y, data.n
    ones = np.ones((1, n))

    def objective(theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(np.asarray(theta, dtype=float))
        return np.mean(loss.value(theta, X, y, xp), axis=1)

    def grad(theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(np.asarray(theta, dtype=float))
        return loss.grad_sum(theta, X, y, np.repeat(ones, theta.shape[0], 0), xp) / n

    return objective, grad


def _minimise(objective, grad, start: np.ndarray) -> np.ndarray:
    res = scipy.optimize.minimize(
        lambda t: float(objective(t)[0]), start, jac=lambda t: grad(t)[0], method="L-BFGS-B",
        options={"gtol": 1e-13, "ftol": 1e-16, "maxiter": 20000},
    )
    return np.asarray(res.x, dtype=float)


def resolve_kind(params: Mapping[str, Any]) -> str:
    """The problem family for ``params``: ``auto`` picks by kappa.

    Examples
    --------
    >>> [resolve_kind({"kappa": k}) for k in (1.0, 1.5, 2.0, 3.0)]
    ['huber', 'power', 'power', 'theorem8']
    """
    kind = str(params.get("problem", "auto"))
    if kind not in PROBLEM_KINDS:
        raise InputError(f"problem must be one of {PROBLEM_KINDS}, got {kind!r}")
    kappa = float(params.get("kappa", 2.0))
    if kind == "auto":
        kind = "huber" if kappa == 1.0 else ("power" if kappa <= 2.0 else "theorem8")
    if kind == "power" and not 1.0 < kappa:
        raise InputError(f"the power problem needs kappa > 1, got {kappa}")
    if kind == "power" and kappa > 2.0 and float(params.get("spread", 0.25)) != 0.0:
        raise InputError(f"the power problem with kappa = {kappa} > 2 needs spread = 0 "
                         "(records spread out make F grow only quadratically at its "
                         "minimiser, so no kappa > 2 holds)")
    if kind == "huber" and kappa != 1.0:
        raise InputError(f"the huber problem is stated for kappa = 1, got {kappa}")
    if kind == "theorem8" and kappa < 2.0:
        raise InputError(f"the theorem8 problem needs kappa >= 2, got {kappa}")
    return kind


def check_kl_params(params: Mapping[str, Any]) -> str:
    """The problem family for ``params`` (:func:`resolve_kind`), with the power branch's
    records inside its radius; refuses what the families do not define.

    Examples
    --------
    >>> check_kl_params({"problem": "power", "kappa": 1.5, "spread": 0.25, "radius": 2.0})
    'power'
    >>> try:
    ...     check_kl_params({"problem": "power", "kappa": 1.5, "spread": 3.0, "radius": 2.0})
    ... except InputError as e:
    ...     print(e)
    need 0 <= spread < radius, got spread = 3.0, radius = 2.0
    """
    kind = resolve_kind(params)
    spread, radius = (float(params.get(k, v)) for k, v in (("spread", 0.25), ("radius", 2.0)))
    if kind == "power" and not 0 <= spread < radius:
        raise InputError(f"need 0 <= spread < radius, got spread = {spread!r}, "
                         f"radius = {radius!r}")
    return kind


def smooth_kl_params(params: Mapping[str, Any]) -> None:
    """Refuse a problem without a smoothness constant L1, for the algorithms whose step or
    sensitivity uses it (paper 004, Algorithms 1 and 3): theorem8's losses have kinks, and
    the power loss of exponent p = kappa / (kappa - 1) < 2 (kappa > 2) has unbounded
    curvature at its record.

    Examples
    --------
    >>> smooth_kl_params({"problem": "power", "kappa": 1.5})
    >>> try:
    ...     smooth_kl_params({"problem": "auto", "kappa": 3.0})
    ... except InputError as e:
    ...     print(e)
    this algorithm needs an L1-smooth problem; theorem8 at kappa = 3.0 has none
    """
    kind = check_kl_params(params)
    kappa = float(params.get("kappa", 2.0))
    if kind == "theorem8" or (kind == "power" and kappa > 2.0):
        raise InputError(f"this algorithm needs an L1-smooth problem; {kind} at kappa = "
                         f"{kappa!r} has none")


def make_kl_problem(params: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    """A data-driven test problem with proved (gamma, kappa)-KL* constants.

    Parameters (keys of ``params``): ``problem`` (``auto``, ``power``, ``huber``,
    ``theorem8``), ``kappa``, ``n``, ``d``, ``a`` (loss scale), ``spread`` (records lie in
    the ball of this radius around the origin), ``radius`` (R0 of the power branch, or the
    KL ball for ``huber``), ``huber_delta``, ``tail`` (``linear`` or ``power``, see the
    module docstring), ``w0_distance`` (the public start is ``w0_distance * e_1``),
    ``lb_epsilon`` (theorem8's epsilon).

    ``info`` holds ``gamma``, ``kappa``, ``lipschitz`` (L0), ``smoothness`` (L1, None when
    the losses are not smooth), ``F0`` (a data-independent bound on F(w0) - F*), ``w0``,
    ``F_star`` and ``kl_region`` (centre and radius where the KL inequality is proved).

    Examples
    --------
    >>> p = make_kl_problem({"kappa": 2.0, "n": 50, "d": 3}, np.random.default_rng(0))
    >>> round(p.info["gamma"], 4), bool(np.linalg.norm(p.grad(p.optimum)) < 1e-6)
    (0.7071, True)
    """
    kind = check_kl_params(params)
    kappa = float(params.get("kappa", 2.0))
    n = int(params.get("n", 500))
    d = int(params.get("d", 5))
    a = float(params.get("a", 1.0))
    w0_dist = float(params.get("w0_distance", 1.0))
    if n < 2 or d < 1 or a <= 0:
        raise InputError(f"need n >= 2, d >= 1 and a > 0, got n={n}, d={d}, a={a}")

    if kind == "theorem8":
        return _theorem8_problem(params, kappa, n, w0_dist)

    spread = float(params.get("spread", 0.25))
    radius = float(params.get("radius", 2.0))
    tail = str(params.get("tail", "linear"))
    if tail not in TAILS:
        raise InputError(f"tail must be one of {TAILS}, got {tail!r}")
    if kind == "power":
        p = kappa / (kappa - 1.0)
        R0 = radius
        gamma = power_gamma(p, a)
        kl_radius = R0 - spread
    else:
        p, R0 = 2.0, float(params.get("huber_delta", 0.25))
        gamma = radius + spread
        kl_radius = radius
    loss = RadialLoss(p=p, a=a, R0=R0, name=kind, tail=tail)
    X = _ball_points(n, d, spread, rng)
    data = Dataset(X, np.zeros(n))
    objective, grad = _objective_fns(loss, data)
    optimum = _minimise(objective, grad, X.mean(axis=0))
    w0 = np.zeros(d)
    w0[0] = w0_dist
    # Public bound on F(w0) - F*: every ||w0 - x_i|| <= w0_distance + spread and F* >= 0.
    far = np.zeros((1, d))
    far[0, 0] = w0_dist + spread
    f0_bound = float(loss.value(np.zeros((1, d)), far, np.zeros(1), _np_xp())[0, 0])
    F0 = min((gamma * loss.lipschitz) ** kappa, f0_bound)  # F0 <= (gamma L0)^kappa (line 56)
    F_star = float(objective(optimum)[0])
    info = {
        "problem": kind, "tail": tail, "gamma": gamma, "kappa": kappa, "p": p,
        "lipschitz": loss.lipschitz, "smoothness": loss.smoothness,
        "weak_convexity": 0.0, "F0": F0, "w0": w0, "F_star": F_star,
        "kl_region": {"center": np.zeros(d), "radius": kl_radius},
    }
    return Problem(data=data, loss=loss, objective=objective, grad=grad, optimum=optimum,
                   info=info, public=_public(info))


def _theorem8_problem(params: Mapping[str, Any], kappa: float, n: int,
                      w0_dist: float) -> Problem:
    """Theorem 8's instance (lines 610-619): n(1+q)/2 records +1, the rest -1, q = 1/(n eps).

    ``lb_side = -1`` gives the proof's other dataset S' (line 616), every record mirrored,
    so its minimiser is -A; the public start w0 = A + w0_distance is the same for both.
    """
    eps = float(params.get("lb_epsilon", math.log(2.0)))
    side = params.get("lb_side", 1)
    if side not in (1, -1):
        raise InputError(f"lb_side must be 1 (S) or -1 (S', mirrored), got {side!r}")
    q = 1.0 / (n * eps)
    if not 0 < q <= 1:
        raise InputError(f"theorem8 needs n * lb_epsilon >= 1, got {n * eps}")
    tau = kappa / (kappa - 1.0)
    A = 0.5 * q ** (1.0 / (tau - 1.0))  # a = (1/2)(n eps)^(-1/(tau-1)), line 619
    n_plus = min(n, math.ceil(n * (1.0 + q) / 2.0))  # at least the fraction (1+q)/2
    y = side * np.where(np.arange(n) < n_plus, 1.0, -1.0)
    X = (y * A)[:, None]  # each record's kink point: +A for label +1, -A for -1
    loss = Theorem8Loss(tau=tau)
    data = Dataset(X, y)
    objective, grad = _objective_fns(loss, data)
    # F decreases on [-A, A] and increases after A when the +1 labels are the majority
    optimum = np.array([side * A])
    w0 = np.array([A + w0_dist])
    F_star = float(objective(optimum)[0])
    # 1-Lipschitz losses: F(w0) - F* <= |w0 - w*| <= |w0| + A for either dataset of the pair
    # (w* = +-A), and F0 <= (gamma L0)^kappa = 1: public, the same on S and S'.
    F0 = min(float(abs(w0[0]) + A), 1.0)
    info = {
        "problem": "theorem8", "gamma": 1.0, "kappa": kappa, "tau": tau,
        "lipschitz": 1.0, "smoothness": None, "weak_convexity": 0.0, "F0": F0,
        "w0": w0, "F_star": F_star, "lb_epsilon": eps, "A": A,
        "kl_region": {"center": np.zeros(1), "radius": A + loss.r_lin},
    }
    return Problem(data=data, loss=loss, objective=objective, grad=grad, optimum=optimum,
                   info=info, public=_public(info))


def regularized(problem: Problem, lam: float, center: np.ndarray) -> Problem:
    """``F(w) + lam ||w - center||^2`` (paper 004, Appendix E's F~), with its minimiser.

    Examples
    --------
    >>> p = make_kl_problem({"kappa": 2.0, "n": 40, "d": 2}, np.random.default_rng(1))
    >>> r = regularized(p, 0.5, p.info["w0"])
    >>> bool(np.linalg.norm(r.grad(r.optimum)) < 1e-6)
    True
    """
    base_obj, base_grad = problem.objective, problem.grad
    c = np.asarray(center, dtype=float)

    def objective(theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(theta)
        return base_obj(theta) + lam * np.sum((theta - c) ** 2, axis=1)

    def grad(theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_2d(theta)
        return base_grad(theta) + 2.0 * lam * (theta - c)

    opt = _minimise(objective, grad, np.asarray(problem.optimum, dtype=float))
    info = {**problem.info, "regularization": lam, "F_star": float(objective(opt)[0])}
    return Problem(data=problem.data, loss=problem.loss, objective=objective, grad=grad,
                   optimum=opt, info=info, public={**problem.public, "regularization": lam})


def _public(info: Mapping[str, Any]) -> dict[str, Any]:
    """Everything but F* (the minimum of the data's objective: for metrics only)."""
    return {k: v for k, v in info.items() if k != "F_star"}


def kl_violation(problem: Problem, points: np.ndarray) -> np.ndarray:
    """``(F(w) - F*) - gamma^kappa ||grad F(w)||^kappa`` at each point (<= 0 where KL holds).

    Examples
    --------
    >>> p = make_kl_problem({"kappa": 2.0, "n": 30, "d": 2}, np.random.default_rng(0))
    >>> pts = np.random.default_rng(1).uniform(-1.2, 1.2, size=(50, 2))  # inside the KL region
    >>> bool(np.all(kl_violation(p, pts) <= 1e-9))
    True
    """
    pts = np.atleast_2d(points)
    gap = problem.objective(pts) - problem.info["F_star"]
    g = np.linalg.norm(problem.grad(pts), axis=1)
    return gap - (problem.info["gamma"] * g) ** problem.info["kappa"]
