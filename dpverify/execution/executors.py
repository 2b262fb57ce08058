"""Where blocks of trials run: this process, local worker processes, or a Dask cluster.

:func:`dpverify.execution.trials.map_blocks` cuts the trials into blocks, each with its own child
of the root seed; an executor only decides where and in which groups ("chunks") the blocks
are computed, so results are bit-identical whatever the executor, the number of workers or
the chunking.

* ``serial``: every block in this process, in order (the default).
* ``local``: a pool of worker processes on this machine (``concurrent.futures`` with the
  ``spawn`` start method, so it behaves the same on Linux, macOS and Windows).
* ``dask``: a ``dask.distributed`` cluster at ``scheduler`` (an address such as
  ``tcp://10.0.0.5:8786`` or a ``distributed.Client``), or a ``LocalCluster`` started here
  when no scheduler is given.

Blocks are grouped into chunks of about ``chunk_seconds`` of work (measured on the first
blocks), because a task costs the local pool or the Dask scheduler around a millisecond:
10^6 trials become a few hundred tasks, each returning arrays of outputs, never models.
Inside a worker BLAS runs single-threaded (the trials are the parallel axis) and the C
allocator keeps freed blocks instead of returning them to the system after every step
(:func:`tune_allocator`).

The block function travels to local workers by ``pickle``; a closure or lambda, which
pickle cannot send, is sent with ``cloudpickle``. To a Dask cluster it travels with
:func:`dpverify.execution.shipping.dumps`, which sends the user's own modules by value, so a
``module:function`` from the user's checkout runs on workers that cannot import it; the
workers' package versions are compared with this process's when the client connects.
:class:`dpverify.execution.trials.OutputBlock` is the picklable block function for registered
targets: it carries the target's name and parameters and resolves them in the worker.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import math
import os
import pickle
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from dpverify.core.errors import InputError
from dpverify.execution.progress import ProgressSpec
from dpverify.execution.shipping import check_workers, dumps

EXECUTORS = ("serial", "local", "dask")

# Seconds of work per task once the block time is known: long enough that the ~1 ms a task
# costs is noise, short enough for progress, load balance and checkpoints.
DEFAULT_CHUNK_SECONDS = 0.25

# A block: (index, seed sequence, trials).
Item = tuple[int, np.random.SeedSequence, int]
# What a worker returns per block: (index, result, cpu seconds, wall seconds).
Done = tuple[int, Any, float, float]


@dataclass(frozen=True)
class Execution:
    """How a run's blocks are executed; pass it as ``executor=`` to ``map_blocks``.

    Parameters
    ----------
    executor
        ``"serial"``, ``"local"`` or ``"dask"``.
    workers
        Worker processes (``local``) or workers of the ``LocalCluster`` started when
        ``dask`` has no scheduler; ``None`` means one per CPU core. Ignored by ``serial``.
    scheduler
        Address of a Dask scheduler (or a ``distributed.Client``), for ``dask``.
    checkpoint
        Folder for checkpoints of finished blocks (``None``: no checkpoints).
    progress
        ``None``/``False`` (silent), ``True``/``"auto"`` (a bar on a terminal) or a
        function ``progress(label, fraction)``.
    chunk_seconds
        Target seconds of work per task sent to a worker.

    Examples
    --------
    >>> Execution("local", workers=2).describe()
    'local (2 workers)'
    """

    executor: str = "serial"
    workers: int | None = None
    scheduler: Any = None
    checkpoint: str | os.PathLike[str] | None = None
    progress: ProgressSpec = None
    chunk_seconds: float = DEFAULT_CHUNK_SECONDS

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise InputError(f"executor must be one of {EXECUTORS}, got {self.executor!r}")
        if self.workers is not None and (isinstance(self.workers, bool)
                                         or not isinstance(self.workers, (int, np.integer))
                                         or self.workers < 1):
            raise InputError(f"workers must be a positive integer, got {self.workers!r}")
        if self.executor != "dask" and self.scheduler is not None:
            raise InputError(f"a scheduler address needs executor 'dask', got "
                             f"{self.executor!r}")
        if not (self.chunk_seconds > 0):
            raise InputError(f"chunk_seconds must be > 0, got {self.chunk_seconds!r}")

    @property
    def n_workers(self) -> int:
        """Workers actually used (``None`` resolved to the CPU count)."""
        if self.executor == "serial":
            return 1
        return int(self.workers) if self.workers is not None else (os.cpu_count() or 1)

    def describe(self) -> str:
        """A short human description, for logs and reports."""
        if self.executor == "serial":
            return "serial"
        if self.executor == "dask" and self.scheduler is not None:
            return f"dask ({_scheduler_name(self.scheduler)})"
        return f"{self.executor} ({self.n_workers} workers)"


def resolve_execution(
    executor: str | Execution | None = None,
    *,
    workers: int | None = None,
    scheduler: Any = None,
    checkpoint: str | os.PathLike[str] | None = None,
    progress: ProgressSpec = None,
) -> Execution:
    """One :class:`Execution` from ``map_blocks``'s keywords (explicit keywords win).

    ``local`` with a single worker runs in this process (what ``--workers 1`` means);
    no executor but ``workers > 1`` means ``local``; a scheduler alone means ``dask``.

    Examples
    --------
    >>> resolve_execution(workers=2).executor
    'local'
    >>> resolve_execution("local", workers=1).executor
    'serial'
    >>> resolve_execution(Execution("dask"), scheduler="tcp://h:8786").describe()
    'dask (tcp://h:8786)'
    """
    if isinstance(executor, Execution):
        base = executor
    elif executor is None:
        kind = "dask" if scheduler is not None else (
            "local" if workers is not None and workers > 1 else "serial")
        base = Execution(kind)
    elif isinstance(executor, str):
        base = Execution(executor.strip().lower() if executor.strip() else "serial")
    else:
        raise InputError(f"executor must be a name ({', '.join(EXECUTORS)}) or an Execution, "
                         f"got {executor!r}")
    changes: dict[str, Any] = {}
    for name, value in (("workers", workers), ("scheduler", scheduler),
                        ("checkpoint", checkpoint), ("progress", progress)):
        if value is not None:
            changes[name] = value
    ex = replace(base, **changes) if changes else base
    if ex.executor == "local" and ex.workers == 1:
        ex = replace(ex, executor="serial")
    return ex


# --------------------------------------------------------------------------------------
# Worker set-up


_TUNED = False


def tune_allocator() -> bool:
    """Keep freed memory in the C heap (glibc only); returns whether it was applied.

    NumPy allocates every temporary of a trial block afresh. glibc serves blocks above
    128 KiB with ``mmap`` and hands them back on ``free``, so each step pays page faults
    for all its temporaries: on the development machines that costs half the throughput.
    Raising the mmap and trim thresholds (to 64 MiB and 256 MiB) keeps them in the heap.
    Set ``DPVERIFY_TUNE_MALLOC=0`` to leave the allocator alone.

    Examples
    --------
    >>> isinstance(tune_allocator(), bool)
    True
    """
    global _TUNED
    if _TUNED:
        return True
    if os.environ.get("DPVERIFY_TUNE_MALLOC", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
        ok = libc.mallopt(m_mmap_threshold, 64 << 20) == 1
        ok = libc.mallopt(m_trim_threshold, 256 << 20) == 1 and ok
    except (OSError, AttributeError):  # not glibc
        return False
    _TUNED = ok
    return ok


_CONTROLLER: Any = None


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """BLAS limited to one thread inside the block (when threadpoolctl is installed).

    The trials are the parallel axis; one BLAS thread per worker also keeps floating-point
    results the same in this process and in workers.
    """
    global _CONTROLLER
    if _CONTROLLER is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn/scipy
            yield
            return
        # Finding the loaded BLAS libraries takes milliseconds; limiting them does not.
        _CONTROLLER = ThreadpoolController()
    with _CONTROLLER.limit(limits=1, user_api="blas"):
        yield


_WORKER_READY = False


def _worker_setup() -> None:
    """Once per worker process: one BLAS thread, the allocator tuned."""
    global _WORKER_READY
    if _WORKER_READY:
        return
    _WORKER_READY = True
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    tune_allocator()
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
    except ImportError:  # pragma: no cover
        pass


def _run_items(fn: Callable[..., Any], items: Sequence[Item]) -> list[Done]:
    out: list[Done] = []
    for i, ss, k in items:
        c0, w0 = time.process_time(), time.perf_counter()
        res = fn(ss, k, i)
        out.append((i, res, time.process_time() - c0, time.perf_counter() - w0))
    return out


_FN_CACHE: dict[str, Any] = {}


def unpickled(key: str, payload: bytes) -> Any:
    """``payload`` unpickled, once per process for a given ``key`` (its hash).

    Examples
    --------
    >>> payload = pickle.dumps([1, 2])
    >>> unpickled("k", payload) is unpickled("k", payload)
    True
    """
    obj = _FN_CACHE.get(key)
    if obj is None:
        obj = pickle.loads(payload)
        if len(_FN_CACHE) >= 4:
            _FN_CACHE.clear()
        _FN_CACHE[key] = obj
    return obj


def _run_chunk_payload(key: str, payload: bytes, items: Sequence[Item]) -> list[Done]:
    """Task of the local pool: the block function arrives pickled, unpickled once."""
    _worker_setup()
    return _run_items(unpickled(key, payload), items)


def _run_chunk_dask(key: str, payload: bytes, items: Sequence[Item],
                    client_pid: int) -> list[Done]:
    """Task of a Dask worker: the block function was shipped to it, pickled with the
    user's modules by value (:mod:`dpverify.execution.shipping`)."""
    if os.getpid() != client_pid:  # a worker process of its own (not threads of ours)
        _worker_setup()
    return _run_items(unpickled(key, payload), items)


