"""What an audit could have caught: the smallest epsilon it detects, with a stated probability.

A PASS says "no violation above epsilon = X". X is the epsilon of a reference mechanism
that the test the audit actually ran (its held-out sizes, its error level after every
Bonferroni split, its delta, its bound) shows to violate the claim with probability
``probability`` (0.9 by default). The reference families:

* ``gaussian``: a mechanism whose trade-off curve is Gaussian, G_mu (Dong, Roth, Su 2019,
  Def. 2.7), its epsilon that of mu-GDP at the audit's delta (their Corollary 2.13). It
  is the family of every Gaussian release and, by their central limit theorem for
  composition (Theorem 3.5), close to that of most DP optimizers;
* ``laplace``: used when delta = 0, where no mu-GDP mechanism with mu > 0 has a finite
  epsilon: a Laplace mechanism with sensitivity 1 and scale 1/eps, eps-DP and no better.

Where the audit learns a test (a threshold, an orientation), the detector is placed where
it is best for the reference, so X is what the test could catch at best with these sizes;
what the audit fixed in advance is used as it was. Each mode computes its own power (see
:func:`threshold_test_power`, :func:`detectable_gdp_variance`, :func:`detectable_gdp_mean`
here, the betting e-process in :mod:`dpverify.stats.betting`, the one-run audit in
:mod:`dpverify.checks.audit.onerun` and the parametric bound in
:mod:`dpverify.stats.sampled_gaussian`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, special
from scipy import stats as sstats

from dpverify.core.errors import InputError, check_probability
from dpverify.stats import audit_bounds as stats

DETECT_PROBABILITY = 0.9
# Beyond this mu (epsilon about 500 at delta = 1e-5) nothing is called detectable.
MU_MAX = 30.0
# Thresholds of the reference tried exactly (the best by a cheap proxy).
_EXACT_THRESHOLDS = 6
# Selection splits are simulated with at most this many runs per world.
SELECTION_CAP = 20000
# Binomial mass left outside the summed support.
_TAIL = 1e-12


@dataclass(frozen=True)
class Power:
    """The smallest epsilon a test detects with ``probability``, and how it was computed.

    Examples
    --------
    >>> p = Power(1.4, 0.9, "gaussian", 0.38, "cp")
    >>> p.to_dict()["epsilon_detectable"]
    1.4
    """

    epsilon: float
    probability: float
    reference: str
    parameter: float | None
    method: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon_detectable": self.epsilon, "detect_probability": self.probability,
                "reference": self.reference, "parameter": self.parameter,
                "method": self.method, "note": self.note}


def check_detect_probability(p: Any) -> float:
    """Return ``p`` if it is a probability in (0, 1), else raise naming it.

    Examples
    --------
    >>> check_detect_probability(0.9)
    0.9
    """
    return check_probability(p, "detect probability")


def gdp_mu_for_epsilon(epsilon: float, delta: float) -> float:
    """The mu whose mu-GDP has exactly ``epsilon`` at ``delta`` (0 when delta = 0).

    Inverse of :func:`dpverify.stats.audit_bounds.epsilon_from_gdp`: delta(eps) of mu-GDP
    (Dong, Roth, Su 2019, Corollary 2.13) increases with mu.

    Examples
    --------
    >>> mu = gdp_mu_for_epsilon(1.0, 1e-5)
    >>> round(mu, 4), round(stats.epsilon_from_gdp(mu, 1e-5), 6)
    (0.2681, 1.0)
    """
    if delta <= 0:
        return 0.0  # every mu > 0 has epsilon = inf at delta = 0
    if stats.delta_from_gdp(MU_MAX, epsilon) <= delta:
        return MU_MAX
    return float(optimize.brentq(lambda m: stats.delta_from_gdp(m, epsilon) - delta,
                                 1e-9, MU_MAX, xtol=1e-12, rtol=1e-12))


# Reference families: (FPR, FNR) of the event "output says D" along its thresholds ------


def gaussian_rates(mu: float, t: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """FPR and FNR of the tests "score >= t" of N(mu, 1) (D) against N(0, 1) (D').

    Examples
    --------
    >>> fpr, fnr = gaussian_rates(1.0)
    >>> bool(np.all(np.diff(fpr) <= 0) and np.all(np.diff(fnr) >= 0))
    True
    """
    t = np.linspace(-7.5, 7.5 + mu, 601) if t is None else np.asarray(t, dtype=float)
    return sstats.norm.sf(t), sstats.norm.cdf(t - mu)


def laplace_rates(epsilon: float, t: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """FPR and FNR of the tests "score >= t" of Lap(1, 1/eps) (D) against Lap(0, 1/eps).

    Examples
    --------
    >>> fpr, fnr = laplace_rates(1.0, np.array([1.0]))
    >>> round(float((1 - fnr[0]) / fpr[0]), 3)  # the ratio e^eps, the pure-DP limit
    2.718
    """
    b = 1.0 / epsilon
    t = np.linspace(-3.0, 4.0, 701) if t is None else np.asarray(t, dtype=float)
    return sstats.laplace.sf(t, scale=b), sstats.laplace.cdf(t - 1.0, scale=b)


@dataclass(frozen=True)
class Reference:
    """A one-parameter family of mechanisms, seen through its likelihood-ratio score.

    ``rates(theta, t)``: FPR and FNR of "score >= t"; ``scores(theta, z_pos, z_neg)``:
    scores on D and D' from standard noise of kind ``noise``; ``epsilon(theta, delta)``.
    """

    name: str
    rates: Callable[..., tuple[np.ndarray, np.ndarray]]
    scores: Callable[[float, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
    epsilon: Callable[[float, float], float]
    noise: str


GAUSSIAN = Reference("gaussian", gaussian_rates, lambda m, zp, zn: (zp + m, zn),
                     stats.epsilon_from_gdp, "normal")
LAPLACE = Reference("laplace", laplace_rates, lambda e, zp, zn: (1.0 + zp / e, zn / e),
                    lambda e, d: e, "laplace")


def reference_for(delta: float) -> Reference:
    """The Gaussian family, or the Laplace family when delta = 0.

    Examples
    --------
    >>> reference_for(1e-5).name, reference_for(0.0).name
    ('gaussian', 'laplace')
    """
    return GAUSSIAN if delta > 0 else LAPLACE


def smallest_detected(power: Callable[[float], float], probability: float,
                      start: float, cap: float = MU_MAX, rtol: float = 1e-4) -> float:
    """The smallest parameter whose detection probability reaches ``probability``.

    ``power`` must increase with the parameter (up to Monte Carlo noise); ``inf`` when
    not even ``cap`` is detected.

    Examples
    --------
    >>> round(smallest_detected(lambda x: min(x / 10.0, 1.0), 0.9, 1.0), 4)
    9.0
    """
    hi = max(float(start), 1e-6)
    lo = 0.0
    while power(hi) < probability:
        if hi >= cap:
            return math.inf
        lo, hi = hi, min(2.0 * hi, cap)
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if power(mid) >= probability:
            hi = mid
        else:
            lo = mid
    return hi


def _support(n: int, p: float) -> np.ndarray:
    """Counts holding all but a negligible mass of Binom(n, p) (14 sd and 40 either side)."""
    m, sd = n * p, math.sqrt(n * p * (1.0 - p))
    lo, hi = max(0, math.floor(m - 14.0 * sd - 40)), min(n, math.ceil(m + 14.0 * sd + 40))
    return np.arange(lo, hi + 1)


def _binom_pmf(k: np.ndarray, n: int, p: float) -> np.ndarray:
    """Binom(n, p) probabilities of the counts ``k``, in logs (scipy's frozen-distribution
    overhead is most of the cost at these sizes).

    Examples
    --------
    >>> bool(np.allclose(_binom_pmf(np.arange(6), 5, 0.3), sstats.binom.pmf(np.arange(6), 5, 0.3)))
    True
    """
    if p <= 0.0 or p >= 1.0:
        return (k == (0 if p <= 0.0 else n)).astype(float)
    logc = special.gammaln(n + 1.0) - special.gammaln(k + 1.0) - special.gammaln(n - k + 1.0)
    return np.exp(logc + k * math.log(p) + (n - k) * math.log1p(-p))


# Threshold tests bounded by Clopper-Pearson (the cp and gdp bounds of stats) -----------


class CountTest:
    """A threshold test counted on ``n_pos`` runs on D and ``n_neg`` on D', and its verdict.

    ``method`` is ``"cp"`` (:func:`~dpverify.stats.audit_bounds.epsilon_lower_bound` above the
    claim) or ``"gdp"`` (:func:`~dpverify.stats.audit_bounds.gdp_mu_lower_bound` above the claim's
    mu); each error rate is bounded at ``alpha / 2``. Both reject exactly when the count
    of false positives is below a cut that depends on the count of false negatives, so
    the chance of a FAIL is one sum over the false negatives (exact, no simulation).

    Examples
    --------
    >>> t = CountTest(10000, 10000, alpha=0.05, delta=1e-5, epsilon=1.0, method="cp")
    >>> fpr, fnr = gaussian_rates(1.0)
    >>> 0.99 < t.best_power(fpr, fnr) <= 1.0  # mu = 1 is epsilon 4.4: caught surely
    True
    """

    def __init__(self, n_pos: int, n_neg: int, *, alpha: float, delta: float,
                 epsilon: float, method: str) -> None:
        if method not in ("cp", "gdp"):
            raise InputError(f"bound method must be 'cp' or 'gdp', got {method!r}")
        self.n_pos, self.n_neg = int(n_pos), int(n_neg)
        self.side = alpha / 2.0
        self.delta, self.epsilon, self.method = float(delta), float(epsilon), method
        self.mu_claim = gdp_mu_for_epsilon(epsilon, delta) if method == "gdp" else None
        self._cut = np.full(self.n_pos + 1, -1, dtype=np.int64)

    def _caps(self, fnr_ub: np.ndarray) -> list[np.ndarray]:
        """FPR upper bounds below which the test rejects, given the FNR upper bound."""
        if self.method == "gdp":
            # mu_lb = isf(fpr_ub) - ppf(fnr_ub) > mu_claim (Nasr et al. 2023, Section 4)
            return [sstats.norm.sf(self.mu_claim + sstats.norm.ppf(fnr_ub))]
        # Kairouz et al. 2015, Thm 2.1, both orientations: eps_lb > eps_claim iff
        # fpr_ub < (1 - delta - fnr_ub) e^-eps or fnr_ub < (1 - delta - fpr_ub) e^-eps.
        e = math.exp(-self.epsilon)
        return [(1.0 - self.delta - fnr_ub) * e,
                1.0 - self.delta - fnr_ub * math.exp(self.epsilon)]

    def cut(self, fn: np.ndarray) -> np.ndarray:
        """Number of false-positive counts that reject, for each false-negative count.

        CP duality: ub(k) < c exactly when P[Binom(n, c) <= k] < alpha / 2, so the
        rejecting counts are those below the ``alpha / 2`` quantile of Binom(n, c).
        """
        todo = fn[self._cut[fn] < 0]
        if todo.size:
            ub = stats.clopper_pearson(todo, self.n_pos, self.side, "upper")
            best = np.zeros(todo.size)
            for cap in self._caps(ub):
                c = np.clip(cap, 0.0, 1.0)
                k = sstats.binom.ppf(self.side, self.n_neg, np.where(c > 0, c, 0.5))
                k = np.where(c <= 0, 0, np.where(cap > 1, self.n_neg + 1, k))
                best = np.maximum(best, k)
            self._cut[todo] = best.astype(np.int64)
        return self._cut[fn]

    def power(self, fpr: float, fnr: float) -> float:
        """P[the test rejects the claim] when its true rates are (fpr, fnr)."""
        n = self.n_pos
        fn = _support(n, fnr)
        k = self.cut(fn)
        below = np.where(k > 0, special.bdtr(np.maximum(k - 1, 0), self.n_neg, fpr), 0.0)
        return float(np.clip(np.sum(_binom_pmf(fn, n, fnr) * below), 0.0, 1.0))

    def proxy(self, fpr: np.ndarray, fnr: np.ndarray) -> np.ndarray:
        """The bound at the expected counts, relative to the claim (ranks thresholds)."""
        fp_ub = stats.clopper_pearson(fpr * self.n_neg, self.n_neg, self.side, "upper")
        fn_ub = stats.clopper_pearson(fnr * self.n_pos, self.n_pos, self.side, "upper")
        if self.method == "gdp":
            return stats.gdp_mu_from_rates(fp_ub, fn_ub) - self.mu_claim
        return stats.epsilon_from_rates(fp_ub, fn_ub, self.delta) - self.epsilon

    def best_power(self, fpr: np.ndarray, fnr: np.ndarray) -> float:
        """The detection probability of the best-placed threshold among (fpr, fnr)."""
        margin = self.proxy(fpr, fnr)
        top = np.argsort(-margin, kind="stable")[:_EXACT_THRESHOLDS]
        return max(self.power(float(fpr[j]), float(fnr[j])) for j in top)


def sorted_thresholds(pos: np.ndarray, neg: np.ndarray, per_tail: int = 120) -> np.ndarray:
    """Pooled score values at ranks dense in both tails and even in the middle, from
    sorted scores (as :func:`~dpverify.stats.audit_bounds.candidate_thresholds` places the
    audit's, in one merge instead of a partition per level).

    Examples
    --------
    >>> t = sorted_thresholds(np.arange(0.0, 100.0, 2.0), np.arange(1.0, 100.0, 2.0))
    >>> float(t.min()), float(t.max()), bool(np.all(np.diff(t) > 0))
    (0.0, 99.0, True)
    """
    pooled = np.sort(np.concatenate([pos, neg]), kind="stable")  # two sorted runs: a merge
    n = pooled.size
    ranks = np.unique(np.geomspace(1, max(n / 2, 1), per_tail).astype(int))
    idx = np.unique(np.concatenate([ranks - 1, n - ranks,
                                    np.linspace(0, n - 1, 101).astype(int)]))
    return np.unique(pooled[idx])


class SelectedTest:
    """The threshold a selection split picks for the reference, then the exact test power.

    The audits choose the threshold on a selection split by the bound it anticipates
    (:meth:`~dpverify.stats.score_audit.ClopperPearson.anticipate`, among thresholds placed as
    :func:`sorted_thresholds` places them); with few selection runs the choice
    is noisy and the test weaker than the best-placed one. Here the same selection runs on
    ``replicates`` simulated selection splits of the reference's likelihood-ratio score
    (common random numbers across the family's parameter), and the chance of a FAIL is
    averaged over the thresholds chosen. Splits above :data:`SELECTION_CAP` runs are
    simulated at that size: a smaller split chooses worse, so the answer errs on the side
    of a larger detectable epsilon.

    Examples
    --------
    >>> test = CountTest(7000, 7000, alpha=0.05, delta=1e-5, epsilon=1.0, method="cp")
    >>> sel = SelectedTest(GAUSSIAN, test, (2000, 2000), replicates=8)
    >>> sel.power(0.3) < sel.power(0.8)
    True
    """

    def __init__(self, ref: Reference, test: CountTest, n_sel: tuple[int, int], *,
                 replicates: int = 24, seed: int = 20230813) -> None:
        rng = np.random.default_rng(seed)
        draw = rng.standard_normal if ref.noise == "normal" else rng.laplace
        self.ref, self.test = ref, test
        # Sorted rows: a shifted or scaled row stays sorted, as the counts below need.
        self.z_pos = np.sort(draw(size=(replicates, min(int(n_sel[0]), SELECTION_CAP))), 1)
        self.z_neg = np.sort(draw(size=(replicates, min(int(n_sel[1]), SELECTION_CAP))), 1)
        self.fpr_of = self._anticipated(self.z_neg.shape[1], test.n_neg)
        self.fnr_of = self._anticipated(self.z_pos.shape[1], test.n_pos)

    def _anticipated(self, n_sel: int, n_test: int) -> np.ndarray:
        """The anticipated test-split upper bound of a rate, for every selection count.

        As :meth:`~dpverify.stats.score_audit.ClopperPearson.anticipate` computes it (a CP
        upper bound at SELECT_LEVEL, scaled to the test split and bounded again), tabulated
        once.
        """
        rate = stats.clopper_pearson(np.arange(n_sel + 1), n_sel, stats.SELECT_LEVEL)
        return stats.clopper_pearson(rate * n_test, n_test, self.test.side, "upper")

    def choose(self, pos: np.ndarray, neg: np.ndarray) -> float:
        """The threshold the audit's selection picks on sorted scores ``pos``, ``neg``."""
        th = sorted_thresholds(pos, neg)
        fpr = self.fpr_of[stats.tail_counts(neg, th)]
        fnr = self.fnr_of[pos.size - stats.tail_counts(pos, th)]
        if self.test.method == "cp":
            ant = stats.epsilon_from_rates(fpr, fnr, self.test.delta)
        else:
            ant = stats.gdp_mu_from_rates(fpr, fnr)
        return float(th[int(np.argmax(ant))])

    def power(self, theta: float) -> float:
        out = []
        for zp, zn in zip(self.z_pos, self.z_neg, strict=True):
            t = self.choose(*self.ref.scores(theta, zp, zn))
            fpr, fnr = self.ref.rates(theta, np.array([t]))
            out.append(self.test.power(float(fpr[0]), float(fnr[0])))
        return float(np.mean(out))


def threshold_test_power(
    n_pos: int, n_neg: int, *, alpha: float, delta: float, epsilon: float,
    method: str = "cp", probability: float = DETECT_PROBABILITY,
    selection: tuple[int, int] | None = None,
) -> Power:
    """Detectable epsilon of a threshold test bounded by Clopper-Pearson (cp or gdp).

    Parameters
    ----------
    n_pos, n_neg
        Held-out runs on D and on D' that the test counts.
    alpha
        The test's error level after every correction (both rates at ``alpha / 2``).
    delta, epsilon
        The claim: the test fails it when its bound exceeds ``epsilon``.
    method
        ``"cp"`` or ``"gdp"``.
    probability
        Detection probability.
    selection
        Runs on D and D' of the split that chose the threshold: the choice is then
        simulated (:class:`SelectedTest`); ``None`` places it where it is best.

    Examples
    --------
    >>> p = threshold_test_power(14000, 14000, alpha=0.05, delta=1e-5, epsilon=1.0)
    >>> p.reference, 1.5 < p.epsilon < 2.5
    ('gaussian', True)
    >>> q = threshold_test_power(14000, 14000, alpha=0.05, delta=1e-5, epsilon=1.0,
    ...                          selection=(4000, 4000))
    >>> q.epsilon > p.epsilon  # a threshold chosen on 4000 runs is a weaker test
    True
    """
    # Sizes rounded down to a geometric grid (steps of 2^(1/8), 9%): a smaller test is a
    # weaker one, so the figure can only err upward, and audits of one design share it.
    sel = None if selection is None else (_floor_grid(selection[0]), _floor_grid(selection[1]))
    return _threshold_test_power(_floor_grid(n_pos), _floor_grid(n_neg), float(alpha),
                                 float(delta), float(epsilon), method, float(probability), sel)


def _floor_grid(n: int) -> int:
    """``n`` rounded down to the grid 2^(k/8) (integers below 16 kept).

    Examples
    --------
    >>> _floor_grid(14000), _floor_grid(350), _floor_grid(7)
    (13777, 331, 7)
    """
    n = int(n)
    if n < 16:
        return max(n, 1)
    return int(2.0 ** (math.floor(8.0 * math.log2(n) + 1e-9) / 8.0))


@functools.lru_cache(maxsize=256)
def _threshold_test_power(n_pos: int, n_neg: int, alpha: float, delta: float, epsilon: float,
                          method: str, probability: float,
                          selection: tuple[int, int] | None) -> Power:
    # Cached: repeated audits of one design (self-tests over seeds) share their power.
    ref = reference_for(delta)
    test = CountTest(n_pos, n_neg, alpha=alpha, delta=delta, epsilon=epsilon, method=method)
    if method == "gdp" and delta <= 0:
        return Power(math.inf, probability, ref.name, None, method,
                     "a GDP bound cannot refute a pure-DP claim")
    chosen = SelectedTest(ref, test, selection) if selection is not None else None

    def power(theta: float) -> float:
        if chosen is not None:
            return chosen.power(theta)
        return test.best_power(*ref.rates(theta))

    start = gdp_mu_for_epsilon(epsilon, delta) if ref is GAUSSIAN else epsilon
    theta = smallest_detected(power, probability, max(start, 1e-3),
                              MU_MAX if ref is GAUSSIAN else 50.0 * epsilon + 50.0,
                              rtol=1e-4 if chosen is None else 1e-2)
    eps = ref.epsilon(theta, delta) if math.isfinite(theta) else math.inf
    note = ("threshold chosen on a simulated selection split of "
            f"{selection[0]} + {selection[1]} runs" if selection is not None
            else "threshold placed where it is best for the reference")
    return Power(float(eps), probability, ref.name, theta, method, note)


# The GDP bounds of the white-box audit -------------------------------------------------


def detectable_gdp_variance(df: int, *, alpha: float, delta: float, epsilon: float,
                            probability: float = DETECT_PROBABILITY) -> Power:
    """Detectable epsilon of the spread bound mu^2 >= S^2 df / chi^2_{df, 1 - alpha}.

    Under mu-GDP the pooled sum of squares is mu^2 chi^2_df
    (:func:`~dpverify.stats.audit_bounds.gdp_mu_lower_bound_from_variance`), so the bound
    exceeds the claim's mu_c with probability P[chi^2_df > q mu_c^2 / mu^2], q the
    (1 - alpha) quantile: it reaches ``probability`` at mu = mu_c sqrt(q / q_P), q_P the
    (1 - probability) quantile. Exact.

    Examples
    --------
    >>> p = detectable_gdp_variance(1998, alpha=0.05, delta=1e-5, epsilon=1.0)
    >>> 1.0 < p.epsilon < 1.2
    True
    """
    if delta <= 0:
        return Power(math.inf, probability, "gaussian", None, "gdp-variance",
                     "a GDP bound cannot refute a pure-DP claim")
    mu_c = gdp_mu_for_epsilon(epsilon, delta)
    mu = mu_c * math.sqrt(sstats.chi2.isf(alpha, df) / sstats.chi2.isf(probability, df))
    return Power(stats.epsilon_from_gdp(mu, delta), probability, "gaussian", mu,
                 "gdp-variance")


def detectable_gdp_mean(n_D: int, n_D_prime: int, *, alpha: float, delta: float,
                        epsilon: float, probability: float = DETECT_PROBABILITY) -> Power:
    """Detectable epsilon of the mean bound on exact losses (normal approximation).

    The difference of mean losses is N(mu^2, mu^2 s^2), s^2 = 1/n + 1/n', and the bound
    exceeds mu_c when it is above mu_c^2 + z max(mu_c, mu) s
    (:func:`~dpverify.stats.audit_bounds.gdp_mu_lower_bound_from_losses`, the empirical
    standard error near mu s).

    Examples
    --------
    >>> p = detectable_gdp_mean(1000, 1000, alpha=0.05, delta=1e-5, epsilon=1.0)
    >>> p.epsilon > 1.0
    True
    """
    if delta <= 0:
        return Power(math.inf, probability, "gaussian", None, "gdp-mean",
                     "a GDP bound cannot refute a pure-DP claim")
    mu_c = gdp_mu_for_epsilon(epsilon, delta)
    z = float(sstats.norm.isf(alpha))
    s = math.sqrt(1.0 / n_D + 1.0 / n_D_prime)

    def power(mu: float) -> float:
        return float(sstats.norm.cdf((mu * mu - mu_c * mu_c - z * max(mu_c, mu) * s)
                                     / (mu * s)))

    mu = smallest_detected(power, probability, max(mu_c, 1e-3))
    eps = stats.epsilon_from_gdp(mu, delta) if math.isfinite(mu) else math.inf
    return Power(eps, probability, "gaussian", mu, "gdp-mean")
