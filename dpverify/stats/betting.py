"""Anytime-valid evidence against an (epsilon, delta) claim: a betting e-process.

Every (epsilon, delta)-DP mechanism keeps every test inside the region
FPR + e^eps FNR >= 1 - delta, in both orientations (Kairouz, Oh, Viswanath 2015,
Theorem 2.1). Pair the i-th run on D with the i-th run on D' and let

    Z_i = FP_i + e^eps FN_i        (or FN_i + e^eps FP_i, the other orientation)

where FP_i = 1 when the test calls the run on D' "D" and FN_i = 1 when it calls the run
on D "D'". If the test applied to pair i was fixed before pair i was drawn, the claim
gives E[Z_i | past] >= c = 1 - delta, and the wealth of a bettor who stakes a fraction
lambda_i in [0, 1/(z_max - c)], also fixed beforehand, on Z_i falling below c,

    K_t = prod_{i <= t} (1 + lambda_i (c - Z_i)),

is a nonnegative supermartingale with K_0 = 1 under the claim ("testing by betting":
Waudby-Smith and Ramdas 2023, JRSS-B, Section 4, eq. (4.2); Shafer 2021). By Ville's
inequality P[sup_t K_t >= 1/alpha] <= alpha, so the claim may be rejected the first time
the wealth reaches 1/alpha, however the sampling is stopped or continued. An average of
such processes (several stakes) is one too (a mixture, their Section 4.3), and so is the
product of their factors over rounds whose tests change, each chosen on earlier runs
only. The same holds for every epsilon at once, one process per epsilon on a grid: the
claims "eps-DP" for eps >= the true epsilon are all true, so reporting the largest grid
point below which every process has reached 1/alpha is a lower bound on epsilon that
holds with probability 1 - alpha at any stopping time (only the process at the first
grid point above the true epsilon needs to stay below 1/alpha).

The stake is chosen by Kelly's criterion (the largest expected log-growth, Waudby-Smith
and Ramdas 2023, Section 5.2, "GRAPA") on pessimistic error rates from earlier runs, at
fractions of it that the mixture averages over.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpverify.stats import audit_bounds as stats
from dpverify.stats import power as power_mod
from dpverify.stats.power import DETECT_PROBABILITY, Power, reference_for, smallest_detected
from dpverify.stats.power import gdp_mu_for_epsilon as _mu_for

# Stakes are at most this fraction of the largest one, so no pair costs over half the wealth.
STAKE_CAP = 0.5
# Fractions of the Kelly stake averaged by the mixture.
STAKE_SCALES = (0.25, 0.5, 1.0)
_KELLY_STEPS = 32
# Confidence of the pessimistic error rates a bet is planned on: 80% upper bounds keep
# thresholds whose tail counts are zero by luck out, without the timidity of stricter ones
# (tuned on Gaussian pairs: 99% bounds waited twice as long to bet on a violation).
BET_LEVEL = 0.2
# Sample sizes up to which CP bounds of counts are tabulated.
_TABLE_MAX = 20000
# Monte Carlo replicates behind a detection probability, and their seed.
POWER_REPLICATES = 4000
POWER_SEED = 20230813
# The simulated e-process: runs per parameter, and the largest selection sample per world.
SIM_REPLICATES = 64
SIM_SELECTION = 10000


def cell_values(epsilon: float, delta: float) -> tuple[np.ndarray, float]:
    """c - Z for the four outcomes of a pair (no error, FP only, FN only, both), and c.

    Orientation (i): Z = FP + e^eps FN.

    Examples
    --------
    >>> v, c = cell_values(0.0, 0.0)
    >>> v.tolist(), c
    ([1.0, 0.0, 0.0, -1.0], 1.0)
    """
    c = 1.0 - float(delta)
    E = math.exp(float(epsilon))
    return np.array([c, c - 1.0, c - E, c - 1.0 - E]), c


def cell_probabilities(fpr: Any, fnr: Any) -> np.ndarray:
    """Probabilities of the four outcomes of an independent pair, shape (..., 4).

    Examples
    --------
    >>> cell_probabilities(0.5, 0.5).tolist()
    [0.25, 0.25, 0.25, 0.25]
    """
    a = np.asarray(fpr, dtype=float)[..., None]
    b = np.asarray(fnr, dtype=float)[..., None]
    return np.concatenate([(1 - a) * (1 - b), a * (1 - b), (1 - a) * b, a * b], axis=-1)


def kelly(probs: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stake maximizing E log(1 + lambda (c - Z)) and that expected log-growth.

    ``probs`` (..., 4) over the outcomes, ``values`` c - Z of shape (4,) or (G, 4) (one
    row per epsilon: the answers then gain a leading axis G). The stake lies in
    [0, STAKE_CAP / max(Z - c)]; the growth is concave in it, so its derivative is
    bisected, for every test whose growth rises from 0 at once.

    Examples
    --------
    >>> v, _ = cell_values(1.0, 1e-5)
    >>> lam, g = kelly(cell_probabilities(np.array([0.01, 0.5]), np.array([0.3, 0.5])), v)
    >>> bool(g[0] > 0 and lam[0] > 0), float(g[1]), float(lam[1])  # a coin: no bet
    (True, 0.0, 0.0)
    """
    p = np.asarray(probs, dtype=float)
    V = np.atleast_2d(np.asarray(values, dtype=float))
    P = p.reshape(-1, 4)
    lam, growth = np.zeros((V.shape[0], P.shape[0])), np.zeros((V.shape[0], P.shape[0]))
    gi, ni = np.nonzero(V @ P.T > 0)  # the slope at 0: only these are worth a stake
    if gi.size:
        pv, vv = P[ni], V[gi]
        lo, hi = np.zeros(gi.size), STAKE_CAP / -vv.min(axis=1)
        for _ in range(_KELLY_STEPS):
            mid = 0.5 * (lo + hi)
            up = np.sum(pv * vv / (1.0 + mid[:, None] * vv), axis=1) > 0
            lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
        lam[gi, ni] = lo
        growth[gi, ni] = np.sum(pv * np.log1p(lo[:, None] * vv), axis=1)
    shape = (V.shape[0], *p.shape[:-1]) if np.ndim(values) == 2 else p.shape[:-1]
    return lam.reshape(shape), growth.reshape(shape)


