"""The statistics of privacy auditing: from counts of a distinguishing test to epsilon.

An attack that says "D" on an event S has a false-positive rate FPR = P_{D'}[S] and a
false-negative rate FNR = P_D[not S]. Every (epsilon, delta)-DP mechanism keeps every test
inside the hypothesis-testing region (Kairouz, Oh, Viswanath 2015, Theorem 2.1)::

    FPR + e^eps FNR >= 1 - delta   and   FNR + e^eps FPR >= 1 - delta,

so exact (Clopper-Pearson) upper bounds on FPR and FNR, each at level alpha/2, give an
epsilon lower bound at confidence 1 - alpha, in both orientations at once (both
inequalities are read off the same two bounds, so taking the larger costs nothing).

The Gaussian route (Nasr et al. 2023, Section 4; Dong, Roth, Su 2019) assumes the
trade-off curve is Gaussian, G_mu(FPR) = Phi(Phi^{-1}(1 - FPR) - mu): one test point then
bounds mu, and mu bounds epsilon at every delta. It is far tighter per sample and valid
only where that assumption holds (a Gaussian mechanism, or unsampled Gaussian releases
seen in full).

Rectangles of two Clopper-Pearson bounds at alpha/2 each add the two errors linearly;
:func:`epsilon_lower_bound_conditional` bounds the ratio of the two rates jointly, by the
exact conditional test of the odds ratio (Cornfield 1956), and spends nearly all of alpha
on one side: the same counts then prove a larger epsilon (0.82 instead of 0.77 of
epsilon = 1 from counts typical of the Gaussian mechanism at 10^6 runs).

Thresholds are never chosen on the counts that bound them: the selection strategies of
:mod:`dpverify.stats.score_audit` select on one split and bound on another, or
Bonferroni-correct over thresholds fixed in advance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import optimize, special, stats

from dpverify.core.errors import InputError

# Threshold candidates: quantile levels dense in both tails, where the tight epsilon
# bounds live when delta is small, and even in the middle, where the GDP bound lives.
_TAIL_LEVELS = 160
_MID_LEVELS = 200
# Confidence of the pessimistic rates that rank thresholds on the selection split
# (tuned on Gaussian and Laplace pairs: 0.01 keeps far-tail noise out and loses little).
SELECT_LEVEL = 0.01


def clopper_pearson(
    k: Any, n: Any, alpha: float, side: str = "upper"
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Exact one-sided (or two-sided) binomial confidence bounds (Clopper and Pearson 1934).

    ``k`` may be fractional (an anticipated count, used only to rank thresholds).

    Parameters
    ----------
    k, n
        Successes and trials (arrays broadcast together).
    alpha
        Error probability of the bound: an upper bound holds with probability ``1 - alpha``.
    side
        ``"upper"``, ``"lower"`` or ``"two"`` (each side at ``alpha / 2``).

    Examples
    --------
    >>> float(np.round(clopper_pearson(0, 100, 0.05), 4))  # the rule of three, exactly
    0.0295
    >>> lo, hi = clopper_pearson(50, 100, 0.05, "two")
    >>> bool(lo < 0.5 < hi)
    True
    """
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    if side == "two":
        return (clopper_pearson(k, n, alpha / 2, "lower"),
                clopper_pearson(k, n, alpha / 2, "upper"))
    with np.errstate(invalid="ignore", divide="ignore"):
        if side == "upper":
            out = special.betaincinv(k + 1.0, np.maximum(n - k, 1e-300), 1.0 - alpha)
            return np.where(k >= n, 1.0, out)
        if side == "lower":
            out = special.betaincinv(np.maximum(k, 1e-300), n - k + 1.0, alpha)
            return np.where(k <= 0, 0.0, out)
    raise InputError(f"side must be 'upper', 'lower' or 'two', got {side!r}")


