"""The command line: run, list, account, and bad input (exit 2, nothing written)."""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dpverify.cli.app import main, parse_params
from dpverify.cli.suites import load_suite
from dpverify.core.errors import InputError
from dpverify.core.registry import get_algorithm

SMOKE = Path(__file__).resolve().parents[1] / "suites" / "smoke.toml"
BASELINE_TARGETS = [f"{a}:{v}" for a in ("noisy_gd", "dp_sgd") for v in get_algorithm(a).variants]

QUICK = """
[suite]
name = "quick"

[[check]]
id = "gd.sound"
kind = "account"
target = "noisy_gd:sound"
[check.params]
T = 3
n = 40
"""


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """``dpverify run suites/smoke.toml`` once, in-process: (exit code, report dir, --json)."""
    root = tmp_path_factory.mktemp("smoke")
    rc = main(["run", str(SMOKE), "--report-dir", str(root / "report"), "--quiet",
               "--json", str(root / "copy.json")])
    return rc, root / "report", root / "copy.json"


def test_run_smoke_exits_zero_and_writes_both_reports(smoke):
    rc, report_dir, _ = smoke
    assert rc == 0
    assert sorted(p.name for p in report_dir.iterdir()) == ["report.html", "report.json",
                                                            "report.md"]


def test_report_json_schema(smoke):
    _, report_dir, copy = smoke
    rep = json.loads((report_dir / "report.json").read_text())
    from dpverify.report.writer import SCHEMA_VERSION

    assert rep["schema_version"] == SCHEMA_VERSION and SCHEMA_VERSION.startswith("2.")
    assert rep["seed"] == 0 and rep["scale"] == "quick"
    for pkg in ("python", "dpverify", "numpy", "scipy", "dp-accounting"):
        assert isinstance(rep["packages"][pkg], str)
    specs = load_suite(SMOKE).checks
    assert rep["suites"] == [{"name": "smoke", "path": str(SMOKE), "checks": len(specs),
                              "seed": 0}]
    assert rep["summary"]["checks"] == rep["summary"]["met"] == len(rep["checks"])
    assert [c["id"] for c in rep["checks"]] == [s.id for s in specs]
    for c, spec in zip(rep["checks"], specs, strict=True):
        assert {"id", "kind", "target", "expected", "verdict", "met", "metrics"} <= set(c)
        assert (c["kind"], c["target"], c["expected"]) == (spec.kind, spec.target,
                                                            spec.expected.value)
        assert c["met"] is True and c["verdict"] == c["expected"]
        if c["kind"] in ("account", "audit"):
            m = c["metrics"]
            assert isinstance(m["epsilon_accountant"], float)
            assert isinstance(m["epsilon_claimed"], float)
    # --json writes the same report.
    assert json.loads(copy.read_text())["checks"] == rep["checks"]


def test_the_planted_half_counting_accountant_is_caught(smoke):
    _, report_dir, _ = smoke
    checks = {c["id"]: c for c in json.loads((report_dir / "report.json").read_text())["checks"]}
    for cid in ("noisy_gd.planted_half_steps.account", "dp_sgd.planted_half_steps.account",
                "dp_sgd.planted_shuffle_as_poisson.account"):
        c = checks[cid]
        assert (c["expected"], c["verdict"], c["met"]) == ("FAIL", "FAIL", True)
        assert c["metrics"]["epsilon_accountant"] > 1.1 * c["metrics"]["epsilon_claimed"]
    for cid in ("noisy_gd.sound.account", "noisy_gd.sound.account.replace_one",
                "dp_sgd.sound.account"):
        m = checks[cid]["metrics"]
        assert checks[cid]["verdict"] == "PASS"
        assert m["epsilon_claimed"] - 1e-3 <= m["epsilon_accountant"] <= m["epsilon_claimed"]
    assert checks["noisy_gd.sound.account.replace_one"]["metrics"]["relation"] == "replace_one"


def test_report_md_lists_every_check(smoke):
    _, report_dir, _ = smoke
    md = (report_dir / "report.md").read_text()
    assert md.startswith("# dpverify report")
    assert "not a proof of privacy" in md
    for cid in ("noisy_gd.sound.account", "dp_sgd.planted_shuffle_as_poisson.account"):
        assert f"| {cid} |" in md


