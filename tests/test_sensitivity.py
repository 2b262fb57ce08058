"""Tests of the sensitivity checker (dpverify.checks.sensitivity).

Every check here is deterministic: fixed root seeds, a derandomized hypothesis search, and
verdicts that depend on exact replayed differences, not on sampled statistics. The planted
variants each break one sensitivity bound; the sound variants must pass on every generator
under both relations.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpverify.cli.app as cli
from dpverify.checks.base import CheckSpec, RunContext, run_check
from dpverify.checks.sensitivity import (
    GENERATORS,
    SearchSettings,
    SensitivityReport,
    check_sensitivity,
    ledger_excess,
    user_target,
)
from dpverify.core.claims import Verdict
from dpverify.core.curator import Curator
from dpverify.core.data import Dataset, NeighbourPair
from dpverify.core.errors import InputError
from dpverify.core.registry import Target

SMALL = {"T": 5, "n": 100}
SGD_SMALL = {"T": 5, "n": 200, "q": 0.1}


def sensitivity(target: Any, params: dict[str, Any] | None = None, *, data: Any = None,
                **search: Any) -> SensitivityReport:
    """:func:`check_sensitivity` with the fields of its :class:`SearchSettings` as keywords."""
    return check_sensitivity(target, params, settings=SearchSettings(**search), data=data)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "sensitivity.md"


def _violated_generators(report):
    return {p.generator for p in report.pairs if p.violated}


# Sound variants --------------------------------------------------------------------------


@pytest.mark.parametrize("target, params", [("noisy_gd:sound", SMALL),
                                            ("dp_sgd:sound", SGD_SMALL)])
def test_sound_variants_pass_every_generator_both_relations(target, params):
    rep = sensitivity(target, params, relation="both", search="all", max_examples=30)
    assert rep.verdict is Verdict.PASS, rep.summary()
    for rel in ("add_remove", "replace_one"):
        seen = {p.generator for p in rep.pairs if p.relation == rel}
        assert set(GENERATORS) | {"hypothesis"} <= seen
    assert not any(p.violated for p in rep.pairs)
    assert rep.invariance and all(r.ok for r in rep.invariance)
    # The bound is tight: some pair reaches it (C under add/remove, 2C under replace-one).
    assert max(p.worst_ratio for p in rep.pairs) == pytest.approx(1.0, abs=1e-9)


# Planted variants ------------------------------------------------------------------------


def test_clipped_mean_caught():
    rep = sensitivity("noisy_gd:planted_clipped_mean", SMALL, max_examples=30)
    assert rep.verdict is Verdict.FAIL
    assert "outlier" in _violated_generators(rep)
    ce = rep.counterexample
    assert ce.generator == "hypothesis" and ce.worst_ratio > 1
    assert np.count_nonzero(ce.record_D["x"]) == 1
    assert any("not bounded" in h for h in rep.hints)


def test_replace_sensitivity_L_caught_with_ratio_two():
    rep = sensitivity("noisy_gd:planted_replace_sensitivity_L", SMALL, max_examples=30)
    assert rep.relations == ["replace_one"] and rep.verdict is Verdict.FAIL
    opposed = next(p for p in rep.pairs if p.generator == "opposed")
    # Clipped gradients C and -C are 2C apart; the variant declared C.
    assert opposed.worst_ratio == pytest.approx(2.0, rel=1e-9)
    ce = rep.counterexample
    assert ce.relation == "replace_one" and ce.generator == "hypothesis"
    assert np.count_nonzero(ce.record_D_prime["x"]) == 1 and ce.worst_ratio > 1


def test_divide_by_count_caught_with_hint():
    rep = sensitivity("noisy_gd:planted_divide_by_count", SMALL, max_examples=30)
    assert rep.verdict is Verdict.FAIL
    ce = rep.counterexample
    assert ce.relation == "add_remove" and np.count_nonzero(ce.record_D["x"]) == 1
    hint = next(h for h in rep.hints if "actual number of records" in h)
    k = float(re.search(r"k ~ ([0-9.]+)", hint).group(1))
    assert k == pytest.approx(SMALL["n"], rel=1e-6)
    # Under replace-one the record count does not change: the same variant passes there.
    rep1 = sensitivity("noisy_gd:planted_divide_by_count", SMALL, search="canaries",
                             relation="replace_one")
    assert rep1.passed, rep1.summary()


def test_nan_record_passing_clipping_caught():
    rep = sensitivity("noisy_gd:planted_nan_passes", SMALL, max_examples=30)
    assert rep.verdict is Verdict.FAIL
    nf = next(p for p in rep.pairs if p.generator == "nonfinite")
    assert nf.violated and nf.nonfinite > 0 and nf.release == 0
    assert not np.all(np.isfinite(rep.counterexample.record_D["x"]))
    assert any("NaN" in h for h in rep.hints)


def test_data_clip_caught_on_finite_records():
    rep = sensitivity("noisy_gd:planted_data_clip", SMALL, max_examples=30,
                            nonfinite=False)
    assert rep.verdict is Verdict.FAIL
    ce = rep.counterexample
    assert ce.nonfinite == 0 and np.all(np.isfinite(ce.record_D["x"]))
    assert np.count_nonzero(ce.record_D["x"]) == 1
    assert any("threshold taken from the data" in h for h in rep.hints)


def test_mean_noise_on_sum_caught():
    rep = sensitivity("noisy_gd:planted_mean_noise_on_sum", SMALL, max_examples=30)
    assert rep.verdict is Verdict.FAIL
    # An ordinary record already breaks the bound by a factor of the order of n.
    assert rep.worst.worst_ratio >= SMALL["n"] / 4
    assert any("mean" in h for h in rep.hints)


@pytest.mark.parametrize("variant", ["planted_no_clip", "planted_mean_noise_on_sum"])
def test_dp_sgd_planted_caught(variant):
    rep = sensitivity(f"dp_sgd:{variant}", SGD_SMALL, max_examples=30)
    assert rep.verdict is Verdict.FAIL and rep.counterexample is not None


def test_hypothesis_shrinks_no_clip_to_one_large_coordinate():
    rep = sensitivity("noisy_gd:planted_no_clip", SMALL, search="hypothesis",
                            max_examples=50)
    assert rep.verdict is Verdict.FAIL
    ce = rep.counterexample
    x = np.asarray(ce.record_D["x"])
    assert ce.generator == "hypothesis" and ce.record_D_prime is None
    assert np.count_nonzero(x) == 1
    # Minimal: just past the clip threshold (logistic gradients are at most ||x||), far
    # below the outliers the canaries use.
    assert 1.0 < np.linalg.norm(x) <= 4.0 and 1.0 < ce.worst_ratio < 4.0
    assert rep.searches[0].examples >= 1


def test_accounting_bugs_are_not_blamed():
    rep = sensitivity("dp_sgd:planted_shuffle_as_poisson", SGD_SMALL, search="canaries",
                            relation="both")
    assert rep.passed, rep.summary()


# Replay arithmetic -----------------------------------------------------------------------


def test_ledger_excess_exact_nan_and_tight_bound():
    D = Dataset(np.eye(3), np.zeros(3))
    cur = Curator.replay(NeighbourPair.add_remove(D, 1), trials=2, rng=0)
    cur.gaussian("tight", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)
    ex = ledger_excess(cur.ledger)
    assert ex.violations == 0 and ex.worst_ratio == pytest.approx(1.0)
    cur.exact("leak", lambda X, y, w: w @ X)
    ex = ledger_excess(cur.ledger)
    assert ex.query == "leak" and ex.worst_ratio == np.inf and ex.violations == 2
    cur.gaussian("nan", lambda X, y, w: (w @ X) * np.nan, sensitivity=1.0, noise_std=1.0)
    assert ledger_excess(cur.ledger).nonfinite == 2


# User algorithms -------------------------------------------------------------------------


def _user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Write the worked example of docs/sensitivity.md as a module; return its name."""
    code = re.search(r"```python\n(# my_algo.py\n.*?)```", DOCS.read_text(), re.S).group(1)
    name = f"my_algo_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.fixture
