"""Algorithm 2 of paper 001: O2NC, online-to-nonconvex conversion (Cutkosky et al. 2023).

Lines 168-182: Delta_1 = 0; for t = 1..T draw s_t ~ U[0, 1], set x_t = x_{t-1} + Delta_t and
z_t = x_{t-1} + s_t Delta_t, query the oracle at z_t, and take the projected step
Delta_{t+1} = min(1, D / ||Delta_t - eta g_t||) (Delta_t - eta g_t). The output is a
uniformly chosen block average of M consecutive z's (not of x's, not the last iterate).
The loop itself never touches data: everything private happens in the oracle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dpverify.core.curator import Curator
from dpverify.core.errors import InputError

Oracle = Callable[[Any, int], Any]  # oracle(z_t, t) -> noisy gradient estimate (trials, d)


def o2nc(cur: Curator, oracle: Oracle, *, x0: np.ndarray, D: float, eta: float, M: int,
         T: int) -> Any:
    """Run Algorithm 2 for every trial; returns x_out (trials, d).

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.ones((2, 2)), np.zeros(2)), trials=3, rng=0)
    >>> x = o2nc(cur, lambda z, t: z - 1.0, x0=np.zeros(2), D=0.1, eta=1.0, M=5, T=50)
    >>> x.shape, bool(np.all(np.linalg.norm(x, axis=1) <= 0.1 * 50))  # x_out in B(x0, D T)
    ((3, 2), True)
    """
    T, M = int(T), int(M)
    if not (1 <= M <= T):
        raise InputError(f"O2NC needs 1 <= M <= T, got M={M}, T={T}")
    xp, backend, K = cur.xp, cur.backend, cur.trials
    x = backend.asarray(np.broadcast_to(np.asarray(x0, dtype=float), (K, cur.d)).copy())
    delta = xp.zeros_like(x)
    blocks: list[Any] = []
    acc = xp.zeros_like(x)
    n_blocks = T // M  # line 10: K = floor(T / M); the last T - K M iterates go unused
    for t in range(1, T + 1):
        cur.step(t)
        s = backend.asarray(cur.rng.random(K))[:, None]  # line 4
        x_prev = x
        x = x_prev + delta  # line 5
        z = x_prev + s * delta  # line 6
        g = oracle(z, t)  # line 7
        v = delta - eta * g  # line 8: projection of the step onto the ball B_D
        nv = xp.linalg.vector_norm(v, axis=1, keepdims=True)
        big = nv > D
        delta = v * xp.where(big, D / xp.where(big, nv, xp.ones_like(nv)), xp.ones_like(nv))
        acc = acc + z
        if t % M == 0 and len(blocks) < n_blocks:
            blocks.append(acc / M)  # line 12: the block average of z's
            acc = xp.zeros_like(x)
    pick = cur.rng.integers(0, n_blocks, size=K)  # line 14: x_out ~ Unif{xbar_1..xbar_K}
    onehot = backend.asarray(np.eye(n_blocks)[pick])
    return xp.sum(onehot[:, :, None] * xp.stack(blocks, axis=1), axis=1)
