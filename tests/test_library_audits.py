"""Audits of real DP libraries through dpverify.adapters: diffprivlib and Opacus.

A PASS here is "no evidence of violation" for the library's documented configuration at
the test's fixed seed; a FAIL is expected only of misuses, of Opacus's known
normalization by the private dataset size, and of diffprivlib's floating-point noise.
Statistical tests state their failure probability; the audits' own error probability is
alpha = 0.05 at fixed seeds.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sstats

from dpverify.adapters import diffprivlib_targets as dt
from dpverify.checks.audit import audit
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError

DPL = "dpverify.adapters.diffprivlib_targets"
OPX = "dpverify.adapters.opacus_targets"
SUITE = Path(__file__).resolve().parents[1] / "suites" / "libraries.toml"


# diffprivlib -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dpl():
    try:
        return dt.load_diffprivlib()
    except ModuleNotFoundError:
        pytest.skip("diffprivlib is not installed (pip install dpverify[libraries])")


def test_diffprivlib_imports_and_its_analytic_gaussian_matches_ours(dpl) -> None:
    """diffprivlib's Balle-Wang calibration against dpverify's PLD calibration."""
    from dpverify.accounting.accountant import calibrate_gaussian

    mech = dpl.mechanisms.GaussianAnalytic(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    ours = calibrate_gaussian(target_epsilon=1.0, target_delta=1e-5)
    assert mech._scale == pytest.approx(ours, rel=2e-3)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
def test_classic_gaussian_is_valid_where_diffprivlib_allows_it(dpl, eps: float,
                                                                delta: float) -> None:
    """sqrt(2 ln(1.25/delta)) / eps meets (eps, delta) exactly (dp_accounting) for eps <= 1."""
    from dp_accounting import get_epsilon_gaussian

    mech = dpl.mechanisms.Gaussian(epsilon=eps, delta=delta, sensitivity=1.0)
    assert get_epsilon_gaussian(mech._scale, delta) <= eps


def test_classic_gaussian_refuses_epsilon_above_one(dpl) -> None:
    Gaussian = dpl.mechanisms.Gaussian
    with pytest.raises(ValueError, match="greater than 1"):
        Gaussian(epsilon=2.0, delta=1e-5, sensitivity=1.0)
    with pytest.raises(InputError, match="greater than 1"):
        audit(f"{DPL}:gaussian_epsilon_2", epsilon=2.0, delta=1e-5, trials=100,
              neighbours=f"{DPL}:pair")


VALUES = "projection,norm,lda,laplace_lr,logistic,histogram"  # no bit patterns


@pytest.mark.parametrize("target", ["gaussian_analytic", "gaussian", "laplace"])
def test_diffprivlib_mechanisms_pass_at_their_claim(dpl, target: str) -> None:
    """The distribution of the outputs' values is calibrated (ideal arithmetic)."""
    r = audit(f"{DPL}:{target}", epsilon=dt.EPSILON, delta=dt.DELTA, trials=10000,
              neighbours=f"{DPL}:pair", seed=0, distinguisher=VALUES)
    assert r.verdict == Verdict.PASS
    assert r.epsilon_lower > 0.0  # the test has power: the pair is told apart


@pytest.mark.parametrize("target", ["gaussian_analytic", "laplace"])
def test_diffprivlib_floating_point_leak_is_found(dpl, target: str) -> None:
    """value + noise in floating point: the last bits of one output tell the two sums
    apart (Mironov 2012), far beyond the claim (seed 0; epsilon > 2 from 20,000 runs)."""
    r = audit(f"{DPL}:{target}", epsilon=dt.EPSILON, delta=dt.DELTA, trials=20000,
              neighbours=f"{DPL}:pair", seed=0, distinguisher="lowbits")
    assert r.verdict == Verdict.FAIL and r.epsilon_lower > 2.0


def test_a_sensitivity_misuse_of_diffprivlib_is_caught(dpl) -> None:
    """Sensitivity 1 declared for a replace-one sum of sensitivity 2: with 20000 trials the
    bound's expected value is about 1.1 against the claim 1 (caught at seeds 0-4)."""
    r = audit(f"{DPL}:gaussian_analytic_replace_misuse", epsilon=1.0, delta=1e-5,
              trials=20000, relation="replace_one", neighbours=f"{DPL}:replace_pair", seed=0)
    assert r.verdict == Verdict.FAIL


def test_logistic_regression_with_data_norm_passes_and_without_it_leaks(dpl) -> None:
    ok = audit(f"{DPL}:logistic_regression", epsilon=1.0, delta=1e-5, trials=100,
               relation="replace_one", neighbours=f"{DPL}:lr_pair", seed=0)
    assert ok.verdict == Verdict.PASS
    with pytest.warns(RuntimeWarning, match="[Dd]ata norm"):
        leak = audit(f"{DPL}:logistic_regression_data_norm_from_data", epsilon=1.0,
                     delta=1e-5, trials=100, relation="replace_one",
                     neighbours=f"{DPL}:lr_small_norm_pair", seed=0)
    assert leak.verdict == Verdict.FAIL


