"""Tests of the exponent fits: estimators, the verdict rule, and coverage on synthetic data."""

from __future__ import annotations

import numpy as np
import pytest

from dpverify.checks.rates import (
    FitSettings,
    GridPoints,
    Theory,
    evaluate,
    fit_rate,
    offset_fits,
    power_slopes,
)
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError

P_TRUE = -2.0 / 3.0
N_GRID = 2.0 ** np.arange(8, 15)  # 7 log2-spaced points over 64x, as the anchors recommend


def synthetic(rng: np.random.Generator, seeds: int, *, floor: bool, log: bool,
              p: float = P_TRUE, sigma_log: float = 0.3) -> np.ndarray:
    """Utilities (points, seeds): n^p (times log n), log-normal noise, plus a floor.

    The floor is half the smallest signal: the regime where a plain log-log fit of the
    anchors' simulation (benchmarking.md, Part A) loses its coverage.
    """
    signal = N_GRID**p * (np.log(N_GRID) if log else 1.0)
    Y = signal[:, None] * np.exp(sigma_log * rng.standard_normal((N_GRID.size, seeds)))
    return Y + (0.5 * signal.min() if floor else 0.0)


def test_power_slopes_and_offset_recover_noise_free_parameters() -> None:
    lx = np.log(N_GRID)
    s, a = power_slopes(lx, np.log(3.0 * N_GRID**-1.5)[None])
    assert s[0] == pytest.approx(-1.5, abs=1e-12) and a[0] == pytest.approx(np.log(3.0))
    y = 3.0 * np.log(N_GRID) * N_GRID**-0.5 + 0.02
    p, A, c = offset_fits(lx, np.log(np.log(N_GRID)), y[None], -0.3)
    assert p[0] == pytest.approx(-0.5, abs=2e-3)
    assert A[0] == pytest.approx(3.0, rel=2e-2) and c[0] == pytest.approx(0.02, rel=5e-2)


@pytest.mark.statistical
def test_recommended_fit_covers_under_floor_and_log_factor_plain_fit_does_not() -> None:
    """Coverage of the 95% interval over 200 replications (20 seeds, 7 points, 64x).

    Data: n^(-2/3) log n with log-normal noise (sd 0.3) plus a floor of half the smallest
    signal. The recommended fit (log factor divided out, offset model when the floor is
    material, seed bootstrap) covered the truth in 93% of 300 replications of another
    seed family in development runs (``benchmarks/bench_rates.py --coverage 300``) and in
    196/200 here; the plain log-log fit in none. Failure probability with fresh seeds:
    if the true coverage is 0.93, P(fewer than 176/200 covered) = 0.004 (binomial); the
    plain fit's true coverage is near 0, so P(more than 20/200) < 1e-10. Fixed seeds make
    the outcome deterministic.
    """
    reps, seeds = 200, 20
    rec = plain = 0
    for r in range(reps):
        Y = synthetic(np.random.default_rng([2024, r]), seeds, floor=True, log=True)
        good = fit_rate(N_GRID, Y, theory=P_TRUE, points=GridPoints(log_factor=np.log(N_GRID)),
                        settings=FitSettings(n_boot=400), rng=r)
        bad = fit_rate(N_GRID, Y, theory=P_TRUE, settings=FitSettings(model="power", n_boot=400),
                       rng=r)
        rec += good.ci_low <= P_TRUE <= good.ci_high
        plain += bad.ci_low <= P_TRUE <= bad.ci_high
    assert rec >= 176, f"recommended fit covered {rec}/{reps}"
    assert plain <= 20, f"plain log-log fit covered {plain}/{reps}"


