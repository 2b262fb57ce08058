"""The statistics layer of the auditors: exact bounds, both orientations, GDP, selection."""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest
from scipy import stats as sstats
from statsmodels.stats.proportion import proportion_confint

from dpverify.accounting.accountant import epsilon_of_event
from dpverify.core.errors import InputError
from dpverify.stats import audit_bounds as stats
from dpverify.stats.audit_bounds import ThresholdBound
from dpverify.stats.score_audit import ClopperPearson, GaussianDP, ScoreAudit, Split


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (57, 1000), (999, 1000)])
def test_clopper_pearson_matches_statsmodels(k: int, n: int) -> None:
    lo, hi = stats.clopper_pearson(k, n, 0.05, "two")
    ref_lo, ref_hi = proportion_confint(k, n, alpha=0.05, method="beta")
    assert float(lo) == pytest.approx(ref_lo, abs=1e-12)
    assert float(hi) == pytest.approx(ref_hi, abs=1e-12)


def _parts(label: str, sel_pos: np.ndarray, sel_neg: np.ndarray, test_pos: np.ndarray,
           test_neg: np.ndarray) -> tuple[ScoreAudit, ScoreAudit]:
    return ScoreAudit(sel_pos, sel_neg, label), ScoreAudit(test_pos, test_neg, label)


def _bound(parts: list[tuple[ScoreAudit, ScoreAudit]], *, delta: float, alpha: float,
           statistic: object = None, top_k: int = 1) -> ThresholdBound:
    """The white-box and membership selection: chosen on each first part, bounded on the
    second, by Clopper-Pearson unless another statistic is given."""
    return Split(top_k=top_k).bound_parts(parts, (statistic or ClopperPearson(),),
                                          delta=delta, alpha=alpha)


def test_clopper_pearson_one_sided_edges() -> None:
    assert float(stats.clopper_pearson(0, 50, 0.05, "lower")) == 0.0
    assert float(stats.clopper_pearson(50, 50, 0.05, "upper")) == 1.0
    # the upper bound at k = 0 solves (1 - p)^n = alpha
    assert float(stats.clopper_pearson(0, 50, 0.05, "upper")) == pytest.approx(
        1 - 0.05 ** (1 / 50))
    with pytest.raises(InputError, match="side"):
        stats.clopper_pearson(1, 2, 0.05, "left")


def binomial_limit(n: int, rate: float, failure: float) -> int:
    """The largest count of n draws at ``rate`` exceeded with probability <= ``failure``."""
    limit = int(sstats.binom.isf(failure, n, rate))
    assert sstats.binom.sf(limit, n, rate) <= failure
    return limit


@pytest.mark.statistical
def test_clopper_pearson_upper_bound_covers() -> None:
    """Coverage of the one-sided upper bound at alpha = 0.1, p = 0.03, n = 200.

    Fixed seed; 4000 replications. The exact bound misses at rate <= 0.1; the test fails
    when the misses exceed the count a rate of 0.1 exceeds with probability 1e-5, so a
    failure means the bound is anti-conservative (failure probability <= 1e-5).
    """
    rng = np.random.default_rng(11)
    k = rng.binomial(200, 0.03, size=4000)
    miss = np.count_nonzero(stats.clopper_pearson(k, 200, 0.1, "upper") < 0.03)
    assert miss <= binomial_limit(4000, 0.1, 1e-5)


def test_epsilon_from_rates_both_orientations_and_delta() -> None:
    # orientation 1: (1 - delta - FNR) / FPR
    assert float(stats.epsilon_from_rates(0.01, 0.5, 0.0)) == pytest.approx(np.log(50))
    # orientation 2: (1 - delta - FPR) / FNR, the same test read the other way
    assert float(stats.epsilon_from_rates(0.5, 0.01, 0.0)) == pytest.approx(np.log(50))
    # delta only ever lowers the bound, and a large delta explains the test away
    assert float(stats.epsilon_from_rates(0.01, 0.5, 1e-3)) < np.log(50)
    assert float(stats.epsilon_from_rates(0.01, 0.5, 0.5)) == 0.0
    # tests no better than chance, or degenerate ones, show nothing
    assert float(stats.epsilon_from_rates(0.6, 0.6, 1e-5)) == 0.0
    assert float(stats.epsilon_from_rates(1.0, 0.0, 0.0)) == 0.0


def test_epsilon_lower_bound_is_below_the_point_estimate() -> None:
    point = float(stats.epsilon_from_rates(100 / 10000, 0.5, 1e-5))
    lb = float(stats.epsilon_lower_bound(100, 10000, 5000, 10000, 1e-5, 0.05))
    assert 0 < lb < point