def dumps_block_fn(fn: Callable[..., Any]) -> bytes:
    """Pickle a block function, falling back to cloudpickle for closures and lambdas."""
    try:
        return pickle.dumps(fn, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        try:
            import cloudpickle
        except ImportError:
            raise InputError(
                f"the block function {fn!r} cannot be sent to worker processes ({e}); "
                "install cloudpickle, or use a picklable callable such as "
                "dpverify.execution.trials.OutputBlock") from None
        return cloudpickle.dumps(fn, protocol=pickle.HIGHEST_PROTOCOL)


# --------------------------------------------------------------------------------------
# Scheduling


@dataclass
class _Chunker:
    """Sizes chunks from measured block times: ~``seconds`` of work, all workers busy."""

    workers: int
    seconds: float
    block_wall: float = math.nan
    measured: int = 0

    def observe(self, wall: float) -> None:
        # A moving average that forgets a worker's slow first block (imports, calibration).
        self.measured += 1
        self.block_wall = wall if self.measured == 1 else (
            0.7 * self.block_wall + 0.3 * wall)

    def size(self, remaining: int) -> int:
        if self.measured == 0:
            return 1  # the first wave measures how long a block takes
        k = max(1, round(self.seconds / max(self.block_wall, 1e-6)))
        # Leave at least two chunks per worker for the end of the run (load balance).
        return max(1, min(k, math.ceil(remaining / (2 * self.workers))))


def _schedule(submit: Callable[[list[Item]], Any], wait_any: Callable[[set[Any]], set[Any]],
              items: Sequence[Item], workers: int, chunk_seconds: float,
              on_done: Callable[[Done], None],
              cancel: Callable[[set[Any], bool], None]) -> None:
    pending = deque(items)
    chunker = _Chunker(workers, chunk_seconds)
    in_flight: set[Any] = set()
    try:
        while pending or in_flight:
            while pending and len(in_flight) < 2 * workers:
                k = chunker.size(len(pending))
                chunk = [pending.popleft() for _ in range(min(k, len(pending)))]
                in_flight.add(submit(chunk))
            for fut in wait_any(in_flight):
                in_flight.discard(fut)
                for done in fut.result():
                    chunker.observe(done[3])
                    on_done(done)
    except BaseException as e:
        cancel(in_flight, not isinstance(e, Exception))
        raise


def run_serial(fn: Callable[..., Any], items: Sequence[Item],
               on_done: Callable[[Done], None]) -> None:
    """Every block in this process, in order."""
    tune_allocator()
    with single_threaded_blas():
        for item in items:
            on_done(_run_items(fn, [item])[0])


# local processes ----------------------------------------------------------------------

_POOLS: dict[int | str, Any] = {}


def _pool(workers: int) -> Any:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    pool = _POOLS.get(workers)
    if pool is None:
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"),
                                   initializer=_worker_setup)
        _POOLS[workers] = pool
    return pool


