"""The auditors' subjects: Gaussian and Laplace mechanisms, sound and with planted bugs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpverify.checks.account import account_target
from dpverify.checks.audit.targets import make_pairs, prepare, sample
from dpverify.core.registry import resolve
from dpverify.execution.trials import build_problem, run_target


@pytest.mark.parametrize("target", [
    "gaussian_mechanism:sound", "gaussian_mechanism:sound_two_releases",
    "laplace_mechanism:sound", "laplace_histogram:sound",
])
@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_sound_mechanisms_are_accounted_at_their_claim(target: str, relation: str) -> None:
    res, claim, _ = account_target(target, {"relation": relation})
    assert res.epsilon == pytest.approx(claim.epsilon, rel=2e-2)


def _outputs(target: str, which: str, trials: int = 4000, **params: object) -> np.ndarray:
    s = prepare(target, params=params)
    pr = make_pairs(s, "fresh_direction")[0]
    return sample(s, pr.D if which == "D" else pr.D_prime, trials, np.random.SeedSequence(7))


def test_null_constant_ignores_the_data() -> None:
    a = _outputs("gaussian_mechanism:null_constant", "D")
    b = _outputs("gaussian_mechanism:null_constant", "D'")
    assert np.array_equal(a, b)  # same seed, different data: identical outputs


def test_naive_float_laplace_lives_on_a_finite_set_that_moves() -> None:
    a = _outputs("laplace_mechanism:planted_naive_float", "D", grid_bits=8)
    b = _outputs("laplace_mechanism:planted_naive_float", "D'", grid_bits=8)
    assert len(np.unique(a)) <= 2**8 and len(np.unique(b)) <= 2**8
    assert len(np.intersect1d(a, b)) < 0.05 * len(np.unique(a))
    sound = _outputs("laplace_mechanism:sound", "D")  # snapped to 2^-12 of the scale
    assert len(np.unique(sound)) > 0.8 * sound.size


def test_reused_noise_cancels_in_the_difference() -> None:
    t = resolve("gaussian_mechanism:planted_reused_noise")
    p = t.algorithm.params(t.variant.name)
    prob = build_problem(t, p, 0)
    out, cur = run_target(t, p, prob, trials=50, rng=1)
    q = prob.data.X.sum()  # records lie in the unit ball: no clipping
    # exact up to the snapping grid (2^-12 of the noise scale)
    assert np.allclose(out[:, 0] - out[:, 1], q / 2, atol=1e-2)
    assert np.std(out[:, 0]) > 1.0 and len(cur.ledger) == 2
    t = resolve("gaussian_mechanism:sound_two_releases")
    out, _ = run_target(t, p, build_problem(t, p, 0), trials=50, rng=1)
    assert np.std(out[:, 0] - out[:, 1]) > 1.0


@pytest.mark.parametrize("target,expected", [
    ("gaussian_mechanism:sound", "PASS"), ("laplace_mechanism:sound", "PASS"),
    ("gaussian_mechanism:planted_float_textbook", "FAIL"),
])
def test_snapping_erases_the_float_artefacts(target: str, expected: str) -> None:
    """The textbook float64 q + sigma Z leaks q through its last bits; snapped, it does not."""
    from dpverify.checks.audit import BlackBoxOptions, audit_blackbox

    r = audit_blackbox(target, BlackBoxOptions(
        trials=20000, distinguisher="lowbits", accountant=False))
    assert r.verdict.value == expected
    # A violation found in the bits says so, and what to do about it.
    assert ("floating-point bits" in r.message()) == (expected == "FAIL")
    if expected == "FAIL":
        assert f"epsilon >= {r.epsilon_lower:.4g} > " in r.message()


def test_histogram_canary_always_changes_bins() -> None:
    s = prepare("laplace_histogram:planted_replace_sensitivity")
    for spec in ("fresh_direction", "clip_boundary"):
        pr = make_pairs(s, spec)[0].pair
        assert pr.relation == "replace_one"
        b = lambda x: np.clip(np.floor((x + 1) * 2), 0, 3)  # noqa: E731  (4 bins)
        assert b(pr.D.X[pr.index, 0]) != b(pr.D_prime.X[pr.index, 0])


SNAPPED_SUM = '''
import numpy as np

def unclipped_sum(data, rng, trials):
    """A sum released with Laplace noise for records in [-1, 1], its clip forgotten, on a
    grid of 2^-20: a leak in the values (an outlier moves it far), none in the bits."""
    X = np.asarray(data.X, dtype=float)
    return np.round((X.sum() + rng.laplace(0.0, 2.0, (trials, 1))) * 2.0**20) / 2.0**20
'''


def test_a_value_leak_the_low_bits_test_finds_is_not_called_a_float_artefact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On outputs whose last bits are all zero the low-bits table reads only signs and
    exponents: its FAIL says the evidence is in the magnitudes, where the textbook float of
    the test above keeps the note of a floating-point artefact. Seeded (0)."""
    from dpverify.checks.audit import BlackBoxOptions, audit_blackbox
    from dpverify.checks.audit.distinguishers import fit_lowbits

    (tmp_path / "snapped_sum.py").write_text(SNAPPED_SUM)
    monkeypatch.syspath_prepend(str(tmp_path))
    r = audit_blackbox("snapped_sum:unclipped_sum", BlackBoxOptions(
        epsilon=1.0, delta=0.0, trials=20000, neighbours="outlier", distinguisher="lowbits"))
    assert r.verdict.value == "FAIL" and r.details["low_bits_vary"] is False
    assert "magnitudes" in r.message() and "Mironov" not in r.message()
    rng = np.random.default_rng(0)
    textbook = 0.5 + rng.laplace(size=(2000, 1))  # float64 arithmetic: every bit in use
    assert fit_lowbits(textbook, textbook + 1.0, rng).low_bits_vary
    # Integers fit float32 and are read at its width, where their last bits are zero too;
    # a float32 mechanism's are not.
    counts = rng.integers(0, 50, size=(2000, 1)).astype(float)
    assert not fit_lowbits(counts, counts + 1.0, rng).low_bits_vary
    f32 = (0.5 + rng.laplace(size=(4000, 1))).astype(np.float32).astype(float)
    assert fit_lowbits(f32[:2000], f32[2000:], rng).low_bits_vary
