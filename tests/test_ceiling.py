"""The exact outcome laws behind ``benchmarks/ceiling.py`` match the mechanisms."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from algorithms import catalogue as cat
from dpverify.core.data import query_pair

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "ceiling.py"
_SPEC = importlib.util.spec_from_file_location("ceiling", _PATH)
ceiling = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ceiling)


def _first_above(out: np.ndarray) -> np.ndarray:
    above = out == 1.0
    return np.where(above.any(axis=1), above.argmax(axis=1), out.shape[1])


def test_outcome_law_matches_the_catalogues_svt1() -> None:
    """Chi-square goodness of fit on 200,000 runs of each world of the half-half pair.

    Fails with probability 1e-4 per world when the law is right (the catalogue's grid
    noise differs from Laplace by far less than this sample resolves)."""
    rng = np.random.default_rng(11)
    for answers in query_pair("half_half", cat.SVT_QUERIES):
        p = ceiling.svt_law(answers, 0.5)
        assert abs(p.sum() - 1.0) < 1e-9
        seen = np.bincount(_first_above(cat.svt1(answers, rng, 200_000)), minlength=len(p))
        assert stats.chisquare(seen, 200_000 * p).pvalue > 1e-4


@pytest.mark.parametrize("row, pattern, world, seed",
                         [("svt2", "half_half", 1, 13), ("svt4", "x_shape", 0, 14)])
def test_svt2_and_svt4_laws_match_the_catalogues(row: str, pattern: str, world: int,
                                                  seed: int) -> None:
    """Chi-square on 200,000 runs of one world; fails with probability 1e-4 per row."""
    answers = query_pair(pattern, cat.SVT_QUERIES)[world]
    p = ceiling.LAWS[row][0](answers)
    out = getattr(cat, row)(answers, np.random.default_rng(seed), 200_000)
    seen = np.bincount(_first_above(out), minlength=len(p))
    assert stats.chisquare(seen, 200_000 * p).pvalue > 1e-4


def test_rnm1_law_matches_the_catalogues_report_noisy_max() -> None:
    """Chi-square on 200,000 runs per world of a pair; fails with probability 1e-4 per world."""
    rng = np.random.default_rng(12)
    for answers in query_pair("one_below_rest_above", cat.RNM_QUERIES):
        p = ceiling.rnm_law(answers)
        seen = np.bincount(cat.rnm1(answers, rng, 200_000)[:, 0].astype(int), minlength=len(p))
        assert stats.chisquare(seen, 200_000 * p).pvalue > 1e-4


def test_the_ceiling_rises_with_runs_and_stays_below_the_pairs_epsilon() -> None:
    a, b = query_pair("half_half", cat.SVT_QUERIES)
    p, q = ceiling.svt_law(a, 0.5), ceiling.svt_law(b, 0.5)
    true = float(np.max(np.log(p / q)))
    small, _, _ = ceiling.ceiling(p, q, 10**6, 0.1)
    large, prob, size = ceiling.ceiling(p, q, 10**8, 0.1)
    assert 0 < small < large < true
    assert size == 1 and 0.02 < prob < 0.025


def test_the_oracle_reach_is_read_off_its_counts() -> None:
    """An outcome of log-ratio 0.1 and probability 0.3, counted on 10^6 runs per dataset:
    its bound at 0.9 sits near 0.1 less two standard errors (0.003 each), so a figure of
    0.05 is reached on every draw and one of 0.12 on none (400 draws, seeded)."""
    p = np.array([0.3, 0.7])
    q = np.array([0.3 * np.exp(-0.1), 1 - 0.3 * np.exp(-0.1)])
    rng = np.random.default_rng(0)
    low, mean, sd = ceiling.reach(p, q, 10**6, 0.1, 0.05, 400, rng)
    high, _, _ = ceiling.reach(p, q, 10**6, 0.1, 0.12, 400, rng)
    assert (low, high) == (1.0, 0.0)
    assert 0.09 < mean < 0.1 and 0.001 < sd < 0.01
