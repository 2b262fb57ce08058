"""The lower_bound check kind, and Theorem 8's pair of paper 004 that it runs on."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.kl_problems import make_kl_problem
from dpverify.checks.base import CheckSpec, RunContext, run_check
from dpverify.checks.lower_bounds import LowerBoundOptions, judge_lower_bound, verify_lower_bound
from dpverify.checks.rates.metrics import get_metric
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError
from dpverify.core.registry import resolve
from dpverify.execution.experiment import Experiment
from dpverify.execution.trials import build_problem, run_target

PAIR = {"lb_side": [1, -1]}
BOUND = "0.125 * (1 / (n * lb_epsilon))**kappa"
ZCDP_TO_DP = "rho + 2 * sqrt(rho * log(16 / (1 - exp(-lb_epsilon)))) <= lb_epsilon"
THM8 = {"problem": "theorem8", "kappa": 3.0, "d": 1, "n": 100}


def test_judge_fails_only_when_the_upper_confidence_bound_is_below() -> None:
    """False-FAIL rate at the nominal 1%: exponential errors (skewed like the excess risk)
    whose true pair mean equals the bound, 200 trials a dataset, 400 seeded replications.
    The bootstrap-t bound fails about 1.5% of them (6 expected); the test allows 14, which
    Binomial(400, 0.015) exceeds with probability about 3e-4, and a plain Student t bound
    (about 1.6-3% here) would come close to. Fixed seed: deterministic."""
    rng = np.random.default_rng(7)
    fails = sum(judge_lower_bound([rng.exponential(1.0, 200), rng.exponential(1.0, 200)],
                                  1.0, n_boot=1000, rng=i).verdict is Verdict.FAIL
                for i in range(400))
    assert fails <= 14
    tiny = [np.full(10, 1e-9) + 1e-12 * np.arange(10)] * 2
    assert judge_lower_bound(tiny, 1e-6).verdict is Verdict.FAIL
    assert judge_lower_bound(tiny, 1e-10).verdict is Verdict.PASS
    # a run the metric cannot score counts as an infinite error: never a FAIL
    res = judge_lower_bound([np.array([1e-12, np.nan]), np.full(2, 1e-12)], 0.5)
    assert res.verdict is Verdict.PASS and res.non_finite == 1
    assert res.metrics()["mean"] is None and res.metrics()["means"] == [None, 1e-12]
    with pytest.raises(InputError, match="two datasets"):
        judge_lower_bound([np.ones(5)], 0.5)
    with pytest.raises(InputError, match="finite number"):
        judge_lower_bound([np.ones(5)] * 2, float("nan"))


def test_theorem8_pair_is_mirrored_with_one_public_start() -> None:
    rng = np.random.default_rng(0)
    s = make_kl_problem({**THM8, "lb_side": 1}, rng)
    t = make_kl_problem({**THM8, "lb_side": -1}, np.random.default_rng(0))
    assert np.allclose(s.data.X, -t.data.X) and np.allclose(s.data.y, -t.data.y)
    assert np.allclose(s.optimum, -t.optimum) and np.allclose(s.info["w0"], t.info["w0"])
    for prob in (s, t):  # each minimiser is where the gradient changes sign
        w = prob.optimum[0]
        assert prob.objective(np.array([[w]]))[0] <= prob.objective(np.array([[w + 1e-3]]))[0]
        assert prob.objective(np.array([[w]]))[0] <= prob.objective(np.array([[w - 1e-3]]))[0]
    with pytest.raises(InputError, match="lb_side"):
        make_kl_problem({**THM8, "lb_side": 0}, rng)


def test_algorithms_that_need_smoothness_refuse_the_kinked_instance() -> None:
    for target in ("adaptive_noisy_gd:sound", "kl_spider:paper"):
        t = resolve(target)
        # Up front, where the parameters are resolved ...
        with pytest.raises(InputError, match="L1-smooth"):
            t.algorithm.params(t.variant.name, THM8)
        # ... and again at run time, for parameters put together by hand.
        p = {**t.algorithm.params(t.variant.name), **THM8}
        with pytest.raises(InputError, match="L1-smooth"):
            run_target(t, p, build_problem(t, p, 0), trials=2, rng=1)


def test_excess_risk_of_a_non_finite_output_is_nan() -> None:
    t = resolve("noisy_gd_004:sound")
    p = t.algorithm.params("sound", THM8)
    prob = build_problem(t, p, 0)
    v = get_metric("excess_risk")(prob, np.array([[np.nan], [prob.optimum[0]]]), p)
    assert np.isnan(v[0]) and abs(v[1]) < 1e-12


def _lb(target, params, **options):
    """verify_lower_bound on an experiment, with the options given as a suite would."""
    return verify_lower_bound(Experiment(target, params), LowerBoundOptions.parse(options))


def test_a_private_run_passes_and_an_overclaimed_one_fails() -> None:
    kw = dict(pair=PAIR, bound=BOUND, conditions=[ZCDP_TO_DP, "d == 1"], trials=40)
    ok = _lb("noisy_gd_004:sound", {**THM8, "rho": 0.02}, **kw)
    assert ok.verdict is Verdict.PASS and ok.mean > 100 * ok.bound
    bad = _lb("noisy_gd_004:sound", {**THM8, "rho": 1e4}, claim={"rho": 0.02}, **kw)
    assert bad.verdict is Verdict.FAIL and bad.upper < bad.bound
    assert bad.claim["rho"] == 0.02
    # judged by its own claim, rho = 1e4 is outside the theorem's conditions
    with pytest.raises(InputError, match="does not apply"):
        _lb("noisy_gd_004:sound", {**THM8, "rho": 1e4}, **kw)
    with pytest.raises(InputError, match="no parameter 'side'"):
        _lb("noisy_gd_004:sound", THM8, pair={"side": [1, -1]}, bound=BOUND)
    with pytest.raises(InputError, match="two values"):
        _lb("noisy_gd_004:sound", THM8, pair={"lb_side": [1]}, bound=BOUND)
    with pytest.raises(InputError, match="registered"):
        _lb("mod:f", {}, pair=PAIR, bound=BOUND)
    with pytest.raises(InputError, match="claim overrides"):
        _lb("noisy_gd_004:sound", {**THM8, "rho": 1e4}, claim={"rh0": 0.02}, **kw)
    # an (epsilon, delta) override replaces the target's rho: rho is then unknown to the
    # conditions, which name it
    with pytest.raises(InputError, match="rho"):
        _lb("noisy_gd_004:sound", {**THM8, "rho": 1e4},
            claim={"epsilon": 0.5, "delta": 1e-6}, **kw)


def test_the_check_kind_reads_its_options() -> None:
    spec = CheckSpec("lb", "lower_bound", "noisy_gd_004:sound",
                     params={**THM8, "rho": 1e4},
                     options={"pair": PAIR, "bound": BOUND, "claim": {"rho": 0.02},
                              "trials": 20}, expected=Verdict.FAIL)
    res = run_check(spec, RunContext())
    assert res.met and "below the bound" in res.outcome.message
    assert res.outcome.result.ratio < 1
    with pytest.raises(InputError, match="missing required option.*bound"):
        run_check(CheckSpec("lb", "lower_bound", "noisy_gd_004:sound",
                            options={"pair": PAIR}), RunContext())
    with pytest.raises(InputError, match="unknown option 'bond'"):
        run_check(CheckSpec("lb", "lower_bound", "noisy_gd_004:sound",
                            options={"pair": PAIR, "bound": BOUND, "bond": 1}), RunContext())