def test_run_exits_one_when_an_expectation_is_not_met(write_suite, tmp_path, capsys):
    path = write_suite(QUICK.replace('target = "noisy_gd:sound"',
                                     'target = "noisy_gd:planted_half_steps"'))
    assert main(["run", str(path), "--report-dir", str(tmp_path / "r"), "--quiet"]) == 1
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    assert rep["checks"][0]["verdict"] == "FAIL" and rep["checks"][0]["met"] is False


def test_run_seed_option_reaches_the_checks_and_the_report(write_suite, tmp_path):
    path = write_suite(QUICK.replace('name = "quick"', 'name = "quick"\nseed = 7'))
    assert main(["run", str(path), "--report-dir", str(tmp_path / "a"), "--quiet"]) == 0
    assert json.loads((tmp_path / "a" / "report.json").read_text())["suites"][0]["seed"] == 7
    assert main(["run", str(path), "--report-dir", str(tmp_path / "b"), "--quiet",
                 "--seed", "3"]) == 0
    rep = json.loads((tmp_path / "b" / "report.json").read_text())
    assert rep["seed"] == 3 and rep["suites"][0]["seed"] == 3


# ---------------------------------------------------------------------------------------
# Bad input: exit 2, a message naming the value (and file:line), nothing written

BAD_SUITES = {
    "epsilon_inf": ('[check.params]\nepsilon = inf', r"^epsilon", "inf"),
    "epsilon_nan": ('[check.params]\nepsilon = nan', r"^epsilon", "nan"),
    "delta_1.5": ('[check.params]\ndelta = 1.5', r"^delta", "1.5"),
    "delta_negative": ('[check.params]\ndelta = -0.5', r"^delta", "got -0.5"),
    "unknown_parameter": ('[check.params]\nwarp = 2', r"^warp", "'warp'"),
}


def _bad_suite(case: str) -> str:
    if case in BAD_SUITES:
        return QUICK.replace("[check.params]", BAD_SUITES[case][0])
    return {
        "unknown_algorithm": QUICK.replace('"noisy_gd:sound"', '"noisy_sgd:sound"'),
        "unknown_variant": QUICK.replace('"noisy_gd:sound"', '"noisy_gd:robust"'),
        "unknown_kind": QUICK.replace('kind = "account"', 'kind = "acount"'),
        "invalid_toml": QUICK.replace('id = "gd.sound"', 'id = gd.sound"'),
    }[case]


WORDS = {
    "unknown_algorithm": (r"^target", "unknown algorithm 'noisy_sgd'"),
    "unknown_variant": (r"^target", "unknown variant 'robust'"),
    "unknown_kind": (r"^kind", "unknown check kind 'acount'"),
    "invalid_toml": (None, "invalid TOML"),
    **{k: (v[1], v[2]) for k, v in BAD_SUITES.items()},
}


def _line(path: Path, pattern: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1)
                if re.search(pattern, ln))


@pytest.mark.parametrize("case", sorted(WORDS))
def test_run_bad_suite_exits_two_and_writes_nothing(write_suite, tmp_path, capsys, case):
    path = write_suite(_bad_suite(case))
    report_dir = tmp_path / "report"
    assert main(["run", str(path), "--report-dir", str(report_dir)]) == 2
    out = capsys.readouterr().out
    assert out.startswith("dpverify: error: ")
    line_pattern, word = WORDS[case]
    assert word in out
    if line_pattern is not None:
        assert f"{path}:{_line(path, line_pattern)}: " in out
    else:
        assert str(path) in out and "line" in out
    assert not report_dir.exists()


def test_a_bad_suite_among_good_ones_leaves_an_old_report_unchanged(write_suite, tmp_path,
                                                                     capsys):
    good = write_suite(QUICK, "good.toml")
    bad = write_suite(_bad_suite("epsilon_nan"), "bad.toml")
    report_dir = tmp_path / "report"
    report_dir.mkdir()
    (report_dir / "report.json").write_text("old")
    assert main(["run", str(good), str(bad), "--report-dir", str(report_dir)]) == 2
    assert "bad.toml" in capsys.readouterr().out
    assert [p.name for p in report_dir.iterdir()] == ["report.json"]
    assert (report_dir / "report.json").read_text() == "old"


