"""What an audit could have caught: the detectable-epsilon computations, checked."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sstats

from dpverify.checks.audit.onerun import one_run_power
from dpverify.checks.audit.result import AuditResult
from dpverify.stats import audit_bounds as stats
from dpverify.stats.power import (
    GAUSSIAN,
    CountTest,
    SelectedTest,
    detectable_gdp_mean,
    detectable_gdp_variance,
    gdp_mu_for_epsilon,
    sorted_thresholds,
    threshold_test_power,
)
from dpverify.stats.score_audit import ClopperPearson
from dpverify.stats.selection import Tails


@pytest.mark.parametrize("method", ["cp", "gdp"])
@pytest.mark.parametrize("rates", [(0.02, 0.5), (0.3, 0.1), (0.001, 0.9)])
def test_count_test_power_is_the_exact_binomial_sum(method: str, rates: tuple) -> None:
    """The cut on false positives reproduces the bound on every pair of counts."""
    n_pos, n_neg, alpha, delta, eps = 60, 80, 0.1, 1e-3, 0.7
    test = CountTest(n_pos, n_neg, alpha=alpha, delta=delta, epsilon=eps, method=method)
    fp = np.arange(n_neg + 1)[:, None]
    fn = np.arange(n_pos + 1)[None, :]
    if method == "cp":
        rejects = stats.epsilon_lower_bound(fp, n_neg, fn, n_pos, delta, alpha) > eps
    else:
        mu_c = gdp_mu_for_epsilon(eps, delta)
        rejects = stats.gdp_mu_lower_bound(fp, n_neg, fn, n_pos, alpha) > mu_c
    fpr, fnr = rates
    weights = sstats.binom.pmf(fp, n_neg, fpr) * sstats.binom.pmf(fn, n_pos, fnr)
    assert test.power(fpr, fnr) == pytest.approx(float(np.sum(weights * rejects)), abs=1e-9)


def test_selection_is_the_audits_own() -> None:
    """The simulated selection picks the threshold Clopper-Pearson's anticipation ranks
    first (at the selection level of the white-box and membership audits)."""
    test = CountTest(7000, 7000, alpha=0.05, delta=1e-5, epsilon=1.0, method="cp")
    sel = SelectedTest(GAUSSIAN, test, (2000, 2000), replicates=3)
    for zp, zn in zip(sel.z_pos, sel.z_neg, strict=True):
        pos, neg = GAUSSIAN.scores(0.7, zp, zn)
        th = sorted_thresholds(pos, neg)
        tails = Tails(stats.tail_counts(np.sort(pos), th), pos.size,
                      stats.tail_counts(np.sort(neg), th), neg.size, 7000, 7000)
        ant, = ClopperPearson().anticipate(tails, delta=1e-5, alpha=0.05,
                                           level=stats.SELECT_LEVEL)
        assert sel.choose(pos, neg) == th[int(np.argmax(ant))]


def test_more_runs_detect_smaller_violations() -> None:
    eps = [threshold_test_power(n, n, alpha=0.05, delta=1e-5, epsilon=1.0).epsilon
           for n in (1000, 10000, 100000)]
    assert eps[0] > eps[1] > eps[2] > 1.0
    chosen = threshold_test_power(10000, 10000, alpha=0.05, delta=1e-5, epsilon=1.0,
                                  selection=(3000, 3000))
    assert chosen.epsilon > eps[1] and "selection" in chosen.note


def test_gdp_bounds_power_in_closed_form() -> None:
    """At the detectable mu the spread bound exceeds the claim's mu with probability 0.9."""
    p = detectable_gdp_variance(998, alpha=0.05, delta=1e-5, epsilon=1.0)
    mu_c = gdp_mu_for_epsilon(1.0, 1e-5)
    q = sstats.chi2.isf(0.05, 998)
    assert sstats.chi2.sf(q * mu_c**2 / p.parameter**2, 998) == pytest.approx(0.9)
    assert stats.epsilon_from_gdp(p.parameter, 1e-5) == pytest.approx(p.epsilon)
    m = detectable_gdp_mean(500, 500, alpha=0.05, delta=1e-5, epsilon=1.0)
    assert m.epsilon > p.epsilon > 1.0  # the mean carries less than the spread


