"""Black-box audit: distinguish outputs on D from outputs on D', bound epsilon from below.

The auditor sees only what the target returns. Runs are drawn in seeded blocks
(:func:`dpverify.execution.trials.map_blocks`) in two stages:

1. *search*: on every candidate neighbouring pair, the first runs (the fit and selection
   fractions of ``splits``) fit each distinguisher (a direction, a covariance, a
   classifier, a table of output patterns) and score the selection runs; every (pair,
   distinguisher, event, orientation, statistic) is ranked by the bound it would give on
   the test runs (:mod:`dpverify.stats.selection`);
2. *test*: the witness is the pair whose first-ranked test promises most from point
   estimates, and that test is the one run: fresh runs of the witness (the test fraction)
   are scored by its distinguisher and counted once; exact binomial statistics on those
   counts give epsilon (:mod:`dpverify.stats.audit_bounds`).

Since nothing is chosen on the counts that bound it, the bound holds at the stated
confidence whatever was searched: pairs (StatDP's input patterns for a target taking
query answers, so the witness need not be known), distinguishers, thresholds and
orientations; keeping ``top_k`` > 1 tests costs a Bonferroni factor. ``trials`` sets the
sizes: each candidate pair's search budget (the fit and selection fractions of it, per
dataset; with more than three pairs spent by successive halving, so that the three
finalists get more) and the witness's test runs (the test fraction); ``runs_total`` in the
report counts them all. This is the pattern of DP-Sniper's DD-Search and Delta-Siege (Bichsel
et al. 2021; Lokna et al. 2023) with exact bounds and every selection accounted for (the
pitfalls in anchors/auditing.md, section 2).

The GDP bound (``bound="gdp"``) reads mu off the same kind of test (Nasr et al. 2023) and
is valid only where the output's trade-off curve is Gaussian, e.g. a Gaussian mechanism
returned as is; the report carries that assumption.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dpverify.checks.audit.distinguishers import (
    Scorer,
    crossfit_table,
    resolve_distinguishers,
    safe_scores,
)
from dpverify.checks.audit.result import AuditResult
from dpverify.checks.audit.targets import (
    AUTO_NEIGHBOURS,
    SEED_FIT,
    SEED_SAMPLES,
    AuditSetup,
    Pair,
    RunOptions,
    accountant_epsilon,
    check_same_shape,
    make_pairs,
    resolve_neighbours,
    sample_world,
)
from dpverify.core.errors import InputError
from dpverify.execution.trials import seed_streams
from dpverify.stats import audit_bounds as stats
from dpverify.stats import selection
from dpverify.stats.power import threshold_test_power
from dpverify.stats.score_audit import CLOPPER_PEARSON_FAMILY, ScoreAudit, statistics_of

if TYPE_CHECKING:
    from dpverify.execution.executors import Execution

# Fit, select, test: distinguishers need few runs to fit; the selection split chooses
# among hundreds of thresholds, whose far tails the binormal smoothing reads from it; the
# test split is what the bound is counted on.
DEFAULT_SPLITS = (0.05, 0.15, 0.8)
GDP_ASSUMPTION = ("GDP bound: assumes the output's trade-off curve is Gaussian (true for a "
                  "Gaussian mechanism whose output is returned as is); not a general bound")


def check_bound(bound: str) -> str:
    """Return ``bound`` if it names a bound (``cp``, ``gdp``, ``auto``), else raise.

    Examples
    --------
    >>> check_bound("gdp")
    'gdp'
    """
    if bound not in ("cp", "gdp", "auto"):
        raise InputError(f"bound must be 'cp', 'gdp' or 'auto', got {bound!r}")
    return bound


@dataclass
class Candidate:
    """A candidate test: a pair (its index) with a fitted distinguisher (its name), the
    selection scores, and once drawn the test scores; the plan chosen for it, if any,
    holds the event's side (``sign``) and threshold."""

    pair: int
    distinguisher: str
    scorer: Scorer
    select: selection.Selection
    test: ScoreAudit | None = None
    plan: selection.PlannedTest | None = None


