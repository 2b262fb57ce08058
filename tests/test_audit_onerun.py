"""One-run audit (Steinke, Nasr, Jagielski 2023): the p-value, the bound, the audit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sstats

from dpverify.checks.audit import (
    OneRunOptions,
    audit_onerun,
    epsilon_one_run,
    one_run_bound,
    one_run_p_value,
)
from dpverify.core.errors import InputError


def reference_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """The paper's Appendix D code, loop for loop."""
    q = 1 / (1 + math.exp(-eps))
    beta = sstats.binom.sf(v - 1, r, q)
    alpha, total = 0.0, 0.0
    for i in range(1, v + 1):
        total += sstats.binom.pmf(v - i, r, q)
        if total > i * alpha:
            alpha = total / i
    return min(beta + alpha * delta * 2 * m, 1.0)


@pytest.mark.parametrize("m,r,v,eps,delta", [
    (1000, 100, 90, 1.2, 1e-5), (1000, 100, 90, 1.7, 1e-2), (50, 40, 30, 0.5, 0.01),
    (10, 4, 0, 1.0, 0.1), (500, 500, 260, 0.1, 1e-6), (20, 20, 20, 3.0, 0.0),
])
def test_p_value_matches_the_papers_code(m: int, r: int, v: int, eps: float,
                                         delta: float) -> None:
    assert one_run_p_value(m, r, v, eps, delta) == pytest.approx(
        reference_p_value(m, r, v, eps, delta), rel=1e-12, abs=1e-15)


def test_epsilon_one_run_is_the_largest_refuted_epsilon() -> None:
    eps = epsilon_one_run(1000, 200, 170, 1e-5, 0.05)
    assert one_run_p_value(1000, 200, 170, eps, 1e-5) < 0.05
    assert one_run_p_value(1000, 200, 170, eps + 1e-6, 1e-5) >= 0.05 - 1e-9
    assert epsilon_one_run(1000, 200, 100, 1e-5, 0.05) == 0.0
    # more correct guesses never lower the bound
    bounds = [epsilon_one_run(1000, 200, v, 1e-5, 0.05) for v in (120, 150, 180, 200)]
    assert bounds == sorted(bounds)
    with pytest.raises(InputError, match="v <= r <= m"):
        one_run_p_value(10, 20, 5, 1.0, 0.0)


@pytest.mark.statistical
def test_null_canaries_keep_alpha() -> None:
    """Scores independent of membership: a bound above 0 must be rare.

    Under the null the data reveal nothing, so P(epsilon_lower > 0) <= alpha = 0.2 per
    run. Fixed seed, 200 runs of 400 canaries; the test fails when the positive bounds
    exceed the count a rate of 0.2 exceeds with probability 1e-4 (failure probability).
    """
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(200):
        inc = rng.random(400) < 0.5
        res = one_run_bound(rng.normal(size=400), inc, delta=1e-5, alpha=0.2,
                            guesses=[40, 400])
        hits += res["epsilon"] > 0
    limit = int(sstats.binom.isf(1e-4, 200, 0.2))
    assert hits <= limit


def test_separated_canaries_give_a_large_bound() -> None:
    rng = np.random.default_rng(1)
    inc = rng.random(2000) < 0.5
    res = one_run_bound(np.where(inc, 10.0, -10.0) + rng.normal(size=2000), inc,
                        delta=1e-6, alpha=0.05)
    assert res["epsilon"] > 3.0 and res["v"] >= 0.99 * res["r"]


def test_onerun_audit_of_sound_and_planted_noisy_gd() -> None:
    params = {"loss": "linear", "n": 50, "d": 300, "T": 4}
    sound = audit_onerun("noisy_gd:sound", OneRunOptions(
        canaries=300, params=params, scores="releases"))
    assert sound.verdict.value == "PASS" and sound.trials == 1
    assert sound.epsilon_accountant == pytest.approx(1.0, rel=1e-3)
    bad = audit_onerun("noisy_gd:planted_mean_noise_on_sum", OneRunOptions(
        canaries=300, params=params,
        scores="releases"))
    assert bad.verdict.value == "FAIL"
    assert bad.details["correct"] > 0.9 * bad.details["guesses"]


def test_onerun_needs_an_output_in_data_space() -> None:
    with pytest.raises(InputError, match="data dimension"):
        audit_onerun("gaussian_mechanism:sound_two_releases", OneRunOptions(
            canaries=20, params={"d": 3},
            scores="output"))
    with pytest.raises(InputError, match="scores"):
        audit_onerun("noisy_gd:sound", OneRunOptions(scores="gradients"))
