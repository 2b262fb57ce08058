"""Adaptive noisy gradient descent (paper 004, Algorithm 3, lines 237-246; Theorem 3, line 252).

Each step releases a noisy gradient norm N_t (line 3), picks the gradient noise from it,
``sigma_t = max{N_t / sqrt(d log(n sqrt(rho)/beta)), 2 L0/(n sqrt(rho))}`` (line 4), takes a
step of 1/(2 L1) (line 5), and charges
``rho_t = min{L0^2 d log(n sqrt(rho)/beta) / (n^2 N_t^2), rho/2} + sqrt(rho)/n`` (line 6);
it stops once the charges exceed rho/2 (line 2). The costs are chosen from released
values, so privacy rests on fully adaptive composition: a privacy filter
(:mod:`dpverify.mechanisms.filters`; the paper cites Whitehouse et al., Theorem 1, in Appendix D.2).

``paper``: as printed, with its own tally of line 6 as the stopping rule. N_t is signed:
near a stationary point it is often negative, line 4 then falls back to the noise floor
while line 6 charges ``L0^2 d log(.)/(n^2 N_t^2)`` with the *large* N_t^2, i.e. almost
nothing, and the loop runs on at floor noise. Sensitivities as Appendix D.2 declares them
(``L0/n``, line 658). The norm noise is scalar as the analysis treats it (Lemma 10, line
644; line 3 prints ``N(0, I_d sigma_hat^2)``).

``sound``: per-sample gradients clipped to L0; ``N_t^+ = max(N_t, 0)`` (post-processing);
sensitivities under the run's relation; every noise scale multiplied by one factor so
that the Bun-Steinke cost ``Delta^2 / (2 sigma^2)`` of each release equals the paper's
charge (line 6 and Appendix D.2's ``(L0 / (n sigma))^2``); a
:class:`~dpverify.mechanisms.filters.ZCDPFilter` with budget rho admits every release, and when a
step's gradient release does not fit the budget left, its noise is raised until it does
(adaptive noise is exactly what a filter allows).

Theorem 5 (line 280; privacy proof in Appendix D.6, line 843) runs Algorithm 3 and returns
w_t* with t* drawn from {0..T} with probability proportional to
exp(-n sqrt(rho) ||grad F(w_t; S)|| / (2 L0)) on exact gradient norms:
:func:`adaptive_noisy_gd_select`. That is the exponential mechanism on the scores
u_t = -||grad F(w_t; S)|| with eps / (2 Delta) = n sqrt(rho) / (2 L0), i.e. eps = sqrt(rho)
at the paper's Delta = L0/n (line 658); the proof charges it (sqrt(rho), 0)-DP, hence rho/2
by Lemma 14, for 2 rho-zCDP in all. ``paper`` selects exactly so (unclipped, Delta = L0/n);
``sound`` clips, declares the run's relation (2 L0/n under replace-one: the norm moves no
more than the mean, by the reverse triangle inequality) and keeps eps = sqrt(rho), so its
selection is twice as flat as the printed one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from algorithms.paper004.common import (
    constants,
    grad_norm_query,
    grad_query,
    mean_sensitivity,
    start,
    to_numpy,
)
from dpverify.core.curator import Curator
from dpverify.core.registry import Setting
from dpverify.mechanisms.filters import (
    ZCDPFilter,
    attach,
    gaussian_per_trial,
    gaussian_zcdp,
    noise_for_zcdp,
)


def _scales(p: Mapping[str, Any], c: Mapping[str, float], n: int, d: int) -> dict[str, float]:
    rho, beta = float(p["rho"]), float(p["beta"])
    nsr = n * math.sqrt(rho)
    return {
        "eta": 1.0 / (2.0 * c["L1"]),  # line 1
        "dlog": d * math.log(nsr / beta),  # d log(n sqrt(rho) / beta), lines 4 and 6
        "sigma_hat": c["L0"] / (math.sqrt(n) * rho**0.25),  # line 3
        "floor": 2.0 * c["L0"] / nsr,  # line 4
    }


def adaptive_noisy_gd(*, sound: bool):
    """Algorithm 3 as a ``run(cur, setting, params)`` function."""

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        return (_run_sound if sound else _run_paper)(cur, setting, p)

    return run


def adaptive_noisy_gd_select(*, sound: bool):
    """Theorem 5: Algorithm 3, then t* by the exponential mechanism on gradient norms."""

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        trace: list[tuple[Any, np.ndarray]] = []
        (_run_sound if sound else _run_paper)(cur, setting, p, trace)
        return _select(cur, setting, p, trace, sound=sound)

    return run


def _select(cur: Curator, setting: Setting, p: Mapping[str, Any],
            trace: list[tuple[Any, np.ndarray]], *, sound: bool) -> Any:
    """w_t* with t* drawn by the exponential mechanism of Theorem 5 (line 280)."""
    c = constants(setting)
    n, K = cur.n, cur.trials
    if sound:
        sens = mean_sensitivity(c["L0"], str(p["relation"]), n)
        clip, guard = c["L0"], True
    else:
        sens, clip, guard = c["L0"] / n, None, False  # line 658's L0/n, no clipping
    eps = math.sqrt(float(p["rho"]))  # "(sqrt(rho), 0)-DP", Appendix D.6 (line 843)
    # Option t of a trial exists only if the trial took step t (t <= its own T).
    offered = np.stack([a for _, a in trace], axis=1)
    penalty = cur.backend.asarray(np.where(offered, 0.0, -np.inf))
    queries = [grad_query(cur, setting, W, clip=clip, guard=guard) for W, _ in trace]
    xp = cur.xp

    def scores(X: Any, y: Any, w: Any) -> Any:
        norms = xp.stack([xp.linalg.vector_norm(q(X, y, w), axis=1) for q in queries], axis=1)
        return penalty - norms

    cur.step(None)
    idx = cur.exponential("select_t", scores, sensitivity=sens, epsilon=eps)
    iterates = np.stack([to_numpy(cur, W) for W, _ in trace], axis=1)  # (trials, T+1, d)
    return cur.backend.asarray(iterates[np.arange(K), idx])


def _run_paper(cur: Curator, setting: Setting, p: Mapping[str, Any],
               trace: list[tuple[Any, np.ndarray]] | None = None) -> Any:
    xp = cur.xp
    c = constants(setting, smooth=True)
    n, d, K = cur.n, cur.d, cur.trials
    rho = float(p["rho"])
    s = _scales(p, c, n, d)
    sens = c["L0"] / n  # "the sensitivity of any gradient estimate is at most L0/n", line 658
    W = start(cur, setting)
    tally = np.zeros(K)  # sum_j rho_j of line 2
    active = np.ones(K, bool)
    t = 0
    while True:
        active &= tally <= rho / 2.0  # line 2
        if not active.any():
            break
        cur.step(t)
        if trace is not None:  # w_t, at which step t releases its noisy norm
            trace.append((W, active.copy()))
        N = to_numpy(cur, cur.gaussian(
            "grad_norm", grad_norm_query(cur, setting, W, clip=None, guard=False, active=active),
            sensitivity=sens, noise_std=s["sigma_hat"]))[:, 0]  # line 3, signed
        sigma_t = np.maximum(N / math.sqrt(s["dlog"]), s["floor"])  # line 4
        g = gaussian_per_trial(cur, "grad", grad_query(cur, setting, W, clip=None, guard=False,
                                                       active=active),
                               sensitivity=sens, noise_std=sigma_t, active=active)
        act_b = xp.reshape(cur.backend.asarray(active.astype(float)), (K, 1))
        W = W - act_b * s["eta"] * g  # line 5
        with np.errstate(divide="ignore"):
            charge = np.minimum(c["L0"] ** 2 * s["dlog"] / (n**2 * N**2), rho / 2.0)
        tally = tally + np.where(active, charge + math.sqrt(rho) / n, 0.0)  # line 6
        t += 1
    return W


def _run_sound(cur: Curator, setting: Setting, p: Mapping[str, Any],
               trace: list[tuple[Any, np.ndarray]] | None = None) -> Any:
    xp = cur.xp
    c = constants(setting, smooth=True)
    n, d, K = cur.n, cur.d, cur.trials
    rho = float(p["rho"])
    s = _scales(p, c, n, d)
    sens = mean_sensitivity(c["L0"], str(p["relation"]), n)  # norm too: reverse triangle ineq.
    # One factor on every noise scale makes Delta^2/(2 sigma^2) equal the paper's charge
    # (L0/(n sigma_paper))^2 (Appendix D.2, line 656): sqrt 2 under replace-one.
    factor = sens / (math.sqrt(2.0) * c["L0"] / n)
    sigma_hat = factor * s["sigma_hat"]
    norm_cost = gaussian_zcdp(sens, sigma_hat)  # = sqrt(rho)/n, line 6
    filt = attach(cur.ledger, ZCDPFilter(rho, trials=K))
    W = start(cur, setting)
    active = np.ones(K, bool)
    t = 0
    while True:
        # Line 2's rule on the filter's exact tally; the filter itself is the hard limit.
        active &= (filt.spent <= rho / 2.0) & filt.allows(norm_cost)
        if not active.any():
            break
        cur.step(t)
        if trace is not None:  # w_t, at which step t releases its noisy norm
            trace.append((W, active.copy()))
        filt.spend(norm_cost, active)
        N = to_numpy(cur, cur.gaussian(
            "grad_norm", grad_norm_query(cur, setting, W, clip=c["L0"], guard=True,
                                         active=active),
            sensitivity=sens, noise_std=sigma_hat))[:, 0]
        N_plus = np.maximum(N, 0.0)  # post-processing; keeps line 6's charge honest
        sigma_t = factor * np.maximum(N_plus / math.sqrt(s["dlog"]), s["floor"])  # line 4
        left = filt.remaining()
        over = gaussian_zcdp(sens, sigma_t) > left
        active &= left > 0
        sigma_t = np.where(over & active, noise_for_zcdp(sens, np.where(left > 0, left, 1.0)),
                           sigma_t)
        if not active.any():
            break
        filt.spend(np.where(active, gaussian_zcdp(sens, sigma_t), 0.0), active)
        g = gaussian_per_trial(cur, "grad", grad_query(cur, setting, W, clip=c["L0"], guard=True,
                                                       active=active),
                               sensitivity=sens, noise_std=sigma_t, active=active)
        act_b = xp.reshape(cur.backend.asarray(active.astype(float)), (K, 1))
        W = W - act_b * s["eta"] * g  # line 5
        t += 1
    return W