@dataclass
class _Run:
    """What the two stages share: the target, its pairs, sizes and seeded streams."""

    setup: AuditSetup
    pairs: list[Pair]
    sizes: tuple[int, int, int]  # fit, select, test runs per dataset
    # Per pair and world: the seeds of the search rounds and of the test runs.
    streams: list[tuple[np.random.SeedSequence, ...]]
    block_size: int | None
    execution: Execution | None
    shapes: dict[str, list[int]] = field(default_factory=dict)
    ranked: list[selection.PlannedTest] = field(default_factory=list)
    search_runs: dict[int, int] = field(default_factory=dict)  # per pair, per dataset

    def draw(self, pi: int, world: int, n: int, stage: str) -> np.ndarray:
        """``n`` runs of pair ``pi`` on D (world 0) or D' (1), stage ``search``,
        ``extend`` (the second search round) or ``test``."""
        pr = self.pairs[pi]
        ss = self.streams[pi][2 * STAGES.index(stage) + world]
        return sample_world(self.setup, pr, world, n, ss, self.block_size, self.execution)


STAGES = ("search", "extend", "test")


@dataclass(frozen=True)
class BlackBoxOptions(RunOptions):
    """The options of a black-box audit (those of :class:`~dpverify.checks.audit.targets.
    RunOptions` and these).

    neighbours
        Pair generators, comma-separated: ``search`` (every built-in one for the target's
        input), StatDP's patterns for query answers (``one_above``, ``x_shape``, ...),
        dataset canaries (``fresh_direction``, ``clip_boundary``, ``outlier``,
        ``box_corners``, ``zero_base``, ``nonfinite``, ``random``) or ``module:function``
        returning ``(D, D_prime)`` or a list of pairs. ``auto`` (default): ``search`` for query
        answers and a user's callable, the worst-case canary where a registered target
        declares a clip (:func:`~dpverify.checks.audit.targets.resolve_neighbours`), else
        ``fresh_direction``.
    trials
        Runs per dataset that set the split sizes: each pair's search budget (fit and
        selection fractions) and the witness's test runs (test fraction).
    distinguisher
        A name of :mod:`dpverify.checks.audit.distinguishers`, several, or ``"auto"``.
    bound
        ``"cp"`` (exact and assumption-free: the conditional or the Clopper-Pearson
        statistic, whichever the selection anticipates more from; ``"auto"`` means this
        in black-box), ``"gdp"``, or statistic objects of
        :mod:`dpverify.stats.score_audit` (one, or several to choose among).
    splits, top_k
        Fractions of the runs used to fit, select and test; tests kept (Bonferroni).

    Examples
    --------
    >>> BlackBoxOptions(splits=(0.5, 0.5))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: black-box splits are three fractions ..., got [0.5, 0.5]
    """

    trials: int = 100_000
    neighbours: str | Sequence[str] = AUTO_NEIGHBOURS
    distinguisher: str | Sequence[str] = "auto"
    bound: Any = "cp"
    splits: Sequence[float] = DEFAULT_SPLITS
    top_k: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.bound, str):
            check_bound(self.bound)
        else:
            statistics_of(self.bound)
        if len(self.splits) != 3:
            raise InputError(f"black-box splits are three fractions (fit, select, test), "
                             f"got {list(self.splits)}")
        stats.split_sizes(self.trials, self.splits)
        if int(self.top_k) < 1:
            raise InputError(f"top_k must be >= 1, got {self.top_k}")


