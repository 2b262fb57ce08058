"""Running a target: problems, curators, trials, seeds, executors and checkpoints.

A root seed spawns every stream through ``numpy.random.SeedSequence``: the problem's data
get one child, the trials another, so a check is reproducible from its root seed alone.

Trials are cut into blocks of a fixed size, each with its own child of the root seed, and a
block's trials run at once (the curator's leading trial axis). Results therefore depend
only on (root seed, block size), never on how blocks are grouped into chunks, how many
workers run them, or which executor does (:mod:`dpverify.execution.executors`); a run can be
checkpointed block by block and resumed (:mod:`dpverify.execution.checkpoint`).

How blocks are cut, where they run and where they are saved is one :class:`BlockPlan`.
Choosing the block size: ``BlockPlan("auto")`` picks it from the problem size and a memory
budget (:func:`auto_block_size`): about half a MiB per (trials x n) array, so that a block's
working arrays stay in a core's L2 cache, where unfused NumPy is fastest, and never more
than ``memory_budget`` bytes of working memory in all. It depends on the problem and the
budget only, never on the machine, so it keeps runs reproducible.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dpverify.core.backends import get_backend
from dpverify.core.curator import Curator
from dpverify.core.data import Dataset, NeighbourPair
from dpverify.core.errors import InputError
from dpverify.core.registry import Problem, Target, is_registered_target, resolve
from dpverify.execution import executors
from dpverify.execution.checkpoint import BlockStore, fingerprint
from dpverify.execution.executors import Execution, dumps_block_fn, resolve_execution
from dpverify.execution.progress import ProgressSpec, TrialProgress

__all__ = [
    "DEFAULT_BLOCK",
    "BlockPlan",
    "BlockRun",
    "Execution",
    "OutputBlock",
    "auto_block_size",
    "block_layout",
    "build_problem",
    "executor_from_context",
    "map_blocks",
    "resolve_block_size",
    "run_blocks",
    "run_target",
    "sample_outputs",
    "seed_streams",
]


def seed_streams(seed: int | np.random.SeedSequence, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent child streams of a root seed.

    Examples
    --------
    >>> a = seed_streams(0, 2); b = seed_streams(0, 2)
    >>> bool(a[1].generate_state(1)[0] == b[1].generate_state(1)[0])
    True
    """
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return root.spawn(n)


def build_problem(target: Target, params: Mapping[str, Any], seed: int) -> Problem:
    """The target's test problem, its data drawn from the root seed's first child."""
    data_seed = seed_streams(seed, 1)[0]
    return target.algorithm.make_problem(params, np.random.default_rng(data_seed))


def run_target(
    target: Target,
    params: Mapping[str, Any],
    problem: Problem,
    *,
    trials: int,
    rng: int | np.random.Generator | np.random.SeedSequence,
    data: Dataset | NeighbourPair | None = None,
    backend: str = "numpy",
    keep_answers: bool = False,
) -> tuple[Any, Curator]:
    """Run a variant for ``trials`` trials on ``data``; on a :class:`NeighbourPair` it
    replays D and D'.

    ``data`` defaults to the problem's dataset. Returns the output (trials, ...) and the
    curator holding the ledger.

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> t = resolve("noisy_gd:sound")
    >>> p = t.algorithm.params("sound", {"T": 3})
    >>> prob = build_problem(t, p, 0)
    >>> out, cur = run_target(t, p, prob, trials=4, rng=1)
    >>> out.shape[0], len(cur.ledger)
    (4, 3)
    >>> other, _ = run_target(t, p, prob, trials=4, rng=1, data=prob.data.without(0))
    >>> bool((other != out).any())  # the same noise, other data
    True
    """
    n_public = problem.data.n
    pair = data if isinstance(data, NeighbourPair) else None
    if pair is not None:
        cur = Curator.replay(pair, trials=trials, rng=rng, backend=backend, n_public=n_public,
                             keep_answers=keep_answers)
        on = pair.D
    else:
        on = data if data is not None else problem.data
        cur = Curator(on, trials=trials, rng=rng, backend=backend, n_public=n_public,
                      keep_answers=keep_answers)
    setting = target.setting(problem, params, on)
    if pair is not None:
        # Built again from D' alone: a field that differs is data used without a release.
        cur.setting_differences = setting.differences(
            target.setting(problem, params, pair.D_prime))
    out = target.variant.run(cur, setting, params)
    return out, cur