def epsilon_from_rates(fpr: Any, fnr: Any, delta: float) -> np.ndarray:
    """The smallest epsilon whose (epsilon, delta) region contains the test (FPR, FNR).

    Both orientations of the hypothesis-testing region (Kairouz et al. 2015, Thm 2.1):
    eps >= log((1 - delta - FNR) / FPR) and eps >= log((1 - delta - FPR) / FNR).

    Examples
    --------
    >>> float(np.round(epsilon_from_rates(0.1, 0.5, 0.0), 4))  # log(0.5 / 0.1)
    1.6094
    >>> float(epsilon_from_rates(0.5, 0.5, 0.0))  # a coin flip shows nothing
    0.0
    """
    fpr = np.asarray(fpr, dtype=float)
    fnr = np.asarray(fnr, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = np.log(np.maximum(1.0 - delta - fnr, 0.0)) - np.log(fpr)
        e2 = np.log(np.maximum(1.0 - delta - fpr, 0.0)) - np.log(fnr)
    e = np.fmax(e1, e2)
    return np.where(np.isnan(e), 0.0, np.maximum(e, 0.0))


def epsilon_lower_bound(
    fp: Any, n_neg: Any, fn: Any, n_pos: Any, delta: float, alpha: float
) -> np.ndarray:
    """Epsilon lower bound at confidence ``1 - alpha`` from the counts of one fixed test.

    ``fp`` of ``n_neg`` runs on D' and ``fn`` of ``n_pos`` runs on D were misclassified.
    FPR and FNR are bounded by Clopper-Pearson at ``alpha / 2`` each (a union bound).

    Examples
    --------
    >>> float(np.round(epsilon_lower_bound(100, 10000, 7000, 10000, 1e-5, 0.05), 3))
    3.176
    """
    fpr_ub = clopper_pearson(fp, n_neg, alpha / 2, "upper")
    fnr_ub = clopper_pearson(fn, n_pos, alpha / 2, "upper")
    return epsilon_from_rates(fpr_ub, fnr_ub, delta)


def _log_choose(n: float, k: np.ndarray) -> np.ndarray:
    return special.gammaln(n + 1.0) - special.gammaln(k + 1.0) - special.gammaln(n - k + 1.0)


def odds_ratio_lower_bound(k1: int, n1: int, k0: int, n0: int, alpha: float) -> float:
    """Exact lower confidence bound on the odds ratio of two binomial rates.

    With K1 ~ Bin(n1, p1) and K0 ~ Bin(n0, p0) independent, K1 given K1 + K0 = m follows
    Fisher's noncentral hypergeometric law, whose only parameter is the odds ratio
    psi = p1 (1 - p0) / (p0 (1 - p1)), and which is stochastically increasing in psi; the
    bound is the smallest psi0 with P_psi0(K1 >= k1 | m) > alpha (Cornfield 1956, the
    conditional interval of Fisher's exact test). It holds given m, hence overall. The
    law is log-concave in k, so its mass more than 60 standard deviations from k1 (below
    exp(-1800)) is left out of the sums.

    Examples
    --------
    >>> round(odds_ratio_lower_bound(300, 1000, 200, 1000, 0.05), 3)
    1.435
    >>> odds_ratio_lower_bound(0, 1000, 5, 1000, 0.05)
    0.0
    """
    k1, n1, k0, n0 = int(k1), int(n1), int(k0), int(n0)
    m = k1 + k0
    lo, hi = max(0, m - n0), min(n1, m)
    if k1 <= lo:
        return 0.0
    cells = np.array([k1, n1 - k1, k0, n0 - k0], dtype=float) + 0.5
    se = math.sqrt(float(np.sum(1.0 / cells)))
    width = int(60.0 / se + 60)  # 1/se: the standard deviation of K1 given m
    ks = np.arange(max(lo, k1 - width), min(hi, k1 + width) + 1, dtype=float)
    base = _log_choose(n1, ks) + _log_choose(n0, m - ks)
    upper = ks >= k1

    def excess(log_psi: float) -> float:  # increasing in psi; its root is the bound
        z = base + ks * log_psi
        w = np.exp(z - z.max())
        tail = float(w[upper].sum())
        return (math.log(tail) if tail > 0 else -math.inf) - math.log(float(w.sum())) \
            - math.log(alpha)

    centre = math.log(cells[0] * cells[3] / (cells[1] * cells[2]))
    a, b = centre - 10.0 * se - 1.0, centre + 1.0
    while excess(a) > 0:
        a -= 10.0 * se + 1.0
    while excess(b) < 0:
        b += 10.0 * se + 1.0
    return math.exp(optimize.brentq(excess, a, b, xtol=1e-12))


# Share of alpha spent bounding the rate on the other world (the rest bounds the odds
# ratio): the conversion from odds to rate ratio needs that rate only to first order.
RATE_SHARE = 0.1
# The shares a selection split chooses among, per test. The rate p0 enters log R through
# log(1 - p0 + psi p0), whose slope in p0 is about psi - 1: near epsilon = 0.1 its error
# weighs a tenth of the odds ratio's, and 0.1 of alpha overpays (the odds-ratio quantile
# moves from z_0.09 to z_0.099, about 4% of its error); where psi p0 is large (epsilon
# 3 to 6 on rates of 10^-3 to 10^-2) 0.1 is the best of the three.
RATE_SHARES = (0.1, 0.01, 0.001)


def epsilon_lower_bound_conditional(
    k1: int, n1: int, k0: int, n0: int, delta: float, alpha: float,
    rate_share: float = RATE_SHARE,
) -> float:
    """Epsilon lower bound at confidence ``1 - alpha`` from one event's counts, jointly.

    The event E held in ``k1`` of ``n1`` runs on one world and ``k0`` of ``n0`` on the
    other; (epsilon, delta)-DP gives p1 <= e^eps p0 + delta (Kairouz, Oh and Viswanath
    2015, Theorem 2.1, read for one event). The odds ratio psi = p1 (1 - p0) /
    (p0 (1 - p1)) is bounded from below by :func:`odds_ratio_lower_bound` at
    ``(1 - rate_share) alpha``, and p0 by Clopper-Pearson at ``rate_share alpha``. Under
    the hypothesis, psi <= (R + delta / p0) (1 - p0) / (1 - R p0 - delta) with R = e^eps,
    whose second factor grows with p0, so the bounds on p0 turn it into R <= (psi_lb
    (1 - delta) - delta (1 - p0_ub) / p0_lb) / (1 - p0_ub + psi_lb p0_ub) (at delta = 0
    only p0_ub is needed); every
    smaller epsilon is rejected. The two bounds fail together with probability at most
    alpha (a union bound), so the result holds at confidence 1 - alpha. Unlike a
    rectangle of two Clopper-Pearson bounds at alpha/2, the two rates' errors add in
    quadrature here.

    Examples
    --------
    >>> round(epsilon_lower_bound_conditional(1700, 10**6, 690, 10**6, 1e-5, 0.05), 3)
    0.817
    >>> round(float(epsilon_lower_bound(690, 10**6, 10**6 - 1700, 10**6, 1e-5, 0.05)), 3)
    0.773
    """
    psi = odds_ratio_lower_bound(k1, n1, k0, n0, (1.0 - rate_share) * alpha)
    if psi <= 0:
        return 0.0
    side = rate_share * alpha if delta == 0 else rate_share * alpha / 2.0
    p_up = float(clopper_pearson(k0, n0, side, "upper"))
    p_lo = 1.0 if delta == 0 else float(clopper_pearson(k0, n0, side, "lower"))
    if p_lo <= 0:
        return 0.0  # p0 may be 0: then delta alone explains any k1
    R = (psi * (1.0 - delta) - delta * (1.0 - p_up) / p_lo) / (1.0 - p_up + psi * p_up)
    return math.log(R) if R > 1.0 else 0.0


def gdp_mu_from_rates(fpr: Any, fnr: Any) -> np.ndarray:
    """mu of the Gaussian trade-off curve through (FPR, FNR), clipped at 0.

    G_mu(a) = Phi(Phi^{-1}(1 - a) - mu) (Dong, Roth, Su 2019, Def. 2.7), so a test below
    the curve shows mu > Phi^{-1}(1 - FPR) - Phi^{-1}(FNR). The expression is symmetric
    in FPR and FNR, so one formula covers both orientations; a test no better than
    chance gives 0, never a negative or absolute value (the error fixed in jax_privacy's
    ``epsilon_from_gdp``, PR #270).

    Examples
    --------
    >>> float(np.round(gdp_mu_from_rates(0.3085, 0.3085), 3))  # FPR = FNR = Phi(-mu/2)
    1.0
    >>> float(gdp_mu_from_rates(0.6, 0.6))
    0.0
    """
    mu = stats.norm.isf(np.asarray(fpr, dtype=float)) - stats.norm.ppf(
        np.asarray(fnr, dtype=float))
    return np.where(np.isnan(mu), 0.0, np.maximum(mu, 0.0))


def gdp_mu_lower_bound(fp: Any, n_neg: Any, fn: Any, n_pos: Any, alpha: float) -> np.ndarray:
    """mu lower bound at confidence ``1 - alpha`` from one fixed test (Nasr et al. 2023).

    Valid only where the mechanism's trade-off curve is Gaussian.

    Examples
    --------
    >>> float(np.round(gdp_mu_lower_bound(30850, 100000, 30850, 100000, 0.05), 2))
    0.98
    """
    fpr_ub = clopper_pearson(fp, n_neg, alpha / 2, "upper")
    fnr_ub = clopper_pearson(fn, n_pos, alpha / 2, "upper")
    return gdp_mu_from_rates(fpr_ub, fnr_ub)


def delta_from_gdp(mu: float, epsilon: float) -> float:
    """delta(epsilon) of mu-GDP (Dong, Roth, Su 2019, Corollary 2.13).

    delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), the second term in logs.

    Examples
    --------
    >>> round(delta_from_gdp(1.0, 1.0), 4)
    0.1269
    """
    if mu <= 0:
        return 0.0
    if not math.isfinite(mu):
        return 1.0
    a = -epsilon / mu + mu / 2.0
    b = -epsilon / mu - mu / 2.0
    return float(stats.norm.cdf(a) - math.exp(epsilon + stats.norm.logcdf(b)))


def epsilon_from_gdp(mu: float, delta: float) -> float:
    """The epsilon of mu-GDP at ``delta``: the root of :func:`delta_from_gdp` (0 if mu <= 0).

    Examples
    --------
    >>> round(epsilon_from_gdp(1.0, 1e-5), 3)  # as dp_accounting's GaussianDpEvent(1.0)
    4.377
    >>> epsilon_from_gdp(0.0, 1e-5), epsilon_from_gdp(0.5, 0.0)
    (0.0, inf)
    """
    mu = float(mu)
    if not mu > 0:
        return 0.0
    if not math.isfinite(mu):
        return math.inf
    if delta <= 0:
        return math.inf  # a Gaussian trade-off curve with mu > 0 is never pure DP
    if delta_from_gdp(mu, 0.0) <= delta:
        return 0.0
    hi = mu * mu / 2.0 + mu * math.sqrt(2.0 * math.log(1.0 / delta)) + 1.0
    while delta_from_gdp(mu, hi) > delta:
        hi *= 2.0
    return float(optimize.brentq(lambda e: delta_from_gdp(mu, e) - delta, 0.0, hi,
                                 xtol=1e-10, rtol=1e-12))


def gdp_mu_lower_bound_from_losses(
    loss_D: np.ndarray, loss_D_prime: np.ndarray, alpha: float
) -> float:
    """mu lower bound from exact privacy-loss samples, assuming a Gaussian trade-off curve.

    Under mu-GDP the privacy loss L = log p_D / p_D' is N(mu^2/2, mu^2) under D and
    N(-mu^2/2, mu^2) under D' (Dong, Roth, Su 2019, Prop. 2.9 / Balle and Wang 2018), so
    T = mean(L | D) - mean(L | D') is N(mu^2, mu^2 s^2), s^2 = 1/n + 1/n'. H0: mu <= mu0 is
    rejected when T > mu0^2 + z mu0 s; for the bound to stay honest when the loss varies
    more than the model says (a canary whose sensitivity changes from trial to trial),
    the larger of the model's and the empirical standard error is used. The largest
    rejected mu0 is the bound (the rejection threshold is increasing in mu0).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> mu = 1.0
    >>> LD = rng.normal(mu**2 / 2, mu, 20000); LDp = rng.normal(-mu**2 / 2, mu, 20000)
    >>> b = gdp_mu_lower_bound_from_losses(LD, LDp, 0.05)
    >>> 0.95 < b < 1.0
    True
    """
    a = np.asarray(loss_D, dtype=float)
    b = np.asarray(loss_D_prime, dtype=float)
    if a.size < 2 or b.size < 2 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return 0.0
    T = float(a.mean() - b.mean())
    if T <= 0:
        return 0.0
    z = float(stats.norm.isf(alpha))
    s = math.sqrt(1.0 / a.size + 1.0 / b.size)
    se_emp = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)

    def excess(mu0: float) -> float:  # > 0 while mu0 is still rejected
        return T - mu0 * mu0 - z * max(mu0 * s, se_emp)

    if excess(0.0) <= 0:
        return 0.0
    hi = math.sqrt(T) + 1.0
    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12))


