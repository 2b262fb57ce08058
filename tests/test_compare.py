"""The ``compare`` check kind: a method against a baseline, as a paper's figure claims."""

from __future__ import annotations

import numpy as np
import pytest

from dpverify.checks.base import CheckSpec, RunContext, run_check
from dpverify.checks.compare import CompareOptions, compare_arms, holm
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError
from dpverify.execution.experiment import Experiment

# noisy_gd on its default problem: 20 steps reach a lower excess risk than 1 step, at every
# epsilon, by far more than the runs' spread.
PARAMS = {"n": 200, "d": 3}


def _check(claim: str, subject_T: int, baseline_T: int, seeds: int = 8,
           **options) -> object:
    spec = CheckSpec("noisy_gd.sound.compare", "compare", "noisy_gd:sound",
                     params=PARAMS, options={"baseline": "noisy_gd:sound",
                                             "subject_params": {"T": subject_T},
                                             "baseline_params": {"T": baseline_T},
                                             "vary": "epsilon", "values": [1.0, 4.0],
                                             "seeds": seeds, "claim": claim, **options})
    return run_check(spec, RunContext(seed=0)).outcome


def test_a_true_ordering_passes_and_the_reverse_fails():
    """Seeded: the two orderings are decided at level 0.05 each."""
    good = _check("less", 20, 1)
    assert good.verdict == Verdict.PASS, good.message
    assert all(p["confirmed"] for p in good.result.points)
    assert good.result.points[0]["subject_epsilon"] == pytest.approx(1.0, rel=1e-3)
    bad = _check("greater", 20, 1)
    assert bad.verdict == Verdict.FAIL and "refuted" in bad.message


def test_the_papers_data_travel_untouched_into_the_evidence():
    paper = {"figure": "Figure 1", "numbers": "none printed", "differences": ["n scaled"]}
    out = _check("less", 20, 1, paper=paper, account=False)
    assert out.evidence["paper"] == paper
    assert out.result.points[0]["subject_epsilon"] is None


def test_identical_arms_decide_nothing():
    """Same target and settings, independent streams: each ordering is established with
    probability at most 0.05 (seeded here)."""
    out = _check("less", 5, 5, seeds=30)
    assert out.verdict == Verdict.INCONCLUSIVE


def test_arms_must_see_the_same_data():
    exp = Experiment("noisy_gd:sound", PARAMS)
    with pytest.raises(InputError, match="different data"):
        compare_arms(exp, CompareOptions(baseline="noisy_gd:sound",
                                         baseline_params={"n": 150}, seeds=3))


@pytest.mark.parametrize("bad", [{"seeds": 1}, {"vary": "epsilon"}, {"values": []},
                                 {"claim": "better"}, {"confidence": 1.5}])
def test_bad_options_are_refused(bad):
    with pytest.raises(InputError):
        CompareOptions.parse({"baseline": "noisy_gd:sound", **bad})


def test_holm_controls_the_family():
    p = np.array([0.001, 0.02, 0.04, 0.5])
    adj = holm(p)
    assert np.all(adj >= p) and adj[0] == pytest.approx(0.004) and adj[-1] == 0.5


def test_every_arm_is_resolved_before_the_first_runs(monkeypatch) -> None:
    """The grid's last value cannot be a dataset size: the comparison is refused before
    any arm runs, naming the arm and the value."""
    import dpverify.checks.compare as compare

    def no_run(*args, **kwargs):
        raise AssertionError("an arm ran before every arm was resolved")

    monkeypatch.setattr(compare, "_arm", no_run)
    exp = Experiment("noisy_gd:sound", {"T": 2})
    o = CompareOptions(baseline="noisy_gd:sound", baseline_params={"T": 1}, vary="n",
                       values=(50, 100, 2.5), seeds=2)
    with pytest.raises(InputError, match=r"^noisy_gd:sound at n = 2\.5: parameter 'n' of "
                                         r"noisy_gd takes an integer"):
        compare.compare_arms(exp, o)
