"""Baselines: noisy full-batch gradient descent and DP-SGD, sound and with planted bugs.

Both are one method, :func:`noisy_gradient_method`: T noisy releases of the sum of
per-sample clipped gradients, on the batches the curator draws (every record for noisy
GD, Poisson samples for DP-SGD). The planted variants each break one thing the privacy
proof relies on; the harness must catch every one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from algorithms.problems import clipped_grad_sum, make_glm_problem
from dpverify.accounting import calibrate_gaussian
from dpverify.claims import Finding, PrivacyClaim, UtilityClaim
from dpverify.curator import Batch, Curator
from dpverify.registry import Algorithm, Problem, Variant


def l2_sensitivity_of_sum(clip: float, relation: str) -> float:
    """L2 sensitivity of a sum of per-sample vectors clipped to norm ``clip``.

    One record moves the sum by at most ``clip`` when it is added or removed, and by at
    most ``2 clip`` when it is replaced (triangle inequality).
    """
    return clip if relation == "add_remove" else 2.0 * clip


def project_rows(xp: Any, theta: Any, radius: float) -> Any:
    """Project each trial's iterate onto the ball of ``radius``."""
    nrm = xp.linalg.vector_norm(theta, axis=1, keepdims=True)
    return theta * xp.where(nrm > radius, radius / xp.where(nrm > radius, nrm, 1.0), 1.0)


def noisy_gradient_method(
    cur: Curator,
    problem: Problem,
    p: Mapping[str, Any],
    batches: Iterable[Batch],
    *,
    noise_multiplier: float,
    divisor: float,
    declared_sensitivity: float,
    clip: float | None,
    guard_nonfinite: bool = True,
) -> Any:
    """Projected gradient steps on noisy sums of clipped per-sample gradients.

    theta_{t+1} = Proj_R(theta_t - eta (g_t / divisor + lam theta_t)), with g_t the sum of
    clipped gradients over batch t plus N(0, (noise_multiplier * declared_sensitivity)^2).
    The regularizer is data-independent and needs no noise.
    """
    xp = cur.xp
    theta = cur.backend.asarray(np.zeros((cur.trials, cur.d)))
    eta, lam, radius = float(p["eta"]), float(p["lam"]), float(p["radius"])
    for t, batch in enumerate(batches):
        cur.step(t)
        g = cur.gaussian(
            "grad_sum",
            clipped_grad_sum(cur, problem.loss, theta, clip, guard_nonfinite=guard_nonfinite),
            sensitivity=declared_sensitivity,
            noise_std=noise_multiplier * declared_sensitivity,
            batch=batch,
        )
        theta = project_rows(xp, theta - eta * (g / divisor + lam * theta), radius)
    return theta


def _claim(p: Mapping[str, Any]) -> PrivacyClaim:
    return PrivacyClaim(epsilon=float(p["epsilon"]), delta=float(p["delta"]),
                        relation=str(p["relation"]))


# Noisy full-batch GD ------------------------------------------------------------------

# Bassily, Smith and Thakurta 2014, Theorem 2.4 (strongly convex case): excess empirical
# risk O(L^2 d log(1/delta) / (lam n^2 epsilon^2)) up to log n factors, once T is large
# enough for the optimisation error to fall below the noise.
NOISY_GD_UTILITY = UtilityClaim(
    quantity="excess_risk",
    exponents={"n": -2.0, "d": 1.0, "epsilon": -2.0},
    log_factors=("log(1/delta)",),
    sided="upper",
    regime=("n*epsilon >= sqrt(d)",),
    source="Bassily, Smith, Thakurta 2014, Theorem 2.4",
)


def _gd_sigma(p: Mapping[str, Any], steps: int) -> float:
    return calibrate_gaussian(target_epsilon=float(p["epsilon"]), target_delta=float(p["delta"]),
                              steps=steps, relation=str(p["relation"]))


