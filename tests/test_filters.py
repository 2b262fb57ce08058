"""Tests of the zCDP privacy filter and per-trial Gaussian releases
(dpverify.mechanisms.filters)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpverify.accounting.accountant import zcdp_of_ledger
from dpverify.core.claims import PrivacyClaim
from dpverify.core.curator import Curator
from dpverify.core.data import Dataset, NeighbourPair
from dpverify.core.errors import InputError
from dpverify.mechanisms.filters import (
    FilterExhausted,
    ZCDPFilter,
    attach,
    filter_guarantee,
    filters_of,
    gaussian_per_trial,
    gaussian_zcdp,
    noise_for_zcdp,
)


@settings(max_examples=100, deadline=None)
@given(
    budget=st.floats(0.01, 10.0),
    trials=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    scale=st.floats(0.001, 2.0),
)
def test_filter_stops_at_budget_and_never_exceeds(budget, trials, seed, scale):
    """An adaptive analyst asks for releases whose costs depend on what it saw; the filter
    admits a release exactly when it fits, and the admitted total never exceeds the budget."""
    rng = np.random.default_rng(seed)
    f = ZCDPFilter(budget, trials=trials)
    active = np.ones(trials, bool)
    seen = np.zeros(trials)
    for _ in range(200):
        # The next cost is a function of past "releases" (here: the noise seen so far).
        cost = scale * np.abs(np.sin(seen)) + scale * rng.random(trials) * 0.1
        ok = f.allows(cost, active)
        np.testing.assert_array_equal(ok, active & (f.spent + cost <= budget * (1 + 1e-12)))
        refused = active & ~ok
        if refused.any():
            with pytest.raises(FilterExhausted):
                f.spend(cost, active)
        active &= ok
        if not active.any():
            break
        f.spend(cost, active)
        seen += rng.standard_normal(trials)
        assert np.all(f.spent <= budget * (1 + 1e-12))
    assert np.all(f.remaining() >= 0)
    assert np.all(f.spent <= budget * (1 + 1e-12))


@settings(max_examples=100, deadline=None)
@given(costs=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=50), budget=st.floats(0.1, 5.0))
def test_filter_spends_exactly_what_it_admits(costs, budget):
    """The filter's tally is the sum of admitted costs, and it refuses the first that does
    not fit (a greedy analyst that stops at the first refusal spends at most the budget)."""
    f = ZCDPFilter(budget)
    total = 0.0
    for c in costs:
        if not f.allows(c)[0]:
            assert total + c > budget * (1 + 1e-12)
            break
        f.spend(c)
        total += c
    assert f.spent[0] == pytest.approx(total)
    assert total <= budget * (1 + 1e-12)
    assert f.releases == len(f.history)


def test_filter_trials_are_independent():
    f = ZCDPFilter(1.0, trials=3)
    f.spend(np.array([0.9, 0.1, 0.5]))
    np.testing.assert_array_equal(f.allows(0.2), [False, True, True])
    f.spend(0.2, active=[False, True, True])
    np.testing.assert_allclose(f.spent, [0.9, 0.3, 0.7])


def test_filter_refuses_bad_input():
    with pytest.raises(InputError):
        ZCDPFilter(0.0)
    with pytest.raises(InputError):
        ZCDPFilter(1.0).allows(-0.1)


def test_noise_and_cost_are_inverse():
    for rho in (1e-3, 0.5, 7.0):
        assert gaussian_zcdp(2.0, noise_for_zcdp(2.0, rho)) == pytest.approx(rho)


@pytest.mark.statistical
def test_gaussian_per_trial_noise_scales():
    """Each trial receives its own noise scale. Fixed seed; with 4000 releases per trial the
    sample standard deviations are within 5% of sigma_k except with probability < 1e-6."""
    D = Dataset(np.ones((5, 1)), np.zeros(5))
    cur = Curator(D, trials=3, rng=0)
    sig = np.array([0.5, 1.0, 3.0])
    answers = np.stack([
        gaussian_per_trial(cur, "s", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=sig)[:, 0]
        for _ in range(4000)
    ])
    np.testing.assert_allclose(answers.mean(axis=0), 5.0, atol=0.2)
    np.testing.assert_allclose(answers.std(axis=0), sig, rtol=0.05)
    rel = cur.ledger.releases[0]
    # The ledger carries the normalised release: the worst trial's Delta / sigma_k.
    assert rel.sensitivity == pytest.approx(1.0 / 0.5) and rel.noise == 1.0


def test_gaussian_per_trial_one_trial_ledger_is_exact():
    D = Dataset(np.ones((5, 2)), np.zeros(5))
    cur = Curator(D, trials=1, rng=0)
    gaussian_per_trial(cur, "a", lambda X, y, w: w @ X, sensitivity=0.3, noise_std=[2.0])
    gaussian_per_trial(cur, "b", lambda X, y, w: w @ X, sensitivity=0.3, noise_std=[0.7])
    assert zcdp_of_ledger(cur.ledger) == pytest.approx(
        gaussian_zcdp(0.3, 2.0) + gaussian_zcdp(0.3, 0.7))


def test_gaussian_per_trial_inactive_trials_see_only_noise():
    D = Dataset(np.ones((5, 1)), np.zeros(5))
    cur = Curator.replay(NeighbourPair.add_remove(D, 0), trials=2, rng=0)
    gaussian_per_trial(cur, "s", lambda X, y, w: w @ X, sensitivity=1.0,
                       noise_std=[1.0, 1.0], active=[True, False])
    rel = cur.ledger.records[0]
    assert rel.true_difference[1] == 0.0 and rel.true_difference[0] == pytest.approx(1.0)
    with pytest.raises(InputError):
        gaussian_per_trial(cur, "s", lambda X, y, w: w @ X, sensitivity=1.0,
                           noise_std=[0.0, 1.0])


def test_filter_guarantee_compares_budget_and_ledger():
    D = Dataset(np.ones((5, 1)), np.zeros(5))
    cur = Curator(D, trials=1, rng=0)
    f = attach(cur.ledger, ZCDPFilter(0.5))
    assert filters_of(cur.ledger) == [f]
    f.spend(gaussian_zcdp(1.0, 1.0))
    cur.gaussian("s", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)
    ok = filter_guarantee(cur.ledger, PrivacyClaim(rho=0.5), f)
    assert not ok["violated"] and ok["rho_ledger"] == pytest.approx(0.5)
    assert filter_guarantee(cur.ledger, PrivacyClaim(rho=0.4), f)["violated"]
    assert filter_guarantee(cur.ledger, PrivacyClaim(rho=0.45), ZCDPFilter(1.0))["violated"]
