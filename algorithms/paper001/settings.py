"""Parameter rules of paper 001's theorems, the printed noise, and our sound calibration.

The theorems state D, Sigma, M, m and the noise up to Theta~/O~ constants; every constant
is set to 1 here (notes 001, Section 3), natural logarithms, integers rounded and clamped
to >= 1. The privacy-critical numbers of the ``sound`` variants never use those
constants: they come from deterministic bounds (per-record estimates are projected onto
balls) and the accountant.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scipy.special import gammaln

from dpverify.accounting.accountant import calibrate_gaussian
from dpverify.core.claims import PrivacyClaim
from dpverify.core.errors import InputError
from dpverify.mechanisms.tree import tree_levels, tree_noise_std

SOURCE = ("Kornowski, Liu, Talwar, Improved sample complexity for private nonsmooth "
          "nonconvex optimization (paper 001)")
# "differ in only one data point" with n fixed (line 139): replace-one neighbours.
RELATION = "replace_one"
# Theorem 4.1's D = alpha^2 beta^2 / L^2 as printed, or the dimensionally consistent one.
D_RULES = ("paper", "consistent")


def claim(p: Mapping[str, Any]) -> PrivacyClaim:
    """(epsilon, delta)-DP under replace-one neighbours (Theorems 3.1, 4.1, 6.1).

    Examples
    --------
    >>> claim({"epsilon": 1.0, "delta": 1e-5}).relation
    'replace_one'
    """
    return PrivacyClaim(epsilon=float(p["epsilon"]), delta=float(p["delta"]), relation=RELATION)


def smoothing_constant(d: int) -> float:
    """c_d with grad h_alpha (L c_d / alpha)-Lipschitz for L-Lipschitz h (notes 001, Sec. 1).

    c_d = 2 Gamma(d/2 + 1) / (sqrt(pi) Gamma((d + 1)/2)): the volume of the symmetric
    difference of two shifted balls over the ball's, tight at a kink. Fact 2.3(iii)
    (line 125) states only O(L sqrt(d) / alpha).

    Examples
    --------
    >>> [round(smoothing_constant(d), 3) for d in (1, 2, 3, 10)]
    [1.0, 1.273, 1.5, 2.587]
    """
    d = int(d)
    return float(2.0 * math.exp(gammaln(d / 2 + 1) - gammaln((d + 1) / 2)) / math.sqrt(math.pi))


def _int(x: float) -> int:
    return max(1, int(round(x)))


def _opt(p: Mapping[str, Any], key: str) -> Any:
    v = p.get(key)
    return None if v is None else v


@dataclass(frozen=True)
class SinglePassSchedule:
    """Theorem 3.1 / 6.1 parameters: steps, step bound, period, batches, averaging, m."""

    T: int
    D: float
    Sigma: int
    B1: int
    B2: int
    M: int
    m: int
    m_theorem: int  # the lemma's m before any m_max cap

    @property
    def records_used(self) -> int:
        """B1 ceil(T/Sigma) + B2 (T - ceil(T/Sigma)): records a single pass consumes."""
        return records_used(self.T, self.Sigma, self.B1, self.B2)


def records_used(T: int, Sigma: int, B1: int, B2: int) -> int:
    """Records consumed by T single-pass steps (a fresh batch of B1 at every period start).

    Examples
    --------
    >>> records_used(10, 5, 5, 1)  # two period starts of 5, eight steps of 1
    18
    """
    starts = -(-int(T) // int(Sigma))
    return int(B1) * starts + int(B2) * (int(T) - starts)


def check_records(p: Mapping[str, Any]) -> None:
    """Refuse a given T that no single pass fits in n records, whatever period it derives.

    The period Sigma comes from the problem's constants (L, Phi) when not given, so the
    exact count is known only when the algorithm runs (:func:`single_pass_schedule` checks
    it there); here T is refused where even the least count over every Sigma <= T (with
    B1 and B2 as given, B1 = Sigma and B2 = 1 by default) exceeds n. That count is
    B1 ceil(T/Sigma) + B2 (T - ceil(T/Sigma)): linear in the number of period starts when
    B1 is given, so least at Sigma = 1 or T, and at least T when B1 = Sigma (T at 1).

    Examples
    --------
    >>> check_records({"n": 200, "T": 150})  # fits at some period: the run decides
    >>> try:
    ...     check_records({"n": 200, "T": 400})
    ... except InputError as e:
    ...     print(e)
    a single pass of T = 400 steps needs at least 400 records at any period Sigma; n = 200
    """
    T, n = _opt(p, "T"), int(p["n"])
    if T is None:
        return  # T is derived to fit
    T = int(T)
    fixed = _opt(p, "Sigma")
    b1, b2 = _opt(p, "B1"), _opt(p, "B2")
    least = min(records_used(T, s, s if b1 is None else b1, 1 if b2 is None else b2)
                for s in ((min(int(fixed), T),) if fixed is not None else (1, T)))
    if least > n:
        period = f"Sigma = {fixed}" if fixed is not None else "any period Sigma"
        raise InputError(f"a single pass of T = {T} steps needs at least {least} records at "
                         f"{period}; n = {n}")


def single_pass_schedule(p: Mapping[str, Any], L: float, Phi: float, n: int, d: int, *,
                         first_order: bool) -> SinglePassSchedule:
    """The parameters of Theorem 3.1 (zero-order) or 6.1 (first-order), constants 1.

    T = Theta(n) is the largest T <= n/2 whose single pass fits in n records. D is the min of
    the four terms of Thm 3.1 (line 203), Sigma = (alpha/(eps D))^(2/3) + alpha/(D sqrt d),
    B1 = Sigma, B2 = 1, M = alpha/(4D), and m is Lemma 3.5's (line 249) or Lemma 6.4's
    (line 408). Any of them given in ``p`` wins; ``m_max`` caps m (a reduced setting).

    Examples
    --------
    >>> s = single_pass_schedule({"alpha": 0.1, "epsilon": 1.0, "delta": 1e-5}, 1.0, 1.0,
    ...                          10_000, 10, first_order=False)
    >>> s.T, round(s.D, 5), s.Sigma, s.M, s.records_used <= 10_000
    (5000, 0.00108, 50, 23, True)
    """
    alpha, eps, delta = float(p["alpha"]), float(p["epsilon"]), float(p["delta"])
    T_given = _opt(p, "T")
    T = int(T_given) if T_given is not None else max(1, n // 2)
    if _opt(p, "D") is not None:
        D = float(p["D"])
    else:
        D = min((Phi**2 * alpha / (L**2 * T**2)) ** (1 / 3),
                (Phi * alpha * eps / (d * L * T)) ** (1 / 2),
                (Phi**3 * alpha**2 * eps / (d**1.5 * L**3 * T**3)) ** (1 / 5),
                (Phi**2 * alpha / (L**2 * T**2 * math.sqrt(d))) ** (1 / 3))
    if _opt(p, "Sigma") is not None:
        Sigma = int(p["Sigma"])
    else:
        Sigma = _int((alpha / (eps * D)) ** (2 / 3) + alpha / (D * math.sqrt(d)))
    Sigma = min(Sigma, T)
    B1 = int(p["B1"]) if _opt(p, "B1") is not None else Sigma
    B2 = int(p["B2"]) if _opt(p, "B2") is not None else 1
    if T_given is None:
        while T > 1 and records_used(T, min(Sigma, T), B1, B2) > n:
            T -= 1
        Sigma = min(Sigma, T)
    if records_used(T, Sigma, B1, B2) > n:
        raise InputError(f"a single pass of T = {T} steps (Sigma = {Sigma}, B1 = {B1}, B2 = "
                         f"{B2}) needs {records_used(T, Sigma, B1, B2)} records; n = {n}")
    M = int(p["M"]) if _opt(p, "M") is not None else max(1, int(alpha / (4 * D)))
    M = min(M, T)
    logt = math.log(d * B2 / delta)
    if first_order:
        m_thm = logt * B2**2 * alpha**2 / (D**2 * d)  # Lemma 6.4, line 408
    else:
        m_thm = logt * (d**2 * B1**2 + d * alpha**2 * B2**2 / D**2)  # Lemma 3.5, line 249
    m_thm_i = max(1, math.ceil(m_thm))
    m = int(p["m"]) if _opt(p, "m") is not None else m_thm_i
    if _opt(p, "m_max") is not None:
        m = min(m, int(p["m_max"]))
    return SinglePassSchedule(T, D, Sigma, B1, B2, M, max(1, m), m_thm_i)


def paper_tree_noise(L: float, s: SinglePassSchedule, alpha: float, d: int, eps: float,
                     delta: float) -> tuple[float, float]:
    """(declared sensitivity, sigma) of the printed single-pass oracles.

    Sensitivity L/B1 + L sqrt(d) D/(alpha B2) (Lemma 3.5 proof, line 464; Lemma 6.4 proof,
    line 414) and sigma = 4 s sqrt(log Sigma log(1/delta)) / eps (Prop 2.5, line 147), every
    O constant 1. At Sigma = 1 the printed sigma is 0.

    Examples
    --------
    >>> sched = SinglePassSchedule(100, 0.01, 4, 4, 1, 2, 10, 10)
    >>> [round(v, 4) for v in paper_tree_noise(1.0, sched, 0.1, 4, 1.0, 1e-5)]
    [0.45, 7.1911]
    """
    sens = L / s.B1 + L * math.sqrt(d) * s.D / (alpha * s.B2)
    sigma = 4.0 * sens * math.sqrt(math.log(s.Sigma) * math.log(1.0 / delta)) / eps
    return sens, sigma


def estimate_error(m: int, d: int, L: float, gamma: float, *, first_order: bool) -> float:
    """u with P(||estimate - grad f_alpha|| > u) <= gamma for an m-sample mean.

    Pinelis' Hilbert-space Hoeffding bound: P(||mean|| >= u) <= 2 exp(-m u^2 / (2 b^2)) for
    i.i.d. zero-mean terms of norm <= b; b = L (d + 1) for the zero-order terms (each has
    norm <= L d, line 446) and b = 2L for gradients (notes 001, Section 3).

    Examples
    --------
    >>> round(estimate_error(100, 3, 1.0, 0.05, first_order=False), 3)
    1.086
    """
    b = 2.0 * L if first_order else L * (d + 1)
    return b * math.sqrt(2.0 * math.log(2.0 / gamma) / m)


def sound_radii(L: float, D: float, alpha: float, d: int, m: int, gamma: float, *,
                first_order: bool) -> tuple[float, float]:
    """(R1, R2): the balls per-record estimates (R1) and differences a - b (R2) are projected on.

    R1 = L + u for a zero-order estimate (never above its deterministic bound L d) and L for
    one gradient; R2 = min(2 H D, 2 L) + 2u with H = L c_d / alpha, since
    ||z_t - z_{t-1}|| <= 2D (notes 001, "Recommended robust mode"), never above 2 L d
    (zero-order) or 2 L (gradients). With u from :func:`estimate_error` the projection
    moves an estimate with probability <= gamma; privacy holds for every m.

    Examples
    --------
    >>> [round(r, 3) for r in sound_radii(1.0, 0.01, 0.1, 3, 10**6, 0.05, first_order=True)]
    [1.0, 0.311]
    """
    u = estimate_error(m, d, L, gamma, first_order=first_order)
    H = L * smoothing_constant(d) / alpha
    diff = min(2.0 * H * D, 2.0 * L) + 2.0 * u
    if first_order:
        return L, min(diff, 2.0 * L)
    return min(L + u, L * d), min(diff, 2.0 * L * d)


def sound_tree_noise(R1: float, R2: float, s: SinglePassSchedule, eps: float,
                     delta: float) -> tuple[float, float, float]:
    """(s1, s2, sigma): replace-one sensitivities 2 R1 / B1 and 2 R2 / B2, calibrated noise.

    The noise is calibrated for the worst record of a period's tree, whose first leaf has
    sensitivity s1 and the others s2 (:func:`dpverify.mechanisms.tree.tree_noise_std`).

    Examples
    --------
    >>> sched = SinglePassSchedule(100, 0.01, 4, 4, 1, 2, 10, 10)
    >>> s1, s2, sigma = sound_tree_noise(2.0, 0.5, sched, 1.0, 1e-5)
    >>> s1, s2, round(sigma / s1, 2)
    (1.0, 1.0, 6.46)
    """
    s1, s2 = 2.0 * R1 / s.B1, 2.0 * R2 / s.B2
    leaves = [s1] + [s2] * (s.Sigma - 1)  # a period: one first step, then differences
    return s1, s2, tree_noise_std(leaves, s.Sigma, epsilon=eps, delta=delta)


def single_pass_g1(L: float, s: SinglePassSchedule, sigma: float, alpha: float, d: int, *,
                   first_order: bool) -> float:
    """G1, the data-independent bound on sqrt(E ||oracle||^2) that sets eta (constants 1).

    Lemma 3.6 (line 258) for zero-order, Lemma 6.5 (line 425) for first-order, with the
    tree's levels in place of log Sigma (so Sigma = 1 keeps its noise term).

    Examples
    --------
    >>> round(single_pass_g1(1.0, SinglePassSchedule(100, 0.01, 4, 4, 1, 2, 10, 10), 0.0,
    ...                      0.1, 4, first_order=True), 3)
    1.249
    """
    lv = tree_levels(s.Sigma)
    g2 = L**2 + L**2 * d * s.D**2 * s.Sigma / (alpha**2 * s.B2) + sigma**2 * d * lv
    if first_order:
        g2 += L**2 * s.Sigma / (s.m * s.B2)
    else:
        g2 += L**2 * d**2 / (s.B1 * s.m) + L**2 * d**2 * s.Sigma / (s.m * s.B2)
    return math.sqrt(g2)


@dataclass(frozen=True)
class MultiPassSchedule:
    """Theorem 4.1 parameters and the printed noise levels."""

    T: int
    D: float
    Sigma: int
    M: int
    m: int
    m_theorem: int
    beta: float
    sigma1: float  # as printed (line 321), times noise_constant
    sigma2: float

    @property
    def full_steps(self) -> int:
        """Period starts: full (non-difference) releases, ceil(T / Sigma)."""
        return -(-self.T // self.Sigma)


def balanced_beta(L: float, Phi: float, n: int, d: int, eps: float, alpha: float) -> float:
    """The beta at which Theorem 4.1's two terms balance (line 536, constants 1).

    beta = Phi^(1/3) L^(2/3) d^(1/2) / ((n eps)^(2/3) alpha^(1/3)), the achievable
    stationarity of the ERM algorithm as a function of n.

    Examples
    --------
    >>> round(balanced_beta(1.0, 1.0, 1000, 4, 1.0, 0.125), 3)
    0.04
    """
    return Phi ** (1 / 3) * L ** (2 / 3) * math.sqrt(d) / ((n * eps) ** (2 / 3) * alpha ** (1 / 3))


def multi_pass_schedule(p: Mapping[str, Any], L: float, Phi: float, n: int,
                        d: int) -> MultiPassSchedule:
    """The parameters of Theorem 4.1 (line 321), constants 1.

    D = alpha^2 beta^2 / L^2 and T = Phi L^2 / (alpha^2 beta^3) as printed (``d_rule =
    "paper"``), or the dimensionally consistent D = alpha beta^2 / L^2 and
    T = Phi L^2 / (alpha beta^3) (``"consistent"``; D T = Phi / beta either way).
    Sigma = alpha / (D sqrt d), M = alpha / (4 D), sigma1 = L sqrt(T log(1/delta) / Sigma) /
    (n eps), sigma2 = L D sqrt(T d log(1/delta)) / (alpha n eps), both times
    ``noise_constant`` (the printed O), and m = L^2 d Sigma / (n sigma1^2) + L^2 d /
    (n sigma2^2). ``beta = None`` (or ``"balanced"``) takes :func:`balanced_beta`.

    Examples
    --------
    >>> s = multi_pass_schedule({"alpha": 0.1, "epsilon": 1.0, "delta": 1e-5, "beta": 0.3},
    ...                         1.0, 1.0, 10_000, 10)
    >>> s.T, s.Sigma, s.M, s.m
    (3704, 35, 27, 5768)
    """
    alpha, eps, delta = float(p["alpha"]), float(p["epsilon"]), float(p["delta"])
    beta = p.get("beta")
    # "balanced" spells None where a suite file (TOML has no null) needs it
    if isinstance(beta, str) and beta != "balanced":
        raise InputError(f"beta must be a number or 'balanced', got {beta!r}")
    beta = (balanced_beta(L, Phi, n, d, eps, alpha) if beta in (None, "balanced")
            else float(beta))
    rule = p.get("d_rule", "paper")
    if rule == "paper":
        D, T = alpha**2 * beta**2 / L**2, Phi * L**2 / (alpha**2 * beta**3)
    elif rule == "consistent":
        D, T = alpha * beta**2 / L**2, Phi * L**2 / (alpha * beta**3)
    else:
        raise InputError(f"d_rule must be one of {D_RULES}, got {rule!r}")
    D = float(p["D"]) if _opt(p, "D") is not None else D
    T = int(p["T"]) if _opt(p, "T") is not None else _int(T)
    Sigma = int(p["Sigma"]) if _opt(p, "Sigma") is not None else _int(alpha / (D * math.sqrt(d)))
    Sigma = min(Sigma, T)
    M = min(int(p["M"]) if _opt(p, "M") is not None else max(1, int(alpha / (4 * D))), T)
    c = float(p.get("noise_constant", 1.0))
    lg = math.log(1.0 / delta)
    sigma1 = c * L * math.sqrt(T * lg / Sigma) / (n * eps)
    sigma2 = c * L * D * math.sqrt(T * d * lg) / (alpha * n * eps)
    m_thm = max(1, math.ceil(L**2 * d * Sigma / (n * sigma1**2) + L**2 * d / (n * sigma2**2)))
    m = int(p["m"]) if _opt(p, "m") is not None else m_thm
    if _opt(p, "m_max") is not None:
        m = min(m, int(p["m_max"]))
    return MultiPassSchedule(T, D, Sigma, M, max(1, m), m_thm, beta, sigma1, sigma2)


def sound_multi_pass_noise(R1: float, R2: float, s: MultiPassSchedule, n: int, eps: float,
                           delta: float) -> tuple[float, float, float, float]:
    """(Delta1, Delta2, sigma1, sigma2) for Algorithm 4 with projected estimates.

    Replace-one sensitivities of the released means, Delta1 = 2 R1 / n and Delta2 = 2 R2 / n.
    A record enters every step, so the T Gaussian releases compose: as mu-GDP,
    mu^2 = n_full (Delta1/sigma1)^2 + n_diff (Delta2/sigma2)^2 (Dong, Roth, Su 2022, Cor. 3.3).
    The budget mu (one Gaussian meeting (eps, delta), calibrated by PLD) is split equally
    between the two kinds of step.

    Examples
    --------
    >>> s = MultiPassSchedule(10, 0.01, 5, 2, 4, 4, 1.0, 0.0, 0.0)
    >>> d1, d2, s1, s2 = sound_multi_pass_noise(2.0, 0.5, s, 100, 1.0, 1e-5)
    >>> mu2 = 2 * (d1 / s1) ** 2 + 8 * (d2 / s2) ** 2  # 2 full steps, 8 difference steps
    >>> d1, d2, round(mu2 * calibrate_gaussian(target_epsilon=1.0, target_delta=1e-5) ** 2, 9)
    (0.04, 0.01, 1.0)
    """
    d1, d2 = 2.0 * R1 / n, 2.0 * R2 / n
    z = calibrate_gaussian(target_epsilon=eps, target_delta=delta)  # sigma / Delta, mu = 1/z
    n_full, n_diff = s.full_steps, s.T - s.full_steps
    share = 2.0 if n_diff > 0 else 1.0
    return d1, d2, d1 * z * math.sqrt(share * n_full), d2 * z * math.sqrt(share * max(n_diff, 1))


def paper_multi_pass_sensitivities(L: float, s: MultiPassSchedule, alpha: float, d: int,
                                   n: int) -> tuple[float, float]:
    """(Delta1, Delta2) the proof of Lemma 4.3 relies on: Lemma 3.4 with B1 = B2 = n.

    "The sensitivity of g_t in Algorithm 4 directly follows from Lemma 3.4" (line 328):
    L/n for a full step and L sqrt(d) D / (alpha n) for a difference step, constants 1.

    Examples
    --------
    >>> s = MultiPassSchedule(10, 0.01, 5, 2, 4, 4, 1.0, 0.0, 0.0)
    >>> [round(v, 6) for v in paper_multi_pass_sensitivities(1.0, s, 0.1, 4, 100)]
    [0.01, 0.002]
    """
    return L / n, L * math.sqrt(d) * s.D / (alpha * n)


def multi_pass_g1(L: float, s: MultiPassSchedule, sigma1: float, sigma2: float, d: int,
                  n: int) -> float:
    """G1 for Algorithm 4: Lemma 4.4 (line 341), constants 1.

    Examples
    --------
    >>> s = MultiPassSchedule(10, 0.01, 5, 2, 4, 4, 1.0, 0.0, 0.0)
    >>> round(multi_pass_g1(1.0, s, 0.0, 0.0, 4, 100), 3)
    1.095
    """
    return math.sqrt(L**2 + L**2 * d**2 * s.Sigma / (s.m * n) + sigma1**2 * d
                     + sigma2**2 * d * s.Sigma)