def _gd_run(*, steps_counted: str = "all", clip_on: bool = True, noise_for_mean: bool = False):
    def run(cur: Curator, problem: Problem, p: Mapping[str, Any]) -> Any:
        T = int(p["T"])
        counted = T if steps_counted == "all" else max(1, T // 2)
        sigma = _gd_sigma(p, counted)
        sens = l2_sensitivity_of_sum(float(p["clip"]), str(p["relation"]))
        if noise_for_mean:
            sens = sens / cur.n  # the mean's sensitivity, declared for the sum
        batches = (cur.full_batch() for _ in range(T))
        return noisy_gradient_method(
            cur, problem, p, batches, noise_multiplier=sigma, divisor=cur.n,
            declared_sensitivity=sens, clip=float(p["clip"]) if clip_on else None,
        )

    return run


NOISY_GD = Algorithm(
    name="noisy_gd",
    source="baseline (Bassily, Smith, Thakurta 2014)",
    description="Projected noisy full-batch gradient descent on a regularized GLM",
    make_problem=make_glm_problem,
    defaults={
        "n": 500, "d": 5, "loss": "logistic", "lam": 0.1, "radius": 10.0,
        "T": 50, "eta": 1.0, "clip": 1.0, "epsilon": 1.0, "delta": 1e-5,
        "relation": "add_remove",
    },
    variants={
        "sound": Variant(
            "sound", "sound", _gd_run(), _claim,
            "Per-sample clipping; sigma calibrated by PLD for T Gaussian releases",
            utility=NOISY_GD_UTILITY,
        ),
        "planted_mean_noise_on_sum": Variant(
            "planted_mean_noise_on_sum", "planted", _gd_run(noise_for_mean=True), _claim,
            "Noise scaled for the mean (sensitivity C/n) added to the sum",
            findings=(Finding("noise n times too small: declared sensitivity C/n for a sum "
                              "whose sensitivity is C", detected_by=("sensitivity", "audit")),),
        ),
        "planted_no_clip": Variant(
            "planted_no_clip", "planted", _gd_run(clip_on=False), _claim,
            "Per-sample gradients are not clipped",
            findings=(Finding("an outlier record moves the sum beyond the declared C",
                              detected_by=("sensitivity", "audit")),),
        ),
        "planted_half_steps": Variant(
            "planted_half_steps", "planted", _gd_run(steps_counted="half"), _claim,
            "The accountant counts half of the T releases",
            findings=(Finding("sigma calibrated for T/2 releases; T are made",
                              detected_by=("account", "audit")),),
        ),
    },
    quick={},
    thorough={"T": 100},
)


# DP-SGD -------------------------------------------------------------------------------

# Abadi et al. 2016, Algorithm 1, with Poisson sampling as its moments accountant assumes.
def _sgd_run(*, steps_counted: str = "all", clip_on: bool = True, noise_for_mean: bool = False,
             shuffle: bool = False):
    def run(cur: Curator, problem: Problem, p: Mapping[str, Any]) -> Any:
        T, q = int(p["T"]), float(p["q"])
        counted = T if steps_counted == "all" else max(1, T // 2)
        sigma = calibrate_gaussian(
            target_epsilon=float(p["epsilon"]), target_delta=float(p["delta"]), steps=counted,
            sampling_probability=q, relation=str(p["relation"]),
        )
        sens = l2_sensitivity_of_sum(float(p["clip"]), str(p["relation"]))
        expected_batch = q * cur.n
        if noise_for_mean:
            sens = sens / expected_batch
        if shuffle:
            size = max(1, int(round(expected_batch)))

            def shuffled() -> Iterable[Batch]:
                made = 0
                while made < T:
                    for b in cur.epoch(size):
                        if made == T:
                            return
                        made += 1
                        yield b

            batches: Iterable[Batch] = shuffled()
        else:
            batches = (cur.sample("poisson", rate=q) for _ in range(T))
        return noisy_gradient_method(
            cur, problem, p, batches, noise_multiplier=sigma, divisor=expected_batch,
            declared_sensitivity=sens, clip=float(p["clip"]) if clip_on else None,
        )

    return run


DP_SGD = Algorithm(
    name="dp_sgd",
    source="baseline (Abadi et al. 2016)",
    description="DP-SGD: Poisson-sampled batches, per-sample clipping, Gaussian noise",
    make_problem=make_glm_problem,
    defaults={
        "n": 1000, "d": 5, "loss": "logistic", "lam": 0.01, "radius": 10.0,
        "T": 100, "q": 0.05, "eta": 0.5, "clip": 1.0, "epsilon": 1.0, "delta": 1e-5,
        "relation": "add_remove",
    },
    variants={
        "sound": Variant(
            "sound", "sound", _sgd_run(), _claim,
            "Poisson sampling, per-sample clipping, sigma calibrated by PLD for T sampled steps",
            utility=NOISY_GD_UTILITY,
        ),
        "planted_mean_noise_on_sum": Variant(
            "planted_mean_noise_on_sum", "planted", _sgd_run(noise_for_mean=True), _claim,
            "Noise scaled for the batch mean added to the batch sum",
            findings=(Finding("noise qn times too small", detected_by=("sensitivity", "audit")),),
        ),
        "planted_no_clip": Variant(
            "planted_no_clip", "planted", _sgd_run(clip_on=False), _claim,
            "Per-sample gradients are not clipped",
            findings=(Finding("unbounded sensitivity", detected_by=("sensitivity", "audit")),),
        ),
        "planted_half_steps": Variant(
            "planted_half_steps", "planted", _sgd_run(steps_counted="half"), _claim,
            "The accountant counts half of the T steps",
            findings=(Finding("sigma calibrated for T/2 steps", detected_by=("account",)),),
        ),
        "planted_shuffle_as_poisson": Variant(
            "planted_shuffle_as_poisson", "planted", _sgd_run(shuffle=True), _claim,
            "Shuffled fixed-size batches accounted as if Poisson-sampled",
            findings=(Finding("amplification by Poisson sampling claimed for shuffled batches",
                              detected_by=("account",)),),
        ),
    },
    quick={},
    thorough={"T": 200},
)

ALGORITHMS = [NOISY_GD, DP_SGD]
