"""Search for the worst neighbouring pair: canaries, random pairs and a hypothesis search.

:func:`check_sensitivity` is the whole check: for each neighbouring relation it replays the
target on the built-in canaries (:data:`dpverify.core.data.PAIR_GENERATORS` plus
:func:`opposed_pair`), on random pairs, and on the pairs a ``hypothesis`` search proposes
while it maximises the ratio true / declared sensitivity (``hypothesis.target``) and then
shrinks a violating pair to a minimal one. Each canary pair also goes through the
invariance (taint) test of :func:`~dpverify.checks.sensitivity.replay.check_invariance`. When a
violation is found, probes on the worst pair add hints about its cause.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.checks.sensitivity.replay import (
    DEFAULT_RTOL,
    InvarianceResult,
    PairResult,
    Replay,
    check_invariance,
    measure_pair,
)
from dpverify.checks.sensitivity.targets import DataSpec, load_data, resolve_target, with_data
from dpverify.core.claims import RELATIONS, Verdict, check_relation
from dpverify.core.data import PAIR_GENERATORS, Dataset, NeighbourPair, make_pair
from dpverify.core.errors import InputError, check_positive
from dpverify.core.registry import Problem, Target
from dpverify.execution.trials import build_problem, run_target, seed_streams

SEARCHES = ("all", "canaries", "hypothesis")
RELATION_CHOICES = ("claim", "both", *RELATIONS)
DEFAULT_TRIALS = 4
DEFAULT_MAX_EXAMPLES = 100
DEFAULT_RANDOM_PAIRS = 4
DEFAULT_MAX_ABS = 100.0


def opposed_pair(
    D: Dataset, rng: np.random.Generator, relation: str = "add_remove", *,
    scale: float = 100.0,
) -> NeighbourPair:
    """Record 0 is ``scale u`` in D and ``-scale u`` in D', with the same label.

    For a GLM with a sign-symmetric loss (logistic, hinge) the two gradients point in
    opposite directions and, once clipped, are C and -C apart: 2C, the replace-one worst
    case of a clipped sum. Under add/remove the record is only added (like an outlier).

    Examples
    --------
    >>> D = Dataset(np.eye(3), np.ones(3))
    >>> p = opposed_pair(D, np.random.default_rng(0), "replace_one")
    >>> bool(np.allclose(p.D.X[0], -p.D_prime.X[0]))
    True
    """
    check_relation(relation)
    u = rng.standard_normal(D.d)
    u = scale * u / max(float(np.linalg.norm(u)), 1e-12)
    if relation == "replace_one":
        return NeighbourPair(D.replaced(0, u, 1.0), D.replaced(0, -u, 1.0), "replace_one", 0,
                             "opposed")
    return NeighbourPair(D.with_record(u, 1.0, 0), D, "add_remove", 0, "opposed")


#: The canaries checked by default: the built-in generators and :func:`opposed_pair`.
GENERATORS: dict[str, Callable[..., NeighbourPair]] = {**PAIR_GENERATORS,
                                                       "opposed": opposed_pair}


def validate_neighbours(specs: Sequence[str] | None) -> list[str]:
    """Generator names, or ``module:function`` specs; unknown names raise InputError.

    Examples
    --------
    >>> validate_neighbours(["outlier", "mod:fn"])
    ['outlier', 'mod:fn']
    """
    out = list(GENERATORS) if not specs else [str(s) for s in specs]
    for s in out:
        if s not in GENERATORS and ":" not in s:
            raise InputError(f"unknown neighbouring-pair generator {s!r}; built-in: "
                             f"{sorted(GENERATORS)}, or give module:function")
    return out


def build_pair(spec: str, D: Dataset, rng: np.random.Generator, relation: str) -> NeighbourPair:
    """A pair from a generator name (built-in or :func:`opposed_pair`) or ``module:function``.

    Examples
    --------
    >>> D = Dataset(np.eye(3), np.ones(3))
    >>> build_pair("opposed", D, np.random.default_rng(0), "add_remove").D.n
    4
    """
    if spec in GENERATORS:
        return GENERATORS[spec](D, rng, relation)
    return make_pair(spec, D, rng, relation)


def _key(name: str) -> int:
    return zlib.crc32(name.encode())


def _child(ss: np.random.SeedSequence, *keys: int) -> np.random.SeedSequence:
    """A stream keyed by names, so a pair does not depend on which others are checked."""
    return np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, *keys))


# The hypothesis search ---------------------------------------------------------------------


class _Violation(Exception):
    """Raised inside the hypothesis property when a pair breaks its declared bound."""


@dataclass
class SearchResult:
    """What the hypothesis search found under one relation."""

    relation: str
    examples: int
    minimal: PairResult | None  # the shrunk violating pair
    best: PairResult | None  # the largest ratio seen


def _label_strategy(D: Dataset) -> Any:
    from hypothesis import strategies as st

    labels = np.unique(D.y)
    if len(labels) <= 10:
        return st.sampled_from([float(v) for v in labels])
    bound = 2.0 * float(np.max(np.abs(D.y))) + 1.0
    return st.floats(-bound, bound, allow_nan=False, allow_infinity=False)


def hypothesis_search(
    evaluate: Callable[[NeighbourPair], PairResult],
    base: Dataset,
    relation: str,
    *,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    max_abs: float = DEFAULT_MAX_ABS,
    nonfinite: bool = True,
) -> SearchResult:
    """Search for a pair whose ratio true / declared sensitivity breaks 1, then shrink it.

    Under add/remove the search draws a record (features in [-max_abs, max_abs], plus NaN
    and inf when ``nonfinite``; a label from the data's labels) and the position where it
    is added to ``base``; under replace-one it draws the position, the record put there in
    D' and, optionally (it shrinks to "keep"), the record put there in D. It maximises the
    ratio with ``hypothesis.target`` and shrinks the first violating pair to a minimal one.
    The search is derandomized: the same inputs give the same examples.

    Examples
    --------
    >>> from dpverify.checks.sensitivity.replay import PairResult, differing_records
    >>> def evaluate(pair):  # a "release" of the record's largest coordinate, bound 5
    ...     x = pair.D.X[pair.index]
    ...     r = float(np.max(np.abs(x))) / 5.0
    ...     return PairResult("hypothesis", pair.relation, pair.index,
    ...                       *differing_records(pair), r, 5.0, 5 * r, 0, "q", 0, 0,
    ...                       int(r > 1), 0, 1, 1)
    >>> D = Dataset(np.zeros((4, 2)), np.ones(4))
    >>> res = hypothesis_search(evaluate, D, "add_remove", max_examples=50, nonfinite=False)
    >>> res.minimal.record_D["x"]  # shrunk: one coordinate just above the bound
    [6.0, 0.0]
    """
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import target as hyp_target
    from hypothesis.errors import Flaky

    check_relation(relation)
    strategy = _pair_strategy(base, relation, max_abs, nonfinite)
    state: dict[str, Any] = {"examples": 0, "minimal": None, "best": None}

    def make(drawn: tuple) -> NeighbourPair:
        i, (x, y), original = drawn
        if relation == "add_remove":
            return NeighbourPair(base.with_record(x, y, i), base, "add_remove", i, "hypothesis")
        D = base if original is None else base.replaced(i, *original)
        return NeighbourPair(D, base.replaced(i, x, y), "replace_one", i, "hypothesis")

    @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
              phases=(Phase.generate, Phase.target, Phase.shrink), verbosity=Verbosity.quiet,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
              print_blob=False)
    @given(strategy)
    def prop(drawn: tuple) -> None:
        state["examples"] += 1
        res = evaluate(make(drawn))
        res.generator = "hypothesis"
        score = res.worst_ratio if math.isfinite(res.worst_ratio) else 1e12
        hyp_target(float(min(score, 1e12)), label="ratio true / declared")
        best = state["best"]
        if best is None or res.worst_ratio > best.worst_ratio:
            state["best"] = res
        if res.violated:
            state["minimal"] = res  # the last violating call is the shrunk example
            raise _Violation(res.describe())

    try:
        prop()
    except (_Violation, Flaky):
        pass
    return SearchResult(relation, state["examples"], state["minimal"], state["best"])


def _pair_strategy(base: Dataset, relation: str, max_abs: float, nonfinite: bool) -> Any:
    """What the search draws: (position, record, the record replaced in D or ``None``)."""
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    finite = st.floats(-max_abs, max_abs, allow_nan=False, allow_infinity=False)
    # A zero fill makes the array strategy draw the nonzero coordinates one by one, so
    # shrinking deletes coordinates: a violation one large coordinate can carry shrinks to
    # that one coordinate.
    features = hnp.arrays(np.float64, base.d, elements=finite, fill=st.just(0.0))
    if nonfinite:
        # One record in four may hold NaN or inf; the others explore finite space. one_of
        # shrinks to its first branch, so a finite counterexample is preferred when one exists.
        mixed = hnp.arrays(np.float64, base.d, fill=st.just(0.0), elements=st.one_of(
            finite, st.sampled_from([math.nan, math.inf, -math.inf])))
        features = st.one_of(features, features, features, mixed)
    record = st.tuples(features, _label_strategy(base))
    if relation == "add_remove":
        return st.tuples(st.integers(0, base.n), record, st.none())
    return st.tuples(st.integers(0, base.n - 1), record, st.none() | record)


# The report -------------------------------------------------------------------------------


@dataclass
class SensitivityReport:
    """Everything :func:`check_sensitivity` measured, and its verdict."""

    target: str
    relations: list[str]
    verdict: Verdict
    message: str
    pairs: list[PairResult] = field(default_factory=list)
    invariance: list[InvarianceResult] = field(default_factory=list)
    searches: list[SearchResult] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when the verdict is PASS: no pair broke its declared sensitivity."""
        return self.verdict is Verdict.PASS

    @property
    def worst(self) -> PairResult | None:
        """The pair with the largest ratio (violations first)."""
        if not self.pairs:
            return None
        return max(self.pairs, key=lambda p: (p.violated, _finite_key(p.worst_ratio)))

    @property
    def counterexample(self) -> PairResult | None:
        """The smallest violating pair: hypothesis's shrunk one, else the worst canary."""
        for s in self.searches:
            if s.minimal is not None:
                return s.minimal
        w = self.worst
        return w if w is not None and w.violated else None

    def metrics(self) -> dict[str, Any]:
        """The numbers behind the verdict (the worst pair), JSON-friendly."""
        w = self.worst
        m: dict[str, Any] = {
            "worst_ratio": None, "declared": None, "true_difference": None, "release": None,
            "query": None, "step": None, "relation": None, "generator": None,
        }
        if w is not None:
            m.update(worst_ratio=w.worst_ratio, declared=w.declared,
                     true_difference=w.true_difference, release=w.release, query=w.query,
                     step=w.step, relation=w.relation, generator=w.generator, trial=w.trial)
        m.update(
            pairs=len(self.pairs), pairs_violated=sum(p.violated for p in self.pairs),
            invariance_failures=sum(not r.ok for r in self.invariance),
            hypothesis_examples=sum(s.examples for s in self.searches),
            relations=self.relations,
        )
        return m

    def evidence(self) -> dict[str, Any]:
        """The counterexample, the worst pair, the hints and the per-pair table."""
        ce, w = self.counterexample, self.worst
        return {
            "counterexample": ce.to_dict() if ce is not None else None,
            "worst_pair": w.to_dict() if w is not None else None,
            "hints": self.hints,
            "invariance": [r.to_dict() for r in self.invariance if not r.ok],
            "pairs": [{k: v for k, v in p.to_dict().items() if k not in ("record_D",
                                                                      "record_D_prime")}
                      for p in self.pairs],
        }

    def to_dict(self) -> dict[str, Any]:
        """The whole report, JSON-ready."""
        return {"target": self.target, "verdict": self.verdict.value, "message": self.message,
                "params": self.params, "metrics": self.metrics(), **self.evidence()}

    def summary(self) -> str:
        """A few lines for a terminal or an assertion message."""
        lines = [f"{self.target}: {self.verdict.value}: {self.message}"]
        ce = self.counterexample
        if ce is not None:
            lines.append("  counterexample: " + ce.describe())
            for side, rec in (("D", ce.record_D), ("D'", ce.record_D_prime)):
                if rec is not None:
                    lines.append(f"    record in {side}: x={_fmt(rec['x'])} y={rec['y']:g}")
        lines.extend(f"  hint: {h}" for h in self.hints)
        lines.extend(f"  invariance ({r.generator}, {r.relation}): {d}"
                     for r in self.invariance for d in (r.differences or [r.error] * (not r.ok)))
        return "\n".join(lines)


def _finite_key(x: float) -> float:
    return 1e300 if not math.isfinite(x) else x


def _fmt(x: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in x) + "]"


# The check ---------------------------------------------------------------------------------


@dataclass
class _World:
    """One relation's run settings."""

    relation: str
    target: Target
    params: dict[str, Any]
    problem: Problem
    trial_seed: np.random.SeedSequence


def _params_for(target: Target, user: bool, params: Mapping[str, Any], relation: str,
                scale: str) -> dict[str, Any]:
    algo, vname = target.algorithm, target.variant.name
    given = dict(params)
    if "relation" in given and given["relation"] != relation:
        raise InputError(f"--param relation={given['relation']} conflicts with checking "
                         f"under {relation}")
    base = algo.params(vname, {}, scale)
    if "relation" in base or user:
        given["relation"] = relation
    p = algo.params(vname, given, scale)
    claimed = target.variant.claim(p).relation
    if claimed != relation:
        raise InputError(f"{target.id} claims {claimed} neighbours and has no relation "
                         f"parameter; it cannot be checked under {relation}")
    return p


def _relations(relation: str, target: Target, params: Mapping[str, Any], scale: str) -> list[str]:
    if relation not in RELATION_CHOICES:
        raise InputError(f"relation must be one of {RELATION_CHOICES}, got {relation!r}")
    if relation == "both":
        return list(RELATIONS)
    if relation == "claim":
        p = target.algorithm.params(target.variant.name, params, scale)
        return [target.variant.claim(p).relation]
    return [relation]


@dataclass(frozen=True)
class SearchSettings:
    """Which pairs :func:`check_sensitivity` tries, under which relations, and how hard.

    Parameters
    ----------
    neighbours
        Canary generators (default: every one of :data:`GENERATORS`) or ``module:function``
        returning ``(D, D_prime)``.
    relation
        ``"claim"`` (the relation the target's claim names), ``"add_remove"``,
        ``"replace_one"`` or ``"both"``. A target with a ``relation`` parameter is
        configured for each relation it is checked under.
    search
        ``"canaries"`` (canaries and random pairs), ``"hypothesis"`` or ``"all"``.
    max_examples
        Examples the hypothesis search generates per relation (shrinking adds more).
    trials
        Trials per replay: independent noise, hence different trajectories, per pair.
    random_pairs
        Random pairs (:func:`dpverify.core.data.random_pair`) per relation.
    rtol
        Tolerance on the ratio, and on rounding relative to the answers' magnitude.
    max_abs
        Bound on the coordinates the hypothesis search draws.
    nonfinite
        Whether records holding NaN and inf are tried: the ``nonfinite`` canary among the
        default generators, and such coordinates in the hypothesis search.
    invariance
        Whether to run the taint test on each canary pair.

    Examples
    --------
    >>> SearchSettings(search="canaries", neighbours=("outlier",)).neighbours
    ['outlier']
    >>> SearchSettings(trials=0)
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: trials must be a finite number > 0, got 0
    """

    neighbours: Sequence[str] | None = None
    relation: str = "claim"
    search: str = "all"
    max_examples: int = DEFAULT_MAX_EXAMPLES
    trials: int = DEFAULT_TRIALS
    random_pairs: int = DEFAULT_RANDOM_PAIRS
    rtol: float = DEFAULT_RTOL
    max_abs: float = DEFAULT_MAX_ABS
    nonfinite: bool = True
    invariance: bool = True

    def __post_init__(self) -> None:
        if self.search not in SEARCHES:
            raise InputError(f"search must be one of {SEARCHES}, got {self.search!r}")
        trials = int(check_positive(self.trials, "trials", integer=True))
        max_examples = int(check_positive(self.max_examples, "max_examples", integer=True))
        if int(self.random_pairs) != self.random_pairs or self.random_pairs < 0:
            raise InputError(f"random_pairs must be an integer >= 0, got "
                             f"{self.random_pairs!r}")
        check_positive(self.rtol, "rtol")
        check_positive(self.max_abs, "max_abs")
        for name, value in (("trials", trials), ("max_examples", max_examples),
                            ("random_pairs", int(self.random_pairs)),
                            ("neighbours", self._neighbours())):
            object.__setattr__(self, name, value)

    def _neighbours(self) -> list[str]:
        """The generators to try: as given, else every built-in one (but the non-finite
        canary where non-finite records are left out)."""
        out = validate_neighbours(self.neighbours)
        return out if self.neighbours or self.nonfinite else [g for g in out
                                                              if g != "nonfinite"]


def check_sensitivity(
    target: str | Callable[..., Any],
    params: Mapping[str, Any] | None = None,
    *,
    settings: SearchSettings | None = None,
    seed: int = 0,
    scale: str = "quick",
    backend: str = "numpy",
    data: DataSpec = None,
) -> SensitivityReport:
    """Check that every release of ``target`` moves no more than its declared sensitivity.

    Parameters
    ----------
    target
        A registered ``name[:variant]``, a user's ``module:function`` (a ``.py`` path works
        too) or a callable ``algo(cur, setting, params) -> output``.
    params
        Parameter overrides. A user's algorithm receives them merged with ``n``, ``d``
        (the size of the synthetic data), ``relation``, ``epsilon`` and ``delta``.
    settings
        Which pairs to try, under which relations, and how hard (:class:`SearchSettings`;
        default: every canary, random pairs and the hypothesis search under the claimed
        relation).
    seed
        Root seed (data, noise, canaries).
    data
        The user's data: ``module:function`` or a callable returning ``(X, y)``, or the
        data themselves; default synthetic (registered targets: their own test problem).

    Returns
    -------
    SensitivityReport
        FAIL when some pair breaks a declared bound (or the taint test finds a difference),
        PASS when none does ("no violation found", not a proof), INCONCLUSIVE when the
        target releases nothing that can be replayed.

    Examples
    --------
    >>> only_outlier = SearchSettings(search="canaries", neighbours=["outlier"],
    ...                               random_pairs=0)
    >>> rep = check_sensitivity("noisy_gd:planted_no_clip", {"T": 3, "n": 50},
    ...                         settings=only_outlier)
    >>> rep.verdict.value, rep.worst.generator, rep.worst.query
    ('FAIL', 'outlier', 'grad_sum')
    >>> check_sensitivity("noisy_gd:sound", {"T": 3, "n": 50},
    ...                   settings=SearchSettings(search="canaries")).passed
    True
    """
    how = settings or SearchSettings()
    params = dict(params or {})
    dataset = load_data(data)
    tgt, user = resolve_target(target, params, dataset)
    label = target if isinstance(target, str) else tgt.algorithm.name
    relations = _relations(how.relation, tgt, params, scale)
    _check_user_pairs(how.neighbours, relations)
    root = seed_streams(seed, 4)
    report = SensitivityReport(target=str(label), relations=relations, verdict=Verdict.PASS,
                               message="", params={})
    worlds: list[_World] = []
    for rel in relations:
        p = _params_for(tgt, user, params, rel, scale)
        problem = with_data(build_problem(tgt, p, seed), dataset)
        world = _World(rel, tgt, p, problem, root[1])
        worlds.append(world)
        report.params[rel] = p
        _run_relation(world, report, how, pair_seed=root[2], backend=backend)
    _conclude(report, worlds, trials=how.trials, backend=backend, rtol=how.rtol)
    return report


def _check_user_pairs(gens: Sequence[str], relations: list[str]) -> None:
    """A user's pair has its own relation: check it is one of those checked."""
    for spec in gens:
        if spec not in GENERATORS:
            own = build_pair(spec, Dataset(np.zeros((2, 1)), np.zeros(2)),
                             np.random.default_rng(0), relations[0]).relation
            if own not in relations:
                raise InputError(f"neighbour pair {spec} is {own}, but only "
                                 f"{', '.join(relations)} is checked (use --relation)")


def _run_relation(world: _World, report: SensitivityReport, how: SearchSettings, *,
                  pair_seed: np.random.SeedSequence, backend: str) -> None:
    t, p, problem, rel = world.target, world.params, world.problem, world.relation
    # A plain run first: an algorithm that fails on its own data is the user's to fix.
    with np.errstate(all="ignore"):
        run_target(t, p, problem, trials=1, rng=world.trial_seed, backend=backend)
    replay = Replay(t, p, problem, how.trials, world.trial_seed, backend)

    def evaluate(pair: NeighbourPair, generator: str = "", prob: Problem = problem
                 ) -> PairResult:
        return measure_pair(replay.on(prob), pair, generator=generator, rtol=how.rtol)

    base = problem.data
    if how.search in ("canaries", "all"):
        for g in how.neighbours:
            pair = build_pair(g, base, np.random.default_rng(_child(pair_seed, _key(rel),
                                                                    _key(g))), rel)
            if pair.relation != rel:
                continue  # a user's pair is checked under its own relation only
            # A user's pair brings its own data (and so its own public n).
            prob = problem if g in GENERATORS else with_data(problem, pair.D)
            report.pairs.append(evaluate(pair, g, prob))
            if how.invariance:
                report.invariance.append(check_invariance(
                    replay.on(prob), pair, generator=g, n_public=prob.data.n))
        for j in range(how.random_pairs):
            rng = np.random.default_rng(_child(pair_seed, _key(rel), _key("random"), j))
            report.pairs.append(evaluate(PAIR_GENERATORS["random"](base, rng, rel),
                                         f"random#{j}"))
    if how.search in ("hypothesis", "all"):
        res = hypothesis_search(evaluate, base, rel, max_examples=how.max_examples,
                                max_abs=how.max_abs, nonfinite=how.nonfinite)
        report.searches.append(res)
        found = res.minimal if res.minimal is not None else res.best
        if found is not None:
            report.pairs.append(found)
        if res.best is not None and res.best is not found:
            res.best.generator = "hypothesis(best)"
            report.pairs.append(res.best)


def _conclude(report: SensitivityReport, worlds: list[_World], *, trials: int, backend: str,
              rtol: float) -> None:
    bad_inv = [r for r in report.invariance if not r.ok]
    violated = [q for q in report.pairs if q.violated]
    w = report.worst
    if violated:
        for world in worlds:
            mine = [q for q in violated if q.relation == world.relation]
            if mine:
                report.hints.extend(probe_hints(world, mine, trials=trials, backend=backend,
                                                rtol=rtol))
        ce = report.counterexample
        report.verdict = Verdict.FAIL
        report.message = (f"{len(violated)} of {len(report.pairs)} pairs break the declared "
                          f"sensitivity; worst: {w.describe()}")
        if ce is not None and ce is not w:
            report.message += f"; smallest: {ce.describe()}"
    elif bad_inv:
        r = bad_inv[0]
        report.verdict = Verdict.FAIL
        report.message = (f"invariance broken on {r.generator} ({r.relation}): "
                          + (r.differences[0] if r.differences else str(r.error)))
    elif w is None or all(q.cells == 0 for q in report.pairs):
        report.verdict = Verdict.INCONCLUSIVE
        report.message = "the target made no release that could be replayed on neighbours"
    else:
        report.verdict = Verdict.PASS
        report.message = (f"no violation in {len(report.pairs)} pairs under "
                          f"{', '.join(report.relations)}; worst ratio {w.worst_ratio:.4g} "
                          f"({w.generator}, {w.relation}, {w.query!r})")
    if bad_inv and report.verdict is Verdict.FAIL and violated:
        report.message += f"; invariance broken on {len(bad_inv)} pairs"


# Hints ---------------------------------------------------------------------------------------


def probe_hints(world: _World, violated: Sequence[PairResult], *, trials: int,
                backend: str = "numpy", rtol: float = DEFAULT_RTOL) -> list[str]:
    """Probes on the violating pairs of one relation that name a likely cause.

    * a non-finite difference: NaN or inf got through clipping;
    * a declared sensitivity of 0 (or an ``exact`` release) that moves;
    * under add/remove, a record with zero features and label (it contributes nothing to a
      sum of per-record terms) that still moves the answer by a factor k/(k+1): a division
      by the actual record count;
    * the smallest finite violating record scaled by 10 moving the answer ~10 times more:
      one record's contribution is not bounded (no clipping, clipping of the mean, or a
      clip threshold taken from the data);
    * a ratio of the order of the batch size on a record no larger than the data's own: a
      mean's sensitivity declared for a sum.

    Examples
    --------
    >>> only_nonfinite = SearchSettings(search="canaries", neighbours=["nonfinite"],
    ...                                 random_pairs=0)
    >>> rep = check_sensitivity("noisy_gd:planted_nan_passes", {"T": 3, "n": 50},
    ...                         settings=only_nonfinite)
    >>> "NaN" in rep.hints[0]
    True
    """
    hints: list[str] = []
    errors = [p for p in violated if p.error is not None]
    if errors:
        hints.append(f"the run raised on the {errors[0].generator} pair ({errors[0].error}): "
                     "a failure that depends on one record is itself observable")
    derived = [p for p in violated if p.setting_differences]
    if derived:
        hints.append(f"the public setting is computed from the records "
                     f"({', '.join(derived[0].setting_differences)} differ between D and D'): "
                     "declare a data-independent bound, or obtain the value through a release")
    measured = [p for p in violated if p.error is None and not p.setting_differences]
    nonfin = [p for p in measured if p.nonfinite > 0]
    if nonfin:
        p = nonfin[0]
        on_nf = any(not _finite_record(r) for q in nonfin for r in _records(q))
        hints.append(
            f"release {p.query!r} became NaN or infinite"
            + (" on a record holding NaN/inf" if on_nf else "")
            + ": a comparison such as norm > C is False for NaN, so clipping lets the record "
            "through; drop or zero non-finite records before clipping")
    finite = [p for p in measured if p.nonfinite == 0]
    zero = [p for p in finite if not p.declared]
    if zero:
        hints.append(f"release {zero[0].query!r} declares sensitivity 0 (or is exact) but "
                     f"moves by {zero[0].true_difference:.4g}: it needs noise calibrated to a "
                     "positive bound")
    if world.relation == "add_remove":
        hints.extend(_count_probe(world, trials=trials, backend=backend))
    growable = [p for p in finite if p.declared and p.pair is not None
                and all(_finite_record(r) for r in _records(p))]
    if growable:
        smallest = min(growable, key=lambda p: (p.generator != "hypothesis", _record_norm(p)))
        hints.extend(_growth_probe(world, smallest, trials=trials, backend=backend, rtol=rtol))
    bound = float(np.max(np.linalg.norm(world.problem.data.X, axis=1)))
    inside = [p for p in finite if p.declared and _record_norm(p) <= bound * (1 + 1e-9)]
    if inside:
        p = max(inside, key=lambda q: q.worst_ratio)
        info = p.release_info
        m = info.get("batch_size") or info.get("rate", 0.0) * info.get("dataset_size", 0)
        if m and m >= 8 and p.worst_ratio >= m / 4:
            hints.append(f"a record no larger than the data's own ({p.generator}) gives ratio "
                         f"{p.worst_ratio:.4g}, of the order of the batch size {m:g}: the "
                         "sensitivity of a mean (bound / m) declared for a sum?")
    return hints


def _records(p: PairResult) -> list[dict]:
    return [r for r in (p.record_D, p.record_D_prime) if r is not None]


def _finite_record(r: dict) -> bool:
    return bool(np.all(np.isfinite(r["x"])) and math.isfinite(r["y"]))


def _record_norm(p: PairResult) -> float:
    return max((float(np.linalg.norm(r["x"])) for r in _records(p)), default=0.0)


def _count_probe(world: _World, *, trials: int, backend: str) -> list[str]:
    base = world.problem.data
    pair = NeighbourPair(base.with_record(np.zeros(base.d), 0.0, 0), base, "add_remove", 0,
                         "zero_record")
    try:
        with np.errstate(all="ignore"):
            _, cur = run_target(world.target, world.params, world.problem, trials=trials,
                                rng=world.trial_seed, data=pair, backend=backend)
    except Exception:  # noqa: BLE001  (a probe that cannot run gives no hint)
        return []
    for rec in cur.ledger.records:
        td, r = rec.true_difference, rec.release
        if td is None or not np.all(np.isfinite(td)):
            continue
        a = np.linalg.norm(rec.value_D, axis=1)
        b = np.linalg.norm(rec.value_D_prime, axis=1)
        scale = np.maximum(np.maximum(a, b), 1e-300)
        # A zero record adds exact zeros to a sum: anything above rounding is a real move.
        moved = td > 1e-9 * scale
        if not np.any(moved):
            continue
        cos = np.sum(rec.value_D * rec.value_D_prime, axis=1) / np.maximum(a * b, 1e-300)
        with np.errstate(divide="ignore", invalid="ignore"):
            k = a / (b - a)  # answers S/(k+1) on D and S/k on D' give exactly k
        if np.all(cos[moved] > 1 - 1e-9) and np.all(k[moved] > 0.5):
            kk = float(np.median(k[moved]))
            n = r.dataset_size
            return [f"adding a record with zero features and label scales release {r.name!r} "
                    f"by k/(k+1) with k ~ {kk:.4g} (the public n is {n}): it divides by the "
                    "actual number of records, which add/remove neighbours make private; "
                    "divide by the public n (cur.n) or the expected batch size instead"]
        return [f"adding a record with zero features and label moves release {r.name!r}: "
                "its answer depends on how many records there are, not only on what each "
                "contributes"]
    return []


def _growth_probe(world: _World, worst: PairResult, *, trials: int, backend: str,
                  rtol: float) -> list[str]:
    pair = worst.pair
    i = pair.index
    if pair.relation == "add_remove":
        big, small = (pair.D, pair.D_prime) if pair.D.n > pair.D_prime.n else (pair.D_prime,
                                                                                 pair.D)
        x = big.X[i]
        grown = NeighbourPair(small.with_record(10.0 * x, big.y[i], i), small, "add_remove", i)
    else:
        x = pair.D_prime.X[i]
        grown = NeighbourPair(pair.D, pair.D_prime.replaced(i, 10.0 * x, pair.D_prime.y[i]),
                              "replace_one", i)
    if not np.all(np.isfinite(x)) or not np.any(x):
        return []
    replay = Replay(world.target, world.params, world.problem, trials, world.trial_seed,
                    backend)
    res = measure_pair(replay, grown, rtol=rtol)
    if res.error is None and math.isfinite(res.worst_ratio) and \
            res.worst_ratio > 5.0 * worst.worst_ratio:
        return [f"scaling the differing record by 10 raises the ratio from "
                f"{worst.worst_ratio:.4g} to {res.worst_ratio:.4g}: one record's contribution "
                "is not bounded (per-sample clipping missing, applied to the mean, or with a "
                "threshold taken from the data)"]
    return []
