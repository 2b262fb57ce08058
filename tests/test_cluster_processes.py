"""A real Dask cluster: `dask scheduler` and `dask worker` started as separate processes.

The workers run in a folder of their own, with an import path that holds dpverify but not
the user's modules: whatever a run needs of the user's code must travel with it. Each run
is compared with the same command run locally. A worker is SIGKILLed part-way through a
run: the run completes (Dask reschedules the lost work), and with ``--checkpoint`` no
finished block is computed twice. Every process started here is stopped at the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import dpverify
from dpverify.cli.app import main

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.slow

ROOT = Path(dpverify.__file__).resolve().parents[1]
DASK = Path(sys.executable).with_name("dask")
START_TIMEOUT = 60.0

# The user's Gaussian mechanism (epsilon = 1, delta = 1e-5 on a mean of n labels in
# [0, 1]), its neighbouring pair, and a weight it reads from a file when imported. The
# workers are slowed down (DPV_SLEEP_PER_TRIAL) so that a run can be interrupted part-way;
# the sleep does not touch the random stream.
USER_MODULE = textwrap.dedent("""
    import os
    import time
    from pathlib import Path

    import numpy as np

    SIGMA = np.sqrt(2 * np.log(1.25 / 1e-5))
    WEIGHT = float(np.load(Path(__file__).with_name("weight.npy"))[0])


    def f(data, rng, trials):
        time.sleep(min(0.1, float(os.environ.get("DPV_SLEEP_PER_TRIAL", "0")) * trials))
        X, y = data
        mean = WEIGHT * np.clip(y, 0, 1).mean()
        return mean + rng.normal(0.0, SIGMA / len(y), size=(trials, 1))


    def pair():
        rng = np.random.default_rng(0)
        X = rng.normal(size=(100, 2))
        y = (rng.random(100) < 0.5).astype(float)
        return (X, y), (X[:-1], y[:-1])
""")

SUITE = """
[suite]
name = "own-code"
[[check]]
id = "user.audit"
kind = "audit"
target = "{mod}:f"
[check.options]
epsilon = 1.0
delta = 1e-5
neighbours = "{mod}:pair"
trials = {trials}
block_size = 50
[[check]]
id = "user.file.audit"
kind = "audit"
target = "{path}:f"
[check.options]
epsilon = 1.0
delta = 1e-5
neighbours = "{path}:pair"
trials = 2000
[[check]]
id = "gd.account"
kind = "account"
target = "noisy_gd:sound"
[check.params]
T = 5
[[check]]
id = "gaussian.audit"
kind = "audit"
target = "gaussian_mechanism:sound"
[check.options]
trials = 2000
"""


@dataclass
class Cluster:
    address: str
    client: Any
    env: dict[str, str]

    def worker_pids(self) -> dict[str, int]:
        return self.client.run(os.getpid)


def _start(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    log = open(cwd / f"{args[0]}.log", "wb")  # noqa: SIM115 - closed with the process
    # A session of its own: the worker's nanny and worker processes stop with it.
    return subprocess.Popen([str(DASK), *args], cwd=cwd, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    with_group = [signal.SIGTERM, signal.SIGKILL]
    for sig in with_group:
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=15)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _wait_for(path: Path, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not (path.exists() and path.stat().st_size > 0):
        if time.monotonic() > end:
            raise TimeoutError(f"{path} did not appear within {timeout} s")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not DASK.exists():
        pytest.skip("the dask command is not installed next to this interpreter")
    work = tmp_path_factory.mktemp("workers")
    # dpverify is importable on the workers; the user's folders are not.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "DPV_SLEEP_PER_TRIAL": "0.002", "DPV_WORK": str(work)}
    procs: list[subprocess.Popen] = []
    client = None
    try:
        procs.append(_start(["scheduler", "--host", "127.0.0.1", "--port", "0",
                             "--no-dashboard", "--scheduler-file", "scheduler.json"],
                            work, env))
        _wait_for(work / "scheduler.json", START_TIMEOUT)
        procs.append(_start(["worker", "--scheduler-file", "scheduler.json", "--nworkers", "2",
                             "--nthreads", "1", "--no-dashboard", "--local-directory",
                             str(work / "space")], work, env))
        address = json.loads((work / "scheduler.json").read_text())["address"]
        client = distributed.Client(address, timeout="30s", set_as_default=False)
        client.wait_for_workers(2, timeout=START_TIMEOUT)
        yield Cluster(address, client, env)
    finally:
        from dpverify.execution.executors import shutdown

        shutdown()  # the clients the runs opened, before their scheduler goes
        if client is not None:
            client.close()
        for proc in reversed(procs):
            _stop(proc)


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A folder with the user's module (a fresh name), the working directory of the test."""
    import numpy as np

    folder = tmp_path / "mycode"
    folder.mkdir()
    mod = f"mymod_{uuid.uuid4().hex[:8]}"
    (folder / f"{mod}.py").write_text(USER_MODULE)
    np.save(folder / "weight.npy", np.array([0.5]))
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    yield folder, mod
    sys.modules.pop(mod, None)


