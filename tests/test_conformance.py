"""The conformance battery: generated checks, derived expectations, the door by type.

The out-of-tree test writes a tiny package beside a ``.dist-info`` folder declaring the
``dpverify.algorithms`` entry point, puts it on the path of a fresh interpreter, and checks it
with ``dpverify check`` and with ``parametrize_with_checks``: no test is written for its
algorithms, and the battery finds the bug planted in one of them.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dpverify.checks.base import CheckSpec
from dpverify.checks.conformance import (
    battery_specs,
    check_targets,
    expected_verdict,
    parametrize_with_checks,
    resolve_check_targets,
)
from dpverify.cli.app import main as cli_main
from dpverify.core import registry
from dpverify.core.claims import Finding, PrivacyClaim, Verdict
from dpverify.core.errors import InputError
from dpverify.core.registry import Algorithm, Battery, CheckConfig, Target, Variant, resolve

REPO = Path(__file__).resolve().parents[1]


def test_expectations_are_derived_from_the_findings():
    t = resolve("noisy_gd:planted_no_clip")  # detected_by sensitivity and audit
    got = {s.id.split(".", 2)[2]: s.expected for s in battery_specs(t)}
    assert got["sensitivity"] is got["audit.whitebox"] is got["audit.blackbox"] is Verdict.FAIL
    assert got["account"] is got["outputs"] is got["setting"] is Verdict.PASS
    assert expected_verdict(resolve("noisy_gd:sound"), "audit.whitebox") is Verdict.PASS


def test_an_override_needs_its_reason_and_unknown_checks_are_refused():
    with pytest.raises(ValueError, match="needs a reason"):
        CheckConfig(expected="PASS")
    base = resolve("noisy_gd:planted_no_clip")
    cfg = CheckConfig(expected="PASS", reason="the leak is in the transcript only")
    v = dataclasses.replace(base.variant, battery=Battery(checks={"audit.blackbox": cfg}))
    spec = next(s for s in battery_specs(Target(base.algorithm, v))
                if s.id.endswith("audit.blackbox"))
    assert spec.expected is Verdict.PASS and spec.reason == cfg.reason
    v = dataclasses.replace(base.variant, battery=Battery(checks={"audti": CheckConfig()}))
    with pytest.raises(InputError, match="unknown battery check"):
        battery_specs(Target(base.algorithm, v))
    with pytest.raises(InputError, match="unknown battery check"):
        battery_specs(base, ["acount"])


def test_targets_resolve_by_variant_algorithm_and_package():
    ids = [t.id for t in resolve_check_targets(["baselines"])]
    assert "noisy_gd:sound" in ids and "dp_sgd:planted_no_clip" in ids
    assert [t.id for t in resolve_check_targets(["noisy_gd:sound"])] == ["noisy_gd:sound"]
    assert len(resolve_check_targets(None)) == sum(len(a.variants)
                                                   for a in registry.all_algorithms())
    with pytest.raises(InputError, match="neither a registered algorithm nor a package"):
        resolve_check_targets(["no_such_thing"])


def test_the_private_schedule_is_caught_by_the_setting_check_naming_the_field(capsys):
    """Judged against its claim alone (--expect-pass, as a user's algorithm that declares no
    findings is), the planted variant exits 1 and the message names both fields; judged
    against its declared finding, the FAIL is the expectation, met."""
    argv = ["check", "dp_rgda:planted_private_schedule", "--check", "setting", "--quiet"]
    assert cli_main([*argv, "--expect-pass"]) == 1
    out = capsys.readouterr().out
    assert "constants.F0" in out and "constants.minimax_setting.F0" in out
    assert cli_main(argv) == 0
    assert cli_main(["check", "dp_rgda:sound", "--check", "setting", "--quiet"]) == 0


# Trial separability ----------------------------------------------------------------------


def _shared_noise_run(cur, setting, params):
    """Each trial's answer pulled towards the block's mean answer: trials are not runs."""
    g = cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)
    return g + 0.1 * g.mean(axis=0, keepdims=True)


def _separate_run(cur, setting, params):
    return cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)


def _tiny_target(run) -> Target:
    from algorithms.mechanisms import make_sum_problem

    v = Variant("sound", "sound", run,
                lambda p: PrivacyClaim(epsilon=float(p["epsilon"]), delta=1e-5))
    a = Algorithm("tiny", "test", "test", make_sum_problem,
                  {"n": 20, "d": 2, "clip": 1.0, "epsilon": 5.0}, {"sound": v})
    return Target(a, v)


@pytest.mark.parametrize(("run", "expected"), [(_shared_noise_run, Verdict.FAIL),
                                               (_separate_run, Verdict.PASS)])
def test_determinism_sees_trials_that_share_state(run, expected):
    outcome, _ = run_check_on(CheckSpec("d", "determinism", "tiny:sound"), _tiny_target(run))
    assert outcome.verdict is expected, outcome.message
    if expected is Verdict.FAIL:
        assert "trials are not independent runs" in outcome.message


def run_check_on(spec: CheckSpec, target: Target):
    from dpverify.checks.base import get_kind
    from dpverify.execution.experiment import Experiment

    kind = get_kind(spec.kind)
    return kind.run(Experiment(target, spec.params), kind.options(spec.options)), spec


def test_determinism_result_object():
    outcome, _ = run_check_on(CheckSpec("d", "determinism", "x"), _tiny_target(_separate_run))
    assert outcome.result.separable and outcome.result.reordered_identical


# The door ---------------------------------------------------------------------------------

_KEPT: list = []


def _keeping_query_run(cur, setting, params):
    """A query that keeps the records it is handed, and an output built from them."""
    def query(X, y, w):
        _KEPT[:] = [X]
        return w @ X

    g = cur.gaussian("sum", query, sensitivity=1.0, noise_std=1.0)
    return g + _KEPT[0].mean(axis=0)


def _private_field_run(cur, setting, params):
    """A start point read from the curator's private fields, beside a proper release."""
    g = cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)
    return g + cur.backend.to_numpy(cur._X[0])[0]


