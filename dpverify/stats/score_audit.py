"""Scores in, an epsilon lower bound out: the one auditor every audit mode hands its scores to.

Every audit ends the same way: runs on D and on D' are scored (a distinguisher's output,
a transcript's exact privacy loss, a membership attack's confidence), a test "score >= t"
(or, reversed, "score <= t") is chosen, counted, and its counts bounded. The three
ingredients are objects:

* :class:`ScoreAudit` holds the two samples of scores, checked once;
* a **statistic** turns a test's counts into an epsilon (or mu) bound and tells the
  selection what bound a threshold can be expected to give on a test split of a given
  size: :class:`ClopperPearson`, :class:`Conditional`, :class:`GaussianDP`. A new
  statistic is one frozen dataclass with ``name``, ``family``, ``orientations``,
  ``citation``, ``anticipate`` and ``bound`` (and ``variants``, where a constant of it is
  better chosen per test on the selection split);
* a **selection strategy** decides which counts choose the test and which bound it, and
  states why the bound stays valid: :class:`Split` (choose on one part, bound on fresh
  runs) and :class:`Bonferroni` (thresholds fixed in advance, every run counted, a union
  bound).

Two bounds of the audits do not fit the counts interface and stay beside it:
:class:`SampledGaussian` reads the moments of exact privacy-loss samples (a white-box
audit's), not a threshold's counts, and the betting e-process of
:mod:`dpverify.stats.betting` bounds epsilon from a sequence of rounds whose tests change
as they go: its validity is that of a test martingale, not of one fixed test.

The design follows jax_privacy's ``CanaryScoreAuditor`` (scores in, one method per bound,
threshold strategies as frozen dataclasses).

Examples
--------
>>> rng = np.random.default_rng(0)
>>> audit = ScoreAudit(rng.normal(1.0, 1.0, 20000), rng.normal(0.0, 1.0, 20000))
>>> b = audit.epsilon_lower(ClopperPearson(), Split(0.3), delta=1e-5, confidence=0.95)
>>> b.statistic, 1.0 < b.epsilon < 4.38, b.n_pos  # 1-GDP: epsilon 4.38 at delta 1e-5
('clopper_pearson', True, 14000)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dpverify.core.errors import InputError, check_probability
from dpverify.stats import audit_bounds as ab
from dpverify.stats import sampled_gaussian as sampled
from dpverify.stats import selection as sel
from dpverify.stats.audit_bounds import ThresholdBound
from dpverify.stats.selection import Counts, Tails

# Statistics -----------------------------------------------------------------------


@dataclass(frozen=True)
class ClopperPearson:
    """Rectangle of exact Clopper-Pearson upper bounds on FPR and FNR, each at alpha / 2.

    Jagielski, Ullman, Oprea 2020 ("Auditing differentially private machine learning"),
    Nasr et al. 2021 ("Adversary instantiation"): both inequalities of the
    hypothesis-testing region (Kairouz, Oh, Viswanath 2015, Theorem 2.1) are read off the
    same two bounds, so one test covers both orientations; valid with no assumption.

    Examples
    --------
    >>> ClopperPearson().bound(Counts(3000, 10000, 100, 10000), delta=1e-5, alpha=0.05)[0] > 2
    True
    """

    name: ClassVar[str] = "clopper_pearson"
    family: ClassVar[str] = "cp"
    orientations: ClassVar[tuple[str, ...]] = ("both",)
    citation: ClassVar[str] = "Jagielski et al. 2020; Nasr et al. 2021 (Clopper-Pearson)"

    def anticipate(self, tails: Tails, *, delta: float, alpha: float,
                   level: float) -> tuple[np.ndarray, ...]:
        return (sel.anticipate_rectangle(tails, delta=delta, alpha=alpha, level=level),)

    def bound(self, counts: Counts, *, delta: float,
              alpha: float) -> tuple[float, float | None]:
        c = counts
        return float(ab.epsilon_lower_bound(c.fp, c.n_neg, c.n_pos - c.tp, c.n_pos, delta,
                                            alpha)), None


@dataclass(frozen=True)
class Conditional:
    """The exact conditional bound on the odds ratio of the two worlds' rates of one event.

    Cornfield 1956 (the conditional interval of Fisher's exact test), turned into epsilon
    by :func:`~dpverify.stats.audit_bounds.epsilon_lower_bound_conditional`: the two rates'
    errors add in quadrature, not linearly as in a rectangle. One orientation per test:
    ``"D"`` (the event is evidence for D) or ``"D'"`` (its complement for D').
    ``rate_share`` is the share of alpha spent on the other world's rate; left ``None``,
    a selection split chooses it per test among
    :data:`~dpverify.stats.audit_bounds.RATE_SHARES` (see :meth:`variants`), and a test
    fixed in advance spends :data:`~dpverify.stats.audit_bounds.RATE_SHARE`.

    Examples
    --------
    >>> round(Conditional().bound(Counts(600, 1000, 300, 1000, "D"), delta=0.0,
    ...                           alpha=0.05)[0], 3)
    0.577
    >>> small = Counts(11000, 10**6, 10000, 10**6, "D")  # epsilon near 0.1: p0 weighs little
    >>> [round(Conditional(s).bound(small, delta=0.0, alpha=0.1)[0], 4) for s in (0.1, 0.01)]
    [0.0768, 0.0775]
    """

    rate_share: float | None = None
    name: ClassVar[str] = "conditional"
    family: ClassVar[str] = "cp"
    orientations: ClassVar[tuple[str, ...]] = ("D", "D'")
    citation: ClassVar[str] = "Cornfield 1956 (conditional odds-ratio bound)"

    def __post_init__(self) -> None:
        if self.rate_share is not None and not 0.0 < self.rate_share < 1.0:
            raise InputError(f"Conditional: rate_share must lie in (0, 1), got "
                             f"{self.rate_share!r}")

    @property
    def share(self) -> float:
        return ab.RATE_SHARE if self.rate_share is None else float(self.rate_share)

    def variants(self) -> tuple[Conditional, ...]:
        """One statistic per share of alpha a selection split may choose (this one alone
        where the share is set)."""
        if self.rate_share is not None:
            return (self,)
        return tuple(Conditional(s) for s in ab.RATE_SHARES)

    def anticipate(self, tails: Tails, *, delta: float, alpha: float,
                   level: float) -> tuple[np.ndarray, ...]:
        kw = {"delta": delta, "alpha": alpha, "level": level, "rate_share": self.share}
        return (sel.anticipate_conditional(tails, **kw),
                sel.anticipate_conditional(tails.complement(), **kw))

    def bound(self, counts: Counts, *, delta: float,
              alpha: float) -> tuple[float, float | None]:
        c = counts
        if c.orientation == "D":
            return ab.epsilon_lower_bound_conditional(c.tp, c.n_pos, c.fp, c.n_neg, delta,
                                                      alpha, self.share), None
        if c.orientation == "D'":
            return ab.epsilon_lower_bound_conditional(c.n_neg - c.fp, c.n_neg,
                                                      c.n_pos - c.tp, c.n_pos, delta,
                                                      alpha, self.share), None
        raise InputError(f"the conditional bound reads one orientation, 'D' or \"D'\"; got "
                         f"{c.orientation!r}")


@dataclass(frozen=True)
class GaussianDP:
    """mu of a Gaussian trade-off curve through the test's bounded rates, then epsilon.

    Nasr et al. 2023 ("Tight auditing of differentially private machine learning",
    Section 4) for the mu bound from one test; Dong, Roth, Su 2019 (Corollary 2.13) for
    the conversion of mu to epsilon at delta. Valid only where the mechanism's trade-off
    curve is Gaussian (the report states that assumption). Its anticipation is on the
    scale of mu, so it is ranked alone, never beside an epsilon statistic.

    Examples
    --------
    >>> eps, mu = GaussianDP().bound(Counts(69150, 100000, 30850, 100000), delta=1e-5,
    ...                              alpha=0.05)
    >>> round(mu, 2), round(eps, 2)
    (0.98, 4.3)
    """

    name: ClassVar[str] = "gdp"
    family: ClassVar[str] = "gdp"
    orientations: ClassVar[tuple[str, ...]] = ("both",)
    citation: ClassVar[str] = "Nasr et al. 2023; Dong, Roth, Su 2019 (Gaussian DP)"

    def anticipate(self, tails: Tails, *, delta: float, alpha: float,
                   level: float) -> tuple[np.ndarray, ...]:
        return (sel.anticipate_rectangle(tails, delta=delta, alpha=alpha, level=level,
                                         gdp=True),)

    def bound(self, counts: Counts, *, delta: float,
              alpha: float) -> tuple[float, float | None]:
        c = counts
        mu = float(ab.gdp_mu_lower_bound(c.fp, c.n_neg, c.n_pos - c.tp, c.n_pos, alpha))
        return ab.epsilon_from_gdp(mu, delta), mu


# The black-box default: every test is bounded by whichever of the two exact statistics
# its selection counts anticipate more from (the choice is made on the selection split).
CLOPPER_PEARSON_FAMILY: tuple[Any, ...] = (Conditional(), ClopperPearson())


def statistics_of(bound: Any) -> tuple[Any, ...]:
    """The statistics a ``bound`` option names: ``"cp"`` (the exact pair), ``"gdp"``, a
    statistic object, or a sequence of them.

    Examples
    --------
    >>> [s.name for s in statistics_of("cp")]
    ['conditional', 'clopper_pearson']
    >>> statistics_of(ClopperPearson())
    (ClopperPearson(),)
    """
    if isinstance(bound, str):
        if bound in ("cp", "auto"):
            return CLOPPER_PEARSON_FAMILY
        if bound == "gdp":
            return (GaussianDP(),)
        raise InputError(f"bound must be 'cp', 'gdp', 'auto' or a statistic object, got "
                         f"{bound!r}")
    items = tuple(bound) if isinstance(bound, (tuple, list)) else (bound,)
    for s in items:
        if not (callable(getattr(s, "bound", None)) and callable(getattr(s, "anticipate", None))
                and isinstance(getattr(s, "name", None), str)):
            raise InputError(f"a statistic needs a name, anticipate() and bound(); got {s!r}")
    if not items:
        raise InputError("no statistic given")
    if len(items) > 1 and any(s.family == "gdp" for s in items):
        raise InputError("a GDP statistic anticipates mu, not epsilon: rank it alone")
    return items


@dataclass(frozen=True)
class SampledGaussian:
    """The Poisson-subsampled Gaussian family's bound from exact privacy-loss samples.

    Mironov, Talwar, Zhang 2019 (Section 3) and Zhu, Dong, Wang 2022 (Theorem 11) for the
    family's dominating pair; :mod:`dpverify.stats.sampled_gaussian` for the bound on the
    sensitivity multiplier kappa from the losses' mean and spread. It is not a counts
    statistic: its evidence is the moments of exact losses (a white-box audit's), which
    no threshold's counts carry, so it has :meth:`bound_runs` instead of ``bound``.

    Examples
    --------
    >>> s = SampledGaussian(sampled.Family(np.array([1.0]), np.array([0.2]), np.array([25])))
    >>> s.q, s.steps
    ((1.0,), 25)
    """

    family_: sampled.Family
    name: ClassVar[str] = "parametric"
    citation: ClassVar[str] = "Mironov, Talwar, Zhang 2019; Zhu, Dong, Wang 2022"

    @property
    def q(self) -> tuple[float, ...]:
        return tuple(float(x) for x in self.family_.q)

    @property
    def steps(self) -> int:
        return self.family_.steps

    def bound_runs(self, runs: Sequence[Any], *, alpha: float,
                   delta: float) -> dict[str, Any] | str:
        """The best pair's bound (Bonferroni over pairs), or why there is none."""
        return sampled.bound_runs(self.family_, runs, alpha=alpha, delta=delta)


# Selection strategies --------------------------------------------------------------


@dataclass(frozen=True)
class Split:
    """Choose the test on the first ``select`` share of each world's scores, bound it on
    the rest.

    Validity: the test split is independent of everything the choice saw, so the chosen
    test is a fixed test for its counts; keeping the ``top_k`` best costs a union bound
    (each at alpha / top_k). ``smooth`` ranks by the binormal-smoothed ROC where it fits
    and breaks ties by point estimates (the black-box ranking); without it the ranking is
    by pessimistic anticipation alone (the white-box and membership ones).

    Examples
    --------
    >>> Split(0.3).sizes(10)
    (3, 7)
    >>> Split(1.5)
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: Split: select must be in (0, 1), got 1.5
    """

    select: float = 0.3
    top_k: int = 1
    smooth: bool = False

    def __post_init__(self) -> None:
        if not 0.0 < float(self.select) < 1.0:
            raise InputError(f"Split: select must be in (0, 1), got {self.select!r}")
        if int(self.top_k) < 1:
            raise InputError(f"Split: top_k must be >= 1, got {self.top_k!r}")

    def sizes(self, n: int) -> tuple[int, int]:
        """Selection and test runs out of ``n`` (each at least 1)."""
        n_sel = max(1, min(n - 1, int(round(n * float(self.select)))))
        return n_sel, n - n_sel

    def bound(self, audits: Sequence[ScoreAudit], statistics: Sequence[Any], *,
              delta: float, alpha: float) -> ThresholdBound:
        parts = [a.split(self.sizes(a.n_pos)[0], self.sizes(a.n_neg)[0]) for a in audits]
        return self.bound_parts(parts, statistics, delta=delta, alpha=alpha)

    def bound_parts(self, parts: Sequence[tuple[ScoreAudit, ScoreAudit]],
                    statistics: Sequence[Any], *, delta: float, alpha: float
                    ) -> ThresholdBound:
        """Choose on each pair's first audit, bound on its second (already split)."""
        sels = [sel.Selection(s.label, s.scores_D, s.scores_D_prime, t.n_pos, t.n_neg)
                for s, t in parts]
        plans = sel.plan_tests(sels, statistics, delta=delta, alpha=alpha,
                               top_k=self.top_k, smooth=self.smooth)
        a = alpha / int(self.top_k)
        return max((parts[p.candidate][1].bound_planned(p, delta=delta, alpha=a)
                    for p in plans), key=lambda r: r.epsilon)


@dataclass(frozen=True)
class Bonferroni:
    """Every run counted at each of ``thresholds`` fixed in advance, both directions and
    every statistic's orientations, each at alpha / (their number); the largest bound.

    Validity: the thresholds do not depend on the scores, so each test is fixed, and the
    union bound over all of them (Bonferroni) holds whichever is reported.

    Examples
    --------
    >>> a = ScoreAudit(np.r_[np.ones(900), np.zeros(100)], np.r_[np.ones(100), np.zeros(900)])
    >>> b = a.epsilon_lower(ClopperPearson(), Bonferroni((0.5,)), delta=0.0,
    ...                     confidence=0.95)
    >>> b.threshold, b.tp, b.fp, round(b.epsilon, 2)
    (0.5, 900, 100, 1.96)
    """

    thresholds: tuple[float, ...]

    def __post_init__(self) -> None:
        t = tuple(float(x) for x in self.thresholds)
        if not t or not all(math.isfinite(x) for x in t):
            raise InputError(f"Bonferroni: thresholds must be finite and at least one, got "
                             f"{self.thresholds!r}")
        object.__setattr__(self, "thresholds", t)

    def bound(self, audits: Sequence[ScoreAudit], statistics: Sequence[Any], *,
              delta: float, alpha: float) -> ThresholdBound:
        plans = [sel.PlannedTest(ci, sign, sign * t, o, st, 0.0, 0.0)
                 for ci in range(len(audits)) for sign in (1.0, -1.0)
                 for t in self.thresholds for st in statistics for o in st.orientations]
        a = alpha / len(plans)
        return max((audits[p.candidate].bound_planned(p, delta=delta, alpha=a)
                    for p in plans), key=lambda r: r.epsilon)


# The auditor -----------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreAudit:
    """Scores of runs on D (``scores_D``) and on D' (``scores_D_prime``), checked once.

    Each must be one-dimensional, non-empty and free of NaN; an infinite score is allowed
    (a white-box loss is +-inf where one release separates the worlds) and falls in
    every event on its side.

    Examples
    --------
    >>> ScoreAudit(np.array([1.0, 2.0]), np.array([0.0, np.nan]))
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: scores_D_prime of '' holds NaN at index 1
    """

    scores_D: np.ndarray
    scores_D_prime: np.ndarray
    label: str = ""

    def __post_init__(self) -> None:
        for name in ("scores_D", "scores_D_prime"):
            v = np.asarray(getattr(self, name), dtype=float)
            if v.ndim != 1:
                raise InputError(f"{name} of {self.label!r} must be one-dimensional, got "
                                 f"shape {v.shape}")
            if v.size == 0:
                raise InputError(f"{name} of {self.label!r} is empty")
            bad = np.flatnonzero(np.isnan(v))
            if bad.size:
                raise InputError(f"{name} of {self.label!r} holds NaN at index {bad[0]}")
            object.__setattr__(self, name, v)

    @property
    def n_pos(self) -> int:
        return int(self.scores_D.size)

    @property
    def n_neg(self) -> int:
        return int(self.scores_D_prime.size)

    def split(self, n_pos: int, n_neg: int) -> tuple[ScoreAudit, ScoreAudit]:
        """The first ``n_pos`` and ``n_neg`` scores, and the rest."""
        return (ScoreAudit(self.scores_D[:n_pos], self.scores_D_prime[:n_neg], self.label),
                ScoreAudit(self.scores_D[n_pos:], self.scores_D_prime[n_neg:], self.label))

    def counts(self, threshold: float, sign: float = 1.0) -> Counts:
        """How many runs on each world have ``sign * score >= threshold``.

        Examples
        --------
        >>> ScoreAudit(np.array([1.0, 2.0, 3.0]), np.array([0.0, 2.0])).counts(2.0)
        Counts(tp=2, n_pos=3, fp=1, n_neg=2, orientation='both')
        """
        return Counts(int(np.count_nonzero(sign * self.scores_D >= threshold)), self.n_pos,
                      int(np.count_nonzero(sign * self.scores_D_prime >= threshold)),
                      self.n_neg)

    def roc(self, points: int = 200, sign: float = 1.0) -> dict[str, list[float]]:
        """An empirical ROC of ``sign * score`` (descriptive, for plots)."""
        return ab.roc_points(sign * self.scores_D, sign * self.scores_D_prime, points)

    def bound_planned(self, plan: sel.PlannedTest, *, delta: float,
                      alpha: float) -> ThresholdBound:
        """Count a test fixed before these scores were seen, and bound it at ``alpha``."""
        return sel.bound_planned(plan, self.scores_D, self.scores_D_prime, delta=delta,
                                 alpha=alpha, label=self.label)

    def epsilon_lower(self, statistic: Any = None, selection: Split | Bonferroni | None = None,
                      *, delta: float, confidence: float = 0.95) -> ThresholdBound:
        """The epsilon lower bound at ``confidence``: ``statistic`` (or several; default
        :class:`ClopperPearson`) on the test ``selection`` (default ``Split(0.3)``) chooses.
        """
        return epsilon_lower_of([self], statistic, selection, delta=delta,
                                confidence=confidence)


def epsilon_lower_of(audits: Sequence[ScoreAudit], statistic: Any = None,
                     selection: Split | Bonferroni | None = None, *, delta: float,
                     confidence: float = 0.95) -> ThresholdBound:
    """The best epsilon lower bound over several candidates (pairs, attacks) at once.

    Every candidate takes part in the one selection (its validity argument covers them
    all); the bound's ``candidate`` says which one won.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> audits = [ScoreAudit(rng.normal(m, 1, 4000), rng.normal(0, 1, 4000), f"shift {m}")
    ...           for m in (0.0, 2.0)]
    >>> b = epsilon_lower_of(audits, delta=1e-5)
    >>> b.candidate, b.label
    (1, 'shift 2.0')
    """
    if not audits:
        raise InputError("no candidate scores to bound")
    if not 0.0 <= float(delta) < 1.0:
        raise InputError(f"delta must be in [0, 1), got {delta!r}")
    alpha = 1.0 - check_probability(confidence, "confidence")
    stats_ = statistics_of(ClopperPearson() if statistic is None else statistic)
    return (selection or Split()).bound(audits, stats_, delta=float(delta), alpha=alpha)
