"""Baselines: noisy full-batch gradient descent and DP-SGD, sound and with planted bugs.

Both are one method, :func:`noisy_gradient_method`: T noisy releases of the sum of
per-sample clipped gradients, on the batches the curator draws (every record for noisy
GD, Poisson samples for DP-SGD). The planted variants each break one thing the privacy
proof relies on; the harness must catch every one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from algorithms.losses import LOSSES
from algorithms.problems import clipped_grad_sum, make_glm_problem
from dpverify.accounting.accountant import calibrate_gaussian
from dpverify.core.claims import Finding, PrivacyClaim, UtilityClaim
from dpverify.core.curator import Batch, Curator
from dpverify.core.ranges import NONNEGATIVE, POSITIVE, RATE, one_of
from dpverify.core.registry import Algorithm, Battery, CheckConfig, Problem, Setting, Variant


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
    setting: Setting,
    p: Mapping[str, Any],
    batches: Iterable[Batch],
    *,
    noise_multiplier: float,
    divisor: float,
    declared_sensitivity: float,
    query: Callable[[Curator, Problem, Any], Any] | None = None,
) -> Any:
    """Projected gradient steps on noisy sums of clipped per-sample gradients.

    theta_{t+1} = Proj_R(theta_t - eta (g_t / divisor + lam theta_t)), with g_t the answer
    of ``query`` (by default the sum of per-sample gradients clipped to ``p["clip"]``) over
    batch t plus N(0, (noise_multiplier * declared_sensitivity)^2). The regularizer is
    data-independent and needs no noise.
    """
    xp = cur.xp
    theta = cur.backend.asarray(np.zeros((cur.trials, cur.d)))
    eta, lam, radius = float(p["eta"]), float(p["lam"]), float(p["radius"])
    if query is None:
        query = lambda c, setting, th: clipped_grad_sum(c, setting.loss, th, float(p["clip"]))  # noqa: E731
    for t, batch in enumerate(batches):
        cur.step(t)
        g = cur.gaussian(
            "grad_sum",
            query(cur, setting, theta),
            sensitivity=declared_sensitivity,
            noise_std=noise_multiplier * declared_sensitivity,
            batch=batch,
        )
        theta = project_rows(xp, theta - eta * (g / divisor + lam * theta), radius)
    return theta


# Planted bugs in the gradient query. Each returns (query builder, declared sensitivity,
# divisor) given the sound sensitivity of the clipped sum and the public normaliser m
# (n for full batches, q n for Poisson batches).
def _bugged_query(bug: str, p: Mapping[str, Any], sens: float, m: float):
    clip = float(p["clip"])
    if bug == "none":
        return None, sens, m
    if bug == "no_clip":
        return (lambda c, setting, th: clipped_grad_sum(c, setting.loss, th, None)), sens, m
    if bug == "nan_passes":
        return (lambda c, setting, th: clipped_grad_sum(c, setting.loss, th, clip,
                                                     guard_nonfinite=False)), sens, m
    if bug == "mean_noise_on_sum":
        return None, sens / m, m  # the mean's sensitivity declared for the sum
    if bug == "clipped_mean":
        # Clip the batch mean of raw gradients instead of each sample, and declare the
        # sensitivity per-sample clipping of the mean would have had.
        def q_mean(c: Curator, setting: Setting, th: Any) -> Any:
            raw = clipped_grad_sum(c, setting.loss, th, None)
            xp = c.xp

            def query(X: Any, y: Any, w: Any) -> Any:
                g = raw(X, y, w) / m
                nrm = xp.linalg.vector_norm(g, axis=1, keepdims=True)
                return g * xp.where(nrm > clip, clip / xp.where(nrm > clip, nrm, 1.0), 1.0)

            return query

        return q_mean, sens / m, 1.0
    if bug == "divide_by_count":
        # Mean over the records actually present: under add/remove the divisor is private.
        def q_count(c: Curator, setting: Setting, th: Any) -> Any:
            s = clipped_grad_sum(c, setting.loss, th, clip)
            xp = c.xp
            return lambda X, y, w: s(X, y, w) / xp.maximum(xp.sum(w, axis=1, keepdims=True),
                                                           xp.ones_like(w[:, :1]))

        return q_count, sens / m, 1.0
    if bug == "data_clip":
        # The clip threshold is the largest gradient norm of the batch: no clipping at all,
        # while the noise is scaled to the nominal threshold.
        def q_data(c: Curator, setting: Setting, th: Any) -> Any:
            xp, backend = c.xp, c.backend

            def query(X: Any, y: Any, w: Any) -> Any:
                coef = backend.glm_coefficients(setting.loss, th @ X.T, y)
                norms = xp.abs(coef) * xp.linalg.vector_norm(X, axis=1)
                data_clip = xp.max(xp.where(w > 0, norms, xp.zeros_like(norms)), axis=1,
                                   keepdims=True)
                factor = xp.where(norms > data_clip,
                                  data_clip / xp.where(norms > 0, norms, 1.0), 1.0)
                return (w * coef * factor) @ X

            return query

        return q_data, sens, m
    if bug == "replace_sensitivity_L":
        return None, sens / 2.0, m  # under replace-one the clipped sum moves by 2C, not C
    raise ValueError(f"unknown planted bug {bug!r}")


def _claim(p: Mapping[str, Any]) -> PrivacyClaim:
    return PrivacyClaim(epsilon=float(p["epsilon"]), delta=float(p["delta"]),
                        relation=str(p["relation"]))


# Conformance-battery declarations -------------------------------------------------------

#: Black-box audit instance: with lam = 0 and a radius never reached, x_T is x_0 minus
#: eta/n times the sum of every noisy release, a sufficient statistic of the transcript's
#: mean shift, so the black-box adversary sees what the white-box one does (the default
#: lam = 0.1 forgets early releases geometrically).
_SUFFICIENT = {"lam": 0.0, "radius": 1000.0}
_WHITEBOX = CheckConfig(
    options={"confidence": 0.999}, thorough={"trials": 4000},
    description="white-box replay on the worst-case canary (linear loss): the sound "
                "variant is tight there, so confidence 0.999 keeps its false alarms rare")
_BLACKBOX = CheckConfig(params=_SUFFICIENT, description="black-box audit of x_T, lam = 0")
_BASE_BATTERY = Battery(checks={"audit.whitebox": _WHITEBOX, "audit.blackbox": _BLACKBOX})


def _outlier_audits(why: str) -> Battery:
    """Both audits on the outlier canary (norm 100) and the linear loss, whose gradient
    keeps that norm: the worst-case canary sits at the clip, where ``why`` changes nothing."""
    desc = f"the outlier canary, linear loss: {why}"
    opts = {"neighbours": "outlier"}
    return Battery(checks={
        # the outlier moves each release 100 times its declared bound: 200 trials show it
        "audit.whitebox": CheckConfig(params={"loss": "linear"},
                                      options={**opts, "trials": 200},
                                      thorough={"trials": 1000},
                                      description=desc).over(_WHITEBOX),
        "audit.blackbox": CheckConfig(params={"loss": "linear"}, options=opts,
                                      description=desc).over(_BLACKBOX)})


# Noisy full-batch GD ------------------------------------------------------------------

# Bassily, Smith and Thakurta 2014, Theorem 2.4 (strongly convex case): excess empirical
# risk O(L^2 d log(1/delta) / (lam n^2 epsilon^2)) up to log n factors, once T is large
# enough for the optimisation error to fall below the noise.
NOISY_GD_UTILITY = UtilityClaim.private_rate(
    "excess_risk", 2, regime=("n*epsilon >= sqrt(d)",),
    source="Bassily, Smith, Thakurta 2014, Theorem 2.4",
)


def _gd_sigma(p: Mapping[str, Any], steps: int) -> float:
    return calibrate_gaussian(target_epsilon=float(p["epsilon"]), target_delta=float(p["delta"]),
                              steps=steps, relation=str(p["relation"]))


def _gd_run(*, steps_counted: str = "all", bug: str = "none", noise_growth: bool = False):
    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        T = int(p["T"])
        counted = T if steps_counted == "all" else max(1, T // 2)
        sigma = _gd_sigma(p, counted)
        if noise_growth:
            sigma *= max(1.0, math.sqrt(cur.n / 100.0))  # more noise than needed, growing with n
        sens = l2_sensitivity_of_sum(float(p["clip"]), str(p["relation"]))
        query, declared, divisor = _bugged_query(bug, p, sens, float(cur.n))
        batches = (cur.full_batch() for _ in range(T))
        return noisy_gradient_method(
            cur, setting, p, batches, noise_multiplier=sigma, divisor=divisor,
            declared_sensitivity=declared, query=query,
        )

    return run


def _logged_loss_run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
    """Noisy GD that also returns its training loss, computed from the records its last
    gradient query was handed and kept: data that reaches the output through no release."""
    kept: list[Any] = []

    def keeping(c: Curator, s: Setting, th: Any) -> Any:
        grad = clipped_grad_sum(c, s.loss, th, float(p["clip"]))

        def query(X: Any, y: Any, w: Any) -> Any:
            kept[:] = [X, y]
            return grad(X, y, w)

        return query

    T = int(p["T"])
    theta = noisy_gradient_method(
        cur, setting, p, (cur.full_batch() for _ in range(T)),
        noise_multiplier=_gd_sigma(p, T), divisor=float(cur.n),
        declared_sensitivity=l2_sensitivity_of_sum(float(p["clip"]), str(p["relation"])),
        query=keeping)
    X, y = kept
    xp = cur.xp
    loss = xp.mean(setting.loss.value(theta @ X.T, y, xp), axis=1)
    return xp.concat([theta, loss[:, None]], axis=1)


#: The values the GLM baselines' parameters take (n, d, T, epsilon, delta: the conventions').
GLM_RANGES = {"loss": one_of(*LOSSES), "lam": NONNEGATIVE, "radius": POSITIVE,
              "eta": POSITIVE, "clip": POSITIVE}

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
    ranges=GLM_RANGES,
    variants={
        "sound": Variant(
            "sound", "sound", _gd_run(), _claim,
            "Per-sample clipping; sigma calibrated by PLD for T Gaussian releases",
            utility=NOISY_GD_UTILITY,
        ),
        "planted_mean_noise_on_sum": Variant(
            "planted_mean_noise_on_sum", "planted", _gd_run(bug="mean_noise_on_sum"), _claim,
            "Noise scaled for the mean (sensitivity C/n) added to the sum",
            findings=(Finding("noise n times too small: declared sensitivity C/n for a sum "
                              "whose sensitivity is C", detected_by=("sensitivity", "audit")),),
        ),
        "planted_no_clip": Variant(
            "planted_no_clip", "planted", _gd_run(bug="no_clip"), _claim,
            "Per-sample gradients are not clipped",
            findings=(Finding("an outlier record moves the sum beyond the declared C",
                              detected_by=("sensitivity", "audit")),),
            battery=_outlier_audits("an unclipped record moves the sum by its norm"),
        ),
        "planted_half_steps": Variant(
            "planted_half_steps", "planted", _gd_run(steps_counted="half"), _claim,
            "The accountant counts half of the T releases",
            findings=(Finding("sigma calibrated for T/2 releases; T are made",
                              detected_by=("account", "audit")),),
            battery=Battery(checks={"audit.blackbox": CheckConfig(
                expected="PASS",
                reason="T/2 counted steps raise epsilon from 1 to 1.47 (the ledger's), "
                       "which the white-box replay resolves; a Clopper-Pearson bound on "
                       "x_T at 2e4 trials detects only epsilon above 2.44, even with "
                       "x_T a sufficient statistic of the releases (lam = 0)")}),
        ),
        "planted_clipped_mean": Variant(
            "planted_clipped_mean", "planted", _gd_run(bug="clipped_mean"), _claim,
            "The batch mean of raw gradients is clipped instead of each sample",
            findings=(Finding("one outlier moves the clipped mean by up to 2C, declared C/n",
                              detected_by=("sensitivity", "audit")),),
            battery=_outlier_audits("the clipped mean moves by C, not C/n"),
        ),
        "planted_replace_sensitivity_L": Variant(
            "planted_replace_sensitivity_L", "planted", _gd_run(bug="replace_sensitivity_L"),
            _claim, "Under replace-one, sensitivity C declared for the clipped sum (it is 2C)",
            findings=(Finding("half the needed noise under replace-one",
                              detected_by=("sensitivity", "audit")),),
            params={"relation": "replace_one"},
        ),
        "planted_divide_by_count": Variant(
            "planted_divide_by_count", "planted", _gd_run(bug="divide_by_count"), _claim,
            "Divides by the actual number of records, which add/remove-one makes private",
            findings=(Finding("the mean over n+1 vs n records moves by up to 2C/(n+1), "
                              "declared C/n", detected_by=("sensitivity", "audit")),),
            battery=Battery(checks={"audit.blackbox": CheckConfig(
                expected="PASS",
                reason="on the worst-case canary the mean moves 7% more than declared "
                       "(replayed mu 0.287 against 0.268, epsilon about 1.08 against 1): "
                       "the white-box replay resolves it, while a Clopper-Pearson bound "
                       "on x_T at 2e4 trials detects only epsilon above 2.44")}),
        ),
        "planted_logged_loss": Variant(
            "planted_logged_loss", "planted", _logged_loss_run, _claim,
            "Returns the training loss beside the model, from records a query kept",
            # Not the white-box audit: it reads the releases alone, and they are sound.
            findings=(Finding("the training loss reaches the output through no release",
                              detected_by=("door", "sensitivity", "audit.blackbox")),),
        ),
        "planted_nan_passes": Variant(
            "planted_nan_passes", "planted", _gd_run(bug="nan_passes"), _claim,
            "A record holding NaN slips through clipping",
            findings=(Finding("non-finite records poison the release",
                              detected_by=("sensitivity", "audit")),),
            battery=Battery(checks={
                "audit.blackbox": CheckConfig(
                    options={"neighbours": "nonfinite", "trials": 2000},
                    thorough={"trials": 20000},
                    description="black-box audit on the non-finite canary: x_T is NaN on "
                                "D' and finite on D"),
                "audit.whitebox": CheckConfig(
                    expected="PASS",
                    reason="the white-box audit replays finite canaries: a transcript of "
                           "NaN has no privacy-loss density to evaluate, and on the "
                           "worst-case canary this variant is the sound one; the "
                           "black-box audit on the non-finite canary sees the leak")}),
        ),
        "planted_data_clip": Variant(
            "planted_data_clip", "planted", _gd_run(bug="data_clip"), _claim,
            "The clip threshold is computed from the data (the batch's largest gradient)",
            findings=(Finding("sensitivity follows the data, not the declared C",
                              detected_by=("sensitivity", "audit")),),
            battery=_outlier_audits("its own gradient becomes the threshold"),
        ),
        "planted_noise_grows_sqrt_n": Variant(
            "planted_noise_grows_sqrt_n", "planted", _gd_run(noise_growth=True), _claim,
            "Noise multiplier grows like sqrt(n): private, but misses the utility rate",
            utility=NOISY_GD_UTILITY,
            findings=(Finding("excess risk decays like 1/n instead of 1/n^2",
                              detected_by=("rate",)),),
        ),
    },
    quick={},
    thorough={"T": 100},
    battery=Battery({"n": 100, "T": 20}, _BASE_BATTERY.checks),
)


# DP-SGD -------------------------------------------------------------------------------

# Abadi et al. 2016, Algorithm 1, with Poisson sampling as its moments accountant assumes.
def _sgd_run(*, steps_counted: str = "all", bug: str = "none", shuffle: bool = False):
    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        T, q = int(p["T"]), float(p["q"])
        counted = T if steps_counted == "all" else max(1, T // 2)
        sigma = calibrate_gaussian(
            target_epsilon=float(p["epsilon"]), target_delta=float(p["delta"]), steps=counted,
            sampling_probability=q, relation=str(p["relation"]),
        )
        sens = l2_sensitivity_of_sum(float(p["clip"]), str(p["relation"]))
        expected_batch = q * cur.n
        query, declared, divisor = _bugged_query(bug, p, sens, expected_batch)
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
            cur, setting, p, batches, noise_multiplier=sigma, divisor=divisor,
            declared_sensitivity=declared, query=query,
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
    ranges={**GLM_RANGES, "q": RATE},
    variants={
        "sound": Variant(
            "sound", "sound", _sgd_run(), _claim,
            "Poisson sampling, per-sample clipping, sigma calibrated by PLD for T sampled steps",
            utility=NOISY_GD_UTILITY,
        ),
        "planted_mean_noise_on_sum": Variant(
            "planted_mean_noise_on_sum", "planted", _sgd_run(bug="mean_noise_on_sum"), _claim,
            "Noise scaled for the batch mean added to the batch sum",
            findings=(Finding("noise qn times too small", detected_by=("sensitivity", "audit")),),
            # In x_T the Poisson batches' own spread along the canary direction (about
            # sqrt(T q) s_min of the data) hides the canary's shift at rate 0.05.
            battery=Battery(checks={"audit.blackbox": CheckConfig(
                params={"q": 1.0},
                description="black-box audit of x_T at q = 1: the batches no longer vary, "
                            "and the noise is n times too small")}),
        ),
        "planted_no_clip": Variant(
            "planted_no_clip", "planted", _sgd_run(bug="no_clip"), _claim,
            "Per-sample gradients are not clipped",
            findings=(Finding("unbounded sensitivity", detected_by=("sensitivity", "audit")),),
            battery=_outlier_audits("an unclipped record moves the sum by its norm"),
        ),
        "planted_half_steps": Variant(
            "planted_half_steps", "planted", _sgd_run(steps_counted="half"), _claim,
            "The accountant counts half of the T steps",
            findings=(Finding("sigma calibrated for T/2 steps", detected_by=("account", "audit")),),
            battery=Battery(checks={"audit.blackbox": CheckConfig(
                expected="PASS",
                reason="T/2 counted steps raise epsilon from 1 to 1.24 (the ledger's), "
                       "which the white-box replay resolves; a Clopper-Pearson bound on "
                       "x_T at 2e4 trials detects only epsilon above 2.44")}),
        ),
        "planted_shuffle_as_poisson": Variant(
            "planted_shuffle_as_poisson", "planted", _sgd_run(shuffle=True), _claim,
            "Shuffled fixed-size batches accounted as if Poisson-sampled",
            findings=(Finding("amplification by Poisson sampling claimed for shuffled batches",
                              detected_by=("account", "audit")),),
            battery=Battery(checks={"audit.blackbox": CheckConfig(
                expected="PASS",
                reason="the white-box replay sees the step the canary is read in (epsilon "
                       "3.07 by the ledger); x_T holds only the sum of the T = 20 releases "
                       "(lam = 0), one epoch in which the canary is read once: mu = "
                       "1 / (sigma sqrt(T)) = 0.16 at sigma = 1.36, epsilon 0.58 at "
                       "delta 1e-5, so x_T itself meets the claim on this pair")}),
        ),
    },
    quick={},
    thorough={"T": 200},
    battery=Battery({"n": 200, "T": 20}, _BASE_BATTERY.checks),
)

ALGORITHMS = [NOISY_GD, DP_SGD]
