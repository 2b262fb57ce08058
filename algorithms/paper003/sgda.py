"""DP-SGDA, the single-loop baseline of paper 003 (Section 3, line 152; Figure 1, line 338).

The paper gives no pseudocode; the standard form (notes, Baselines; Yang et al. 2022):
x_{t+1} = x_t - eta_x (g_x + noise), y_{t+1} = P_Y(y_t + eta_y (g_y + noise)), with g the
minibatch mean of per-sample clipped joint gradients at (x_t, y_t).

``paper``: the privacy setting of Appendix D (line 889): per-sample clipping at C,
fixed-size minibatches of B, sensitivity 2C/B, and per-query noise from Definition 3
(line 63) at the (eps0, delta0) that advanced composition over the T queries allots.
``sound``: Poisson-sampled batches of expected size B, the same clipping, and a noise
multiplier calibrated by the PLD accountant for the T sampled releases. The two differ only
in their :class:`NoiseRule` (:data:`PAPER_RULE`, :data:`SOUND_RULE`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
from dpverify.core.curator import Batch, Curator
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


def _printed_noise(p: Mapping[str, Any], B: int, n: int) -> tuple[float, float]:
    """:func:`paper_sigma`: fixed-size batches, so n does not enter (line 889)."""
    return paper_sigma(p, B)


def pld_noise(p: Mapping[str, Any], B: int, n: int) -> tuple[float, float]:
    """(sensitivity, noise std) of one query on a Poisson batch of rate B/n (a full batch
    when B = n), the multiplier calibrated by PLD for the T releases.

    Examples
    --------
    >>> sens, std = pld_noise({"epsilon": 2.0, "delta": 1e-6, "T": 100, "clip": 1.0,
    ...                        "relation": "replace_one"}, 50, 400)
    >>> sens, bool(std / sens < 126.23)  # below Appendix D's multiplier
    (0.04, True)
    """
    rate = B / n
    sens = sum_sensitivity(float(p["clip"]), str(p["relation"])) / B
    z = calibrate_gaussian(target_epsilon=float(p["epsilon"]),
                           target_delta=float(p["delta"]), steps=int(p["T"]),
                           sampling_probability=rate if rate < 1 else None,
                           relation=str(p["relation"]))
    return sens, z * sens


def _fixed_batch(cur: Curator, B: int) -> Batch:
    """B records uniformly without replacement (Appendix D, line 889)."""
    return cur.sample("uniform_without_replacement", size=B)


def _poisson_batch(cur: Curator, B: int) -> Batch:
    """A Poisson batch of rate B/n, or the full data when B = n."""
    return cur.sample("poisson", rate=B / cur.n) if B < cur.n else cur.full_batch()


@dataclass(frozen=True)
class NoiseRule:
    """What the variants differ in: ``noise(p, B, n)`` gives the (sensitivity, noise std)
    of every query, ``batch(cur, B)`` draws its batch."""

    name: str
    noise: Callable[[Mapping[str, Any], int, int], tuple[float, float]]
    batch: Callable[[Curator, int], Batch]


PAPER_RULE = NoiseRule("paper", _printed_noise, _fixed_batch)  # Appendix D (line 889)
SOUND_RULE = NoiseRule("sound", pld_noise, _poisson_batch)  # notes, Baselines; PLD


def dp_sgda(rule: NoiseRule):
    """DP-SGDA under ``rule`` as a ``run(cur, setting, params)`` function; returns x_T
    (trials, d1).

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> from dpverify.execution.trials import build_problem
    >>> t = resolve("dp_sgda:paper"); p = t.algorithm.params("paper", {"T": 3})
    >>> prob = build_problem(t, p, 0)
    >>> cur = Curator(prob.data, trials=2, rng=0)
    >>> dp_sgda(PAPER_RULE)(cur, prob.setting(), p).shape, len(cur.ledger)
    ((2, 3), 3)
    """

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        s = setting_of(setting)
        xp, model = cur.xp, s.model
        T, clip = int(p["T"]), float(p["clip"])
        B = min(int(p["B"]), cur.n)
        eta_x, eta_y = float(p["eta_x"]), float(p["eta_y"])
        sens, std = rule.noise(p, B, cur.n)
        x = cur.backend.asarray(np.repeat(np.asarray(s.x0, float)[None], cur.trials, axis=0))
        y = cur.backend.asarray(np.zeros((cur.trials, s.d2)))
        for t in range(T):
            cur.step(t)
            g = cur.gaussian(
                "grad", lambda X, yl, w, x=x, y=y: joint_sum(model, xp, X, w, x, y, clip) / B,
                sensitivity=sens, noise_std=std, batch=rule.batch(cur, B))
            x = x - eta_x * g[:, : s.d1]
            y = y + eta_y * g[:, s.d1 :]
            if s.y_radius is not None:
                y = project_rows(xp, y, s.y_radius)
        return x

    return run