def test_pure_dp_claims_use_the_laplace_reference() -> None:
    p = threshold_test_power(20000, 20000, alpha=0.05, delta=0.0, epsilon=1.0)
    assert p.reference == "laplace" and 1.0 < p.epsilon < 1.5
    g = detectable_gdp_variance(998, alpha=0.05, delta=0.0, epsilon=1.0)
    assert math.isinf(g.epsilon) and "pure-DP" in g.note


def test_one_run_power_is_reached_at_its_parameter() -> None:
    p = one_run_power(400, None, alpha=0.05, delta=1e-5, epsilon=1.0)
    assert p.method == "steinke" and p.epsilon > 1.0
    assert one_run_power(1600, None, alpha=0.05, delta=1e-5, epsilon=1.0).epsilon < p.epsilon


def test_pass_states_what_it_could_have_caught() -> None:
    r = AuditResult("x", "blackbox", 0.4, 1.0, 1.0, 1e-5, 0.95, 1000, "cp")
    assert r.verdict.value == "PASS" and "no evidence" in r.message()
    r.with_power(threshold_test_power(700, 700, alpha=0.05, delta=1e-5, epsilon=1.0))
    assert "no violation above epsilon =" in r.message() and "confidence 0.9" in r.message()
    assert r.metrics()["epsilon_detectable"] == r.epsilon_detectable > 1.0
    r.inconclusive = "budget spent"
    assert r.verdict.value == "INCONCLUSIVE" and "underpowered" in r.message()


@pytest.mark.statistical
@pytest.mark.slow
def test_the_detectable_epsilon_is_caught(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """A Gaussian mechanism at the reported detectable epsilon fails the claim often enough.

    200 fixed-size black-box audits (4000 trials, fixed seeds) of a Gaussian mechanism
    whose epsilon is the detectable one the audit design reports at probability 0.9. The
    test fails if fewer FAILs are seen than a catch rate of 0.85 gives with probability
    1e-3 (its failure probability when the reported figure is honest to within 0.05).
    """
    from dpverify.checks.audit import BlackBoxOptions, audit_blackbox

    p = threshold_test_power(2800, 2800, alpha=0.05, delta=1e-5, epsilon=1.0,
                             selection=(800, 800))
    (tmp_path / "ref_mech.py").write_text(
        "import numpy as np\n"
        f"SIGMA = {1.0 / p.parameter!r}\n"
        "def f(data, rng, trials):\n"
        "    return float(np.sum(data)) + SIGMA * rng.standard_normal((trials, 1))\n"
        "def pair():\n"
        "    return np.ones(3), np.ones(2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fails = sum(audit_blackbox("ref_mech:f", BlackBoxOptions(
        neighbours="ref_mech:pair", epsilon=1.0,
        delta=1e-5, trials=4000, seed=s, distinguisher="projection",
        accountant=False, detect_probability=None)).verdict.value
                == "FAIL" for s in range(200))
    assert fails >= sstats.binom.ppf(1e-3, 200, 0.85)


def test_membership_inference_says_what_it_could_have_caught() -> None:
    from dpverify.checks.mia import MembershipOptions, membership_inference

    r = membership_inference("dp_sgd:sound", MembershipOptions(trials=600, attack="loss",
                             params={"n": 100, "T": 5, "q": 1.0}, accountant=False))
    assert r.verdict.value == "PASS" and r.epsilon_detectable > r.epsilon_claimed
    assert "no violation above epsilon =" in r.message()
    assert r.metrics()["detect_probability"] == 0.9 and r.power["method"] == "cp"
