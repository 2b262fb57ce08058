"""A parametric white-box bound for Poisson-sampled Gaussian releases (DP-SGD).

The exact privacy loss of a Poisson-sampled Gaussian release is the log-ratio of a
two-component mixture (:func:`dpverify.checks.audit.whitebox.release_privacy_loss`), and the
transcript's loss is its sum over releases. Bounded without assumptions (Clopper-Pearson
on a threshold test), it needs the rare transcripts in which the canary was drawn many
times, hence millions of runs. This module bounds epsilon inside the family the
accountant itself assumes, and states that assumption as the GDP bound does:

    release t is Poisson-sampled at the executed rate q_t with Gaussian noise sigma_t,
    and the canary moves it by kappa C_t, C_t its declared sensitivity, kappa the same
    at every step.

The accountant's epsilon is the family's at kappa = 1; a sensitivity larger than
declared shows as kappa > 1. In units of the noise, mu_t = kappa C_t / sigma_t, the
canary's loss on release t is l(x) = log(1 - q + q exp(mu x - mu^2 / 2)) with x the
release along the canary's direction: x ~ (1 - q) N(0, 1) + q N(mu, 1) in the world
holding the canary and N(0, 1) in the other (the dominating pair of the Poisson
subsampled Gaussian: Mironov, Talwar, Zhang 2019, Section 3; Zhu, Dong, Wang 2022,
Theorem 11). Its moments follow by Gauss-Hermite quadrature and add up over the
independent releases. Two statistics of the replayed losses grow with kappa:

* the difference of the mean losses under the two worlds (T times the symmetrized KL
  divergence of the family);
* the pooled spread of the losses (their variance).

Each gives a lower confidence bound on kappa at alpha / 2 from the normal approximation
of a mean (respectively a sample variance, whose variance is kappa_4 / n + 2 sigma^4 /
(n - 1)) over independent runs, with the larger of the model's and the empirical
standard error; the larger bound is kept, and epsilon is the accountant's with every
declared sensitivity multiplied by it (dp_accounting PLD).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import optimize
from scipy import stats as sstats

from dpverify.core.curator import Ledger
from dpverify.stats import audit_bounds as stats
from dpverify.stats.power import DETECT_PROBABILITY, Power, smallest_detected

ASSUMPTION = ("parametric bound: assumes every release is a Poisson-sampled Gaussian with "
              "its executed rate and noise (the family the accountant assumes) and that "
              "the canary moves each by the same multiple kappa of its declared sensitivity; "
              "kappa is bounded from the replayed privacy losses (normal approximation)")
_NODES, _WEIGHTS = np.polynomial.hermite.hermgauss(96)
KAPPA_MAX = 50.0


@dataclass(frozen=True)
class Family:
    """The releases of a ledger as members of the sampled-Gaussian family (add/remove).

    ``q`` and ``mu`` (C_t / sigma_t, the canary's shift at kappa = 1) per distinct
    release kind, with ``count`` releases of each.

    Examples
    --------
    >>> Family(np.array([0.1, 1.0]), np.array([0.5, 0.2]), np.array([10, 2])).steps
    12
    """

    q: np.ndarray
    mu: np.ndarray
    count: np.ndarray

    @property
    def steps(self) -> int:
        return int(self.count.sum())

    def key(self) -> tuple[tuple[float, float, int], ...]:
        return tuple(zip(self.q.tolist(), self.mu.tolist(), self.count.tolist(), strict=True))


def family_of(ledger: Ledger, relation: str) -> Family | str:
    """The ledger as a sampled-Gaussian family, or why it is not one.

    Examples
    --------
    >>> from dpverify.core.curator import Curator
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.ones((10, 1)), np.zeros(10)), rng=0)
    >>> for _ in range(3):
    ...     b = cur.sample("poisson", rate=0.1)
    ...     _ = cur.gaussian("g", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=2.0,
    ...                      batch=b)
    >>> f = family_of(cur.ledger, "add_remove")
    >>> f.q.tolist(), f.mu.tolist(), f.count.tolist()
    ([0.1], [0.5], [3])
    """
    if relation != "add_remove":
        return "the parametric family is the add/remove one (a record in or out)"
    rows = []
    for rel in ledger:
        if rel.mechanism != "gaussian" or rel.sampling not in ("poisson", "full"):
            return (f"release {rel.name!r} is a {rel.sampling} {rel.mechanism} release, "
                    "not a Poisson-sampled or full-batch Gaussian")
        if not rel.sensitivity:
            continue
        if not rel.noise > 0:
            return f"release {rel.name!r} adds no noise"
        rows.append((float(rel.rate) if rel.sampling == "poisson" else 1.0,
                     float(rel.sensitivity) / float(rel.noise)))
    if not rows:
        return "no release depends on the data"
    kinds, count = np.unique(np.array(rows), axis=0, return_counts=True)
    return Family(kinds[:, 0], kinds[:, 1], count)


def loss_cumulants(q: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Mean, variance and 4th cumulant of one release's loss, in and out: shape (..., 2, 3).

    Index 0 of the second axis is the world holding the canary (x from the mixture), 1
    the world without it (x ~ N(0, 1)); Gauss-Hermite quadrature with 96 nodes.

    Examples
    --------
    >>> c = loss_cumulants(np.array([1.0]), np.array([0.5]))  # unsampled: N(+-mu^2/2, mu^2)
    >>> np.round(c[0], 6).tolist()
    [[0.125, 0.25, 0.0], [-0.125, 0.25, 0.0]]
    """
    q = np.asarray(q, dtype=float)[..., None]
    mu = np.asarray(mu, dtype=float)[..., None]
    x = math.sqrt(2.0) * _NODES
    w = _WEIGHTS / math.sqrt(math.pi)
    with np.errstate(divide="ignore"):
        lq, l1q = np.log(q), np.log1p(-q)

    def loss(z: np.ndarray) -> np.ndarray:
        return np.logaddexp(l1q, lq + mu * z - 0.5 * mu * mu)

    def raw(z: np.ndarray) -> list[np.ndarray]:
        v = loss(z)
        return [np.sum(w * v**k, axis=-1) for k in (1, 2, 3, 4)]

    out0, in1 = raw(x), raw(x + mu)  # x ~ N(0, 1) and x ~ N(mu, 1)
    inside = [(1.0 - q[..., 0]) * a + q[..., 0] * b for a, b in zip(out0, in1, strict=True)]
    return np.stack([_cumulants(inside), _cumulants(out0)], axis=-2)


