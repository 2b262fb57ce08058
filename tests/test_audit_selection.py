"""Choosing the test on a selection split: validity whatever is searched, and power."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sstats

from dpverify.core.errors import InputError
from dpverify.stats import audit_bounds as stats
from dpverify.stats import selection
from dpverify.stats.audit_bounds import ThresholdBound
from dpverify.stats.score_audit import (
    CLOPPER_PEARSON_FAMILY,
    Conditional,
    ScoreAudit,
    Split,
    statistics_of,
)


def binomial_limit(n: int, rate: float, failure: float) -> int:
    """The largest count of n draws at ``rate`` exceeded with probability <= ``failure``."""
    limit = int(sstats.binom.isf(failure, n, rate))
    assert sstats.binom.sf(limit, n, rate) <= failure
    return limit


def _split(pos: np.ndarray, neg: np.ndarray, n_sel: int, label: str = "x"
           ) -> tuple[ScoreAudit, ScoreAudit]:
    return ScoreAudit(pos[:n_sel], neg[:n_sel], label), ScoreAudit(pos[n_sel:], neg[n_sel:],
                                                                    label)


def select_and_bound(parts: list[tuple[ScoreAudit, ScoreAudit]], *, delta: float,
                     alpha: float) -> ThresholdBound:
    """The black-box selection (both exact statistics, smoothed ranking) on given splits."""
    return Split(smooth=True).bound_parts(parts, CLOPPER_PEARSON_FAMILY, delta=delta,
                                          alpha=alpha)


def test_the_chosen_test_is_counted_on_the_test_split_only() -> None:
    rng = np.random.default_rng(0)
    pos, neg = rng.normal(1.0, 1.0, 4000), rng.normal(0.0, 1.0, 4000)
    res = select_and_bound([_split(pos, neg, 1000)], delta=1e-5, alpha=0.05)
    sign = res.sign
    assert res.n_pos == 3000 and res.n_neg == 3000
    assert res.tp == np.count_nonzero(sign * pos[1000:] >= res.threshold)
    assert res.fp == np.count_nonzero(sign * neg[1000:] >= res.threshold)


def test_reversed_scores_and_both_orientations_are_found() -> None:
    rng = np.random.default_rng(1)
    pos, neg = rng.normal(-2.0, 1.0, 20000), rng.normal(0.0, 1.0, 20000)  # D scores LOWER
    res = select_and_bound([_split(pos, neg, 5000)], delta=0.0, alpha=0.05)
    assert res.sign == -1.0 and res.label.endswith("(reversed)") and res.epsilon > 1.0
    plan = selection.plan_tests([selection.Selection("x", neg, pos, 1000, 1000)],
                                CLOPPER_PEARSON_FAMILY, delta=0.0, alpha=0.05)[0]
    assert plan.sign == 1.0  # the same scores with D and D' exchanged: not reversed


@pytest.mark.statistical
def test_selection_over_many_candidates_keeps_alpha() -> None:
    """Identical score distributions, 3 candidates, both statistics, every threshold.

    P(epsilon_lower > 0) <= alpha = 0.2 per replication. Fixed seed, 200 replications;
    the test fails when the positive bounds exceed the count a rate of 0.2 exceeds with
    probability 1e-4 (failure probability).
    """
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(200):
        cands = [_split(*rng.normal(size=(2, 600)), 150, str(j)) for j in range(3)]
        hits += select_and_bound(cands, delta=1e-5, alpha=0.2).epsilon > 0
    assert hits <= binomial_limit(200, 0.2, 1e-4)


@pytest.mark.statistical
def test_randomized_response_at_its_claim_keeps_alpha() -> None:
    """The tightest null there is: randomized response at epsilon = 0.5, where both outcomes
    are events with likelihood ratio exactly e^eps (the bound can reach the claim).

    Binary scores, 400 replications of 3000 runs per world (fixed seed), alpha = 0.2:
    the test fails when more bounds exceed epsilon than a rate of 0.2 exceeds with
    probability 1e-4 (failure probability).
    """
    eps = 0.5
    p = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(4)
    over = 0
    for _ in range(400):
        pos = (rng.random(3000) < p).astype(float)
        neg = (rng.random(3000) < 1 - p).astype(float)
        over += select_and_bound([_split(pos, neg, 600)], delta=0.0,
                                           alpha=0.2).epsilon > eps
    assert over <= binomial_limit(400, 0.2, 1e-4)


def test_binormal_smoothing_finds_the_far_tail() -> None:
    """Gaussian scores, delta > 0: the model's ROC chooses a threshold in the far tail."""
    rng = np.random.default_rng(5)
    pos, neg = np.sort(rng.normal(0.27, 1, 20000)), np.sort(rng.normal(0, 1, 20000))
    th = np.linspace(-3, 3, 200)
    c, b = selection.binormal_roc(stats.tail_counts(pos, th), pos.size,
                                  stats.tail_counts(neg, th), neg.size)
    assert c == pytest.approx(-0.27, abs=0.05) and b == pytest.approx(1.0, abs=0.05)
    # a Laplace ROC (flat tail ratio) is no binormal one: refused at this size
    lp, ln = np.sort(rng.laplace(1, 1, 20000)), np.sort(rng.laplace(0, 1, 20000))
    assert selection.binormal_roc(stats.tail_counts(lp, th), lp.size,
                                  stats.tail_counts(ln, th), ln.size) is None
    plan = selection.plan_tests([selection.Selection("g", pos, neg, 10**6, 10**6)],
                                CLOPPER_PEARSON_FAMILY, delta=1e-5, alpha=0.05)[0]
    assert plan.statistic.name == "conditional" and abs(plan.threshold) > 2.5