@pytest.mark.statistical
def test_pure_power_law_passes_and_a_lost_half_exponent_never_does() -> None:
    """A true rate passes; a rate slower by 0.5 is never passed, and fails when clean.

    In development runs (``benchmarks/bench_rates.py --coverage 300``, 20 seeds) the true
    rate passed 300/300 times; the slower rate passed 0/300 (FAIL 146, INCONCLUSIVE 154:
    at sd 0.3 a slower power law can pass for the true one plus a floor, which the fit
    reports instead of deciding). With fixed seeds the outcome is deterministic; with
    fresh seeds, P(a PASS among the 10 slower replications) is at most about 10/300
    (0/300 observed; 1/300 per replication as a rough upper rate).
    """
    Y = synthetic(np.random.default_rng(1), 20, floor=False, log=False)
    ok = fit_rate(N_GRID, Y, theory=P_TRUE, parameter="n", rng=2)
    assert ok.verdict is Verdict.PASS and ok.ci_low <= P_TRUE <= ok.ci_high
    assert ok.model == "power"
    for s in range(10):
        worse = synthetic(np.random.default_rng(s), 20, floor=False, log=False, p=P_TRUE + 0.5)
        assert fit_rate(N_GRID, worse, theory=P_TRUE, rng=s).verdict is not Verdict.PASS
    clean = synthetic(np.random.default_rng(1), 20, floor=False, log=False, p=P_TRUE + 0.5,
                      sigma_log=0.1)
    bad = fit_rate(N_GRID, clean, theory=P_TRUE, parameter="n", rng=2)
    assert bad.verdict is Verdict.FAIL and bad.ci_low > P_TRUE + 0.1
    d = bad.to_dict()
    for key in ("exponent", "ci_low", "ci_high", "theory", "parameter", "rule", "medians"):
        assert key in d


def test_upper_bound_is_one_sided_two_sided_is_not() -> None:
    """A rate much better than the theorem passes an upper bound and fails a tight one."""
    Y = synthetic(np.random.default_rng(3), 10, floor=False, log=False, p=-1.5)
    upper = fit_rate(N_GRID, Y, theory=-1.0, sided="upper", rng=0)
    two = fit_rate(N_GRID, Y, theory=-1.0, sided="two", rng=0)
    assert upper.verdict is Verdict.PASS
    assert two.verdict is Verdict.FAIL


def test_wide_interval_and_dominating_floor_are_inconclusive() -> None:
    wide = synthetic(np.random.default_rng(4), 3, floor=False, log=False, sigma_log=1.5)
    fit = fit_rate(N_GRID[:4], wide[:4], theory=P_TRUE, settings=FitSettings(model="power"),
                   rng=0)
    assert fit.verdict is Verdict.INCONCLUSIVE and "wide" in fit.message
    # The signal falls below a floor at all but the first two points.
    signal = N_GRID**-1.0
    Y = (signal + signal[1])[:, None] * np.exp(
        0.01 * np.random.default_rng(5).standard_normal((N_GRID.size, 10)))
    floored = fit_rate(N_GRID, Y, theory=-1.0, rng=0)
    assert floored.model == "offset"
    assert floored.verdict is Verdict.INCONCLUSIVE and "floor dominates" in floored.message


def test_regime_mask_and_too_few_points() -> None:
    Y = synthetic(np.random.default_rng(6), 10, floor=False, log=False)
    fit = fit_rate(N_GRID, Y, theory=P_TRUE, points=GridPoints(in_regime=N_GRID >= 8192), rng=0)
    assert fit.verdict is Verdict.INCONCLUSIVE and "usable grid points" in fit.message
    three = fit_rate(N_GRID, Y, theory=P_TRUE, points=GridPoints(in_regime=N_GRID >= 4096),
                     rng=0)
    assert three.model == "power"  # a floor needs a fourth point to leave a residual
    fit = fit_rate(N_GRID, Y, theory=P_TRUE, points=GridPoints(in_regime=N_GRID >= 1024), rng=0)
    assert fit.verdict is Verdict.PASS and fit.in_regime.sum() == 5


