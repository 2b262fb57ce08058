"""Choosing the test to bound: candidate, event, orientation and statistic, on a selection split.

A black-box audit has many candidate tests: every neighbouring pair with every
distinguisher, every threshold on its score, both directions of the event ("score >= t"
and, reversed, "score <= t"), two orientations (the event as evidence for D, or its
complement as evidence for D') and two exact statistics for its counts:

(the statistic objects of :mod:`dpverify.stats.score_audit`; any object with their
``anticipate`` and ``bound`` methods ranks and bounds the same way):

* ``clopper_pearson``: a rectangle of Clopper-Pearson bounds on FPR and FNR at alpha/2
  each (:func:`dpverify.stats.audit_bounds.epsilon_lower_bound`), which reads both orientations
  off the same two bounds and copes with a rate that may be 0 when delta > 0;
* ``conditional``: the joint bound of :func:`dpverify.stats.audit_bounds.
  epsilon_lower_bound_conditional`, whose two errors add in quadrature, for one
  orientation chosen here, with the share of alpha it spends on the other world's rate
  chosen here too (:func:`variants_of`).

:func:`plan_tests` ranks them all on the selection split by the bound each would give on
a test split of the given sizes, computed from pessimistic selection rates (Clopper-
Pearson bounds at ``level``: a threshold whose selection counts were lucky in a far
tail does not win; scores no fit has seen, such as a cross-fitted table's, may carry a
milder level of their own). The winner is counted once on fresh runs by
:func:`bound_planned`, so the search costs no validity; ``top_k`` winners cost a Bonferroni
factor.

When no candidate anticipates a positive bound (small samples), ranking falls back to the
same bound computed from point estimates, so a test with evidence is kept in preference
to an empty one, which proves nothing.

Examples
--------
>>> rng = np.random.default_rng(0)
>>> from dpverify.stats.score_audit import CLOPPER_PEARSON_FAMILY
>>> sel = [Selection("x", rng.normal(1, 1, 2000), rng.normal(0, 1, 2000), 8000, 8000)]
>>> plan = plan_tests(sel, CLOPPER_PEARSON_FAMILY, delta=1e-5, alpha=0.05)[0]
>>> res = bound_planned(plan, rng.normal(1, 1, 8000), rng.normal(0, 1, 8000),
...                     delta=1e-5, alpha=0.05, label="x")
>>> res.statistic, 1.5 < res.epsilon < 4.38  # 1-GDP: epsilon 4.38 at delta 1e-5
('conditional', True)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy import stats as sstats

from dpverify.core.errors import InputError
from dpverify.stats import audit_bounds as stats

# Confidence of the pessimistic selection rates of fitted scores (a selection may carry a
# milder level of its own): it keeps far-tail luck out, among hundreds of thresholds and
# the many atoms of tables, and still lets the ranking move to the tails that a large test
# split can bound.
SELECT_LEVEL = 0.01
# The fallback ranking reads rates at this level: their medians, i.e. point estimates.
POINT_LEVEL = 0.5


@dataclass(frozen=True)
class Tails:
    """Selection counts at each threshold, and the sizes of the test split to come.

    ``a1`` of ``n1`` selection runs on D and ``a0`` of ``n0`` on D' scored at or above
    each threshold; the test split will have ``n1_test`` and ``n0_test`` runs.
    """

    a1: np.ndarray
    n1: int
    a0: np.ndarray
    n0: int
    n1_test: int
    n0_test: int
    # Every statistic, orientation and variant ranking these counts reads the same few
    # rates: each is computed once (Clopper-Pearson bounds are most of a ranking's time).
    _memo: dict[tuple[Any, ...], Any] = field(default_factory=dict, init=False, repr=False,
                                              compare=False)

    def complement(self) -> Tails:
        """The counts of the complementary event "score < t", with the worlds exchanged:
        the event as evidence for D' read as this one reads evidence for D.

        Examples
        --------
        >>> Tails(np.array([3]), 10, np.array([1]), 10, 100, 200).complement().a1
        array([9])
        """
        if "complement" not in self._memo:
            self._memo["complement"] = Tails(self.n0 - self.a0, self.n0, self.n1 - self.a1,
                                             self.n1, self.n0_test, self.n1_test)
        return self._memo["complement"]

    def rate(self, world: int, level: float, side: str, raw: bool = False) -> np.ndarray:
        """The event's rate on world 1 (``a1`` of ``n1``) or 0 (``a0`` of ``n0``), read at
        ``level`` on ``side`` as :func:`_rate` reads it.

        Examples
        --------
        >>> Tails(np.array([3]), 10, np.array([1]), 10, 100, 200).rate(1, POINT_LEVEL, "lower")
        array([0.31818182])
        """
        key = (world, level, side, raw)
        if key not in self._memo:
            k, n = (self.a1, self.n1) if world == 1 else (self.a0, self.n0)
            self._memo[key] = _rate(k, n, level, side, raw=raw)
        return self._memo[key]


@dataclass(frozen=True)
class Counts:
    """A fixed test counted on fresh runs: ``tp`` of ``n_pos`` runs on D and ``fp`` of
    ``n_neg`` runs on D' fell in the event, read in ``orientation`` ("D": the event is
    evidence for D; "D'": its complement is evidence for D'; "both")."""

    tp: int
    n_pos: int
    fp: int
    n_neg: int
    orientation: str = "both"


