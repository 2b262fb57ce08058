"""DP-SGDA, the single-loop baseline of paper 003 (Section 3, line 152; Figure 1, line 338).

The paper gives no pseudocode; the standard form (notes, Baselines; Yang et al. 2022):
x_{t+1} = x_t - eta_x (g_x + noise), y_{t+1} = P_Y(y_t + eta_y (g_y + noise)), with g the
minibatch mean of per-sample clipped joint gradients at (x_t, y_t).

``paper``: the privacy setting of Appendix D (line 889): per-sample clipping at C,
fixed-size minibatches of B, sensitivity 2C/B, and per-query noise from Definition 3
(line 63) at the (eps0, delta0) that advanced composition over the T queries allots.
``sound``: Poisson-sampled batches of expected size B, the same clipping, and a noise
multiplier calibrated by the PLD accountant for the T sampled releases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from algorithms.baselines import project_rows
from algorithms.paper003.common import (
    advanced_composition_epsilon,
    def3_sigma,
    sum_sensitivity,
)
from algorithms.paper003.problems import joint_sum, setting_of
from dpverify.accounting.accountant import calibrate_gaussian
from dpverify.core.curator import Curator
from dpverify.core.registry import Setting


def paper_sigma(p: Mapping[str, Any], B: int) -> tuple[float, float]:
    """(sensitivity, noise std) of one query as Appendix D sets them (line 889).

    Examples
    --------
    >>> sens, std = paper_sigma({"epsilon": 2.0, "delta": 1e-6, "T": 100, "clip": 1.0}, 50)
    >>> sens, round(std / sens, 2)
    (0.04, 126.23)
    """
    e0, d0 = advanced_composition_epsilon(float(p["epsilon"]), float(p["delta"]), int(p["T"]))
    sens = 2.0 * float(p["clip"]) / B
    return sens, def3_sigma(sens, e0, d0)


def dp_sgda(*, sound: bool):
    """DP-SGDA as a ``run(cur, setting, params)`` function; returns x_T (trials, d1)."""

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        s = setting_of(setting)
        xp, model = cur.xp, s.model
        T, clip = int(p["T"]), float(p["clip"])
        B = min(int(p["B"]), cur.n)
        eta_x, eta_y = float(p["eta_x"]), float(p["eta_y"])
        if sound:
            rate = B / cur.n
            sens = sum_sensitivity(clip, str(p["relation"])) / B
            z = calibrate_gaussian(target_epsilon=float(p["epsilon"]),
                                   target_delta=float(p["delta"]), steps=T,
                                   sampling_probability=rate if rate < 1 else None,
                                   relation=str(p["relation"]))
            std = z * sens
        else:
            sens, std = paper_sigma(p, B)
        x = cur.backend.asarray(np.repeat(np.asarray(s.x0, float)[None], cur.trials, axis=0))
        y = cur.backend.asarray(np.zeros((cur.trials, s.d2)))
        for t in range(T):
            cur.step(t)
            if sound:
                batch = cur.sample("poisson", rate=B / cur.n) if B < cur.n else cur.full_batch()
            else:
                batch = cur.sample("uniform_without_replacement", size=B)
            g = cur.gaussian(
                "grad", lambda X, yl, w, x=x, y=y: joint_sum(model, xp, X, w, x, y, clip) / B,
                sensitivity=sens, noise_std=std, batch=batch)
            x = x - eta_x * g[:, : s.d1]
            y = y + eta_y * g[:, s.d1 :]
            if s.y_radius is not None:
                y = project_rows(xp, y, s.y_radius)
        return x

    return run
