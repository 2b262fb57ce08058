"""DP-SGD on the dual (3), the baseline of paper 000's Remark 1 (text lines 157, 178).

Remark 1 states only the rate O((sqrt(d log(1/delta)) / (n eps))^(1/2)) (Wang and Xu 2019 via
Zhang et al. 2025b); the method is the standard one on the single variable z = (x, eta)
(line 157): z_{t+1} = z_t - gamma [(1/b) sum_{xi in B_t} Clip(grad_z L(z_t; xi), C) + noise],
with L(x, eta; xi) = lambda psi*((l - G eta)/lambda) + G eta as in Algorithm 2, per-sample
gradient ((psi*)'(a) grad l, G (1 - (psi*)'(a))), clipped jointly. The output is x_tau.

``paper``: the only noise rule the paper gives for it, Theorem 5 as typeset (line 418):
sigma = c C sqrt(log(1/delta)/eps) max{1/b, sqrt(T)/n}, batches of size b uniformly without
replacement, declared sensitivity 2C/b (elements bounded by C).

``sound``: Poisson batches of expected size b, noise calibrated by PLD for T steps.

The two differ only in their :class:`NoiseRule` (:data:`PAPER_RULE`, :data:`SOUND_RULE`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.paper000.common import (
    TINY,
    RandomIterate,
    c_of,
    calibrate_streams,
    finite_records,
    glm_terms,
    release,
    sampled_batch,
    thm5_sigma,
)
from algorithms.paper000.divergences import safe_log
from algorithms.paper000.double_spider import divergence_of
from dpverify.core.curator import Curator
from dpverify.core.registry import Setting


def joint_grad_query(cur: Curator, setting: Setting, div: Any, G: float, lam: float,
                     Z: Any, C: float, divisor: float):
    """sum_i w_i Clip(grad_(x, eta) L(x, eta; xi_i), C) / divisor, shape (trials, d + 1).

    With D = (psi*)'(a) = sD e^lD, the gradient is (D l' x_i, G (1 - D)); both parts are
    scaled by e^-max(lD, 0) before the norm is taken, so e^lD never overflows.

    Examples
    --------
    >>> from algorithms.paper000.divergences import get_divergence
    >>> from algorithms.paper000.problems import make_dual_problem
    >>> prob = make_dual_problem({"n": 4, "d": 2, "divergence": "kl", "dro_lambda": 1e-3},
    ...                          np.random.default_rng(0))
    >>> cur = Curator(prob.data, rng=0)
    >>> Z = np.array([[5.0, -5.0, -10.0]])  # eta far below the losses: e^(l/lambda) huge
    >>> q = joint_grad_query(cur, prob.setting(), get_divergence("kl"), 0.25, 1e-3, Z, 1.0, 1.0)
    >>> bool(np.linalg.norm(cur.gaussian("g", q, sensitivity=1.0, noise_std=0.0)) <= 4.0)
    True
    """
    xp = cur.xp
    d = Z.shape[1] - 1
    x, eta = Z[:, :d], Z[:, d]

    def query(X: Any, y: Any, w: Any) -> Any:
        X, y, w = finite_records(xp, X, y, w)
        l, dl = glm_terms(cur, setting, x, X, y)
        lD, sD = div.log_dconj((l - G * eta[:, None]) / lam, xp)
        m = xp.clip(lD, min=0.0)
        D_s = sD * xp.exp(lD - m)  # D e^-m
        cx = D_s * dl  # x-coefficient, e^-m scaled
        ce = G * (xp.exp(-m) - D_s)  # eta-part, e^-m scaled
        nx = xp.linalg.vector_norm(X, axis=1)[None, :]
        norm = xp.sqrt((cx * nx) ** 2 + ce**2)
        factor = xp.exp(xp.minimum(m, math.log(C) - safe_log(xp, norm)))
        gx = (w * cx * factor) @ X / divisor
        ge = xp.sum(w * ce * factor, axis=1, keepdims=True) / divisor
        return xp.concat([gx, ge], axis=1)

    return query


def theorem5_typeset_noise(p: Mapping[str, Any], n: int, b: int) -> float:
    """Theorem 5 as typeset (line 418), sqrt(log(1/delta)/eps), with the constant
    :func:`~algorithms.paper000.common.c_of`.

    Examples
    --------
    >>> p = {"clip": 1.0, "epsilon": 0.25, "delta": math.exp(-4.0), "T": 100, "c_noise": 1.0}
    >>> theorem5_typeset_noise(p, 1000, 10)  # sqrt(4 / 0.25) max{1/10, sqrt(100)/1000}
    0.4
    """
    return thm5_sigma(c_of(p), float(p["clip"]), float(p["epsilon"]), float(p["delta"]), b,
                      int(p["T"]), n, typeset=True)


def calibrated_noise(p: Mapping[str, Any], n: int, b: int) -> float:
    """z 2C/b with z calibrated by PLD for T Poisson-sampled steps of rate b/n.

    Examples
    --------
    >>> s = calibrated_noise({"clip": 1.0, "epsilon": 1.0, "delta": 1e-3, "T": 10}, 100, 100)
    >>> 0.02 < s < 0.2  # ten full-batch steps of sensitivity 0.02
    True
    """
    z = calibrate_streams(float(p["epsilon"]), float(p["delta"]), n,
                          (("poisson", b / n, int(p["T"])),))
    return z * (2.0 * float(p["clip"]) / b)


@dataclass(frozen=True)
class NoiseRule:
    """What the variants differ in: ``noise(p, n, b)``, the std of every step's release,
    and ``poisson``, its batches' sampling (else uniform without replacement)."""

    name: str
    noise: Callable[[Mapping[str, Any], int, int], float]
    poisson: bool


PAPER_RULE = NoiseRule("paper", theorem5_typeset_noise, poisson=False)  # Theorem 5, line 418
SOUND_RULE = NoiseRule("sound", calibrated_noise, poisson=True)  # PLD, Poisson batches


def dp_sgd_dual(rule: NoiseRule):
    """DP-SGD on (x, eta) under ``rule`` as a ``run(cur, setting, params)`` function.

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> from dpverify.execution.trials import build_problem
    >>> t = resolve("dp_sgd_dro:paper"); p = t.algorithm.params("paper", {"T": 3})
    >>> cur = Curator(build_problem(t, p, 0).data, trials=2, rng=0)
    >>> dp_sgd_dual(PAPER_RULE)(cur, build_problem(t, p, 0).setting(), p).shape
    (2, 5)
    """

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        bk = cur.backend
        n, d = cur.n, cur.d
        div = divergence_of(p)
        G, lam = float(setting["lipschitz"]), float(p["dro_lambda"])
        T, b, C, lr = int(p["T"]), min(cur.n, int(p["batch"])), float(p["clip"]), float(p["lr"])
        sens = 2.0 * C / b
        noise = rule.noise(p, n, b)
        Z = bk.asarray(np.concatenate([np.zeros((cur.trials, d)),
                                       np.full((cur.trials, 1), float(p["eta0"]))], axis=1))
        out = RandomIterate(cur, T, Z[:, :d], str(p["output"]))
        for t in range(T):
            cur.step(t)
            batch = sampled_batch(cur, b, sound=rule.poisson)
            g = release(cur, "dual_grad",
                        joint_grad_query(cur, setting, div, G, lam, Z, max(C, TINY), float(b)),
                        sensitivity=sens, noise=noise, batch=batch)
            Z = Z - lr * g
            out.offer(t + 1, Z[:, :d])
        return out.value

    return run