def log_wealth(counts: np.ndarray, stake: float, values: np.ndarray,
               scales: tuple[float, ...] = STAKE_SCALES) -> np.ndarray:
    """log of each mixture component's wealth factor over pairs with these outcome counts.

    Examples
    --------
    >>> v, _ = cell_values(0.0, 0.0)
    >>> log_wealth(np.array([3, 0, 0, 0]), 0.5, v, (1.0,)).round(4).tolist()  # 1.5^3
    [1.2164]
    """
    s = np.asarray(scales, dtype=float)[:, None]
    return np.sum(np.asarray(counts, float) * np.log1p(s * stake * values[None, :]), axis=1)


def mixture_log(log_components: np.ndarray) -> float:
    """log of the average wealth of the mixture components.

    Examples
    --------
    >>> round(mixture_log(np.log(np.array([1.0, 3.0]))), 6) == round(math.log(2.0), 6)
    True
    """
    lc = np.asarray(log_components, dtype=float)
    m = float(lc.max())
    return m + math.log(float(np.mean(np.exp(lc - m))))


def outcome_counts(says_D_on_D: np.ndarray, says_D_on_Dp: np.ndarray,
                   orientation: int) -> np.ndarray:
    """Counts of the four outcomes over pairs (i-th run on D, i-th run on D').

    Orientation 0 puts e^eps on the false negatives, 1 on the false positives.

    Examples
    --------
    >>> outcome_counts(np.array([True, False, True]), np.array([False, False, True]), 0)
    array([1, 1, 1, 0])
    """
    fn = ~np.asarray(says_D_on_D, dtype=bool)
    fp = np.asarray(says_D_on_Dp, dtype=bool)
    if orientation == 1:
        fp, fn = fn, fp
    return np.array([np.sum(~fp & ~fn), np.sum(fp & ~fn), np.sum(~fp & fn), np.sum(fp & fn)])


@dataclass
class Bet:
    """One round's bet at one epsilon: the test, its orientation and stake, and why."""

    candidate: int
    threshold: float
    orientation: int
    stake: float
    growth: float


@dataclass
class Menu:
    """Every test the earlier runs offer: candidate, threshold, pessimistic FPR and FNR."""

    candidate: np.ndarray
    threshold: np.ndarray
    fpr: np.ndarray
    fnr: np.ndarray