# Blocks -------------------------------------------------------------------------------

DEFAULT_BLOCK = 1024

# auto_block_size: a (trials x n) array of about this many bytes stays in a core's L2 cache.
# Measured (benchmarks/bench_throughput.py --sweep, n=1000): generic losses, whose steps make
# several such temporaries, slow by up to a third at larger blocks; the logistic fast path
# is flat from 64 to 1024 trials; below 32, Python overhead per step shows.
CACHE_BYTES = 512 * 1024
MIN_AUTO_BLOCK, MAX_AUTO_BLOCK = 16, 1024
# Working memory of a block: this many (trials x n) arrays live at once in a step (margins,
# coefficients and the loss's temporaries; twice that while replaying D and D').
WORK_ARRAYS = 8
DEFAULT_MEMORY_BUDGET = 1 << 30


def block_layout(total: int, block_size: int = DEFAULT_BLOCK) -> list[int]:
    """Sizes of the blocks that make up ``total`` trials.

    Examples
    --------
    >>> block_layout(2500, 1000)
    [1000, 1000, 500]
    """
    total = int(total)
    block_size = int(block_size)
    if block_size < 1:
        raise InputError(f"block_size must be a positive integer, got {block_size}")
    return [min(block_size, total - s) for s in range(0, total, block_size)]


