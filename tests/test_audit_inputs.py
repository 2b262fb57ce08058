"""Bad input from any source is exit 2, naming the value and where it came from."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from dpverify.checks.audit import BlackBoxOptions, audit_blackbox
from dpverify.checks.audit.targets import check_independent_rows
from dpverify.cli.app import main
from dpverify.core.data import Dataset, check_finite
from dpverify.core.errors import InputError

MODULE = '''
import numpy as np

def f(data, rng, trials):
    X, y = data
    return np.clip(X, -1, 1).sum() + 4.0 * rng.standard_normal((trials, 1))

def rr(data, rng, trials):
    """Randomized response on the first record: a discrete output repeats by nature."""
    X, y = data
    keep = rng.random((trials, 1)) < 0.75
    return np.where(keep, X[0, 0], 1.0 - X[0, 0])

def rr_bool(data, rng, trials):
    """rr's outcome as a boolean: True where rr returns 1."""
    X, y = data
    keep = rng.random((trials, 1)) < 0.75
    return keep == (X[0, 0] > 0.5)

def global_draws(data, rng, trials):
    """Draws from numpy's global generator, not from rng."""
    X, y = data
    return np.clip(X, -1, 1).sum() + 4.0 * np.random.standard_normal((trials, 1))

def complex_out(data, rng, trials):
    return f(data, rng, trials) * (1 + 1j)

def once(data, rng, trials):
    """One noise draw repeated in every row of the block."""
    X, y = data
    return np.clip(X, -1, 1).sum() + np.repeat(4.0 * rng.standard_normal((1, 1)), trials, 0)

def seeded(data, rng, trials):
    """Ignores rng: every call draws the same noise."""
    X, y = data
    r = np.random.default_rng(7)
    return np.clip(X, -1, 1).sum() + 4.0 * r.standard_normal((trials, 1))

def seeded_counts(data, rng, trials):
    """Ignores rng, with outputs of few values: calls repeat each other, as counts may."""
    X, y = data
    r = np.random.default_rng(7)
    return (X[:, 0] > 0).sum() + r.integers(-3, 4, (trials, 1))

def nan_out(data, rng, trials):
    out = f(data, rng, trials)
    out[3, 0] = np.nan
    return out

def unguarded(data, rng, trials):
    """A sum without any guard against non-finite records."""
    return data.X.sum() + 4.0 * rng.standard_normal((trials, 1))

def noisy_max(answers, rng, trials):
    """Report noisy max on a vector of query answers, not a dataset."""
    a = np.asarray(answers, dtype=float)
    return np.argmax(a + rng.laplace(0, 2.0, (trials, a.size)), axis=1)[:, None] * 1.0

def label_out(data, rng, trials):
    return np.where(f(data, rng, trials) > 0, "yes", "no")

def two_args(data, rng):
    return f(data, rng, 1)

def per_record(data, rng, trials):
    """Randomized response on every record: one output per record."""
    X, y = data
    return np.where(rng.random((trials, len(X))) < 0.75, X[:, 0] > 0, X[:, 0] <= 0)

def far_pair():
    (X, y), _ = pair()
    return (X, y), (np.zeros((13, 1)), np.zeros(13))

def grow_pair():
    (X, y), _ = pair()
    return (X, y), (X[1:], y[1:])

def pair():
    X = np.zeros((10, 1)); y = np.zeros(10)
    Xp = X.copy(); Xp[0] = 1.0
    return (X, y), (Xp, y)

def nan_pair():
    (X, y), (Xp, yp) = pair()
    X[4, 0] = np.nan
    return (X, y), (Xp, yp)

def inf_label_pair():
    (X, y), (Xp, yp) = pair()
    yp = yp.copy(); yp[2] = np.inf
    return (X, y), (Xp, yp)