def test_misspecification_is_flagged() -> None:
    """An undivided log factor bends the curve: the lack-of-fit test sees it beyond the
    seeds' noise, but the bend (local exponents -0.43 to -0.58) stays within the
    exponent's tolerance, so it is noted and the fit still decides."""
    Y = synthetic(np.random.default_rng(7), 40, floor=False, log=True, sigma_log=0.1)
    fit = fit_rate(N_GRID, Y, theory=P_TRUE, settings=FitSettings(model="power"), rng=0)
    assert any("lack of fit" in f and "within the bend" in f for f in fit.flags)
    assert fit.lack_of_fit_p >= 0.05 and fit.verdict is not Verdict.INCONCLUSIVE


def zigzag(seeds: int, sigma_log: float = 0.05) -> np.ndarray:
    """n^-1 times 2 and 1/2 at alternate grid points: no single exponent describes it,
    though the log-log slope through all seven points is -1."""
    bump = np.where(np.arange(N_GRID.size) % 2 == 0, 2.0, 0.5)
    noise = np.exp(sigma_log * np.random.default_rng(8).standard_normal((N_GRID.size, seeds)))
    return (bump / N_GRID)[:, None] * noise


@pytest.mark.parametrize("theory", [-1.0, -2.0])  # once a PASS, once a FAIL on the slope
def test_a_rejected_power_law_is_inconclusive(theory: float) -> None:
    fit = fit_rate(N_GRID, zigzag(20), theory=theory, parameter="n", rng=0)
    assert fit.verdict is Verdict.INCONCLUSIVE
    assert "lack of fit" in fit.message and "rejected" in fit.message
    assert fit.lack_of_fit_p < 1e-6 and fit.to_dict()["lack_of_fit_p"] == fit.lack_of_fit_p
    assert "lack-of-fit" in fit.rule
    # Without seed noise the residuals themselves decide: exact rejects the zigzag, not
    # a power law.
    flat = zigzag(4, sigma_log=0.0)
    assert fit_rate(N_GRID, flat, theory=theory, rng=0).verdict is Verdict.INCONCLUSIVE
    exact = np.repeat(N_GRID[:, None] ** -1.0, 4, axis=1)
    assert fit_rate(N_GRID, exact, theory=-1.0, rng=0).verdict is Verdict.PASS


def bending(seeds: int) -> np.ndarray:
    """A curve whose log-log slope steepens from -0.2 to -1.2 along the doubling grid (no
    single exponent describes it), with 5% log-normal noise per seed."""
    slopes = np.array([-0.2, -0.4, -0.6, -0.8, -1.0, -1.2])
    logm = np.concatenate([[0.0], np.cumsum(slopes * np.log(2.0))])
    noise = np.exp(0.05 * np.random.default_rng(4).standard_normal((N_GRID.size, seeds)))
    return np.exp(logm)[:, None] * noise


@pytest.mark.parametrize(("theory", "expected"), [
    (-2.0, Verdict.FAIL), (0.0, Verdict.PASS), (-0.7, Verdict.INCONCLUSIVE)])
def test_a_rejected_power_law_is_decided_where_every_local_slope_agrees(theory, expected):
    """Upper bounds: every segment's slope (about -0.2 to -1.2, each to within 0.05 at 20
    seeds) provably above -2 + 0.1 is a FAIL, provably below 0 + 0.1 a PASS; against -0.7
    the segments disagree and the fit says nothing."""
    fit = fit_rate(N_GRID, bending(20), theory=theory, parameter="n", rng=0)
    assert fit.lack_of_fit_p < 1e-6
    assert fit.verdict is expected, fit.message
    if expected is not Verdict.INCONCLUSIVE:
        assert "every two neighbouring grid points" in fit.message


def test_lack_of_fit_judges_the_selected_model() -> None:
    """A power law plus a floor is no power law, but the offset model the fit selects
    describes it: its own residuals decide, and the fit is not rejected."""
    signal = N_GRID**-1.0
    Y = (signal + signal[4])[:, None] * np.exp(
        0.05 * np.random.default_rng(9).standard_normal((N_GRID.size, 20)))
    fit = fit_rate(N_GRID, Y, theory=-1.0, rng=0)
    power = fit_rate(N_GRID, Y, theory=-1.0, settings=FitSettings(model="power"), rng=0)
    assert fit.model == "offset" and fit.lack_of_fit_p > 0.05
    assert power.lack_of_fit_p < 0.05 and power.verdict is Verdict.INCONCLUSIVE