def _branching_run(cur, setting, params):
    """How many releases it makes depends on records it reads without a release: two where
    they are distinct, as D's continuous records are."""
    x = cur.backend.to_numpy(cur._X[0])[:, 0]
    releases = 1 + int(np.unique(x).size == x.size)
    for _ in range(releases):
        g = cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)
    return g


def _kept_for_later_run(cur, setting, params):
    """Records kept from each run, read in the next: the first playback follows the run on
    D and agrees with it, the second follows a run on other records."""
    g = cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)
    earlier = _KEPT[0].mean(axis=0) if _KEPT else 0.0
    _KEPT[:] = [cur.backend.to_numpy(cur._X[0])]
    return g + earlier


@pytest.mark.parametrize(("run", "expected"), [
    (_keeping_query_run, Verdict.FAIL), (_private_field_run, Verdict.FAIL),
    (_kept_for_later_run, Verdict.FAIL),
    (_separate_run, Verdict.PASS), (_shared_noise_run, Verdict.PASS)])
def test_the_door_check_sees_records_read_other_than_through_releases(run, expected):
    outcome, _ = run_check_on(CheckSpec("d", "door", "tiny:sound"), _tiny_target(run))
    assert outcome.verdict is expected, outcome.message
    assert outcome.result.releases == 1
    if expected is Verdict.FAIL:
        assert "other than through its releases" in outcome.message
        assert outcome.result.moved > 0


_FIRST: dict = {}


def _first_run_cache_run(cur, setting, params):
    """Centres its output on its records' mean, computed on its first-ever run and kept
    for every later one (a cache in a module's global): only a process that never ran it
    on D sees the other records move it."""
    def query(X, y, w):
        _FIRST.setdefault("mean", X.mean(axis=0))
        return w @ X

    g = cur.gaussian("sum", query, sensitivity=1.0, noise_std=1.0)
    return g - _FIRST["mean"]


def test_the_door_check_sees_records_a_first_run_keeps_for_every_later_one():
    # In this process the cache already holds D's records (the run on D that comes first
    # fills it), so the two playbacks here agree with the recording.
    outcome, _ = run_check_on(CheckSpec("d", "door", "tiny:sound"),
                              _tiny_target(_first_run_cache_run))
    assert outcome.verdict is Verdict.FAIL, outcome.message
    assert outcome.result.fresh_process and outcome.result.moved > 0


_STASH: dict = {}


def _stashing_problem(params, rng):
    """The test problem, whose builder also keeps its records in a module's global."""
    from algorithms.mechanisms import make_sum_problem

    prob = make_sum_problem(params, rng)
    _STASH["X"] = prob.data.X
    return prob


def _stash_reading_run(cur, setting, params):
    g = cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)
    return g + _STASH["X"].mean(axis=0)


def test_a_run_that_needs_state_of_the_checking_process_is_not_passed():
    # Here the stash holds D's records whatever the playback's: both playbacks agree. A
    # fresh process built no problem, so the run raises there.
    t = _tiny_target(_stash_reading_run)
    target = Target(dataclasses.replace(t.algorithm, make_problem=_stashing_problem), t.variant)
    outcome, _ = run_check_on(CheckSpec("d", "door", "tiny:sound"), target)
    assert outcome.verdict is Verdict.INCONCLUSIVE, outcome.message
    assert "in a fresh process the run raised KeyError" in outcome.message
    assert outcome.result.fresh_process is False and "KeyError" in outcome.result.fresh_note


