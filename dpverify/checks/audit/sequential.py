"""Sequential audits: sample in rounds until a violation is proven or the test could see one.

Without a fixed number of trials an audit samples in rounds (each as large as all the
earlier ones together, after a first round of ``first`` runs per world) and stops:

* FAIL as soon as the evidence against the claim is in;
* PASS once its detectable epsilon (:mod:`dpverify.stats.power`) has come down to
  ``detect`` times the claim: "no violation above epsilon = X";
* INCONCLUSIVE ("underpowered") when ``max_trials`` are spent first, with the detectable
  epsilon it reached.

Stopping when the evidence is in must not inflate false alarms, so the evidence is
anytime-valid:

* black-box: the betting e-process of :mod:`dpverify.stats.betting`. Every round's test
  (pair, distinguisher, threshold, orientation, stake) is chosen on the runs of earlier
  rounds and bet on the new ones, so every run after the first round is test data, and
  by Ville's inequality the claim is wrongly rejected with probability at most alpha
  however the rounds go (Waudby-Smith and Ramdas 2023, Section 4);
* white-box: each look bounds epsilon from every transcript so far with the white-box
  audit's own bound. The looks are fixed in advance (the doubling schedule up to
  ``max_trials``), so each is made at alpha / (number of looks) and a union bound over
  them keeps the false-alarm rate at alpha whenever the audit stops (Bonferroni: the
  fallback, for bounds that are fixed-sample intervals).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.checks.audit import whitebox as wb
from dpverify.checks.audit.distinguishers import resolve_distinguishers, safe_scores
from dpverify.checks.audit.result import AuditResult
from dpverify.checks.audit.targets import (
    AUTO_NEIGHBOURS,
    SEED_FIT,
    SEED_SAMPLES,
    AuditSetup,
    Pair,
    accountant_epsilon,
    check_same_shape,
    make_pairs,
    prepare,
    resolve_neighbours,
    sample_world,
)
from dpverify.core.errors import InputError, check_positive, check_probability
from dpverify.execution.trials import seed_streams
from dpverify.stats import betting
from dpverify.stats.power import DETECT_PROBABILITY, Power, check_detect_probability

# Stop once a violation of this many times the claim would be caught. A black-box test
# needs about 1e5 runs per world to catch twice the claim and 1e6 for 1.5 times it
# (Gaussian mechanism, delta = 1e-5); white-box bounds come from exact losses and
# tighten fast, so they are asked for more.
DEFAULT_DETECT = {"blackbox": 2.0, "whitebox": 1.1}
# A pure-DP claim (delta = 0) is judged against Laplace's trade-off, whose whole loss lies on
# half of its outputs: the easiest pure-DP mechanism to catch (twice a claim of 0.1 in 16,000
# runs per world, where report noisy max's bug of 2.5 times hides in its tails and is
# caught, with the search over input patterns, from 2.6 x 10^5 runs). Asked for 1.25 times
# the claim, a black-box test spends there about what twice costs at delta > 0.
PURE_DP_DETECT = 1.25
DEFAULT_MAX_TRIALS = {"blackbox": 1_000_000, "whitebox": 20_000}
DEFAULT_FIRST = {"blackbox": 2000, "whitebox": 250}
# Epsilons (multiples of the claim) at which the black-box e-process bets; the claim is 1.
GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 1.75, 2.0,
        2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
_COMMON = {"epsilon", "delta", "neighbours", "confidence", "params", "seed", "scale",
           "relation", "block_size", "backend", "execution", "accountant"}
OPTIONS = {"blackbox": _COMMON | {"distinguisher", "bound"},
           "whitebox": _COMMON | {"bound", "select_fraction"}}


@dataclass(frozen=True)
class Schedule:
    """When a sequential audit looks, and when it stops.

    ``detect``: stop with PASS once the detectable epsilon is at most ``detect`` times
    the claim (``None``: the mode's default for the claim, :meth:`for_claim`);
    ``max_trials``: runs per world (per pair) at most; ``first``: runs per world in the
    first round; ``probability``: the detection probability.

    Examples
    --------
    >>> Schedule(max_trials=20000, first=2000).looks()
    [2000, 4000, 8000, 16000, 20000]
    """

    detect: float | None = None
    max_trials: int = DEFAULT_MAX_TRIALS["blackbox"]
    first: int = DEFAULT_FIRST["blackbox"]
    probability: float = DETECT_PROBABILITY

    def __post_init__(self) -> None:
        if self.detect is not None:
            check_positive(self.detect, "detect")
            if self.detect < 1:
                raise InputError(f"detect must be >= 1 (a multiple of the claimed epsilon), "
                                 f"got {self.detect!r}")
        check_positive(self.max_trials, "max_trials", integer=True)
        check_positive(self.first, "first round", integer=True)
        check_detect_probability(self.probability)

    @classmethod
    def for_mode(cls, mode: str, *, detect: float | None = None,
                 max_trials: int | None = None, first: int | None = None,
                 probability: float | None = None) -> Schedule:
        """The mode's defaults, overridden where given."""
        mt = int(max_trials if max_trials is not None else DEFAULT_MAX_TRIALS[mode])
        fr = min(int(first if first is not None else DEFAULT_FIRST[mode]), mt)
        return cls(None if detect is None else float(detect), mt, fr,
                   DETECT_PROBABILITY if probability is None else float(probability))

    def for_claim(self, mode: str, delta: float) -> Schedule:
        """This schedule with ``detect`` set: as given, else the mode's default
        (:data:`PURE_DP_DETECT` for a black-box audit of a pure-DP claim).

        Examples
        --------
        >>> [Schedule().for_claim("blackbox", d).detect for d in (0.0, 1e-5)]
        [1.25, 2.0]
        >>> Schedule(detect=3.0).for_claim("blackbox", 0.0).detect
        3.0
        """
        if self.detect is not None:
            return self
        pure = mode == "blackbox" and delta == 0
        return dataclasses.replace(self, detect=PURE_DP_DETECT if pure else
                                   DEFAULT_DETECT[mode])

    def looks(self) -> list[int]:
        """Cumulative runs per world at each look: doubling from ``first``."""
        out = [min(self.first, self.max_trials)]
        while out[-1] < self.max_trials:
            out.append(min(2 * out[-1], self.max_trials))
        return out


@dataclass
class _Stream:
    """The runs of one neighbouring pair so far, drawn round by round."""

    pair: Pair
    seeds: list[np.random.SeedSequence]
    D: list[np.ndarray] = field(default_factory=list)
    D_prime: list[np.ndarray] = field(default_factory=list)

    def draw(self, setup: AuditSetup, look: int, k: int, opts: Mapping[str, Any]) -> None:
        sD, sDp = self.seeds[look].spawn(2)
        bs, ex = opts.get("block_size"), opts.get("execution")
        out_D = sample_world(setup, self.pair, 0, k, sD, bs, ex)
        out_Dp = sample_world(setup, self.pair, 1, k, sDp, bs, ex)
        check_same_shape(setup, out_D, out_Dp, self.pair.label)
        self.D.append(out_D)
        self.D_prime.append(out_Dp)

    def past(self, upto: int) -> tuple[np.ndarray, np.ndarray]:
        return np.concatenate(self.D[:upto]), np.concatenate(self.D_prime[:upto])


@dataclass
class _Candidate:
    """A fitted test statistic of one pair, in one orientation of its score."""

    stream: int
    pair: str
    distinguisher: str
    scorer: Any
    sign: float

    @property
    def label(self) -> str:
        return (f"{self.pair} | {self.distinguisher}"
                + (" (reversed)" if self.sign < 0 else ""))

    def scores(self, X: np.ndarray) -> np.ndarray:
        return self.sign * safe_scores(self.scorer, X, self.label)


def _candidates(streams: list[_Stream], upto: int, dists: list[tuple[str, Any]],
                rng: np.random.Generator) -> tuple[list[_Candidate], list, list]:
    """Fit every distinguisher on the even runs so far, score the odd ones (selection)."""
    cands: list[_Candidate] = []
    sel_pos: list[np.ndarray] = []
    sel_neg: list[np.ndarray] = []
    for si, st in enumerate(streams):
        D, Dp = st.past(upto)
        for name, fit in dists:
            scorer = fit(D[0::2], Dp[0::2], rng)
            for sign in (1.0, -1.0):
                c = _Candidate(si, st.pair.label, name, scorer, sign)
                cands.append(c)
                sel_pos.append(c.scores(D[1::2]))
                sel_neg.append(c.scores(Dp[1::2]))
    return cands, sel_pos, sel_neg


@dataclass
class _Evidence:
    """The e-process at every grid epsilon: log-wealth per stake of the mixture."""

    grid: np.ndarray
    delta: float
    log_k: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.log_k = np.zeros((self.grid.size, len(betting.STAKE_SCALES)))

    def bet(self, bets: list[betting.Bet | None], cands: list[_Candidate],
            streams: list[_Stream]) -> None:
        """Settle each grid point's bet on the newest round of its pair's runs."""
        cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for gi, b in enumerate(bets):
            if b is None:
                continue
            c = cands[b.candidate]
            if b.candidate not in cache:
                st = streams[c.stream]
                cache[b.candidate] = (c.scores(st.D[-1]), c.scores(st.D_prime[-1]))
            sD, sDp = cache[b.candidate]
            counts = betting.outcome_counts(sD >= b.threshold, sDp >= b.threshold,
                                            b.orientation)
            values, _ = betting.cell_values(self.grid[gi], self.delta)
            self.log_k[gi] += betting.log_wealth(counts, b.stake, values)

    def log_evidence(self) -> np.ndarray:
        return np.array([betting.mixture_log(row) for row in self.log_k])

    def lower(self, alpha: float, claim: int) -> float:
        """The largest grid epsilon below which every claim is rejected (0 if none), and at
        least the claim where the claim itself is rejected: each grid point bets on its own
        test, so a rejected claim may sit above a point whose bet missed."""
        rejected = self.log_evidence() >= math.log(1.0 / alpha)
        out = float(self.grid[claim]) if rejected[claim] else 0.0
        for g, ok in zip(self.grid, rejected, strict=True):
            if not ok:
                break
            out = max(out, float(g))
        return out


def _look(evidence: _Evidence, claim: int, k: int, catch: np.ndarray, alpha: float,
          schedule: Schedule) -> str | None:
    """Why to stop after look ``k`` (or None); ``catch``: the chance of having caught a
    violation of ``detect`` x the claim by each look."""
    if evidence.log_evidence()[claim] >= math.log(1.0 / alpha):
        return "violation"
    if k > 0 and catch[k] >= schedule.probability:
        return "powered"
    return None


def _start(mode: str, target: str, schedule: Schedule | None, options: Mapping[str, Any]
           ) -> tuple[Schedule, float, AuditSetup]:
    """Check the options, and prepare the target: the schedule, alpha and the setup."""
    unknown = sorted(set(options) - OPTIONS[mode])
    if unknown:
        raise InputError(f"unknown option(s) {unknown} for a sequential {mode} audit; "
                         f"known: {sorted(OPTIONS[mode])}")
    schedule = schedule or Schedule.for_mode(mode)
    confidence = check_probability(options.get("confidence", 0.95), "confidence")
    setup = prepare(target, **{k: options[k] for k in ("epsilon", "delta", "params", "scale",
                                                       "relation", "backend") if k in options},
                    seed=int(options.get("seed", 0)))
    return schedule.for_claim(mode, setup.delta), 1.0 - confidence, setup


def audit_sequential_blackbox(target: str, schedule: Schedule | None = None,
                              **options: Any) -> AuditResult:
    """Black-box audit in rounds with the betting e-process (see the module docstring).

    ``options`` are those of :func:`~dpverify.checks.audit.blackbox.audit_blackbox` except
    ``trials``, ``splits`` and ``top_k`` (the rounds choose and bound alike); ``bound``
    may only be ``auto`` or ``cp``.

    Examples
    --------
    >>> r = audit_sequential_blackbox("gaussian_mechanism:planted_half_noise",
    ...                               distinguisher="projection", accountant=False)
    >>> r.verdict.value, r.details["stop"], r.trials < 100000
    ('FAIL', 'violation', True)
    >>> r = audit_sequential_blackbox("gaussian_mechanism:sound", distinguisher="projection",
    ...                               accountant=False)
    >>> r.verdict.value, r.details["stop"], r.epsilon_detectable <= 2.0
    ('PASS', 'powered', True)
    """
    if options.get("bound", "auto") not in ("auto", "cp"):
        raise InputError(f"a sequential black-box audit bets without assumptions (bound "
                         f"'cp'); bound {options['bound']!r} needs a fixed size (--trials)")
    schedule, alpha, setup = _start("blackbox", target, schedule, options)
    seed = setup.seed
    dists = resolve_distinguishers(options.get("distinguisher", "auto"))
    pairs = make_pairs(setup, resolve_neighbours(setup, options.get("neighbours",
                                                                     AUTO_NEIGHBOURS)))
    looks = schedule.looks()
    root = seed_streams(seed, SEED_SAMPLES + 1)[SEED_SAMPLES]
    streams = [_Stream(p, seed_streams(s, len(looks)))
               for p, s in zip(pairs, seed_streams(root, len(pairs)), strict=True)]
    fit_rng = np.random.default_rng(seed_streams(seed, SEED_FIT + 1)[SEED_FIT])
    evidence = _Evidence(setup.epsilon_claimed * np.asarray(GRID), setup.delta)
    claim = GRID.index(1.0)
    catch = np.zeros(len(looks))
    bets: list[betting.Bet | None] = []
    cands: list[_Candidate] = []
    history: list[dict[str, Any]] = []
    stop, done = None, 0
    for r, total in enumerate(looks):
        for st in streams:
            st.draw(setup, r, total - done, options)
        if r > 0:
            evidence.bet(bets, cands, streams)
        else:  # after the first round: bad input is refused before any long computation
            catch = betting.detection_rates(looks, schedule.detect * setup.epsilon_claimed,
                                            alpha=alpha, delta=setup.delta,
                                            epsilon=setup.epsilon_claimed)
        done = total
        stop = _look(evidence, claim, r, catch, alpha, schedule)
        history.append({"trials": total, "log_evidence": float(evidence.log_evidence()[claim]),
                        "epsilon_lower": evidence.lower(alpha, claim),
                        "catch_rate_at_detect": float(catch[r])})
        if stop or r == len(looks) - 1:
            break
        cands, sel_pos, sel_neg = _candidates(streams, r + 1, dists, fit_rng)
        bets = betting.plan_bets(betting.bet_menu(sel_pos, sel_neg), evidence.grid,
                                 setup.delta)
    # On a FAIL too: what the rounds run so far could catch is the evidence's power.
    pw = betting.sequential_power(looks, alpha=alpha, delta=setup.delta,
                                  epsilon=setup.epsilon_claimed,
                                  probability=schedule.probability, upto=len(history) - 1)
    if stop == "powered":
        # The stop was earned at detect x the claim, by the same simulation: the bisected
        # figure may land a hair above it (Monte Carlo), never meaningfully.
        pw = dataclasses.replace(pw, epsilon=min(pw.epsilon,
                                                 schedule.detect * setup.epsilon_claimed))
    return _result(setup, options, pairs, dists, evidence, claim, bets, cands, history,
                   stop, pw, schedule, alpha)


def _result(setup: AuditSetup, options: Mapping[str, Any], pairs: list[Pair],
            dists: list[tuple[str, Any]], evidence: _Evidence, claim: int,
            bets: list[betting.Bet | None], cands: list[_Candidate],
            history: list[dict[str, Any]], stop: str | None, pw: Power | None,
            schedule: Schedule, alpha: float) -> AuditResult:
    trials = history[-1]["trials"]
    eps_acc, acc_note = (accountant_epsilon(setup) if options.get("accountant", True)
                         else (None, "not computed (accountant=False)"))
    log_e = float(evidence.log_evidence()[claim])
    b = bets[claim] if bets else None
    details = {
        "stop": stop or "budget",
        "rounds": len(history),
        "e_value": math.exp(min(log_e, 700.0)),
        "detect": schedule.detect,
        "max_trials": schedule.max_trials,
        "runs_total": 2 * trials * len(pairs),
        "pairs": [p.label for p in pairs],
        "distinguishers": [n for n, _ in dists],
        "relation": setup.relation,
        "instance": list(setup.notes),
        "epsilon_true": setup.epsilon_true,
        "pair": None if b is None else cands[b.candidate].pair,
        "distinguisher": None if b is None else cands[b.candidate].distinguisher,
        "low_bits_vary": None if b is None else getattr(cands[b.candidate].scorer,
                                                        "low_bits_vary", None),
    }
    evidence_out = {
        "rounds": history,
        "grid": evidence.grid.tolist(),
        "log_evidence": evidence.log_evidence().tolist(),
        "threshold_log_evidence": math.log(1.0 / alpha),
        "bet_at_claim": None if b is None else {
            "test": cands[b.candidate].label, "threshold": b.threshold,
            "orientation": ["e^eps on FNR", "e^eps on FPR"][b.orientation],
            "stake": b.stake, "anticipated_growth": b.growth},
        "accountant": acc_note,
    }
    if b is not None:
        evidence_out["witness"] = pairs[cands[b.candidate].stream].describe()
    res = AuditResult(setup.name, "blackbox", evidence.lower(alpha, claim), setup.epsilon_claimed,
                      eps_acc, setup.delta, 1.0 - alpha, trials, "betting", details,
                      evidence_out, claim_rejected=stop == "violation")
    if pw is not None:
        res.with_power(pw)
    if stop is None:
        res.inconclusive = _underpowered(trials, schedule, setup,
                                         None if pw is None else pw.epsilon)
    return res


def audit_sequential_whitebox(target: str, schedule: Schedule | None = None,
                              **options: Any) -> AuditResult:
    """White-box audit in looks fixed in advance, each at alpha / (number of looks).

    ``options`` are those of :func:`~dpverify.checks.audit.whitebox.audit_whitebox` except
    ``trials``. The union bound over the looks (Bonferroni) makes the bound at whichever
    look the audit stops valid at confidence 1 - alpha.

    Examples
    --------
    >>> r = audit_sequential_whitebox("noisy_gd:sound", params={"T": 5, "n": 50},
    ...                               accountant=False)
    >>> r.verdict.value, r.details["stop"], r.epsilon_detectable <= 1.1
    ('PASS', 'powered', True)
    """
    schedule, alpha, setup = _start("whitebox", target, schedule, options)
    pairs = wb.whitebox_pairs(setup, resolve_neighbours(
        setup, options.get("neighbours", AUTO_NEIGHBOURS)))
    looks = schedule.looks()
    how = wb.WhiteboxBound(alpha / len(looks), options.get("bound", "auto"),
                           options.get("select_fraction", 0.3), schedule.probability)
    root = seed_streams(setup.seed, SEED_SAMPLES + 1)[SEED_SAMPLES]
    seeds = [seed_streams(s, len(looks)) for s in seed_streams(root, len(pairs))]
    runs, done, history, stop = None, 0, [], None
    for r, total in enumerate(looks):
        new = wb.collect_runs(setup, pairs, total - done, [s[r] for s in seeds],
                              options.get("block_size"), options.get("execution"))
        runs, done = wb.merge_runs(runs, new), total
        res = wb.whitebox_result(setup, runs, how, accountant=False)
        history.append({"trials": total, "epsilon_lower": res.epsilon_lower,
                        "epsilon_detectable": res.epsilon_detectable, "bound": res.bound})
        if res.epsilon_lower > setup.epsilon_claimed:
            stop = "violation"
        elif (res.epsilon_detectable or math.inf) <= schedule.detect * setup.epsilon_claimed:
            stop = "powered"
        if stop:
            break
    if options.get("accountant", True):
        res.epsilon_accountant, res.evidence["accountant"] = accountant_epsilon(setup)
    res.confidence = 1.0 - alpha
    res.details.update(stop=stop or "budget", looks=len(looks), alpha_per_look=how.alpha,
                       detect=schedule.detect, max_trials=schedule.max_trials)
    res.evidence["rounds"] = history
    if stop is None:
        res.inconclusive = _underpowered(res.trials, schedule, setup, res.epsilon_detectable)
    return res


def _underpowered(trials: int, schedule: Schedule, setup: AuditSetup,
                  reached: float | None) -> str:
    return (f"the {trials}-trial budget ran out before the detectable epsilon came down to "
            f"{schedule.detect:g} x the claim (= {schedule.detect * setup.epsilon_claimed:.3g})"
            "; it reached " + ("nothing" if reached is None else f"{reached:.3g}")
            + "; raise --max-trials or --detect")


def audit_sequential(target: str, *, mode: str = "blackbox",
                     schedule: Schedule | None = None, **options: Any) -> AuditResult:
    """A sequential audit in ``mode`` (``blackbox`` or ``whitebox``).

    Examples
    --------
    >>> audit_sequential("noisy_gd:sound", mode="onerun")
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: a sequential audit is blackbox or whitebox, not 'onerun'
    """
    if mode == "blackbox":
        return audit_sequential_blackbox(target, schedule, **options)
    if mode == "whitebox":
        return audit_sequential_whitebox(target, schedule, **options)
    raise InputError(f"a sequential audit is blackbox or whitebox, not {mode!r}")