@pytest.mark.parametrize("mu", [0.3, 1.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-2])
def test_gdp_conversion_matches_dp_accounting(mu: float, delta: float) -> None:
    """mu-GDP is the Gaussian mechanism with noise multiplier 1/mu."""
    ref = epsilon_of_event(dpa.GaussianDpEvent(1.0 / mu), delta)
    assert stats.epsilon_from_gdp(mu, delta) == pytest.approx(ref, rel=2e-3, abs=2e-3)
    assert stats.delta_from_gdp(mu, stats.epsilon_from_gdp(mu, delta)) == pytest.approx(delta)


def test_gdp_mu_never_negative_nor_absolute() -> None:
    """Regression from jax_privacy PR #270: |mu| made null and reversed scores look private-
    leaking (epsilon about 3.5 on null scores); a test no better than chance gives 0."""
    assert float(stats.gdp_mu_from_rates(0.5, 0.5)) == 0.0
    assert float(stats.gdp_mu_from_rates(0.9, 0.9)) == 0.0  # reversed: not |mu|
    assert stats.epsilon_from_gdp(0.0, 1e-5) == 0.0
    assert stats.epsilon_from_gdp(-1.0, 1e-5) == 0.0
    rng = np.random.default_rng(0)
    null = rng.normal(size=20000)
    c = _parts("null", null[:5000], rng.normal(size=5000), null[5000:],
                         rng.normal(size=15000))
    res = _bound([c], delta=1e-5, alpha=0.05, statistic=GaussianDP())
    assert res.epsilon < 0.2


def test_reverse_separated_scores_are_found() -> None:
    rng = np.random.default_rng(1)
    pos, neg = rng.normal(-2.0, 1.0, 20000), rng.normal(0.0, 1.0, 20000)  # D scores LOWER
    c = _parts("rev", pos[:5000], neg[:5000], pos[5000:], neg[5000:])
    for statistic in (ClopperPearson(), GaussianDP()):
        res = _bound([c], delta=1e-5, alpha=0.05, statistic=statistic)
        assert res.sign == -1.0 and res.label.endswith("(reversed)")
        assert res.epsilon > 1.0


def test_split_never_counts_selection_data() -> None:
    """The chosen test is counted on the test split only."""
    rng = np.random.default_rng(2)
    pos, neg = rng.normal(1.0, 1.0, 4000), rng.normal(0.0, 1.0, 4000)
    c = _parts("x", pos[:1000], neg[:1000], pos[1000:], neg[1000:])
    res = _bound([c], delta=1e-5, alpha=0.05)
    assert res.n_pos == 3000 and res.n_neg == 3000
    assert res.tp == np.count_nonzero(pos[1000:] >= res.threshold)
    assert res.fp == np.count_nonzero(neg[1000:] >= res.threshold)


@pytest.mark.statistical
def test_selection_over_many_candidates_keeps_alpha() -> None:
    """Identical score distributions, 6 candidate statistics, hundreds of thresholds each.

    Selecting on the counts that bound (pitfall 1 of anchors/auditing.md) would report
    epsilon > 0 almost always. With the split, P(epsilon_lower > 0) <= alpha = 0.2 per
    replication. Fixed seed, 200 replications; the test fails when the positive bounds
    exceed the count a rate of 0.2 exceeds with probability 1e-4 (failure probability).
    """
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(200):
        cands = []
        for j in range(6):
            a, b = rng.normal(size=(2, 600))
            cands.append(_parts(str(j), a[:150], b[:150], a[150:], b[150:]))
        hits += _bound(cands, delta=1e-5, alpha=0.2).epsilon > 0
    assert hits <= binomial_limit(200, 0.2, 1e-4)


def test_top_k_is_bonferroni_corrected() -> None:
    rng = np.random.default_rng(4)
    pos, neg = rng.normal(1.0, 1.0, 8000), rng.normal(0.0, 1.0, 8000)
    c = _parts("x", pos[:2000], neg[:2000], pos[2000:], neg[2000:])
    r3 = _bound([c], delta=1e-5, alpha=0.05, top_k=3)
    assert r3.alpha == pytest.approx(0.05 / 3)
    with pytest.raises(InputError, match="top_k"):
        Split(top_k=0)