def test_a_variant_that_cannot_travel_is_played_back_here_and_the_report_says_so():
    def local_run(cur, setting, params):  # not importable by name, nor registered
        return cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)

    outcome, _ = run_check_on(CheckSpec("d", "door", "tiny:sound"), _tiny_target(local_run))
    assert outcome.verdict is Verdict.PASS, outcome.message
    assert outcome.result.fresh_process is False
    assert "could not be found there" in outcome.result.fresh_note
    assert "not in a fresh process" in outcome.message


def test_a_registered_variant_is_played_back_in_a_fresh_process_too():
    from dpverify.core.registry import resolve

    outcome, _ = run_check_on(CheckSpec("d", "door", "noisy_gd:sound", params={"n": 30, "T": 3}),
                              resolve("noisy_gd:sound"))
    assert outcome.verdict is Verdict.PASS and outcome.result.fresh_process, outcome.message
    assert "once in a fresh one" in outcome.message


def _global_stream_run(cur, setting, params):
    g = cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)
    return g + np.random.default_rng().normal(size=g.shape)


def test_the_door_check_does_not_blame_the_records_for_a_run_that_does_not_repeat():
    outcome, _ = run_check_on(CheckSpec("d", "door", "tiny:sound"),
                              _tiny_target(_global_stream_run))
    assert outcome.verdict is Verdict.INCONCLUSIVE
    assert "does not repeat itself" in outcome.message


def test_the_door_check_sees_a_release_sequence_set_by_unreleased_records():
    """The other records, 20 of D's drawn with replacement, repeat one (all distinct with
    probability 20!/20^20 < 1e-7): the playback makes one release where D's run made two."""
    outcome, _ = run_check_on(CheckSpec("d", "door", "tiny:sound"), _tiny_target(_branching_run))
    assert outcome.verdict is Verdict.FAIL
    assert "the sequence of releases changed" in outcome.message


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_playback_hands_out_the_recorded_answers_on_any_backend(backend):
    from dpverify.core.curator import Curator
    from dpverify.core.data import Dataset

    if backend == "torch":
        pytest.importorskip("torch")
    D = Dataset(np.arange(6.0).reshape(3, 2), np.zeros(3))
    E = Dataset(np.zeros((3, 2)), np.zeros(3))
    rec = Curator(D, trials=4, rng=3, keep_answers=True, backend=backend)
    q = lambda X, y, w: w @ X  # noqa: E731
    a = rec.laplace("l", q, sensitivity=1.0, scale=1.0)
    s = rec.exponential("e", q, sensitivity=1.0, epsilon=1.0)
    answers = [r.answer for r in rec.ledger.records]
    play = Curator.playback(E, answers, trials=4, rng=3, backend=backend)
    to_np = play.backend.to_numpy
    assert np.array_equal(to_np(play.laplace("l", q, sensitivity=1.0, scale=1.0)), to_np(a))
    assert np.array_equal(play.exponential("e", q, sensitivity=1.0, epsilon=1.0), s)
    assert play.unplayed is None
    own = play.gaussian("g", q, sensitivity=1.0, noise_std=1.0)  # none recorded: its own
    assert play.unplayed == 2 and to_np(own).shape == (4, 2)


# pytest and an out-of-tree package --------------------------------------------------------


@parametrize_with_checks(["gaussian_mechanism:planted_half_noise"],
                         names=["outputs", "setting", "account"])
def test_the_pytest_helper_runs_each_check(check):
    res = check()
    assert res.met


TINY_PACKAGE = '''
    """A user's own package: two variants of a Gaussian mechanism, one with a planted bug."""
    import numpy as np

    from dpverify.accounting.accountant import calibrate_gaussian
    from dpverify.core.claims import Finding, PrivacyClaim
    from dpverify.core.data import Dataset
    from dpverify.core.registry import Algorithm, Battery, Problem, Variant


    def make_problem(params, rng):
        X = rng.uniform(-1, 1, size=(int(params["n"]), 2))
        return Problem(data=Dataset(X, np.zeros(len(X))), public={"clip": 1.0})


    def run(factor):
        def go(cur, setting, p):
            sigma = calibrate_gaussian(target_epsilon=float(p["epsilon"]),
                                       target_delta=float(p["delta"]), steps=1)
            clip = float(setting["clip"])

            def query(X, y, w):
                nrm = cur.xp.linalg.vector_norm(X, axis=1)
                return w @ (X * cur.xp.where(nrm > clip, clip / nrm, 1.0)[:, None])

            return cur.gaussian("sum", query, sensitivity=clip, noise_std=factor * sigma * clip)
        return go


    def claim(p):
        return PrivacyClaim(epsilon=float(p["epsilon"]), delta=float(p["delta"]))


    ALGORITHMS = [Algorithm(
        "tinydp_sum", "a user's package", "clipped sum plus Gaussian noise", make_problem,
        {"n": 30, "epsilon": 1.0, "delta": 1e-5},
        {"sound": Variant("sound", "sound", run(1.0), claim),
         "half_noise": Variant("half_noise", "planted", run(0.5), claim, findings=(
             Finding("half the calibrated noise", detected_by=("account", "audit")),))},
        battery=Battery({"n": 30}, {"audit.blackbox": __import__(
            "dpverify.core.registry", fromlist=["registry"]).CheckConfig(
                options={"trials": 40000})}),
    )]
'''

