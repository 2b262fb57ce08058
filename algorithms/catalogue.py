"""The classic catalogue of DP mechanisms that mechanism testers are measured on.

Written from the papers' descriptions (not from any tester's code), as black-box targets
``f(answers, rng, trials) -> array (trials, ...)`` whose input is a vector of query
answers of sensitivity 1: the StatDP and DP-Sniper benchmark (Ding et al., CCS 2018;
Bichsel et al., IEEE S&P 2021) at epsilon = 0.1, and the rest of DP-Sniper's evaluation
(RAPPOR and one-time RAPPOR on a value, twenty Laplace releases, SVT3 and SVT4 side by
side, prefix sums, numerical SVT) at their papers' claims, with DP-Sniper's parameters.
Each carries its claim, the epsilon known from analysis (``epsilon_true``, ``None`` where
only "at most the claim" is known) and the neighbouring relation of its input
(:mod:`dpverify.core.data`, "Vectors of query answers"), so that ``dpverify audit
algorithms.catalogue:svt4`` searches the input patterns and judges the claim with no other
argument. ``suites/mechanisms.toml`` audits them all.

Ideal-arithmetic rows sample float-safe noise wherever a noisy value is released: a value
plus ``numpy``'s Laplace noise is itself a floating-point leak (the sum is rounded to a
grid set by the value's binade, so the last bits of an output tell values apart; Mironov
2012), which the ``lowbits`` distinguisher proves far beyond the claim, so the true
epsilon of ``laplace_naive_float`` is infinite and every row whose ``epsilon_true`` is an
ideal-arithmetic figure (RNM3's 0.25, the histograms') draws its noise with
:func:`discrete_laplace` or :func:`discrete_exponential` on a fine dyadic grid, where the
sum of a count and the noise is exact. Rows that release only comparisons (indices,
above/below) use ``numpy``'s samplers: nothing of the noise's last bits reaches the
output.

Sparse-vector outputs code each query as 1 (above the threshold), 0 (below) or -1 (not
answered: the run stopped after ``c`` answers above); SVT3 releases the noisy answer
instead of 1 and codes "below" as -1000 and "not answered" as -2000.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import numpy as np

from dpverify.checks.audit.targets import declare_mechanism

EPSILON = 0.1
# Dyadic grid of the float-safe Laplace noise: far below the noise scale (1/epsilon), and
# coarse enough that count + grid * k is exact in float64 for any count below 2^40.
GRID = 2.0**-10
SVT_QUERIES, SVT_C, RNM_QUERIES, HIST_BINS, GEO_N = 10, 1, 5, 5, 5
LSL = "Lyu, Su and Li 2017 (PVLDB 10(6)), Algorithm {}; privacy as in their Figure 1"
BELOW, ABORTED = 0.0, -1.0
SVT3_BELOW, SVT3_ABORTED = -1000.0, -2000.0


def discrete_laplace(rng: np.random.Generator, scale: float, shape: tuple[int, ...],
                     grid: float = GRID) -> np.ndarray:
    """Laplace noise on the grid ``grid * Z``: P(k grid) proportional to exp(-|k| grid / scale).

    The difference of two geometric variables on {0, 1, ...} with ratio
    exp(-grid / scale) (the two-sided geometric distribution of Ghosh, Roughgarden and
    Sundararajan 2009, Definition 2.1, on a finer lattice). Shifting an integer answer by
    one moves the output by 1/grid lattice points, which changes every probability by a
    factor of at most exp(1 / scale): the Laplace mechanism's guarantee, with no rounding
    anywhere.

    Examples
    --------
    >>> z = discrete_laplace(np.random.default_rng(0), 10.0, (100000,))
    >>> bool(np.all(z / GRID == np.round(z / GRID))), round(float(np.mean(np.abs(z))), 1)
    (True, 10.0)
    """
    p = -math.expm1(-grid / scale)  # success probability of each geometric draw
    k = rng.geometric(p, size=shape) - rng.geometric(p, size=shape)
    return grid * k.astype(np.float64)


def _declared(epsilon: float, queries: int, relation: str, source: str,
              epsilon_true: float | None = None) -> Callable[[Callable[..., np.ndarray]],
                                                             Callable[..., np.ndarray]]:
    return declare_mechanism(epsilon=epsilon, delta=0.0, queries=queries, relation=relation,
                             epsilon_true=epsilon_true, source=source)


def _answers(answers: np.ndarray) -> np.ndarray:
    return np.asarray(answers, dtype=np.float64).reshape(1, -1)


# Laplace ------------------------------------------------------------------------------


@_declared(EPSILON, 1, "add_remove", "Dwork, McSherry, Nissim and Smith 2006; "
           "float-safe noise on a dyadic grid", EPSILON)
def laplace(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """The Laplace mechanism on one count, scale 1/epsilon, exact arithmetic."""
    return _answers(answers)[:, :1] + discrete_laplace(rng, 1.0 / EPSILON, (trials, 1))


@_declared(EPSILON, 1, "add_remove", "Mironov 2012 (CCS), Section 3: the textbook "
           "floating-point Laplace mechanism", math.inf)
def laplace_naive_float(answers: np.ndarray, rng: np.random.Generator,
                        trials: int) -> np.ndarray:
    """``answer + numpy.random.laplace(0, 1/epsilon)`` in float64: porous outputs."""
    return _answers(answers)[:, :1] + rng.laplace(0.0, 1.0 / EPSILON, size=(trials, 1))


# Mironov 2012, Section 5.2: outputs clamped to [-B, B]; B bounds the answers too.
SNAP_B = 100.0


@_declared(EPSILON, 1, "add_remove", "Mironov 2012 (CCS), Section 5.2, Theorem 1: the "
           "snapping mechanism", None)
def laplace_snapped(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """Mironov's snapping mechanism: clamp, add S lambda ln U, round to Lambda, clamp.

    Theorem 1 of Mironov 2012: with lambda < B < 2^46 lambda and Lambda the smallest power
    of two at least lambda, the output is (1/lambda + 2^-49 B / lambda)-DP for a
    sensitivity-1 answer; lambda is chosen so that this is epsilon.
    """
    lam = (1.0 + SNAP_B * 2.0**-49) / EPSILON
    big = 2.0 ** math.ceil(math.log2(lam))
    a = np.clip(_answers(answers)[:, :1], -SNAP_B, SNAP_B)
    sign = rng.integers(0, 2, size=(trials, 1)) * 2.0 - 1.0
    u = 1.0 - rng.random(size=(trials, 1))  # uniform on (0, 1], in float64
    noisy = a + sign * lam * np.log(u)
    return np.clip(np.round(noisy / big) * big, -SNAP_B, SNAP_B)


# Truncated geometric ------------------------------------------------------------------

GEO_K = math.ceil(math.log(2.0 / EPSILON))  # Balcer and Vadhan: e^-eps rounded to 2^k/(2^k+1)
GEO_EPSILON = math.log1p(2.0**-GEO_K)  # ln(1 + 2^-k), their Theorem 4.7


@_declared(GEO_EPSILON, 1, "add_remove", "Balcer and Vadhan 2018, Algorithm 4.8 "
           "(GeoSample), Theorem 4.7", GEO_EPSILON)
def truncated_geometric(answers: np.ndarray, rng: np.random.Generator,
                        trials: int) -> np.ndarray:
    """The truncated geometric mechanism on a count in {0..n}, in integer arithmetic.

    With alpha = 2^k / (2^k + 1), P(Z <= z) = alpha^(c - z) / (1 + alpha) below the count
    c and 1 - alpha^(z - c + 1) / (1 + alpha) from it (Ghosh et al. 2009, the geometric
    mechanism truncated to {0..n}); Balcer and Vadhan scale this CDF by
    d = (2^(k+1) + 1)(2^k + 1)^(n-1) to integers and invert it at a uniform integer in
    {1..d}. Epsilon is ln(1 + 2^-k) (their Theorem 4.7).
    """
    c = int(np.clip(round(float(_answers(answers)[0, 0])), 0, GEO_N))
    two_k, k1 = 2**GEO_K, 2**GEO_K + 1
    d = (2 * two_k + 1) * k1 ** (GEO_N - 1)
    cdf = [two_k ** (c - z) * k1 ** (GEO_N - (c - z)) if z < c
           else d - two_k ** (z - c + 1) * k1 ** (GEO_N - 1 - (z - c)) for z in range(GEO_N)]
    u = rng.integers(1, d + 1, size=trials)
    z = np.searchsorted(np.asarray(cdf + [d], dtype=np.int64), u, side="left")
    return z.astype(np.float64).reshape(trials, 1)


# Noisy histograms ---------------------------------------------------------------------


@_declared(EPSILON, HIST_BINS, "add_remove", "Dwork, McSherry, Nissim and Smith 2006; "
           "NoisyHist1 of Ding et al. 2018", EPSILON)
def noisy_hist1(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """A histogram with Laplace noise of scale 1/epsilon on every bin (float-safe)."""
    a = _answers(answers)
    return a + discrete_laplace(rng, 1.0 / EPSILON, (trials, a.shape[1]))


@_declared(EPSILON, HIST_BINS, "add_remove", "NoisyHist2 of Ding et al. 2018: scale "
           "epsilon instead of 1/epsilon", 1.0 / EPSILON)
def noisy_hist2(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """The same histogram with noise of scale epsilon: (1/epsilon)-DP, not epsilon-DP."""
    a = _answers(answers)
    return a + discrete_laplace(rng, EPSILON, (trials, a.shape[1]))


# Report noisy max ---------------------------------------------------------------------

_RNM = "Ding, Wang, Wang, Zhang and Kifer 2018 (CCS), Algorithm {}"


def discrete_exponential(rng: np.random.Generator, scale: float, shape: tuple[int, ...],
                         grid: float = GRID) -> np.ndarray:
    """Exponential noise on the grid ``grid * N``: P(k grid) proportional to
    exp(-k grid / scale), a geometric variable on {0, 1, ...} (float-safe, as
    :func:`discrete_laplace`).

    Examples
    --------
    >>> z = discrete_exponential(np.random.default_rng(0), 10.0, (100000,))
    >>> float(z.min()), round(float(z.mean()), 1)
    (0.0, 10.0)
    """
    return grid * (rng.geometric(-math.expm1(-grid / scale), size=shape) - 1).astype(np.float64)


def _noisy(answers: np.ndarray, rng: np.random.Generator, trials: int, noise: str, *,
           exact: bool = False) -> np.ndarray:
    """Answers plus noise of scale 2/epsilon; ``exact`` draws it on the float-safe grid
    (for outputs that release the noisy values themselves)."""
    a = _answers(answers)
    shape, scale = (trials, a.shape[1]), 2.0 / EPSILON
    if exact:
        draw = discrete_laplace if noise == "laplace" else discrete_exponential
        return a + draw(rng, scale, shape)
    z = rng.laplace(0.0, scale, shape) if noise == "laplace" else rng.exponential(scale, shape)
    return a + z


@_declared(EPSILON, RNM_QUERIES, "componentwise", _RNM.format(5))
def rnm1(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """Report noisy max: the index of the largest answer plus Laplace(2/epsilon) noise."""
    return np.argmax(_noisy(answers, rng, trials, "laplace"), axis=1).astype(float)[:, None]


@_declared(EPSILON, RNM_QUERIES, "componentwise", _RNM.format(6))
def rnm2(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """Report noisy max with exponential noise of scale 2/epsilon (its index)."""
    return np.argmax(_noisy(answers, rng, trials, "exponential"), axis=1).astype(float)[:, None]


@_declared(EPSILON, RNM_QUERIES, "componentwise", _RNM.format(7) + ": the noisy maximum "
           "itself released", RNM_QUERIES * EPSILON / 2)
def rnm3(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """The largest noisy answer released instead of its index (Laplace noise).

    The maximum of k values each moved by one has a density ratio up to e^(k/b) in its
    lower tail (b = 2/epsilon): (k epsilon / 2)-DP, 0.25 for k = 5.
    """
    return np.max(_noisy(answers, rng, trials, "laplace", exact=True), axis=1)[:, None]


@_declared(EPSILON, RNM_QUERIES, "componentwise", _RNM.format(8) + ": the noisy maximum "
           "itself released", math.inf)
def rnm4(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """The largest noisy answer released (exponential noise): it never falls below the
    largest answer, so a value between the two inputs' largest answers rules one out."""
    return np.max(_noisy(answers, rng, trials, "exponential", exact=True), axis=1)[:, None]


