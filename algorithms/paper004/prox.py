"""The proximal point method (paper 004, Algorithm 2, lines 197-205) and its strongly
convex subroutine, noisy gradient descent (Algorithm 4, Appendix E, lines 893-908).

Algorithm 2 runs T rounds; round t minimises ``F(w) + L1~ ||w - w_{t-1}||^2`` (line 4) with
Algorithm 4 at budget rho/T (line 5). Algorithm 4 takes T_in - 1 projected noisy gradient
steps with step 1/(L1~ t) and returns the t-weighted average (lines 1-5). Its
Theorem 9 (line 903) sets ``T_in = n^2 rho log^2(2/beta) / d`` and
``sigma^2 = 4 L0^2 T_in / (n^2 rho)``; T_in is capped at ``T_in_max`` for CPU runs, and
sigma is computed from the capped value, so privacy is unchanged and only utility pays
(an extra ``L0^2 / (L1~ T_in)`` optimisation error).

``paper``: as printed: sigma of Theorem 9 with declared sensitivity ``2 L0 / n`` (line
908), which is right under replace-one; no clipping (the paper assumes f Lipschitz).

``sound``: per-sample gradients clipped to L0, sensitivity under the run's relation,
sigma calibrated so that the T_in - 1 releases of each call cost exactly rho / T
(Theorem 9's sigma leaves half the budget unused).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from algorithms.kl_problems import make_kl_problem, regularized
from algorithms.paper004.common import constants, grad_query, mean_sensitivity, start
from dpverify.accounting.accountant import gaussian_sigma_for_rho
from dpverify.core.curator import Curator
from dpverify.core.registry import Problem, Setting


def inner_steps(n: int, d: int, rho: float, beta: float, cap: int) -> int:
    """T of Theorem 9 (line 903), rounded up, capped at ``cap`` and at least 2.

    Examples
    --------
    >>> inner_steps(100, 10, 1.0, 0.1, 10**9)
    8975
    >>> inner_steps(100, 10, 1.0, 0.1, 50)
    50
    """
    T = n**2 * rho * math.log(2.0 / beta) ** 2 / d
    return int(max(2, min(math.ceil(T), int(cap))))


def outer_rounds(p: Mapping[str, Any], c: Mapping[str, float], n: int, d: int) -> int:
    """T of Algorithm 2 (line 1), rounded up and at least 1.

    Examples
    --------
    >>> c = {"gamma": 0.5 ** 0.5, "kappa": 2.0, "L0": 2.0, "L1": 1.0, "F0": 0.78}
    >>> outer_rounds({"rho": 1.0, "L1_tilde": 0.5}, c, 500, 5)
    89
    """
    kappa, gamma, L0, F0 = c["kappa"], c["gamma"], c["L0"], c["F0"]
    lt = float(p["L1_tilde"])
    nsr = n * math.sqrt(float(p["rho"]))
    T = (1.0 + 32.0 * F0 ** ((kappa - 2.0) / kappa) * gamma**2 * lt) * (
        math.log(F0) + kappa * math.log(nsr / (gamma * L0 * math.sqrt(d))))
    return max(1, math.ceil(T))


def noisy_gd_alg4(cur: Curator, setting: Setting, W_center: Any, *, rho_call: float,
                  beta_call: float, p: Mapping[str, Any], sound: bool) -> Any:
    """Algorithm 4 on ``F(w) + L1~ ||w - center||^2`` from ``w_1 = center`` (lines 1-5)."""
    xp = cur.xp
    c = constants(setting)
    L0, lt = c["L0"], float(p["L1_tilde"])
    n, d = cur.n, cur.d
    T = inner_steps(n, d, rho_call, beta_call, int(p["T_in_max"]))
    if sound:
        sens = mean_sensitivity(L0, str(p["relation"]), n)
        sigma = gaussian_sigma_for_rho(rho_call, sens, steps=T - 1)
        clip = L0
    else:
        sens = 2.0 * L0 / n  # line 908
        sigma = math.sqrt(4.0 * L0**2 * T / (n**2 * rho_call))  # line 903
        clip = None
    radius = L0 / (2.0 * lt)  # projection ball B_{L0/(2 L1~)}(w0), line 897
    W = W_center
    acc = W * 1.0  # t = 1 term of sum_t t w_t (line 5)
    for t in range(1, T):
        g = cur.gaussian("grad", grad_query(cur, setting, W, clip=clip, guard=sound),
                         sensitivity=sens, noise_std=sigma)
        step = W - (1.0 / (lt * t)) * (g + 2.0 * lt * (W - W_center))  # line 3 at w_t
        off = step - W_center
        nrm = xp.linalg.vector_norm(off, axis=1, keepdims=True)
        scale = xp.where(nrm > radius, radius / xp.where(nrm > radius, nrm, 1.0), 1.0)
        W = W_center + off * scale
        acc = acc + (t + 1) * W
    return acc * (2.0 / (T * (T + 1)))  # line 5


def prox_point(*, sound: bool):
    """Algorithm 2 as a ``run(cur, setting, params)`` function."""

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        c = constants(setting)
        T = outer_rounds(p, c, cur.n, cur.d)
        rho_call = float(p["rho"]) / T  # line 5
        beta_call = float(p["beta"]) / T  # line 2
        W = start(cur, setting)
        for t in range(T):
            cur.step(t)
            W = noisy_gd_alg4(cur, setting, W, rho_call=rho_call, beta_call=beta_call, p=p,
                              sound=sound)
        return W

    return run


def noisy_gd(*, sound: bool):
    """Algorithm 4 alone (Theorem 9) at budget rho, centred at the public start w0."""

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        return noisy_gd_alg4(cur, setting, start(cur, setting), rho_call=float(p["rho"]),
                             beta_call=float(p["beta"]), p=p, sound=sound)

    return run


def make_regularized_problem(params: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    """The KL test problem plus ``L1~ ||w - w0||^2``: the objective Theorem 9 is about.

    Examples
    --------
    >>> p = make_regularized_problem({"n": 40, "d": 2, "L1_tilde": 0.5},
    ...                              np.random.default_rng(0))
    >>> p.info["regularization"]
    0.5
    """
    base = make_kl_problem(params, rng)
    return regularized(base, float(params["L1_tilde"]), base.info["w0"])
