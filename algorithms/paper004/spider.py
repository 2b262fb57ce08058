"""KL Spider (paper 004, Algorithm 1, lines 78-98; Theorem 1, line 108).

K rounds with a data-independent schedule of excess-risk targets Phi_k. Each round
releases one noisy full gradient, then walks normalised steps of public length s_k,
tracking the gradient with noisy differences of gradients, until the tracked gradient is
small (the round's target is met) or T_k steps are done.

``paper``: as printed. Noise sigma_hat (line 83) and sigma_k (line 86) with real-valued T_k;
loop ``t <= T_k`` (line 89) with a difference query after every step (line 92); the next
round starts from ``w_{k,t-1}`` (line 96); sensitivities as Lemma 8 states them (line 406):
``L0/n`` for the full gradient, ``eta L1 ||grad||/n = Phi_k^(1/kappa)/(4 gamma n)`` for a
difference. No clipping: the paper assumes f Lipschitz and smooth (Theorem 1).

``sound``: per-sample gradients clipped to L0 and per-sample differences to L1 s_k, so
the sensitivities hold for any data; sensitivities under the run's relation (2x under
replace-one); ``t < T_k`` steps with integer T_k and no difference query after the last
step; the next round starts from the current iterate; all noise scales multiplied by one
factor so the worst case over the (data-independent) schedule costs exactly rho.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.paper004.common import (
    constants,
    diff_query,
    grad_query,
    mean_sensitivity,
    start,
    to_numpy,
)
from dpverify.core.curator import Curator
from dpverify.core.registry import Setting


@dataclass(frozen=True)
class SpiderSchedule:
    """Everything Algorithm 1 fixes before touching the data (lines 1-7)."""

    K: int
    phi: np.ndarray  # Phi_k, k = 1..K (line 6)
    T: np.ndarray  # T_k as printed (real, line 7) or rounded up (sound)
    step: np.ndarray  # s_k = eta_{k,t} ||grad_{k,t}|| = Phi_k^(1/kappa) / (4 gamma L1) (line 11)
    threshold: np.ndarray  # (7 / (8 gamma)) Phi_k^(1/kappa) (line 10)
    sigma_full: float  # sigma_hat (line 4)
    sigma_diff: np.ndarray  # sigma_k (line 7)
    floor: float


def spider_schedule(p: Mapping[str, Any], c: Mapping[str, float], n: int, d: int, *,
                    integer_T: bool) -> SpiderSchedule | None:
    """The round schedule of Algorithm 1, or None in the trivial regime (K <= 0).

    Examples
    --------
    >>> c = {"gamma": 0.5 ** 0.5, "kappa": 2.0, "L0": 2.0, "L1": 1.0, "F0": 0.78}
    >>> s = spider_schedule({"rho": 1.0, "beta": 0.1, "c_floor": 32.0, "c_K": 64.0}, c, 500, 5,
    ...                     integer_T=True)
    >>> s.K, bool(np.all(s.T == 1))
    (326, True)
    """
    kappa, gamma, L0, L1, F0 = c["kappa"], c["gamma"], c["L0"], c["L1"], c["F0"]
    rho, beta = float(p["rho"]), float(p["beta"])
    c_floor, c_K = float(p["c_floor"]), float(p["c_K"])
    nsr = n * math.sqrt(rho)
    a = (1.0 / F0) ** ((2.0 - kappa) / kappa) * gamma**2 * L1
    shrink = 1.0 + 1.0 / (c_K * a)  # c, line 2
    K_real = (1.0 + c_K * a) * (math.log(F0) + kappa * math.log(nsr / (gamma * L0 * math.sqrt(d))))
    if K_real <= 0:  # line 3 gives no round: the noise exceeds what F0 leaves to gain
        return None
    K = math.ceil(K_real)  # line 3 is real-valued; the proof needs K >= it (line 183)
    beta_p = (beta / K) * (gamma * L0 * math.sqrt(K * d) / (nsr * F0 ** (1.0 / kappa))) ** (
        2.0 - kappa)  # beta', line 3
    log_b = math.log(1.0 / beta_p)
    floor = F0 if log_b <= 0 else min(
        (c_floor * gamma * L0 * math.sqrt(K * d * log_b) / nsr) ** kappa, F0)  # line 6
    phi = np.empty(K)
    prev = F0  # Phi_0 = F0, line 1
    for k in range(K):
        prev = max(prev / shrink, floor)  # line 6
        phi[k] = prev
    T = (F0 / phi) ** ((2.0 - kappa) / kappa)  # line 7
    if integer_T:
        T = np.ceil(T - 1e-9)
    root = phi ** (1.0 / kappa)
    return SpiderSchedule(
        K=K, phi=phi, T=T,
        step=root / (4.0 * gamma * L1),
        threshold=7.0 * root / (8.0 * gamma),
        sigma_full=L0 * math.sqrt(K) / nsr,  # line 4
        sigma_diff=root * np.sqrt(T * K) / (gamma * nsr),  # line 7
        floor=floor,
    )


def sound_noise_factor(s: SpiderSchedule, p: Mapping[str, Any], c: Mapping[str, float],
                       n: int) -> float:
    """The factor on every noise scale that makes the worst case cost exactly rho.

    Worst case over the schedule: K full gradients and ``T_k - 1`` differences in round k,
    each a Gaussian release costing ``Delta^2 / (2 sigma^2)`` (Bun and Steinke 2016,
    Prop 1.6), composed additively (Lemma 2.3).
    """
    rel = str(p["relation"])
    d_full = mean_sensitivity(c["L0"], rel, n)
    d_diff = np.array([mean_sensitivity(c["L1"] * st, rel, n) for st in s.step])
    worst = s.K * d_full**2 / (2.0 * s.sigma_full**2) + float(
        np.sum((s.T - 1.0) * d_diff**2 / (2.0 * s.sigma_diff**2)))
    return math.sqrt(worst / float(p["rho"]))


def kl_spider(*, sound: bool):
    """Algorithm 1 as a ``run(cur, setting, params)`` function."""

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        xp = cur.xp
        c = constants(setting, smooth=True)
        n, d = cur.n, cur.d
        W = start(cur, setting)
        sched = spider_schedule(p, c, n, d, integer_T=sound)
        if sched is None:
            return W
        K_trials = cur.trials
        if sound:
            factor = sound_noise_factor(sched, p, c, n)
            rel = str(p["relation"])
            sens_full = mean_sensitivity(c["L0"], rel, n)
            clip = c["L0"]
        else:
            factor = 1.0
            sens_full = c["L0"] / n  # Lemma 8, line 406
            clip = None
        for k in range(sched.K):
            cur.step(k)
            step_len = float(sched.step[k])
            thr = float(sched.threshold[k])
            T_k = float(sched.T[k])
            sig_k = float(sched.sigma_diff[k]) * factor
            if sound:
                sens_diff = mean_sensitivity(c["L1"] * step_len, str(p["relation"]), n)
                diff_clip = c["L1"] * step_len
                max_steps = int(T_k)  # t < T_k
            else:
                # eta_{k,t} L1 ||grad_{k,t}|| / n (Lemma 8, line 406)
                sens_diff = float(sched.phi[k]) ** (1.0 / c["kappa"]) / (4.0 * c["gamma"] * n)
                diff_clip = None
                max_steps = math.floor(T_k) + 1  # t = 0, 1, ..., floor(T_k): "t <= T_k"
            g = cur.gaussian("full_grad", grad_query(cur, setting, W, clip=clip, guard=sound),
                             sensitivity=sens_full, noise_std=sched.sigma_full * factor)
            running = to_numpy(cur, xp.linalg.vector_norm(g, axis=1)) >= thr  # line 10
            prev = W
            t = 0
            # Every trial's noise stream advances the same way whatever the others do (a
            # trial runs the same alone as in a batch): the loop walks all max_steps steps,
            # and a trial that has stopped takes no step and ignores its (masked) release.
            while t < max_steps:
                run_b = xp.reshape(cur.backend.asarray(running.astype(float)), (K_trials, 1))
                gnorm = xp.linalg.vector_norm(g, axis=1, keepdims=True)
                safe = xp.where(gnorm > 0, gnorm, xp.ones_like(gnorm))
                W_new = W - run_b * step_len * g / safe  # lines 11-12
                prev = run_b * W + (1.0 - run_b) * prev
                last = t + 1 >= max_steps
                if not (sound and last):  # the sound variant skips the unused last difference
                    D = cur.gaussian(
                        "grad_diff",
                        diff_query(cur, setting, W_new, W, clip=clip, diff_clip=diff_clip,
                                   guard=sound, active=running),
                        sensitivity=sens_diff, noise_std=sig_k,
                    )  # line 13
                    g = g + run_b * D  # line 14
                W = W_new
                t += 1
                running = running & (to_numpy(cur, xp.linalg.vector_norm(g, axis=1)) >= thr)
            if not sound:
                W = prev  # w_{k+1,0} = w_{k,t-1} (line 17); w_{k,0} when no step was taken
        return W

    return run