def _cumulants(m: list[np.ndarray]) -> np.ndarray:
    m1, m2, m3, m4 = m
    var = np.maximum(m2 - m1 * m1, 0.0)
    c4 = m4 - 4 * m3 * m1 + 6 * m2 * m1**2 - 3 * m1**4  # 4th central moment
    return np.stack([m1, var, c4 - 3 * var * var], axis=-1)


def transcript_cumulants(family: Family, kappa: float) -> np.ndarray:
    """Cumulants of the transcript's loss (sums over releases), shape (2, 3): in, out.

    Examples
    --------
    >>> fam = Family(np.array([1.0]), np.array([0.5]), np.array([4]))  # 1-GDP
    >>> np.round(transcript_cumulants(fam, 1.0), 6).tolist()
    [[0.5, 1.0, 0.0], [-0.5, 1.0, 0.0]]
    """
    c = loss_cumulants(family.q, kappa * family.mu)
    return np.tensordot(family.count, c, axes=1)


def _statistics(LD: np.ndarray, LDp: np.ndarray, canary_in_D: bool
                ) -> tuple[np.ndarray, np.ndarray, int]:
    """(mean difference, pooled variance), their empirical standard errors, and n."""
    a, b = (LD, LDp) if canary_in_D else (-LDp, -LD)  # a: losses in the canary's world
    n = min(a.size, b.size)
    s_mean = a.mean() - b.mean()
    va, vb = a.var(ddof=1), b.var(ddof=1)

    def var_of_variance(v: np.ndarray, k: float) -> float:
        c4 = float(np.mean((v - v.mean()) ** 4)) - 3.0 * k * k
        return c4 / v.size + 2.0 * k * k / (v.size - 1)

    se = np.array([math.sqrt(va / a.size + vb / b.size),
                   0.5 * math.sqrt(max(var_of_variance(a, va) + var_of_variance(b, vb), 0.0))])
    return np.array([s_mean, 0.5 * (va + vb)]), se, n


