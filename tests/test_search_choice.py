"""``benchmarks/search_choice.py`` replays the audit's pair search on exact outcome laws."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from algorithms.catalogue import EPSILON
from dpverify.checks.audit.blackbox import FINALISTS, MIN_EVENT_RUNS
from dpverify.checks.audit.distinguishers import resolve_distinguishers, smoothed_log_ratio
from dpverify.core.data import QUERY_PATTERNS, far_distance, query_pair

_DIR = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, _DIR / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


ceiling = _load("ceiling")
choice = _load("search_choice")


def test_a_replayed_search_chooses_among_its_finalists() -> None:
    law, k = ceiling.LAWS["svt2"]
    laws = {n: tuple(law(x) for x in query_pair(n, k, far=far_distance(EPSILON)))
            for n in QUERY_PATTERNS}
    for seed, rule in enumerate(choice.RULES):
        witness, eps, finalists, cost = choice.search(laws, 200_000, rule, 0.1, seed)
        assert len(finalists) == rule.finalists and witness in finalists and cost == 1.0
        assert np.isfinite(eps) and eps >= 0.0
    # A race, refitting or counting its tests' events only, spends at most its cap (and a
    # last round of two pairs), and ends on a finalist.
    for refit in (True, False):
        costs = []
        for seed in (0, 2):  # seed 0's finalists are told apart at once, seed 2's are not
            witness, eps, finalists, cost = choice.search(
                laws, 200_000, choice.RULES[-1], 0.1, seed, choice.Race(4.0, refit))
            assert witness in finalists and 1.0 <= cost <= 4.0 + 1.0 / FINALISTS + 1e-9
            assert np.isfinite(eps) and eps >= 0.0
            costs.append(cost)
        assert costs[0] == 1.0 < costs[1]
    assert choice.RULES[-1] == choice.Rule(FINALISTS, True, True,  # the audit's own
                                           min_runs=MIN_EVENT_RUNS)
    # Where every event is too thin to read first, pairs are ordered as with no such rule.
    thin = [choice.search(laws, 200_000, replace(choice.RULES[-1], min_runs=m), 0.1, 1)
            for m in (0, 10**9)]
    assert thin[0] == thin[1]


def test_the_replayed_table_scores_outcomes_as_the_histogram_distinguisher_does() -> None:
    rng = np.random.default_rng(3)
    out_D, out_Dp = rng.choice(3, (400, 1), p=[0.6, 0.3, 0.1]), rng.choice(3, (400, 1))
    [(_, fit)] = resolve_distinguishers("histogram")
    scorer = fit(out_D.astype(float), out_Dp.astype(float), rng)
    counts = [np.bincount(o[:, 0], minlength=3) for o in (out_D, out_Dp)]
    assert np.allclose(scorer(np.arange(3.0)[:, None]), smoothed_log_ratio(*counts))


def test_the_replay_takes_other_splits_and_refuses_bad_ones(capsys) -> None:
    import pytest

    argv = ["--row", "svt2", "--runs", "200000", "--seeds", "2", "--rules", "5"]
    assert choice.main([*argv, "--splits", "0.04,0.11,0.85"]) == 0
    assert "splits 0.04/0.11/0.85: mean bound" in capsys.readouterr().out
    for bad in ("0.5,0.6", "0.1,0.2", "a,b,c"):
        with pytest.raises(SystemExit) as e:
            choice.main([*argv, "--splits", bad])
        assert e.value.code == 2
        assert "--splits: " in capsys.readouterr().err