'''


@pytest.fixture
def mod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> str:
    name = f"inmod_{zlib.crc32(request.node.nodeid.encode())}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.mark.parametrize("target, pair, says", [
    ("f", "nan_pair", "neighbour function {m}:nan_pair: D[0] holds nan at index (4, 0)"),
    ("f", "inf_label_pair", "neighbour function {m}:inf_label_pair: D'[1] holds inf at index 2"),
    ("nan_out", "pair", "target {m}:nan_out returned nan in row 3, entry 0"),
    ("nan_out", "pair", "tells them apart) (runs on D of the pair {m}:pair)"),
    ("f", "far_pair", "neighbour function {m}:far_pair: neighbouring datasets must differ "
                      "by one record, got sizes 10 and 13"),
    ("complex_out", "pair", "target {m}:complex_out must return a real or boolean array"),
    ("label_out", "pair", "encode labels or categories as integers"),
    ("two_args", "pair", "a target takes exactly three arguments: f(data, rng, trials)"),
    ("per_record", "grow_pair", "an output whose shape follows the dataset's size tells"),
    ("once", "pair", "rows of a block are not independent runs"),
    ("seeded", "pair", "the rng argument (a fixed seed"),
    ("seeded_counts", "pair", "the rng argument (a fixed seed"),
])
@pytest.mark.parametrize("trials", [[], ["--trials", "4000"]])
def test_bad_input_is_exit_2_with_nothing_written(mod: str, capsys, target: str, pair: str,  # noqa: ANN001
                                                  says: str, trials: list[str]) -> None:
    rc = main(["audit", f"{mod}:{target}", "--neighbours", f"{mod}:{pair}", "--epsilon", "1",
               "--delta", "1e-5", "--json", "out.json", "--quiet", *trials])
    out = capsys.readouterr().out
    assert rc == 2 and says.format(m=mod) in out
    assert not Path("out.json").exists()


def test_a_gaussian_bound_of_a_pure_dp_claim_is_refused_before_any_run(mod: str,
                                                                        capsys) -> None:  # noqa: ANN001
    rc = main(["audit", f"{mod}:f", "--neighbours", f"{mod}:pair", "--epsilon", "1",
               "--delta", "0", "--trials", "4000", "--bound", "gdp", "--quiet"])
    assert rc == 2 and "no finite epsilon at delta 0" in capsys.readouterr().out


def test_a_target_taking_query_answers_is_told_how_to_say_so(mod: str, capsys) -> None:  # noqa: ANN001
    args = ["audit", f"{mod}:noisy_max", "--epsilon", "1", "--delta", "0", "--trials", "4000",
            "--quiet"]
    assert main(args) == 2
    assert "give --param queries=K" in capsys.readouterr().out
    # Searched, and private as claimed: a false FAIL has probability at most 0.05 (the
    # default confidence); the seed is fixed.
    assert main([*args, "--param", "queries=3"]) == 0


def test_discrete_outputs_repeat_legitimately(mod: str) -> None:
    r = audit_blackbox(f"{mod}:rr", BlackBoxOptions(
        neighbours=f"{mod}:pair", epsilon=1.2, delta=1e-5,
        trials=4000, accountant=False, detect_probability=None))
    assert r.verdict.value == "PASS"


def test_boolean_outputs_are_outcomes(mod: str) -> None:
    """A target returning booleans is audited as one returning 0 and 1."""
    runs = {t: audit_blackbox(f"{mod}:{t}", BlackBoxOptions(
        neighbours=f"{mod}:pair", epsilon=0.5, delta=1e-5, trials=4000, accountant=False,
        detect_probability=None)) for t in ("rr", "rr_bool")}
    assert runs["rr"].epsilon_lower == runs["rr_bool"].epsilon_lower
    # ln 3 against a claim of 0.5: missed with probability far below 1e-6 at 4,000 runs.
    assert runs["rr_bool"].verdict.value == "FAIL"


def test_randomness_outside_rng_is_named(mod: str, capsys) -> None:  # noqa: ANN001
    """Valid but not reproducible: the audit runs and says why a rerun differs."""
    args = ["audit", "--neighbours", f"{mod}:pair", "--epsilon", "1", "--delta", "1e-5",
            "--trials", "2000"]
    assert main([*args[:1], f"{mod}:global_draws", *args[1:]]) in (0, 1)
    assert "is not reproducible from its rng argument" in capsys.readouterr().out
    assert main([*args[:1], f"{mod}:f", *args[1:]]) in (0, 1)
    assert "not reproducible" not in capsys.readouterr().out


def test_the_deliberate_nonfinite_canary_is_evidence_not_bad_input(mod: str) -> None:
    """A callable fed the built-in nonfinite record may return NaN: that is the finding."""
    r = audit_blackbox(f"{mod}:unguarded", BlackBoxOptions(
        neighbours="nonfinite", epsilon=1.0, delta=1e-5,
        trials=2000, accountant=False, detect_probability=None))
    assert r.verdict.value == "FAIL"


def test_check_finite_walks_what_users_return() -> None:
    check_finite({"X": np.ones((2, 2)), "y": [1.0, 2.0]}, "data")
    check_finite(Dataset(np.full((1, 1), np.nan), np.zeros(1), allow_nonfinite=True), "c")
    with pytest.raises(InputError, match=r"data\['y'\] holds -inf at index 1"):
        check_finite({"X": np.ones((2, 2)), "y": [1.0, -np.inf]}, "data")


def test_independent_rows_pass_at_any_granularity() -> None:
    """Continuous, snapped and binary outputs: within- and across-block repeats match."""
    rng = np.random.default_rng(0)
    for draw in (lambda: rng.normal(size=(1024, 2)),
                 lambda: np.round(rng.normal(size=(1024, 1)) * 4096) / 4096,
                 lambda: (rng.random((1024, 1)) < 0.5).astype(float)):
        check_independent_rows([draw() for _ in range(6)], "m:f")
    halves = [rng.normal(size=(512, 1)) for _ in range(3)]
    with pytest.raises(InputError, match="independent run"):  # each draw used twice
        check_independent_rows([np.vstack([h, h]) for h in halves], "m:f")