def audit_blackbox(target: str, options: BlackBoxOptions | None = None) -> AuditResult:
    """Black-box epsilon lower bound of ``target`` from ``options.trials`` runs per neighbour.

    ``target`` is ``name``, ``name:variant`` (registered) or ``module:function`` with the
    signature ``f(data, rng, trials) -> array (trials, ...)``; a registered target, or a
    callable with a :func:`~dpverify.checks.audit.targets.declare_mechanism` declaration,
    has its own claim.

    Returns
    -------
    AuditResult
        ``epsilon_lower`` from the chosen bound; ``details`` holds the CP bound (and the
        GDP bound when asked for), the witness pair and the distinguisher that achieved
        it; ``evidence["test"]`` the test's threshold, statistic and held-out counts,
        ``evidence["search"]`` what each candidate pair anticipated;
        ``epsilon_detectable`` what a test chosen and counted on splits of these sizes,
        at this level, catches with ``detect_probability``
        (:func:`~dpverify.stats.power.threshold_test_power`).

    Examples
    --------
    >>> r = audit_blackbox("gaussian_mechanism:sound",
    ...                    BlackBoxOptions(trials=20000, seed=1, distinguisher="projection"))
    >>> r.verdict.value, 0.0 < r.epsilon_lower < r.epsilon_claimed
    ('PASS', True)
    """
    o = options or BlackBoxOptions()
    dists = resolve_distinguishers(o.distinguisher)
    setup = o.prepare(target)
    if o.bound == "gdp" and setup.delta == 0:
        raise InputError("bound 'gdp' assumes a Gaussian trade-off curve, which has no finite "
                         "epsilon at delta 0: audit a pure-DP claim with bound 'cp'")
    pairs = make_pairs(setup, resolve_neighbours(setup, o.neighbours))
    run = _start(setup, pairs, o)
    fit_rng = np.random.default_rng(seed_streams(o.seed, SEED_FIT + 1)[SEED_FIT])
    cands = _search(run, dists, fit_rng)
    gdp_bound = isinstance(o.bound, str) and o.bound == "gdp"
    cp = _choose_and_count(run, cands, "cp" if gdp_bound else o.bound, o.alpha, o.top_k)
    gdp = _choose_and_count(run, cands, "gdp", o.alpha, o.top_k) if gdp_bound else None
    eps_acc, acc_note = (accountant_epsilon(setup) if o.accountant
                         else (None, "not computed (accountant=False)"))
    chosen, ci = gdp if gdp is not None else cp
    details, evidence = _report(run, cands, cp, gdp, dists)
    evidence["accountant"] = acc_note
    witness = cands[ci]
    if witness.test is not None and witness.plan is not None:
        evidence["roc"] = witness.test.roc(sign=witness.plan.sign)
    res = AuditResult(setup.name, "blackbox", chosen.epsilon, setup.epsilon_claimed, eps_acc,
                      setup.delta, o.confidence, o.trials, _bound_name(o.bound), details,
                      evidence, [GDP_ASSUMPTION] if gdp_bound else [])
    if o.detect_probability is None:
        return res
    n_sel = run.sizes[1]
    return res.with_power(threshold_test_power(
        chosen.n_pos, chosen.n_neg, alpha=chosen.alpha, delta=setup.delta,
        epsilon=setup.epsilon_claimed, method=chosen.method,
        probability=o.detect_probability, selection=(n_sel, n_sel)))


def _bound_name(bound: Any) -> str:
    """The bound a result reports: ``cp``, ``gdp`` or the statistics' names."""
    if isinstance(bound, str):
        return "gdp" if bound == "gdp" else "cp"
    return "+".join(s.name for s in statistics_of(bound))


def _start(setup: AuditSetup, pairs: list[Pair], o: BlackBoxOptions) -> _Run:
    n_fit, n_sel, n_test = stats.split_sizes(o.trials, o.splits)
    root = seed_streams(setup.seed, SEED_SAMPLES + 1)[SEED_SAMPLES]
    streams = []
    for ss in seed_streams(root, len(pairs)):
        s_D, s_Dp = ss.spawn(2)
        per_D, per_Dp = s_D.spawn(len(STAGES)), s_Dp.spawn(len(STAGES))
        streams.append(tuple(x for pair in zip(per_D, per_Dp, strict=True) for x in pair))
    return _Run(setup, pairs, (n_fit, n_sel, n_test), streams, o.block_size, o.execution)


