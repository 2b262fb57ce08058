"""Suite files: loading, validation with located errors, running, and the pytest plugin."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dpverify.checks.base import CheckSpec, RunContext
from dpverify.cli.app import main as cli_main
from dpverify.cli.suites import discover, load_suite, run_suites, scaled
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError
from dpverify.core.registry import all_algorithms

GOOD = """
[suite]
name = "tiny"
seed = 11
description = "two quick checks"

[[check]]
id = "gd.sound"
kind = "account"
target = "noisy_gd:sound"
expected = "pass"
[check.params]
T = 3
n = 40
[check.options]
rtol = 0.01
[check.thorough]
rtol = 0.001

[[check]]
id = "gd.half"
kind = "account"
description = "sigma calibrated for half the steps"
target = "noisy_gd:planted_half_steps"
expected = "FAIL"
[check.params]
T = 4
n = 40
"""


def _line(path: Path, pattern: str) -> int:
    """1-based number of the first line of ``path`` matching ``pattern``."""
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if re.search(pattern, line):
            return i
    raise AssertionError(f"{pattern!r} not in {path}")


def test_load_a_valid_suite(write_suite):
    path = write_suite(GOOD)
    suite = load_suite(path)
    assert (suite.name, suite.seed, suite.description) == ("tiny", 11, "two quick checks")
    a, b = suite.checks
    assert (a.id, a.kind, a.target, a.expected) == ("gd.sound", "account", "noisy_gd:sound",
                                                    Verdict.PASS)
    assert dict(a.params) == {"T": 3, "n": 40}
    assert a.source == f"{path}:{_line(path, 'id = .gd.sound')}"
    assert b.expected is Verdict.FAIL
    assert scaled(a, "quick").options == {"rtol": 0.01}
    assert scaled(a, "thorough").options == {"rtol": 0.001}
    # The description travels with the spec, through scaling, into the result record.
    assert (a.description, b.description) == ("", "sigma calibrated for half the steps")
    assert scaled(b, "thorough").description == b.description
    assert scaled(b, "thorough").source == b.source


def test_a_description_reaches_the_result_record(write_suite):
    suite = load_suite(write_suite(GOOD))
    run = run_suites([suite], RunContext(seed=0))
    without, with_desc = (r.to_dict() for r in run.results)
    assert with_desc["description"] == "sigma calibrated for half the steps"
    assert "description" not in without  # records of undescribed checks are unchanged


def test_the_shipped_suites_load():
    root = Path(__file__).resolve().parents[1] / "suites"
    smoke = load_suite(root / "smoke.toml")
    assert len(smoke.checks) >= 3
    assert {c.expected for c in smoke.checks} == {Verdict.PASS, Verdict.FAIL}


# Each bad suite: (TOML text, a regex of the line the error must name, words it must contain)
BAD = {
    "epsilon_inf": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        epsilon = inf
        """, r"^epsilon", ["epsilon", "inf"]),
    "epsilon_nan": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        epsilon = nan
        """, r"^epsilon", ["epsilon", "nan"]),
    "epsilon_negative": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        epsilon = -1.0
        """, r"^epsilon", ["epsilon", "-1.0"]),
    "delta_above_one": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        T = 3
        delta = 1.5
        """, r"^delta", ["delta", "1.5", "[0, 1)"]),
    "delta_negative": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        delta = -0.1
        """, r"^delta", ["delta", "got -0.1"]),
    "delta_in_options": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.options]
        delta = 2.0
        """, r"^delta", ["delta", "2.0"]),
    "epsilon_in_thorough": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.thorough]
        epsilon = inf
        """, r"^epsilon", ["epsilon", "inf"]),
    "rho_negative": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.options]
        rho = -0.5
        """, r"^rho", ["rho", "-0.5"]),
    "relation_unknown": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        relation = "swap_one"
        """, r"^relation", ["relation", "'swap_one'"]),
    "unknown_algorithm": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "nope"
        """, r"^target", ["unknown algorithm", "'nope'"]),
    "unknown_algorithm_with_variant": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "nope:sound"
        """, r"^target", ["unknown algorithm", "'nope'"]),
    "unknown_variant": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:nope"
        """, r"^target", ["unknown variant", "'nope'", "sound"]),
    "unknown_kind": ("""
        [[check]]
        id = "a"
        kind = "telepathy"
        target = "noisy_gd:sound"
        """, r"^kind", ["unknown check kind", "'telepathy'", "account"]),
    "unknown_parameter": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        T = 3
        warp = 9
        """, r"^warp", ["unknown parameter", "'warp'"]),
    "unknown_check_key": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        tagret = "x"
        """, r"^tagret", ["unknown key", "'tagret'"]),
    "bad_expected": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        expected = "MAYBE"
        """, r"^expected", ["MAYBE"]),
    "missing_target": ("""
        [[check]]
        id = "a"
        kind = "account"
        """, r"^\[\[check", ["target"]),
    "duplicate_id": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        """, None, ["duplicate check id", "'a'"]),
    "no_checks": ("""
        [suite]
        name = "empty"
        """, None, ["at least one [[check]]"]),
    "unknown_top_level": ("""
        [suit]
        name = "typo"
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        """, r"^\[suit\]", ["unknown top-level key", "'suit'"]),
    "check_not_a_table": ("""
        check = [1, 2]
        """, None, ["check"]),
    "description_not_a_string": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        description = ["a", "list"]
        """, r"^description", ["description", "'a'", "must be a string"]),
    "misspelt_option": ("""
        [[check]]
        id = "a"
        kind = "audit"
        target = "noisy_gd:sound"
        [check.options]
        mode = "whitebox"
        trails = 100
        """, r"^trails", ["unknown option 'trails'", "for an audit check", "trials"]),
    "misspelt_thorough_option": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.thorough]
        rtool = 0.1
        """, r"^rtool", ["unknown option 'rtool'", "rtol"]),
    "option_of_the_wrong_type": ("""
        [[check]]
        id = "a"
        kind = "audit"
        target = "noisy_gd:sound"
        [check.options]
        trials = "many"
        """, r"^trials", ["option 'trials'", "an integer", "'many'"]),
    "option_of_another_mode": ("""
        [[check]]
        id = "a"
        kind = "audit"
        target = "noisy_gd:sound"
        [check.options]
        mode = "whitebox"
        distinguisher = "lda"
        """, r"^distinguisher", ["distinguisher", "do not apply to a whitebox audit"]),
    "required_option_missing": ("""
        [[check]]
        id = "a"
        kind = "lower_bound"
        target = "noisy_gd_004:sound"
        [check.options]
        pair = {lb_side = [1, -1]}
        """, None, ["missing required option", "bound"]),
    "seed_not_int": ("""
        [suite]
        seed = "zero"
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        """, r"^seed", ["seed", "'zero'"]),
    "param_not_a_number": ("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        n = 40
        T = "abc"
        """, r"^T =", ["parameter 'T' of noisy_gd takes an integer >= 1", "'abc'"]),
    "count_option_negative": ("""
        [[check]]
        id = "a"
        kind = "audit"
        target = "noisy_gd:sound"
        [check.params]
        n = 40
        [check.options]
        mode = "blackbox"
        trials = -5
        """, r"^trials", ["option 'trials' must be a positive integer", "-5"]),
    "count_option_zero_at_thorough_scale": ("""
        [[check]]
        id = "a"
        kind = "audit"
        target = "noisy_gd:sound"
        [check.options]
        trials = 100
        [check.thorough]
        trials = 0
        """, r"^trials = 0", ["option 'trials' must be a positive integer", "got 0"]),
    "privacy_value_in_options_not_params": ("""
        [[check]]
        id = "a"
        kind = "audit"
        target = "noisy_gd:sound"
        [check.params]
        epsilon = 1.0
        [check.options]
        epsilon = -1.0
        """, r"^epsilon = -1", ["epsilon", "-1.0"]),
    "seed_negative": ("""
        [suite]
        seed = -1
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        """, r"^seed", ["seed must be an integer >= 0", "-1"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_suites_are_input_errors_naming_file_line_and_value(write_suite, case):
    text, line_pattern, words = BAD[case]
    path = write_suite(text)
    with pytest.raises(InputError) as info:
        load_suite(path)
    msg = str(info.value)
    m = re.match(rf"{re.escape(str(path))}:(\d+): ", msg)
    assert m, f"error does not start with file:line: {msg}"
    if line_pattern is not None:
        assert int(m.group(1)) == _line(path, line_pattern), msg
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"


@pytest.mark.parametrize("target, params, key, words", [
    # kappa = 1 is in its range, but not the power problem's (it needs kappa > 1): the
    # algorithm's rule over several parameters refuses it when the suite loads.
    ("adaptive_noisy_gd:sound", 'problem = "power"\nkappa = 1.0', "kappa",
     "parameters of adaptive_noisy_gd: the power problem needs kappa > 1"),
    # T = 400 is in its range, but no single pass of 400 steps fits in the n = 200
    # records of the test problem, whatever period it derives: refused at load.
    ("o2nc_fo:sound", "T = 400", "T",
     "parameters of o2nc_fo: a single pass of T = 400 steps needs at least 400 records"),
    # T = 150 fits at some periods, but not at the one the algorithm derives from the
    # problem's constants, which only the run shows: found when the check runs.
    ("o2nc_fo:sound", "T = 150", "T", "a single pass of T = 150 steps (Sigma = 5"),
])
def test_bad_input_of_a_check_names_its_own_line(target: str, params: str, key: str,
                                                 words: str, write_suite, tmp_path,
                                                 capsys):
    """At load or when the check runs, the error points at the offending value's line,
    not at the check's id, and no report is written."""
    path, out = _refused(write_suite, f'kind = "account"\ntarget = "{target}"\n'
                         f"[check.params]\n{params}", tmp_path, capsys)
    assert f"{path}:{_line(path, rf'^{key} = ')}: {words}" in out, out


def test_a_check_whose_parameters_break_a_rule_at_thorough_scale_is_refused_at_load(
        write_suite, tmp_path, capsys) -> None:
    """Digits-ST holds 2,000 records at neither class balance: quick scale's n = 500
    fits, the algorithm's thorough n = 2000 does not, and the suite must run at both."""
    path, out = _refused(write_suite, 'kind = "account"\ntarget = "dp_sgd_dro:sound"\n'
                         '[check.params]\ndataset = "digits_st"', tmp_path, capsys)
    assert (f"{path}:1: at scale thorough: parameters of dp_sgd_dro: digits_st has 901 "
            "negatives and 896 positives: n = 2000") in out, out


def _refused(write_suite, check: str, tmp_path: Path, capsys) -> tuple[Path, str]:
    """Write a suite of one check (its lines after the id) that must be refused, run it
    (exit 2, no report); returns its path and what it printed."""
    path = write_suite(f'[[check]]\nid = "a"\n{check}\n')
    report = tmp_path / "r"
    assert cli_main(["run", str(path), "--report-dir", str(report), "--quiet"]) == 2
    assert not report.exists()
    return path, capsys.readouterr().out


@pytest.mark.parametrize("baseline_params, thorough, line, words", [
    ("{ T = -4 }", "", "^baseline_params = ", "parameter 'T' of noisy_gd takes an integer"),
    # Each value in range, the pair refused by the baseline's own rule, at thorough scale.
    ("{ T = 4 }", "[check.thorough]\nbaseline_params = { setting = 'pl', lam = 0.0 }",
     "^baseline_params = { setting", "the PL schedule needs lam > 0"),
])
def test_a_baseline_the_algorithm_refuses_is_refused_at_load(baseline_params: str,
                                                             thorough: str, line: str,
                                                             words: str, write_suite,
                                                             tmp_path, capsys) -> None:
    """A compare check's other arm is resolved when the suite loads, at both scales:
    before any work, at the line of the option that sets it."""
    base = "noisy_gd:sound" if "noisy_gd" in words else "dp_gd_002:paper"
    path, out = _refused(write_suite, f'kind = "compare"\ntarget = "dp_sgd_002:paper"\n'
                         f'[check.options]\nbaseline = "{base}"\n'
                         f"baseline_params = {baseline_params}\nseeds = 2\n{thorough}",
                         tmp_path, capsys)
    scale = "at scale thorough: " if thorough else ""
    assert f"{path}:{_line(path, line)}: {scale}{base}: " in out and words in out, out


@pytest.mark.parametrize("options, line, words", [
    # 150 steps need at least 150 records: the grid's first point, n = 100, cannot.
    ("vary = 'n'\nvalues = [100, 400, 800]", "^values = ",
     "a single pass of T = 150 steps needs at least 150 records"),
    # ... nor, at thorough scale, a grid that its thorough table sets.
    ("vary = 'n'\nvalues = [400, 800, 1600]\n[check.thorough]\nvalues = [100, 400, 800]",
     r"^values = \[100", "a single pass of T = 150 steps needs at least 150 records"),
    # The control's sweep pins T over the check's own.
    ("vary = 'epsilon'\nvalues = [0.5, 1.0, 2.0]\ncontrol = { T = 400 }", "^control = ",
     "a single pass of T = 400 steps needs at least 400 records"),
    # A grid the check cannot set up at all is the check's own error.
    ("vary = 'nosuch'\nvalues = [1, 2, 3]", r"^\[\[check\]\]",
     "o2nc_zo:paper has no parameter 'nosuch'"),
])
def test_every_point_of_a_rate_check_is_resolved_at_load(options: str, line: str, words: str,
                                                       write_suite, tmp_path,
                                                       capsys) -> None:
    """A rate check's grid points, and its control's, are resolved when the suite loads,
    at both scales: before any work, at the line of the option that sets them."""
    path, out = _refused(write_suite, 'kind = "rate"\ntarget = "o2nc_zo:paper"\n'
                         f"[check.params]\nT = 150\n[check.options]\n{options}",
                         tmp_path, capsys)
    scale = "at scale thorough: " if "[check.thorough]" in options else ""
    assert f"{path}:{_line(path, line)}: {scale}o2nc_zo:paper: " in out and words in out, out


@pytest.mark.parametrize("method, words", [
    ('{ target = "noisy_gd:sound", params = { T = 0 } }',
     "noisy_gd:sound: parameter 'T' of noisy_gd takes an integer >= 1, got 0"),
    ('{ target = "noisy_gdd:sound" }', "unknown algorithm 'noisy_gdd'"),
])
def test_a_protocol_method_is_resolved_at_load(method: str, words: str, write_suite,
                                               tmp_path, capsys) -> None:
    path, out = _refused(write_suite, 'kind = "protocol"\ntarget = "noisy_gd:sound"\n'
                         '[check.options]\nlabel = "ours"\nmetrics = ["excess_risk"]\n'
                         f"methods = {{ other = {method} }}", tmp_path, capsys)
    assert f"{path}:{_line(path, '^methods = ')}: " in out and words in out, out


def test_duplicate_id_names_the_second_entry(write_suite):
    path = write_suite(BAD["duplicate_id"][0])
    with pytest.raises(InputError, match=rf"{re.escape(str(path))}:6: "):
        load_suite(path)


def test_invalid_toml_names_file_and_line(write_suite):
    path = write_suite("""
        [[check]]
        id = "a"
        kind = = "account"
        """)
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: invalid TOML: .*line 3"):
        load_suite(path)


def test_missing_suite_file(tmp_path):
    with pytest.raises(InputError, match="no suite file .*absent.toml"):
        load_suite(tmp_path / "absent.toml")
    with pytest.raises(InputError, match="no suite file or folder .*absent"):
        discover([tmp_path / "absent"])


def test_a_user_callable_target_is_imported_at_load_time(write_suite):
    ok = write_suite("""
        [[check]]
        id = "a"
        kind = "account"
        target = "math:sqrt"
        """, "ok.toml")
    assert load_suite(ok).checks[0].target == "math:sqrt"
    bad = write_suite("""
        [[check]]
        id = "a"
        kind = "account"
        target = "math:no_such_function"
        """, "bad.toml")
    with pytest.raises(InputError, match="no_such_function"):
        load_suite(bad)


def test_file_path_callables_are_read_from_the_suite_files_folder(tmp_path, monkeypatch):
    sub = tmp_path / "suites"
    sub.mkdir()
    (sub / "mech.py").write_text("def f(data, rng, trials):\n    return data\n\n"
                                 "def pair():\n    return [0.0], [1.0]\n")
    suite = sub / "s.toml"
    suite.write_text(textwrap.dedent("""
        [[check]]
        id = "a"
        kind = "audit"
        target = "mech.py:f"
        [check.options]
        epsilon = 1.0
        delta = 1e-5
        neighbours = "mech.py:pair,random"
        """))
    monkeypatch.chdir(tmp_path)  # not the suite's folder: mech.py is not here
    spec = load_suite(suite).checks[0]
    assert spec.target == str(Path("suites") / "mech.py") + ":f"
    assert spec.options["neighbours"] == str(Path("suites") / "mech.py") + ":pair,random"
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_suite(suite).checks[0].target == f"{sub / 'mech.py'}:f"
    # A file beside the working directory but not beside the suite is not taken.
    (sub / "mech.py").rename(elsewhere / "mech.py")
    with pytest.raises(InputError, match=re.escape(str(sub / "mech.py"))):
        load_suite(suite)


def test_discover_finds_suites_in_folders(tmp_path):
    (tmp_path / "sub").mkdir()
    for p in (tmp_path / "a.toml", tmp_path / "sub" / "b.toml"):
        p.write_text(textwrap.dedent(GOOD))
    assert discover([tmp_path]) == [tmp_path / "a.toml", tmp_path / "sub" / "b.toml"]
    assert discover([tmp_path / "a.toml"]) == [tmp_path / "a.toml"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no suite files found"):
        discover([tmp_path / "empty"])


def test_a_suite_file_named_twice_is_discovered_once(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    a, b = tmp_path / "a.toml", tmp_path / "sub" / "b.toml"
    for p in (a, b):
        p.write_text(textwrap.dedent(GOOD))
    monkeypatch.chdir(tmp_path)
    assert discover([a, "a.toml", tmp_path / "sub" / ".." / "a.toml", tmp_path]) == [a, b]


def test_the_same_suite_twice_runs_its_checks_once(write_suite, tmp_path):
    import json

    path = write_suite(GOOD)
    report = tmp_path / "r"
    assert cli_main(["run", str(path), str(path), "--report-dir", str(report), "--quiet"]) == 0
    ids = [c["id"] for c in json.loads((report / "report.json").read_text())["checks"]]
    assert ids == ["gd.sound", "gd.half"]


def test_two_suite_files_may_use_one_id_each_result_kept_under_its_file(write_suite,
                                                                         tmp_path):
    """A check is known by its suite file and its id (as reports merge them): two files that
    both say ``gd.sound`` run both, where one file named twice runs once."""
    first, second = write_suite(GOOD, "first.toml"), write_suite(GOOD, "second.toml")
    report = tmp_path / "r"
    assert cli_main(["run", str(first), str(second), "--report-dir", str(report),
                     "--quiet"]) == 0
    checks = json.loads((report / "report.json").read_text())["checks"]
    assert sorted((Path(c["source"].split(":")[0]).name, c["id"]) for c in checks) == [
        ("first.toml", "gd.half"), ("first.toml", "gd.sound"),
        ("second.toml", "gd.half"), ("second.toml", "gd.sound")]


def test_run_suites_meets_expectations_and_filters(write_suite):
    suite = load_suite(write_suite(GOOD))
    seen = []
    run = run_suites([suite], RunContext(seed=0), on_result=seen.append)
    assert [r.spec.id for r in run.results] == ["gd.sound", "gd.half"]
    assert [r.outcome.verdict for r in run.results] == [Verdict.PASS, Verdict.FAIL]
    assert run.all_met and len(seen) == 2
    only = run_suites([suite], RunContext(seed=0), only="half")
    assert [r.spec.id for r in only.results] == ["gd.half"]


def test_a_check_not_meeting_its_expectation_is_reported(write_suite):
    suite = load_suite(write_suite(GOOD.replace('expected = "FAIL"', 'expected = "PASS"')))
    run = run_suites([suite], RunContext(seed=0))
    assert not run.all_met
    assert [r.met for r in run.results] == [True, False]


def test_every_registered_target_resolves_with_its_defaults():
    for algo in all_algorithms():
        for v in algo.variants:
            spec = CheckSpec(f"{algo.name}.{v}", "account", f"{algo.name}:{v}")
            assert spec.target.split(":")[1] in algo.variants


def _pytest(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def test_pytest_collects_suite_files(write_suite, tmp_path):
    """``pytest`` runs one item per check of a suite file: a met expectation passes, an unmet
    one fails with the verdict in its message, and a bad suite is a collection error naming
    its file and line."""
    write_suite("""
        [[check]]
        id = "met"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        T = 2
        n = 30

        [[check]]
        id = "unmet"
        kind = "account"
        target = "noisy_gd:planted_half_steps"
        expected = "PASS"
        [check.params]
        T = 2
        n = 30
        """, "good.toml")
    write_suite("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        epsilon = nan
        """, "bad.toml")
    (tmp_path / "notes.toml").write_text('title = "not a suite"\n')
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
         "--continue-on-collection-errors", "."],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "1 failed, 1 passed, 1 error" in out, out
    assert "PASSED good.toml::met" in out and "FAILED good.toml::unmet" in out
    assert "unmet: verdict FAIL, expected PASS" in out
    assert "bad.toml:6" in out and "epsilon" in out


def test_pytest_shows_bad_input_as_its_message_not_a_traceback(write_suite, tmp_path):
    write_suite("""
        [[check]]
        id = "records_run_out"
        kind = "account"
        target = "o2nc_fo:sound"
        [check.params]
        T = 150
        """, "runtime.toml")
    write_suite("""
        [[check]]
        id = "a"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        T = "many"
        """, "load.toml")
    res = _pytest(["-q", "--continue-on-collection-errors", "."], tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "1 failed, 1 error" in out, out
    assert "bad input: " in out and "a single pass of T = 150 steps" in out, out
    assert "load.toml:6: parameter 'T' of noisy_gd takes an integer >= 1, got 'many'" in out, out
    assert "Traceback" not in out and "site-packages" not in out, out
    assert len(out.splitlines()) < 30, out


def test_every_shipped_suite_loads():
    """Every suite in suites/ validates: a typo there would break `dpverify run` for users."""
    from pathlib import Path

    from dpverify.cli.suites import discover, load_suite

    root = Path(__file__).resolve().parents[1] / "suites"
    loaded = [load_suite(p) for p in discover([root])]
    assert len(loaded) >= 6 and all(s.checks for s in loaded)


def test_check_options_may_ask_for_both_relations(tmp_path):
    from dpverify.cli.suites import load_suite

    p = tmp_path / "s.toml"
    p.write_text('[[check]]\nid = "a"\nkind = "sensitivity"\ntarget = "noisy_gd:sound"\n'
                 '[check.options]\nrelation = "both"\n')
    assert load_suite(p).checks[0].options["relation"] == "both"
    p.write_text('[[check]]\nid = "a"\nkind = "account"\ntarget = "noisy_gd:sound"\n'
                 '[check.params]\nrelation = "both"\n')
    with pytest.raises(InputError, match="relation"):
        load_suite(p)


def test_a_misspelt_option_stops_the_run_before_any_check(write_suite, tmp_path, capsys):
    """The second check's typo is found at load: exit 2, nothing run, no report written."""
    path = write_suite("""
        [[check]]
        id = "first"
        kind = "account"
        target = "noisy_gd:sound"
        [check.params]
        T = 3
        [[check]]
        id = "second"
        kind = "audit"
        target = "noisy_gd:sound"
        [check.options]
        trails = 100
        """)
    out_dir = tmp_path / "report"
    code = cli_main(["run", str(path), "--report-dir", str(out_dir)])
    captured = capsys.readouterr()
    assert code == 2
    assert "unknown option 'trails'" in captured.out + captured.err
    assert "first" not in captured.err  # no check started
    assert not out_dir.exists()
