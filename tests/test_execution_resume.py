"""Checkpoints: atomic block files, run keys, and resuming a run killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpverify.core.errors import InputError
from dpverify.core.registry import resolve
from dpverify.execution.checkpoint import BlockStore, fingerprint, pack, unpack
from dpverify.execution.executors import Execution
from dpverify.execution.trials import BlockPlan, OutputBlock, build_problem, run_blocks

# A run of noisy GD whose blocks are slowed down so that it can be killed part-way.
SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from dpverify.execution.executors import Execution
    from dpverify.execution.trials import BlockPlan, OutputBlock, build_problem, run_blocks
    from dpverify.core.registry import resolve

    class Slow(OutputBlock):
        def __call__(self, ss, k, i):
            time.sleep(0.05)
            return super().__call__(ss, k, i)

    t = resolve("noisy_gd:sound")
    p = t.algorithm.params("sound", {"T": 10, "n": 100, "d": 3})
    prob = build_problem(t, p, 0)
    fn = Slow(t, p, prob, prob.data)
    plan = BlockPlan(8, Execution(checkpoint=sys.argv[1]), checkpoint_key=fn.checkpoint_key())
    run = run_blocks(fn, 40 * 8, seed=7, plan=plan)
    np.save(sys.argv[2], run.concatenate())
    print(json.dumps({"computed": run.computed, "resumed": run.resumed}))
""")
BLOCKS = 40


def _reference() -> np.ndarray:
    t = resolve("noisy_gd:sound")
    p = t.algorithm.params("sound", {"T": 10, "n": 100, "d": 3})
    prob = build_problem(t, p, 0)
    return run_blocks(OutputBlock(t, p, prob, prob.data), BLOCKS * 8, seed=7,
                      plan=BlockPlan(8)).concatenate()


def _block_files(root: Path) -> list[Path]:
    return sorted(root.glob("*/block-*.npz"))


def test_a_run_killed_part_way_resumes_without_losing_finished_blocks(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    ckpt, out = tmp_path / "ckpt", tmp_path / "out.npy"
    cmd = [sys.executable, str(script), str(ckpt), str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(_block_files(ckpt)) < 5:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not out.exists()
    kept = len(_block_files(ckpt))
    assert 5 <= kept < BLOCKS
    # Every file on disk is whole: atomic writes leave no partial block behind.
    store = BlockStore(ckpt, next(ckpt.iterdir()).name)
    assert len(store.load([8] * BLOCKS)) == kept

    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout.strip().splitlines()[-1])
    assert info["resumed"] >= kept and info["resumed"] + info["computed"] == BLOCKS
    assert info["computed"] > 0
    assert np.array_equal(np.load(out), _reference())


def saved(size: int, key: str, folder: Path) -> BlockPlan:
    """Blocks of ``size`` checkpointed in ``folder`` under ``key``."""
    return BlockPlan(size, Execution(checkpoint=folder), checkpoint_key=key)


def test_store_keys_separate_runs_and_reload_blocks(tmp_path: Path) -> None:
    calls: list[int] = []

    def fn(ss: np.random.SeedSequence, k: int, i: int) -> dict[str, Any]:
        calls.append(i)
        return {"x": np.random.default_rng(ss).random(k), "i": i}

    first = run_blocks(fn, 10, seed=3, plan=saved(4, "f", tmp_path))
    assert (first.computed, first.resumed) == (3, 0)
    again = run_blocks(fn, 10, seed=3, plan=saved(4, "f", tmp_path))
    assert (again.computed, again.resumed) == (0, 3) and calls == [0, 1, 2]
    for a, b in zip(first.results, again.results, strict=True):
        assert np.array_equal(a["x"], b["x"]) and int(b["i"]) == a["i"]
    # Another seed, layout or key is another run, in another folder.
    run_blocks(fn, 10, seed=4, plan=saved(4, "f", tmp_path))
    run_blocks(fn, 10, seed=3, plan=saved(5, "f", tmp_path))
    run_blocks(fn, 10, seed=3, plan=saved(4, "g", tmp_path))
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 4
    assert all(json.loads((p / "manifest.json").read_text())["run"]["trials"] == 10
               for p in tmp_path.iterdir())


def test_a_damaged_block_file_is_recomputed(tmp_path: Path) -> None:
    fn = lambda ss, k, i: np.random.default_rng(ss).random(k)  # noqa: E731
    ref = run_blocks(fn, 9, seed=1, plan=saved(3, "h", tmp_path))
    victim = sorted(tmp_path.glob("*/block-0000001.npz"))[0]
    victim.write_bytes(b"not an npz")
    again = run_blocks(fn, 9, seed=1, plan=saved(3, "h", tmp_path))
    assert (again.computed, again.resumed) == (1, 2)
    assert np.array_equal(again.concatenate(), ref.concatenate())


def test_pack_round_trip_and_refusals() -> None:
    value = (np.arange(3.0), [np.float32(2.5), {"a": np.eye(2)}], 7)
    back = unpack(pack(value))
    assert np.array_equal(back[0], value[0]) and float(back[1][0]) == 2.5
    assert np.array_equal(back[1][1]["a"], np.eye(2)) and int(back[2]) == 7
    with pytest.raises(InputError):
        pack(object())
    with pytest.raises(InputError):
        pack({1: np.zeros(1)})
    assert fingerprint({"a": [1, 2]}) != fingerprint({"a": [2, 1]})


def test_an_edited_target_in_an_importable_module_does_not_read_the_old_blocks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A function of an importable module is pickled by its name alone: the checkpoint
    is keyed on its source too, so the fixed code is run, not the stored blocks of the
    buggy one."""
    import importlib

    from dpverify.execution.trials import map_blocks

    monkeypatch.syspath_prepend(str(tmp_path))
    src = tmp_path / "edited_target.py"

    def draw(offset: float) -> np.ndarray:
        src.write_text(f"def f(rng, k):\n    return rng.normal({offset}, 1.0, k)\n")
        sys.modules.pop("edited_target", None)
        importlib.invalidate_caches()
        f = importlib.import_module("edited_target").f

        def block(ss: np.random.SeedSequence, k: int, _: int) -> np.ndarray:
            return f(np.random.default_rng(ss), k)

        plan = BlockPlan(50, Execution(checkpoint=str(tmp_path / "ck")))
        return np.concatenate(map_blocks(block, 100, seed=3, plan=plan))

    assert draw(0.0).mean() < 1.0
    assert draw(10.0).mean() > 9.0  # the stored blocks were of the old body


def test_a_block_result_may_hold_none() -> None:
    """A white-box block's values are None where its releases are not unsampled Gaussians:
    a checkpoint stores and restores that as it does arrays."""
    block = ({"a": np.arange(3.0), "b": None}, [None, 2.0])
    back = unpack(pack(block))
    assert back[0]["b"] is None and back[1][0] is None
    np.testing.assert_array_equal(back[0]["a"], np.arange(3.0))