class CountStatistic(Protocol):
    """What ranking and counting need of a statistic (see :mod:`dpverify.stats.score_audit`)."""

    name: str
    family: str
    orientations: tuple[str, ...]

    def anticipate(self, tails: Tails, *, delta: float, alpha: float,
                   level: float) -> tuple[np.ndarray, ...]: ...

    def bound(self, counts: Counts, *, delta: float,
              alpha: float) -> tuple[float, float | None]: ...


@dataclass(frozen=True)
class Selection:
    """A candidate test's scores on the selection split, and its test split's sizes.

    ``level`` is the level its selection rates are read at, where the scores warrant one
    of their own (``None``: the ranking's): scores that no fit has seen carry no fitting
    optimism, and need only the correction for the best of their few events.
    """

    label: str
    pos: np.ndarray  # scores of runs on D
    neg: np.ndarray  # scores of runs on D'
    n_pos_test: int
    n_neg_test: int
    level: float | None = None


@dataclass(frozen=True)
class PlannedTest:
    """A test fixed before its counts are seen: event sign * score >= threshold."""

    candidate: int
    sign: float
    threshold: float
    orientation: str  # "D" (the event is evidence for D), "D'" (its complement), "both"
    statistic: Any  # a CountStatistic
    anticipated: float
    fallback: float


def _rate(k: np.ndarray, n: int, level: float, side: str, *, raw: bool = False) -> np.ndarray:
    """A rate read pessimistically (a Clopper-Pearson bound on ``side``) or, at
    :data:`POINT_LEVEL`, as a point estimate: kept off 0 and 1 by Jeffreys' prior mean
    unless ``raw`` (where a rate of exactly 0 must stay 0)."""
    if level >= POINT_LEVEL:
        return k / max(n, 1) if raw else (k + 0.5) / (n + 1.0)
    # Many thresholds share a count (ties, sparse tails): bound each count once.
    u, inv = np.unique(np.asarray(k, dtype=float), return_inverse=True)
    return np.asarray(stats.clopper_pearson(u, max(n, 1), level, side), dtype=float)[inv]


@functools.lru_cache(maxsize=64)
def _quantiles(alpha: float, approximate: bool, share: float) -> tuple[float, float]:
    """The normal quantiles of the conditional bound's two shares of ``alpha``."""
    side = share * alpha / (2.0 if approximate else 1.0)
    return float(sstats.norm.isf((1.0 - share) * alpha)), float(sstats.norm.isf(side))