def gdp_mu_lower_bound_from_variance(
    loss_D: np.ndarray, loss_D_prime: np.ndarray, alpha: float
) -> float:
    """mu lower bound from the spread of exact privacy-loss samples (Gaussian trade-off).

    When the loss is exactly N(+-mu^2/2, mu^2) in the two worlds, the pooled sample
    variance S^2 over df = n + n' - 2 degrees of freedom is mu^2 chi^2_df / df, so
    mu^2 >= df S^2 / chi^2_{df, 1-alpha} at confidence 1 - alpha (Cochran's theorem).
    For small mu the spread carries far more information than the mean (Fisher
    information 2/mu^2 against 1 per sample); it is exact only when every trial's loss
    has the same variance, which a white-box audit checks on the replayed sensitivities.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> mu = 0.3
    >>> LD = rng.normal(mu**2 / 2, mu, 5000); LDp = rng.normal(-mu**2 / 2, mu, 5000)
    >>> b = gdp_mu_lower_bound_from_variance(LD, LDp, 0.05)
    >>> 0.28 < b < 0.3
    True
    """
    a = np.asarray(loss_D, dtype=float)
    b = np.asarray(loss_D_prime, dtype=float)
    if a.size < 2 or b.size < 2 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return 0.0
    df = a.size + b.size - 2
    ss = float(np.sum((a - a.mean()) ** 2) + np.sum((b - b.mean()) ** 2))
    return float(math.sqrt(ss / stats.chi2.isf(alpha, df)))