def test_logistic_regression_adapter_outputs_coefficients_and_intercept(dpl) -> None:
    D, _ = dt.lr_pair()
    out = dt.logistic_regression(D, np.random.default_rng(0), 2)
    again = dt.logistic_regression(D, np.random.default_rng(0), 2)
    assert out.shape == (2, 3)
    np.testing.assert_array_equal(out, again)


# Opacus -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ot():
    pytest.importorskip("opacus")
    from dpverify.adapters import opacus_targets

    return opacus_targets


def test_stacked_opacus_models_equal_single_runs_without_noise(ot) -> None:
    """Full batch, no noise: each head of the stacked model is the single-model run."""
    D, _ = ot.canary_pair()
    X, y = ot._tensors(D)
    with ot._quiet():
        stacked = ot._stacked_block(X, y, 3, 0, noise_multiplier=0.0, steps=4, batches=1)
        single = ot._loop(D, np.random.default_rng(0), 1, batch_size=D.n, reduction="sum",
                          noise_multiplier=0.0, lr=ot.LEARNING_RATE / ot.N_PUBLIC, steps=4)
    np.testing.assert_allclose(stacked, np.repeat(single, 3, axis=0), rtol=1e-5, atol=1e-6)


@pytest.mark.statistical
def test_stacked_opacus_models_are_distributed_as_single_runs(ot) -> None:
    """Noise and Poisson sampling on: two-sample KS per output coordinate between 1000
    stacked and 150 looped runs, Bonferroni over the 3 coordinates at 1e-3 in all (the
    test's failure probability when the two are equal in distribution)."""
    D, _ = ot.canary_pair()
    stacked = ot.dp_sgd_linear(D, np.random.default_rng(1), 1000)
    looped = ot.dp_sgd_linear_loop(D, np.random.default_rng(2), 150)
    for c in range(stacked.shape[1]):
        assert sstats.ks_2samp(stacked[:, c], looped[:, c]).pvalue > 1e-3 / 3


def test_opacus_accountant_brackets_dp_accounting(ot) -> None:
    """Opacus's RDP epsilon is an upper bound: at least dp_accounting's PLD epsilon of the
    same Poisson-sampled Gaussian, and within 25% of it here."""
    import dp_accounting as dpa

    ev = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(
        1.0 / ot.BATCHES, dpa.GaussianDpEvent(ot.NOISE_MULTIPLIER)), ot.STEPS)
    pld = dpa.pld.PLDAccountant().compose(ev).get_epsilon(1e-5)
    ours = ot.claimed_epsilon(1e-5)
    assert pld <= ours <= 1.25 * pld


def test_suite_claims_are_opacus_own_numbers(ot) -> None:
    """The suite's claimed epsilons are the adapters' accountant values rounded up."""
    import tomllib

    suite = tomllib.loads(SUITE.read_text())
    expected = {f"{OPX}:dp_sgd_linear": ot.claimed_epsilon(1e-5),
                f"{OPX}:dp_sgd_linear_mean": ot.claimed_epsilon_mean(1e-5)}
    seen = 0
    for check in suite["check"]:
        if check["target"] in expected:
            want = expected[check["target"]]
            assert want <= check["options"]["epsilon"] <= want * (1 + 1e-3)
            seen += 1
    assert seen == 3


def test_opacus_sound_pipeline_passes(ot) -> None:
    r = audit(f"{OPX}:dp_sgd_linear", epsilon=ot.claimed_epsilon(1e-5), delta=1e-5,
              trials=1000, neighbours=f"{OPX}:canary_pair", seed=0)
    assert r.verdict == Verdict.PASS


def test_opacus_normalization_by_dataset_size_leaks_on_tiny_data(ot) -> None:
    """Opacus issue #571 reproduced: with 200 runs per dataset the update scale, 2x apart,
    gives epsilon lower bounds of 1.2 to 2.2 at seeds 0-3 against the claimed 0.57."""
    r = audit(f"{OPX}:dp_sgd_linear_mean", epsilon=ot.claimed_epsilon_mean(1e-5), delta=1e-5,
              trials=200, neighbours=f"{OPX}:tiny_pair", splits=(0.2, 0.3, 0.5), seed=0)
    assert r.verdict == Verdict.FAIL
    assert r.epsilon_lower > r.epsilon_claimed


def test_membership_inference_on_opacus(ot) -> None:
    from dpverify.checks.mia import MembershipOptions, membership_inference

    r = membership_inference(f"{OPX}:dp_sgd_linear", MembershipOptions(
        epsilon=ot.claimed_epsilon(1e-5),
        delta=1e-5, trials=800, pool=4, params={"n": 20, "d": 2}))
    assert r.verdict == Verdict.PASS
    assert r.details["target_calls"] == 5  # the pool's four datasets and the base
    assert r.epsilon_accountant == pytest.approx(ot.claimed_epsilon(1e-5))
    assert math.isfinite(r.auc)


# The suite ----------------------------------------------------------------------------------


def test_libraries_suite_loads() -> None:
    from dpverify.cli.suites import load_suite

    suite = load_suite(SUITE)
    kinds = {c.kind for c in suite.checks}
    assert kinds == {"audit", "mia"}
    assert {c.expected for c in suite.checks} == {Verdict.PASS, Verdict.FAIL}
