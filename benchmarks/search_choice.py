"""How often the pair search picks the best witness: its rules replayed on exact laws.

The black-box audit's pair search (``dpverify.checks.audit.blackbox``) draws runs of every
candidate pair, keeps a few finalists by what their tests anticipate, gives them the rest of
the search budget, chooses the witness among them and counts its test on fresh runs. On SVT
and report noisy max the output is one of a few outcomes whose law is known exactly
(``benchmarks/ceiling.py``), so what the search sees of a pair is a multinomial draw of
outcome counts, and the ``histogram`` table it fits is those counts' log-ratios. This script
replays the search's rules on such draws (tables cross-fitted in folds, ranking through
dpverify's own anticipation, the conditional and Clopper-Pearson bounds), a few hundred
seeds a minute where an audit of the law stand-ins takes a minute a seed, and compares
rules: how many finalists, and whether pairs are compared by their tests' pessimistic or
point anticipations (the audit: three finalists, point estimates), counting the seeds whose
finalists hold the pattern of the highest ceiling.

Run: ``python benchmarks/search_choice.py --row svt2 --runs 10000000 --seeds 300``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from ceiling import LAWS, ceiling  # beside this script

from algorithms.catalogue import EPSILON
from dpverify.checks.audit.blackbox import (
    DEFAULT_SPLITS,
    FINALISTS,
    MIN_EVENT_RUNS,
    TABLE_FOLDS,
    TABLE_LEVEL,
)
from dpverify.checks.audit.distinguishers import (
    atom_ranks,
    crossfitted_ranks,
    smoothed_log_ratio,
)
from dpverify.core.data import QUERY_PATTERNS, far_distance, query_pair
from dpverify.core.errors import InputError
from dpverify.stats.audit_bounds import split_sizes
from dpverify.stats.score_audit import CLOPPER_PEARSON_FAMILY
from dpverify.stats.selection import POINT_LEVEL, Counts, Tails, variants_of


@dataclass(frozen=True)
class Rule:
    """A search rule: how many finalists, and whether pairs are compared by point
    estimates (else pessimistic ones) in the halving (the best of a pair's planned tests)
    and in the choice of the witness (the test it would run)."""

    finalists: int
    point_halving: bool
    point_witness: bool
    folds: int = TABLE_FOLDS
    min_runs: int = 0  # an event's promise is read first where this many runs are in and out
    splits: tuple[float, ...] = DEFAULT_SPLITS  # fit, select, test fractions of the runs

    @property
    def name(self) -> str:
        reading = {True: "point", False: "pessimistic"}
        return (f"{self.finalists} finalists by {reading[self.point_halving]} estimates, "
                f"the witness by {reading[self.point_witness]} ones, tables in "
                f"{self.folds} folds" + (f", events of {self.min_runs} runs first"
                                         if self.min_runs else "")
                + (f", splits {'/'.join(map(str, self.splits))}"
                   if self.splits != DEFAULT_SPLITS else ""))


@dataclass(frozen=True)
class Best:
    """A table's best test: its anticipations, the event it counts, and the table's promise
    (the best point anticipation of its planned tests, what exploring reads)."""

    pessimistic: float
    point: float
    sign: float
    threshold: float
    statistic: object
    orientation: str
    promise: tuple[bool, float] = (True, 0.0)
    counts: tuple[float, float] = (0.0, 0.0)  # the event's runs on each world, as read
    enough: bool = True  # whether min_runs runs of both worlds are in the event and out

    @property
    def read(self) -> tuple[bool, float]:
        """The test's promise as the audit reads it: events of enough runs first."""
        return self.enough, self.point

    @property
    def se(self) -> float:
        """The standard error of the event's log-ratio, from its counts."""
        return float(np.sqrt(sum(1.0 / max(c, 1.0) for c in self.counts)))


def best_test(c_D: np.ndarray, c_Dp: np.ndarray, n_test: int, alpha: float,
              rng: np.random.Generator, rule: Rule) -> Best:
    """The best test of a pair's table, ranked as the search ranks it: each fold of the
    runs scored by its atoms' ranks in the table of the other folds, pessimistic rates
    first, point estimates next."""
    folds = rule.folds
    share = [1.0 / folds] * folds
    f_D = np.array([rng.multinomial(c, share) for c in c_D]).T  # (folds, atoms)
    f_Dp = np.array([rng.multinomial(c, share) for c in c_Dp]).T
    scores = crossfitted_ranks(f_D, f_Dp)
    best, promise = None, (False, -np.inf)
    pooled = c_D.sum() + c_Dp.sum()
    for sign in (1.0, -1.0):
        th = np.unique(sign * scores)
        a1, a0 = (np.array([f[sign * scores >= t].sum() for t in th], float)
                  for f in (f_D, f_Dp))
        tails = Tails(a1, int(c_D.sum()), a0, int(c_Dp.sum()), n_test, n_test)
        for st in variants_of(CLOPPER_PEARSON_FAMILY):
            pess = st.anticipate(tails, delta=0.0, alpha=alpha, level=TABLE_LEVEL)
            point = st.anticipate(tails, delta=0.0, alpha=alpha, level=POINT_LEVEL)
            for o, r, f in zip(st.orientations, pess, point, strict=True):
                j = int(np.lexsort((-f, -r))[0])
                hits = (a1[j], a0[j]) if o != "D'" else (c_Dp.sum() - a0[j], c_D.sum() - a1[j])
                inside = a1[j] + a0[j]
                cand = Best(float(r[j]), float(f[j]), sign, float(th[j]), st, o,
                            counts=(float(hits[0]), float(hits[1])),
                            enough=min(inside, pooled - inside) >= rule.min_runs)
                promise = max(promise, cand.read)
                if best is None or (cand.pessimistic, cand.point) > (best.pessimistic,
                                                                     best.point):
                    best = cand
    assert best is not None
    return replace(best, promise=promise)


@dataclass(frozen=True)
class Race:
    """Successive elimination of the finalists on up to ``cap`` times the second round's
    runs in all; ``refit``: the survivors' tables are refitted on their pooled runs (which
    needs their outputs), else their tests as fitted only count their events (counts only)."""

    cap: float
    refit: bool = True


def search(laws: dict[str, tuple[np.ndarray, np.ndarray]], runs: int, rule: Rule,
           alpha: float, seed: int, race: Race | None = None
           ) -> tuple[str, float, list[str], float]:
    """One audit's search and test: (witness, its bound, finalists, the runs of its second
    round and race over those of the second round alone).

    With a ``race`` the finalists race (:func:`_race`, :func:`_race_fixed`).
    """
    rng = np.random.default_rng(seed)
    n_fit, n_sel = (int(runs * f) for f in rule.splits[:2])
    n_test, budget = runs - n_fit - n_sel, n_fit + n_sel
    first, names = budget // 2, list(laws)
    extra = (budget - first) * len(names) // rule.finalists
    counts = {n: [rng.multinomial(first, w) for w in laws[n]] for n in names}
    tests = {n: best_test(*counts[n], n_test, 0.05, rng, rule) for n in names}
    key = (lambda n: tests[n].promise) if rule.point_halving else (
        lambda n: (True, tests[n].pessimistic))
    finalists = sorted(names, key=key, reverse=True)[:rule.finalists]

    spent = 0

    def more(pairs: list[str], k: int) -> dict[str, Best]:
        nonlocal spent
        spent += k * len(pairs)
        for n in pairs:
            counts[n] = [c + rng.multinomial(k, w) for c, w in zip(counts[n], laws[n],
                                                                    strict=True)]
        return {n: best_test(*counts[n], n_test, alpha, rng, rule) for n in pairs}

    tests = more(finalists, extra)
    events = {n: tests[n].sign * atom_ranks(smoothed_log_ratio(*counts[n]))
              >= tests[n].threshold for n in tests}
    if race is not None and not race.refit:
        lead, raced = _race_fixed(tests, events, laws, race.cap * extra * len(finalists),
                                  (extra, first + extra), n_test, alpha, rng)
        spent += raced
    else:
        if race is not None:
            tests = _race(tests, more, extra, race.cap * extra * len(finalists))
            events = {n: tests[n].sign * atom_ranks(smoothed_log_ratio(*counts[n]))
                      >= tests[n].threshold for n in tests}
        lead = max(tests, key=(lambda n: tests[n].read) if rule.point_witness else (
            lambda n: (tests[n].pessimistic, tests[n].point)))
    t, (p, q) = tests[lead], laws[lead]
    event = events[lead]
    tp, fp = rng.binomial(n_test, p[event].sum()), rng.binomial(n_test, q[event].sum())
    eps, _ = t.statistic.bound(Counts(int(tp), n_test, int(fp), n_test, t.orientation),
                               delta=0.0, alpha=alpha)
    return lead, eps, finalists, spent / (extra * len(finalists))


def _race(tests: dict[str, Best], more: Callable[[list[str], int], dict[str, Best]],
          step: int, cap: float) -> dict[str, Best]:
    """Successive elimination (Maron and Moore 1997): every round, the pairs whose
    first-ranked test trails the leader's by more than one standard error of the two
    events' log-ratios drop out, the rest get ``step`` more runs each and are refitted,
    until one is left or ``cap`` runs (the second round's included) are spent."""
    spent = step * len(tests)
    while len(tests) > 1 and spent < cap:
        lead = max(tests, key=lambda n: tests[n].point)
        alive = [n for n in tests if n == lead or tests[lead].point - tests[n].point
                 <= float(np.hypot(tests[lead].se, tests[n].se))]
        if len(alive) == 1:
            return {lead: tests[lead]}
        tests = more(alive, step)
        spent += step * len(alive)
    return tests


def _race_fixed(tests: dict[str, Best], events: dict[str, np.ndarray],
                laws: dict[str, tuple[np.ndarray, np.ndarray]], cap: float,
                sizes: tuple[int, int], n_test: int, alpha: float,
                rng: np.random.Generator) -> tuple[str, int]:
    """Successive elimination on the finalists' tests as fitted: more runs of each pair
    are only counted in its test's event (no refit, no outputs kept), pooled with the
    selection's counts, and read as the bound the test split would give at the pooled
    rates; a pair trailing the leader by more than one standard error drops out."""
    step, pooled = sizes
    hits = {n: list(tests[n].counts) for n in tests}
    runs = {n: pooled for n in tests}

    def read(n: str) -> tuple[float, float]:
        h1, h0 = hits[n]
        k1, k0 = (round(h / runs[n] * n_test) for h in (h1, h0))
        eps, _ = tests[n].statistic.bound(Counts(k1, n_test, k0, n_test, "D"),
                                          delta=0.0, alpha=alpha)
        return eps, float(np.sqrt(1.0 / max(h1, 1.0) + 1.0 / max(h0, 1.0)))

    alive, spent = list(tests), step * len(tests)
    while len(alive) > 1 and spent < cap:
        reads = {n: read(n) for n in alive}
        lead = max(alive, key=lambda n: reads[n][0])
        alive = [n for n in alive if n == lead or reads[lead][0] - reads[n][0]
                 <= float(np.hypot(reads[lead][1], reads[n][1]))]
        if len(alive) == 1:
            break
        for n in alive:
            p, q = laws[n]
            e = events[n]
            a1, a0 = rng.binomial(step, p[e].sum()), rng.binomial(step, q[e].sum())
            if tests[n].orientation == "D'":
                a1, a0 = step - a0, step - a1
            hits[n][0] += a1
            hits[n][1] += a0
            runs[n] += step
        spent += step * len(alive)
    return max(alive, key=lambda n: read(n)[0]), spent - step * len(tests)


# What the audit did before (two finalists, read pessimistically, tables in halves), one
# change at a time, and the audit's rule (the last).
RULES = (Rule(2, False, False, 2), Rule(2, True, False, 2), Rule(2, True, True, 2),
         Rule(FINALISTS, True, True, 2), Rule(FINALISTS, True, True),
         Rule(FINALISTS, True, True, min_runs=MIN_EVENT_RUNS))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--row", default="svt2", choices=sorted(LAWS))
    ap.add_argument("--runs", type=int, default=10**7, help="the audit's trials")
    ap.add_argument("--seeds", type=int, default=300)
    ap.add_argument("--confidence", type=float, default=0.9)
    ap.add_argument("--reference", type=float, default=0.0859,
                    help="a bound to count the seeds reaching (DP-Sniper's for SVT2)")
    ap.add_argument("--race", type=float, default=0.0,
                    help="race the finalists on up to this many times the second round's "
                         "runs (0: no race, the audit's rule)")
    ap.add_argument("--fixed", action="store_true",
                    help="race on the tests as fitted, counting their events only (no refit, "
                         "no outputs kept)")
    ap.add_argument("--rules", default=",".join(str(i) for i in range(len(RULES))),
                    help="which rules to replay, by position (0: the oldest; "
                         f"{len(RULES) - 1}: the audit's)")
    ap.add_argument("--splits", default=None,
                    help="fit, select and test fractions of the runs, e.g. 0.04,0.11,0.85 "
                         f"(default: the audit's, {','.join(map(str, DEFAULT_SPLITS))})")
    args = ap.parse_args(argv)
    rules = [RULES[int(i)] for i in args.rules.split(",")]
    if args.splits:
        try:
            splits = tuple(float(f) for f in args.splits.split(","))
            if len(splits) != 3:
                raise InputError(f"three fractions (fit, select, test), got {args.splits!r}")
            split_sizes(args.runs, splits)  # positive, summing to 1
        except (ValueError, InputError) as e:
            ap.error(f"--splits: {e}")
        rules = [replace(r, splits=splits) for r in rules]
    law, k = LAWS[args.row]
    laws = {}
    for name in QUERY_PATTERNS:
        a, b = query_pair(name, k, far=far_distance(EPSILON))
        laws[name] = (law(a), law(b))
    print(f"{args.row}, {args.runs:.3g} runs per dataset, {args.seeds} seeds, confidence "
          f"{args.confidence}")
    alpha = 1 - args.confidence
    best = max(laws, key=lambda n: max(ceiling(*laws[n], args.runs, alpha),
                                       ceiling(*laws[n][::-1], args.runs, alpha)))
    for rule in rules:
        race = Race(args.race, not args.fixed) if args.race > 0 else None
        out = [search(laws, args.runs, rule, alpha, s, race) for s in range(args.seeds)]
        eps = np.array([o[1] for o in out])
        chosen = Counter(o[0] for o in out).most_common(3)
        cost = np.array([o[3] for o in out])
        final = sum(best in o[2] for o in out)
        print(f"  {rule.name}: mean bound {eps.mean():.4f}, >= {args.reference} on "
              f"{np.mean(eps >= args.reference):.2f} of seeds, > {EPSILON} on "
              f"{np.mean(eps > EPSILON):.2f}; {best} a finalist on {final}; second round "
              f"and race {cost.mean():.2f} x the second round (at most {cost.max():.2f})\n"
              f"    witnesses {chosen}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