TINY_TEST = '''
    from dpverify.checks.conformance import parametrize_with_checks


    @parametrize_with_checks(["tinydp"], names=["outputs", "setting", "account",
                                                "audit.whitebox", "audit.blackbox"])
    def test_tinydp(check):
        check()
'''


@pytest.fixture(scope="module")
def tiny_package(tmp_path_factory) -> Path:
    """A package ``tinydp`` and a ``.dist-info`` registering it, on a folder of its own."""
    root = tmp_path_factory.mktemp("site")
    (root / "tinydp").mkdir()
    (root / "tinydp" / "__init__.py").write_text(textwrap.dedent(TINY_PACKAGE))
    info = root / "tinydp-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinydp\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[dpverify.algorithms]\ntinydp = tinydp:ALGORITHMS\n")
    (root / "test_tinydp.py").write_text(textwrap.dedent(TINY_TEST))
    return root


def _run(args: list[str], site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    return subprocess.run([sys.executable, *args], cwd=site, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_an_out_of_tree_package_is_checked_with_no_test_of_its_own(tiny_package):
    """``dpverify check tinydp`` finds the package through its entry point, passes the sound
    variant and catches the planted one where its finding says (account and both audits)."""
    res = _run(["-m", "dpverify.cli", "check", "tinydp", "--quiet", "--check", "outputs",
                "--check", "account", "--check", "audit.whitebox", "--json", "out.json"],
               tiny_package)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "6/6 battery checks met their expectation" in res.stdout
    import json

    rep = json.loads((tiny_package / "out.json").read_text())
    verdicts = {c["id"]: c["verdict"] for c in rep["checks"]}
    assert verdicts["tinydp_sum.half_noise.account"] == "FAIL"
    assert verdicts["tinydp_sum.half_noise.audit.whitebox"] == "FAIL"
    assert verdicts["tinydp_sum.sound.audit.whitebox"] == "PASS"


@pytest.mark.slow
def test_an_out_of_tree_package_is_checked_by_pytest(tiny_package):
    res = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_tinydp.py"],
               tiny_package)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "10 passed" in res.stdout


def test_a_misspelt_target_is_exit_2(capsys):
    assert cli_main(["check", "no_such_algorithm"]) == 2
    assert "neither a registered algorithm nor a package" in capsys.readouterr().out


def test_every_registered_variant_has_a_battery():
    """Generating the battery never fails: every declared configuration names a real check,
    and every check id is unique."""
    specs = check_targets(None)
    assert len({s.id for s in specs}) == len(specs)
    assert all(isinstance(s.expected, Verdict) for s in specs)
    assert np.all([s.source.startswith("the battery of") for s in specs])
    assert Finding  # the findings drive them (see test_expectations_are_derived...)


def _named_checks(finding: Finding) -> list[str]:
    from dpverify.checks.conformance import BATTERY

    return [c.name for c in BATTERY
            if any(by == c.name or (by == "audit" and c.name.startswith("audit."))
                   for by in finding.detected_by)]


@pytest.mark.parametrize("package", ["baselines", "mechanisms"])
def test_every_planted_privacy_bug_is_seen_twice_or_says_why_not(package):
    """A planted privacy bug is expected FAIL by two battery checks of different kinds, or
    each check its finding names that is not expected to see it carries the reason."""
    for target in resolve_check_targets([package]):
        specs = {s.id.split(".", 2)[2]: s for s in battery_specs(target)}
        for finding in target.variant.findings:
            named = _named_checks(finding)
            if not named:
                continue  # a utility finding (rate), not the battery's
            seen = [n for n in named if specs[n].expected is Verdict.FAIL]
            excused = [n for n in named if n not in seen]
            assert seen, f"{target.id}: no battery check expects {finding.summary!r}"
            assert len(seen) >= 2 or (excused and all(specs[n].reason for n in excused)), (
                f"{target.id}: {finding.summary!r} is seen by {seen} alone, with no reason")
