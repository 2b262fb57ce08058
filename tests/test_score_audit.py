"""The score auditor: one statistic object serves every audit mode, selection strategies
state their validity, and bad scores or options are refused by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from scipy import stats as sstats

from dpverify.checks.audit import (
    BlackBoxOptions,
    OneRunOptions,
    WhiteBoxOptions,
    audit_blackbox,
    audit_whitebox,
)
from dpverify.checks.mia.core import MembershipOptions, membership_inference
from dpverify.core.errors import InputError
from dpverify.stats import audit_bounds as ab
from dpverify.stats.score_audit import (
    Bonferroni,
    ClopperPearson,
    Conditional,
    GaussianDP,
    ScoreAudit,
    Split,
    epsilon_lower_of,
    statistics_of,
)
from dpverify.stats.selection import Counts, Tails


@dataclass(frozen=True)
class StrictClopperPearson:
    """A deliberately loose statistic: the Clopper-Pearson rectangle at a hundredth of the
    level (valid, since a bound at alpha / 100 holds at alpha), ranked as Clopper-Pearson
    ranks (Jagielski et al. 2020)."""

    name: ClassVar[str] = "strict_clopper_pearson"
    family: ClassVar[str] = "cp"
    orientations: ClassVar[tuple[str, ...]] = ("both",)
    citation: ClassVar[str] = "Jagielski et al. 2020, at alpha / 100"

    def anticipate(self, tails: Tails, *, delta: float, alpha: float,
                   level: float) -> tuple[np.ndarray, ...]:
        return ClopperPearson().anticipate(tails, delta=delta, alpha=alpha, level=level)

    def bound(self, counts: Counts, *, delta: float,
              alpha: float) -> tuple[float, float | None]:
        return ClopperPearson().bound(counts, delta=delta, alpha=alpha / 100.0)


STRICT, PLAIN = StrictClopperPearson(), ClopperPearson()


def test_a_new_statistic_is_one_class_for_black_box_audits() -> None:
    """Same seed, same plan (the toy anticipates as Clopper-Pearson does), smaller bound."""
    def run(bound: object):  # type: ignore[no-untyped-def]
        return audit_blackbox("gaussian_mechanism:planted_half_noise", BlackBoxOptions(
            trials=20000, distinguisher="projection", bound=bound, accountant=False,
            detect_probability=None))

    strict, plain = run(STRICT), run(PLAIN)
    assert strict.bound == "strict_clopper_pearson" and plain.bound == "clopper_pearson"
    assert strict.evidence["test"]["statistic"] == "strict_clopper_pearson"
    assert strict.evidence["test"]["threshold"] == plain.evidence["test"]["threshold"]
    assert 0.0 < strict.epsilon_lower < plain.epsilon_lower


def test_a_new_statistic_is_one_class_for_white_box_audits() -> None:
    def run(bound: object):  # type: ignore[no-untyped-def]
        return audit_whitebox("noisy_gd:planted_mean_noise_on_sum", WhiteBoxOptions(
            params={"T": 5, "n": 50, "loss": "linear"}, trials=1000, bound=bound,
            accountant=False, detect_probability=None))

    strict, plain = run(STRICT), run(PLAIN)
    assert strict.bound == "strict_clopper_pearson"
    assert strict.details["epsilon_lower_cp"] == strict.epsilon_lower
    assert 0.0 < strict.epsilon_lower < plain.epsilon_lower


def test_a_new_statistic_is_one_class_for_membership_inference() -> None:
    def run(**bound: object):  # type: ignore[no-untyped-def]
        return membership_inference("dp_sgd:planted_no_clip", MembershipOptions(
            trials=600, attack="loss", records="outlier", pool=4, design="single",
            params={"n": 100, "T": 10, "q": 1.0}, accountant=False,
            detect_probability=None, **bound))

    strict, plain, default = run(bound=STRICT), run(bound=PLAIN), run()
    assert strict.evidence["roc_test"]["statistic"] == "strict_clopper_pearson"
    assert plain.epsilon_lower == default.epsilon_lower
    assert 0.0 < strict.epsilon_lower < plain.epsilon_lower


def test_scores_are_checked_by_name() -> None:
    with pytest.raises(InputError, match="scores_D of 'x' must be one-dimensional"):
        ScoreAudit(np.zeros((2, 2)), np.zeros(3), "x")
    with pytest.raises(InputError, match="scores_D_prime of 'x' is empty"):
        ScoreAudit(np.zeros(2), np.zeros(0), "x")
    with pytest.raises(InputError, match="scores_D of 'x' holds NaN at index 2"):
        ScoreAudit(np.array([0.0, 1.0, np.nan]), np.zeros(3), "x")
    a = ScoreAudit(np.array([np.inf, 0.0]), np.array([0.0, -np.inf]))  # infinite losses
    assert a.counts(1.0) == Counts(1, 2, 0, 2)


def test_options_are_checked_by_name() -> None:
    with pytest.raises(InputError, match="trials must be a finite number > 0, got 0"):
        BlackBoxOptions(trials=0)
    with pytest.raises(InputError, match="bound must be 'cp', 'gdp' or 'auto', got 'x'"):
        BlackBoxOptions(bound="x")
    with pytest.raises(InputError, match="a statistic needs"):
        WhiteBoxOptions(bound=3.0)
    with pytest.raises(InputError, match="canaries must be a finite number > 0"):
        OneRunOptions(canaries=-1)
    with pytest.raises(InputError, match="design must be one of"):
        MembershipOptions(design="twice")
    with pytest.raises(InputError, match="rank it alone"):
        statistics_of((GaussianDP(), ClopperPearson()))
    with pytest.raises(InputError, match="Bonferroni: thresholds"):
        Bonferroni((np.inf,))


def test_epsilon_lower_names_its_winner_and_counts_only_the_test_split() -> None:
    rng = np.random.default_rng(0)
    audits = [ScoreAudit(rng.normal(0.0, 1, 5000), rng.normal(0, 1, 5000), "null"),
              ScoreAudit(rng.normal(-1.5, 1, 5000), rng.normal(0, 1, 5000), "lower")]
    b = epsilon_lower_of(audits, (Conditional(), ClopperPearson()), Split(0.2, smooth=True),
                         delta=1e-5)
    assert (b.candidate, b.sign) == (1, -1.0) and b.epsilon > 1.0
    test = audits[1].split(1000, 1000)[1]
    assert (b.n_pos, b.n_neg) == (4000, 4000)
    assert b.tp == np.count_nonzero(-test.scores_D >= b.threshold)
    assert b.citation and b.statistic in ("conditional", "clopper_pearson")


@pytest.mark.statistical
def test_bonferroni_over_fixed_thresholds_keeps_alpha() -> None:
    """Randomized response at its claim epsilon = 0.5 (the tightest null), three fixed
    thresholds, both directions, every run counted: P(epsilon_lower > 0.5) <= alpha = 0.2
    per replication. 300 replications of 2000 runs per world (fixed seed); the test fails
    when the count exceeds what a rate of 0.2 exceeds with probability 1e-4."""
    p = np.exp(0.5) / (1 + np.exp(0.5))
    rng = np.random.default_rng(1)
    strategy = Bonferroni((-0.5, 0.5, 1.5))
    over = 0
    for _ in range(300):
        a = ScoreAudit((rng.random(2000) < p).astype(float),
                       (rng.random(2000) < 1 - p).astype(float))
        over += a.epsilon_lower(ClopperPearson(), strategy, delta=0.0,
                                confidence=0.8).epsilon > 0.5
    assert over <= int(sstats.binom.isf(1e-4, 300, 0.2))


def test_statistics_agree_with_their_formulas() -> None:
    c = Counts(600, 1000, 300, 1000, "D")
    assert Conditional().bound(c, delta=0.0, alpha=0.05)[0] == pytest.approx(
        ab.epsilon_lower_bound_conditional(600, 1000, 300, 1000, 0.0, 0.05))
    assert ClopperPearson().bound(c, delta=1e-5, alpha=0.05)[0] == pytest.approx(
        float(ab.epsilon_lower_bound(300, 1000, 400, 1000, 1e-5, 0.05)))
    eps, mu = GaussianDP().bound(c, delta=1e-5, alpha=0.05)
    assert mu == pytest.approx(float(ab.gdp_mu_lower_bound(300, 1000, 400, 1000, 0.05)))
    assert eps == pytest.approx(ab.epsilon_from_gdp(mu, 1e-5))
    with pytest.raises(InputError, match="one orientation"):
        Conditional().bound(Counts(1, 2, 1, 2), delta=0.0, alpha=0.05)


def test_suite_options_name_fields_of_the_options_objects() -> None:
    """A suite's option tables and the audits' options objects share one set of names:
    every suite key of a mode is a field of that mode's options object."""
    from dataclasses import fields

    from dpverify.checks.audit.check import _SCHEDULE, AuditOptions
    from dpverify.checks.mia.check import MiaOptions

    objects = {f.name for kind in (BlackBoxOptions, WhiteBoxOptions, OneRunOptions)
               for f in fields(kind)}
    suite = {f.name for f in fields(AuditOptions)} - {"mode", "sequential", *_SCHEDULE}
    assert suite <= objects
    assert {f.name for f in fields(MiaOptions)} <= {f.name for f in fields(MembershipOptions)}