def _audit(mod: str, *extra: str) -> list[str]:
    return ["audit", f"{mod}:f", "--neighbours", f"{mod}:pair", "--epsilon", "1",
            "--delta", "1e-5", *extra]


def _essence(report_path: Path) -> list[tuple[str, str, str, str]]:
    report = json.loads(report_path.read_text())
    return [(c["id"], c["verdict"], json.dumps(c["metrics"], sort_keys=True),
             json.dumps(c["evidence"], sort_keys=True)) for c in report["checks"]]


def test_own_code_audit_on_workers_that_cannot_import_it(cluster: Cluster, user_dir,
                                                         capsys) -> None:
    folder, mod = user_dir
    args = _audit(mod, "--trials", "4000", "--quiet")
    assert main([*args, "--json", "local.json"]) == 0
    # What the module read when imported travels with it: the file is not needed there.
    (folder / "weight.npy").unlink()
    assert main([*args, "--executor", "dask", "--scheduler", cluster.address,
                 "--json", "cluster.json"]) == 0
    assert (folder / "cluster.json").read_bytes() == (folder / "local.json").read_bytes()
    found = cluster.client.run(lambda: __import__("importlib").util.find_spec(mod) is None)
    assert list(found.values()) == [True, True]  # the workers still cannot import it
    capsys.readouterr()


def test_suite_of_own_and_registered_checks_spreads_over_workers(cluster: Cluster, user_dir,
                                                                 capsys) -> None:
    folder, mod = user_dir
    suite = folder / "suite.toml"
    suite.write_text(SUITE.format(mod=mod, path=folder / f"{mod}.py", trials=200))
    assert main(["run", str(suite), "--quiet", "--report-dir", "serial"]) == 0
    capsys.readouterr()
    assert main(["run", str(suite), "--report-dir", "cluster", "--executor", "dask",
                 "--scheduler", cluster.address]) == 0
    out = capsys.readouterr().out
    assert _essence(folder / "cluster" / "report.json") == _essence(
        folder / "serial" / "report.json")
    workers = re.findall(r"(tcp://[\d.]+:\d+) (\d+) \(", out.split("checks per worker:")[1])
    assert sum(int(n) for _, n in workers) == 4
    assert len(workers) == 2, out  # four checks, two idle workers: both get work


def _blocks(folder: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for p in folder.glob("*/block-*.npz")}


def _run_and_kill_a_worker(cluster: Cluster, args: list[str], checkpoint: Path,
                           after_blocks: int, alone: bool = False) -> tuple[int, dict]:
    """Run the CLI (in a thread); SIGKILL a worker busy with it part-way (with ``alone``,
    once one worker is busy alone, if that happens soon). Returns the exit code and the
    checkpointed blocks at the time of the kill."""
    codes: list[int] = []
    run = threading.Thread(target=lambda: codes.append(main(args)), daemon=True)
    run.start()
    end = time.monotonic() + START_TIMEOUT
    while len(_blocks(checkpoint)) < after_blocks:
        assert run.is_alive() and time.monotonic() < end, f"the run did not start: {codes}"
        time.sleep(0.05)
    # Whole checks: the worker left with the slow check once the quick ones are done (if
    # before twice as many blocks are done).
    while True:
        busy = [w for w, tasks in cluster.client.processing().items() if tasks]
        if not alone or len(busy) == 1 or len(_blocks(checkpoint)) >= 2 * after_blocks:
            break
        time.sleep(0.05)
    pids = cluster.worker_pids()
    before = _blocks(checkpoint)
    assert busy and run.is_alive(), "the run ended before a worker was killed"
    os.kill(pids[busy[0]], signal.SIGKILL)
    run.join(timeout=120)
    assert codes, "the run did not finish after a worker was killed"
    return codes[0], before


