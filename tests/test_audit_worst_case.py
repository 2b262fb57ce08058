"""Worst-case canaries by default, and the parametric bound for Poisson-sampled releases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sstats

from dpverify.accounting.accountant import account_ledger, calibrate_gaussian
from dpverify.checks.audit import WhiteBoxOptions, audit_onerun, audit_whitebox
from dpverify.checks.audit.targets import make_pairs, plain_ledger, prepare, resolve_neighbours
from dpverify.checks.audit.whitebox import replay_losses
from dpverify.core.data import PAIR_GENERATORS, canary_worst_case, synthetic_classification
from dpverify.execution.trials import seed_streams
from dpverify.stats import sampled_gaussian as sampled

SEEDS = 200
ALPHA = 0.2
FAILURE = 1e-3


def limit(n: int) -> int:
    """Most false alarms a rate of ALPHA shows, except with probability FAILURE."""
    return int(sstats.binom.isf(FAILURE, n, ALPHA))


def test_worst_case_canary_sits_at_the_clip_where_the_data_are_not() -> None:
    rng = np.random.default_rng(0)
    D, _ = synthetic_classification(4, 6, rng)
    p = canary_worst_case(D, rng, clip=0.5)
    x = p.D.X[0]
    assert np.linalg.norm(x) == pytest.approx(0.5) and np.allclose(D.X @ x, 0.0)
    far = canary_worst_case(D, rng, clip=3.0).D.X[0]
    assert np.linalg.norm(far) == pytest.approx(1.0)  # records stay in the unit ball
    r = canary_worst_case(D, rng, "replace_one", clip=1.0)
    i = r.index
    assert r.relation == "replace_one" and np.array_equal(r.D.X, D.X)
    assert np.allclose(r.D_prime.X[i], -D.X[i] / np.linalg.norm(D.X[i]))
    assert "worst_case" in PAIR_GENERATORS


@pytest.mark.parametrize("target, pair, loss", [
    ("noisy_gd:sound", "worst_case", "linear"),
    ("dp_sgd:sound", "worst_case", "linear"),
    ("gaussian_mechanism:sound", "worst_case", None),
    ("laplace_histogram:sound", "fresh_direction", None),
])
def test_auto_neighbours_pick_the_worst_case(target: str, pair: str, loss: str | None) -> None:
    s = prepare(target)
    assert resolve_neighbours(s, "auto") == pair
    assert s.params.get("loss") == loss
    assert bool(s.notes) == (loss is not None)
    kept = prepare(target, params={"loss": "logistic"}) if loss else None
    if kept is not None:
        assert resolve_neighbours(kept, "auto") == "worst_case"
        assert kept.params["loss"] == "logistic" and not kept.notes


def test_worst_case_canary_replays_the_accountants_sensitivity() -> None:
    """Every release of the default noisy GD audit moves by exactly the clip."""
    r = audit_whitebox("noisy_gd:sound", WhiteBoxOptions(params={"T": 10, "n": 100}, trials=200,
                       accountant=False, detect_probability=None))
    mu = math.sqrt(10) / calibrate_gaussian(target_epsilon=1.0, target_delta=1e-5, steps=10)
    assert r.details["mu_replay_min"] == pytest.approx(mu, rel=1e-9)
    assert r.details["mu_replay_max"] == pytest.approx(mu, rel=1e-9)


@pytest.mark.statistical
def test_default_whitebox_noisy_gd_is_tight() -> None:
    """>= 0.9 of the accountant's epsilon from 500 runs per world (fixed seed 0).

    The spread bound is below 0.9 of the truth only when a chi-square with 998 degrees of
    freedom falls below 0.83 of its 95% quantile: probability < 1%.
    """
    r = audit_whitebox("noisy_gd:sound", WhiteBoxOptions(trials=500))
    assert r.bound == "gdp" and r.details["pair"] == "worst_case"
    assert r.verdict.value == "PASS" and 0.9 <= r.tightness <= 1.0
    assert r.epsilon_detectable < 1.15 * r.epsilon_claimed


@pytest.mark.statistical
@pytest.mark.slow
def test_default_whitebox_dp_sgd_parametric_reaches_seventy_percent() -> None:
    """dp_sgd:sound at its defaults, 1000 runs per world (fixed seed 0): >= 0.7 of the
    accountant's epsilon by the parametric bound. With 1000 runs the kappa bound's
    standard error is about 4%, so 0.7 (kappa about 0.75) is over 5 of them below its
    expected place: failure probability < 1e-6."""
    r = audit_whitebox("dp_sgd:sound", WhiteBoxOptions(trials=1000))
    assert r.bound == "parametric" and r.assumptions == [sampled.ASSUMPTION]
    assert r.verdict.value == "PASS" and r.tightness >= 0.7


def test_parametric_bound_catches_a_planted_sensitivity() -> None:
    r = audit_whitebox("dp_sgd:planted_mean_noise_on_sum", WhiteBoxOptions(
        params={"n": 100, "T": 5},
        trials=100, accountant=False, detect_probability=None))
    assert r.bound == "parametric" and r.verdict.value == "FAIL"
    assert r.details["kappa_lower"] > 2.0


def test_default_onerun_on_noisy_gd_gives_a_nonzero_bound() -> None:
    """Defaults: 1000 canaries in d = n + 1000 dimensions, scored on the releases."""
    r = audit_onerun("noisy_gd:sound")
    assert r.details["scores"] == "releases" and r.details["dimension"] == 1500
    assert 0.0 < r.epsilon_lower < r.epsilon_claimed and r.verdict.value == "PASS"
    assert r.epsilon_detectable > r.epsilon_claimed


@pytest.mark.statistical
def test_family_moments_match_simulated_losses() -> None:
    """Quadrature moments of the mixture loss against 400000 draws (fixed seed): each
    within 6 standard errors (failure probability < 1e-8 per moment)."""
    rng = np.random.default_rng(0)
    q, mu, n = 0.1, 1.3, 400_000
    c = sampled.loss_cumulants(np.array([q]), np.array([mu]))[0]
    x_in = rng.normal(np.where(rng.random(n) < q, mu, 0.0), 1.0)
    x_out = rng.normal(size=n)
    for (m, v, _), x in zip(c, (x_in, x_out), strict=True):
        loss = np.logaddexp(np.log1p(-q), np.log(q) + mu * x - mu * mu / 2)
        assert abs(loss.mean() - m) < 6 * loss.std() / math.sqrt(n)
        sq = (loss - loss.mean()) ** 2
        assert abs(sq.mean() - v) < 6 * sq.std() / math.sqrt(n)


def test_family_epsilon_is_the_accountants_rounded_down() -> None:
    """At kappa = 1 the family is the ledger the accountant reads; its epsilon is the
    accountant's, rounded down (a lower bound must not inherit the upward rounding)."""
    s = prepare("dp_sgd:sound", params={"T": 5})
    fam = sampled.family_of(plain_ledger(s), "add_remove")
    assert fam.steps == 5 and fam.q.tolist() == [0.05]
    acc = account_ledger(plain_ledger(s), 1e-5).epsilon
    low = sampled.family_epsilon(fam, 1.0, 1e-5)
    assert 0.99 * acc < low <= acc
    assert sampled.kappa_for_epsilon(fam, low, 1e-5) == pytest.approx(1.0, abs=2e-3)