# Sparse vector technique (Lyu, Su and Li 2017) -----------------------------------------


def _above_threshold(noisy: np.ndarray, rho: np.ndarray, threshold: float) -> np.ndarray:
    return noisy >= threshold + rho


def _cut_after(above: np.ndarray, values: np.ndarray, below: float,
               aborted: float, c: int = SVT_C) -> np.ndarray:
    """Outputs up to the c-th answer above; later queries are not answered."""
    count = np.cumsum(above, axis=1)
    stopped = np.zeros_like(above)
    stopped[:, 1:] = count[:, :-1] >= c
    return np.where(stopped, aborted, np.where(above, values, below))


def _svt(answers: np.ndarray, rng: np.random.Generator, trials: int, *, eps1_share: float,
         query_scale: float | None, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Noisy answers and the "above" flags of one pass with one noisy threshold."""
    a = _answers(answers)
    eps1 = eps1_share * EPSILON
    rho = rng.laplace(0.0, 1.0 / eps1, size=(trials, 1))
    shape = (trials, a.shape[1])
    # The answers' noise on the float-safe grid: SVT3 releases the noisy answers.
    noisy = a + (discrete_laplace(rng, query_scale, shape) if query_scale else 0.0)
    return noisy, _above_threshold(noisy, rho, threshold)


def _eps2(eps1_share: float) -> float:
    return (1.0 - eps1_share) * EPSILON


@_declared(EPSILON, SVT_QUERIES, "componentwise", LSL.format(1))
def svt1(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """SVT as Lyu et al. propose: rho ~ Lap(1/eps1), nu ~ Lap(2c/eps2), stop after c."""
    noisy, above = _svt(answers, rng, trials, eps1_share=0.5,
                        query_scale=2 * SVT_C / _eps2(0.5), threshold=0.5)
    return _cut_after(above, np.ones_like(noisy), BELOW, ABORTED)


@_declared(EPSILON, SVT_QUERIES, "componentwise", LSL.format(2))
def svt2(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """Dwork and Roth's SVT: rho ~ Lap(c/eps1) drawn afresh after every answer above."""
    a = _answers(answers)
    eps1, eps2 = 0.5 * EPSILON, _eps2(0.5)
    out = np.full((trials, a.shape[1]), ABORTED)
    rho = rng.laplace(0.0, SVT_C / eps1, size=trials)
    count = np.zeros(trials, dtype=int)
    for i in range(a.shape[1]):
        live = count < SVT_C
        above = a[0, i] + rng.laplace(0.0, 2 * SVT_C / eps2, size=trials) >= 1.0 + rho
        out[:, i] = np.where(live, np.where(above, 1.0, BELOW), ABORTED)
        fresh = rng.laplace(0.0, SVT_C / eps1, size=trials)
        rho = np.where(live & above, fresh, rho)
        count += live & above
    return out


@_declared(EPSILON, SVT_QUERIES, "componentwise", LSL.format(3) + ": the noisy answer "
           "released above the threshold", math.inf)
def svt3(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """Roth's lecture-notes SVT: nu ~ Lap(c/eps2), the noisy answer output when above."""
    return _svt3(answers, rng, trials, SVT_C)


def _svt3(answers: np.ndarray, rng: np.random.Generator, trials: int, c: int) -> np.ndarray:
    noisy, above = _svt(answers, rng, trials, eps1_share=0.5,
                        query_scale=c / _eps2(0.5), threshold=1.0)
    return _cut_after(above, noisy, SVT3_BELOW, SVT3_ABORTED, c)


@_declared(EPSILON, SVT_QUERIES, "componentwise", LSL.format(4) + ": query noise not "
           "scaled with c", (1 + 6 * SVT_C) / 4 * EPSILON)
def svt4(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """Lee and Clifton's SVT: eps1 = eps/4, nu ~ Lap(1/eps2): ((1 + 6c)/4) epsilon-DP."""
    return _svt4(answers, rng, trials, SVT_C)


def _svt4(answers: np.ndarray, rng: np.random.Generator, trials: int, c: int) -> np.ndarray:
    noisy, above = _svt(answers, rng, trials, eps1_share=0.25, query_scale=1 / _eps2(0.25),
                        threshold=1.0)
    return _cut_after(above, np.ones_like(noisy), BELOW, ABORTED, c)


@_declared(EPSILON, SVT_QUERIES, "componentwise", LSL.format(5) + ": no noise on the "
           "answers, no stop", math.inf)
def svt5(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """Stoddard et al.'s SVT: answers compared to a noisy threshold with no noise of theirs."""
    noisy, above = _svt(answers, rng, trials, eps1_share=0.5, query_scale=None,
                        threshold=1.0)
    return np.where(above, 1.0, BELOW)


@_declared(EPSILON, SVT_QUERIES, "componentwise", LSL.format(6) + ": no stop after c "
           "answers", math.inf)
def svt6(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """Chen et al.'s SVT: nu ~ Lap(1/eps2) and every query answered (no cutoff)."""
    noisy, above = _svt(answers, rng, trials, eps1_share=0.5, query_scale=1 / _eps2(0.5),
                        threshold=1.0)
    return np.where(above, 1.0, BELOW)


# The rest of DP-Sniper's evaluation ---------------------------------------------------
# Bichsel et al. 2021 (IEEE S&P), Section 6, audit six more mechanisms beside the StatDP
# catalogue, at their own claims; written here from the papers that define them.

# RAPPOR as DP-Sniper evaluates it (Erlingsson, Pihur and Korolova 2014, CCS): h hashes
# into a Bloom filter of k bits, permanent randomized response f, instantaneous p and q.
RAPPOR_H, RAPPOR_K, RAPPOR_F, RAPPOR_P, RAPPOR_Q = 4, 20, 0.75, 0.45, 0.55
ONE_TIME_F = 0.95
_RAPPOR = "Erlingsson, Pihur and Korolova 2014 (CCS), Section 3"


def bloom_filter(value: float) -> np.ndarray:
    """The Bloom filter of ``value`` (rounded to an integer): ``RAPPOR_K`` bits, each of
    the ``RAPPOR_H`` hashed positions set (positions may collide).

    Examples
    --------
    >>> bloom_filter(1.0).shape, 1 <= int(bloom_filter(1.0).sum()) <= RAPPOR_H
    ((20,), True)
    """
    bits = np.zeros(RAPPOR_K)
    for i in range(RAPPOR_H):
        digest = hashlib.blake2b(f"{i}:{round(value)}".encode(), digest_size=8).digest()
        bits[int.from_bytes(digest, "little") % RAPPOR_K] = 1.0
    return bits


def _permanent_response(answers: np.ndarray, rng: np.random.Generator, trials: int,
                        f: float) -> np.ndarray:
    """Each bit of the value's filter set with probability f/2, cleared with f/2, else kept."""
    bits = bloom_filter(float(_answers(answers)[0, 0]))
    u = rng.random((trials, RAPPOR_K))
    return np.where(u < f / 2, 1.0, np.where(u < f, 0.0, bits))


def _bit_epsilon(one: float, zero: float) -> float:
    """The log-ratio of one reported bit whose filter bit differs: P(report 1 | bit 1) =
    ``one``, P(report 1 | bit 0) = ``zero`` (the larger of its two outcomes')."""
    return max(math.log(one / zero), math.log((1 - zero) / (1 - one)))


# Erlingsson et al. 2014, Section 3: a value sets h bits, so two values differ in at most
# 2h; each costs the log-ratio of its report. Permanent response alone: a bit is reported
# set with probability 1 - f/2 or f/2 (epsilon_infinity = 2h ln((1 - f/2) / (f/2))); one
# instantaneous report on top: q* = f(p + q)/2 + (1 - f) q and p* = f(p + q)/2 + (1 - f) p.
def _reported_set(kept: float) -> float:
    """P(a RAPPOR report's bit is 1) when the permanent response keeps the filter's bit
    and that bit reports 1 with probability ``kept`` (q if set, p if not)."""
    return RAPPOR_F * (RAPPOR_P + RAPPOR_Q) / 2 + (1 - RAPPOR_F) * kept


ONE_TIME_EPSILON = 2 * RAPPOR_H * _bit_epsilon(1 - ONE_TIME_F / 2, ONE_TIME_F / 2)
RAPPOR_EPSILON = 2 * RAPPOR_H * _bit_epsilon(_reported_set(RAPPOR_Q), _reported_set(RAPPOR_P))


@_declared(RAPPOR_EPSILON, 1, "add_remove", _RAPPOR + ": permanent and instantaneous "
           "randomized response, one report")
def rappor(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """One RAPPOR report of a value: its Bloom filter through both randomized responses."""
    permanent = _permanent_response(answers, rng, trials, RAPPOR_F)
    p_one = np.where(permanent == 1.0, RAPPOR_Q, RAPPOR_P)
    return (rng.random(permanent.shape) < p_one).astype(np.float64)


@_declared(ONE_TIME_EPSILON, 1, "add_remove", _RAPPOR + ": the permanent randomized "
           "response alone")
def one_time_rappor(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """One-time RAPPOR: the permanent randomized response of the value's Bloom filter."""
    return _permanent_response(answers, rng, trials, ONE_TIME_F)


PARALLEL_LAPLACE = 20  # DP-Sniper's LaplaceParallel: 20 releases at epsilon / 20 each


@_declared(EPSILON, 1, "add_remove", "sequential composition (Dwork et al. 2006) of "
           f"{PARALLEL_LAPLACE} Laplace mechanisms at epsilon/{PARALLEL_LAPLACE}", EPSILON)
def laplace_parallel(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """One count released 20 times, each with float-safe Laplace noise of scale 20/epsilon."""
    scale = PARALLEL_LAPLACE / EPSILON
    return _answers(answers)[:, :1] + discrete_laplace(rng, scale, (trials, PARALLEL_LAPLACE))


SVT34_C = 2  # DP-Sniper runs SVT3 and SVT4 side by side with c = 2


@_declared(EPSILON, SVT_QUERIES, "componentwise", LSL.format("3 and 4") + ", run side by "
           "side with c = 2", math.inf)
def svt34_parallel(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """SVT3 and SVT4 (c = 2) on the same answers, their outputs side by side: SVT3
    releases noisy answers, so the pair is no better than SVT3."""
    return np.hstack([_svt3(answers, rng, trials, SVT34_C),
                      _svt4(answers, rng, trials, SVT34_C)])


@_declared(SVT_QUERIES * EPSILON, SVT_QUERIES, "componentwise", "Wang, Ding, Wang, Kifer "
           "and Zhang 2019 (PLDI), PrefixSum: each answer with Laplace noise of scale "
           "1/epsilon, every answer moving", SVT_QUERIES * EPSILON)
def prefix_sum(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """The prefix sums of the answers, each with float-safe Laplace noise of scale
    1/epsilon: when every answer may move by one, the noisy answers (the sums'
    differences) compose to k epsilon."""
    a = _answers(answers)
    return np.cumsum(a + discrete_laplace(rng, 1.0 / EPSILON, (trials, a.shape[1])), axis=1)


NUMERICAL_C = 2  # DP-Sniper's NumericalSVT answers c = 2 queries


@_declared(EPSILON, SVT_QUERIES, "componentwise", "Wang, Ding, Wang, Kifer and Zhang 2019 "
           "(PLDI), Numerical Sparse Vector: a fresh noisy answer released above the "
           "threshold")
def numerical_svt(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """SVT that releases a fresh noisy answer when above: rho ~ Lap(3/eps), comparisons
    with nu ~ Lap(6c/eps), released values with float-safe Lap(3c/eps); codes as SVT3's."""
    a = _answers(answers)
    c, shape = NUMERICAL_C, (trials, a.shape[1])
    rho = rng.laplace(0.0, 3.0 / EPSILON, size=(trials, 1))
    above = _above_threshold(a + rng.laplace(0.0, 6.0 * c / EPSILON, size=shape), rho, 1.0)
    released = a + discrete_laplace(rng, 3.0 * c / EPSILON, shape)
    return _cut_after(above, released, SVT3_BELOW, SVT3_ABORTED, c)


CATALOGUE: dict[str, Callable[..., np.ndarray]] = {
    f.__name__: f for f in (laplace, laplace_naive_float, laplace_snapped,
                            truncated_geometric, noisy_hist1, noisy_hist2, rnm1, rnm2, rnm3,
                            rnm4, svt1, svt2, svt3, svt4, svt5, svt6, rappor,
                            one_time_rappor, laplace_parallel, svt34_parallel, prefix_sum,
                            numerical_svt)
}

__all__ = ["CATALOGUE", "discrete_laplace", *CATALOGUE]