def anticipate_conditional(tails: Tails, *, delta: float, alpha: float, level: float,
                           rate_share: float = stats.RATE_SHARE) -> np.ndarray:
    """The conditional bound the event "score >= t" anticipates on the test split, as
    evidence for D (for D', pass :meth:`Tails.complement`).

    The rates are read pessimistically at ``level`` (p1
    low, p0 high, and p0 low where delta / p0 enters: with delta > 0 a rate that may be 0
    proves nothing) and put through the normal approximation of
    :func:`dpverify.stats.audit_bounds.epsilon_lower_bound_conditional` (Woolf's standard error
    of the log odds ratio), with ``rate_share`` of ``alpha`` on the rate p0.

    Examples
    --------
    >>> t = Tails(np.array([17, 170]), 10**5, np.array([7, 69]), 10**5, 10**6, 10**6)
    >>> a = anticipate_conditional(t, delta=1e-5, alpha=0.05, level=0.5)
    >>> bool(0 <= a[0] < a[1] < 1)
    True
    """
    n1, n0 = tails.n1_test, tails.n0_test
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        p1 = np.clip(tails.rate(1, level, "lower"), 0.0, 1.0)
        p0 = np.clip(tails.rate(0, level, "upper"), 0.0, 1.0)
        z1, z2 = _quantiles(alpha, delta > 0, rate_share)
        log_psi = np.log(p1) + np.log1p(-p0) - np.log(p0) - np.log1p(-p1)
        se = np.sqrt(1 / (n1 * p1) + 1 / (n1 * (1 - p1)) + 1 / (n0 * p0) + 1 / (n0 * (1 - p0)))
        psi = np.exp(log_psi - z1 * se)
        sd0 = np.sqrt(p0 * (1 - p0) / n0)
        p_up = np.minimum(p0 + z2 * sd0, 1.0)
        p_lo = 1.0
        if delta > 0:  # only then does p0's lower bound enter
            low = np.clip(tails.rate(0, level, "lower", raw=True), 0.0, 1.0)
            p_lo = np.maximum(low - z2 * np.sqrt(low * (1 - low) / n0), 0.0)
        R = (psi * (1.0 - delta) - delta * (1.0 - p_up) / p_lo) / (1.0 - p_up + psi * p_up)
        eps = np.log(R)
    return np.where(np.isfinite(eps) & (eps > 0), eps, 0.0)


# Binormal smoothing of the ROC (below) is trusted when it rests on this many points and
# its standardized residuals stay this small (measured: about 1 on Gaussian scores, above
# 1.6 on Laplace ones from 10^4 runs).
SMOOTH_MIN_POINTS = 20
SMOOTH_MAX_RMS = 1.5
SMOOTH_MIN_THRESHOLDS = 300  # of the ~520 quantile levels: a score with few atoms has fewer
# The smoothed rates are read at this level: the model's TPR is smooth, but the FPR it is
# read at is the selection's own count, and the best of several smooth candidates is an
# optimistic pick. Measured on the Gaussian mechanism at epsilon = 1 with every `auto`
# distinguisher (20 seeds): 0.2 -> 0.39 / 0.61, 0.4 -> 0.43 / 0.64, 0.5 -> 0.39 / 0.64
# of epsilon at 10^4 / 10^5 runs, the last with a seed at 0.03.
SMOOTH_LEVEL = 0.4


