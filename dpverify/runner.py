"""Running many checks: one after another, or several at a time in worker processes.

A suite's checks are independent: each derives all of its randomness from the run's root
seed and its own parameters, never from what ran before it. So running them ``jobs`` at a
time in separate processes gives the same results as running them in order (the tests
check this), and on a machine with ``jobs`` free cores the wall time of a suite falls to
about that of its longest checks packed ``jobs`` deep. This is check-level parallelism;
``--workers`` is the trial-level kind inside one check, and the two multiply.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

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


def _run_one(spec: CheckSpec, ctx: RunContext) -> CheckResult:
    from dpverify.executors import single_threaded_blas

    with single_threaded_blas():
        return run_check(spec, ctx)


def _portable(ctx: RunContext) -> RunContext:
    # A progress callback belongs to the parent's console and does not cross processes.
    return dataclasses.replace(ctx, progress=None)


def run_checks(
    jobs_list: Sequence[Job],
    *,
    jobs: int = 1,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Run each ``(spec, ctx)`` and return the results in the order given.

    Parameters
    ----------
    jobs_list
        The checks, each with the context it runs in (already scaled).
    jobs
        How many checks run at a time. 1 runs them in this process, in order; more runs
        them in that many worker processes (started fresh, so a check never sees another's
        state), and ``on_result`` is called as each finishes.
    on_result
        Called with each result as soon as it is known.

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
    if jobs == 1 or len(jobs_list) <= 1:
        out = []
        for spec, ctx in jobs_list:
            res = run_check(spec, ctx)
            out.append(res)
            if on_result:
                on_result(res)
        return out
    methods = multiprocessing.get_all_start_methods()
    # forkserver/spawn: a fresh interpreter per worker, never a fork of a parent that may
    # hold torch or BLAS threads.
    mp = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    results: list[CheckResult | None] = [None] * len(jobs_list)
    with ProcessPoolExecutor(max_workers=min(jobs, len(jobs_list)), mp_context=mp,
                             initializer=_init_worker) as pool:
        pending: dict[Future[CheckResult], int] = {
            pool.submit(_run_one, spec, _portable(ctx)): i
            for i, (spec, ctx) in enumerate(jobs_list)
        }
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    i = pending.pop(fut)
                    res = fut.result()  # InputError from a worker surfaces here, as serially
                    results[i] = res
                    if on_result:
                        on_result(res)
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise
    return [r for r in results if r is not None]