def test_evidence_is_kept_when_no_pessimistic_bound_is_positive() -> None:
    """Few runs: every pessimistic anticipation is 0, and the point-estimate ranking picks
    the one candidate with a signal instead of the first, empty one."""
    rng = np.random.default_rng(6)
    null = selection.Selection("null", rng.normal(size=30), rng.normal(size=30), 200, 200)
    sig = selection.Selection("signal", rng.normal(0.8, 1, 30), rng.normal(size=30), 200, 200)
    ranked = selection.rank_tests([null, sig], CLOPPER_PEARSON_FAMILY, delta=0.0, alpha=0.05)
    assert ranked[0].anticipated == 0.0 and ranked[0].candidate == 1
    assert ranked[0].fallback > 0.5


def _indicator(k: int, m: int) -> np.ndarray:
    return np.r_[np.ones(k), np.zeros(m - k)]


def test_the_share_of_alpha_on_the_rate_is_chosen_per_test() -> None:
    """Near epsilon = 0.1 the rate p0 weighs little and a small share of alpha wins; near
    epsilon = 5 on a rare event (psi p0 large) the largest. Each event is planned once, at
    its best share, and its bound is that variant's."""
    small = selection.Selection("small", _indicator(11500, 10**6), _indicator(10000, 10**6),
                                10**7, 10**7)
    large = selection.Selection("large", _indicator(1480, 10**4), _indicator(10, 10**4),
                                10**4, 10**4)
    shares = []
    for s in (small, large):
        ranked = selection.rank_tests([s], CLOPPER_PEARSON_FAMILY, delta=0.0, alpha=0.05)
        events = [(p.sign, p.threshold, p.orientation, p.statistic.name) for p in ranked]
        assert len(events) == len(set(events))
        shares.append(ranked[0].statistic.rate_share)
    assert shares[0] < stats.RATE_SHARE == shares[1]
    plan = selection.plan_tests([small], CLOPPER_PEARSON_FAMILY, delta=0.0, alpha=0.05)[0]
    r = selection.bound_planned(plan, _indicator(11500, 10**6), _indicator(10000, 10**6),
                                delta=0.0, alpha=0.05, label="small")
    assert r.rate_share == plan.statistic.rate_share
    assert r.epsilon == pytest.approx(stats.epsilon_lower_bound_conditional(
        11500, 10**6, 10000, 10**6, 0.0, 0.05, r.rate_share))
    with pytest.raises(InputError, match="rate_share"):
        Conditional(1.5)


def test_bad_arguments_are_refused() -> None:
    s = selection.Selection("x", np.zeros(3), np.ones(3), 3, 3)
    with pytest.raises(InputError, match="top_k"):
        selection.plan_tests([s], CLOPPER_PEARSON_FAMILY, delta=0.0, alpha=0.05, top_k=0)
    with pytest.raises(InputError, match="'cp', 'gdp'"):
        statistics_of("bayes")
    with pytest.raises(InputError, match="no candidate"):
        selection.plan_tests([], CLOPPER_PEARSON_FAMILY, delta=0.0, alpha=0.05)
    with pytest.raises(InputError, match="no statistic"):
        selection.plan_tests([s], (), delta=0.0, alpha=0.05)
