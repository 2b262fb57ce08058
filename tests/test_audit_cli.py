"""``dpverify audit`` as a user runs it, and the ``audit`` check kind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpverify.checks.base import CheckSpec, RunContext, run_check
from dpverify.cli.app import main
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError

USER_MODULE = '''
import numpy as np

def f(data, rng, trials):
    """A Gaussian mechanism on the sum of a 1-D dataset, sigma = 4."""
    return float(np.sum(data)) + rng.normal(0.0, 4.0, size=(trials, 1))

def leaky(data, rng, trials):
    return float(np.sum(data)) + rng.normal(0.0, 0.5, size=(trials, 1))

def bad_shape(data, rng, trials):
    return rng.normal(size=trials + 1)

def crashes(data, rng, trials):
    raise RuntimeError("boom")

def pair():
    D = np.zeros(10)
    D_prime = D.copy()
    D_prime[0] = 1.0
    return D, D_prime

def pair_added():
    return np.zeros(10), np.zeros(11)
'''


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
             ) -> tuple[Path, str]:
    """A folder holding a user's module (a unique name per test), as the working directory."""
    name = f"usermech_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path, name


def test_new_user_runs_the_documented_command(tmp_path: Path) -> None:
    """From the user's folder, as a new user would: the module next to them is found."""
    (tmp_path / "mymod.py").write_text(USER_MODULE)
    cmd = [sys.executable, "-m", "dpverify.cli", "audit", "mymod:f", "--neighbours",
           "mymod:pair", "--epsilon", "1", "--delta", "1e-5", "--trials", "4000", "--quiet",
           "--json", "out.json"]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "epsilon_lower" in res.stdout and "PASS" in res.stdout
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["verdict"] == "PASS"
    for key in ("epsilon_lower", "epsilon_accountant", "epsilon_claimed", "confidence",
                "trials"):
        assert key in report["metrics"]
    assert report["metrics"]["epsilon_accountant"] is None  # a callable has no ledger


def test_exit_codes(user_dir: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, mod = user_dir
    base = ["--neighbours", f"{mod}:pair", "--epsilon", "1", "--delta", "1e-5", "--quiet"]
    assert main(["audit", f"{mod}:leaky", *base, "--trials", "4000"]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert main(["audit", f"{mod}:bad_shape", *base]) == 2
    assert "returned shape (1025,)" in capsys.readouterr().out
    assert main(["audit", f"{mod}:crashes", *base]) == 2
    assert "RuntimeError: boom" in capsys.readouterr().out


@pytest.mark.parametrize("args,message", [
    (["gaussian_mechanism:sound", "--epsilon", "nan", "--delta", "1e-5"], "got nan"),
    (["gaussian_mechanism:sound", "--epsilon", "inf", "--delta", "1e-5"], "got inf"),
    (["gaussian_mechanism:sound", "--epsilon", "1", "--delta", "-0.1"], "delta must be"),
    (["gaussian_mechanism:sound", "--relation", "componentwise"], "componentwise"),
    (["gaussian_mechanism:sound", "--neighbours", "one_above"], "pattern of query answers"),
    (["gaussian_mechanism:sound", "--epsilon", "1", "--delta", "1.5"], "delta must be"),
    (["no_such_algorithm", "--epsilon", "1", "--delta", "1e-5"], "no_such_algorithm"),
    (["no_such_module_xyz:f", "--epsilon", "1", "--delta", "1e-5"], "no_such_module_xyz"),
    (["gaussian_mechanism:no_variant"], "no_variant"),
    (["math:sqrt"], "needs the claim"),
    (["gaussian_mechanism:sound", "--confidence", "1.0"], "confidence"),
    (["gaussian_mechanism:sound", "--trials", "0"], "trials"),
    (["gaussian_mechanism:sound", "--neighbours", "nearby"], "nearby"),
    (["gaussian_mechanism:sound", "--distinguisher", "oracle"], "oracle"),
    (["gaussian_mechanism:sound", "--param", "sigma=3"], "sigma"),
])
def test_bad_input_exits_2_naming_the_value(args: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", *args, "--quiet"]) == 2
    captured = capsys.readouterr()  # argparse's own refusals go to stderr
    assert message in captured.out + captured.err


def test_registered_target_uses_its_own_claim(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", "gaussian_mechanism:planted_half_noise", "--trials", "20000",
                 "--distinguisher", "projection", "--quiet"])
    out = capsys.readouterr().out
    assert code == 1 and "epsilon_claimed     1" in out and "epsilon_accountant  2.155" in out


def test_whitebox_and_onerun_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "noisy_gd:sound", "--mode", "whitebox", "--trials", "200",
                 "--param", "loss=linear", "--param", "n=40", "--param", "T=4",
                 "--quiet"]) == 0
    assert "whitebox" in capsys.readouterr().out
    assert main(["audit", "noisy_gd:planted_mean_noise_on_sum", "--mode", "onerun",
                 "--canaries", "300", "--scores", "releases", "--param", "d=300",
                 "--param", "n=40", "--param", "T=4", "--param", "loss=linear",
                 "--quiet"]) == 1


def test_check_kind_reports_the_contract() -> None:
    spec = CheckSpec("g", "audit", "gaussian_mechanism:planted_no_clip", Verdict.FAIL,
                     options={"mode": "blackbox", "trials": 3000, "neighbours": "outlier"})
    res = run_check(spec, RunContext(seed=1))
    assert res.met and res.outcome.verdict == Verdict.FAIL
    m = res.outcome.metrics
    assert {"epsilon_lower", "epsilon_accountant", "epsilon_claimed", "confidence",
            "trials"} <= set(m)
    assert m["trials"] == 3000 and m["epsilon_lower"] > m["epsilon_claimed"]
    assert res.outcome.evidence["test"]["n_pos"] > 0
    json.dumps(res.to_dict())  # JSON-ready


def test_check_kind_context_trials_override_and_bad_options() -> None:
    spec = CheckSpec("g", "audit", "gaussian_mechanism:sound",
                     options={"trials": 999999, "distinguisher": "projection"})
    res = run_check(spec, RunContext(seed=0, trials=2000))
    assert res.outcome.result.trials == 2000
    bad = CheckSpec("b", "audit", "gaussian_mechanism:sound", options={"trails": 10},
                    source="suite.toml:7")
    with pytest.raises(InputError, match=r"suite.toml:7.*trails"):
        run_check(bad, RunContext())
    onerun = CheckSpec("o", "audit", "noisy_gd:sound", options={"mode": "onerun",
                                                                 "trials": 10})
    with pytest.raises(InputError, match="canaries"):
        run_check(onerun, RunContext())


def test_a_users_pair_gives_the_audit_its_relation(user_dir: tuple[Path, str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A replace-one pair is labelled replace-one without --relation; an add/remove pair
    add/remove; a stated relation the pair does not have is bad input."""
    root, mod = user_dir
    base = [f"{mod}:f", "--epsilon", "1", "--delta", "1e-5", "--trials", "2000", "--quiet"]
    for pair, relation in (("pair", "replace_one"), ("pair_added", "add_remove")):
        out = root / f"{pair}.json"
        assert main(["audit", *base, "--neighbours", f"{mod}:{pair}", "--json", str(out)]) == 0
        assert json.loads(out.read_text())["metrics"]["relation"] == relation
    assert main(["audit", *base, "--neighbours", f"{mod}:pair", "--relation",
                 "add_remove"]) == 2
    assert "the pair from" in capsys.readouterr().out
