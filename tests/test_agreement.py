"""Backend agreement: NumPy against torch, trajectories and distributions.

The conformance test runs over every registered algorithm variant, so an algorithm added
to the registry is checked on torch without a new test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from array_api_compat import is_torch_namespace  # noqa: E402

from algorithms.losses import Logistic  # noqa: E402
from dpverify.checks.agreement import (  # noqa: E402
    Candidate,
    _relative_deviation,
    coordinate_test,
    distribution_agreement,
    trajectory_agreement,
    trajectory_tolerance,
)
from dpverify.checks.base import CheckSpec, RunContext, run_check  # noqa: E402
from dpverify.cli.agree import configure_parser, parse_params, run_command  # noqa: E402
from dpverify.core.backends.torch_backend import TorchBackend  # noqa: E402
from dpverify.core.claims import Verdict  # noqa: E402
from dpverify.core.errors import InputError  # noqa: E402
from dpverify.core.registry import Algorithm, all_algorithms, resolve  # noqa: E402
from dpverify.execution.trials import build_problem  # noqa: E402

pytestmark = pytest.mark.torch
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Any:
    # The tensors here are small: intra-op threads only add synchronisation, which costs
    # several times the work itself when the cores are shared with other processes.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

# Shrunk only where an algorithm has the parameter and its default is larger. T = 20, not
# fewer: calibrating Poisson-sampled noise by PLD gets slower as T shrinks, and the tests
# below reuse these settings so each calibration is computed once (it is cached).
SMALL = {"T": 20, "n": 80, "epochs": 1, "steps": 20, "iterations": 20}


def small_params(algo: Algorithm, variant: str | None = None) -> dict[str, Any]:
    # A size the variant pins itself is part of its setting (a single pass needs its n).
    pinned = algo.variants[variant].params if variant is not None else {}
    out = {}
    for k, v in SMALL.items():
        default = algo.defaults.get(k)
        if (k not in pinned and isinstance(default, int) and not isinstance(default, bool)
                and default > v):
            out[k] = v
    return out


VARIANTS = [(a, v) for a in all_algorithms() for v in a.variants]
GD_SMALL = small_params(resolve("noisy_gd").algorithm)


# the rule --------------------------------------------------------------------------------


def test_tolerance_rule_scales_with_epsilon_and_releases() -> None:
    assert trajectory_tolerance("float64", 10) == 64 * 10 * np.finfo(np.float64).eps
    assert trajectory_tolerance("float32", 10) == 64 * 10 * float(np.finfo(np.float32).eps)
    assert trajectory_tolerance("float64", 0) == trajectory_tolerance("float64", 1)
    with pytest.raises(InputError):
        trajectory_tolerance("float16", 1)


def test_relative_deviation_is_normwise_and_handles_nonfinite() -> None:
    a = np.array([[100.0, 1.0], [0.0, 0.0]])
    b = np.array([[100.0, 2.0], [0.0, 0.5]])
    max_abs, max_rel = _relative_deviation(a, b)
    assert max_abs == 1.0
    assert max_rel == 0.5  # the zero row is compared absolutely
    nan = np.array([[np.nan, np.inf]])
    assert _relative_deviation(nan, nan.copy()) == (0.0, 0.0)
    assert _relative_deviation(nan, np.array([[0.0, np.inf]]))[1] == np.inf


# conformance over every registered variant -----------------------------------------------


@pytest.mark.parametrize(("algo", "variant"), VARIANTS,
                         ids=[f"{a.name}:{v}" for a, v in VARIANTS])
def test_every_variant_agrees_on_one_noise_stream(algo: Algorithm, variant: str) -> None:
    r = trajectory_agreement(f"{algo.name}:{variant}", small_params(algo, variant), trials=3,
                             seed=1)
    assert r.ledger_match, "the torch run made different releases"
    assert r.releases > 0
    assert r.passed, (
        f"max relative deviation {r.max_rel_dev:.3g} vs tolerance {r.tolerance:.3g}; "
        f"first divergent release {r.first_divergent_release} ({r.first_divergent_name})"
    )


@pytest.mark.parametrize("target", ["noisy_gd:sound", "dp_sgd:sound"])
def test_float32_agrees_within_its_tolerance(target: str) -> None:
    r = trajectory_agreement(target, small_params(resolve(target).algorithm),
                             candidate=Candidate(dtype="float32"))
    assert r.passed, r.metrics()
    # float32 is really used: its rounding shows, far above float64's.
    assert r.max_rel_dev > 100 * np.finfo(np.float64).eps


# planted gradient bugs -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SignFlippedDerivative(Logistic):
    """The closed form with its sign lost: the NumPy backend is the wrong one."""

    def dvalue(self, z: Any, y: Any, xp: Any) -> Any:
        return -super().dvalue(z, y, xp)


@dataclasses.dataclass(frozen=True)
class TorchValueDoubled(Logistic):
    """A value with a spurious factor 2 on torch only: the torch backend is the wrong one."""

    def value(self, z: Any, y: Any, xp: Any) -> Any:
        v = super().value(z, y, xp)
        return 2.0 * v if is_torch_namespace(xp) else v


@pytest.mark.parametrize("bad_loss", [SignFlippedDerivative(), TorchValueDoubled()],
                         ids=["numpy_derivative_sign", "torch_value_factor"])
def test_a_planted_gradient_bug_is_caught(bad_loss: Logistic) -> None:
    t = resolve("noisy_gd:sound")
    params = t.algorithm.params("sound", {"T": 5, "n": 100})
    problem = dataclasses.replace(build_problem(t, params, 0), loss=bad_loss)
    r = trajectory_agreement(t, {"T": 5, "n": 100}, problem=problem)
    assert not r.passed
    assert r.max_rel_dev > 1e6 * r.tolerance  # not a near miss: orders above rounding
    assert r.first_divergent_release == 0 and r.first_divergent_name == "grad_sum"
    # The same problem with the loss as written agrees: the bug, not the setup, is caught.
    ok = dataclasses.replace(problem, loss=Logistic())
    assert trajectory_agreement(t, {"T": 5, "n": 100}, problem=ok).passed


# distributional agreement ----------------------------------------------------------------


@pytest.mark.statistical
def test_distributions_agree_on_noisy_gd() -> None:
    # KS per coordinate with Holm at alpha = 0.01: with agreeing backends a seed gives a
    # false FAIL with probability at most 0.01; this fixed seed is one that passes.
    r = distribution_agreement("noisy_gd:sound", GD_SMALL, trials=500, seed=0, alpha=0.01)
    assert r.passed, r.metrics()
    assert len(r.pvalues) == 5 and r.trials == 500
    assert r.backend == "torch:cpu"


class DoubledNoiseBackend(TorchBackend):
    """A torch sampler with twice the standard deviation it should have."""

    def normal(self, rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
        return 2.0 * super().normal(rng, shape)


@pytest.mark.statistical
def test_a_planted_sampler_bug_is_caught_by_distributions() -> None:
    bad = DoubledNoiseBackend(noise="own")
    r = distribution_agreement("noisy_gd:sound", GD_SMALL, trials=500, seed=0, alpha=0.01,
                               candidate=Candidate(backend=bad))
    assert not r.passed
    assert r.min_pvalue_adjusted < 1e-6


def test_an_exact_release_agrees_as_a_point_mass() -> None:
    """The printed tree releases its last prefix sum without noise: on each backend a point
    mass, one rounding apart between them, which KS alone would reject."""
    r = distribution_agreement("tree_prefix:paper", trials=40, seed=0)
    assert r.passed and r.pvalues[-1] == 1.0
    x = np.full(40, 1.0)
    assert coordinate_test(x, x + 1e-16, "float64") == (0.0, 1.0)
    assert coordinate_test(x, x + 1e-6, "float64") == (1.0, 0.0)
    assert coordinate_test(x, np.full(40, np.nan), "float64") == (1.0, 0.0)


def test_distributional_input_errors() -> None:
    with pytest.raises(InputError):
        distribution_agreement("noisy_gd:sound", {"T": 2}, trials=1)
    with pytest.raises(InputError):
        distribution_agreement("noisy_gd:sound", {"T": 2}, trials=10, alpha=1.5)


# the check kind --------------------------------------------------------------------------


def test_agree_check_kind_passes_with_its_evidence() -> None:
    spec = CheckSpec("g", "agree", "noisy_gd:sound", params={"T": 4, "n": 80},
                     options={"trials": 200, "alpha": 0.01})
    res = run_check(spec, RunContext(seed=3))
    assert res.outcome.verdict == Verdict.PASS, res.outcome.message
    m = res.outcome.metrics
    for key in ("max_abs_dev", "max_rel_dev", "tolerance", "pvalues", "alpha", "trials"):
        assert key in m
    assert m["max_rel_dev"] <= m["tolerance"] and m["trials"] == 200
    assert json.dumps(res.to_dict())  # report-ready


def test_agree_check_kind_rejects_unknown_options() -> None:
    spec = CheckSpec("g", "agree", "noisy_gd:sound", options={"tolerance": 1})
    with pytest.raises(InputError, match="unknown option"):
        run_check(spec, RunContext())


def test_cli_zero_trials_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        _args("noisy_gd:sound", "--trials", "0")
    assert info.value.code == 2
    assert "argument --trials: must be a positive integer, got '0'" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_agree_check_kind_without_cuda_is_inconclusive() -> None:
    spec = CheckSpec("g", "agree", "noisy_gd:sound", options={"device": "cuda"})
    assert run_check(spec, RunContext()).outcome.verdict == Verdict.INCONCLUSIVE


# the command line ------------------------------------------------------------------------


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    configure_parser(p)
    return p.parse_args(list(argv))


def test_cli_pass_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "agree.json"
    code = run_command(_args("noisy_gd:sound", "--param", "T=3", "--param", "n=60",
                             "--trials", "100", "--seed", "2", "--json", str(out)))
    assert code == 0
    assert capsys.readouterr().out.startswith("PASS")
    rec = json.loads(out.read_text())
    assert rec["kind"] == "agree" and rec["verdict"] == "PASS" and rec["seed"] == 2
    assert rec["metrics"]["trials"] == 100 and rec["params"] == {"T": 3, "n": 60}


def test_dpverify_agree_subcommand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dpverify.cli.app import main

    out = tmp_path / "a.json"
    assert main(["agree", "noisy_gd:sound", "--param", "T=3", "--param", "n=60",
                 "--trials", "50", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["metrics"]["trials"] == 50
    assert main(["agree", "noisy_gd:sound", "--param", "T=3", "--mode", "trajectory",
                 "--dtype", "float32", "--safety", "1e-3"]) == 1
    assert main(["agree", "no_such_algorithm"]) == 2
    assert "no_such_algorithm" in capsys.readouterr().out


def test_cli_fail_exits_one() -> None:
    # A tolerance below float32 rounding: the comparison must report the deviation.
    assert run_command(_args("noisy_gd:sound", "--param", "T=3", "--mode", "trajectory",
                             "--dtype", "float32", "--safety", "1e-3")) == 1


@pytest.mark.parametrize("argv", [
    ("no_such_algorithm",),
    ("noisy_gd:no_such_variant",),
    ("noisy_gd:sound", "--param", "no_such_param=1"),
    ("noisy_gd:sound", "--param", "T"),
])
def test_cli_bad_input_is_an_input_error(argv: tuple[str, ...]) -> None:
    with pytest.raises(InputError):
        run_command(_args(*argv, "--mode", "trajectory"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cli_cuda_without_gpu_is_an_input_error() -> None:
    with pytest.raises(InputError, match="CUDA"):
        run_command(_args("noisy_gd:sound", "--device", "cuda"))


def test_parse_params_types() -> None:
    assert parse_params(["T=5", "eta=0.5", "loss=huber", "on=false", "xs=[1, 2]"]) == {
        "T": 5, "eta": 0.5, "loss": "huber", "on": False, "xs": [1, 2]}


# CUDA ------------------------------------------------------------------------------------


@needs_cuda
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cuda_trajectories_agree(dtype: str) -> None:
    for target in ("noisy_gd:sound", "dp_sgd:sound"):
        r = trajectory_agreement(target, {"T": 10, "n": 200},
                                 candidate=Candidate("cuda", dtype))
        assert r.passed, r.metrics()
        assert r.backend.startswith("torch:cuda")


@needs_cuda
@pytest.mark.statistical
def test_cuda_distributions_agree() -> None:
    # Same failure probability as on CPU: at most alpha = 0.01 over seeds.
    r = distribution_agreement("noisy_gd:sound", {"T": 10, "n": 200}, trials=500, seed=0,
                               candidate=Candidate("cuda"))
    assert r.passed, r.metrics()
