"""Randomized-smoothing gradient estimators of paper 001 as curator queries.

Zero-order (Fact 2.3(iv), line 129; Alg. 3 line 6): for y_1..y_m uniform on the SPHERE,
    (1/m) sum_j (d / (2 alpha)) (f(z + alpha y_j) - f(z - alpha y_j)) y_j.
First-order (eq. (10) as Alg. 5 uses it, lines 382-389): for y_1..y_m uniform in the BALL
B_alpha, (1/m) sum_j grad f(z + y_j). Both are unbiased for grad f_alpha(z), the gradient of
the ball smoothing.

The directions are public randomness: drawn from the curator's stream as a seed before the
release, and regenerated inside the query from that seed in fixed chunks of records, so
both worlds of a replay see the same directions and memory stays bounded however many
trials and records a step touches. Everything inside a query is Array API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpverify.core.curator import Curator, Query

# Elements of one (trials, records, m, d) block of directions: bounds the memory of a query.
_BLOCK_ELEMENTS = 1 << 21


@dataclass(frozen=True)
class Directions:
    """Public random points for ``m`` estimates per record, regenerated chunk by chunk.

    ``kind`` is ``"sphere"`` (unit vectors) or ``"ball"`` (uniform in the ball of
    ``radius``: radius * r^(1/d) * u, not radius * r * u, notes 001 pitfall 5).

    Examples
    --------
    >>> dirs = Directions(seed=1, trials=2, m=3, d=4, kind="sphere")
    >>> from dpverify.core.backends import get_backend
    >>> Y = dirs.block(get_backend("numpy"), 0, 5, 5)
    >>> Y.shape, bool(np.allclose(np.linalg.norm(Y, axis=-1), 1.0))
    ((2, 5, 3, 4), True)
    >>> bool(np.array_equal(Y[:, 2:], dirs.block(get_backend("numpy"), 2, 5, 5)))
    True
    """

    seed: int
    trials: int
    m: int
    d: int
    kind: str = "sphere"
    radius: float = 1.0

    def chunk(self, count: int) -> int:
        """Records per generated chunk when a query covers ``count`` records.

        A function of ``count`` only, so every evaluation of the query (both worlds of a
        replay) regenerates the same directions for the same records.
        """
        return max(1, min(int(count), _BLOCK_ELEMENTS // (self.trials * self.m * self.d)))

    def _chunk(self, c: int, size: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, c])
        g = rng.standard_normal((self.trials, size, self.m, self.d))
        g /= np.linalg.norm(g, axis=-1, keepdims=True)
        if self.kind == "ball":
            r = rng.random((self.trials, size, self.m, 1)) ** (1.0 / self.d)
            g *= self.radius * r
        return g

    def block(self, backend: Any, start: int, stop: int, count: int) -> Any:
        """Directions of records ``start..stop-1`` of ``count`` (trials, stop - start, m, d)."""
        size = self.chunk(count)
        c0, c1 = start // size, (stop - 1) // size
        parts = [self._chunk(c, size) for c in range(c0, c1 + 1)]
        full = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        off = c0 * size
        return backend.asarray(full[:, start - off: stop - off])


def draw_directions(cur: Curator, m: int, *, kind: str, radius: float = 1.0) -> Directions:
    """Fresh public directions for one release (a seed from the curator's stream).

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.ones((3, 2)), np.zeros(3)), trials=4, rng=0)
    >>> draw_directions(cur, 5, kind="ball", radius=0.1).trials
    4
    """
    seed = int(cur.rng.integers(0, 2**63 - 1))
    return Directions(seed, cur.trials, int(m), cur.d, kind, float(radius))


def clip_rows(v: Any, radius: float, xp: Any) -> Any:
    """Project each vector (last axis) onto the ball of ``radius``.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> clip_rows(np.array([[3.0, 4.0], [0.0, 0.0]]), 1.0, xp).round(12).tolist()
    [[0.6, 0.8], [0.0, 0.0]]
    """
    nrm = xp.linalg.vector_norm(v, axis=-1, keepdims=True)
    big = nrm > radius
    return v * xp.where(big, radius / xp.where(big, nrm, xp.ones_like(nrm)), xp.ones_like(nrm))


def zero_order(loss: Any, z: Any, A: Any, b: Any, Y: Any, alpha: float, xp: Any) -> Any:
    """Zero-order estimates at ``z`` (trials, d) for records ``A`` (B, d), ``b`` (B,).

    ``Y`` (trials, B, m, d) are unit directions; returns (trials, B, d). The trailing y_j
    and the factor d / (2 alpha) that eq. (4) (line 70) drops are kept (Fact 2.3(iv)).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> from algorithms.paper001.problems import PiecewiseLinearGLM
    >>> Y = np.array([[[[1.0], [-1.0]]]])  # d = 1: the sphere is {-1, +1}
    >>> zero_order(PiecewiseLinearGLM("relu"), np.array([[2.0]]), np.array([[1.0]]),
    ...            np.array([0.0]), Y, 0.5, xp).tolist()
    [[[1.0]]]
    """
    d, m = z.shape[-1], Y.shape[2]
    bb = b[None, :, None]
    if hasattr(loss, "phi"):
        # f = phi(<a, x>, b): the margins <a, z +- alpha y> share <a, z> and <a, y>
        za = (z @ A.T)[:, :, None]
        ya = xp.sum(Y * A[None, :, None, :], axis=-1)
        diff = loss.phi(za + alpha * ya, bb, xp) - loss.phi(za - alpha * ya, bb, xp)
    else:
        P, Ab = z[:, None, None, :], A[None, :, None, :]
        diff = loss.value(P + alpha * Y, Ab, bb, xp) - loss.value(P - alpha * Y, Ab, bb, xp)
    # (1/m) sum_j diff_j y_j as one batched product
    return (d / (2.0 * alpha * m)) * (diff[:, :, None, :] @ Y)[:, :, 0, :]


def first_order(loss: Any, z: Any, A: Any, b: Any, Y: Any, xp: Any) -> Any:
    """First-order estimates: the mean of grad f(z + y_j) over the ball points ``Y``.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> from algorithms.paper001.problems import PiecewiseLinearGLM
    >>> Y = np.array([[[[0.1], [-0.1]]]])
    >>> first_order(PiecewiseLinearGLM("amplitude"), np.array([[0.0]]), np.array([[1.0]]),
    ...             np.array([1.0]), Y, xp).tolist()  # slopes -1 (z > 0) and +1 (z < 0)
    [[[0.0]]]
    """
    g = loss.grad(z[:, None, None, :] + Y, A[None, :, None, :], b[None, :, None], xp)
    return xp.mean(g, axis=2)


@dataclass(frozen=True)
class EstimatorSpec:
    """How per-record estimates are formed and bounded.

    ``radius`` projects each record's contribution (its estimate, or its difference a - b)
    onto a ball: the sound variants' deterministic sensitivity. ``guard`` gives weight 0 to
    records or estimates that are not finite.
    """

    loss: Any
    alpha: float
    zero_order: bool
    radius: float | None = None
    guard: bool = False

    def estimate(self, z: Any, A: Any, b: Any, Y: Any, xp: Any) -> Any:
        if self.zero_order:
            return zero_order(self.loss, z, A, b, Y, self.alpha, xp)
        return first_order(self.loss, z, A, b, Y, xp)


def _positions(X: Any, positions: np.ndarray | None) -> np.ndarray:
    return np.arange(X.shape[0]) if positions is None else positions


def record_query(cur: Curator, spec: EstimatorSpec, positions: np.ndarray | None, z: Any,
                 dirs: Directions, *, divisor: float, z_old: Any = None,
                 coupled: bool = False) -> Query:
    """The query (1/divisor) sum_i w_i e_i over the records at ``positions`` (all if None).

    e_i is the estimate at ``z`` (a period start), or with ``z_old`` the difference
    est(z) - est(z_old) with independent directions: the first m of ``dirs`` at z, the
    other m at z_old (Alg. 3 lines 12-14, Alg. 4 lines 11-13, Alg. 5 lines 9-11). With
    ``coupled`` the same m directions serve both points, so a zero-order difference is
    bounded by L d ||z - z_old|| / alpha whatever the directions (the baseline of
    :mod:`algorithms.paper001.baseline_zhang`).

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> from algorithms.paper001.problems import PiecewiseLinearGLM
    >>> cur = Curator(Dataset(np.eye(2), np.zeros(2)), trials=1, rng=0)
    >>> spec = EstimatorSpec(PiecewiseLinearGLM("relu"), 0.1, zero_order=False)
    >>> dirs = draw_directions(cur, 4, kind="ball", radius=0.1)
    >>> q = record_query(cur, spec, None, np.array([[1.0, 1.0]]), dirs, divisor=2.0)
    >>> cur.gaussian("g", q, sensitivity=1.0, noise_std=0.0).tolist()  # (e1 + e2) / 2
    [[0.5, 0.5]]
    """
    xp, backend = cur.xp, cur.backend
    m = dirs.m // 2 if z_old is not None and not coupled else dirs.m
    old_dirs = slice(0, m) if coupled else slice(m, None)

    def query(X: Any, y: Any, w: Any) -> Any:
        from array_api_compat import device

        pos = _positions(X, positions)
        total = None
        count = pos.shape[0]
        step = dirs.chunk(count)
        for start in range(0, count, step):
            stop = min(start + step, count)
            idx = xp.asarray(pos[start:stop], device=device(X))
            A, b, wb = xp.take(X, idx, axis=0), xp.take(y, idx, axis=0), xp.take(w, idx, axis=1)
            if spec.guard:
                ok = xp.all(xp.isfinite(A), axis=1) & xp.isfinite(b)
                A = xp.where(ok[:, None], A, xp.zeros_like(A))
                b = xp.where(ok, b, xp.zeros_like(b))
                wb = wb * xp.astype(ok, wb.dtype)
            Y = dirs.block(backend, start, stop, count)
            e = spec.estimate(z, A, b, Y[:, :, :m], xp)
            if z_old is not None:
                e = e - spec.estimate(z_old, A, b, Y[:, :, old_dirs], xp)
            if spec.guard:
                e = xp.where(xp.isfinite(e), e, xp.zeros_like(e))
            if spec.radius is not None:
                e = clip_rows(e, spec.radius, xp)
            part = xp.sum(wb[..., None] * e, axis=1)
            total = part if total is None else total + part
        return total / divisor

    return query
