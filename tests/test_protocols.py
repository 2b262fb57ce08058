"""The ``protocol`` check kind: a paper's table rerun, its comparative claims judged."""

from __future__ import annotations

import numpy as np
import pytest

from dpverify.checks.base import CheckSpec, RunContext, run_check
from dpverify.checks.protocols import ProtocolOptions, compare, run_protocol
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError
from dpverify.execution.experiment import Experiment

GD = {"T": 10, "n": 40}


def _options(**kw) -> ProtocolOptions:
    base = {"label": "a", "metrics": ("excess_risk",), "trials": 8}
    return ProtocolOptions.parse({**base, **kw})


@pytest.mark.statistical
def test_compare_controls_its_false_fail_rate():
    """Two identical distributions: a contradicted claim (FAIL) at level 0.05 must come up
    in at most about 5% of 400 repetitions (binomial 99.9% bound: 37 of 400). Seed 0."""
    rng = np.random.default_rng(0)
    fails = sum(compare(rng.normal(size=10), rng.normal(size=10), higher=False,
                        level=0.05)["verdict"] == "FAIL" for _ in range(400))
    assert fails <= 37


def test_compare_orients_higher_and_counts_nan_as_worst():
    a, b = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), np.array([7.0, 8, 9, 10, 11, 12])
    assert compare(b, a, higher=True, level=0.01)["verdict"] == "PASS"
    assert compare(b, a, higher=False, level=0.01)["verdict"] == "FAIL"
    worst = np.full(6, np.nan)
    assert compare(a, worst, higher=False, level=0.01)["verdict"] == "PASS"


def test_options_are_checked_at_load():
    with pytest.raises(InputError, match="no method"):
        _options(paper={"b": {"excess_risk": 1.0}})
    with pytest.raises(InputError, match="does not run"):
        _options(claims=[{"better": "a", "worse": "b", "metric": "excess_risk"}])
    with pytest.raises(InputError, match="'target'"):
        _options(methods={"b": {"params": {}}})
    with pytest.raises(InputError, match="better, worse, metric"):
        _options(methods={"b": {"target": "noisy_gd:sound"}},
                 claims=[{"better": "a", "worse": "b"}])
    with pytest.raises(InputError):
        _options(metrics=["no_such_metric"])


def test_methods_must_share_the_records():
    exp = Experiment("noisy_gd:sound", GD)
    opts = _options(methods={"b": {"target": "noisy_gd:sound", "params": {"T": 10,
                                                                          "n": 41}}})
    with pytest.raises(InputError, match="other records"):
        run_protocol(exp, opts)


def test_a_contradicted_claim_fails_and_the_paper_numbers_are_reported():
    """The same method at epsilon 0.05 claimed better than at epsilon 50: contradicted."""
    spec = CheckSpec(
        "p", "protocol", "noisy_gd:sound", expected=Verdict.FAIL,
        params={**GD, "epsilon": 0.05},
        options={"label": "eps 0.05", "metrics": ["excess_risk"], "trials": 8,
                 "methods": {"eps 50": {"target": "noisy_gd:sound",
                                        "params": {**GD, "epsilon": 50.0}}},
                 "paper": {"eps 0.05": {"excess_risk": 0.01}},
                 "claims": [{"better": "eps 0.05", "worse": "eps 50",
                             "metric": "excess_risk"}],
                 "differences": "a test"})
    res = run_check(spec, RunContext(seed=0))
    assert res.met, res.outcome.message
    r = res.outcome.result.results
    assert r["eps 0.05"]["excess_risk"]["paper"] == 0.01
    assert r["eps 50"]["excess_risk"]["paper"] is None
    assert r["eps 0.05"]["excess_risk"]["median"] > r["eps 50"]["excess_risk"]["median"]
    assert res.outcome.evidence["differences"] == "a test"


def test_without_claims_the_table_is_reproduced_only():
    res = run_protocol(Experiment("noisy_gd:sound", GD), _options(trials=3))
    assert res["verdict"] == "PASS" and res["claims"] == []
    with pytest.raises(InputError, match="at least 3"):
        run_protocol(Experiment("noisy_gd:sound", GD), _options(trials=2))


def test_every_method_is_resolved_before_the_first_runs(monkeypatch) -> None:
    import dpverify.checks.protocols as protocols

    def no_run(*args, **kwargs):
        raise AssertionError("a method ran before every method was resolved")

    monkeypatch.setattr(protocols, "_method_values", no_run)
    exp = Experiment("noisy_gd:sound", {"T": 10, "n": 40})
    o = ProtocolOptions(label="ours", metrics=("excess_risk",), trials=4, methods={
        "ok": {"target": "noisy_gd:sound", "params": {"T": 5, "n": 40}},
        "bad": {"target": "noisy_gd:sound", "params": {"T": 0, "n": 40}}})
    with pytest.raises(InputError, match=r"^method 'bad' \(noisy_gd:sound\): parameter 'T' "
                                         r"of noisy_gd takes an integer >= 1, got 0"):
        protocols.run_protocol(exp, o)
