"""Checks run several at a time give the results they give one after another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpverify.checks.base import CheckSpec, RunContext
from dpverify.checks.runner import run_checks
from dpverify.cli.app import main
from dpverify.core.errors import InputError

SUITE = """
[suite]
name = "jobs"
[[check]]
id = "gd.account"
kind = "account"
target = "noisy_gd:sound"
[check.params]
T = 5
[[check]]
id = "gd.sensitivity"
kind = "sensitivity"
target = "noisy_gd:sound"
[check.params]
T = 3
n = 40
[check.options]
random_pairs = 4
search = "canaries"
[[check]]
id = "half.account"
kind = "account"
target = "dp_sgd:planted_half_steps"
expected = "FAIL"
[check.params]
T = 20
"""


def _essence(report: dict) -> list[tuple]:
    return [(c["id"], c["verdict"], json.dumps(c["metrics"], sort_keys=True))
            for c in report["checks"]]


def test_two_jobs_give_the_serial_results_in_the_serial_order(tmp_path: Path):
    suite = tmp_path / "jobs.toml"
    suite.write_text(SUITE)
    reports = {}
    for jobs in (1, 2):
        out = tmp_path / f"j{jobs}.json"
        rc = main(["run", str(suite), "--quiet", "--jobs", str(jobs),
                   "--report-dir", str(tmp_path / f"r{jobs}"), "--json", str(out)])
        assert rc == 0
        reports[jobs] = json.loads(out.read_text())
    assert [c["id"] for c in reports[2]["checks"]] == ["gd.account", "gd.sensitivity",
                                                        "half.account"]
    assert _essence(reports[1]) == _essence(reports[2])


def test_results_keep_the_given_order_and_callbacks_see_each_once():
    specs = [CheckSpec(f"c{i}", "account", "noisy_gd:sound", params={"T": t})
             for i, t in enumerate((8, 2, 4))]
    seen: list[str] = []
    res = run_checks([(s, RunContext()) for s in specs], jobs=2,
                     on_result=lambda r: seen.append(r.spec.id))
    assert [r.spec.id for r in res] == ["c0", "c1", "c2"]
    assert sorted(seen) == ["c0", "c1", "c2"]
    serial = run_checks([(s, RunContext()) for s in specs], jobs=1)
    assert [r.outcome.metrics for r in res] == [r.outcome.metrics for r in serial]


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True])
def test_jobs_must_be_a_positive_integer(jobs):
    with pytest.raises(InputError, match="--jobs"):
        run_checks([], jobs=jobs)


def test_cli_rejects_zero_jobs_with_exit_2(tmp_path: Path, capsys):
    suite = tmp_path / "s.toml"
    suite.write_text(SUITE)
    assert main(["run", str(suite), "--jobs", "0", "--report-dir", str(tmp_path / "r")]) == 2
    captured = capsys.readouterr()
    assert "--jobs" in captured.err + captured.out
    assert not (tmp_path / "r").exists()


WARNING_MODULE = """
import warnings

import numpy as np


class PrivacyLeakWarning(RuntimeWarning):
    pass


def f(data, rng, trials):
    warnings.warn("bounds not given: leaks the data range", PrivacyLeakWarning)
    return np.asarray(data, dtype=float).sum() + rng.normal(0.0, 4.0, size=(trials, 1))


def pair():
    return np.zeros(10), np.r_[1.0, np.zeros(9)]
"""


@pytest.mark.parametrize("jobs", [1, 2])
def test_library_warnings_are_counted_into_the_report_not_streamed(tmp_path: Path, capfd,
                                                                   jobs):
    mod = tmp_path / "warnmod.py"
    mod.write_text(WARNING_MODULE)
    check = f"""
[[check]]
id = "warns.{{i}}"
kind = "audit"
target = "{mod}:f"
[check.options]
epsilon = 1.0
delta = 1e-5
trials = 3000
block_size = 1000
neighbours = "{mod}:pair"
"""
    suite = tmp_path / "s.toml"
    suite.write_text('[suite]\nname = "warns"\n' + "".join(check.format(i=i) for i in (1, 2)))
    out = tmp_path / "r"
    assert main(["run", str(suite), "--report-dir", str(out), "--jobs", str(jobs)]) == 0
    captured = capfd.readouterr()
    assert "leaks the data range" not in captured.err + captured.out
    assert "warnings in 2 checks, counted in the report (PrivacyLeakWarning" in captured.out
    for c in json.loads((out / "report.json").read_text())["checks"]:
        assert c["metrics"]["warnings"] >= 2  # one per block of outputs drawn, on D and D'
        (w,) = c["evidence"]["warnings"]
        assert w["category"] == "PrivacyLeakWarning" and w["count"] == c["metrics"]["warnings"]