def test_run_missing_suite_file(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nowhere.toml"), "--report-dir", str(tmp_path / "r")]) == 2
    assert "nowhere.toml" in capsys.readouterr().out
    assert not (tmp_path / "r").exists()


def test_run_bad_trials(write_suite, tmp_path, capsys):
    path = write_suite(QUICK)
    assert main(["run", str(path), "--trials", "0", "--report-dir", str(tmp_path / "r")]) == 2
    assert "--trials" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_bad_usage_is_exit_two(capsys):
    assert main(["frobnicate"]) == 2
    assert main(["run"]) == 2
    assert main(["account", "noisy_gd:sound", "--delta", "abc"]) == 2


# ---------------------------------------------------------------------------------------
# list and account


def test_list_shows_every_baseline_variant_with_its_claim(capsys, tmp_path):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for target in BASELINE_TARGETS:
        assert target in out
    assert "(1.0, 1e-05)-DP add_remove" in out
    assert "(1.0, 1e-05)-DP replace_one" in out  # planted_replace_sensitivity_L
    path = tmp_path / "list.json"
    assert main(["list", "--json", str(path)]) == 0
    rows = {r["target"]: r for r in json.loads(path.read_text())}
    assert set(BASELINE_TARGETS) <= set(rows)
    sound = rows["noisy_gd:sound"]
    assert sound["kind"] == "sound"
    assert sound["claim"] == {"epsilon": 1.0, "delta": 1e-5, "rho": None,
                              "relation": "add_remove"}
    assert sound["utility"]["exponents"] == {"n": -2.0, "d": 1.0, "epsilon": -2.0}
    half = rows["dp_sgd:planted_half_steps"]
    assert half["kind"] == "planted" and half["findings"]
    assert rows["noisy_gd:planted_replace_sensitivity_L"]["params"] == {"relation": "replace_one"}


def test_account_sound_passes_and_planted_fails(capsys):
    assert main(["account", "noisy_gd:sound"]) == 0
    out = capsys.readouterr().out
    assert "noisy_gd:sound: 50 releases" in out
    eps = {m[0]: float(m[1]) for m in re.findall(r"epsilon \((PLD|RDP)\): (\S+)", out)}
    assert eps["PLD"] == pytest.approx(1.0, abs=1e-3) and eps["RDP"] > eps["PLD"]
    assert "PASS" in out
    assert main(["account", "noisy_gd:planted_half_steps"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out
    assert float(re.search(r"epsilon \(PLD\): (\S+)", out).group(1)) > 1.1


def test_account_json(tmp_path):
    path = tmp_path / "acc.json"
    assert main(["account", "noisy_gd:sound", "--param", "T=4", "--param", "n=50",
                 "--delta", "1e-6", "--json", str(path)]) == 0
    rep = json.loads(path.read_text())
    assert rep["target"] == "noisy_gd:sound" and rep["releases"] == 4
    assert rep["delta"] == 1e-6 and rep["epsilon_claimed"] == "inf"  # the claim is at 1e-5
    assert rep["by_accountant"]["pld"] > 1.0
    assert rep["gradient_evaluations"] == 4 * 50


@pytest.mark.parametrize("argv, word", [
    (["account", "noisy_gd:sound", "--delta", "1.5"], "delta must be a number in [0, 1)"),
    (["account", "noisy_gd:sound", "--delta=-1e-9"], "delta must be a number in [0, 1)"),
    (["account", "noisy_gd:robust"], "unknown variant 'robust'"),
    (["account", "noisy_sgd"], "unknown algorithm 'noisy_sgd'"),
    (["account", "noisy_gd:sound", "--param", "epsilon=inf"],
     "--param epsilon: parameter 'epsilon' of noisy_gd takes a number > 0, got inf"),
    (["account", "noisy_gd:sound", "--param", "epsilon=nan"],
     "--param epsilon: parameter 'epsilon' of noisy_gd takes a number > 0, got nan"),
    (["account", "noisy_gd:sound", "--param", "warp=1"], "unknown parameter 'warp'"),
    (["account", "noisy_gd:sound", "--param", "T"], "--param expects key=value"),
])
def test_account_bad_input_exits_two(capsys, tmp_path, argv, word):
    path = tmp_path / "out.json"
    assert main([*argv, "--json", str(path)]) == 2
    assert word in capsys.readouterr().out
    assert not path.exists()


def test_parse_params():
    assert parse_params(["T=10", "eta=0.5", "loss=huber", "flag=true", "eps=inf"]) == {
        "T": 10, "eta": 0.5, "loss": "huber", "flag": True, "eps": math.inf}
    with pytest.raises(InputError, match="key=value"):
        parse_params(["=3"])


def test_console_script(tmp_path):
    """The installed ``dpverify`` command, end to end in a fresh process."""
    # The script sits beside this interpreter (a venv that is used, not activated).
    beside = Path(sys.executable).parent / "dpverify"
    exe = str(beside) if beside.exists() else shutil.which("dpverify")
    assert exe is not None, "the dpverify console script is not installed"
    path = tmp_path / "acc.json"
    res = subprocess.run([exe, "account", "noisy_gd:sound", "--param", "T=3", "--param",
                          "n=40", "--json", str(path)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "epsilon (PLD)" in res.stdout
    assert json.loads(path.read_text())["releases"] == 3
    bad = subprocess.run([exe, "account", "noisy_gd:sound", "--delta", "2"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "dpverify: error: delta must be a number in [0, 1), got 2.0" in bad.stderr


def test_account_verdict_compares_zcdp_claims_in_rho():
    """``dpverify account`` and the account check share one verdict: a rho claim is judged
    by the ledger's rho, even when the ledger's epsilon is under the claim's epsilon."""
    from dpverify.accounting.accountant import AccountingResult
    from dpverify.checks.account import exceeds_claim
    from dpverify.core.claims import PrivacyClaim

    res = AccountingResult(epsilon=1.0, delta=1e-6, relation="add_remove", rho=0.51)
    assert exceeds_claim(res, PrivacyClaim(rho=0.5), eps_claimed=9.0)
    assert not exceeds_claim(res, PrivacyClaim(rho=0.52), eps_claimed=0.5)
    sampled = AccountingResult(epsilon=1.0, delta=1e-6, relation="add_remove", rho=None)
    assert exceeds_claim(sampled, PrivacyClaim(rho=0.5), eps_claimed=0.9)
    assert not exceeds_claim(sampled, PrivacyClaim(epsilon=1.0, delta=1e-6), 1.0)
    assert exceeds_claim(sampled, PrivacyClaim(epsilon=1.0, delta=1e-6), 0.99)


def test_run_report_dir_that_is_a_file_is_refused_before_running(write_suite, tmp_path, capsys,
                                                                  monkeypatch):
    import dpverify.checks.runner

    ran = []
    monkeypatch.setattr(dpverify.checks.runner, "run_check", lambda *a: ran.append(a))
    path = write_suite(QUICK)
    blocker = tmp_path / "taken"
    blocker.write_text("a file")
    for report_dir in (blocker, blocker / "sub"):
        assert main(["run", str(path), "--report-dir", str(report_dir)]) == 2
        assert "is not a folder" in capsys.readouterr().out
    assert ran == [] and blocker.read_text() == "a file"


def test_a_capability_missing_a_dependency_does_not_break_other_commands(monkeypatch, capsys):
    import dpverify.cli.app as cli

    real_import = cli.importlib.import_module

    def fake_import(name, *args):
        if name == "dpverify.cli.agree":
            raise ModuleNotFoundError("No module named 'torchish'", name="torchish")
        return real_import(name, *args)

    monkeypatch.setattr(cli.importlib, "import_module", fake_import)
    with pytest.warns(UserWarning, match="'agree' subcommand is unavailable"):
        assert main(["list"]) == 0
    assert "noisy_gd:sound" in capsys.readouterr().out


def test_run_against_a_baseline_report(write_suite, tmp_path, capsys):
    path = write_suite(QUICK)
    assert main(["run", str(path), "--report-dir", str(tmp_path / "a"), "--quiet"]) == 0
    base = tmp_path / "a" / "report.json"
    assert main(["run", str(path), "--report-dir", str(tmp_path / "b"), "--quiet",
                 "--baseline", str(base)]) == 0
    assert json.loads((tmp_path / "b" / "report.json").read_text())["regressions"] == []
    # A changed verdict and a drifted epsilon are regressions: exit 1, listed in the report.
    rep = json.loads(base.read_text())
    rep["checks"][0]["verdict"] = "FAIL"
    rep["checks"][0]["metrics"]["epsilon_accountant"] = 0.5
    base.write_text(json.dumps(rep))
    assert main(["run", str(path), "--report-dir", str(tmp_path / "c"), "--quiet",
                 "--baseline", str(base)]) == 1
    regressions = json.loads((tmp_path / "c" / "report.json").read_text())["regressions"]
    assert any("verdict FAIL -> PASS" in r for r in regressions)
    assert any("epsilon_accountant drifted" in r for r in regressions)
    # An unreadable baseline is bad input: exit 2 before anything runs or is written.
    base.write_text(json.dumps({**rep, "schema_version": "9.0"}))
    for bad in (base, tmp_path / "missing.json"):
        assert main(["run", str(path), "--report-dir", str(tmp_path / "d"),
                     "--baseline", str(bad)]) == 2
        assert "baseline" in capsys.readouterr().out
    assert not (tmp_path / "d").exists()


# ---------------------------------------------------------------------------------------
# What a newcomer meets: run folders, defaults in --help, output paths, --quiet, --param


def _subparsers():
    import argparse

    from dpverify.cli.app import _build_parser

    parser = _build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_every_help_states_every_default():
    """Each option of every subcommand says, in its --help entry, what it is when not
    given (the text argparse prints for it, defaults expanded)."""
    for name, p in _subparsers().items():
        fmt = p._get_formatter()
        for a in p._actions:
            if not a.option_strings or a.dest == "help":
                continue
            entry = fmt._expand_help(a)
            assert "default" in entry.lower(), (name, a.option_strings, entry)
    assert "(default: a new folder reports/runs/<time>-<suites>" in " ".join(
        _subparsers()["run"].format_help().split())


COUNT_FLAGS = [
    (["run", str(SMOKE)], "--workers"), (["run", str(SMOKE)], "--jobs"),
    (["run", str(SMOKE)], "--trials"), (["account", "noisy_gd:sound"], "--workers"),
    (["check", "noisy_gd"], "--jobs"), (["audit", "noisy_gd:sound"], "--block-size"),
    (["audit", "noisy_gd:sound"], "--max-trials"), (["audit", "noisy_gd:sound"], "--canaries"),
    (["mia", "noisy_gd:sound"], "--pool"), (["mia", "noisy_gd:sound"], "--block-size"),
    (["sensitivity", "noisy_gd:sound"], "--max-examples"), (["rates", "noisy_gd:sound"],
                                                             "--seeds"),
    (["rates", "noisy_gd:sound"], "--boot"), (["agree", "noisy_gd:sound"], "--trials"),
]


@pytest.mark.parametrize("value", ["0", "-2", "many"])
@pytest.mark.parametrize(("argv", "flag"), COUNT_FLAGS, ids=lambda x: x if isinstance(x, str)
                         else x[0])
def test_a_count_option_below_one_is_refused_before_any_work(argv, flag, value, tmp_path,
                                                              capsys):
    code = main([*argv, flag, value, "--json", str(tmp_path / "r.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and f"got '{value}'" in err, err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("command", ["run", "account", "audit", "mia", "sensitivity", "rates",
                                     "agree"])
def test_a_negative_seed_is_refused_before_any_work(command, capsys):
    target = str(SMOKE) if command == "run" else "noisy_gd:sound"
    assert main([command, target, "--seed", "-1"]) == 2
    assert "argument --seed: must be an integer >= 0, got '-1'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "account", "audit", "mia", "sensitivity", "rates",
                                     "agree"])
@pytest.mark.parametrize(("item", "words"), [
    ("T=abc", "parameter 'T' of noisy_gd takes an integer >= 1, got 'abc'"),
    ("T=2.5", "parameter 'T' of noisy_gd takes an integer >= 1, got 2.5"),
    ("eta=fast", "parameter 'eta' of noisy_gd takes a number > 0, got 'fast'"),
    ("T=-4", "parameter 'T' of noisy_gd takes an integer >= 1, got -4"),
])
def test_a_param_of_the_wrong_kind_is_refused_before_any_work(command, item, words, tmp_path,
                                                              capsys):
    target = str(SMOKE) if command == "run" else "noisy_gd:sound"
    json_path = tmp_path / "r.json"
    assert main([command, target, "--param", item, "--json", str(json_path)]) == 2
    out = capsys.readouterr().out
    assert f"--param {item.split('=')[0]}: {words}" in out, out
    assert not json_path.exists()


def test_a_param_that_takes_words_keeps_them():
    """A parameter declared ``None`` by default may take words: only its algorithm judges."""
    from dpverify.cli.app import check_params

    check_params(argparse.Namespace(target="o2nc_erm:sound", param=["beta=balanced"]))
    with pytest.raises(InputError, match="--fixed alpha: parameter 'alpha' of o2nc_erm"):
        check_params(argparse.Namespace(target="o2nc_erm:sound", fixed=["alpha=x"]))


def test_only_matching_no_check_is_refused_listing_the_ids(tmp_path, capsys):
    report = tmp_path / "r"
    assert main(["run", str(SMOKE), "--only", "no_such_check", "--report-dir", str(report)]) == 2
    out = capsys.readouterr().out
    assert "--only 'no_such_check' matches no check id" in out, out
    assert "noisy_gd.sound.account" in out
    assert not report.exists()


def test_every_integer_option_goes_through_a_shared_validator():
    """No subcommand takes a bare ``type=int``: counts and seeds share one checked type."""
    from dpverify.cli.app import nonnegative_int, positive_int

    for name, p in _subparsers().items():
        for a in p._actions:
            assert a.type is not int, (name, a.option_strings)
    flags = {o: a.type for p in _subparsers().values() for a in p._actions
             for o in a.option_strings}
    assert flags["--workers"] is flags["--jobs"] is flags["--block-size"] is positive_int
    assert flags["--seed"] is flags["--random-pairs"] is nonnegative_int


def test_report_help_lists_only_rendering_options():
    opts = {o for a in _subparsers()["report"]._actions for o in a.option_strings}
    assert opts == {"-h", "--help", "--out", "--format", "--plots", "--baseline", "--json",
                    "--quiet"}


def test_each_run_writes_its_own_folder_and_latest_points_at_the_newest(
        write_suite, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = write_suite(QUICK)
    assert main(["run", str(path), "--quiet"]) == 0
    first = sorted((tmp_path / "reports" / "runs").iterdir())
    assert len(first) == 1 and first[0].name.endswith("-suite")  # as the command named it
    assert main(["run", str(path), "--only", "gd.sound", "--quiet"]) == 0
    runs = sorted((tmp_path / "reports" / "runs").iterdir())
    assert len(runs) == 2 and (first[0] / "report.json").is_file()  # the first is kept
    latest = tmp_path / "reports" / "latest"
    newest = next(r for r in runs if r != first[0])
    assert latest.resolve() == newest.resolve()
    assert (latest / "report.html").is_file()
    # The last line says where the report is, and that latest leads there too.
    capsys.readouterr()
    assert main(["run", str(path)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("report: reports/runs/") and "reports/latest/report.html" in last
    # --report-dir writes exactly there and leaves latest alone.
    before = latest.resolve()
    assert main(["run", str(path), "--report-dir", str(tmp_path / "mine"), "--quiet"]) == 0
    assert (tmp_path / "mine" / "report.json").is_file() and latest.resolve() == before


def test_an_old_latest_folder_is_kept_when_latest_becomes_a_link(write_suite, tmp_path,
                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    old = tmp_path / "reports" / "latest"
    old.mkdir(parents=True)
    (old / "report.json").write_text("{}")
    assert main(["run", str(write_suite(QUICK)), "--quiet"]) == 0
    kept = [p for p in (tmp_path / "reports" / "runs").iterdir() if "previous" in p.name]
    assert len(kept) == 1 and (kept[0] / "report.json").read_text() == "{}"
    assert (tmp_path / "reports" / "latest").is_symlink()


@pytest.mark.parametrize("flag, where", [
    ("--report-dir", "/proc/dpverify-test/report"),
    ("--json", "/proc/dpverify-test.json"),
])
def test_unwritable_outputs_are_refused_before_any_check_runs(
        write_suite, tmp_path, capsys, monkeypatch, flag, where):
    import dpverify.checks.runner

    ran = []
    monkeypatch.setattr(dpverify.checks.runner, "run_counting_warnings", lambda *a: ran.append(a))
    assert main(["run", str(write_suite(QUICK)), flag, where,
                 *(["--report-dir", str(tmp_path / "r")] if flag != "--report-dir" else [])]
                ) == 2
    out = capsys.readouterr().out
    assert flag in out and where in out and "Traceback" not in out
    assert ran == [] and not (tmp_path / "r").exists()


@pytest.mark.parametrize("argv", [
    ["account", "noisy_gd:sound", "--param", "T=3", "--json", "/proc/x/a.json"],
    ["rates", "noisy_gd:sound", "--vary", "n=100,200,400", "--plot", "/proc/x/n.png"],
    ["audit", "gaussian_mechanism:sound", "--json", "/sys/x.json"],
    ["list", "--json", "/proc/x.json"],
])
def test_every_subcommand_checks_its_output_paths_first(capsys, argv):
    assert main(argv) == 2
    assert "dpverify: error:" in capsys.readouterr().out


def test_quiet_still_says_why_the_exit_code_is_one(write_suite, tmp_path, capsys):
    path = write_suite(QUICK.replace('target = "noisy_gd:sound"',
                                     'target = "noisy_gd:planted_half_steps"'))
    assert main(["run", str(path), "--report-dir", str(tmp_path / "r"), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "not as expected: gd.sound: FAIL, expected PASS" in out
    assert "0/1 checks met their expectation" in out
    # A passing quiet run prints nothing.
    assert main(["run", str(write_suite(QUICK)), "--report-dir", str(tmp_path / "s"),
                 "--quiet"]) == 0
    assert capsys.readouterr().out == ""


def test_quiet_baseline_gate_names_the_regression(write_suite, tmp_path, capsys):
    path = write_suite(QUICK)
    assert main(["run", str(path), "--report-dir", str(tmp_path / "a"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--report-dir", str(tmp_path / "b"), "--quiet",
                 "--scale", "thorough", "--baseline", str(tmp_path / "a" / "report.json")]) == 1
    assert "not comparable (run with --scale quick)" in capsys.readouterr().out


def test_run_param_overrides_every_check_that_has_the_parameter(write_suite, tmp_path, capsys):
    two = QUICK + """
[[check]]
id = "gauss.sound"
kind = "account"
target = "gaussian_mechanism:sound"
"""
    path = write_suite(two)
    assert main(["run", str(path), "--report-dir", str(tmp_path / "r"), "--quiet",
                 "--param", "T=7"]) == 0
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    params = {c["id"]: c["params"] for c in rep["checks"]}
    assert params["gd.sound"]["T"] == 7 and "T" not in params["gauss.sound"]
    assert rep["param_overrides"] == {"T": 7}
    md = (tmp_path / "r" / "report.md").read_text()
    assert "--only gd.sound --param T=7" in md  # the reproduce command carries it
    # A parameter no check has, or a bad privacy value: exit 2 before anything runs.
    for bad, word in ((["--param", "warp=2"], "warp"), (["--param", "epsilon=nan"], "epsilon")):
        assert main(["run", str(path), "--report-dir", str(tmp_path / "x"), *bad]) == 2
        assert word in capsys.readouterr().out
    assert not (tmp_path / "x").exists()


def test_account_says_why_an_accountant_gives_no_epsilon(capsys, tmp_path):
    """dp_accounting's RDP accountant has no Poisson subsampling under replace-one."""
    assert main(["account", "dp_double_spider:sound", "--json", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out
    assert ("epsilon (RDP): not computed: dp_accounting's RDP accountant does not support "
            "PoissonSampledDpEvent under replace-one neighbours") in out
    rec = json.loads((tmp_path / "a.json").read_text())
    assert "PoissonSampledDpEvent" in rec["not_computed"]["rdp"]


def test_where_links_cannot_be_made_latest_is_a_pointer_file(write_suite, tmp_path,
                                                             monkeypatch):
    import os

    def no_links(*a, **k):
        raise OSError("symbolic links are not supported here")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "symlink", no_links)
    assert main(["run", str(write_suite(QUICK)), "--quiet"]) == 0
    latest = tmp_path / "reports" / "latest"
    (run,) = (tmp_path / "reports" / "runs").iterdir()
    assert latest.is_file() and latest.read_text().strip() == f"runs/{run.name}"
    # `dpverify report` follows it to the run folder.
    assert main(["report", "reports/latest", "--format", "md", "--quiet"]) == 0
    assert (run / "report.md").is_file()
