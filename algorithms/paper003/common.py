"""What the algorithms of paper 003 share: claims, the paper's noise formulas, schedules,
and calibration on the exact events a run makes.

Xu, Tao, Ding, Fan, Wang, "Finding Differentially Private Second Order Stationary Points
in Stochastic Minimax Optimization". Line numbers refer to ``003_74f15e792d6d2225.txt``.
Neighbours "differ by only one entry" (Definition 1, line 51): replace-one, n public.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import dp_accounting as dpa
import numpy as np
import scipy.optimize

from algorithms.baselines import l2_sensitivity_of_sum
from algorithms.paper003.problems import MinimaxSetting
from dpverify.accounting.accountant import calibrate_noise_multiplier, release_event
from dpverify.core.claims import PrivacyClaim, UtilityClaim
from dpverify.core.curator import Curator, Release
from dpverify.core.errors import InputError

PAPER = "paper 003 (Xu, Tao, Ding, Fan, Wang: DP SOSP in stochastic minimax)"
RELATION = "replace_one"  # Definition 1, line 51


def claim(p: Mapping[str, Any]) -> PrivacyClaim:
    """(epsilon, delta)-DP under the run's relation (the paper's is replace-one, line 51).

    Examples
    --------
    >>> claim({"epsilon": 1.0, "delta": 1e-5, "relation": "replace_one"}).relation
    'replace_one'
    """
    return PrivacyClaim(epsilon=float(p["epsilon"]), delta=float(p["delta"]),
                        relation=str(p["relation"]))


def eps_bar(n: int, d: int, epsilon: float, delta: float) -> float:
    """The privacy-utility scale sqrt(d log(1/delta)) / (n epsilon) (Lemma 5, line 508).

    Examples
    --------
    >>> round(eps_bar(10000, 10, 1.0, 1e-5), 6)  # the notes' worked example
    0.001073
    """
    return math.sqrt(d * math.log(1.0 / delta)) / (n * epsilon)


def def3_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """The Gaussian mechanism's std as Definition 3 prints it (line 63).

    sigma = Delta sqrt(log(1.25/delta)) / epsilon: the classical constant is
    Delta sqrt(2 log(1.25/delta)) / epsilon (Dwork and Roth 2014, Thm A.1), a factor
    sqrt(2) more.

    Examples
    --------
    >>> round(def3_sigma(1.0, 1.0, 1e-5), 3)  # notes, table in Section 2
    3.426
    """
    return sensitivity * math.sqrt(math.log(1.25 / delta)) / epsilon


def advanced_composition_epsilon(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """Per-query (epsilon_0, delta_0) whose k-fold composition is (epsilon, delta)-DP.

    Advanced composition (Dwork, Rothblum, Vadhan 2010, Thm III.3): k (eps0, delta0)
    mechanisms compose to (eps0 sqrt(2 k ln(1/delta')) + k eps0 (e^eps0 - 1),
    k delta0 + delta'). Appendix D (line 889) says only "advanced composition in the code";
    we split delta' = delta/2 and delta0 = delta/(2k) [ours].

    Examples
    --------
    >>> e0, d0 = advanced_composition_epsilon(2.0, 1e-6, 100)
    >>> tot = e0 * math.sqrt(2 * 100 * math.log(2e6)) + 100 * e0 * math.expm1(e0)
    >>> round(tot, 9), d0
    (2.0, 5e-09)
    """
    if k < 1:
        raise InputError(f"advanced composition needs k >= 1 queries, got {k}")
    dp = delta / 2.0

    def total(e0: float) -> float:
        return e0 * math.sqrt(2.0 * k * math.log(1.0 / dp)) + k * e0 * math.expm1(e0) - epsilon

    e0 = scipy.optimize.brentq(total, 1e-12, epsilon, xtol=1e-15)
    return float(e0), delta / (2.0 * k)


def sum_sensitivity(clip: float, relation: str) -> float:
    """L2 sensitivity of a sum of per-sample vectors clipped to ``clip`` (2C replace-one)."""
    return l2_sensitivity_of_sum(clip, relation)


# Calibration on the events the run makes ------------------------------------------------


def _prototype(sampling: str, rate: float, n: int, batch: int | None) -> tuple[Any, ...]:
    return (sampling, float(rate), int(n), batch)


@functools.lru_cache(maxsize=128)
def calibrate_common_multiplier(
    groups: tuple[tuple[tuple[Any, ...], int], ...], epsilon: float, delta: float,
    relation: str,
) -> float:
    """One noise multiplier z for every release of a run, from its exact list of events.

    ``groups`` holds ((sampling, rate, n, batch_size), count) per kind of release. Each is
    turned into the ``dp_accounting`` event the ledger will produce for a release of
    sensitivity 1 and noise z (:func:`dpverify.accounting.accountant.release_event`), so the
    calibration composes exactly what the accountant will later compose.

    Examples
    --------
    >>> z = calibrate_common_multiplier(((("full", 1.0, 100, 100), 4),), 1.0, 1e-5,
    ...                                 "replace_one")
    >>> round(z / math.sqrt(4), 2)  # four Gaussians = one with multiplier z / 2
    3.73
    """

    # Unsampled Gaussians depend only on the distance between q(D) and q(D'), whatever the
    # relation; calibrating them under add/remove avoids an RDP bracket that reads the
    # replace-one PLD convention of release_event differently (as calibrate_gaussian does).
    if all(spec[0] == "full" for spec, _ in groups):
        relation = "add_remove"

    def make(z: float) -> dpa.DpEvent:
        evs = []
        for (sampling, rate, n, batch), count in groups:
            rel = Release(0, "proto", "gaussian", 1.0, "l2", z, sampling, rate, batch, n, None,
                          ())
            ev = release_event(rel, relation, "pld")
            evs.append(dpa.SelfComposedDpEvent(ev, count) if count > 1 else ev)
        return evs[0] if len(evs) == 1 else dpa.ComposedDpEvent(evs)

    return calibrate_noise_multiplier(make, target_epsilon=epsilon, target_delta=delta,
                                      relation=relation, accountant="pld")


def batch_spec(cur: Curator, size: float | None, *, single_pass: bool = False
               ) -> tuple[Any, ...]:
    """(sampling, rate, n, size) of a batch of nominal ``size``.

    All records when ``size`` is None or >= n, else Poisson sampling at rate size/n; with
    ``single_pass`` a block of ``size`` fresh records of one pass over the data (the
    population setting's sample budget, line 762: (T/q) S1 + T K S2 <= n).
    """
    n = cur.n
    if single_pass:
        if size is None or not 0 < size <= n:
            raise InputError(f"a single pass needs batch sizes in [1, n = {n}], got {size!r}")
        return _prototype("stream", int(size) / n, n, int(size))
    if size is None or size >= n:
        return _prototype("full", 1.0, n, n)
    return _prototype("poisson", float(size) / n, n, None)


class SinglePass:
    """One pass over the records in a public order: each block is fresh, none reused.

    The population analysis (Lemma 8, the sample-budget paragraph, line 762) draws every
    batch from fresh samples, so each record enters exactly one release and, by parallel
    composition, pays for that one release only. The order is data-independent (the slot
    index, starting at the public ``offset`` and wrapping around), so a block is a
    :meth:`~dpverify.core.curator.Curator.subset` and the ledger charges it to the records it
    touched. The offset chooses which release a given slot meets (a canary in an increment
    block rather than the first refresh's).

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.zeros((5, 1)), np.zeros(5)), trials=2)
    >>> sp = SinglePass(cur)
    >>> _, a = sp.take(2)
    >>> _, b = sp.take(3)
    >>> (a, b, sp.used)
    (slice(0, 2, None), slice(2, 5, None), 5)
    >>> _, c = SinglePass(cur, offset=4).take(2)
    >>> c.tolist()
    [4, 0]
    """

    def __init__(self, cur: Curator, offset: int = 0) -> None:
        self.cur = cur
        self.used = 0
        self.offset = int(offset) % cur.n if cur.n else 0

    def take(self, size: int) -> tuple[Any, Any]:
        start, stop = self.used, self.used + int(size)
        n = self.cur.n
        if stop > n:
            raise InputError(f"the single pass ran out of records: {stop} needed, n = "
                             f"{n} (line 762: (T/q) S1 + T K S2 <= n)")
        self.used = stop
        lo, hi = start + self.offset, stop + self.offset
        slots: Any = slice(lo, hi) if hi <= n else np.arange(lo, hi) % n
        pos = np.arange(lo, hi) if hi <= n else slots
        return self.cur.subset(pos), slots


def draw(cur: Curator, spec: tuple[Any, ...], stream: SinglePass | None = None
         ) -> tuple[Any, slice]:
    """A batch of the kind ``spec`` describes (see :func:`batch_spec`) and the slots it
    can touch: every slot, or a single pass's next block of ``stream``."""
    sampling, rate = spec[0], spec[1]
    if sampling == "stream":
        if stream is None:
            raise InputError("a single-pass batch needs the run's SinglePass")
        return stream.take(spec[3])
    batch = cur.full_batch() if sampling == "full" else cur.sample("poisson", rate=rate)
    return batch, slice(None)


def restrict(query: Any, slots: Any) -> Any:
    """``query`` evaluated on the slots ``slots`` only (records outside weigh 0 anyway).

    A single pass's block is a public range of slots (a slice, or an index array where the
    pass wraps around): reading only those keeps a query's cost proportional to its batch,
    not to n.
    """
    if isinstance(slots, slice) and slots == slice(None):
        return query
    return lambda X, y, w: query(X[slots], y[slots], w[:, slots])


def nominal(spec: tuple[Any, ...], n: int) -> float:
    """The public normaliser of a batch: n for a full batch, rate * n for Poisson, the
    block size for a single pass."""
    if spec[0] == "stream":
        return float(spec[3])
    return float(n) if spec[0] == "full" else spec[1] * n


# Utility claims ---------------------------------------------------------------------------

# A regime is a numeric expression of the run's parameters (dpverify.checks.rates.theory evaluates
# numbers, names and arithmetic only); which Phi a theorem measures (Phi_S for Theorem 1,
# the population Phi for Theorem 2) is the ``phi`` parameter the variant sets, stated in
# ``source`` rather than as a string comparison the rate checker cannot evaluate.

#: Theorem 1 (line 276): alpha = O~(eps_bar^(2/3)), eps_bar = sqrt(d log(1/delta))/(n eps).
THEOREM1 = UtilityClaim.private_rate(
    "sosp_alpha", 2 / 3, regime=("n*epsilon >= sqrt(d*log(1/delta))",),
    source="paper 003, Theorem 1 (empirical Phi_S)",
)

#: Theorem 2 (line 312): alpha = O~(n^(-1/3) + eps_bar^(1/2)); exponents of the privacy
#: term, which dominates when eps_bar^(1/2) >= n^(-1/3).
THEOREM2 = UtilityClaim.private_rate(
    "sosp_alpha", 1 / 2, regime=("sqrt(d*log(1/delta))/(n*epsilon) >= n**(-2/3)",),
    source="paper 003, Theorem 2 (population Phi)",
)

#: Table 1 (line 22) quotes DP-SGDA (Yang et al. 2022) at O(1/sqrt(n) + sqrt(d)/(n eps)) for
#: population minimax; privacy term exponents. Yang et al. bound a convex-concave gap, not
#: ||grad Phi||, so on a nonconvex Phi this is a hypothesis, not a theorem.
TABLE1_SGDA = UtilityClaim(
    quantity="grad_norm_phi",
    exponents={"n": -1.0, "d": 0.5, "epsilon": -1.0},
    sided="upper",
    regime=("sqrt(d)/(n*epsilon) >= n**(-1/2)",),
    source="paper 003, Table 1 (Yang et al. 2022; population Phi)",
)

#: Table 1 (line 22) for the Table 2 baselines, as paper 003 quotes them; each bounds the
#: gradient norm of the value function (first-order: the baselines carry no escape
#: certificate here). Stochastic SPIDER (Liu et al. 2023): ERM, O~(eps_bar^(2/3)).
TABLE1_STO_SPIDER = UtilityClaim.private_rate(
    "grad_norm_phi", 2 / 3, source="paper 003, Table 1 (Liu et al. 2023; empirical Phi_S)")

#: Ada-DP-SPIDER (Tao et al. 2025): population, O(n^(-1/3) + eps_bar^(2/5)); privacy term.
TABLE1_ADA_SPIDER = UtilityClaim.private_rate(
    "grad_norm_phi", 2 / 5, source="paper 003, Table 1 (Tao et al. 2025; population Phi)")

#: PrivateDiff Minimax (Zhang et al. 2025, line 410): O~(d^(1/3)/(n eps)^(2/3)) for the
#: empirical Phi_S, i.e. eps_bar^(2/3) (Section 2.2 of paper 003 cites it as the NC-SC rate).
ZHANG2025 = UtilityClaim.private_rate(
    "grad_norm_phi", 2 / 3, source="paper 003, Section 5.1 (Zhang et al. 2025; empirical Phi_S)")


# Schedules ---------------------------------------------------------------------------------


def theorem1_schedule(n: int, d: int, epsilon: float, delta: float, s: MinimaxSetting, *,
                      c_alpha: float = 1.0) -> dict[str, Any]:
    """T, q, S2 and alpha of Theorem 1 as Lemma 5's proof derives them (lines 501-517).

    T = max{((L F0)^(1/4) / (sqrt(M) eps_bar))^(4/3), 1/eps_bar} (line 513); q =
    1/(T eps_bar^2) (line 508; the stated q of line 501 carries a stray L^2);
    S2 >= max{(M/(sqrt(F0 L) eps_bar))^(2/3), M^(1/3) n eps_bar^(2/3)/(L F0)^(1/6)}
    (line 517; the stated bound of line 501 lacks eps^(-2/3)); S1 = n;
    alpha = (M L F0)^(1/3) eps_bar^(2/3), where both terms of line 511 meet.

    Examples
    --------
    >>> from algorithms.paper003.problems import MinimaxSetting
    >>> s = MinimaxSetting(None, 10, 10, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, None, np.zeros(10))
    >>> sch = theorem1_schedule(10000, 10, 1.0, 1e-5, s)  # the notes' worked example
    >>> sch["T"], sch["q"], sch["S2"], round(sch["alpha"], 4)
    (9104, 95, 105, 0.0105)
    """
    eb = eps_bar(n, d, epsilon, delta)
    L, M, F0 = s.L, s.M, s.F0
    T = max(((L * F0) ** 0.25 / (math.sqrt(M) * eb)) ** (4.0 / 3.0), 1.0 / eb)
    T = int(math.ceil(T))
    q = max(1, int(math.floor(1.0 / (T * eb * eb))))
    S2 = max((M / (math.sqrt(F0 * L) * eb)) ** (2.0 / 3.0),
             M ** (1.0 / 3.0) * n * eb ** (2.0 / 3.0) / (L * F0) ** (1.0 / 6.0))
    alpha = c_alpha * (M * L * F0) ** (1.0 / 3.0) * eb ** (2.0 / 3.0)
    return {"T": T, "q": min(q, T), "S1": None, "S2": int(math.ceil(S2)), "K": 1,
            "alpha": alpha}


def population_schedule(n: int, d: int, epsilon: float, delta: float, s: MinimaxSetting, *,
                        c_alpha: float = 1.0) -> dict[str, Any]:
    """T, S1, q = S2 and K of Theorem 2 (the sample-budget paragraph, line 762).

    T = eps_bar^(-2/3), S1 = n^(2/3), q = S2 = eps_bar^(-1/3), K = kappa = L/mu
    (Lemma 8, line 625, K = O(kappa)); alpha = n^(-1/3) + eps_bar^(1/2) (Theorem 2).

    Examples
    --------
    >>> from algorithms.paper003.problems import MinimaxSetting
    >>> s = MinimaxSetting(None, 3, 3, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, None, np.zeros(3))
    >>> sch = population_schedule(10**6, 10, 1.0, 1e-5, s)
    >>> sch["T"], sch["S1"], sch["q"], sch["K"]
    (2056, 10000, 46, 2)
    """
    eb = eps_bar(n, d, epsilon, delta)
    T = int(math.ceil(eb ** (-2.0 / 3.0)))
    qs = max(1, int(math.ceil(eb ** (-1.0 / 3.0))))
    alpha = c_alpha * (n ** (-1.0 / 3.0) + math.sqrt(eb))
    return {"T": T, "q": min(qs, T), "S1": int(math.ceil(n ** (2.0 / 3.0))), "S2": qs,
            "K": max(1, int(math.ceil(s.L / s.mu))), "alpha": alpha}


def to_numpy(cur: Curator, a: Any) -> np.ndarray:
    return np.asarray(cur.backend.to_numpy(a), dtype=float)