def in_fresh_process(fn: Callable[[Any], Any], arg: Any) -> Any:
    """``fn(arg)`` in a spawned process that runs nothing but such calls.

    No module state of this process reaches it: what it imports, it imports afresh (a
    check that a run's output does not depend on state an earlier run left in a module
    needs such a process). One is started on the first call and kept for the next; ``fn``
    and ``arg`` travel by plain pickle, so functions by reference. A failure there is
    raised here.

    Examples
    --------
    >>> in_fresh_process(abs, -3)
    3
    """
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing import get_context

    pool = _POOLS.get(FRESH)
    if pool is None:
        pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"),
                                   initializer=_worker_setup)
        _POOLS[FRESH] = pool
    try:
        return pool.submit(fn, arg).result()
    except BrokenProcessPool:
        _discard_pool(FRESH, kill=True)  # the next call starts another
        raise


# The key of the fresh process's pool among the pools.
FRESH = "fresh"


def _discard_pool(workers: int | str, *, kill: bool) -> None:
    pool = _POOLS.pop(workers, None)
    if pool is None:
        return
    if kill:
        # Running tasks are not cancellable; stop their processes so Ctrl-C really stops.
        for p in list(getattr(pool, "_processes", {}).values()):
            with contextlib.suppress(Exception):
                p.terminate()
    pool.shutdown(wait=not kill, cancel_futures=True)