def only_sensitivity_cli(monkeypatch):
    # Wire only this capability's subcommand, so the test does not depend on the others.
    monkeypatch.setattr(cli, "PLUGGED", {"sensitivity": cli.PLUGGED["sensitivity"]})


def test_user_function_from_cli(tmp_path, monkeypatch, only_sensitivity_cli, capsys):
    mod = _user_module(tmp_path, monkeypatch)
    common = ["--data", f"{mod}:data", "--max-examples", "20", "--quiet"]
    assert cli.main(["sensitivity", f"{mod}:clipped_gd", "--relation", "both", *common]) == 0
    assert cli.main(["sensitivity", f"{mod}:buggy_gd", "--json", "out.json", *common]) == 1
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["verdict"] == "FAIL" and out["metrics"]["query"] == "grad_sum"
    assert out["counterexample"]["relation"] == "add_remove"
    assert any("actual number of records" in h for h in out["hints"])
    # Synthetic data from --param, and a module given as a file path.
    assert cli.main(["sensitivity", f"{mod}.py:clipped_gd", "--param", "n=60",
                     "--param", "d=3", "--search", "canaries", "--quiet"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_user_function_from_python(tmp_path, monkeypatch):
    mod = __import__(_user_module(tmp_path, monkeypatch))
    report = sensitivity(mod.clipped_gd, data=mod.data, relation="both", max_examples=20)
    assert report.passed, report.summary()
    bad = sensitivity(mod.buggy_gd, data=mod.data, max_examples=20)
    assert not bad.passed and bad.counterexample is not None


def test_user_function_in_a_suite_check(tmp_path, monkeypatch):
    mod = _user_module(tmp_path, monkeypatch)
    spec = CheckSpec("u", "sensitivity", f"{mod}:buggy_gd", Verdict.FAIL, {"T": 3},
                     {"data": f"{mod}:data", "search": "canaries", "neighbours": "outlier"})
    res = run_check(spec, RunContext(seed=1))
    assert res.met and res.outcome.evidence["counterexample"]["generator"] == "outlier"
    assert res.outcome.result.generator == "outlier"


def test_user_pair_function(tmp_path, monkeypatch):
    name = f"pairs_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        "import numpy as np\n"
        "def pair():\n"
        "    X = np.zeros((40, 5)); y = np.ones(40)\n"
        "    X2 = X.copy(); X2[3, 1] = 50.0\n"
        "    return (X, y), (X2, y)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rep = sensitivity("noisy_gd:planted_no_clip", {"T": 3}, neighbours=[f"{name}:pair"],
                            search="canaries", random_pairs=0, relation="replace_one")
    (p,) = rep.pairs
    assert p.violated and p.index == 3 and p.record_D_prime["x"][1] == 50.0
    with pytest.raises(InputError, match="replace_one"):
        sensitivity("noisy_gd:sound", {"T": 3}, neighbours=[f"{name}:pair"],
                          relation="add_remove")


def _zero_noise_when_x_fixed(cur, problem, params):
    # Noise scaled by how far x moved; a second query in y declares that 0 too.
    x = np.zeros((cur.trials, cur.d))
    for t in range(2):
        cur.step(t)
        cur.gaussian("x_grad", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)
        cur.gaussian("y_grad", lambda X, y, w: (w * y)[:, :, None].sum(axis=1),
                     sensitivity=float(np.abs(x).sum()), noise_std=0.0)
    return x


def test_zero_noise_scale_caught():
    rep = sensitivity(_zero_noise_when_x_fixed, {"n": 30, "d": 2}, search="canaries",
                            neighbours=["clip_boundary"], random_pairs=0)
    assert rep.verdict is Verdict.FAIL and rep.worst.query == "y_grad"
    assert rep.worst.worst_ratio == np.inf
    assert any("declares sensitivity 0" in h for h in rep.hints)


def _noise_from_setting(cur, setting, params):
    # Sensitivity right for every release, but the noise follows a "public" scale.
    return cur.gaussian("sum", lambda X, y, w: w @ np.clip(X, -0.1, 0.1),
                        sensitivity=0.1 * np.sqrt(cur.d), noise_std=setting["scale"])


def _data_scale(setting, data, params):
    # Derived from the records outside the curator: the data's largest norm.
    return setting.with_constants(scale=float(np.max(np.linalg.norm(data.X, axis=1))))


def test_invariance_flags_a_setting_derived_from_the_data():
    """The algorithm never sees the data (it gets the public setting), but a variant whose
    setting is computed from the records is caught twice: the setting built from D and from
    D' differs (named), and with every released answer the same the noise scale differs."""
    base = user_target(_noise_from_setting, "scaled", {"n": 30, "d": 2})
    variant = dataclasses.replace(base.variant, derive_setting=_data_scale)
    target = Target(dataclasses.replace(base.algorithm, variants={"user": variant}), variant)
    rep = sensitivity(target, search="canaries", neighbours=["outlier"], random_pairs=0)
    assert rep.verdict is Verdict.FAIL
    assert all(p.setting_differences == ["constants.scale"] for p in rep.pairs if p.violated)
    assert any(p.violated for p in rep.pairs)
    diff = rep.invariance[0].differences
    assert any("noise" in d for d in diff), diff


# Bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["sensitivity", "noisy_gd:no_such_variant"],
    ["sensitivity", "no_such_algorithm"],
    ["sensitivity", "no_such_module_xyz:fn"],
    ["sensitivity", "noisy_gd:sound", "--neighbours", "no_such_generator"],
    ["sensitivity", "noisy_gd:sound", "--max-examples", "0"],
    ["sensitivity", "noisy_gd:sound", "--rtol", "-1"],
    ["sensitivity", "noisy_gd:sound", "--relation", "sideways"],
    ["sensitivity", "noisy_gd:sound", "--param", "no_such_param=1"],
    ["sensitivity", "noisy_gd:sound", "--relation", "add_remove", "--param",
     "relation=replace_one"],
])
def test_bad_input_exits_2(argv, only_sensitivity_cli, capsys):
    assert cli.main(argv) == 2


