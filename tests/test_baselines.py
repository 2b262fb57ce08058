"""The baselines: every variant of noisy GD and DP-SGD runs, and the ledger shows the noise
its claim calls for (or, for a planted variant, exactly its planted defect)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpverify.accounting.accountant import calibrate_gaussian
from dpverify.core.data import make_pair
from dpverify.core.registry import get_algorithm, resolve
from dpverify.execution.trials import build_problem, run_target

# dp_sgd runs at its default q and T = 50: the calibration is then the one the smoke suite
# uses too (calibrate_gaussian is cached), and 50 steps on 60 records are cheap.
SMALL = {"noisy_gd": {"T": 3, "n": 60}, "dp_sgd": {"T": 50, "n": 60}}
TARGETS = [f"{a}:{v}" for a in ("noisy_gd", "dp_sgd") for v in get_algorithm(a).variants]
# Columns a variant returns beside the model: the training loss, for the planted leak.
EXTRA_COLUMNS = {"noisy_gd:planted_logged_loss": 1}


def _run(target: str, overrides=None, *, trials: int = 3, seed: int = 0, pair_spec=None):
    t = resolve(target)
    p = t.algorithm.params(t.variant.name, {**SMALL[t.algorithm.name], **(overrides or {})})
    problem = build_problem(t, p, seed)
    pair = None
    if pair_spec is not None:
        pair = make_pair(pair_spec, problem.data, np.random.default_rng(seed), p["relation"])
    out, cur = run_target(t, p, problem, trials=trials, rng=seed + 1, data=pair)
    return out, cur, p


@pytest.mark.parametrize("target", TARGETS)
def test_every_variant_runs_and_returns_finite_outputs(target):
    out, cur, p = _run(target)
    assert out.shape == (3, p["d"] + EXTRA_COLUMNS.get(target, 0))
    assert np.all(np.isfinite(out))
    assert len(cur.ledger) == p["T"]
    model = out[:, :p["d"]]
    assert np.all(np.linalg.norm(model, axis=1) <= p["radius"] * (1 + 1e-12))  # projected
    claim = resolve(target).variant.claim(p)
    assert (claim.epsilon, claim.delta, claim.relation) == (p["epsilon"], p["delta"],
                                                           p["relation"])


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("algo", ["noisy_gd", "dp_sgd"])
def test_nan_record_passes_only_where_planted(algo):
    """On a pair whose extra record holds NaN and inf, the sound variant's guard drops it;
    noisy_gd's planted_nan_passes lets it poison the output."""
    out, _, _ = _run(f"{algo}:sound", pair_spec="nonfinite")
    assert np.all(np.isfinite(out))
    if algo == "noisy_gd":
        out, _, _ = _run("noisy_gd:planted_nan_passes", pair_spec="nonfinite")
        assert out.shape == (3, 5) and not np.all(np.isfinite(out))


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_noisy_gd_sound_noise_is_calibrated(relation):
    out, cur, p = _run("noisy_gd:sound", {"relation": relation})
    sigma = calibrate_gaussian(target_epsilon=p["epsilon"], target_delta=p["delta"],
                               steps=p["T"], relation=relation)
    sens = p["clip"] * (1.0 if relation == "add_remove" else 2.0)
    for rel in cur.ledger:
        assert (rel.mechanism, rel.sampling, rel.sensitivity) == ("gaussian", "full", sens)
        assert rel.noise == pytest.approx(sigma * sens, rel=1e-12)
    assert [r.step for r in cur.ledger] == list(range(p["T"]))


def test_dp_sgd_sound_noise_is_calibrated_for_poisson_sampling():
    _, cur, p = _run("dp_sgd:sound")
    sigma = calibrate_gaussian(target_epsilon=p["epsilon"], target_delta=p["delta"],
                               steps=p["T"], sampling_probability=p["q"],
                               relation=p["relation"])
    for rel in cur.ledger:
        assert (rel.sampling, rel.rate, rel.sensitivity) == ("poisson", p["q"], p["clip"])
        assert rel.noise == pytest.approx(sigma * p["clip"], rel=1e-12)


def test_planted_defects_show_in_the_ledger():
    """Each planted variant changes exactly what it says it does."""
    _, sound, p = _run("noisy_gd:sound")
    C, n, T = p["clip"], p["n"], p["T"]
    noise = sound.ledger.releases[0].noise
    sigma_half = calibrate_gaussian(target_epsilon=p["epsilon"], target_delta=p["delta"],
                                    steps=T // 2, relation=p["relation"])
    _, half, _ = _run("noisy_gd:planted_half_steps")
    assert len(half.ledger) == T
    assert half.ledger.releases[0].noise == pytest.approx(sigma_half * C)
    assert sigma_half * C < noise
    _, mean, _ = _run("noisy_gd:planted_mean_noise_on_sum")
    assert mean.ledger.releases[0].sensitivity == pytest.approx(C / n)
    assert mean.ledger.releases[0].noise == pytest.approx(noise / n)
    _, grow, _ = _run("noisy_gd:planted_noise_grows_sqrt_n")
    assert grow.ledger.releases[0].noise == pytest.approx(noise * max(1.0, math.sqrt(n / 100)))
    _, rep, prep = _run("noisy_gd:planted_replace_sensitivity_L")
    assert prep["relation"] == "replace_one"
    assert rep.ledger.releases[0].sensitivity == pytest.approx(C)  # should be 2C
    _, shuf, _ = _run("dp_sgd:planted_shuffle_as_poisson")
    assert {r.sampling for r in shuf.ledger} == {"shuffle"}
    assert all(r.touched is not None for r in shuf.ledger)


def test_outputs_are_reproducible_from_the_seed():
    a, _, _ = _run("dp_sgd:sound", seed=4)
    b, _, _ = _run("dp_sgd:sound", seed=4)
    c, _, _ = _run("dp_sgd:sound", seed=5)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