def run_local(fn: Callable[..., Any], items: Sequence[Item], on_done: Callable[[Done], None],
              *, workers: int, chunk_seconds: float = DEFAULT_CHUNK_SECONDS) -> None:
    """Blocks in a pool of ``workers`` spawned processes (kept for later runs)."""
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    payload = dumps_block_fn(fn)
    key = hashlib.sha256(payload).hexdigest()
    pool = _pool(workers)

    def submit(chunk: list[Item]) -> Any:
        return pool.submit(_run_chunk_payload, key, payload, chunk)

    def wait_any(fs: set[Any]) -> set[Any]:
        return wait(fs, return_when=FIRST_COMPLETED).done

    def cancel(fs: set[Any], interrupted: bool) -> None:
        for f in fs:
            f.cancel()
        if interrupted:  # Ctrl-C: running tasks cannot be cancelled, so stop their workers
            _discard_pool(workers, kill=True)

    try:
        _schedule(submit, wait_any, items, workers, chunk_seconds, on_done, cancel)
    except BrokenProcessPool as e:
        raise RuntimeError(f"a local worker process died ({e}); finished blocks are kept "
                           "when a checkpoint folder is given") from e


# dask ---------------------------------------------------------------------------------

_CLIENTS: dict[Any, Any] = {}


def _scheduler_name(scheduler: Any) -> str:
    if isinstance(scheduler, str):
        return scheduler
    return str(getattr(scheduler, "scheduler", None) and scheduler.scheduler.address
               or scheduler)


def dask_client(scheduler: Any = None, workers: int | None = None) -> Any:
    """A ``distributed.Client`` for ``scheduler``, or for a LocalCluster started here.

    Clients are kept for later runs and closed at exit (or by :func:`shutdown`).
    """
    try:
        import distributed
    except ImportError:
        raise InputError("executor 'dask' needs dask.distributed: "
                         "pip install 'dpverify[dask]'") from None

    if scheduler is not None and not isinstance(scheduler, str):
        check_workers(scheduler)
        return scheduler  # a Client the caller made and owns
    key = scheduler if scheduler is not None else ("local", workers)
    client = _CLIENTS.get(key)
    if client is not None and client.status == "running":
        if scheduler is not None:
            check_workers(client)  # workers that joined since
        return client
    if scheduler is not None:
        try:
            client = distributed.Client(scheduler, timeout="20s", set_as_default=False)
        except OSError as e:
            raise InputError(f"cannot reach the Dask scheduler at {scheduler!r}: {e}") from None
        try:
            check_workers(client)
        except InputError:
            client.close()
            raise
    else:
        n = workers or os.cpu_count() or 1
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        client = distributed.Client(cluster, set_as_default=False)
    _CLIENTS[key] = client
    return client