def binormal_roc(a1: np.ndarray, n1: int, a0: np.ndarray, n0: int,
                 min_count: int = 20) -> tuple[float, float] | None:
    """The binormal ROC Phi^-1(1 - TPR) = c + b Phi^-1(1 - FPR) fitted to tail counts.

    ``a1`` of ``n1`` runs on D and ``a0`` of ``n0`` on D' scored above each threshold.
    Weighted least squares in probit space (Dorfman and Alf 1969; Metz, Herman and Shen
    1998) over thresholds with at least ``min_count`` runs on each side, the variances of
    both coordinates by the delta method; ``None`` when too few points, or residuals too
    large for the model (a non-Gaussian ROC such as Laplace's, whose tail ratio is flat).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> pos, neg = np.sort(rng.normal(0.5, 1, 20000)), np.sort(rng.normal(0, 1, 20000))
    >>> th = np.linspace(-2, 3, 60)
    >>> c, b = binormal_roc(stats.tail_counts(pos, th), pos.size, stats.tail_counts(neg, th),
    ...                     neg.size)
    >>> round(c, 1), round(b, 1)
    (-0.5, 1.0)
    """
    ok = (a1 >= min_count) & (a0 >= min_count) & (a1 <= n1 - min_count) & (
        a0 <= n0 - min_count)
    if np.count_nonzero(ok) < SMOOTH_MIN_POINTS:
        return None
    p1, p0 = a1[ok] / n1, a0[ok] / n0
    x, y = sstats.norm.isf(p0), sstats.norm.isf(p1)
    vx = p0 * (1 - p0) / (n0 * sstats.norm.pdf(x) ** 2)
    vy = p1 * (1 - p1) / (n1 * sstats.norm.pdf(y) ** 2)
    A = np.column_stack([np.ones_like(x), x])
    coef = np.array([0.0, 1.0])
    for _ in range(2):  # the slope enters the weights: refit once with the first slope
        w = np.sqrt(1.0 / (vy + coef[1] ** 2 * vx))
        coef = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)[0]
    rms = float(np.sqrt(np.mean(((y - A @ coef) * w) ** 2)))
    return (float(coef[0]), float(coef[1])) if rms <= SMOOTH_MAX_RMS else None


def anticipate_rectangle(tails: Tails, *, delta: float, alpha: float, level: float,
                         gdp: bool = False) -> np.ndarray:
    """The rectangle bound (or GDP mu with ``gdp``) anticipated on a test split.

    FNR and FPR are read off the selection counts of ``tails`` pessimistically at
    ``level``, scaled to its test sizes and put through the test's own Clopper-Pearson
    bounds.

    Examples
    --------
    >>> t = Tails(np.array([500.0, 5.0]), 1000, np.array([100.0, 1.0]), 1000, 4000, 4000)
    >>> a = anticipate_rectangle(t, delta=0.0, alpha=0.05, level=0.05)
    >>> a.round(2).tolist()  # 5 of 1000 against 1: too few to prove anything pessimistically
    [1.28, 0.0]
    """
    def test_upper(rate: np.ndarray, n_test: int) -> np.ndarray:
        u, inv = np.unique(rate, return_inverse=True)
        return np.asarray(stats.clopper_pearson(u * n_test, n_test, alpha / 2, "upper"))[inv]

    fpr = test_upper(tails.rate(0, level, "upper"), tails.n0_test)
    # The misses on D: the complement's rate on its world 0, which is D.
    fnr = test_upper(tails.complement().rate(0, level, "upper"), tails.n1_test)
    if gdp:
        return stats.gdp_mu_from_rates(fpr, fnr)
    return stats.epsilon_from_rates(fpr, fnr, delta)