@pytest.mark.statistical
def test_lack_of_fit_rarely_rejects_a_power_law_measured_with_few_seeds() -> None:
    """200 pure power laws, 5 seeds each (log-normal, sd 0.3), default settings: the
    lack-of-fit test rejects at most alpha = 0.05 of them (reading each residual against
    Student's t, as its noise is estimated from 5 seeds; against the normal it rejected
    about a quarter). Development runs rejected 1-4%; P(more than the binomial limit at
    1e-3 | rate 0.05) <= 1e-3. Fixed seeds make the outcome deterministic."""
    from scipy import stats

    reps, grid = 200, N_GRID[:5]
    rng = np.random.default_rng(10)
    rejected = 0
    for r in range(reps):
        Y = grid[:, None] ** P_TRUE * np.exp(0.3 * rng.standard_normal((grid.size, 5)))
        fit = fit_rate(grid, Y, theory=P_TRUE, settings=FitSettings(n_boot=100), rng=r)
        rejected += fit.lack_of_fit_p < 0.05
    assert rejected <= stats.binom.isf(1e-3, reps, 0.05)


def test_bad_inputs() -> None:
    with pytest.raises(InputError):
        fit_rate(N_GRID, np.ones((3, 4)), theory=-1)
    with pytest.raises(InputError):
        fit_rate(N_GRID, np.ones((7, 4)), theory=-1, settings=FitSettings(confidence=1.5))
    one_seed = fit_rate(N_GRID, np.ones((7, 1)), theory=-1)
    assert one_seed.verdict is Verdict.INCONCLUSIVE


def test_expressions_are_arithmetic_only() -> None:
    assert evaluate("log(1/delta)^(1/3)", {"delta": np.e**-8}) == pytest.approx(2.0)
    assert evaluate("n*epsilon >= sqrt(d) and d <= n", {"n": 10, "epsilon": 1, "d": 4})
    for bad in ("__import__('os')", "n.__class__", "open('x')", "[n]", "lambda: 1"):
        with pytest.raises(InputError):
            evaluate(bad, {"n": 1})
    with pytest.raises(InputError, match="neither a parameter"):
        evaluate("log(m)", {"n": 1})
    th = Theory("x", {"n": -1.0}, log_factors=("log(n)", "log(1/delta)"),
                regime=("n >= 100",))
    assert th.log_factor({"n": np.e, "delta": np.e**-2}) == pytest.approx(2.0)
    assert not th.in_regime({"n": 50, "delta": 0.1})


@pytest.mark.statistical
def test_the_offset_model_is_kept_only_where_the_floor_is_significant() -> None:
    """Clean power laws keep the power model; a floor the seeds resolve keeps the offset.

    20 seeds, 7 points, sd 0.3: in 100 development replications (1000 resamples each)
    the clean law kept the power model 94 times (the floor's test has level 0.05), and a
    floor of twice the smallest signal was kept 100 times, its interval covering the true
    exponent 96 times. Fixed seeds make the outcome deterministic; with fresh ones this
    test would fail with probability about 0.1 (0.06 + 0.04).
    """
    clean = synthetic(np.random.default_rng(11), 20, floor=False, log=False)
    fit = fit_rate(N_GRID, clean, theory=P_TRUE, rng=0)
    assert fit.model == "power" and fit.floor_p >= 0.05
    signal = N_GRID**P_TRUE
    floored = clean + 2 * signal.min()
    fit = fit_rate(N_GRID, floored, theory=P_TRUE, rng=0)
    assert fit.model == "offset" and fit.floor_p < 0.05
    assert fit.ci_low <= P_TRUE <= fit.ci_high