def test_unknown_check_option_is_input_error():
    spec = CheckSpec("x", "sensitivity", "noisy_gd:sound", options={"max_exampels": 3})
    with pytest.raises(InputError, match="max_exampels"):
        run_check(spec, RunContext())


def test_report_is_json_ready():
    rep = sensitivity("noisy_gd:planted_nan_passes", SMALL, search="canaries",
                            neighbours=["nonfinite"], random_pairs=0)
    from dpverify.checks.base import jsonable

    text = json.dumps(jsonable(rep.to_dict()))
    assert '"nan"' in text and "counterexample" in text
    assert sys.getsizeof(text) < 200_000


@pytest.mark.parametrize("declared, violations", [(1.0, 0), (0.4, 3)])
def test_ledger_excess_measures_exponential_scores_in_linf(declared, violations):
    """Scores (x_0 sum, x_1 sum) on a replace-one pair moving record 0 by (0.5, -0.5): the
    l-infinity distance is 0.5 (its l2 would be 0.71), against the declared bound."""
    D = Dataset(np.zeros((4, 2)), np.zeros(4))
    pair = NeighbourPair.replace_one(D, 0, np.array([0.5, -0.5]), 0.0)
    cur = Curator.replay(pair, trials=3, rng=0)
    cur.exponential("pick", lambda X, y, w: w @ X, sensitivity=declared, epsilon=1.0)
    ex = ledger_excess(cur.ledger)
    assert ex.true_difference == pytest.approx(0.5)
    assert ex.worst_ratio == pytest.approx(0.5 / declared)
    assert ex.violations == violations


def test_leaving_out_nonfinite_records_leaves_out_their_canary_too() -> None:
    from dpverify.checks.sensitivity.search import GENERATORS, SearchSettings

    assert "nonfinite" in SearchSettings().neighbours
    assert SearchSettings(nonfinite=False).neighbours == [g for g in GENERATORS
                                                          if g != "nonfinite"]
    # Named explicitly, it is tried whatever the flag says.
    assert SearchSettings(nonfinite=False, neighbours=["nonfinite"]).neighbours == ["nonfinite"]