def test_a_killed_worker_loses_no_finished_block(cluster: Cluster, user_dir, capsys) -> None:
    """Whole checks: the check whose worker died is rescheduled and resumes from its
    checkpointed blocks; trial blocks: the run completes, and a rerun computes nothing."""
    folder, mod = user_dir
    suite = folder / "suite.toml"
    suite.write_text(SUITE.format(mod=mod, path=folder / f"{mod}.py", trials=1000))
    assert main(["run", str(suite), "--quiet", "--report-dir", "serial"]) == 0
    ckpt = folder / "ckpt-checks"
    code, before = _run_and_kill_a_worker(
        cluster, ["run", str(suite), "--quiet", "--report-dir", "cluster", "--executor", "dask",
                  "--scheduler", cluster.address, "--checkpoint", str(ckpt)],
        ckpt, after_blocks=10, alone=True)
    assert code == 0
    assert len(before) < 2 * 1000 // 50  # the slow check was killed part-way
    assert _essence(folder / "cluster" / "report.json") == _essence(
        folder / "serial" / "report.json")
    after = _blocks(ckpt)
    assert all(after[p] == t for p, t in before.items())  # no finished block computed again

    args = _audit(mod, "--trials", "1000", "--block-size", "25", "--quiet")
    assert main([*args, "--json", "local.json"]) == 0
    ckpt = folder / "ckpt-blocks"
    cluster_args = [*args, "--executor", "dask", "--scheduler", cluster.address,
                    "--checkpoint", str(ckpt), "--json", "cluster.json"]
    # The audit draws its search runs first (8 blocks per dataset here), then its test
    # runs (32 per dataset): the kill lands among the test runs, while workers are busy.
    code, before = _run_and_kill_a_worker(cluster, cluster_args, ckpt, after_blocks=24)
    assert code == 0
    assert len(before) < 2 * 1000 // 25
    assert (folder / "cluster.json").read_bytes() == (folder / "local.json").read_bytes()
    finished = _blocks(ckpt)
    assert len(finished) == 2 * 1000 // 25  # every block of D and of D'
    (folder / "cluster.json").unlink()
    assert main(cluster_args) == 0  # resumed: every block read back, none recomputed
    assert _blocks(ckpt) == finished
    assert (folder / "cluster.json").read_bytes() == (folder / "local.json").read_bytes()
    capsys.readouterr()


def test_a_worker_with_other_dpverify_code_is_refused(cluster: Cluster, tmp_path: Path,
                                                      capsys) -> None:
    """A third worker runs a copy of dpverify with one line changed: same version number,
    other code, so results could differ. The run stops with exit 2 before any work."""
    import shutil

    other = tmp_path / "other"
    for pkg in ("dpverify", "algorithms"):
        shutil.copytree(ROOT / pkg, other / pkg,
                        ignore=shutil.ignore_patterns("__pycache__"))
    with open(other / "dpverify" / "__init__.py", "a") as fh:
        fh.write("# a local edit\n")
    work = cluster.env["DPV_WORK"]
    proc = _start(["worker", "--scheduler-file", f"{work}/scheduler.json", "--nthreads", "1",
                   "--no-dashboard", "--local-directory", str(tmp_path / "space")],
                  tmp_path, {**cluster.env, "PYTHONPATH": str(other)})
    try:
        cluster.client.wait_for_workers(3, timeout=START_TIMEOUT)
        code = main(["audit", "gaussian_mechanism:sound", "--trials", "1000", "--quiet",
                     "--executor", "dask", "--scheduler", cluster.address,
                     "--json", str(tmp_path / "out.json")])
        out = capsys.readouterr().out
        assert code == 2, out
        assert re.search(r"dpverify differs on the Dask worker tcp://\S+: \S+ \(source \w+\) "
                         r"here, \S+ \(source \w+\) there", out), out
        assert not (tmp_path / "out.json").exists()
    finally:
        _stop(proc)