class Spread:
    """Tasks placed on a Dask cluster's workers in turn: each on the worker with the fewest
    of ours in flight per thread, a preference only (``allow_other_workers``), so that a
    worker that leaves or lags loses its tasks to the others. Left to itself the scheduler
    may queue a few short tasks on one worker while another idles.

    Examples
    --------
    >>> class C:  # a client's two calls that placement uses
    ...     def nthreads(self): return {"w1": 1, "w2": 1}
    ...     def submit(self, fn, *a, **kw): return (kw["workers"][0], len(a))
    >>> s = Spread(C())
    >>> [s.submit(print, 1)[0] for _ in range(3)]
    ['w1', 'w2', 'w1']
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.threads: dict[str, int] = dict(client.nthreads())
        self.load = dict.fromkeys(self.threads, 0)
        self.where: dict[Any, str] = {}

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``client.submit(fn, *args)`` on the least loaded worker (any, if none is known)."""
        if not self.threads:
            return self.client.submit(fn, *args, pure=False)
        w = min(self.threads, key=lambda a: (self.load[a] / max(self.threads[a], 1), a))
        fut = self.client.submit(fn, *args, pure=False, workers=[w], allow_other_workers=True)
        self.load[w] += 1
        self.where[id(fut)] = w
        return fut

    def first_done(self, finished: Any) -> set[Any]:
        """The next futures that ``finished`` (a ``distributed.as_completed``) yields, counted
        out of their workers' loads."""
        done = {next(finished), *finished.next_batch(block=False)}
        for fut in done:
            w = self.where.pop(id(fut), None)
            if w is not None:
                self.load[w] -= 1
        return done


def ship(client: Any, payload: bytes) -> Any:
    """``payload`` on a Dask cluster, as the result of a task that returns it: a future
    that tasks take as an argument.

    Scattered data is lost for good when every worker holding it leaves, and the tasks that
    need it are cancelled ("lost dependencies"); a worker that joined after a broadcast holds
    no copy, so losing the workers that were there loses the data. A task's result is
    computed again from its arguments, which the scheduler keeps.

    Examples
    --------
    >>> class C:  # the client's call that shipping uses
    ...     def submit(self, fn, *a, **kw): return fn(*a)
    >>> ship(C(), b"code")
    b'code'
    """
    return client.submit(_returned, payload, pure=False)


def _returned(payload: bytes) -> bytes:
    return payload


def run_dask(fn: Callable[..., Any], items: Sequence[Item], on_done: Callable[[Done], None],
             *, scheduler: Any = None, workers: int | None = None,
             chunk_seconds: float = DEFAULT_CHUNK_SECONDS) -> None:
    """Blocks as tasks on a Dask cluster; the block function is shipped once (:func:`ship`).

    It travels pickled by :func:`dpverify.execution.shipping.dumps`, so a user's own module goes
    with it: the workers need not be able to import it.
    """
    import distributed

    payload = dumps(fn, "the block function")  # before connecting: refused before any work
    key = hashlib.sha256(payload).hexdigest()
    client = dask_client(scheduler, workers)
    n_workers = max(1, sum(client.nthreads().values()))
    fn_future = ship(client, payload)
    pid = os.getpid()
    finished = distributed.as_completed(loop=client.loop)
    spread = Spread(client)

    def submit(chunk: list[Item]) -> Any:
        fut = spread.submit(_run_chunk_dask, key, fn_future, chunk, pid)
        finished.add(fut)
        return fut

    def wait_any(fs: set[Any]) -> set[Any]:
        return spread.first_done(finished)

    def cancel(fs: set[Any], interrupted: bool) -> None:
        client.cancel(list(fs))

    try:
        _schedule(submit, wait_any, items, n_workers, chunk_seconds, on_done, cancel)
    finally:
        with contextlib.suppress(Exception):
            client.cancel([fn_future])


def run(execution: Execution, fn: Callable[..., Any], items: Sequence[Item],
        on_done: Callable[[Done], None]) -> None:
    """Compute ``fn(seed, trials, index)`` for every item with ``execution``'s executor."""
    if not items:
        return
    if execution.executor == "serial":
        run_serial(fn, items, on_done)
    elif execution.executor == "local":
        run_local(fn, items, on_done, workers=execution.n_workers,
                  chunk_seconds=execution.chunk_seconds)
    else:
        run_dask(fn, items, on_done, scheduler=execution.scheduler, workers=execution.workers,
                 chunk_seconds=execution.chunk_seconds)


def shutdown() -> None:
    """Stop the worker pools and close the Dask clients this module started."""
    for w in list(_POOLS):
        _discard_pool(w, kill=False)
    for key in list(_CLIENTS):
        client = _CLIENTS.pop(key)
        cluster = getattr(client, "cluster", None)
        with contextlib.suppress(Exception):
            client.close()
        if isinstance(key, tuple) and cluster is not None:  # a LocalCluster started here
            with contextlib.suppress(Exception):
                cluster.close()


atexit.register(shutdown)
