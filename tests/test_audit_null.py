"""The auditors test themselves: on null mechanisms false violations stay at or below alpha.

A null mechanism is private as claimed, so a FAIL verdict is a false violation, and each
audit's bound promises P(FAIL) <= alpha = 1 - confidence. These tests run the whole
pipeline (sampling, fitting, selection, bounding) over 200 independent seeds each, at
alpha = 0.2 so that a moderately anti-conservative auditor would show, and compare the
number of FAILs with a binomial tail: the test fails when the count exceeds what a rate of
alpha exceeds with probability 1e-3 (the test's own failure probability). The nulls are
chosen where the bounds are tight: a Laplace mechanism (events of probability 1/2 have
exactly the ratio e^eps), exact Gaussian trade-offs for the GDP bounds, and a mechanism
whose output ignores the data, searched with every distinguisher.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from scipy import stats as sstats

from dpverify.checks.audit import (
    AuditResult,
    BlackBoxOptions,
    WhiteBoxOptions,
    audit_blackbox,
    audit_whitebox,
)

SEEDS = 200
ALPHA = 0.2
FAILURE = 1e-3


def false_violations(run: Callable[[int], AuditResult], seeds: range) -> int:
    return sum(run(s).verdict.value == "FAIL" for s in seeds)


def limit(n: int) -> int:
    k = int(sstats.binom.isf(FAILURE, n, ALPHA))
    assert sstats.binom.sf(k, n, ALPHA) <= FAILURE
    return k


@pytest.mark.statistical
def test_laplace_cp_false_violation_rate() -> None:
    """Black-box, Clopper-Pearson bound, Laplace mechanism at its claimed epsilon = 1."""
    def run(seed: int) -> AuditResult:
        return audit_blackbox("laplace_mechanism:sound", BlackBoxOptions(trials=1000, seed=seed,
                              confidence=1 - ALPHA, distinguisher="projection",
                              accountant=False))

    assert false_violations(run, range(SEEDS)) <= limit(SEEDS)


@pytest.mark.statistical
def test_gdp_and_selection_false_violation_rate() -> None:
    """Three nulls in turn over 200 seeds (a pooled rate <= alpha if each is):

    * black-box GDP bound on the Gaussian mechanism (exactly Gaussian trade-off);
    * white-box GDP bound from the spread of exact losses, noisy GD with a linear canary;
    * a data-independent output searched with five distinguishers on two pairs.
    """
    def run(seed: int) -> AuditResult:
        kind = seed % 3
        if kind == 0:
            return audit_blackbox("gaussian_mechanism:sound", BlackBoxOptions(
                trials=1000, seed=seed,
                confidence=1 - ALPHA, distinguisher="projection",
                bound="gdp", accountant=False))
        if kind == 1:
            return audit_whitebox("noisy_gd:sound", WhiteBoxOptions(trials=100, seed=seed,
                                  confidence=1 - ALPHA, accountant=False,
                                  params={"loss": "linear", "n": 20, "d": 2, "T": 3}))
        return audit_blackbox("gaussian_mechanism:null_constant", BlackBoxOptions(
            trials=300, seed=seed,
            confidence=1 - ALPHA, accountant=False,
            distinguisher="projection,norm,lda,laplace_lr,histogram",
            neighbours="fresh_direction,outlier"))

    assert false_violations(run, range(SEEDS)) <= limit(SEEDS)


@pytest.mark.statistical
def test_pair_search_and_tight_pure_nulls_false_violation_rate() -> None:
    """The search pipeline on nulls tight at their claims, 200 seeds at alpha = 0.2:

    * the catalogue's Laplace (float-safe) at 0.1, pure DP, its pairs searched, three
      distinguishers (bit patterns among them);
    * the truncated geometric at ln(1.125), whose boundary atoms have likelihood ratio
      exactly e^eps: the bound can reach the claim;
    * the Gaussian mechanism at (1, 1e-5), where the binormal smoothing picks far tails.

    A pooled rate <= alpha if each is; the test fails when the count exceeds what a rate
    of alpha exceeds with probability 1e-3 (its failure probability; seeds fixed).
    """
    def run(seed: int) -> AuditResult:
        kind = seed % 3
        if kind == 0:
            return audit_blackbox("algorithms.catalogue:laplace", BlackBoxOptions(
                trials=1000, seed=seed,
                confidence=1 - ALPHA,
                distinguisher="projection,histogram,lowbits"))
        if kind == 1:
            return audit_blackbox("algorithms.catalogue:truncated_geometric", BlackBoxOptions(
                trials=1000,
                seed=seed, confidence=1 - ALPHA,
                distinguisher="projection,histogram"))
        return audit_blackbox("gaussian_mechanism:sound", BlackBoxOptions(trials=2000, seed=seed,
                              confidence=1 - ALPHA, distinguisher="projection,lda",
                              accountant=False))

    assert false_violations(run, range(SEEDS)) <= limit(SEEDS)
