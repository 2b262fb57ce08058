"""Throughput of noisy_gd:sound on NumPy and on torch (CPU, and CUDA when available).

Every backend runs the same target, problem and trial count in this process; each is
warmed up once (noise calibration is cached, torch initialises lazily) and then timed as
the best of ``--repeat`` runs. The ratio column is the backend's throughput over NumPy's
measured in the same run, so numbers from different machines are never mixed.

Run: ``python benchmarks/bench_torch.py [--trials 1000] [--n 500] [--T 50]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from dpverify.core.backends import get_backend
from dpverify.core.registry import resolve
from dpverify.execution.trials import build_problem, run_target, seed_streams


def backends_to_time(dtypes: Sequence[str]) -> list[tuple[str, Any]]:
    """(label, backend) for NumPy, torch CPU and, if present, torch CUDA in each dtype.

    Examples
    --------
    >>> backends_to_time(["float64"])[0][0]
    'numpy float64'
    """
    out: list[tuple[str, Any]] = [("numpy float64", get_backend("numpy"))]
    try:
        import torch
    except ImportError:
        return out
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        for dtype in dtypes:
            out.append((f"torch:{device} {dtype}", get_backend(f"torch:{device}", dtype=dtype)))
    return out


def time_backend(backend: Any, *, target: str, params: dict[str, Any], trials: int,
                 repeat: int, seed: int = 0) -> float:
    """Best wall time (seconds) of ``repeat`` runs after one warm-up run.

    The output is converted to NumPy inside the timed region, which waits for a GPU to
    finish (CUDA kernels run asynchronously).

    Examples
    --------
    >>> t = time_backend(get_backend("numpy"), target="noisy_gd:sound",
    ...                  params={"T": 2, "n": 20}, trials=2, repeat=1)
    >>> t > 0
    True
    """
    t = resolve(target)
    p = t.algorithm.params(t.variant.name, params)
    problem = build_problem(t, p, seed)
    stream = seed_streams(seed, 2)[1]
    best = float("inf")
    for i in range(repeat + 1):
        t0 = time.perf_counter()
        out, _ = run_target(t, p, problem, trials=trials, rng=stream, backend=backend)
        backend.to_numpy(out)
        elapsed = time.perf_counter() - t0
        if i > 0:  # run 0 warms up
            best = min(best, elapsed)
    return best


def main(argv: Sequence[str] | None = None) -> None:
    """Print a table of throughput per backend, with its ratio to NumPy's."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="noisy_gd:sound")
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--T", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dtypes", default="float64,float32",
                    help="comma-separated torch dtypes to time")
    args = ap.parse_args(argv)
    params = {"n": args.n, "d": args.d, "T": args.T}
    rows = []
    for label, backend in backends_to_time(args.dtypes.split(",")):
        secs = time_backend(backend, target=args.target, params=params, trials=args.trials,
                            repeat=args.repeat)
        rows.append((label, secs))
    base = rows[0][1]
    steps = args.trials * args.T
    print(f"{args.target}: trials={args.trials} n={args.n} d={args.d} T={args.T}, "
          f"best of {args.repeat}")
    try:
        import torch

        print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
              f"CUDA {'available' if torch.cuda.is_available() else 'not available'}")
    except ImportError:
        print("torch not installed: NumPy only")
    print(f"{'backend':<22}{'seconds':>10}{'trial-steps/s':>16}{'grads/s':>14}{'vs numpy':>10}")
    for label, secs in rows:
        print(f"{label:<22}{secs:>10.4f}{steps / secs:>16.4g}{steps * args.n / secs:>14.4g}"
              f"{base / secs:>9.2f}x")


if __name__ == "__main__":
    main()
