"""Running many checks: one after another, or several at a time in worker processes.

A suite's checks are independent: each derives all of its randomness from the run's root
seed and its own parameters, never from what ran before it. So running them ``jobs`` at a
time in separate processes gives the same results as running them in order (the tests
check this), and on a machine with ``jobs`` free cores the wall time of a suite falls to
about that of its longest checks packed ``jobs`` deep. This is check-level parallelism;
``--workers`` is the trial-level kind inside one check, and the two multiply.

With ``--executor dask`` the same machinery sends whole checks to a Dask cluster instead
of local processes: each check runs on one worker (its trial blocks there, in order), its
user's own modules shipped with it (:mod:`dpverify.execution.shipping`), and the results come back
in the order of a serial run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import multiprocessing
import os
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

from dpverify.checks.base import CheckResult, CheckSpec, RunContext, run_check
from dpverify.core.errors import InputError, check_delta, check_epsilon
from dpverify.core.registry import is_registered_target, resolve
from dpverify.execution.executors import (
    Spread,
    _worker_setup,
    dask_client,
    ship,
    shutdown,
    single_threaded_blas,
    unpickled,
)
from dpverify.execution.shipping import bundle_for, callable_specs, dumps, installed

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
    try:
        with single_threaded_blas():
            return run_counting_warnings(spec, ctx), f"process {os.getpid()}"
    finally:
        # A pool the check started (its own ``workers``) would keep this worker process,
        # and with it the whole run, from exiting.
        shutdown()


#: Most distinct warnings kept per check (the count covers them all).
MAX_WARNINGS = 10


def run_counting_warnings(spec: CheckSpec, ctx: RunContext) -> CheckResult:
    """Run one check; the warnings it raises go into its evidence, counted, not to stderr.

    A library that warns on every call (diffprivlib's ``PrivacyLeakWarning`` on each
    mechanism it builds, dp_accounting's RDP orders that fail to converge, logged through
    absl) would otherwise bury a run's output under hundreds of lines. The report keeps,
    per check, each distinct warning (category or logger, and message) with how often it
    came (``evidence["warnings"]``) and the total (``metrics["warnings"]``). Deprecations
    are left to the usual filters: they concern the code, not the result.

    Examples
    --------
    >>> spec = CheckSpec("a", "account", "noisy_gd:sound", params={"T": 5})
    >>> "warnings" in run_counting_warnings(spec, RunContext()).outcome.metrics
    False
    """
    logged = _LogTally()
    root = logging.getLogger()
    handlers = root.handlers[:]
    root.handlers = [logged]
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for quiet in (DeprecationWarning, PendingDeprecationWarning):
                warnings.simplefilter("ignore", quiet)
            res = run_check(spec, ctx)
    finally:
        root.handlers = handlers
    tally = Counter((w.category.__name__, _first_line(w.message)) for w in caught)
    tally.update(logged.tally)
    if tally:
        res.outcome.evidence["warnings"] = [
            {"category": c, "message": m, "count": k}
            for (c, m), k in tally.most_common(MAX_WARNINGS)]
        res.outcome.result = res.outcome.result.replace(warnings=sum(tally.values()))
    return res


def _first_line(message: object) -> str:
    text = str(message).strip()
    return text.splitlines()[0][:300] if text else ""


class _LogTally(logging.Handler):
    """Counts the warnings libraries log (absl's, through the logging module) by logger."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.tally: Counter[tuple[str, str]] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        # Numbers in a message (an order, an iteration count) would split one warning
        # into many: they are masked for counting.
        text = re.sub(r"\d+(\.\d+)?", "#", _first_line(record.getMessage()))
        self.tally[(f"{record.name} {record.levelname.lower()}", text)] += 1


def warning_summary(results: Sequence[CheckResult]) -> str:
    """One line on the warnings a run's checks raised, or "" when there were none.

    Examples
    --------
    >>> from dpverify.checks.base import Outcome
    >>> from dpverify.core.claims import Verdict
    >>> out = Outcome(Verdict.PASS, {"warnings": 3}, {"warnings": [
    ...     {"category": "PrivacyLeakWarning", "message": "m", "count": 3}]})
    >>> warning_summary([CheckResult(CheckSpec("a", "audit", "t"), out, 1.0)])
    '3 warnings in 1 check, counted in the report (PrivacyLeakWarning x3)'
    """
    counts: Counter[str] = Counter()
    checks = 0
    for r in results:
        ws = r.outcome.evidence.get("warnings") or []
        checks += bool(ws)
        for w in ws:
            counts[str(w.get("category"))] += int(w.get("count", 1))
    if not checks:
        return ""
    total = sum(r.outcome.result.warnings or 0 for r in results)
    kinds = ", ".join(f"{c} x{k}" for c, k in counts.most_common(4))
    return (f"{total} warnings in {checks} check{'s' * (checks > 1)}, counted in the report "
            f"({kinds})")


def with_params(specs: Sequence[CheckSpec], overrides: Mapping[str, Any]) -> list[CheckSpec]:
    """The checks with ``--param`` overrides applied wherever the target takes them.

    A parameter goes to every check whose registered algorithm has it (a suite mixes
    algorithms: ``T`` means nothing to a mechanism); one that no check takes is an error,
    as is a privacy value out of range or a value of the wrong kind (a word for a number),
    before anything runs.

    Examples
    --------
    >>> specs = [CheckSpec("a", "account", "noisy_gd:sound", params={"T": 5}),
    ...          CheckSpec("b", "account", "gaussian_mechanism:sound")]
    >>> [dict(s.params) for s in with_params(specs, {"T": 7})]
    [{'T': 7}, {}]
    """
    for key, check in (("epsilon", check_epsilon), ("delta", check_delta)):
        if key in overrides:
            try:
                check(overrides[key])
            except InputError as e:
                raise InputError(f"--param {key}: {e}") from None
    taken: set[str] = set()
    out = []
    for spec in specs:
        known: set[str] = set()
        if overrides and is_registered_target(spec.target):
            t = resolve(spec.target)
            known = set(t.algorithm.params(t.variant.name))
        mine = {k: v for k, v in overrides.items() if k in known}
        for k, v in mine.items():
            try:
                t.algorithm.check_value(k, v)
            except InputError as e:
                raise InputError(f"--param {k}: {e}") from None
        taken |= set(mine)
        # An overridden value is no longer the one its suite line holds.
        lines = {k: v for k, v in spec.lines.items() if k.partition(".")[2] not in mine
                 or not k.startswith("params.")}
        out.append(dataclasses.replace(spec, params={**spec.params, **mine}, lines=lines)
                   if mine else spec)
    unused = sorted(set(overrides) - taken)
    if unused:
        raise InputError(f"--param {', '.join(unused)}: no check of these suites has such a "
                         f"parameter")
    return out


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
            res = run_counting_warnings(spec, ctx)
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


    if os.getpid() != client_pid:  # a worker process of its own, not threads of ours
        _worker_setup()
    with installed(unpickled(key, payload)):
        res, _ = _run_one(spec, ctx)
    return res, get_worker().address


class _DaskChecks:
    """Checks as tasks on a Dask cluster; the user's modules are shipped once."""

    def __init__(self, jobs_list: Sequence[Job]) -> None:
        specs = callable_specs([v for spec, _ in jobs_list
                                for v in (spec.target, dict(spec.params), dict(spec.options))])
        # Pickled before connecting: what cannot travel is refused before any work.
        payload = dumps(bundle_for(specs), "the checks' own modules")
        self.key = hashlib.sha256(payload).hexdigest()
        ctx = jobs_list[0][1]
        self.client = dask_client(ctx.scheduler, ctx.workers if ctx.workers > 1 else None)
        self.bundle = ship(self.client, payload)
        self.spread = Spread(self.client)
        import distributed

        self.finished = distributed.as_completed(loop=self.client.loop)

    def __enter__(self) -> _DaskChecks:
        return self

    def __exit__(self, *exc: Any) -> None:
        with contextlib.suppress(Exception):
            self.client.cancel([self.bundle])

    def submit(self, spec: CheckSpec, ctx: RunContext) -> Any:
        fut = self.spread.submit(_run_on_worker, self.key, self.bundle, spec,
                                 _on_worker(ctx), os.getpid())
        self.finished.add(fut)
        return fut

    def wait_first(self, pending: list[Any]) -> set[Any]:
        return self.spread.first_done(self.finished)

    def cancel(self, pending: list[Any]) -> None:
        self.client.cancel(pending)