def bet_menu(select_pos: list[np.ndarray], select_neg: list[np.ndarray], *,
              level: float = BET_LEVEL) -> Menu:
    """Thresholds of every candidate's score, with error rates bounded pessimistically.

    Each candidate's scores on D (``select_pos``) and D' (``select_neg``) give, for every
    threshold, the event "score >= threshold" (a reversed score gives the other tail).
    Error rates are replaced by their Clopper-Pearson upper bounds at ``level``: ranking
    by point estimates would chase thresholds whose tail counts are zero by luck.

    Examples
    --------
    >>> m = bet_menu([np.arange(10.0)], [np.arange(10.0) - 5])
    >>> bool(m.fpr.min() > 0 and m.fnr.min() > 0), set(m.candidate.tolist())
    (True, {0})
    """
    parts = []
    for ci, (pos, neg) in enumerate(zip(select_pos, select_neg, strict=True)):
        th = stats.candidate_thresholds(pos, neg)
        sp, sn = np.sort(pos), np.sort(neg)
        fpr = _upper(stats.tail_counts(sn, th), sn.size, level)
        fnr = _upper(sp.size - stats.tail_counts(sp, th), sp.size, level)
        parts.append((np.full(th.size, ci), th, fpr, fnr))
    return Menu(*(np.concatenate([p[i] for p in parts]) for i in range(4)))


def _upper(counts: np.ndarray, n: int, level: float) -> np.ndarray:
    """Clopper-Pearson upper bounds of counts out of n (tabulated for small n)."""
    if n <= _TABLE_MAX:
        return _upper_table(int(n), float(level))[counts]
    return stats.clopper_pearson(counts, max(n, 1), level)


@functools.lru_cache(maxsize=64)
def _upper_table(n: int, level: float) -> np.ndarray:
    return stats.clopper_pearson(np.arange(n + 1), max(n, 1), level)