def thresholds_and_counts(pos: np.ndarray, neg: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The candidate thresholds of :func:`dpverify.stats.audit_bounds.candidate_thresholds` and
    how many ``pos`` and ``neg`` scores reach each, from one sort of each.

    Examples
    --------
    >>> th, a1, a0 = thresholds_and_counts(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0]))
    >>> th.tolist(), a1.tolist(), a0.tolist()
    ([0.0, 1.0, 2.0, 3.0], [3, 3, 2, 1], [2, 1, 0, 0])
    """
    sp, sn = np.sort(pos), np.sort(neg)
    pooled = np.sort(np.concatenate([sp, sn]))
    pooled = pooled[~np.isnan(pooled)]
    if pooled.size == 0:
        th = np.zeros(1)
    else:
        N = pooled.size
        tail = np.geomspace(1.0 / N, 0.5, stats._TAIL_LEVELS)
        levels = np.unique(np.clip(np.concatenate(
            [tail, 1.0 - tail, np.linspace(0.0, 1.0, stats._MID_LEVELS + 1)]), 0.0, 1.0))
        # The inverted-CDF quantile of a sorted sample: its ceil(level N)-th value.
        idx = np.clip(np.ceil(levels * N).astype(np.int64) - 1, 0, N - 1)
        th = np.unique(pooled[idx])
    return th, stats.tail_counts(sp, th), stats.tail_counts(sn, th)


def variants_of(statistics: Sequence[CountStatistic]) -> list[CountStatistic]:
    """Every statistic as the selection ranks it: one with constants left to the selection
    split (the conditional bound's share of alpha) offers a variant per setting, and each
    test keeps the variant it anticipates most from, at no cost in validity (the choice is
    made before the test's counts are seen).

    Examples
    --------
    >>> from dpverify.stats.score_audit import CLOPPER_PEARSON_FAMILY
    >>> [getattr(s, "rate_share", None) for s in variants_of(CLOPPER_PEARSON_FAMILY)]
    [0.1, 0.01, 0.001, None]
    """
    out: list[CountStatistic] = []
    for st in statistics:
        variants = getattr(st, "variants", None)
        out.extend(variants() if callable(variants) else (st,))
    return out


def _anticipations(s: Selection, sign: float, statistics: Sequence[CountStatistic], *,
                   delta: float, alpha: float, level: float, smooth: bool
                   ) -> list[tuple[Any, str, np.ndarray, np.ndarray, np.ndarray]]:
    """Per statistic and orientation: (statistic, orientation, thresholds, ranking value,
    fallback value).

    The ranking value is the bound anticipated from pessimistic rates; the fallback the
    one from point estimates. With ``smooth``, where delta > 0 and the binormal model fits
    the selection's ROC, both are the bound anticipated from the model's smooth ROC: the
    best test then sits in a far tail, whose raw counts are too few to choose a threshold
    by.
    """
    th, a1, a0 = thresholds_and_counts(sign * np.asarray(s.pos, float),
                                       sign * np.asarray(s.neg, float))
    level = level if s.level is None else s.level
    n1, n0 = len(s.pos), len(s.neg)
    # Only a continuous score has a smooth ROC to fit: atoms (tables of patterns or
    # bits) carry their evidence in exact zeros that a model would fill in.
    fit = (binormal_roc(a1, n1, a0, n0)
           if smooth and delta > 0 and th.size >= SMOOTH_MIN_THRESHOLDS else None)
    if fit is not None:  # the model's TPR at each threshold's (point) FPR
        a1 = n1 * sstats.norm.sf(fit[0] + fit[1] * sstats.norm.isf((a0 + 0.5) / (n0 + 1.0)))
        level = SMOOTH_LEVEL
    tails = Tails(a1, n1, a0, n0, s.n_pos_test, s.n_neg_test)
    out = []
    for statistic in variants_of(statistics):
        rank = statistic.anticipate(tails, delta=delta, alpha=alpha, level=level)
        fall = (statistic.anticipate(tails, delta=delta, alpha=alpha, level=POINT_LEVEL)
                if smooth else rank)
        out.extend((statistic, o, th, r, f)
                   for o, r, f in zip(statistic.orientations, rank, fall, strict=True))
    return out


def plan_tests(selections: Sequence[Selection], statistics: Sequence[CountStatistic], *,
               delta: float, alpha: float, top_k: int = 1, level: float = SELECT_LEVEL,
               smooth: bool = True) -> list[PlannedTest]:
    """The ``top_k`` tests with the best anticipated bounds at ``alpha / top_k`` each.

    Ranked by the pessimistic anticipation, then (with ``smooth``) by the point-estimate
    one (which decides when every pessimistic bound is 0).

    Examples
    --------
    >>> from dpverify.stats.score_audit import CLOPPER_PEARSON_FAMILY
    >>> rng = np.random.default_rng(1)
    >>> sel = [Selection("rev", rng.normal(-2, 1, 3000), rng.normal(0, 1, 3000), 9000, 9000)]
    >>> plan_tests(sel, CLOPPER_PEARSON_FAMILY, delta=1e-5, alpha=0.05)[0].sign
    -1.0
    """
    top_k = int(top_k)
    if top_k < 1:
        raise InputError(f"top_k must be >= 1, got {top_k}")
    return rank_tests(selections, statistics, delta=delta, alpha=alpha / top_k, keep=top_k,
                      level=level, smooth=smooth)[:top_k]


def rank_tests(selections: Sequence[Selection], statistics: Sequence[CountStatistic], *,
               delta: float, alpha: float, keep: int = 1, level: float = SELECT_LEVEL,
               smooth: bool = True) -> list[PlannedTest]:
    """The ``keep`` best tests of every candidate, sign, statistic and orientation, best first.

    ``alpha`` is the level each test will be bounded at. Without ``smooth`` the ranking
    is by the pessimistic anticipation alone, ties kept in the candidates' order.

    Examples
    --------
    >>> from dpverify.stats.score_audit import CLOPPER_PEARSON_FAMILY
    >>> rng = np.random.default_rng(1)
    >>> sel = [Selection(str(j), rng.normal(j, 1, 2000), rng.normal(0, 1, 2000), 8000, 8000)
    ...        for j in range(3)]
    >>> rank_tests(sel, CLOPPER_PEARSON_FAMILY, delta=0.0, alpha=0.05)[0].candidate
    2
    """
    if not selections:
        raise InputError("no candidate tests to bound")
    if not statistics:
        raise InputError("no statistic to bound the tests with")
    ranked: list[PlannedTest] = []
    for ci, s in enumerate(selections):
        for sign in (1.0, -1.0):
            for statistic, orient, th, ant, mild in _anticipations(
                    s, sign, statistics, delta=delta, alpha=alpha, level=level, smooth=smooth):
                order = (np.lexsort((-mild, -ant)) if smooth
                         else np.argsort(-ant, kind="stable"))
                ranked.extend(PlannedTest(ci, sign, float(th[j]), orient, statistic,
                                          float(ant[j]), float(mild[j])) for j in order[:keep])
    ranked.sort(key=lambda p: (-p.anticipated, -p.fallback) if smooth else -p.anticipated)
    # Variants of one statistic on one event are one test, kept at its best variant.
    seen: set[tuple[Any, ...]] = set()
    out = []
    for p in ranked:
        key = (p.candidate, p.sign, p.threshold, p.orientation, p.statistic.name)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def bound_planned(test: PlannedTest, pos: np.ndarray, neg: np.ndarray, *, delta: float,
                  alpha: float, label: str) -> stats.ThresholdBound:
    """Count a planned test on fresh runs (``pos`` on D, ``neg`` on D') and bound epsilon.

    ``alpha`` is the level of this one test (already divided by ``top_k``).

    Examples
    --------
    >>> from dpverify.stats.score_audit import Conditional
    >>> t = PlannedTest(0, 1.0, 1.0, "D", Conditional(), 0.5, 0.5)
    >>> r = bound_planned(t, np.r_[np.ones(600), np.zeros(400)],
    ...                   np.r_[np.ones(300), np.zeros(700)], delta=0.0, alpha=0.05,
    ...                   label="x")
    >>> r.tp, r.fp, round(r.epsilon, 3)
    (600, 300, 0.577)
    """
    sp, sn = test.sign * np.asarray(pos, float), test.sign * np.asarray(neg, float)
    tp, fp = int(np.count_nonzero(sp >= test.threshold)), int(
        np.count_nonzero(sn >= test.threshold))
    n_pos, n_neg = int(sp.size), int(sn.size)
    st = test.statistic
    eps, mu = st.bound(Counts(tp, n_pos, fp, n_neg, test.orientation), delta=delta,
                       alpha=alpha)
    name = label + (" (reversed)" if test.sign < 0 else "")
    return stats.ThresholdBound(st.family, eps, mu, test.threshold, tp, fp, n_pos, n_neg,
                                alpha, name, test.anticipated, statistic=st.name,
                                rate_share=getattr(st, "rate_share", None),
                                orientation=test.orientation, sign=test.sign,
                                candidate=test.candidate,
                                citation=getattr(st, "citation", ""))