def auto_block_size(n: int, *, dtype: str = "float64",
                    memory_budget: int | None = None) -> int:
    """Trials per block for data of ``n`` records: cache-sized, within ``memory_budget``.

    A power of two near ``CACHE_BYTES / (n * itemsize)``, between 16 and 1024, and at
    most ``memory_budget / (WORK_ARRAYS * n * itemsize)`` (default budget 1 GiB).

    Examples
    --------
    >>> auto_block_size(1000), auto_block_size(1000, dtype="float32"), auto_block_size(100)
    (64, 128, 512)
    >>> auto_block_size(10**6, memory_budget=2**28)
    4
    """
    n = max(int(n), 1)
    item = np.dtype(dtype).itemsize
    cache = CACHE_BYTES / (n * item)
    b = 2 ** max(0, round(np.log2(cache))) if cache >= 1 else 1
    b = min(max(b, MIN_AUTO_BLOCK), MAX_AUTO_BLOCK)
    budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else int(memory_budget)
    if budget <= 0:
        raise InputError(f"memory_budget must be a positive number of bytes, got {budget}")
    return int(max(1, min(b, budget // (WORK_ARRAYS * n * item))))


def resolve_block_size(block_size: int | str | None, *, n: int, dtype: str = "float64",
                       memory_budget: int | None = None) -> int:
    """An explicit block size, or ``"auto"``/``None`` resolved by :func:`auto_block_size`.

    Examples
    --------
    >>> resolve_block_size("auto", n=1000), resolve_block_size(256, n=1000)
    (64, 256)
    """
    if block_size is None or (isinstance(block_size, str) and block_size == "auto"):
        return auto_block_size(n, dtype=dtype, memory_budget=memory_budget)
    if isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer)) \
            or block_size < 1:
        raise InputError(f"block_size must be a positive integer or 'auto', got {block_size!r}")
    return int(block_size)


@dataclass(frozen=True)
class BlockPlan:
    """How a run's trials are cut into blocks, where the blocks run and how they are saved.

    Parameters
    ----------
    size
        Trials per block, or ``"auto"``: chosen from the data size and ``memory_budget`` by
        :func:`auto_block_size`, where the data are known (:func:`sample_outputs`,
        :meth:`for_data`). With the root seed it alone fixes the results.
    execution
        Where blocks run (:mod:`dpverify.execution.executors`): ``None``/``"serial"`` (this
        process, the default), ``"local"``, ``"dask"``, or an :class:`Execution` with the
        workers, scheduler, checkpoint folder and progress (e.g. from
        :func:`executor_from_context`).
    memory_budget
        Bytes of working memory a block may use when ``size="auto"`` (default 1 GiB).
    checkpoint_key
        Plain data naming what the block function computes, for the checkpoint's key. By
        default an object's ``checkpoint_key()`` method, else a hash of the function pickled.

    Examples
    --------
    >>> BlockPlan("auto", Execution("local", workers=2)).for_data(1000).size
    64
    >>> BlockPlan(0)
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: block_size must be a positive integer or 'auto', got 0
    """

    size: int | str = DEFAULT_BLOCK
    execution: Execution | str | None = None
    memory_budget: int | None = None
    checkpoint_key: Any = None

    def __post_init__(self) -> None:
        auto = self.size is None or (isinstance(self.size, str) and self.size == "auto")
        object.__setattr__(self, "size", "auto" if auto else resolve_block_size(self.size, n=1))

    def for_data(self, n: int, dtype: str = "float64") -> BlockPlan:
        """The plan with ``"auto"`` resolved for data of ``n`` records of ``dtype``."""
        return replace(self, size=resolve_block_size(self.size, n=n, dtype=dtype,
                                                     memory_budget=self.memory_budget))

    def block_sizes(self, total: int) -> list[int]:
        """The sizes of the blocks of ``total`` trials (``"auto"`` must be resolved)."""
        if self.size == "auto":
            raise InputError("block size 'auto' needs the data size: resolve it with "
                             "BlockPlan.for_data(n) first")
        return block_layout(total, int(self.size))


@dataclass
class BlockRun:
    """The blocks of a finished run, in order, and how they were obtained.

    ``computed`` blocks ran now; ``resumed`` ones were loaded from a checkpoint.
    ``cpu_seconds`` is CPU time spent inside block functions (all workers together).
    """

    results: list[Any]
    sizes: list[int]
    computed: int = 0
    resumed: int = 0
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    execution: str = "serial"
    checkpoint: str | None = None

    @property
    def trials(self) -> int:
        return int(sum(self.sizes))

    def concatenate(self) -> np.ndarray:
        """Block results joined along the trial axis."""
        return np.concatenate([np.asarray(r) for r in self.results], axis=0)


def run_blocks(
    fn: Callable[[np.random.SeedSequence, int, int], Any],
    total: int,
    *,
    seed: int | np.random.SeedSequence,
    plan: BlockPlan | None = None,
    label: str = "trials",
) -> BlockRun:
    """:func:`map_blocks` with the run's bookkeeping (resumed blocks, CPU time).

    ``label`` names the run on the progress bar.

    Examples
    --------
    >>> run = run_blocks(lambda ss, k, i: np.full(k, i), 5, seed=0, plan=BlockPlan(2))
    >>> run.concatenate().tolist(), run.computed, run.resumed
    ([0, 0, 1, 1, 2], 3, 0)
    """
    plan = plan or BlockPlan()
    ex = resolve_execution(plan.execution)
    sizes = plan.block_sizes(total)
    seeds = seed_streams(seed, len(sizes))
    results: list[Any] = [None] * len(sizes)
    store = None
    have: dict[int, Any] = {}
    if ex.checkpoint is not None and sizes:
        what = plan.checkpoint_key if plan.checkpoint_key is not None else _describe_fn(fn)
        store = BlockStore.for_run(ex.checkpoint, what=what, seed=seed, sizes=sizes)
        have = store.load(sizes)
        for i, r in have.items():
            results[i] = r
    todo = [(i, seeds[i], sizes[i]) for i in range(len(sizes)) if i not in have]
    run = BlockRun(results, sizes, computed=len(todo), resumed=len(have),
                   execution=ex.describe(), checkpoint=None if store is None else str(store.path))
    t0 = time.perf_counter()
    with TrialProgress(int(total), label, ex.progress,
                       initial=sum(sizes[i] for i in have)) as prog:

        def on_done(done: tuple[int, Any, float, float]) -> None:
            i, res, cpu, _ = done
            results[i] = res
            run.cpu_seconds += cpu
            if store is not None:
                store.save(i, res, trials=sizes[i])
            prog.advance(sizes[i])

        executors.run(ex, fn, todo, on_done)
    run.wall_seconds = time.perf_counter() - t0
    return run


def map_blocks(
    fn: Any,
    total: int,
    *,
    seed: int | np.random.SeedSequence,
    plan: BlockPlan | None = None,
) -> list[Any]:
    """Call ``fn(seed_sequence, trials, block_index)`` for every block; results in order.

    Parameters
    ----------
    fn
        The block function. For ``local`` and ``dask`` it must be picklable (a top-level
        function or an object such as :class:`OutputBlock`); closures are sent with
        cloudpickle when it is installed.
    total, seed
        ``total`` trials in blocks, block i seeded by child i of ``seed``: with the
        plan's block size these alone fix the results.
    plan
        The block size, where blocks run (executor, workers, scheduler), the checkpoint
        folder where every finished block is saved so a rerun resumes
        (:mod:`dpverify.execution.checkpoint`), and progress: a :class:`BlockPlan`
        (default: blocks of ``DEFAULT_BLOCK`` trials, serially, silent).

    Examples
    --------
    >>> out = map_blocks(lambda ss, k, i: np.random.default_rng(ss).random(k), 5, seed=0,
    ...                  plan=BlockPlan(2))
    >>> [len(o) for o in out]
    [2, 2, 1]
    """
    return run_blocks(fn, total, seed=seed, plan=plan).results


def _describe_fn(fn: Any) -> Any:
    key = getattr(fn, "checkpoint_key", None)
    if callable(key):
        return key()

    name = getattr(fn, "__qualname__", type(fn).__qualname__)
    return {"function": f"{getattr(fn, '__module__', '?')}.{name}",
            "pickled": fingerprint(dumps_block_fn(fn)), "code": _code_fingerprint(fn)}


def _code_fingerprint(fn: Any) -> str:
    """A digest of the source files of ``fn`` and of the functions its closure holds.

    A function of an importable module is pickled by reference (its module and name), so
    the pickle alone would not change when its body is edited, and stored blocks of the
    old code would be read back as the new code's.
    """
    files: set[str] = set()
    stack, seen = [fn], set()
    while stack:
        f = stack.pop()
        if id(f) in seen or len(seen) > 64:
            continue
        seen.add(id(f))
        code = getattr(f, "__code__", None)
        if code is None:
            continue
        files.add(code.co_filename)
        for cell in getattr(f, "__closure__", None) or ():
            try:
                stack.append(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
    contents = {}
    for path in sorted(files):
        try:
            with open(path, "rb") as fh:
                contents[path] = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            contents[path] = None
    return fingerprint(contents)


def executor_from_context(ctx: Any) -> Execution:
    """The :class:`Execution` a check should use, from its
    :class:`~dpverify.checks.base.RunContext`.

    ``ctx.executor`` (``local``/``dask``), ``ctx.workers`` and ``ctx.scheduler`` choose
    the executor (``local`` with one worker runs in this process); ``ctx.progress``, when
    set, receives progress, otherwise a bar is shown on a terminal unless
    ``ctx.extras["quiet"]``; ``ctx.extras["checkpoint"]`` names a checkpoint folder.

    Examples
    --------
    >>> from dpverify.checks.base import RunContext
    >>> executor_from_context(RunContext(workers=2)).describe()
    'local (2 workers)'
    >>> executor_from_context(RunContext()).executor
    'serial'
    """
    extras = getattr(ctx, "extras", None) or {}
    kind = getattr(ctx, "executor", None) or "local"
    workers = getattr(ctx, "workers", None)
    scheduler = getattr(ctx, "scheduler", None)
    if kind == "local" and (workers is None or workers <= 1):
        kind, workers = "serial", None
    progress: ProgressSpec = getattr(ctx, "progress", None)
    if progress is None:
        progress = None if extras.get("quiet") else "auto"
    return Execution(kind, workers=workers, scheduler=scheduler if kind == "dask" else None,
                     checkpoint=extras.get("checkpoint"), progress=progress)


# Sampling a target's outputs ----------------------------------------------------------


@dataclass
class OutputBlock:
    """The block function of :func:`sample_outputs`: a picklable ``fn(seed, trials, index)``.

    It carries the target by name (resolved through the registry in the worker, so no
    closure travels) together with its parameters, problem and the dataset to run on;
    ``backend`` is a backend name and ``dtype`` its float type.

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> t = resolve("noisy_gd:sound")
    >>> p = t.algorithm.params("sound", {"T": 2, "n": 50})
    >>> prob = build_problem(t, p, 0)
    >>> fn = OutputBlock(t, p, prob, prob.data)
    >>> fn.target
    'noisy_gd:sound'
    >>> fn(np.random.SeedSequence(1), 3, 0).shape
    (3, 5)
    """

    target: Target | str
    params: Mapping[str, Any]
    problem: Problem
    dataset: Any
    backend: Any = "numpy"
    dtype: str | None = None
    _resolved: Target | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        t = self.target
        if isinstance(t, Target):
            self._resolved = t
            # By name when the registry gives back this very variant (a worker resolves it).
            if is_registered_target(t.id) and resolve(t.id).variant is t.variant:
                self.target = t.id
        self.params = dict(self.params)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_resolved"] = None if isinstance(self.target, str) else self._resolved
        return state

    def resolved(self) -> Target:
        """The target, resolved through the registry on first use."""
        if self._resolved is None:
            self._resolved = resolve(self.target) if isinstance(self.target, str) \
                else self.target
        return self._resolved

    def make_backend(self) -> Any:
        if self.dtype is None:
            return self.backend
        if isinstance(self.backend, str):
            return get_backend(self.backend, dtype=self.dtype)
        if getattr(self.backend, "dtype_name", self.dtype) != self.dtype:
            raise InputError(f"dtype {self.dtype!r} conflicts with the backend's "
                             f"{self.backend.dtype_name!r}")
        return self.backend

    def __call__(self, ss: np.random.SeedSequence, k: int, _: int) -> np.ndarray:
        t = self.resolved()
        backend = self.make_backend()
        cur = Curator(self.dataset, trials=k, rng=ss, backend=backend,
                      n_public=self.problem.data.n)
        out = t.variant.run(cur, t.setting(self.problem, self.params, self.dataset),
                            self.params)
        return cur.backend.to_numpy(out).reshape(k, -1)

    def checkpoint_key(self) -> dict[str, Any]:
        """What determines the outputs: target, parameters, data, backend, version."""
        def data_key(d: Any) -> str:
            if hasattr(d, "X") and hasattr(d, "y"):
                return fingerprint([np.asarray(d.X), np.asarray(d.y)])
            return fingerprint(repr(d))

        t = self.target if isinstance(self.target, str) else self.resolved().id
        backend = self.backend if isinstance(self.backend, str) else repr(self.backend)
        return {"kind": "sample_outputs", "target": t, "params": self.params,
                "problem_data": data_key(self.problem.data), "data": data_key(self.dataset),
                "n_public": self.problem.data.n, "backend": backend, "dtype": self.dtype,
                "version": _package_version()}


def _package_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("dpverify")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
        return "unknown"


def sample_outputs(
    block: OutputBlock,
    *,
    trials: int,
    seed: int | np.random.SeedSequence,
    plan: BlockPlan | None = None,
) -> np.ndarray:
    """Outputs of ``trials`` independent runs of ``block``'s target on its dataset, as a
    NumPy array (trials, -1).

    ``block`` says what runs (target, parameters, problem, dataset, backend and dtype:
    ``dtype="float32"`` runs the NumPy backend in single precision, about twice as fast);
    ``plan`` how (:class:`BlockPlan`): its ``size="auto"`` chooses blocks from the data
    size and ``memory_budget`` (:func:`auto_block_size`).

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> t = resolve("noisy_gd:sound")
    >>> p = t.algorithm.params("sound", {"T": 2})
    >>> prob = build_problem(t, p, 0)
    >>> sample_outputs(OutputBlock(t, p, prob, prob.data), trials=3, seed=1).shape
    (3, 5)
    >>> sample_outputs(OutputBlock(t, p, prob, prob.data, dtype="float32"), trials=3, seed=1,
    ...                plan=BlockPlan("auto")).dtype
    dtype('float32')
    """
    n = getattr(block.dataset, "n", None) or block.problem.data.n
    dt = block.dtype or getattr(block.backend, "dtype_name", "float64")
    plan = (plan or BlockPlan()).for_data(n, dt)
    label = block.target if isinstance(block.target, str) else block.resolved().id
    return run_blocks(block, trials, seed=seed, plan=plan, label=label).concatenate()
