"""The classic catalogue of DP mechanisms, and what the default black-box audit finds in it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import tomllib
from scipy import stats as sstats

from algorithms import catalogue as cat
from dpverify.checks.audit import BlackBoxOptions, audit_blackbox

SUITE = Path(__file__).resolve().parent.parent / "suites" / "mechanisms.toml"


def test_discrete_laplace_is_exact_and_two_sided_geometric() -> None:
    """On the lattice, with P(k) proportional to r^|k|: a chi-square test of the counts of
    |k| in bands against the exact law, at level 1e-4 (its failure probability; fixed
    seed)."""
    rng = np.random.default_rng(0)
    grid, scale = 2.0**-3, 1.0
    z = cat.discrete_laplace(rng, scale, (200000,), grid=grid)
    k = z / grid
    assert np.array_equal(k, np.round(k))
    r = math.exp(-grid / scale)
    edges = np.arange(0, 41, 4)
    # P(|K| = m) = (1 - r)/(1 + r) * (1 if m == 0 else 2 r^m)
    pm = lambda m: (1 - r) / (1 + r) * np.where(m == 0, 1.0, 2.0 * r**m)  # noqa: E731
    expected = np.array([pm(np.arange(a, b)).sum() for a, b in zip(edges[:-1], edges[1:],
                                                                    strict=True)])
    counts = np.bincount(np.abs(k).astype(int), minlength=edges[-1])
    observed = np.add.reduceat(counts[:edges[-1]], edges[:-1])  # bands [a, b), half-open
    expected = np.append(expected, 1 - expected.sum()) * k.size
    observed = np.append(observed, k.size - observed.sum())
    assert sstats.chisquare(observed, expected).pvalue > 1e-4


def test_truncated_geometric_follows_its_law() -> None:
    """Counts of each output against the truncated geometric pmf with alpha = 2^k/(2^k+1)
    (chi-square at level 1e-4, its failure probability; fixed seed)."""
    rng = np.random.default_rng(1)
    out = cat.truncated_geometric(np.array([2.0]), rng, 200000)[:, 0]
    alpha = 2**cat.GEO_K / (2**cat.GEO_K + 1)
    n, c = cat.GEO_N, 2
    pmf = [alpha ** abs(z - c) * ((1 - alpha) / (1 + alpha) if 0 < z < n else 1 / (1 + alpha))
           for z in range(n + 1)]
    assert sum(pmf) == pytest.approx(1.0)
    observed = np.bincount(out.astype(int), minlength=n + 1)
    assert sstats.chisquare(observed, np.array(pmf) * out.size).pvalue > 1e-4
    assert cat.GEO_EPSILON == pytest.approx(math.log(1.125))


def test_sparse_vector_stops_after_c_answers_above() -> None:
    above = np.array([[False, True, True], [False, False, False]])
    out = cat._cut_after(above, np.full(above.shape, 7.0), -1.0, -2.0)
    assert out.tolist() == [[-1.0, 7.0, -2.0], [-1.0, -1.0, -1.0]]


def test_every_row_declares_its_claim_and_the_suite_expects_what_it_knows() -> None:
    """A row whose known epsilon exceeds its claim is expected to FAIL, every other to
    PASS; every catalogue mechanism is in the suite, audited through the pair search."""
    suite = tomllib.loads(SUITE.read_text())
    by_target = {c["target"].partition(":")[2]: c for c in suite["check"]}
    assert set(cat.CATALOGUE) <= set(by_target)
    for name, fn in cat.CATALOGUE.items():
        decl = fn.dpverify_declaration
        assert decl.delta == 0.0 and decl.queries and decl.source
        check = by_target[name]
        bug = decl.epsilon_true is not None and decl.epsilon_true > decl.epsilon
        assert check["expected"] == ("FAIL" if bug else "PASS"), name
        assert "neighbours" not in check.get("options", {}), name  # found, not given


@pytest.mark.parametrize("name, expected", [
    ("laplace_naive_float", "FAIL"), ("laplace_snapped", "PASS"), ("laplace", "PASS"),
    ("noisy_hist2", "FAIL"), ("truncated_geometric", "PASS"),
])
def test_default_audits_of_the_laplace_rows(name: str, expected: str) -> None:
    """Defaults only (pair search, ``auto`` distinguishers, lowbits among them): the
    textbook float Laplace is caught within 10^6 runs, the float-safe ones pass. At the
    suite's confidence, 0.99: a correct row fails on any seed with probability at most
    0.01 (at 0.95 the snapped row's seed 0 is one of the 5%)."""
    r = audit_blackbox(f"algorithms.catalogue:{name}",
                       BlackBoxOptions(trials=20000, seed=0, confidence=0.99))
    assert r.verdict.value == expected
    assert r.details["runs_total"] <= 10**6
    if name == "laplace_naive_float":
        assert r.details["distinguisher"] == "lowbits" and r.epsilon_lower > 0.5


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rnm1", "svt4"])
def test_sparse_discrete_outputs_give_nonzero_bounds_from_1e5_runs(name: str) -> None:
    """Report-noisy-max's index and the sparse vector's pattern: exact tables of patterns,
    ranked on every search run, prove a nonzero epsilon from 10^5 runs (seed 0), where
    every ranking bound of the selection split used to be 0."""
    r = audit_blackbox(f"algorithms.catalogue:{name}", BlackBoxOptions(trials=100_000, seed=0))
    assert r.epsilon_lower > 0.03


@pytest.mark.parametrize("name, one, zero", [
    ("rappor", 0.75 * 0.5 + 0.25 * 0.55, 0.75 * 0.5 + 0.25 * 0.45),  # q*, p*
    ("one_time_rappor", 1 - 0.95 / 2, 0.95 / 2),
])
def test_rappor_reports_each_bit_as_the_paper_says(name: str, one: float, zero: float) -> None:
    """A bit of the value's Bloom filter is reported set with probability ``one``, any
    other with ``zero`` (Erlingsson et al. 2014, Section 3), and the claim is 2h times
    the log-ratio of one bit. Two-sided binomial tests on the pooled bits, each at level
    1e-5 (failure probability 2e-5 in all; fixed seed)."""
    fn = cat.CATALOGUE[name]
    bits = cat.bloom_filter(1.0).astype(bool)
    out = fn(np.array([1.0]), np.random.default_rng(3), 100_000)
    assert out.shape == (100_000, cat.RAPPOR_K) and set(np.unique(out)) <= {0.0, 1.0}
    for mask, p in ((bits, one), (~bits, zero)):
        k, n = int(out[:, mask].sum()), int(mask.sum()) * out.shape[0]
        assert sstats.binomtest(k, n, p).pvalue > 1e-5
    bit = math.log(one / zero)
    assert fn.dpverify_declaration.epsilon == pytest.approx(2 * cat.RAPPOR_H * bit)
    assert not np.array_equal(cat.bloom_filter(0.0), cat.bloom_filter(1.0))


def test_prefix_sums_are_of_noisy_answers_on_the_float_safe_grid() -> None:
    """The sums' differences are the answers plus Laplace noise of scale 1/epsilon: exact
    multiples of the grid away from the answers, with mean absolute deviation 10 (a
    z-test at 5 standard errors, failure probability below 1e-6; fixed seed)."""
    a = np.arange(10.0)
    out = cat.prefix_sum(a, np.random.default_rng(4), 50_000)
    noise = np.diff(out, axis=1, prepend=0.0) - a
    assert np.array_equal(noise / cat.GRID, np.round(noise / cat.GRID))
    dev = np.abs(noise).ravel()
    assert abs(dev.mean() - 1 / cat.EPSILON) < 5 * dev.std() / math.sqrt(dev.size)


@pytest.mark.parametrize("name, columns", [("numerical_svt", [slice(0, 10)]),
                                           ("svt34_parallel", [slice(0, 10), slice(10, 20)])])
def test_sparse_vectors_with_c_2_answer_two_queries_then_stop(name: str,
                                                              columns: list[slice]) -> None:
    """Every pass answers at most c = 2 queries above its threshold and codes the queries
    after the second as not answered. The answers sit 5000 above the threshold, over 40
    noise scales: a run misses one with probability below 1e-15 (fixed seed)."""
    fn = cat.CATALOGUE[name]
    out = fn(np.full(10, 5000.0), np.random.default_rng(5), 2000)
    codes = (cat.BELOW, cat.ABORTED, cat.SVT3_BELOW, cat.SVT3_ABORTED)
    for cols in columns:
        part = out[:, cols]
        answered = ~np.isin(part, codes)
        aborted = np.isin(part, (cat.ABORTED, cat.SVT3_ABORTED))
        assert answered.sum(axis=1).max() == 2
        assert np.all(answered[:, :2]) and np.all(aborted[:, 2:])
