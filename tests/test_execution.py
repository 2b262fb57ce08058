"""Execution: block layout, executors (serial, local processes, Dask), progress, context.

The determinism tests run the same trials through every executor and several chunkings
and require bit-identical outputs: blocks are seeded by index from the root seed, so
nothing else may matter.
"""

from __future__ import annotations

import io
import pickle
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from dpverify.checks.base import RunContext
from dpverify.core.errors import InputError
from dpverify.core.registry import resolve
from dpverify.execution import executors, progress
from dpverify.execution.executors import resolve_execution
from dpverify.execution.trials import (
    DEFAULT_BLOCK,
    BlockPlan,
    Execution,
    OutputBlock,
    auto_block_size,
    block_layout,
    build_problem,
    executor_from_context,
    map_blocks,
    resolve_block_size,
    run_blocks,
    sample_outputs,
)


@pytest.fixture(scope="module")
def gd() -> tuple[Any, dict[str, Any], Any]:
    t = resolve("noisy_gd:sound")
    p = t.algorithm.params("sound", {"T": 15, "n": 120, "d": 4})
    return t, p, build_problem(t, p, 0)


@pytest.fixture(scope="module")
def pools() -> Iterator[None]:
    """Worker pools and Dask clients started by these tests are stopped at the end."""
    yield
    executors.shutdown()


def _uniform_block(ss: np.random.SeedSequence, k: int, i: int) -> tuple[np.ndarray, int]:
    rng = np.random.default_rng(ss)
    return rng.standard_normal((k, 3)), i


# layout -------------------------------------------------------------------------------


def test_block_layout_covers_the_trials_in_fixed_blocks() -> None:
    assert block_layout(10, 4) == [4, 4, 2]
    assert block_layout(0, 4) == []
    assert sum(block_layout(12345)) == 12345
    with pytest.raises(InputError):
        block_layout(10, 0)


def test_auto_block_size_follows_cache_and_memory_budget() -> None:
    assert auto_block_size(1000) == 64
    assert auto_block_size(1000, dtype="float32") == 128
    assert auto_block_size(10) == 1024  # capped
    assert auto_block_size(10**5) == 16  # floor for Python overhead
    # the budget wins over the cache rule: 8 arrays of n float64 per trial
    n, budget = 10**6, 8 * 8 * 10**6 * 3
    assert auto_block_size(n, memory_budget=budget) == 3
    assert auto_block_size(10**9, memory_budget=1) == 1
    assert resolve_block_size(None, n=1000) == 64
    assert resolve_block_size(7, n=1000) == 7
    for bad in (0, -3, 2.5, "big", True):
        with pytest.raises(InputError):
            resolve_block_size(bad, n=10)
        with pytest.raises(InputError):
            BlockPlan(bad)


def test_a_block_plan_resolves_auto_only_for_known_data() -> None:
    assert BlockPlan(None).size == "auto" and BlockPlan(np.int64(7)).size == 7
    assert BlockPlan("auto").for_data(1000).size == 64
    assert BlockPlan("auto", memory_budget=8 * 8 * 10**6 * 3).for_data(10**6).size == 3
    assert BlockPlan(7).for_data(1000).size == 7  # an explicit size is kept
    assert BlockPlan(4).block_sizes(10) == [4, 4, 2]
    with pytest.raises(InputError, match="auto"):
        map_blocks(lambda ss, k, i: k, 10, seed=0, plan=BlockPlan("auto"))


def test_defaults_keep_the_serial_in_order_behaviour() -> None:
    calls: list[int] = []

    def fn(ss: np.random.SeedSequence, k: int, i: int) -> int:
        calls.append(i)
        return k

    assert map_blocks(fn, 2 * DEFAULT_BLOCK + 1, seed=0) == [DEFAULT_BLOCK, DEFAULT_BLOCK, 1]
    assert calls == [0, 1, 2]


# determinism across executors -----------------------------------------------------------