# Threshold tests on scores ---------------------------------------------------------


def candidate_thresholds(*scores: np.ndarray) -> np.ndarray:
    """Observed score values at quantile levels dense in both tails and even in the middle.

    Examples
    --------
    >>> t = candidate_thresholds(np.arange(1000.0))
    >>> bool(t.min() == 0.0 and t.max() == 999.0 and len(t) > 100)
    True
    """
    pooled = np.concatenate([np.asarray(s, dtype=float).ravel() for s in scores])
    pooled = pooled[~np.isnan(pooled)]
    if pooled.size == 0:
        return np.zeros(1)
    N = pooled.size
    tail = np.geomspace(1.0 / N, 0.5, _TAIL_LEVELS)
    levels = np.unique(np.clip(np.concatenate(
        [tail, 1.0 - tail, np.linspace(0.0, 1.0, _MID_LEVELS + 1)]), 0.0, 1.0))
    return np.unique(np.quantile(pooled, levels, method="inverted_cdf"))


def tail_counts(sorted_scores: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """How many scores are ``>= t`` for each threshold (``sorted_scores`` ascending).

    Examples
    --------
    >>> tail_counts(np.array([1.0, 2.0, 2.0, 3.0]), np.array([0.0, 2.0, 3.5])).tolist()
    [4, 3, 0]
    """
    return sorted_scores.size - np.searchsorted(sorted_scores, thresholds, side="left")


def roc_points(pos: np.ndarray, neg: np.ndarray, points: int = 200) -> dict[str, list[float]]:
    """An empirical ROC (TPR of ``pos`` vs FPR of ``neg`` at shared thresholds) for plots.

    Descriptive only: bounds come from :class:`dpverify.stats.score_audit.ScoreAudit`,
    which selects and tests on separate splits.

    Examples
    --------
    >>> r = roc_points(np.array([2.0, 3.0]), np.array([0.0, 1.0]), points=5)
    >>> r["tpr"][-1], r["fpr"][-1]
    (0.5, 0.0)
    """
    pos, neg = np.asarray(pos, dtype=float), np.asarray(neg, dtype=float)
    both = np.concatenate([pos, neg])
    both = both[np.isfinite(both)]
    if both.size == 0:
        return {"fpr": [], "tpr": []}
    t = np.unique(np.quantile(both, np.linspace(0.0, 1.0, points)))
    return {"fpr": (tail_counts(np.sort(neg), t) / max(neg.size, 1)).tolist(),
            "tpr": (tail_counts(np.sort(pos), t) / max(pos.size, 1)).tolist()}


@dataclass
class ThresholdBound:
    """The test "score >= threshold" and the bound its held-out counts give."""

    method: str  # "cp" or "gdp"
    epsilon: float
    mu: float | None
    threshold: float
    tp: int
    fp: int
    n_pos: int
    n_neg: int
    alpha: float
    label: str = ""
    anticipated: float = 0.0
    # Which exact statistic bounded the counts (see dpverify.stats.selection) and, for the
    # conditional one, which world the event was evidence for ("both" for a rectangle).
    statistic: str = "clopper_pearson"
    orientation: str = "both"
    rate_share: float | None = None  # the conditional bound's share of alpha on p0
    # The event's direction (-1: "score <= -threshold"), which candidate it was, and the
    # source of the statistic.
    sign: float = 1.0
    candidate: int = 0
    citation: str = ""

    @property
    def fpr_upper(self) -> float:
        return float(clopper_pearson(self.fp, self.n_neg, self.alpha / 2, "upper"))

    @property
    def fnr_upper(self) -> float:
        return float(clopper_pearson(self.n_pos - self.tp, self.n_pos, self.alpha / 2, "upper"))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(fpr_upper=self.fpr_upper, fnr_upper=self.fnr_upper)
        return d


def split_sizes(total: int, fractions: Sequence[float]) -> list[int]:
    """Sizes of consecutive splits of ``total`` iid samples (the last takes the rest).

    Examples
    --------
    >>> split_sizes(100, (0.1, 0.2, 0.7))
    [10, 20, 70]
    """
    fr = [float(f) for f in fractions]
    if any(f <= 0 for f in fr) or abs(sum(fr) - 1.0) > 1e-9:
        raise InputError(f"split fractions must be positive and sum to 1, got {list(fractions)}")
    sizes = [int(math.floor(total * f)) for f in fr[:-1]]
    sizes.append(total - sum(sizes))
    if min(sizes) < 1:
        raise InputError(f"{total} trials are too few for splits {list(fractions)}")
    return sizes


def privacy_profile(loss_D: np.ndarray, epsilons: np.ndarray) -> np.ndarray:
    """Empirical privacy profile delta(eps) = mean over D-runs of (1 - e^(eps - L))_+.

    With L the exact privacy loss of each run, E_D[(1 - e^(eps - L))_+] is the
    hockey-stick divergence H_{e^eps}(P_D || P_D') (Balle et al. 2018, Theorem 1 / Lemma 1
    of "Privacy amplification by subsampling"), so this is an unbiased estimate of the
    pair's delta at each eps (a point estimate, not a bound).

    Examples
    --------
    >>> float(privacy_profile(np.array([np.inf, 0.0]), np.array([1.0]))[0])
    0.5
    """
    L = np.asarray(loss_D, dtype=float)[:, None]
    e = np.asarray(epsilons, dtype=float)[None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.where(np.isposinf(L), 1.0, np.maximum(1.0 - np.exp(e - L), 0.0))
    return v.mean(axis=0)