@pytest.mark.statistical
def test_gdp_loss_bounds_cover_mu() -> None:
    """Both loss-based mu bounds stay below the true mu at rate <= alpha = 0.1.

    Exact Gaussian losses, mu = 0.5, 400 replications of 200 per world, fixed seed; the
    test fails when the exceedances pass the count a rate of 0.1 exceeds with
    probability 1e-4 (failure probability).
    """
    rng = np.random.default_rng(5)
    mu, over_mean, over_var = 0.5, 0, 0
    for _ in range(400):
        a = rng.normal(mu**2 / 2, mu, 200)
        b = rng.normal(-(mu**2) / 2, mu, 200)
        over_mean += stats.gdp_mu_lower_bound_from_losses(a, b, 0.1) > mu
        over_var += stats.gdp_mu_lower_bound_from_variance(a, b, 0.1) > mu
    limit = binomial_limit(400, 0.1, 1e-4)
    assert over_mean <= limit and over_var <= limit


def test_privacy_profile_of_gaussian_losses() -> None:
    """E_D[(1 - e^(eps - L))_+] estimates the GDP delta(eps)."""
    rng = np.random.default_rng(6)
    mu = 1.0
    L = rng.normal(mu**2 / 2, mu, 400000)
    est = stats.privacy_profile(L, np.array([0.5, 1.0, 2.0]))
    ref = [stats.delta_from_gdp(mu, e) for e in (0.5, 1.0, 2.0)]
    assert est == pytest.approx(ref, abs=3e-3)


def test_split_sizes_refuse_bad_fractions() -> None:
    assert stats.split_sizes(10, (0.5, 0.5)) == [5, 5]
    with pytest.raises(InputError, match="sum to 1"):
        stats.split_sizes(10, (0.5, 0.6))
    with pytest.raises(InputError, match="too few"):
        stats.split_sizes(3, (0.1, 0.2, 0.7))


# The joint (conditional) bound ------------------------------------------------------


@pytest.mark.parametrize("table", [(300, 1000, 200, 1000), (5, 50, 1, 60), (50, 50, 3, 40),
                                   (1700, 10**6, 690, 10**6)])
def test_odds_ratio_bound_matches_scipy_conditional_interval(table) -> None:
    """Cornfield's exact conditional bound, as scipy computes it for Fisher's exact test."""
    from scipy.stats.contingency import odds_ratio

    k1, n1, k0, n0 = table
    ref = odds_ratio([[k1, n1 - k1], [k0, n0 - k0]], kind="conditional")
    low = ref.confidence_interval(0.95, alternative="greater").low
    assert stats.odds_ratio_lower_bound(k1, n1, k0, n0, 0.05) == pytest.approx(low, rel=1e-6)


def test_conditional_bound_edges_and_gain() -> None:
    assert stats.odds_ratio_lower_bound(0, 100, 0, 100, 0.05) == 0.0
    # delta > 0 and an event never seen on the other world: p0 may be 0, nothing proven
    assert stats.epsilon_lower_bound_conditional(50, 1000, 0, 1000, 1e-5, 0.05) == 0.0
    # ... while pure DP makes the same counts strong evidence
    assert stats.epsilon_lower_bound_conditional(50, 1000, 0, 1000, 0.0, 0.05) > 2.0
    # the joint bound beats the Clopper-Pearson rectangle on the counts of a tail test
    joint = stats.epsilon_lower_bound_conditional(1700, 10**6, 690, 10**6, 1e-5, 0.05)
    rect = float(stats.epsilon_lower_bound(690, 10**6, 10**6 - 1700, 10**6, 1e-5, 0.05))
    assert joint > rect + 0.03
    # and it is below the point estimate log((p1 - delta) / p0)
    assert joint < np.log((1700e-6 - 1e-5) / 690e-6)


@pytest.mark.statistical
@pytest.mark.parametrize("p0, delta", [(0.3, 0.0), (0.02, 0.0), (0.004, 1e-3)])
def test_conditional_bound_covers_at_the_boundary(p0: float, delta: float) -> None:
    """Counts of an event exactly on the (epsilon, delta) boundary, p1 = e^eps p0 + delta.

    Fixed seed, 1500 replications of 2000 runs per world at alpha = 0.1; the bound
    exceeds epsilon at rate <= 0.1. The test fails when the exceedances pass the count a
    rate of 0.1 exceeds with probability 1e-4 (failure probability).
    """
    eps, n = 0.5, 2000
    p1 = math.exp(eps) * p0 + delta
    rng = np.random.default_rng(21)
    k1, k0 = rng.binomial(n, p1, 1500), rng.binomial(n, p0, 1500)
    over = sum(stats.epsilon_lower_bound_conditional(a, n, b, n, delta, 0.1) > eps
               for a, b in zip(k1, k0, strict=True))
    assert over <= binomial_limit(1500, 0.1, 1e-4)
