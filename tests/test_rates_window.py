"""Window validation of rate fits: saturated points and a non-private control are left out."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from dpverify.checks.base import CheckSpec, RunContext, run_check
from dpverify.checks.rates import RateOptions, RatesResult, SweepPlan, run_sweep, verify_rates
from dpverify.checks.rates.grids import Sweep, trivial_output
from dpverify.checks.rates.theory import Theory
from dpverify.checks.rates.verify import fit_sweep, window_reasons
from dpverify.cli.app import main
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError
from dpverify.core.registry import resolve
from dpverify.execution.experiment import Experiment
from dpverify.stats.rate_fit import FitSettings, GridPoints, fit_rate

N_VALUES = [200, 400, 800]
GD = {"T": 20}


def rates(target: Any, vary: Any, *, params: dict[str, Any] | None = None, seed: int = 0,
          **options: Any) -> RatesResult:
    """:func:`verify_rates` of ``target`` with ``params`` fixed, sweeping ``vary``."""
    return verify_rates(Experiment(target, params, seed=seed),
                        RateOptions(vary=vary, **options))


def _sweep(means: list[float], trivial: list[float]) -> Sweep:
    Y = np.array(means)[:, None] * np.ones((1, 3))
    return Sweep("t", "n", [1, 2, 4, 8][: len(means)], Y, [{}] * len(means), "m", 0,
                 trivial=np.array(trivial))


def test_window_reasons_mark_saturated_points_and_points_the_control_explains() -> None:
    sw = _sweep([0.9, 0.5, 0.2, 0.05], [1.0, 1.0, 1.0, 1.0])
    high = np.full(4, 5.0)  # the theorem's bound promises no progress anywhere
    why = window_reasons(sw, FitSettings(saturation=0.6), bound=high)
    assert [bool(w) for w in why] == [True, False, False, False]
    assert why[0].startswith("saturated: mean 0.9 > 0.6")
    # where the bound does promise progress, a stuck point stays in the fit (it may FAIL)
    assert window_reasons(sw, FitSettings(saturation=0.6), bound=np.full(4, 0.1)) == [""] * 4
    control = _sweep([0.01, 0.01, 0.01, 0.01], [1.0] * 4)
    why = window_reasons(sw, FitSettings(saturation=0.6, control_ratio=10.0), control, high)
    # 0.05 < 10 x 0.01: the control explains the last point; the first stays "saturated"
    assert [w.split(":")[0] for w in why] == ["saturated", "", "", "not private-dominated"]
    assert window_reasons(sw, FitSettings()) == [""] * 4  # off by default
    with pytest.raises(InputError, match="trivial=True"):
        window_reasons(_sweep([0.5] * 4, [np.nan] * 4), FitSettings(saturation=0.5), bound=high)
    with pytest.raises(InputError, match="full bound"):
        window_reasons(sw, FitSettings(saturation=0.5))


def test_excluded_points_are_not_fitted_and_too_few_left_is_inconclusive() -> None:
    n = 2.0 ** np.arange(7, 13)
    rng = np.random.default_rng(0)
    Y = n[:, None] ** -0.5 * np.exp(0.1 * rng.standard_normal((6, 10)))
    Y[:2] = 1.0  # a plateau at the start, which bends the fitted slope
    bent = fit_rate(n, Y, theory=-0.5, parameter="n", settings=FitSettings(n_boot=300), rng=1)
    assert abs(bent.exponent_power + 0.5) > 0.2
    why = ["saturated: plateau"] * 2 + [""] * 4
    fit = fit_rate(n, Y, theory=-0.5, parameter="n", settings=FitSettings(n_boot=300), rng=1,
                   points=GridPoints(excluded=why))
    assert fit.verdict is Verdict.PASS and abs(fit.exponent + 0.5) < 0.05
    assert fit.excluded == why and fit.to_dict()["excluded"] == why
    assert not fit.in_regime[:2].any() and fit.in_regime[2:].all()
    few = fit_rate(n, Y, theory=-0.5, parameter="n", settings=FitSettings(n_boot=300), rng=1,
                   points=GridPoints(excluded=["saturated: x"] * 4 + [""] * 2))
    assert few.verdict is Verdict.INCONCLUSIVE
    assert "2 usable grid points" in few.message and "4 saturated" in few.message
    with pytest.raises(InputError, match="one entry per grid point"):
        fit_rate(n, Y, theory=-0.5, points=GridPoints(excluded=[""]))
    with pytest.raises(InputError, match="reason string"):
        fit_rate(n, Y, theory=-0.5, points=GridPoints(excluded=np.zeros(6, bool)))


def test_settings_reject_a_bad_window() -> None:
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(InputError, match="saturation"):
            FitSettings(saturation=bad)
    with pytest.raises(InputError, match="control_ratio"):
        FitSettings(control_ratio=0.5)


def test_sweep_records_the_metric_at_the_start() -> None:
    t = resolve("noisy_gd:sound")
    sw = run_sweep(t, "n", [200, 400, 800], params={"T": 30}, plan=SweepPlan(seeds=4),
                   trivial=True)
    assert sw.trivial.shape == (3,) and np.all(sw.trivial > 0)
    # noisy GD starts at the origin: the trivial value is the excess risk of theta = 0
    assert np.all(sw.utilities.mean(axis=1) < sw.trivial)
    assert np.isnan(run_sweep(t, "n", [200, 400, 800], params={"T": 30},
                              plan=SweepPlan(seeds=2)).trivial).all()
    # the start is the problem's x0, else its w0 (paper 004), else the origin
    assert trivial_output(SimpleNamespace(info={"w0": [1.0, 2.0]}), 2).tolist() == [[1.0, 2.0]]
    with pytest.raises(InputError, match="coordinates"):
        trivial_output(SimpleNamespace(info={"x0": [1.0]}), 2)
    # a control pinning a value runs the main sweep's streams: common random numbers
    a = run_sweep(t, "n", [200, 400, 800], params={"T": 10, "epsilon": 2.0},
                  plan=SweepPlan(seeds=3))
    b = run_sweep(t, "n", [200, 400, 800], params={"T": 10}, plan=SweepPlan(seeds=3),
                  pinned={"epsilon": 2.0})
    assert np.array_equal(a.utilities, b.utilities)


def test_saturation_and_control_on_a_registered_target() -> None:
    """Noisy GD leaves its start far behind, so a lenient window keeps every point; a
    window no run can meet leaves them all out; a control ratio no private run reaches
    does too. Deterministic (fixed root seed)."""
    kw = dict(params=GD, seeds=4, rate="(d / (n * epsilon))**2")
    base = rates("noisy_gd:sound", {"n": N_VALUES}, **kw)
    kept = rates("noisy_gd:sound", {"n": N_VALUES}, saturation=0.9,
                        **kw)
    assert kept.fits[0].exponent == base.fits[0].exponent
    assert kept.fits[0].excluded == [""] * 3
    none = rates("noisy_gd:sound", {"n": N_VALUES}, **kw,
                        saturation=1e-9)
    assert none.verdict is Verdict.INCONCLUSIVE and "3 saturated" in none.fits[0].message
    with pytest.raises(InputError, match="full bound"):
        rates("noisy_gd:sound", {"n": N_VALUES}, params=GD, seeds=4,
                     saturation=0.5)
    ctl = rates("noisy_gd:sound", {"n": N_VALUES}, **kw, control={"epsilon": 50.0},
                       control_ratio=1e12)
    assert ctl.verdict is Verdict.INCONCLUSIVE
    assert "3 not private-dominated" in ctl.fits[0].message
    # an epsilon sweep's control pins epsilon at every point
    eps = rates("noisy_gd:sound", {"epsilon": [0.5, 1.0, 2.0]}, params=GD, seeds=4,
                       control={"epsilon": 50.0}, control_ratio=1e12)
    assert "3 not private-dominated" in eps.fits[0].message
    t = resolve("noisy_gd:sound")
    ctl = run_sweep(t, "epsilon", [0.5, 1.0, 2.0], params=GD, plan=SweepPlan(seeds=2),
                    pinned={"epsilon": 50.0})
    assert [p["epsilon"] for p in ctl.params] == [50.0] * 3
    with pytest.raises(InputError, match="registered target"):
        rates(lambda n, seed: 1.0 / n, {"n": N_VALUES}, theory={"n": -1}, seeds=3,
                     saturation=0.5, rate="1/n")


def test_window_options_reach_the_check_kind_and_the_cli(capsys) -> None:
    spec = CheckSpec("w", "rate", "noisy_gd:sound", params=GD,
                     options={"vary": "n", "values": N_VALUES, "seeds": 4,
                              "saturation": 1e-9, "control": {"epsilon": 50.0},
                              "rate": "(d / (n * epsilon))**2"})
    res = run_check(spec, RunContext())
    assert res.outcome.verdict is Verdict.INCONCLUSIVE and "saturated" in res.outcome.message
    assert res.outcome.evidence["points"][0]["excluded"][0].startswith("saturated")
    code = main(["rates", "noisy_gd:sound", "--vary", "n=250,500,1000", "--param", "T=30",
                 "--seeds", "3", "--saturation", "1e-9", "--rate", "1/n**2", "--quiet"])
    out = capsys.readouterr().out
    assert code == 1 and "(saturated: mean" in out
    assert main(["rates", "noisy_gd:sound", "--vary", "n=250,500,1000", "--saturation",
                 "0", "--quiet"]) == 2
    assert "saturation must be" in capsys.readouterr().out


def test_the_full_multi_term_bound_is_fitted_where_one_term_reads_a_blend() -> None:
    """Utility = (n^-1/3 + 3 n^-1/2) x lognormal seed noise: over n = 1e2..1e5 the two
    terms trade places, so a one-term fit reads a blend of their slopes (about -0.42) and,
    at tolerance 0.05, fails the -1/2 term as a two-sided line; the full bound is matched
    (exponent -1 in 1/rate). The noise is one fixed factor per seed, common to all points
    (as common random numbers make it), so it moves neither slope."""
    rng = np.random.default_rng(3)
    noise = np.exp(0.1 * rng.standard_normal(12))

    def util(n: float, seed: int) -> float:
        return float((n ** (-1 / 3) + 3 * n ** -0.5) * noise[seed % 12])

    grid = {"n": [100, 400, 1600, 6400, 25600, 102400]}
    kw = dict(theory={"n": -0.5}, sided="two", seeds=12, tolerance=0.05, model="power",
              n_boot=300)
    one = rates(util, grid, **kw)
    assert one.verdict is Verdict.FAIL and -0.45 < one.fits[0].exponent < -0.38
    full = rates(util, grid, rate="n**(-1/3) + 3 * n**(-1/2)", **kw)
    f = full.fits[0]
    assert full.verdict is Verdict.PASS and abs(f.exponent + 1) < 1e-9 and f.axis == "rate"
    assert "full bound" in f.message and f.theory == -1.0
    with pytest.raises(InputError, match="finite and > 0"):
        rates(util, grid, theory={"n": -0.5}, seeds=3, rate="n - 1000")
    with pytest.raises(InputError, match="monotonically"):
        rates(util, grid, theory={"n": -0.5}, seeds=3, rate="(n - 1000)**2 + 1")


def test_a_bound_that_rises_with_the_parameter_keeps_the_upper_test_the_right_way() -> None:
    """A d sweep: the bound sqrt(d) grows. A utility growing like d^0.3 is better than the
    theorem and passes; one growing like d^0.8 is worse and fails. Deterministic up to a
    fixed seed factor common to all points (it moves neither slope)."""
    noise = np.exp(0.05 * np.random.default_rng(1).standard_normal(10))
    grid = {"d": [2, 4, 8, 16, 32, 64]}
    kw = dict(theory={"d": 0.5}, seeds=10, rate="sqrt(d / 1000)", model="power", n_boot=300)
    good = rates(lambda d, seed: d**0.3 * noise[seed % 10], grid, **kw)
    bad = rates(lambda d, seed: d**0.8 * noise[seed % 10], grid, **kw)
    assert good.verdict is Verdict.PASS and good.fits[0].theory == 1.0
    assert abs(good.fits[0].exponent - 0.6) < 1e-6
    assert bad.verdict is Verdict.FAIL and abs(bad.fits[0].exponent - 1.6) < 1e-6
    sw = run_sweep(resolve("noisy_gd:sound"), "epsilon", [0.5, 1.0, 2.0], params=GD,
                   plan=SweepPlan(seeds=2))
    with pytest.raises(InputError, match="axis 'gdp'"):
        fit_sweep(sw, Theory("excess_risk", {"epsilon": -2.0}), axis="gdp",
                  rate="1/epsilon**2")