def _search(run: _Run, dists: list[tuple[str, Any]],
            fit_rng: np.random.Generator) -> list[Candidate]:
    """Stage 1: fit every distinguisher on the pairs and score their selection runs.

    With more than :data:`FINALISTS` pairs the search budget (the fit and selection runs
    of every pair) is spent by successive halving (Jamieson and Talwalkar 2016): half of
    it on every pair, the other half on the pairs whose best test anticipated most from
    point estimates, whose distinguishers are then refitted on all their search runs.
    Only the finalists' candidates go on to the choice of the test.
    """
    n_fit, n_sel, _ = run.sizes
    budget = n_fit + n_sel
    outputs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    halving = len(run.pairs) > FINALISTS
    first = max(budget // 2, 2) if halving else budget
    for pi in range(len(run.pairs)):
        outputs[pi] = _draw_pair(run, pi, first, "search")
    cands = [c for pi in outputs for c in _fit_pair(run, pi, *outputs[pi], dists, fit_rng)]
    if not halving:
        return cands
    best = _promise(selection.rank_tests([c.select for c in cands], CLOPPER_PEARSON_FAMILY,
                                         delta=run.setup.delta, alpha=0.05), cands,
                    explore=True)
    finalists = sorted(best, key=best.__getitem__, reverse=True)[:FINALISTS]
    outputs = {pi: outputs[pi] for pi in finalists}
    extra = (budget - first) * len(run.pairs) // FINALISTS
    out: list[Candidate] = []
    for pi in finalists:
        more = _draw_pair(run, pi, extra, "extend")
        pooled = (np.vstack([outputs[pi][0], more[0]]), np.vstack([outputs[pi][1], more[1]]))
        out.extend(_fit_pair(run, pi, *pooled, dists, fit_rng))
    return out


# Pairs kept for the second round of a search (the rest stop after the first). Three
# rather than two, for the same runs: the best pattern of SVT2 at 10^7 runs reached the
# final round in 186 of 200 replayed searches, of 148 with two, and the mean bound rose
# from 0.0855 to 0.0863 (benchmarks/search_choice.py, with tables in halves).
FINALISTS = 3


# A pair's promise is read first off events holding at least this many of the pooled
# selection runs of both worlds, and leaving out as many: with equal laws, k runs beyond a
# threshold all fall on one world with chance 2^(1 - k). A mean clipped to a box and
# released at its claim (tests/test_audit_search.py's box_mean) explored lucky far tails
# of `norm` and `logistic` (5 runs to 0: point estimates of 1.4 to 2.1, pessimistic ones
# 0) before the box corners' telling pair (1.1, pessimistic 0.86) at 10^5 runs, seeds 2
# and 4 (bounds 0.34 and 0.21 where the box corners give 0.96 and 0.99), and at 2 x 10^4
# runs, seed 6, took such a tail's pair as the witness (bound 0).
MIN_EVENT_RUNS = 10


def _tail_runs(test: selection.PlannedTest, sel: selection.Selection) -> int:
    """The fewer of the selection runs (both worlds pooled) in and out of ``test``'s event."""
    scores = test.sign * np.concatenate([sel.pos, sel.neg])
    inside = int(np.count_nonzero(scores >= test.threshold))
    return min(inside, scores.size - inside)


def _promise(ranked: list[selection.PlannedTest], cands: list[Candidate], *,
             explore: bool) -> dict[int, tuple[bool, float]]:
    """Each pair's promise: the best point estimate of its planned tests when exploring
    (which pairs get more runs), else its first-ranked test's reading (the test it would
    run, for the choice of the witness).

    Pairs are compared by point estimates: a rare event's promise is what more runs would
    tell, and a pessimistic reading of its few counts passes it over (SVT2's
    most_above_rest_below reached the final round in 96 of 200 replayed searches at 10^7
    runs that way, in 148 by point estimates, and was the witness in 61 and 93 of them,
    in 124 with the witness too chosen by point estimates; benchmarks/search_choice.py).
    Exploring reads every planned test, since the evidence may lie in any distinguisher
    (report noisy max 3 at 10^6 runs: read by first-ranked tests alone, its telling pairs,
    one_above_rest_below and most_above_rest_below, stop after the first round and the
    audit passes it at 0.04). The witness is chosen by the test it would run, whose
    threshold was ranked pessimistically first: the best point estimate over all of a
    pair's tests is often a lucky tail's (naive floating-point Laplace at 2 x 10^4 runs
    took its weaker pair that way, 0.28 where the other pair's first-ranked test gives
    0.76).
    Both read first the events that enough selection runs fall in and out of
    (:data:`MIN_EVENT_RUNS`; a point estimate off a handful of runs is their luck): a
    promise is (whether its event has that many, its reading).

    The witness's reading is the point estimate only for a table of the mechanism's own
    outcomes (:func:`_outcomes`), where the measurements above were made; a fitted score's
    threshold, or a table's over bins of values, is the best of many events whose point
    estimates share one winner's curse, and is read at the level it was ranked at.
    """
    best: dict[int, tuple[bool, float]] = {}
    for p in ranked:  # best first
        c = cands[p.candidate]
        if explore or c.pair not in best:
            value = p.fallback if explore or _outcomes(c) else p.anticipated
            read = (_tail_runs(p, c.select) >= MIN_EVENT_RUNS, value)
            best[c.pair] = max(best.get(c.pair, (False, -np.inf)), read)
    return best


# Distinguishers that tabulate exact features of an output: its value where it takes few
# (a sparse vector's pattern, a noisy max's index) and its float's bits. ``pattern``
# tabulates bins of values (on outputs that are all codes it scores every output 0).
OUTCOME_TABLES = ("histogram", "lowbits")


def _outcomes(c: Candidate) -> bool:
    """Whether a candidate is a table of the mechanism's outcomes (:data:`OUTCOME_TABLES`),
    not of bins of its values nor a fitted score.

    On a clipped sum released beside a noisy count (2 x 10^4 runs, replace-one, seeds 0
    to 3) the witness read by point estimates was a fitted score's far threshold or a
    table of value bins on seeds 0 and 2 (point estimates 1.31 and 1.07, ranked 0.52 and
    0.39; bounds 0.15 and 0.10), where the box corners give 0.94 to 0.98; the box-clipped
    mean at 10^5 runs, seed 1, took a table of bins at 1.06 (ranked 0.69, bound 0.39) over
    the box corners (0.96).
    """
    return c.distinguisher in OUTCOME_TABLES


def _draw_pair(run: _Run, pi: int, n: int, stage: str) -> tuple[np.ndarray, np.ndarray]:
    out_D, out_Dp = run.draw(pi, 0, n, stage), run.draw(pi, 1, n, stage)
    pr = run.pairs[pi]
    check_same_shape(run.setup, out_D, out_Dp, pr.label)
    run.shapes[pr.label] = list(out_D.shape[1:])
    run.search_runs[pi] = run.search_runs.get(pi, 0) + n
    return out_D, out_Dp


def _fit_pair(run: _Run, pi: int, out_D: np.ndarray, out_Dp: np.ndarray,
              dists: list[tuple[str, Any]], fit_rng: np.random.Generator) -> list[Candidate]:
    """Every distinguisher fitted on the first share of the search runs, scoring the rest;
    a table over a small alphabet is cross-fitted on them all instead."""
    n_fit, n_sel, n_test = run.sizes
    n_fit = max(1, min(len(out_D) - 1, round(len(out_D) * n_fit / (n_fit + n_sel))))
    label = run.pairs[pi].label
    out = []
    for name, fit in dists:
        scorer = fit(out_D[:n_fit], out_Dp[:n_fit], fit_rng)
        atoms = getattr(scorer, "atoms", None)
        level = None
        rows = None if atoms is None else (atoms(out_D), atoms(out_Dp))
        if rows is not None and small_alphabet(*rows):
            # The atoms need all the counts to be told apart.
            scorer, pos, neg = crossfit_table(atoms, rows, TABLE_FOLDS)
            level = TABLE_LEVEL
        else:
            pos = safe_scores(scorer, out_D[n_fit:], name)
            neg = safe_scores(scorer, out_Dp[n_fit:], name)
        sel = selection.Selection(f"{label} | {name}", pos, neg, n_test, n_test, level)
        out.append(Candidate(pi, name, scorer, sel))
    return out


# A table over few atoms (the patterns of a sparse vector, the index of a noisy max) is
# cross-fitted in this many folds (distinguishers.crossfit_table). Replayed on the exact
# laws (benchmarks/search_choice.py, against halves): SVT2 at 10^7 runs reaches a mean
# bound of 0.0871 against 0.0864 (300 seeds); SVT4 is flagged on 0.53 of 200 seeds at 10^5
# runs against 0.41, on 0.78 at 2 x 10^5 against 0.70.
TABLE_FOLDS = 10

# Cross-fitted table rates are read at this level in ranking: they carry no fitting
# optimism, only that of the best of a few events and pairs. Measured on the catalogue:
# 0.01 (the level of fitted scores) keeps sparse vector's likelier half_half event over
# the rarer, tighter event of most_above_rest_below (at 10^7 runs it loses 0.005 to 0.01
# of epsilon 0.1); point estimates (0.5) chase lucky rare events at small samples (SVT4
# at 2 x 10^5 runs flagged on 3 of 6 seeds, against 5 of 6 at 0.05).
TABLE_LEVEL = 0.05

# A small alphabet: at most this many distinct output rows, each seen this often on
# average over the search runs of both worlds.
SMALL_ALPHABET, ATOM_COUNT = 256, 50


def small_alphabet(out_D: np.ndarray, out_Dp: np.ndarray) -> bool:
    """Whether the outputs take few distinct values (rows), each seen many times.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> small_alphabet(rng.integers(0, 5, (1000, 1)), rng.integers(0, 5, (1000, 1)))
    True
    >>> small_alphabet(rng.normal(size=(1000, 1)), rng.normal(size=(1000, 1)))
    False
    """
    rows = np.vstack([out_D, out_Dp]).reshape(len(out_D) + len(out_Dp), -1)
    limit = min(SMALL_ALPHABET, rows.shape[0] // ATOM_COUNT)
    # Rows are told apart by a random projection (equal rows project equally; distinct
    # ones almost surely not), first on a few thousand of them: most outputs fail there.
    w = np.random.default_rng(0).uniform(1.0, 2.0, rows.shape[1])
    for part in (rows[:4096], rows):
        keys = np.where(np.isnan(part), np.pi, part) @ w
        if np.unique(keys).size > limit:
            return False
    return True


def _choose_and_count(run: _Run, cands: list[Candidate], bound: Any, alpha: float,
                      top_k: int) -> tuple[stats.ThresholdBound, int]:
    """Stage 2: plan on the selection scores, count the plans on fresh test runs."""
    top_k = int(top_k)
    if top_k < 1:
        raise InputError(f"top_k must be >= 1, got {top_k}")
    ranked = selection.rank_tests([c.select for c in cands], statistics_of(bound),
                                  delta=run.setup.delta, alpha=alpha / top_k, keep=top_k)
    if not run.ranked:
        run.ranked = ranked
    promise = _promise(ranked, cands, explore=False)
    witness = max(promise, key=promise.__getitem__)
    plans = [p for p in ranked if cands[p.candidate].pair == witness][:top_k]
    results = []
    for plan in plans:
        c = cands[plan.candidate]
        if c.test is None:
            _score_test(run, cands, c.pair)
        assert c.test is not None
        res = c.test.bound_planned(plan, delta=run.setup.delta, alpha=alpha / len(plans))
        results.append((res, plan.candidate))
    best = max(results, key=lambda r: r[0].epsilon)
    cands[best[1]].plan = plans[results.index(best)]
    return best


def _score_test(run: _Run, cands: list[Candidate], pi: int) -> None:
    """Draw the test runs of pair ``pi`` once, and score them by its every distinguisher."""
    n_test = run.sizes[2]
    mine = [c for c in cands if c.pair == pi]
    scores: dict[int, list[list[np.ndarray]]] = {id(c): [[], []] for c in mine}
    # In chunks of fixed size (each its own seeded stream): only scores are kept.
    chunks = [min(TEST_CHUNK, n_test - a) for a in range(0, n_test, TEST_CHUNK)]
    for world in (0, 1):
        pr = run.pairs[pi]
        root = run.streams[pi][2 * STAGES.index("test") + world]
        for n, ss in zip(chunks, root.spawn(len(chunks)), strict=True):
            out = sample_world(run.setup, pr, world, n, ss, run.block_size, run.execution)
            for c in mine:
                scores[id(c)][world].append(safe_scores(c.scorer, out, c.distinguisher))
    for c in mine:
        c.test = ScoreAudit(*(np.concatenate(x) for x in scores[id(c)]), label=c.select.label)


# Test runs are drawn and scored this many at a time.
TEST_CHUNK = 1 << 20


def _report(run: _Run, cands: list[Candidate],
            cp: tuple[stats.ThresholdBound, int],
            gdp: tuple[stats.ThresholdBound, int] | None,
            dists: list[tuple[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    chosen, ci = gdp if gdp is not None else cp
    n_fit, n_sel, n_test = run.sizes
    tested = {c.pair for c in cands if c.test is not None}
    witness = run.pairs[cands[ci].pair]
    details = {
        "epsilon_lower_cp": cp[0].epsilon,
        "epsilon_lower_gdp": None if gdp is None else gdp[0].epsilon,
        "mu_lower": None if gdp is None else gdp[0].mu,
        "epsilon_true": run.setup.epsilon_true,
        "runs_total": 2 * (sum(run.search_runs.values()) + len(tested) * n_test),
        "search_runs": {run.pairs[pi].label: n for pi, n in run.search_runs.items()},
        "split": [n_fit, n_sel, n_test],
        "pairs": [p.label for p in run.pairs],
        "distinguishers": [n for n, _ in dists],
        "pair": witness.label,
        "distinguisher": cands[ci].distinguisher,
        "low_bits_vary": getattr(cands[ci].scorer, "low_bits_vary", None),
        "statistic": chosen.statistic,
        "relation": run.setup.relation,
        "instance": list(run.setup.notes),
    }
    evidence: dict[str, Any] = {
        "test": chosen.to_dict(),
        "witness": witness.describe(),
        "search": _search_summary(run, cands),
        "output_shape": run.shapes,
    }
    if gdp is not None:
        evidence["cp_test"] = cp[0].to_dict()
    return details, evidence


def _search_summary(run: _Run, cands: list[Candidate]) -> list[dict[str, Any]]:
    """Each candidate pair's best test as the selection anticipated it (descriptive)."""
    best: dict[int, selection.PlannedTest] = {}
    for p in run.ranked:  # best first
        best.setdefault(cands[p.candidate].pair, p)
    return [{"pair": run.pairs[pi].label, "distinguisher": cands[p.candidate].distinguisher,
             "anticipated": p.anticipated, "fallback": p.fallback}
            for pi, p in sorted(best.items(), key=lambda kv: -kv[1].anticipated)]
