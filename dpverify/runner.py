"""Running many checks: one after another, or several at a time in worker processes.

A suite's checks are independent: each derives all of its randomness from the run's root
seed and its own parameters, never from what ran before it. So running them ``jobs`` at a
time in separate processes gives the same results as running them in order (the tests
check this), and on a machine with ``jobs`` free cores the wall time of a suite falls to
about that of its longest checks packed ``jobs`` deep. This is check-level parallelism;
``--workers`` is the trial-level kind inside one check, and the two multiply.

With ``--executor dask`` the same machinery sends whole checks to a Dask cluster instead
of local processes: each check runs on one worker (its trial blocks there, in order), its
user's own modules shipped with it (:mod:`dpverify.shipping`), and the results come back
in the order of a serial run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

from dpverify.checks import CheckResult, CheckSpec, RunContext, run_check
from dpverify.errors import InputError

Job = tuple[CheckSpec, RunContext]


def _init_worker() -> None:
    # One BLAS/OpenMP thread per process: the jobs are the parallel axis, and a fixed thread
    # count keeps floating-point reductions the same as in a serial run.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover - torch is an optional backend
        pass


def _run_one(spec: CheckSpec, ctx: RunContext) -> tuple[CheckResult, str]:
    from dpverify.executors import single_threaded_blas

    with single_threaded_blas():
        return run_check(spec, ctx), f"process {os.getpid()}"


def _portable(ctx: RunContext) -> RunContext:
    # A progress callback belongs to the parent's console and does not cross processes.
    return dataclasses.replace(ctx, progress=None)


def on_cluster(jobs_list: Sequence[Job]) -> bool:
    """Whether the checks' context sends them to a Dask cluster (``--executor dask``).

    Examples
    --------
    >>> spec = CheckSpec("a", "account", "noisy_gd:sound")
    >>> on_cluster([(spec, RunContext())]), on_cluster([(spec, RunContext(executor="dask"))])
    (False, True)
    """
    return any(ctx.executor == "dask" for _, ctx in jobs_list)


def run_checks(
    jobs_list: Sequence[Job],
    *,
    jobs: int = 1,
    on_result: Callable[[CheckResult], None] | None = None,
    placed: dict[str, str] | None = None,
) -> list[CheckResult]:
    """Run each ``(spec, ctx)`` and return the results in the order given.

    Parameters
    ----------
    jobs_list
        The checks, each with the context it runs in (already scaled). A context with
        ``executor="dask"`` sends whole checks to the cluster at ``ctx.scheduler`` (a
        ``LocalCluster`` of ``ctx.workers`` processes without one): each runs on one
        worker, its trial blocks there one after another, with the same seeds as here.
    jobs
        How many checks run at a time in local processes. 1 runs them in this process, in
        order; more runs them in that many worker processes (started fresh, so a check
        never sees another's state), and ``on_result`` is called as each finishes.
    on_result
        Called with each result as soon as it is known.
    placed
        If given, filled with where each check ran (check id -> worker address or
        process), before ``on_result`` sees it.

    Returns
    -------
    list of CheckResult
        In the order of ``jobs_list``, whatever order they finished in.

    Examples
    --------
    >>> spec = CheckSpec("a", "account", "noisy_gd:sound", params={"T": 5})
    >>> [r.outcome.verdict.value for r in run_checks([(spec, RunContext())])]
    ['PASS']
    """
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise InputError(f"--jobs must be a positive integer, got {jobs!r}")
    if jobs_list and on_cluster(jobs_list):
        if jobs != 1:
            raise InputError(f"--jobs {jobs} runs checks in local processes; with --executor "
                             "dask the cluster's workers run them: leave --jobs out")
        with _DaskChecks(jobs_list) as pool:
            return _gather(pool, jobs_list, on_result, placed)
    if jobs == 1 or len(jobs_list) <= 1:
        out = []
        for spec, ctx in jobs_list:
            res = run_check(spec, ctx)
            out.append(res)
            if placed is not None:
                placed[spec.id] = "this process"
            if on_result:
                on_result(res)
        return out
    methods = multiprocessing.get_all_start_methods()
    # forkserver/spawn: a fresh interpreter per worker, never a fork of a parent that may
    # hold torch or BLAS threads.
    mp = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(jobs_list)), mp_context=mp,
                             initializer=_init_worker) as pool:
        return _gather(_ProcessChecks(pool), jobs_list, on_result, placed)


class _ProcessChecks:
    """Checks in a pool of local processes."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self.pool = pool

    def submit(self, spec: CheckSpec, ctx: RunContext) -> Any:
        return self.pool.submit(_run_one, spec, _portable(ctx))

    def wait_first(self, pending: Iterable[Any]) -> set[Any]:
        return wait(pending, return_when=FIRST_COMPLETED).done

    def cancel(self, pending: list[Any]) -> None:
        for fut in pending:
            fut.cancel()


def _gather(pool: Any, jobs_list: Sequence[Job],
            on_result: Callable[[CheckResult], None] | None,
            placed: dict[str, str] | None) -> list[CheckResult]:
    results: list[CheckResult | None] = [None] * len(jobs_list)
    pending: dict[Any, int] = {pool.submit(spec, ctx): i
                               for i, (spec, ctx) in enumerate(jobs_list)}
    try:
        while pending:
            for fut in pool.wait_first(list(pending)):
                i = pending.pop(fut)
                res, where = fut.result()  # an InputError of a worker surfaces here
                results[i] = res
                if placed is not None:
                    placed[res.spec.id] = where
                if on_result:
                    on_result(res)
    except BaseException:
        pool.cancel(list(pending))
        raise
    return [r for r in results if r is not None]


# Dask: whole checks on a cluster -------------------------------------------------------


def _on_worker(ctx: RunContext) -> RunContext:
    """The context a check runs with on a worker: its blocks there, in order; a checkpoint
    folder as an absolute path (the worker's working directory is not ours)."""
    extras = dict(ctx.extras, quiet=True)
    if extras.get("checkpoint"):
        extras["checkpoint"] = os.path.abspath(extras["checkpoint"])
    return dataclasses.replace(ctx, progress=None, executor="local", workers=1,
                               scheduler=None, extras=extras)


def _run_on_worker(key: str, payload: bytes, spec: CheckSpec, ctx: RunContext,
                   client_pid: int) -> tuple[CheckResult, str]:
    """Task of a Dask worker: one check, with the user's modules importable meanwhile."""
    from distributed import get_worker

    from dpverify.executors import _worker_setup, unpickled
    from dpverify.shipping import installed

    if os.getpid() != client_pid:  # a worker process of its own, not threads of ours
        _worker_setup()
    with installed(unpickled(key, payload)):
        res, _ = _run_one(spec, ctx)
    return res, get_worker().address


class _DaskChecks:
    """Checks as tasks on a Dask cluster; the user's modules are scattered once."""

    def __init__(self, jobs_list: Sequence[Job]) -> None:
        from dpverify.executors import dask_client
        from dpverify.shipping import bundle_for, callable_specs, dumps

        specs = callable_specs([v for spec, _ in jobs_list
                                for v in (spec.target, dict(spec.params), dict(spec.options))])
        # Pickled before connecting: what cannot travel is refused before any work.
        payload = dumps(bundle_for(specs), "the checks' own modules")
        self.key = hashlib.sha256(payload).hexdigest()
        ctx = jobs_list[0][1]
        self.client = dask_client(ctx.scheduler, ctx.workers if ctx.workers > 1 else None)
        self.bundle = self.client.scatter(payload, broadcast=True, hash=False)
        import distributed

        self.finished = distributed.as_completed(loop=self.client.loop)

    def __enter__(self) -> _DaskChecks:
        return self

    def __exit__(self, *exc: Any) -> None:
        with contextlib.suppress(Exception):
            self.client.cancel([self.bundle])

    def submit(self, spec: CheckSpec, ctx: RunContext) -> Any:
        fut = self.client.submit(_run_on_worker, self.key, self.bundle, spec,
                                 _on_worker(ctx), os.getpid(), pure=False)
        self.finished.add(fut)
        return fut

    def wait_first(self, pending: list[Any]) -> set[Any]:
        return {next(self.finished), *self.finished.next_batch(block=False)}

    def cancel(self, pending: list[Any]) -> None:
        self.client.cancel(pending)
