"""White-box audit: exact privacy losses from replay, and the audit built on them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpverify.checks.audit import (
    WhiteBoxOptions,
    audit_whitebox,
    release_privacy_loss,
    transcript_privacy_loss,
)
from dpverify.checks.audit.whitebox import swapped
from dpverify.core.curator import Curator
from dpverify.core.data import Dataset, NeighbourPair
from dpverify.core.errors import InputError


def _replay(pair: NeighbourPair, trials: int, seed: int) -> Curator:
    return Curator.replay(pair, trials=trials, rng=seed, keep_answers=True)


def _sum(X, y, w):  # noqa: ANN001, ANN202
    return w @ X


def _scores(X, y, w):  # noqa: ANN001, ANN202
    """Two options scored by the coordinate sums, a third never offered."""
    s = 3.0 * (w @ X)
    return np.concatenate([s, np.full_like(s[:, :1], -np.inf)], axis=1)


@pytest.fixture
def pair() -> NeighbourPair:
    rng = np.random.default_rng(0)
    D = Dataset(rng.uniform(-0.5, 0.5, size=(6, 2)), np.zeros(6))
    return NeighbourPair.add_remove(D, 2)


@pytest.mark.statistical
@pytest.mark.parametrize("release", ["gaussian", "laplace", "poisson", "poisson_laplace",
                                     "exponential"])
def test_loss_is_an_exact_log_likelihood_ratio(pair: NeighbourPair, release: str) -> None:
    """E_D[p_D'/p_D] = 1 and E_D'[p_D/p_D'] = 1 hold only for the exact likelihood ratio.

    40000 replays per world, fixed seed. Each mean has standard error below 0.01 here
    (checked on the sample); the test allows 6 standard errors, so it fails by chance
    with probability < 1e-8.
    """
    def run(p: NeighbourPair, seed: int) -> np.ndarray:
        cur = _replay(p, 40000, seed)
        batch = cur.sample("poisson", rate=0.3) if release.startswith("poisson") else None
        if release in ("gaussian", "poisson"):
            cur.gaussian("s", _sum, sensitivity=1.0, noise_std=0.7, batch=batch)
        elif release == "exponential":
            cur.exponential("s", _scores, sensitivity=1.0, epsilon=1.5)
        else:
            cur.laplace("s", _sum, sensitivity=1.0, scale=0.7, batch=batch)
        return transcript_privacy_loss(cur.ledger)[0]

    L_D = run(pair, 1)
    L_Dp = -run(swapped(pair), 2)
    for w in (np.exp(-L_D), np.exp(L_Dp)):
        se = w.std() / math.sqrt(w.size)
        assert se < 0.01
        assert abs(w.mean() - 1.0) < 6 * se
    assert L_D.mean() > 0 > L_Dp.mean()  # KL divergences are positive


def test_gaussian_loss_and_sensitivity(pair: NeighbourPair) -> None:
    cur = _replay(pair, 5, 0)
    cur.gaussian("s", _sum, sensitivity=1.0, noise_std=2.0)
    rel = cur.ledger.records[0]
    loss, m2, gaussian = release_privacy_loss(rel)
    a, vD, vDp = rel.answer, rel.value_D, rel.value_D_prime
    ref = (np.sum((a - vDp) ** 2, 1) - np.sum((a - vD) ** 2, 1)) / 8.0
    assert loss == pytest.approx(ref)
    assert m2 == pytest.approx(np.sum((vD - vDp) ** 2, 1) / 4.0)
    assert gaussian


def test_exact_and_nonfinite_releases_separate_worlds(pair: NeighbourPair) -> None:
    cur = _replay(pair, 3, 0)
    cur.exact("peek", _sum)
    cur.gaussian("data_free", lambda X, y, w: w @ (0.0 * X), sensitivity=1.0, noise_std=1.0)
    L, V, gaussian = transcript_privacy_loss(cur.ledger)
    assert np.isposinf(L).all() and not gaussian and V is None
    nan_X = pair.D.X.copy()
    nan_X[2, 0] = np.nan
    D_nan = Dataset(nan_X, pair.D.y, allow_nonfinite=True)
    cur = _replay(NeighbourPair.add_remove(D_nan, 2), 3, 0)
    cur.gaussian("s", _sum, sensitivity=1.0, noise_std=1.0)
    assert np.isposinf(transcript_privacy_loss(cur.ledger)[0]).all()


def test_a_plain_run_cannot_be_audited(pair: NeighbourPair) -> None:
    cur = Curator(pair.D, trials=2, rng=0)
    cur.gaussian("s", _sum, sensitivity=1.0, noise_std=1.0)
    with pytest.raises(InputError, match="not replayed"):
        release_privacy_loss(cur.ledger.records[0])
    cur = Curator.replay(pair, trials=2, rng=0)  # keep_answers off
    cur.gaussian("s", _sum, sensitivity=1.0, noise_std=1.0)
    with pytest.raises(InputError, match="keep_answers"):
        release_privacy_loss(cur.ledger.records[0])


def test_linear_canary_replays_the_accountants_mu() -> None:
    """Noisy GD with the linear loss: the canary moves every release by exactly C, so the
    replayed mu is the accountant's and the GDP bound is tight."""
    r = audit_whitebox("noisy_gd:sound", WhiteBoxOptions(params={"loss": "linear", "n": 50, "T": 5},
                       trials=400, seed=0, neighbours="fresh_direction"))
    d = r.details
    from dpverify.accounting.accountant import calibrate_gaussian

    mu_acct = math.sqrt(5) / calibrate_gaussian(target_epsilon=1.0, target_delta=1e-5, steps=5)
    assert d["mu_replay_min"] == pytest.approx(mu_acct, rel=1e-9)
    assert d["mu_replay_max"] == pytest.approx(mu_acct, rel=1e-9)
    assert r.bound == "gdp" and d["gdp_method"] == "variance" and d["gdp_valid"]
    assert r.verdict.value == "PASS" and 0.85 < r.tightness <= 1.0
    assert set(r.metrics()) >= {"epsilon_lower", "epsilon_accountant", "epsilon_claimed",
                                "confidence", "trials"}


def test_half_steps_flagged_and_poisson_goes_parametric() -> None:
    r = audit_whitebox("noisy_gd:planted_half_steps",
                       WhiteBoxOptions(
                           params={"loss": "linear", "n": 50, "T": 6}, trials=400, seed=1))
    assert r.verdict.value == "FAIL" and r.epsilon_lower > r.epsilon_claimed
    r = audit_whitebox("dp_sgd:sound", WhiteBoxOptions(
        params={"n": 40, "T": 3, "q": 0.25}, trials=300,
        seed=0, accountant=False))
    assert r.bound == "parametric" and not r.details["gdp_valid"]
    assert r.verdict.value == "PASS" and r.assumptions
    r = audit_whitebox("dp_sgd:sound", WhiteBoxOptions(
        params={"n": 40, "T": 3, "q": 0.25}, trials=300,
        seed=0, accountant=False, bound="cp"))
    assert r.bound == "cp" and r.details["epsilon_lower_parametric"] is None


def test_whitebox_refuses_callables_and_bad_options() -> None:
    with pytest.raises(InputError, match="registered curator algorithm"):
        audit_whitebox("math:sqrt", WhiteBoxOptions(epsilon=1.0, delta=1e-5))
    with pytest.raises(InputError, match="select_fraction"):
        audit_whitebox("noisy_gd:sound", WhiteBoxOptions(select_fraction=1.5))
    with pytest.raises(InputError, match="bound"):
        audit_whitebox("noisy_gd:sound", WhiteBoxOptions(bound="bayes"))


def test_exponential_loss_composes_with_the_gaussian_losses(pair: NeighbourPair) -> None:
    """A Gaussian release then a selection: the transcript's loss is the sum of the two,
    and the transcript is no longer Gaussian (the GDP bound does not apply)."""
    cur = _replay(pair, 50, 3)
    cur.gaussian("g", _sum, sensitivity=1.0, noise_std=0.7)
    cur.exponential("pick", _scores, sensitivity=1.0, epsilon=1.5)
    g, e = (release_privacy_loss(r)[0] for r in cur.ledger.records)
    L, V, gaussian = transcript_privacy_loss(cur.ledger)
    np.testing.assert_allclose(L, g + e)
    assert V is None and not gaussian
    # |loss| <= eps Delta_true / Delta: 2 c Delta_true with c = eps / (2 Delta).
    r = cur.ledger.records[1]
    assert np.all(np.abs(e) <= 1.5 * r.true_difference.max() / r.release.sensitivity + 1e-12)
    assert np.any(e != 0)