@pytest.mark.statistical
def test_parametric_false_alarm_rate_on_the_family() -> None:
    """200 seeds of exact family losses at kappa = 1 (30 releases, q = 0.1, mu = 1): the
    kappa lower bound at alpha = 0.2 exceeds 1 no more often than a rate of 0.2 allows
    (test failure probability 1e-3)."""
    fam = sampled.Family(np.array([0.1]), np.array([1.0]), np.array([30]))
    rng = np.random.default_rng(1)
    over = 0
    for _ in range(SEEDS):
        def losses(inside: bool) -> np.ndarray:
            shift = (rng.random((500, 30)) < 0.1) if inside else np.zeros((500, 30))
            x = rng.normal(shift * 1.0, 1.0)
            return np.logaddexp(np.log(0.9), np.log(0.1) + x - 0.5).sum(axis=1)

        k, _ = sampled.kappa_lower_bound(losses(True), losses(False), fam,
                                         canary_in_D=True, alpha=ALPHA)
        over += k > 1.0
    assert over <= limit(SEEDS)


@pytest.mark.statistical
def test_whitebox_sampled_parametric_false_alarm_rate() -> None:
    """The replayed DP-SGD transcripts themselves (n = 40, T = 5, q = 0.2, worst-case
    canary, 300 runs per world), 200 seeds: the parametric kappa bound at alpha = 0.2
    exceeds the claim's kappa no more often than a rate of 0.2 allows (failure 1e-3).
    The bound is compared in kappa, where epsilon is increasing, to skip 200 PLDs."""
    s = prepare("dp_sgd:sound", params={"n": 40, "T": 5, "q": 0.2})
    pair = make_pairs(s, resolve_neighbours(s, "auto"))[0].pair
    fam = sampled.family_of(plain_ledger(s), s.relation)
    k_claim = sampled.kappa_for_epsilon(fam, s.epsilon_claimed, s.delta)
    over = 0
    for ss in seed_streams(7, SEEDS):
        run = replay_losses(s, pair, 300, ss)
        k, _ = sampled.kappa_lower_bound(run["loss_D"], run["loss_D_prime"], fam,
                                         canary_in_D=True, alpha=ALPHA)
        over += k > k_claim
    assert over <= limit(SEEDS)


@pytest.mark.statistical
def test_whitebox_gdp_false_alarm_rate() -> None:
    """The default white-box audit of noisy GD (worst-case canary, GDP spread bound) at
    alpha = 0.2, 100 runs per world, 200 seeds: FAILs no more often than a rate of 0.2
    allows (failure probability 1e-3)."""
    fails = sum(audit_whitebox("noisy_gd:sound", WhiteBoxOptions(params={"n": 20, "d": 2, "T": 3},
                               trials=100, seed=s, confidence=1 - ALPHA, accountant=False,
                               detect_probability=None)).verdict.value == "FAIL"
                for s in range(SEEDS))
    assert fails <= limit(SEEDS)
