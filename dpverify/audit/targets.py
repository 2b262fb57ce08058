"""What an audit runs: a registered variant or a user's callable, its claim, its neighbours.

A target is either a registered algorithm (``name`` or ``name:variant``: it runs through
the curator, so it has a ledger and an accountant) or any Python callable
``module:function`` with the signature ``f(data, rng, trials) -> array (trials, ...)``,
where ``data`` is a :class:`~dpverify.data.Dataset` (or whatever the user's pair function
returned) and ``rng`` a NumPy Generator. Outputs are drawn in fixed-size seeded blocks
through :func:`dpverify.execution.map_blocks`, so results depend only on the root seed
and the block size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dpverify.accounting import account_ledger, claimed_epsilon
from dpverify.claims import PrivacyClaim, check_relation
from dpverify.curator import Ledger
from dpverify.data import (
    PAIR_GENERATORS,
    Dataset,
    NeighbourPair,
    canary_worst_case,
    check_finite,
    make_pair,
    synthetic_classification,
)
from dpverify.errors import InputError, UnknownTargetError, check_delta, check_epsilon
from dpverify.execution import (
    DEFAULT_BLOCK,
    build_problem,
    map_blocks,
    run_target,
    sample_outputs,
    seed_streams,
)
from dpverify.registry import Problem, Target, is_registered_target, load_callable, resolve

if TYPE_CHECKING:
    from dpverify.executors import Execution

# Root-seed children: 0 is the problem's data (build_problem), then these.
SEED_PAIRS, SEED_SAMPLES, SEED_FIT, SEED_ACCOUNT = 1, 2, 3, 4

# The base dataset a user's callable is audited on when a built-in generator makes the pair.
DEFAULT_USER_N, DEFAULT_USER_D = 100, 2


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
    given: frozenset[str] = frozenset()  # the parameters the user set
    notes: list[str] = field(default_factory=list)  # how the audit instance was chosen

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
    if relation is not None:
        check_relation(relation)
    params = dict(params or {})
    target = str(target).strip()
    if not target:
        raise InputError("no target given: name, name:variant or module:function")
    if is_registered_target(target):
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
        try:
            fn = load_callable(target)
        except InputError as e:
            raise UnknownTargetError(
                f"target {target!r} is neither a registered algorithm nor an importable "
                f"module:function ({e})") from None
        if epsilon is None or delta is None:
            raise InputError(f"auditing the callable {target!r} needs the claim: give "
                             "--epsilon and --delta")
        return AuditSetup(target, epsilon, delta, relation or "add_remove", params=params,
                          fn=fn, seed=seed, backend=backend)
    resolve(target)  # raises UnknownTargetError naming the registered algorithms
    raise UnknownTargetError(f"unknown target {target!r}")  # pragma: no cover


AUTO_NEIGHBOURS = "auto"
# The loss under which a clipped per-sample gradient is the same at every iterate.
WORST_CASE_LOSS = "linear"


def resolve_neighbours(setup: AuditSetup, neighbours: str | Sequence[str]
                       ) -> str | Sequence[str]:
    """``auto``: the worst-case canary where the target declares a clip, else fresh_direction.

    The canary (:func:`~dpverify.data.canary_worst_case`) attains the clip norm. For a
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
    if not setup.registered or setup.params.get("clip") is None:
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


def make_pairs(setup: AuditSetup, neighbours: str | Sequence[str]) -> list[Pair]:
    """Neighbouring inputs from built-in generators or a user's ``module:function``.

    Examples
    --------
    >>> s = prepare("noisy_gd:sound", params={"T": 3})
    >>> [p.label for p in make_pairs(s, "fresh_direction,outlier")]
    ['fresh_direction', 'outlier']
    """
    specs = _as_list(neighbours)
    if not specs:
        raise InputError("no neighbouring-pair generator given")
    seeds = seed_streams(seed_streams(setup.seed, SEED_PAIRS + 1)[SEED_PAIRS], len(specs))
    out: list[Pair] = []
    for spec, ss in zip(specs, seeds, strict=True):
        rng = np.random.default_rng(ss)
        if setup.registered:
            assert setup.problem is not None
            if spec == "worst_case":
                np_ = canary_worst_case(setup.problem.data, rng, setup.relation,
                                        clip=setup.params.get("clip"))
            else:
                np_ = make_pair(spec, setup.problem.data, rng, setup.relation)
            out.append(Pair(spec, np_.D, np_.D_prime, np_))
        elif spec in PAIR_GENERATORS:
            n = int(setup.params.get("n", DEFAULT_USER_N))
            d = int(setup.params.get("d", DEFAULT_USER_D))
            base, _ = synthetic_classification(n, d, rng)
            np_ = make_pair(spec, base, rng, setup.relation)
            out.append(Pair(spec, np_.D, np_.D_prime, np_))
        elif ":" in spec:
            try:
                res = load_callable(spec)()
            except InputError:
                raise
            except Exception as e:
                raise InputError(f"neighbour function {spec} raised {type(e).__name__}: "
                                 f"{e}") from e
            if not (isinstance(res, tuple) and len(res) == 2):
                raise InputError(f"neighbour function {spec} must return (D, D_prime), "
                                 f"got {type(res).__name__}")
            check_finite(res[0], f"neighbour function {spec}: D")
            check_finite(res[1], f"neighbour function {spec}: D'")
            pr = None
            if isinstance(res[0], Dataset) and isinstance(res[1], Dataset):
                pr = NeighbourPair.from_datasets(res[0], res[1], spec)
            out.append(Pair(spec, res[0], res[1], pr))
        else:
            make_pair(spec, Dataset(np.zeros((1, 1)), np.zeros(1)), rng)  # raises, naming all
    return out


def executor_kwargs(execution: Execution | None) -> dict[str, Any]:
    """``executor=`` for the block runners when an execution is chosen (serial otherwise).

    Examples
    --------
    >>> executor_kwargs(None)
    {}
    """
    return {} if execution is None else {"executor": execution}


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
        raise InputError(
            f"target {name} raised {type(e).__name__}: {e} (called as f(data, rng, "
            f"trials={trials}) with data of type {type(data).__name__})") from e


def _check_block(out: Any, k: int, name: str, finite: bool = True) -> np.ndarray:
    arr = np.asarray(out)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
        raise InputError(f"target {name} must return a numeric array of shape (trials, ...), "
                         f"got {type(out).__name__} of dtype {arr.dtype}")
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
                             "numbers")
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

    ``execution`` (an :class:`~dpverify.executors.Execution`) says where the blocks run;
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
        return sample_outputs(setup.target, setup.params, setup.problem, data, trials=trials,
                              seed=seed, backend=setup.backend, block_size=bs,
                              **executor_kwargs(execution))
    fn = setup.fn
    assert fn is not None
    # Deliberately non-finite data (the nonfinite canary) may give non-finite outputs:
    # they are then the evidence, not bad input.
    finite = not (isinstance(data, Dataset) and data.allow_nonfinite)

    def block(ss: np.random.SeedSequence, k: int, _: int) -> np.ndarray:
        return _check_block(call_user(fn, setup.name, data, np.random.default_rng(ss), k),
                            k, setup.name, finite)

    blocks = map_blocks(block, trials, seed=seed, block_size=bs, **executor_kwargs(execution))
    check_independent_rows(blocks, setup.name)
    return np.concatenate(blocks, axis=0)


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