def _model(family: Family, kappa: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Expected statistics at ``kappa`` and their standard errors with n runs per world."""
    (m_in, v_in, k_in), (m_out, v_out, k_out) = transcript_cumulants(family, kappa)
    expect = np.array([m_in - m_out, 0.5 * (v_in + v_out)])
    var_var = (k_in / n + 2 * v_in**2 / (n - 1) + k_out / n + 2 * v_out**2 / (n - 1)) / 4.0
    se = np.array([math.sqrt((v_in + v_out) / n), math.sqrt(max(var_var, 0.0))])
    return expect, se


def kappa_lower_bound(LD: np.ndarray, LDp: np.ndarray, family: Family, *, canary_in_D: bool,
                      alpha: float) -> tuple[float, str]:
    """Lower confidence bound on kappa from replayed losses, and the statistic that gave it.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> fam = Family(np.array([1.0]), np.array([0.2]), np.array([25]))
    >>> mu = 1.0  # 25 unsampled releases of mu 0.2: the transcript is 1-GDP
    >>> LD, LDp = rng.normal(0.5, 1, 5000), rng.normal(-0.5, 1, 5000)
    >>> k, how = kappa_lower_bound(LD, LDp, fam, canary_in_D=True, alpha=0.05)
    >>> 0.95 < k < 1.0, how
    (True, 'spread')
    """
    LD, LDp = np.asarray(LD, dtype=float), np.asarray(LDp, dtype=float)
    if LD.size < 3 or LDp.size < 3 or not (np.isfinite(LD).all() and np.isfinite(LDp).all()):
        return 0.0, "none"
    stat, se_emp, n = _statistics(LD, LDp, canary_in_D)
    z = float(sstats.norm.isf(alpha / 2.0))
    best, how = 0.0, "none"
    for i, name in enumerate(("mean", "spread")):
        def excess(kappa: float, i: int = i) -> float:  # > 0 while kappa is rejected
            expect, se = _model(family, kappa, n)
            return float(stat[i] - expect[i] - z * max(se[i], se_emp[i]))

        if excess(0.0) <= 0:
            continue
        hi = 1.0
        while excess(hi) > 0 and hi < KAPPA_MAX:
            hi *= 2.0
        k = KAPPA_MAX if excess(hi) > 0 else float(optimize.brentq(excess, 0.0, hi,
                                                                   xtol=1e-6))
        if k > best:
            best, how = k, name
    return best, how


def bound_runs(family: Family | str, runs: Sequence[Mapping[str, Any]], *, alpha: float,
               delta: float) -> dict[str, Any] | str:
    """The family's epsilon bound from each pair's replayed losses, or why there is none.

    ``runs`` hold ``loss_D``, ``loss_D_prime`` (log p_D / p_D' on runs on D and on D'),
    ``canary_in_D`` and ``label``, one per neighbouring pair; the best pair's kappa bound is
    kept, each made at ``alpha`` / (number of pairs) (Bonferroni). Only the losses are read:
    each release's loss is a function of its value along the canary's direction, so
    replay records reduced to the plane of the worlds' difference serve as well as full
    ones.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> fam = Family(np.array([1.0]), np.array([0.2]), np.array([25]))  # 1-GDP
    >>> run = {"loss_D": rng.normal(0.5, 1, 4000), "loss_D_prime": rng.normal(-0.5, 1, 4000),
    ...        "canary_in_D": True, "label": "canary"}
    >>> b = bound_runs(fam, [run], alpha=0.05, delta=1e-5)
    >>> b["pair"], 0.9 < b["epsilon"] / 4.377 < 1.0
    ('canary', True)
    >>> bound_runs("no release depends on the data", [run], alpha=0.05, delta=1e-5)
    'no release depends on the data'
    """
    if isinstance(family, str):
        return family
    if delta <= 0:
        return "a Gaussian family has no finite pure-DP epsilon"
    best: dict[str, Any] | None = None
    for r in runs:
        k, how = kappa_lower_bound(r["loss_D"], r["loss_D_prime"], family,
                                   canary_in_D=bool(r["canary_in_D"]), alpha=alpha / len(runs))
        if best is None or k > best["kappa_lower"]:
            best = {"kappa_lower": k, "statistic": how, "pair": r["label"]}
    if best is None:
        return "no replayed runs"
    best["epsilon"] = family_epsilon(family, best["kappa_lower"], delta)
    best["family"] = family
    return best


def family_epsilon(family: Family, kappa: float, delta: float, *,
                   discretization: float | None = None) -> float:
    """The family's epsilon at ``kappa``: a lower estimate, as a lower bound needs.

    The composition of each kind's Poisson-sampled Gaussian (noise multiplier
    1 / (kappa mu)) by dp_accounting's PLD under add/remove, as the accountant composes the
    ledger, but rounded down (privacy buckets with ``pessimistic_estimate=False``): the
    accountant's rounding up would lift a lower bound. The grid is 1e-3 where epsilon is
    5 or more (a relative error below 1e-3) and 1e-4 below. Unsampled releases alone
    compose exactly as GDP (Dong, Roth, Su 2019, Corollary 3.3).

    Examples
    --------
    >>> fam = Family(np.array([1.0]), np.array([0.5]), np.array([4]))
    >>> round(family_epsilon(fam, 1.0, 1e-5), 3)  # 4 releases of mu 0.5: 1-GDP
    4.377
    """
    if discretization is not None:
        return _family_epsilon(family.key(), float(kappa), float(delta), discretization)
    coarse = _family_epsilon(family.key(), float(kappa), float(delta), 1e-3)
    if coarse >= 5.0:
        return coarse
    return _family_epsilon(family.key(), float(kappa), float(delta), 1e-4)


@functools.lru_cache(maxsize=512)
def _family_epsilon(key: tuple[tuple[float, float, int], ...], kappa: float, delta: float,
                    discretization: float) -> float:
    if kappa <= 0:
        return 0.0
    if all(q >= 1.0 for q, _, _ in key):
        mu = kappa * math.sqrt(sum(c * m * m for _, m, c in key))
        return stats.epsilon_from_gdp(mu, delta)
    total = None
    for q, mu, count in key:
        one = pld_lib.from_gaussian_mechanism(
            1.0 / (kappa * mu), sensitivity=1.0, pessimistic_estimate=False,
            value_discretization_interval=discretization, sampling_prob=min(q, 1.0),
            use_connect_dots=False)
        one = one.self_compose(count) if count > 1 else one
        total = one if total is None else total.compose(one)
    assert total is not None
    return max(float(total.get_epsilon_for_delta(delta)), 0.0)


@functools.lru_cache(maxsize=64)
def _kappa_for_epsilon(key: tuple[tuple[float, float, int], ...], epsilon: float,
                       delta: float) -> float:
    fam = Family(*(np.array(col) for col in zip(*key, strict=True)))

    def f(k: float, disc: float | None = None) -> float:
        return family_epsilon(fam, k, delta, discretization=disc) - epsilon

    lo, hi = 0.9, 1.1  # bracket on the coarse grid (it reads low: the root lies below)
    while f(lo, 1e-3) > 0 and lo > 1e-3:
        lo /= 2.0
    while f(hi, 1e-3) < 0 and hi < KAPPA_MAX:
        hi *= 2.0
    k1 = float(optimize.brentq(lambda k: f(k, 1e-3), lo, hi, xtol=1e-3))
    lo = 0.9 * k1
    while f(lo) > 0 and lo > 1e-3:
        lo *= 0.9
    return float(optimize.brentq(f, lo, k1 * 1.001, xtol=1e-3))


def kappa_for_epsilon(family: Family, epsilon: float, delta: float) -> float:
    """The kappa at which the family's epsilon equals ``epsilon`` (the claim's kappa).

    Examples
    --------
    >>> fam = Family(np.array([1.0]), np.array([0.5]), np.array([4]))
    >>> round(kappa_for_epsilon(fam, 4.377, 1e-5), 3)
    1.0
    """
    return _kappa_for_epsilon(family.key(), float(epsilon), float(delta))


def parametric_power(family: Family, n: int, *, alpha: float, delta: float,
                     epsilon: float, probability: float = DETECT_PROBABILITY) -> Power:
    """Detectable epsilon of the parametric bound with n runs per world (normal approx).

    A member of the family at kappa is caught when either statistic's bound exceeds the
    claim's kappa_c; the larger of the two detection probabilities (a lower bound on the
    chance that one of them does) is set to ``probability``.

    Examples
    --------
    >>> fam = Family(np.array([1.0]), np.array([0.2]), np.array([25]))  # 1-GDP: eps 4.377
    >>> p = parametric_power(fam, 2000, alpha=0.05, delta=1e-5, epsilon=4.377)
    >>> p.reference, 4.377 < p.epsilon < 5.0
    ('family', True)
    """
    return _parametric_power(family.key(), int(n), float(alpha), float(delta), float(epsilon),
                             float(probability))


@functools.lru_cache(maxsize=64)
def _parametric_power(key: tuple[tuple[float, float, int], ...], n: int, alpha: float,
                      delta: float, epsilon: float, probability: float) -> Power:
    family = Family(*(np.array(col) for col in zip(*key, strict=True)))
    k_c = kappa_for_epsilon(family, epsilon, delta)
    z = float(sstats.norm.isf(alpha / 2.0))
    e_c, se_c = _model(family, k_c, n)

    def power(kappa: float) -> float:
        e, se = _model(family, kappa, n)
        cut = e_c + z * np.maximum(se_c, se)
        return float(np.max(sstats.norm.sf((cut - e) / np.maximum(se, 1e-300))))

    kappa = smallest_detected(power, probability, max(k_c, 1e-3), KAPPA_MAX)
    eps = family_epsilon(family, kappa, delta) if math.isfinite(kappa) else math.inf
    return Power(eps, probability, "family", kappa, "parametric",
                 f"Poisson-sampled Gaussian family, kappa_claim {k_c:.4g}")
