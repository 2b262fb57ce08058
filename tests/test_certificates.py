"""The ``certificate`` check kind: false-certificate rates against a claimed bound."""

from __future__ import annotations

import numpy as np
import pytest

from dpverify.checks.base import CheckSpec, RunContext, available_check_kinds, run_check
from dpverify.checks.certificates import CertificateOptions, judge_certificates, verify_certificates
from dpverify.checks.rates import metrics as rate_metrics
from dpverify.core import registry
from dpverify.core.claims import PrivacyClaim, Verdict
from dpverify.core.data import Dataset
from dpverify.core.errors import InputError
from dpverify.core.registry import Algorithm, Problem, Variant
from dpverify.execution.experiment import Experiment

# A synthetic certifying target: output u ~ Uniform(0, 1) per trial, certified with
# probability ``p_cert``; the property holds where u <= ``holds_below``, so
# P(certified and false) = p_cert (1 - holds_below), known exactly.


def _run(cur, problem, params):
    u = cur.rng.random(cur.trials)
    cert = cur.rng.random(cur.trials) < float(params["p_cert"])
    out = u[:, None]
    if params["certificate"]:
        return np.concatenate([out, cert[:, None].astype(float)], axis=1)
    return out


def _problem(params, rng):
    return Problem(data=Dataset(np.zeros((4, 1)), np.zeros(4)))


def _claim(params):
    return PrivacyClaim(epsilon=1.0, delta=1e-5, relation="replace_one")


SYNTHETIC = Algorithm(
    name="synthetic_certifier", source="tests", description="certifies u ~ U(0, 1)",
    make_problem=_problem,
    defaults={"p_cert": 1.0, "holds_below": 1.0, "claimed": 0.1, "certificate": False},
    variants={"planted": Variant("planted", "planted", _run, _claim, "synthetic")},
)


def _first_column(problem, outputs, params):
    return np.asarray(outputs, float)[:, 0]


@pytest.fixture
def synthetic(monkeypatch):
    """The synthetic target and its metric, registered for one test only."""
    registry._discover()
    monkeypatch.setitem(registry._REGISTRY, SYNTHETIC.name, SYNTHETIC)
    monkeypatch.setitem(rate_metrics.METRICS, "test_first_column", _first_column)
    return "synthetic_certifier:planted"


def _verify(target, trials=400, **params):
    return verify_certificates(Experiment(target, params), CertificateOptions(
        threshold="holds_below", max_false_rate="claimed", metric="test_first_column",
        trials=trials))


def test_the_kind_is_registered():
    assert "certificate" in available_check_kinds()


def test_false_certificates_at_five_times_the_claim_fail(synthetic):
    """P(certified and false) = 0.5 against a claim of 0.1, 400 trials: the lower 95% bound
    sits near 0.46, so a PASS would need 60 or fewer false of 400 (probability < 1e-60)."""
    res = _verify(synthetic, holds_below=0.5)
    assert res.verdict == Verdict.FAIL
    lo, hi = res.bounds()
    assert 0.1 < lo < 0.5 < hi
    assert res.certified == 400


def test_never_false_certificates_pass(synthetic):
    """Every certificate true: 0 false of 400 can only PASS (the lower bound is 0)."""
    res = _verify(synthetic, holds_below=1.0)
    assert res.verdict == Verdict.PASS
    assert res.false == 0 and res.metrics()["true_among_certified"] == 1.0


def test_false_certificates_at_the_claimed_rate_pass(synthetic):
    """Rate exactly 0.1 = the claim: a FAIL is a false alarm, probability <= 0.05 by the
    one-sided Clopper-Pearson construction (fixed seed 0 makes it deterministic)."""
    res = _verify(synthetic, holds_below=0.9)
    assert res.verdict == Verdict.PASS
    assert res.bounds()[0] <= 0.1 <= res.bounds()[1]


def test_nothing_certified_is_inconclusive(synthetic):
    res = _verify(synthetic, trials=50, p_cert=0.0, holds_below=0.0)
    assert res.verdict == Verdict.INCONCLUSIVE and res.certified == 0


def test_uncertified_trials_never_count_as_false(synthetic):
    """Half certified, the property never holds: P(certified and false) = 0.5, while an
    uncertified false output is not a false certificate. 400 trials: counts within 5 sd."""
    res = _verify(synthetic, p_cert=0.5, holds_below=0.0)
    assert res.false == res.certified
    assert abs(res.certified - 200) < 5 * 10


def test_null_false_alarm_rate_stays_below_alpha():
    """judge_certificates on 300 independent null data sets (false rate = claim = 0.1, 200
    trials each, seed 3): FAIL at most alpha = 0.05 of the time. With 300 repetitions the
    frequency exceeds 0.09 with probability < 1e-3 if the true rate is <= 0.05."""
    rng = np.random.default_rng(3)
    vals = rng.random((300, 200))
    fails = [judge_certificates(np.ones(200, bool), v, threshold=0.9,
                                max_false_rate=0.1).verdict == Verdict.FAIL for v in vals]
    assert np.mean(fails) <= 0.09


def test_nan_metric_counts_as_false():
    res = judge_certificates(np.array([True, True]), np.array([np.nan, 0.0]), threshold=1.0,
                             max_false_rate=0.5)
    assert res.false == 1 and res.undefined == 1


def test_check_kind_reads_options_and_rejects_bad_ones(synthetic):
    spec = CheckSpec("c", "certificate", synthetic, Verdict.FAIL, params={"holds_below": 0.5},
                     options={"trials": 100, "metric": "test_first_column",
                              "threshold": "holds_below", "max_false_rate": 0.1})
    res = run_check(spec, RunContext(seed=0))
    assert res.outcome.verdict == Verdict.FAIL and res.met
    assert res.outcome.result.trials == 100
    assert "first_column" in str(res.outcome.evidence["summaries"])
    bad = CheckSpec("c", "certificate", synthetic, options={"trials": 10, "threshold": 1,
                                                           "max_false_rate": 0.1, "oops": 1})
    with pytest.raises(InputError, match="oops"):
        run_check(bad, RunContext())
    missing = CheckSpec("c", "certificate", synthetic,
                        options={"trials": 10, "metric": "test_first_column",
                                 "max_false_rate": 0.1})
    with pytest.raises(InputError, match="threshold"):
        run_check(missing, RunContext())


def test_outputs_without_a_flag_column_are_refused():
    with pytest.raises(InputError, match="does not certify"):
        verify_certificates(Experiment("noisy_gd:sound", {"T": 2}), CertificateOptions(
            threshold=1.0, max_false_rate=0.1, metric="grad_norm", trials=2))


def test_the_run_is_reproducible_from_its_seed(synthetic):
    opts = CertificateOptions(threshold="holds_below", max_false_rate=0.1,
                              metric="test_first_column", trials=64, block_size=16)
    a = verify_certificates(Experiment(synthetic, {"holds_below": 0.5}), opts)
    b = verify_certificates(Experiment(synthetic, {"holds_below": 0.5}), opts)
    assert (a.false, a.certified) == (b.false, b.certified)
