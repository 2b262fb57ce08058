"""The regression gate: ``dpverify run --baseline`` against a saved report.

A regression is a changed verdict, an exponent outside the baseline's interval, an epsilon
lower bound whose interval no longer meets the baseline's, a moved accountant epsilon, a
check the suites no longer hold, or a baseline run at another scale.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from dpverify.checks.base import RunContext
from dpverify.cli.app import main
from dpverify.cli.suites import load_suite, run_suites
from dpverify.report.writer import compare_baseline, epsilon_lower_interval, report_dict
from dpverify.stats.audit_bounds import epsilon_from_rates, epsilon_lower_bound

SUITE = """
[suite]
name = "gate"

[[check]]
id = "gauss.audit"
kind = "audit"
target = "gaussian_mechanism:sound"
[check.options]
trials = 2000
distinguisher = "projection"

[[check]]
id = "gd.account"
kind = "account"
target = "noisy_gd:sound"
[check.params]
T = 3

[[check]]
id = "gd.rate"
kind = "rate"
target = "noisy_gd:sound"
[check.params]
T = 30
[check.options]
seeds = 6
n_boot = 200
[check.options.vary]
n = [250, 500, 1000]
d = [2, 4, 8]
"""


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    """(suite path, the run, its report) of one in-process run of the gate suite."""
    path = tmp_path_factory.mktemp("gate") / "gate.toml"
    path.write_text(SUITE)
    run = run_suites([load_suite(path)], RunContext())
    return path, run, json.loads(json.dumps(report_dict(run)))


def test_an_unchanged_run_has_no_regression(gate):
    _, run, rep = gate
    assert compare_baseline(run, rep) == []
    assert compare_baseline(rep, rep) == []  # a report dictionary serves as the run too
    assert len(rep["checks"][2]["metrics"]["fits"]) == 2  # the rate check fits n and d


def test_changed_verdicts_exponents_and_epsilons_are_regressions(gate):
    _, run, rep = gate
    base = copy.deepcopy(rep)
    checks = {c["id"]: c for c in base["checks"]}
    checks["gd.account"]["verdict"] = "FAIL"
    checks["gd.account"]["metrics"]["epsilon_accountant"] = 0.5
    # The rate check's second parameter (d) moved outside its interval.
    fit_d = next(f for f in checks["gd.rate"]["metrics"]["fits"] if f["parameter"] == "d")
    fit_d["ci_low"], fit_d["ci_high"] = fit_d["exponent"] + 0.5, fit_d["exponent"] + 0.7
    out = compare_baseline(run, base)
    assert "gd.account: verdict FAIL -> PASS" in out
    assert any(r.startswith("gd.account: epsilon_accountant drifted 0.5 ->") for r in out)
    assert any(r.startswith("gd.rate: exponent in d ") for r in out)
    assert not any(r.startswith("gd.rate: exponent in n ") for r in out)


def test_an_epsilon_lower_bound_that_leaves_its_interval_is_a_regression(gate):
    _, run, rep = gate
    base = copy.deepcopy(rep)
    audit = next(c for c in base["checks"] if c["id"] == "gauss.audit")
    name, lo, hi = epsilon_lower_interval(audit)
    assert name == "epsilon_lower" and lo == audit["metrics"]["epsilon_lower"] < hi
    # A baseline whose test separated the datasets far better: its interval lies above.
    t = audit["evidence"]["test"]
    t["tp"], t["fp"] = t["n_pos"] - 2, 2
    t["epsilon"] = float(epsilon_lower_bound(2, t["n_neg"], 2, t["n_pos"],
                                             audit["metrics"]["delta"], t["alpha"]))
    audit["metrics"]["epsilon_lower"] = t["epsilon"]
    out = compare_baseline(run, base)
    assert any(r.startswith("gauss.audit: epsilon_lower ") and "left the baseline's interval"
               in r for r in out), out
    # An explicitly recorded interval is used as it is.
    audit["metrics"]["epsilon_lower_ci"] = [lo - 1e-9, hi]
    assert not any(r.startswith("gauss.audit: epsilon_lower ") for r in
                   compare_baseline(run, base))


def test_missing_checks_and_another_scale(gate):
    path, run, rep = gate
    base = copy.deepcopy(rep)
    extra = dict(base["checks"][1], id="gd.account.removed")
    other = dict(base["checks"][1], id="elsewhere.account", source="other.toml:3")
    base["checks"] += [extra, other]
    out = compare_baseline(run, base)
    assert "gd.account.removed: missing: in the baseline, not in the suites run" in out
    assert not any(r.startswith("elsewhere.account") for r in out)  # another suite's check
    # A check skipped with --only is not missing.
    only = run_suites([load_suite(path)], RunContext(), only="gd.account")
    assert compare_baseline(only, rep) == []
    base = dict(rep, scale="thorough")
    assert compare_baseline(run, base) == [
        "the baseline ran at scale thorough, this run at quick: its numbers are not "
        "comparable (run with --scale thorough)"]


def test_run_with_a_baseline_exits_one_on_a_missing_check(gate, tmp_path, capsys):
    path, _, rep = gate
    base = copy.deepcopy(rep)
    assert main(["run", str(path), "--only", "gd.account", "--report-dir",
                 str(tmp_path / "a"), "--quiet", "--json", str(tmp_path / "base.json")]) == 0
    base = json.loads((tmp_path / "base.json").read_text())
    assert main(["run", str(path), "--only", "gd.account", "--report-dir",
                 str(tmp_path / "b"), "--quiet", "--baseline", str(tmp_path / "base.json")]) == 0
    base["checks"].append(dict(base["checks"][0], id="gd.account.gone"))
    (tmp_path / "base.json").write_text(json.dumps(base))
    assert main(["run", str(path), "--only", "gd.account", "--report-dir",
                 str(tmp_path / "c"), "--quiet", "--baseline", str(tmp_path / "base.json")]) == 1
    assert json.loads((tmp_path / "c" / "report.json").read_text())["regressions"] == [
        "gd.account.gone: missing: in the baseline, not in the suites run"]
    capsys.readouterr()


@pytest.mark.statistical
def test_the_epsilon_lower_interval_covers_the_tests_epsilon():
    """[lo, hi] covers the epsilon of the test's true rates with probability >= 1 - 2 alpha.

    Each end holds with probability >= 1 - alpha (Clopper-Pearson at alpha/2 on each rate,
    union bound; epsilon_from_rates decreases in both rates). With alpha = 0.05 the
    coverage is >= 0.90; 2000 replications (seed 0) fall below 0.875 with probability
    below 1e-4 (binomial tail, z = -3.7) if the interval is valid.
    """
    rng = np.random.default_rng(0)
    n, fpr, fnr, delta, alpha = 2000, 0.1, 0.2, 1e-5, 0.05
    true_eps = float(epsilon_from_rates(fpr, fnr, delta))
    fp = rng.binomial(n, fpr, size=2000)
    fn = rng.binomial(n, fnr, size=2000)
    lows = epsilon_lower_bound(fp, n, fn, n, delta, alpha)
    covered = below = 0
    for f, m, lo in zip(fp, fn, lows, strict=True):
        rec = {"metrics": {"delta": delta, "epsilon_lower": float(lo)},
               "evidence": {"test": {"method": "cp", "epsilon": float(lo), "tp": int(n - m),
                                     "fp": int(f), "n_pos": n, "n_neg": n, "alpha": alpha}}}
        _, a, b = epsilon_lower_interval(rec)
        covered += a <= true_eps <= b
        below += b < true_eps
    assert covered / 2000 >= 0.875
    assert below / 2000 <= 0.075  # the upper end alone fails with probability <= alpha