def test_outputs_are_bit_identical_across_executors_and_chunkings(gd: Any, pools: None) -> None:
    distributed = pytest.importorskip("distributed")
    t, p, prob = gd
    fn = OutputBlock(t, p, prob, prob.data)

    def sample(execution: Execution | None = None, seed: int = 11) -> np.ndarray:
        return sample_outputs(fn, trials=400, seed=seed, plan=BlockPlan(25, execution))

    ref = sample()
    assert ref.shape == (400, prob.data.d)
    runs = {
        "serial, 1-block chunks": sample(Execution("serial", chunk_seconds=1e-9)),
        "local x2, 1-block chunks": sample(Execution("local", workers=2, chunk_seconds=1e-9)),
        "local x2, large chunks": sample(Execution("local", workers=2, chunk_seconds=100.0)),
    }
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        runs["dask"] = sample(Execution("dask", scheduler=cluster.scheduler_address))
        executors.shutdown()  # closes the client before its cluster goes
    for name, out in runs.items():
        assert np.array_equal(out, ref), name
    # and the seed matters: another root seed gives other trials
    other = sample(seed=12)
    assert not np.allclose(other, ref)


def test_shipped_code_outlives_the_workers_that_held_it() -> None:
    """What a cluster's tasks take as code is a task's result, computed again when every
    worker holding it is lost: data scattered to the workers of the time is lost with them,
    and a worker that joined later never had it. Deterministic (the scheduler is told the
    holder is gone)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        shipped = executors.ship(client, b"code")
        scattered = client.scatter(b"code", broadcast=True, hash=False)
        distributed.wait([shipped, scattered])
        cluster.scale(2)
        client.wait_for_workers(2)
        (holder,) = client.who_has([shipped])[shipped.key]
        client.sync(cluster.scheduler.remove_worker, address=holder, stimulus_id="lost",
                    close=False)
        assert client.submit(len, shipped, pure=False).result(timeout=60) == 4
        with pytest.raises(distributed.client.FutureCancelledError):
            client.submit(len, scattered, pure=False).result(timeout=60)


def test_closures_and_plain_functions_run_in_worker_processes(pools: None) -> None:
    pytest.importorskip("cloudpickle")
    scale = 3.0
    closure = lambda ss, k, i: np.random.default_rng(ss).random(k) * scale  # noqa: E731
    serial = run_blocks(closure, 50, seed=4, plan=BlockPlan(7))
    local = run_blocks(closure, 50, seed=4, plan=BlockPlan(7, Execution("local", workers=2)))
    assert np.array_equal(serial.concatenate(), local.concatenate())
    assert local.execution == "local (2 workers)" and local.computed == 8
    tuples = map_blocks(_uniform_block, 20, seed=1,
                        plan=BlockPlan(6, Execution("local", workers=2)))
    assert [i for _, i in tuples] == [0, 1, 2, 3]
    assert np.array_equal(np.concatenate([a for a, _ in tuples]),
                          np.concatenate([a for a, _ in map_blocks(_uniform_block, 20, seed=1,
                                                                   plan=BlockPlan(6))]))


def test_a_failing_block_raises_in_the_caller_and_the_pool_survives(pools: None) -> None:
    pytest.importorskip("cloudpickle")

    def block(ss: np.random.SeedSequence, k: int, i: int) -> int:
        if i == 3:
            raise ValueError(f"block {i} failed")
        return k

    two_workers = BlockPlan(5, Execution("local", workers=2))
    with pytest.raises(ValueError, match="block 3 failed"):
        map_blocks(block, 50, seed=0, plan=two_workers)
    assert map_blocks(lambda ss, k, i: k, 12, seed=0, plan=two_workers) == [5, 5, 2]


def test_chunks_grow_to_the_target_duration_and_keep_workers_busy() -> None:
    ch = executors._Chunker(workers=2, seconds=0.25)
    assert ch.size(1000) == 1  # nothing measured yet
    ch.observe(2.0)  # a slow first block (imports) is soon forgotten
    for _ in range(20):
        ch.observe(0.01)
    assert 20 <= ch.size(1000) <= 30
    assert ch.size(40) == 10  # the last 40 blocks still make 4 chunks for 2 workers
    assert ch.size(1) == 1


def test_float32_runs_in_single_precision_and_tracks_float64(gd: Any) -> None:
    t, p, prob = gd
    a64 = sample_outputs(OutputBlock(t, p, prob, prob.data), trials=64, seed=3,
                         plan=BlockPlan(32))
    a32 = sample_outputs(OutputBlock(t, p, prob, prob.data, dtype="float32"), trials=64, seed=3,
                         plan=BlockPlan(32))
    # the same blocks draw the same noise stream (in float64, then rounded)
    assert a32.dtype == np.float32 and a64.dtype == np.float64
    assert not np.array_equal(a32.astype(np.float64), a64)
    np.testing.assert_allclose(a32, a64, rtol=1e-3, atol=1e-3)


def test_output_block_travels_by_name_and_keys_what_matters(gd: Any) -> None:
    t, p, prob = gd
    fn = OutputBlock(t, p, prob, prob.data)
    assert fn.target == "noisy_gd:sound"
    cloudpickle = pytest.importorskip("cloudpickle")
    clone = pickle.loads(cloudpickle.dumps(fn))
    ss = np.random.SeedSequence(5)
    assert np.array_equal(clone(ss, 4, 0), fn(ss, 4, 0))
    key = fn.checkpoint_key()
    assert key == OutputBlock(t, dict(p), prob, prob.data).checkpoint_key()
    assert key != OutputBlock(t, {**p, "T": 16}, prob, prob.data).checkpoint_key()
    assert key != OutputBlock(t, p, prob, prob.data.without(0)).checkpoint_key()
    assert key != OutputBlock(t, p, prob, prob.data, dtype="float32").checkpoint_key()


# configuration ----------------------------------------------------------------------------


def test_resolve_execution_and_bad_settings() -> None:
    assert resolve_execution().executor == "serial"
    assert resolve_execution(workers=3).describe() == "local (3 workers)"
    assert resolve_execution("local", workers=1).executor == "serial"
    assert resolve_execution(scheduler="tcp://h:1").executor == "dask"
    ex = resolve_execution(Execution("local", workers=2), workers=4, checkpoint="ck")
    assert (ex.workers, ex.checkpoint) == (4, "ck")
    for bad in (dict(executor="ray"), dict(executor="local", workers=0),
                dict(executor="serial", scheduler="tcp://h:1"),
                dict(executor="local", workers=2.5)):
        with pytest.raises(InputError):
            Execution(**bad)
    with pytest.raises(InputError):
        resolve_execution(42)  # type: ignore[arg-type]


def test_executor_from_context() -> None:
    seen: list[tuple[str, float]] = []
    ex = executor_from_context(RunContext(workers=2, progress=lambda s, f: seen.append((s, f))))
    assert ex.executor == "local" and ex.workers == 2 and callable(ex.progress)
    ex = executor_from_context(RunContext(executor="dask", scheduler="tcp://s:8786"))
    assert ex.describe() == "dask (tcp://s:8786)"
    quiet = executor_from_context(RunContext(extras={"quiet": True, "checkpoint": "ck"}))
    assert quiet.executor == "serial" and quiet.progress is None and quiet.checkpoint == "ck"
    assert executor_from_context(RunContext()).progress == "auto"
    out = map_blocks(lambda ss, k, i: k, 10, seed=0, plan=BlockPlan(
        4, Execution("serial", progress=lambda s, f: seen.append((s, f)))))
    assert out == [4, 4, 2] and seen[-1][1] == 1.0


# progress ---------------------------------------------------------------------------------


def test_progress_callback_counts_trials_and_resumed_ones() -> None:
    seen: list[float] = []
    map_blocks(lambda ss, k, i: k, 10, seed=0,
               plan=BlockPlan(4, Execution(progress=lambda label, f: seen.append(f))))
    assert seen == [0.0, 0.4, 0.8, 1.0]
    with progress.TrialProgress(10, "x", lambda label, f: seen.append(f), initial=6) as p:
        assert p.fraction == 0.6


def test_progress_bar_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # Not a terminal (pytest captures stderr): nothing is shown, even when asked.
    assert not progress.TrialProgress(10, "x", True).active
    assert not progress.TrialProgress(10, "x", None).active

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake = Tty()
    monkeypatch.setattr("sys.stderr", fake)
    map_blocks(lambda ss, k, i: time.sleep(0.002) or k, 1000, seed=0,
               plan=BlockPlan(100, Execution(progress=True)))
    shown = fake.getvalue()
    assert "1000/1000" in shown and "trials/s" in shown and "left" in shown