def plan_bets(menu: Menu, epsilons: np.ndarray, delta: float) -> list[Bet | None]:
    """For each epsilon, the test and orientation of largest anticipated log-growth.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> menu = bet_menu([rng.normal(2, 1, 4000)], [rng.normal(0, 1, 4000)])
    >>> bets = plan_bets(menu, np.array([1.0, 50.0]), 1e-5)
    >>> bets[0].growth > 0 and bets[0].stake > 0, bets[1]  # nothing refutes eps = 50
    (True, None)
    """
    probs = np.concatenate([cell_probabilities(menu.fpr, menu.fnr),
                            cell_probabilities(menu.fnr, menu.fpr)])
    values = np.stack([cell_values(float(e), delta)[0] for e in np.atleast_1d(epsilons)])
    lam, g = kelly(probs, values)
    out: list[Bet | None] = []
    for row_lam, row_g in zip(lam, g, strict=True):
        j = int(np.argmax(row_g))
        if row_g[j] <= 0:
            out.append(None)
            continue
        k = j % menu.threshold.size
        out.append(Bet(int(menu.candidate[k]), float(menu.threshold[k]),
                       j // menu.threshold.size, float(row_lam[j]), float(row_g[j])))
    return out


def betting_power(pairs: int, *, alpha: float, delta: float, epsilon: float,
                  probability: float = DETECT_PROBABILITY) -> Power:
    """Detectable epsilon of the e-process after ``pairs`` bet pairs (Monte Carlo).

    The reference mechanism (:func:`dpverify.stats.power.reference_for`) is met with its
    best test and Kelly stake fixed for all ``pairs`` (the test the rounds learn, known
    from the start), the mixture of :data:`STAKE_SCALES` as bet, and the chance that the
    final wealth reaches 1/alpha estimated from :data:`POWER_REPLICATES` multinomial draws
    with a fixed seed.

    Examples
    --------
    >>> p = betting_power(20000, alpha=0.05, delta=1e-5, epsilon=1.0)
    >>> p.method, 1.5 < p.epsilon < 2.6
    ('betting', True)
    """
    ref = reference_for(delta)
    values, _ = cell_values(epsilon, delta)
    target = math.log(1.0 / alpha)

    def power(theta: float) -> float:
        fpr, fnr = ref.rates(theta)
        probs = np.concatenate([cell_probabilities(fpr, fnr), cell_probabilities(fnr, fpr)])
        lam, g = kelly(probs, values)
        j = int(np.argmax(g))
        if g[j] <= 0:
            return 0.0
        rng = np.random.default_rng(POWER_SEED)
        counts = rng.multinomial(int(pairs), probs[j], size=POWER_REPLICATES)
        s = np.asarray(STAKE_SCALES)[:, None]
        logs = counts @ np.log1p(s * lam[j] * values[None, :]).T  # (replicates, scales)
        m = logs.max(axis=1)
        mix = m + np.log(np.mean(np.exp(logs - m[:, None]), axis=1))
        return float(np.mean(mix >= target))

    start = _mu_for(epsilon, delta) if ref.name == "gaussian" else epsilon
    cap = 30.0 if ref.name == "gaussian" else 50.0 * epsilon + 50.0
    theta = smallest_detected(power, probability, max(start, 1e-3), cap)
    eps = ref.epsilon(theta, delta) if math.isfinite(theta) else math.inf
    return Power(float(eps), probability, ref.name, theta, "betting",
                 f"e-process after {int(pairs)} pairs, Monte Carlo ({POWER_REPLICATES} draws)")


def sequential_power(looks: Sequence[int], *, alpha: float, delta: float, epsilon: float,
                     probability: float = DETECT_PROBABILITY, upto: int | None = None,
                     replicates: int = SIM_REPLICATES) -> Power:
    """Detectable epsilon of the black-box e-process by look ``upto`` (default: the last).

    The rounds of :func:`dpverify.checks.audit.sequential.audit_sequential_blackbox` are
    simulated on the reference mechanism (:func:`detection_rates`); the smallest parameter
    whose rejection rate by that look reaches ``probability`` is found by bisection
    (common random numbers keep the rate monotone enough to bisect).

    Examples
    --------
    >>> p = sequential_power([2000, 4000, 8000, 16000, 32000], alpha=0.05, delta=1e-5,
    ...                      epsilon=1.0)
    >>> p.method, 1.5 < p.epsilon < 3.5
    ('betting', True)
    """
    k = len(looks) - 1 if upto is None else int(upto)
    return _sequential_power(tuple(int(x) for x in looks[:k + 1]), float(alpha),
                             float(delta), float(epsilon), float(probability), replicates)


@functools.lru_cache(maxsize=32)
def _sequential_power(looks: tuple[int, ...], alpha: float, delta: float, epsilon: float,
                      probability: float, replicates: int) -> Power:
    ref = reference_for(delta)
    k = len(looks) - 1
    if k < 1:
        return Power(math.inf, probability, ref.name, None, "betting", "no bet yet")
    sim = Simulation(ref, list(looks), alpha, delta, epsilon, replicates)
    start = _mu_for(epsilon, delta) if ref.name == "gaussian" else epsilon
    theta = smallest_detected(lambda t: float(sim.rejected_by_look(t)[k]), probability,
                              max(start, 1e-3), 30.0 if ref.name == "gaussian" else
                              50.0 * epsilon + 50.0, rtol=1e-2)
    eps = ref.epsilon(theta, delta) if math.isfinite(theta) else math.inf
    return Power(float(eps), probability, ref.name, theta, "betting",
                 f"e-process simulated ({replicates} runs) up to {looks[k]} trials")


def detection_rates(looks: Sequence[int], epsilon_true: float, *, alpha: float, delta: float,
                    epsilon: float, replicates: int = SIM_REPLICATES) -> np.ndarray:
    """P[the e-process rejects the claim ``epsilon`` by each look] when the reference
    mechanism has epsilon ``epsilon_true`` (simulated, see :class:`Simulation`).

    Examples
    --------
    >>> r = detection_rates([2000, 4000, 8000, 16000], 4.0, alpha=0.05, delta=1e-5,
    ...                     epsilon=1.0)
    >>> float(r[0]), bool(r[-1] > 0.9)
    (0.0, True)
    """
    return _detection_rates(tuple(int(x) for x in looks), float(epsilon_true), float(alpha),
                            float(delta), float(epsilon), replicates).copy()


@functools.lru_cache(maxsize=32)
def _detection_rates(looks: tuple[int, ...], epsilon_true: float, alpha: float,
                     delta: float, epsilon: float, replicates: int) -> np.ndarray:
    ref = reference_for(delta)
    theta = (power_mod.gdp_mu_for_epsilon(epsilon_true, delta) if ref.name == "gaussian"
             else epsilon_true)
    return Simulation(ref, list(looks), alpha, delta, epsilon, replicates).rejected_by_look(
        theta)


class Simulation:
    """The black-box e-process run on the reference mechanism's likelihood-ratio score.

    No bet in the first round; at each later one a bet planned (:func:`bet_menu`,
    :func:`plan_bets`) on a selection sample as large as half the runs so far (at most
    :data:`SIM_SELECTION` per world, which only makes the bets worse), settled on the
    round's runs (their outcome counts drawn from the four-cell multinomial), and the
    claim rejected once the mixture's wealth reaches 1/alpha; ``replicates`` runs with
    common random numbers for every parameter. The distinguisher is taken as known, so
    where it must be learnt from the outputs the power is lower.

    Examples
    --------
    >>> from dpverify.stats.power import GAUSSIAN
    >>> sim = Simulation(GAUSSIAN, [1000, 2000, 4000], 0.05, 1e-5, 1.0, 8)
    >>> sim.rejected_by_look(2.0).tolist()  # mu = 2: caught at the first bet
    [0.0, 1.0, 1.0]
    """

    def __init__(self, ref: Any, looks: list[int], alpha: float, delta: float,
                 epsilon: float, replicates: int) -> None:
        self.ref, self.looks, self.delta, self.epsilon = ref, looks, delta, epsilon
        self.target = math.log(1.0 / alpha)
        self.values, _ = cell_values(epsilon, delta)
        rng = np.random.default_rng(POWER_SEED)
        draw = rng.standard_normal if ref.noise == "normal" else rng.laplace
        self.z = [np.sort(draw(size=(2, replicates, min(looks[k - 1] // 2, SIM_SELECTION))),
                          axis=2) for k in range(1, len(looks))]
        self.replicates = replicates

    def rejected_by_look(self, theta: float) -> np.ndarray:
        """P[the claim is rejected by look k], for every look."""
        R = self.replicates
        rng = np.random.default_rng(POWER_SEED + 1)
        logw = np.zeros((R, len(STAKE_SCALES)))
        first = np.full(R, len(self.looks))
        for k in range(1, len(self.looks)):
            chunk = self.looks[k] - self.looks[k - 1]
            zp, zn = self.z[k - 1]
            for r in range(R):
                counts, stake = self._round(theta, zp[r], zn[r], chunk, rng)
                if counts is not None:
                    logw[r] += log_wealth(counts, stake, self.values)
            mix = np.array([mixture_log(row) for row in logw])
            first = np.where((mix >= self.target) & (first > k), k, first)
        return np.array([np.mean(first <= k) for k in range(len(self.looks))])

    def _round(self, theta: float, zp: np.ndarray, zn: np.ndarray, chunk: int,
               rng: np.random.Generator) -> tuple[np.ndarray | None, float]:
        pos, neg = self.ref.scores(theta, zp, zn)
        parts = []
        # The score and its reverse, as the audit offers both (sorted: negate and flip).
        for ci, (p, n) in enumerate(((pos, neg), (-pos[::-1], -neg[::-1]))):
            th = power_mod.sorted_thresholds(p, n)
            parts.append((np.full(th.size, ci), th,
                          _upper(stats.tail_counts(n, th), n.size, BET_LEVEL),
                          _upper(p.size - stats.tail_counts(p, th), p.size, BET_LEVEL)))
        menu = Menu(*(np.concatenate([q[i] for q in parts]) for i in range(4)))
        bet = plan_bets(menu, np.array([self.epsilon]), self.delta)[0]
        if bet is None:
            return None, 0.0
        sign = 1.0 if bet.candidate == 0 else -1.0
        a, b = (float(v[0]) for v in self.ref.rates(theta, np.array([sign * bet.threshold])))
        if sign < 0:  # the event "score <= -t": complements (continuous scores)
            a, b = 1.0 - a, 1.0 - b
        if bet.orientation == 1:
            a, b = b, a
        return rng.multinomial(chunk, cell_probabilities(a, b)), bet.stake
