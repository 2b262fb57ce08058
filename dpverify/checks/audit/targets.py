"""What an audit runs: a registered variant or a user's callable, its claim, its neighbours.

A target is either a registered algorithm (``name`` or ``name:variant``: it runs through
the curator, so it has a ledger and an accountant) or any Python callable
``module:function`` with the signature ``f(data, rng, trials) -> array (trials, ...)``,
where ``data`` is a :class:`~dpverify.core.data.Dataset` (or whatever the user's pair function
returned) and ``rng`` a NumPy Generator; membership inference hands a callable its records
the same way (:func:`~dpverify.core.data.in_form`). Outputs are drawn in fixed-size seeded blocks
through :func:`dpverify.execution.trials.map_blocks`, so results depend only on the root seed
and the block size.

A callable whose input is a vector of query answers says so with :func:`declare_mechanism`
(or the ``queries`` parameter): it is then handed vectors, and its neighbours are searched
over StatDP's input patterns (:func:`dpverify.core.data.query_search_pairs`) unless given. The
declaration may carry the claim too, so ``dpverify audit module:function`` needs no
``--epsilon``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dpverify.accounting.accountant import account_ledger, claimed_epsilon
from dpverify.core.claims import PrivacyClaim, check_relation
from dpverify.core.curator import Ledger
from dpverify.core.data import (
    PAIR_GENERATORS,
    QUERY_PATTERNS,
    QUERY_RELATIONS,
    Dataset,
    NeighbourPair,
    as_dataset,
    canary_worst_case,
    check_finite,
    check_query_relation,
    far_distance,
    make_pair,
    query_neighbours,
    query_pair,
    query_search_pairs,
    synthetic_classification,
)
from dpverify.core.errors import (
    InputError,
    UnknownTargetError,
    check_delta,
    check_epsilon,
    check_positive,
    check_probability,
)
from dpverify.core.registry import Problem, Target, is_registered_target, load_callable, resolve
from dpverify.execution.trials import (
    DEFAULT_BLOCK,
    BlockPlan,
    OutputBlock,
    build_problem,
    map_blocks,
    run_target,
    sample_outputs,
    seed_streams,
)
from dpverify.stats.power import DETECT_PROBABILITY

if TYPE_CHECKING:
    from dpverify.execution.executors import Execution

# Root-seed children: 0 is the problem's data (build_problem), then these.
SEED_PAIRS, SEED_SAMPLES, SEED_FIT, SEED_ACCOUNT, SEED_PROBE = 1, 2, 3, 4, 5

# The base dataset a user's callable is audited on when a built-in generator makes the pair.
DEFAULT_USER_N, DEFAULT_USER_D = 100, 2
# "search" over the dataset canaries: every built-in one that makes an ordinary record.
DATASET_SEARCH = ("fresh_direction", "clip_boundary", "outlier", "box_corners", "random",
                  "zero_base")


@dataclass(frozen=True)
class MechanismDeclaration:
    """What a user's callable declares about itself: its claim and its input.

    ``queries`` is the length of the vector of query answers it takes (``None``: it takes
    a dataset); ``relation`` the neighbouring relation of its claim (for query answers one
    of :data:`dpverify.core.data.QUERY_RELATIONS`); ``epsilon_true`` the epsilon known from
    analysis where it differs from the claim (a buggy mechanism's), for reports.
    """

    epsilon: float | None = None
    delta: float | None = None
    relation: str | None = None
    queries: int | None = None
    epsilon_true: float | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if self.epsilon is not None:
            check_epsilon(self.epsilon)
        if self.delta is not None:
            check_delta(self.delta)
        if self.queries is not None and int(self.queries) < 1:
            raise InputError(f"queries must be a positive length, got {self.queries!r}")
        if self.relation is not None:
            (check_query_relation if self.queries is not None else check_relation)(
                self.relation)


def declare_mechanism(**fields: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Attach a :class:`MechanismDeclaration` to a callable target.

    Examples
    --------
    >>> @declare_mechanism(epsilon=0.1, delta=0.0, queries=1, relation="add_remove")
    ... def laplace(answers, rng, trials):
    ...     return answers[0] + rng.laplace(0.0, 10.0, size=(trials, 1))
    >>> laplace.dpverify_declaration.queries
    1
    """
    decl = MechanismDeclaration(**fields)

    def attach(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.dpverify_declaration = decl  # type: ignore[attr-defined]
        return fn

    return attach


@dataclass
class AuditSetup:
    """A resolved target with its claim, parameters and problem."""

    name: str
    epsilon_claimed: float
    delta: float
    relation: str
    target: Target | None = None
    params: dict[str, Any] = field(default_factory=dict)
    problem: Problem | None = None
    claim: PrivacyClaim | None = None
    fn: Callable[..., Any] | None = None
    seed: int = 0
    backend: str = "numpy"
    relation_given: bool = True  # False: a callable's relation is read off its pairs
    queries: int | None = None  # the length of a query-answer input (None: a dataset)
    epsilon_true: float | None = None
    given: frozenset[str] = frozenset()  # the parameters the user set
    notes: list[str] = field(default_factory=list)  # how the audit instance was chosen
    rng_probed: bool = False  # whether a callable was tried twice on one seed

    @property
    def registered(self) -> bool:
        return self.target is not None


@dataclass
class Pair:
    """Two neighbouring inputs for the target and a label for reports."""

    label: str
    D: Any
    D_prime: Any
    pair: NeighbourPair | None = None  # when both are Datasets

    def describe(self) -> dict[str, Any]:
        """The pair for a report: the two inputs themselves when they are short vectors.

        Examples
        --------
        >>> Pair("one_above", np.ones(2), np.array([2.0, 1.0])).describe()["D_prime"]
        [2.0, 1.0]
        """
        out: dict[str, Any] = {"label": self.label}
        if self.pair is not None:
            pr = self.pair
            out.update(relation=pr.relation, index=pr.index)
            # The record that differs: in D and in D' (replace-one), or the one that is in
            # the larger of the two only (add/remove).
            big = pr.D if pr.D.n >= pr.D_prime.n else pr.D_prime
            rows = {"record_D": pr.D, "record_D_prime": pr.D_prime} if (
                pr.relation == "replace_one") else {"record": big}
            out.update({k: ds.X[pr.index].tolist() for k, ds in rows.items()
                        if ds.d <= 64})
        for key, v in (("D", self.D), ("D_prime", self.D_prime)):
            try:  # a short vector of numbers; datasets and (X, y) tuples are left out
                arr = np.asarray(v, dtype=float)
            except (TypeError, ValueError):
                continue
            if arr.size <= 64:
                out[key] = arr.tolist()
        return out


@dataclass(frozen=True)
class TargetOptions:
    """What every audit takes: the claim to test, the target's parameters and its run.

    ``epsilon``, ``delta``: the claim (``None``: a registered target's own; delta = 0 is
    pure DP); ``confidence``: 1 - alpha of the reported bound, after every correction;
    ``params``: parameter overrides; ``seed``, ``scale`` (``quick``/``thorough``),
    ``relation`` (default: the claim's) and ``backend`` as for :func:`prepare`;
    ``detect_probability``: the probability at which ``epsilon_detectable`` is caught
    (``None``: not computed, for repeated self-tests).

    Examples
    --------
    >>> TargetOptions(confidence=1.5)
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: confidence must be a number in (0, 1), got 1.5
    """

    epsilon: float | None = None
    delta: float | None = None
    confidence: float = 0.95
    params: Mapping[str, Any] | None = None
    seed: int = 0
    scale: str = "quick"
    relation: str | None = None
    backend: str = "numpy"
    detect_probability: float | None = DETECT_PROBABILITY

    def __post_init__(self) -> None:
        object.__setattr__(self, "confidence", check_probability(self.confidence,
                                                                 "confidence"))
        if self.detect_probability is not None:
            check_probability(self.detect_probability, "detect_probability")

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    def prepare(self, target: str, params: Mapping[str, Any] | None = None) -> AuditSetup:
        """The target resolved with these options (``params`` replacing :attr:`params`)."""
        return prepare(target, epsilon=self.epsilon, delta=self.delta,
                       params=self.params if params is None else params, seed=self.seed,
                       scale=self.scale, relation=self.relation, backend=self.backend)


@dataclass(frozen=True)
class RunOptions(TargetOptions):
    """Options of an audit that runs the target many times: ``trials`` per world (each
    mode sets its own default), ``block_size`` (trials per seeded block; results depend
    on the seed and the block size only), ``execution`` (where blocks run, serial by
    default) and ``accountant`` (whether to account the target's ledger for
    ``epsilon_accountant``; skipped in repeated self-tests).

    Examples
    --------
    >>> RunOptions(trials=2.5)
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: trials must be a positive integer, got 2.5
    """

    trials: int = 1
    block_size: int | None = None
    execution: Execution | None = None
    accountant: bool = True

    def __post_init__(self) -> None:
        check_trials(self)
        super().__post_init__()


def check_trials(options: Any, name: str = "trials") -> None:
    """Coerce ``options.<name>`` to a positive int in place (a frozen options object)."""
    object.__setattr__(options, name, int(check_positive(getattr(options, name), name,
                                                         integer=True)))



def prepare(
    target: str,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    scale: str = "quick",
    relation: str | None = None,
    backend: str = "numpy",
) -> AuditSetup:
    """Resolve ``target`` and its claim; user-given ``epsilon``/``delta`` override the claim.

    Examples
    --------
    >>> s = prepare("noisy_gd:sound", params={"T": 3})
    >>> s.registered, s.epsilon_claimed, s.delta
    (True, 1.0, 1e-05)
    """
    if epsilon is not None:
        epsilon = check_epsilon(epsilon)
    if delta is not None:
        delta = check_delta(delta)
    params = dict(params or {})
    target = str(target).strip()
    if not target:
        raise InputError("no target given: name, name:variant or module:function")
    if is_registered_target(target):
        if relation is not None:
            check_relation(relation)
        t = resolve(target)
        p = t.algorithm.params(t.variant.name, params, scale)
        claim = t.variant.claim(p)
        d = delta if delta is not None else claim.delta
        if d is None:  # a zCDP claim: audit at a conventional delta
            d = 1e-5
        eps = epsilon if epsilon is not None else claimed_epsilon(claim, d)
        problem = build_problem(t, p, seed)
        return AuditSetup(t.id, float(eps), float(d), relation or claim.relation, t, p,
                          problem, claim, seed=seed, backend=backend,
                          given=frozenset(params))
    if ":" in target:
        return _prepare_callable(target, epsilon, delta, relation, params, seed, backend)
    resolve(target)  # raises UnknownTargetError naming the registered algorithms
    raise UnknownTargetError(f"unknown target {target!r}")  # pragma: no cover


def _prepare_callable(target: str, epsilon: float | None, delta: float | None,
                      relation: str | None, params: dict[str, Any], seed: int,
                      backend: str) -> AuditSetup:
    try:
        fn = load_callable(target)
    except InputError as e:
        raise UnknownTargetError(
            f"target {target!r} is neither a registered algorithm nor an importable "
            f"module:function ({e})") from None
    decl = getattr(fn, "dpverify_declaration", None) or MechanismDeclaration()
    epsilon = epsilon if epsilon is not None else decl.epsilon
    delta = delta if delta is not None else decl.delta
    if epsilon is None or delta is None:
        raise InputError(f"auditing the callable {target!r} needs the claim: give "
                         "--epsilon and --delta")
    queries = params.pop("queries", decl.queries)
    if queries is not None:
        queries = int(check_positive(queries, "queries", integer=True))
    given = relation is not None or decl.relation is not None
    relation = relation or decl.relation or "add_remove"
    (check_query_relation if queries is not None else check_relation)(relation)
    return AuditSetup(target, float(epsilon), float(delta), relation, params=params, fn=fn,
                      seed=seed, backend=backend, relation_given=given, queries=queries,
                      epsilon_true=decl.epsilon_true)


AUTO_NEIGHBOURS = "auto"
# The loss under which a clipped per-sample gradient is the same at every iterate.
WORST_CASE_LOSS = "linear"


def resolve_neighbours(setup: AuditSetup, neighbours: str | Sequence[str]
                       ) -> str | Sequence[str]:
    """``auto``: ``search`` for a target taking query answers or a user's callable, the
    worst-case canary where a registered target declares a clip, else fresh_direction.

    The canary (:func:`~dpverify.core.data.canary_worst_case`) attains the clip norm. For a
    target whose per-sample gradients of a loss are clipped (a ``loss`` parameter the
    user left at its default), the audit instance takes the linear loss, whose gradient
    -y x keeps the canary at the clip norm at every step: clipping makes the claim hold
    for every loss, so this is the worst case the claim covers (a logistic canary's
    gradient shrinks as the model fits it, and the audit sees less than the accountant
    charges). The choice is recorded in ``setup.notes``.

    Examples
    --------
    >>> s = prepare("noisy_gd:sound", params={"T": 3})
    >>> resolve_neighbours(s, "auto"), s.params["loss"]
    ('worst_case', 'linear')
    >>> s = prepare("noisy_gd:sound", params={"T": 3, "loss": "logistic"})
    >>> resolve_neighbours(s, "auto"), s.params["loss"]
    ('worst_case', 'logistic')
    """
    if neighbours != AUTO_NEIGHBOURS:
        return neighbours
    if setup.queries is not None:
        return "search"
    if not setup.registered:
        return "search"  # a user's code: nothing says which record is its worst case
    if setup.params.get("clip") is None:
        return "fresh_direction"
    loss = setup.params.get("loss")
    if loss is not None and "loss" not in setup.given and loss != WORST_CASE_LOSS:
        assert setup.target is not None
        params = {**setup.params, "loss": WORST_CASE_LOSS}
        try:
            problem = build_problem(setup.target, params, setup.seed)
        except InputError:
            return "worst_case"  # the problem has no linear loss: keep the target's own
        setup.params, setup.problem = params, problem
        setup.notes.append(f"audit instance: loss = {WORST_CASE_LOSS} instead of {loss} "
                           "(clipped per-sample gradients: the canary stays at the clip "
                           "norm at every step; give --param loss=... to keep another)")
    return "worst_case"


def _as_list(spec: str | Sequence[str]) -> list[str]:
    if isinstance(spec, str):
        return [s.strip() for s in spec.split(",") if s.strip()]
    return [str(s) for s in spec]


def make_pairs(setup: AuditSetup, neighbours: str | Sequence[str] | None) -> list[Pair]:
    """Neighbouring inputs from built-in generators or a user's ``module:function``.

    For a callable target audited without a stated relation, the relation is read off the
    user's pairs (same size: replace-one; one record more: add/remove; vectors of query
    answers: the narrowest relation of answers they satisfy) and the built-in generators
    follow it; a stated relation the user's pair does not have is an error.
    ``search`` stands for every built-in generator of the target's input: StatDP's
    patterns the relation allows for query answers, the dataset canaries otherwise. A
    user's function may return one pair ``(D, D_prime)`` or a list of them.

    Examples
    --------
    >>> s = prepare("noisy_gd:sound", params={"T": 3})
    >>> [p.label for p in make_pairs(s, "fresh_direction,outlier")]
    ['fresh_direction', 'outlier']
    """
    specs = _as_list(resolve_neighbours(setup, neighbours if neighbours is not None
                                        else AUTO_NEIGHBOURS))
    if not specs:
        raise InputError("no neighbouring-pair generator given")
    mine = {spec: _user_pairs(setup, spec) for spec in specs if ":" in spec}
    if setup.queries is None:
        _settle_relation(setup, [p for ps in mine.values() for p in ps if p.pair is not None])
    else:
        _settle_query_relation(setup, [p for ps in mine.values() for p in ps])
    # The built-in pairs follow the relation settled on the user's.
    specs = [x for spec in specs for x in _expand_search(setup, spec)]
    seeds = seed_streams(seed_streams(setup.seed, SEED_PAIRS + 1)[SEED_PAIRS], len(specs))
    out: list[Pair] = []
    for spec, ss in zip(specs, seeds, strict=True):
        if spec in mine:
            out.extend(mine[spec])
        elif setup.queries is not None:
            out.append(_query_pair(setup, spec))
        else:
            out.append(_dataset_pair(setup, spec, np.random.default_rng(ss)))
    return out


def _expand_search(setup: AuditSetup, spec: str) -> list[str]:
    if spec != "search":
        return [spec]
    if setup.queries is not None:
        return [name for name, _, _ in query_search_pairs(
            setup.queries, setup.relation, far_distance(setup.epsilon_claimed))]
    return list(DATASET_SEARCH)


def _query_pair(setup: AuditSetup, spec: str) -> Pair:
    assert setup.queries is not None
    if spec in PAIR_GENERATORS:
        raise InputError(
            f"{spec!r} makes a pair of datasets, but {setup.name} takes a vector of "
            f"{setup.queries} query answers: give 'search', a pattern "
            f"({', '.join(QUERY_PATTERNS)}) or module:function")
    a, b = query_pair(spec, setup.queries, setup.relation, far_distance(setup.epsilon_claimed))
    return Pair(spec, a, b)


def _dataset_pair(setup: AuditSetup, spec: str, rng: np.random.Generator) -> Pair:
    if spec in QUERY_PATTERNS:
        raise InputError(f"{spec!r} is a pattern of query answers, but {setup.name} takes a "
                         "dataset: declare its input (queries=K) or give a dataset generator")
    if setup.registered:
        assert setup.problem is not None
        if spec == "worst_case":
            np_ = canary_worst_case(setup.problem.data, rng, setup.relation,
                                    clip=setup.params.get("clip"))
            return Pair(spec, np_.D, np_.D_prime, np_)
        base = setup.problem.data
    elif spec in PAIR_GENERATORS:
        n = int(setup.params.get("n", DEFAULT_USER_N))
        d = int(setup.params.get("d", DEFAULT_USER_D))
        base, _ = synthetic_classification(n, d, rng)
    else:
        base = Dataset(np.zeros((1, 1)), np.zeros(1))  # make_pair raises, naming them all
    np_ = make_pair(spec, base, rng, setup.relation)
    return Pair(spec, np_.D, np_.D_prime, np_)


def _user_pairs(setup: AuditSetup, spec: str) -> list[Pair]:
    """Call a user's pair function; its datasets (or ``(X, y)`` tuples, or arrays) give the
    relation, while the target receives exactly what the function returned. For a target
    taking query answers each side is a vector of them, which the target receives as
    floats."""
    try:
        res = load_callable(spec)()
    except InputError:
        raise
    except Exception as e:
        raise InputError(f"neighbour function {spec} raised {type(e).__name__}: {e}") from e
    as_pair = _as_pair if setup.queries is None else (
        lambda label, r: _as_query_pair(label, r, setup.queries))
    if isinstance(res, tuple) and len(res) == 2:
        return [as_pair(spec, res)]
    if isinstance(res, list) and res and all(isinstance(r, tuple) and len(r) == 2
                                             for r in res):
        return [as_pair(f"{spec}[{i}]", r) for i, r in enumerate(res)]
    raise InputError(f"neighbour function {spec} must return (D, D_prime) or a list of such "
                     f"pairs, got {type(res).__name__}")


def _as_pair(label: str, res: tuple[Any, Any]) -> Pair:
    check_finite(res[0], f"neighbour function {label}: D")
    check_finite(res[1], f"neighbour function {label}: D'")
    try:
        D, D2 = as_dataset(res[0]), as_dataset(res[1])
    except (TypeError, ValueError, InputError):  # objects of the user's own: no relation
        return Pair(label, res[0], res[1], None)
    try:
        return Pair(label, res[0], res[1], NeighbourPair.from_datasets(D, D2, label))
    except InputError as e:
        raise InputError(f"neighbour function {label}: {e}") from e


def _as_query_pair(label: str, res: tuple[Any, Any], queries: int) -> Pair:
    sides = []
    for v, side in zip(res, ("D", "D'"), strict=True):
        check_finite(v, f"neighbour function {label}: {side}")
        try:
            arr = np.asarray(v, dtype=float)
        except (TypeError, ValueError):
            arr = None
        if arr is None or arr.shape != (queries,):
            raise InputError(f"neighbour function {label}: {side} must be a vector of the "
                             f"target's {queries} query answers, got "
                             f"{np.shape(v) if arr is not None else type(v).__name__}")
        sides.append(arr)
    return Pair(label, *sides)


def _settle_query_relation(setup: AuditSetup, pairs: Sequence[Pair]) -> None:
    """Check a user's answer vectors against the stated relation, or, where none is
    stated, audit under the narrowest relation every pair satisfies."""
    names = [setup.relation] if setup.relation_given else list(QUERY_RELATIONS)
    for p in pairs:
        names = [r for r in names if query_neighbours(p.D, p.D_prime, r)]
        if not names:
            stated = (f"under --relation {setup.relation}" if setup.relation_given else
                      f"under any relation of query answers {QUERY_RELATIONS}")
            raise InputError(
                f"the pair from {p.label}, {p.D.tolist()} and {p.D_prime.tolist()}, is not "
                f"neighbouring {stated}: every answer moves by at most 1 under componentwise, "
                "one answer under add_remove, one up and one down under replace_one")
    if pairs:
        setup.relation = names[0]


def _settle_relation(setup: AuditSetup, pairs: Sequence[Pair]) -> None:
    found = {p.pair.relation: p.label for p in pairs if p.pair is not None}
    if setup.relation_given:
        wrong = {r: lab for r, lab in found.items() if r != setup.relation}
        if wrong:
            rel, lab = next(iter(wrong.items()))
            raise InputError(f"--relation {setup.relation}, but the pair from {lab} is "
                             f"{rel.replace('_', '-')} (sizes tell: same size is replace-one, "
                             f"one record more is add/remove)")
        return
    if len(found) > 1:
        raise InputError(f"the pairs given mix relations ({sorted(found)}): audit them "
                         "separately or state --relation")
    if found:
        setup.relation = next(iter(found))


def call_user(fn: Callable[..., Any], name: str, data: Any, rng: np.random.Generator,
              trials: int) -> Any:
    """Call a user's ``f(data, rng, trials)``; an exception becomes an :class:`InputError`.

    Examples
    --------
    >>> try:
    ...     call_user(lambda d, r, k: 1 / 0, "m:f", None, np.random.default_rng(), 3)
    ... except InputError as e:
    ...     print(str(e).split(" (")[0])
    target m:f raised ZeroDivisionError: division by zero
    """
    try:
        return fn(data, rng, trials)
    except InputError:
        raise
    except Exception as e:  # the user's code failed: report it as their input to fix
        hint = ("; if it takes a vector of K query answers, declare it "
                "(declare_mechanism(queries=K)) or give --param queries=K"
                if isinstance(data, Dataset) else "")
        if isinstance(e, TypeError) and "positional argument" in str(e):
            hint = "; a target takes exactly three arguments: f(data, rng, trials)"
        raise InputError(
            f"target {name} raised {type(e).__name__}: {e} (called as f(data, rng, "
            f"trials={trials}) with data of type {type(data).__name__}{hint})") from e


def check_same_shape(setup: AuditSetup, out_D: np.ndarray, out_Dp: np.ndarray,
                     label: str) -> None:
    """Raise :class:`InputError` where a target's outputs on D and D' differ in shape.

    Examples
    --------
    >>> s = AuditSetup("m:f", 1.0, 0.0, "add_remove")
    >>> try:
    ...     check_same_shape(s, np.zeros((2, 3)), np.zeros((2, 4)), "outlier")
    ... except InputError as e:
    ...     print(str(e)[:60])
    target m:f returned outputs of different shapes on D (3,) an
    """
    if out_D.shape[1:] == out_Dp.shape[1:]:
        return
    size = ("; an output whose shape follows the dataset's size tells by itself whether a "
            "record is in it: release a fixed-size output, or audit under --relation "
            "replace_one" if setup.relation == "add_remove" else "")
    raise InputError(f"target {setup.name} returned outputs of different shapes on D "
                     f"{out_D.shape[1:]} and D' {out_Dp.shape[1:]} ({label}){size}")


def _check_block(out: Any, k: int, name: str, finite: bool = True) -> np.ndarray:
    arr = np.asarray(out)
    # Booleans are outcomes (a sparse vector's above / below) and read as 0 and 1; a
    # complex value has no order for a threshold to split.
    if arr.dtype == object or np.issubdtype(arr.dtype, np.complexfloating) or not (
            np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise InputError(f"target {name} must return a real or boolean array of shape "
                         f"(trials, ...), got {type(out).__name__} of dtype {arr.dtype}: "
                         "encode labels or categories as integers, and return a record's "
                         "fields as columns")
    if arr.ndim == 0 or arr.shape[0] != k:
        raise InputError(f"target {name} returned shape {tuple(arr.shape)} when asked for "
                         f"trials={k}; expected an array of shape ({k}, ...)")
    arr = arr.reshape(k, -1).astype(float)
    if finite:
        bad = ~np.isfinite(arr)
        if bad.any():
            i, j = (int(v) for v in np.argwhere(bad)[0])
            raise InputError(f"target {name} returned {arr[i, j]} in row {i}, entry {j} of a "
                             f"block of {k} runs on finite data: outputs must be finite "
                             "numbers (release a failure as a finite code: one that occurs "
                             "on one dataset of a pair and not the other tells them apart)")
    return arr


# Within-block collisions this many times the across-block rate break the contract.
_COLLISION_EXCESS = 20.0
_MIN_COLLISIONS = 10


def _row_keys(block: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(block)
    return a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).ravel()


def check_independent_rows(blocks: Sequence[np.ndarray], name: str) -> None:
    """Raise :class:`InputError` when a target's rows are not independent runs.

    Under the contract every row of every block is an independent draw, so the rate at
    which two rows are exactly equal is the same for two rows of one block and for two
    rows of different blocks (a discrete output repeats at both, a continuous one at
    neither). Rows that repeat within blocks far more often than across them come from
    noise drawn once per call; blocks that repeat each other, from randomness that does
    not come from ``rng`` (a fixed seed). Either is refused (20 times the other rate, and
    at least 10 equal pairs: under the contract this needs a Poisson count 20 times its
    mean, far rarer than 1e-9).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> check_independent_rows([rng.normal(size=(50, 1)) for _ in range(3)], "m:f")
    >>> once = [np.repeat(rng.normal(size=(1, 1)), 50, axis=0) for _ in range(3)]
    >>> try:
    ...     check_independent_rows(once, "m:f")
    ... except InputError as e:
    ...     print(str(e)[:52])
    target m:f: rows of a block are not independent runs
    """
    if len(blocks) < 2:
        return
    keys = [_row_keys(b) for b in blocks]
    within = 0.0
    per_block = []
    for k in keys:
        _, c = np.unique(k, return_counts=True)
        within += float(np.sum(c * (c - 1)) / 2.0)
        per_block.append(float(np.sum(c.astype(float) ** 2)))
    _, total = np.unique(np.concatenate(keys), return_counts=True)
    across = (float(np.sum(total.astype(float) ** 2)) - sum(per_block)) / 2.0
    sizes = np.array([k.size for k in keys], dtype=float)
    pairs_within = float(np.sum(sizes * (sizes - 1)) / 2.0)
    pairs_across = float((sizes.sum() ** 2 - np.sum(sizes**2)) / 2.0)
    if within >= _MIN_COLLISIONS and within > _COLLISION_EXCESS * (across + 1) * \
            pairs_within / pairs_across:
        raise InputError(
            f"target {name}: rows of a block are not independent runs: {within:.0f} pairs "
            f"of identical rows within blocks against {across:.0f} across blocks (as many "
            f"per pair are expected); each of the `trials` rows of f(data, rng, trials) must "
            "be an independent run with its own noise, not one draw repeated")
    if across >= _MIN_COLLISIONS and across > _COLLISION_EXCESS * (within + 1) * \
            pairs_across / max(pairs_within, 1.0):
        raise InputError(
            f"target {name}: blocks repeat each other ({across:.0f} pairs of identical rows "
            f"across blocks against {within:.0f} within); each row must be an independent "
            "run: draw all randomness from the rng argument (a fixed seed repeats every call)")


def sample(setup: AuditSetup, data: Any, trials: int, seed: np.random.SeedSequence,
           block_size: int | None = None, execution: Execution | None = None) -> np.ndarray:
    """``trials`` independent outputs of the target on ``data``, shape (trials, features).

    ``execution`` (an :class:`~dpverify.execution.executors.Execution`) says where the blocks run;
    the outputs depend only on the seed and the block size.

    Examples
    --------
    >>> s = prepare("noisy_gd:sound", params={"T": 2})
    >>> sample(s, s.problem.data, 5, np.random.SeedSequence(1)).shape
    (5, 5)
    """
    bs = int(block_size or DEFAULT_BLOCK)
    if setup.registered:
        assert setup.target is not None and setup.problem is not None
        block = OutputBlock(setup.target, setup.params, setup.problem, data, setup.backend)
        return sample_outputs(block, trials=trials, seed=seed, plan=BlockPlan(bs, execution))
    fn = setup.fn
    assert fn is not None
    # Deliberately non-finite data (the nonfinite canary) may give non-finite outputs:
    # they are then the evidence, not bad input.
    finite = not (isinstance(data, Dataset) and data.allow_nonfinite)

    def block(ss: np.random.SeedSequence, k: int, _: int) -> np.ndarray:
        return _check_block(call_user(fn, setup.name, data, np.random.default_rng(ss), k),
                            k, setup.name, finite)

    blocks = map_blocks(block, trials, seed=seed, plan=BlockPlan(bs, execution))
    check_independent_rows(blocks, setup.name)
    if not setup.rng_probed:
        setup.rng_probed = True
        note = reproducibility_note(block, setup.name, min(trials, PROBE_RUNS))
        if note:
            setup.notes.append(note)
    return np.concatenate(blocks, axis=0)


def sample_world(setup: AuditSetup, pair: Pair, world: int, trials: int,
                 seed: np.random.SeedSequence, block_size: int | None = None,
                 execution: Execution | None = None) -> np.ndarray:
    """:func:`sample` on ``pair``'s D (``world`` 0) or D' (1), naming them in a refusal:
    an output that fails on one dataset of a pair and not the other is itself a leak."""
    try:
        return sample(setup, pair.D if world == 0 else pair.D_prime, trials, seed,
                      block_size, execution)
    except InputError as e:
        side = "D" if world == 0 else "D'"
        raise InputError(f"{e} (runs on {side} of the pair {pair.label})") from e


# Runs of each of the two calls that tell whether a callable draws only from its rng.
PROBE_RUNS = 64


def reproducibility_note(block: Callable[..., np.ndarray], name: str, k: int) -> str | None:
    """A note when two calls of ``block`` on one seed differ, else ``None``; an error when
    two seeds give the same varied runs.

    Randomness from anywhere but the ``rng`` argument (numpy's or torch's global
    generator, the clock) or arithmetic that is not deterministic (atomic additions on a
    GPU) leaves every run independent, so the bound stays valid, but a rerun with the same
    seed gives other figures: a CI job that audits it flickers. A target whose runs vary
    but come out the same on another seed draws its noise from a fixed seed: the noise is
    a constant, no run is independent of another, and nothing can be bounded. Outputs of
    few values repeat across calls in their own right, so the runs are compared only
    where their own frequencies make a chance repeat rarer than 1e-9 (a continuous
    output's repeats are refused by :func:`check_independent_rows`).

    Examples
    --------
    >>> block = lambda ss, k, i: np.random.default_rng(ss).random((k, 1))
    >>> reproducibility_note(block, "m:f", 8) is None
    True
    >>> reproducibility_note(lambda ss, k, i: np.random.random((k, 1)), "m:f", 8)[:44]
    'target m:f is not reproducible from its rng '
    """
    first, again = (block(np.random.SeedSequence(SEED_PROBE), k, 0) for _ in range(2))
    if np.array_equal(first, again, equal_nan=True):
        other = block(np.random.SeedSequence(SEED_PROBE + 1), k, 0)
        if np.array_equal(first, other, equal_nan=True) and _log_chance_of_repeat(first) \
                < math.log(1e-9):
            raise InputError(
                f"target {name}: two different seeds give the same {k} runs, which vary "
                "from run to run: its noise does not come from the rng argument (a fixed "
                "seed?), so its runs are not independent; draw every random number from rng")
        return None
    return (f"target {name} is not reproducible from its rng argument (two calls on one "
            "seed differ: noise drawn elsewhere, or arithmetic that is not deterministic): "
            "the bound holds, but a rerun with the same seed gives other figures; draw all "
            "noise from rng (for torch, a torch.Generator seeded from it)")


def _log_chance_of_repeat(rows: np.ndarray) -> float:
    """The log-probability that independent runs repeat ``rows`` exactly, each row at its
    frequency among them."""
    _, inverse, counts = np.unique(_row_keys(rows.reshape(len(rows), -1)),
                                   return_inverse=True, return_counts=True)
    return float(np.sum(np.log(counts[inverse] / len(rows))))


def plain_ledger(setup: AuditSetup) -> Ledger:
    """The ledger of one plain run of a registered target (what its accountant reads).

    Examples
    --------
    >>> len(plain_ledger(prepare("noisy_gd:sound", params={"T": 3})))
    3
    """
    assert setup.target is not None and setup.problem is not None
    ss = seed_streams(setup.seed, SEED_ACCOUNT + 1)[SEED_ACCOUNT]
    _, cur = run_target(setup.target, setup.params, setup.problem, trials=1, rng=ss)
    return cur.ledger


def accountant_epsilon(setup: AuditSetup) -> tuple[float | None, str]:
    """epsilon_accountant of a registered target's ledger at the audit's delta.

    Returns ``(None, reason)`` for a callable (it has no ledger) or an unsupported ledger.

    Examples
    --------
    >>> eps, how = accountant_epsilon(prepare("noisy_gd:sound", params={"T": 3}))
    >>> round(eps, 3), how
    (1.0, 'pld')
    """
    if not setup.registered:
        return None, "a callable has no ledger"
    try:
        res = account_ledger(plain_ledger(setup), setup.delta, setup.relation)
    except InputError as e:
        return None, str(e)
    return float(res.epsilon), "pld" if not math.isnan(res.by_accountant.get("pld", math.nan)) \
        else "rdp"
