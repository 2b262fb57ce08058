"""Trial throughput of the harness against one-trial-at-a-time baselines, in one run.

The workload is the audit's: ``noisy_gd:sound`` (full-batch noisy gradient descent with
per-sample clipping, PLD-calibrated Gaussian noise, projection) on logistic regression,
n=1000, d=10, T=100. Every variant below does the same maths; each is timed in this
process, in rounds (every variant once per round, best of the rounds), so the ratios
compare numbers measured side by side on the same machine at the same time:

* ``harness float64`` / ``float32``: :func:`dpverify.execution.trials.sample_outputs`, blocks of
  ``block_size="auto"`` trials (64 / 128 here) on the NumPy backend;
* ``harness, 1 trial per block``: the same code with blocks of one trial;
* ``numpy loop, per-sample grads``: a plain NumPy DP-GD, one trial at a time, that
  materialises the (n, d) per-sample gradients, clips each and sums (the textbook way);
* ``numpy loop, GLM closed form``: one trial at a time, but with the GLM shortcut the
  harness uses (two matrix-vector products per step, no per-sample gradient matrix);
* ``opacus``: Opacus 1.6 ``PrivacyEngine.make_private`` on ``nn.Linear(d, 1)`` in float64
  with the full batch, per-sample clipping at C and noise multiplier sigma, SGD with
  weight decay lambda and the same projection, one trial per loop iteration (Opacus trains
  one model at a time). Without Opacus installed, the same loop is written with
  ``torch.func.vmap(grad(...))`` per-sample gradients, as Opacus's functorch mode does,
  and the row says so.

Throughput is trials per CPU-second of this process (``time.process_time``, BLAS and torch
limited to one thread), i.e. per core: on a shared machine wall-clock time also counts
other people's work, CPU time does not (cache sharing still costs a little). The
``local x2`` row runs ``--scale-trials`` trials on two worker processes and reports wall
time, from which the time for 10^6 trials is extrapolated linearly (and said so).

Run: ``python benchmarks/bench_throughput.py [--trials 4096] [--rounds 3]
[--scale-trials 50000] [--json out.json]``; ``--quick`` for a short smoke run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dpverify.core.registry import resolve
from dpverify.execution.executors import (
    Execution,
    shutdown,
    single_threaded_blas,
    tune_allocator,
)
from dpverify.execution.trials import (
    BlockPlan,
    OutputBlock,
    auto_block_size,
    build_problem,
    run_blocks,
    sample_outputs,
    seed_streams,
)

PARAMS = {"n": 1000, "d": 10, "T": 100}


def setup(params: dict[str, Any]) -> dict[str, Any]:
    """The target, its parameters, problem and the constants every baseline needs."""
    from algorithms.baselines import _gd_sigma, l2_sensitivity_of_sum

    t = resolve("noisy_gd:sound")
    p = t.algorithm.params("sound", params)
    prob = build_problem(t, p, 0)
    sens = l2_sensitivity_of_sum(float(p["clip"]), str(p["relation"]))
    return {"target": t, "params": p, "problem": prob, "X": prob.data.X, "y": prob.data.y,
            "T": int(p["T"]), "eta": float(p["eta"]), "lam": float(p["lam"]),
            "radius": float(p["radius"]), "clip": float(p["clip"]),
            "noise_std": _gd_sigma(p, int(p["T"])) * sens, "n": prob.data.n}


# one-trial-at-a-time NumPy baselines ---------------------------------------------------


def _released(g: np.ndarray, noise_std: float) -> np.ndarray:
    """The noisy sum as the curator releases it (snapped to its grid when it snaps)."""
    try:
        from dpverify.core.curator import snap
    except ImportError:  # a curator that releases the raw float sum
        return g
    return snap(np, g, noise_std)


def _project(theta: np.ndarray, radius: float) -> np.ndarray:
    nrm = np.linalg.norm(theta)
    return theta * (radius / nrm) if nrm > radius else theta


def numpy_loop_per_sample(s: dict[str, Any], trials: int, seed: Any) -> np.ndarray:
    """Textbook NumPy DP-GD, one trial at a time: per-sample gradient matrix, clip, sum."""
    X, y, n = s["X"], s["y"], s["n"]
    out = np.empty((trials, X.shape[1]))
    for k, ss in enumerate(seed_streams(seed, trials)):
        rng = np.random.default_rng(ss)
        theta = np.zeros(X.shape[1])
        for _ in range(s["T"]):
            z = X @ theta
            coef = -y * 0.5 * (1.0 - np.tanh(0.5 * y * z))  # d/dz log(1 + exp(-y z))
            G = coef[:, None] * X  # (n, d) per-sample gradients
            norms = np.linalg.norm(G, axis=1)
            G *= np.minimum(1.0, s["clip"] / np.maximum(norms, 1e-300))[:, None]
            g = _released(G.sum(axis=0) + s["noise_std"] * rng.standard_normal(X.shape[1]),
                          s["noise_std"])
            theta = _project(theta - s["eta"] * (g / n + s["lam"] * theta), s["radius"])
        out[k] = theta
    return out


def numpy_loop_closed_form(s: dict[str, Any], trials: int, seed: Any) -> np.ndarray:
    """One trial at a time with the GLM shortcut: clipped sum = X^T (coef * factor)."""
    X, y, n = s["X"], s["y"], s["n"]
    xnorm = np.linalg.norm(X, axis=1)
    out = np.empty((trials, X.shape[1]))
    for k, ss in enumerate(seed_streams(seed, trials)):
        rng = np.random.default_rng(ss)
        theta = np.zeros(X.shape[1])
        for _ in range(s["T"]):
            coef = -y * 0.5 * (1.0 - np.tanh(0.5 * y * (X @ theta)))
            coef *= np.minimum(1.0, s["clip"] / np.maximum(np.abs(coef) * xnorm, 1e-300))
            g = _released(coef @ X + s["noise_std"] * rng.standard_normal(X.shape[1]),
                          s["noise_std"])
            theta = _project(theta - s["eta"] * (g / n + s["lam"] * theta), s["radius"])
        out[k] = theta
    return out


# torch baselines -------------------------------------------------------------------------


def opacus_loop(s: dict[str, Any], trials: int, seed: int) -> tuple[np.ndarray, str]:
    """DP full-batch GD with Opacus (or, without it, torch.func per-sample gradients)."""
    import torch

    torch.set_num_threads(1)
    X = torch.as_tensor(s["X"], dtype=torch.float64)
    labels = torch.as_tensor((s["y"] + 1.0) / 2.0, dtype=torch.float64)[:, None]
    n, d, C, R = s["n"], X.shape[1], s["clip"], s["radius"]
    sigma = s["noise_std"] / C  # Opacus's noise multiplier: std over max_grad_norm
    gen = torch.Generator().manual_seed(seed)
    out = np.empty((trials, d))
    try:
        from opacus import PrivacyEngine
    except ImportError:
        PrivacyEngine = None  # noqa: N806
    if PrivacyEngine is not None:
        import warnings

        model = torch.nn.Linear(d, 1, bias=False).double()
        opt = torch.optim.SGD(model.parameters(), lr=s["eta"], weight_decay=s["lam"])
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, labels),
                                             batch_size=n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, opt, _ = PrivacyEngine(accountant="rdp").make_private(
                module=model, optimizer=opt, data_loader=loader, noise_multiplier=sigma,
                max_grad_norm=C, poisson_sampling=False, noise_generator=gen)
        crit = torch.nn.BCEWithLogitsLoss()  # = mean of log(1 + exp(-y z)), y = 2 label - 1
        w = next(model.parameters())
        warnings.filterwarnings("ignore", message="Full backward hook")  # X needs no grad
        for k in range(trials):
            with torch.no_grad():
                w.zero_()
            for _ in range(s["T"]):
                opt.zero_grad()
                crit(model(X), labels).backward()
                opt.step()
                with torch.no_grad():
                    nrm = w.norm()
                    if nrm > R:
                        w.mul_(R / nrm)
            out[k] = w.detach().numpy().ravel()
        return out, "opacus 1.6 (make_private, hooks)"
    from torch.func import grad, vmap

    def loss1(theta: Any, x: Any, t: Any) -> Any:
        return torch.nn.functional.binary_cross_entropy_with_logits(x @ theta, t)

    per_sample = vmap(grad(loss1), in_dims=(None, 0, 0))
    for k in range(trials):
        theta = torch.zeros(d, dtype=torch.float64)
        for _ in range(s["T"]):
            G = per_sample(theta, X, labels[:, 0])
            factor = (C / (G.norm(dim=1) + 1e-6)).clamp(max=1.0)
            g = (factor[:, None] * G).sum(0)
            g = g + sigma * C * torch.randn(d, generator=gen, dtype=torch.float64)
            theta = theta - s["eta"] * (g / n + s["lam"] * theta)
            nrm = theta.norm()
            if nrm > R:
                theta = theta * (R / nrm)
        out[k] = theta.numpy()
    return out, "torch.func vmap(grad) per-sample loop (Opacus not installed)"


# timing ------------------------------------------------------------------------------------


def cpu_timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(CPU seconds of this process, wall seconds, result) of one call."""
    c0, w0 = time.process_time(), time.perf_counter()
    res = fn()
    return time.process_time() - c0, time.perf_counter() - w0, res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4096, help="trials of the harness rows")
    ap.add_argument("--loop-trials", type=int, default=48, help="trials of the NumPy loops")
    ap.add_argument("--opacus-trials", type=int, default=6, help="trials of the Opacus loop")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; the best is kept")
    ap.add_argument("--scale-trials", type=int, default=50_000,
                    help="trials of the 2-process run (0 to skip)")
    ap.add_argument("--sweep", action="store_true", help="also sweep the block size")
    ap.add_argument("--quick", action="store_true", help="a short smoke run")
    ap.add_argument("--json", dest="json_path", default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.trials, args.loop_trials, args.opacus_trials = 512, 8, 2
        args.rounds, args.scale_trials = 1, 4096

    tune_allocator()
    s = setup(PARAMS)
    t, p, prob = s["target"], s["params"], s["problem"]
    steps = s["n"] * s["T"]  # sample-steps per trial

    def harness(dtype: str, trials: int, block: int | str = "auto") -> Callable[[], Any]:
        block_fn = OutputBlock(t, p, prob, prob.data, dtype=dtype)
        return lambda: sample_outputs(block_fn, trials=trials, seed=1, plan=BlockPlan(block))

    variants: dict[str, tuple[int, Callable[[], Any]]] = {
        "harness float64": (args.trials, harness("float64", args.trials)),
        "harness float32": (args.trials, harness("float32", args.trials)),
        "harness, 1 trial per block": (args.loop_trials,
                                       harness("float64", args.loop_trials, 1)),
        "numpy loop, per-sample grads": (
            args.loop_trials, lambda: numpy_loop_per_sample(s, args.loop_trials, 1)),
        "numpy loop, GLM closed form": (
            args.loop_trials, lambda: numpy_loop_closed_form(s, args.loop_trials, 1)),
    }
    torch_label = None
    if args.opacus_trials > 0:
        try:
            import torch  # noqa: F401

            variants["opacus"] = (args.opacus_trials,
                                  lambda: opacus_loop(s, args.opacus_trials, 1)[0])
            torch_label = opacus_loop(s, 1, 0)[1]
        except ImportError:
            pass
    if args.sweep:
        for b in (16, 32, 64, 128, 256, 1024):
            variants[f"harness float64, block {b}"] = (
                args.trials, harness("float64", args.trials, b))

    # Same maths: the loops reproduce the harness's trials (same noise streams) exactly.
    one = sample_outputs(OutputBlock(t, p, prob, prob.data), trials=3, seed=1, plan=BlockPlan(1))
    np.testing.assert_allclose(numpy_loop_closed_form(s, 3, 1), one, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(numpy_loop_per_sample(s, 3, 1), one, rtol=1e-9, atol=1e-12)

    best: dict[str, float] = {k: math.inf for k in variants}
    wall: dict[str, float] = {k: math.inf for k in variants}
    with single_threaded_blas():
        for _ in range(max(1, args.rounds)):
            for name, (_trials, fn) in variants.items():
                cpu, w, _ = cpu_timed(fn)
                best[name] = min(best[name], cpu)
                wall[name] = min(wall[name], w)
    rate = {k: variants[k][0] / best[k] for k in variants}

    scale: dict[str, Any] = {}
    if args.scale_trials > 0:
        block = auto_block_size(s["n"])
        fn = OutputBlock(t, p, prob, prob.data)
        two = BlockPlan(block, Execution("local", workers=2))
        cpu0, w0, _ = cpu_timed(lambda: run_blocks(fn, 2 * block, seed=2, plan=two))
        run = run_blocks(fn, args.scale_trials, seed=3, plan=two)
        shutdown()
        per_worker = args.scale_trials / run.cpu_seconds * 2  # both workers' CPU seconds
        scale = {
            "trials": args.scale_trials, "block_size": block, "wall_s": run.wall_seconds,
            "worker_cpu_s": run.cpu_seconds, "pool_start_s": w0,
            "trials_per_s_wall": args.scale_trials / run.wall_seconds,
            "trials_per_s_per_worker_cpu": args.scale_trials / run.cpu_seconds,
            "speedup_vs_1_core_cpu": (args.scale_trials / run.wall_seconds)
            / rate["harness float64"],
            "extrapolated_1e6_wall_min": run.wall_seconds * (1e6 / args.scale_trials) / 60,
            "extrapolated_1e6_min_if_cores_free": 1e6 / per_worker / 60,
        }

    h64 = rate["harness float64"]
    report = {
        "workload": {"target": "noisy_gd:sound", **PARAMS, "sample_steps_per_trial": steps,
                     "block_size_float64": auto_block_size(s["n"]),
                     "block_size_float32": auto_block_size(s["n"], dtype="float32")},
        "trials_per_cpu_s": rate,
        "wall_s": wall,
        "ratios": {
            "harness_f64_over_numpy_loop_per_sample": h64 / rate["numpy loop, per-sample grads"],
            "harness_f64_over_numpy_loop_closed_form": h64 / rate["numpy loop, GLM closed form"],
            "harness_f64_over_harness_block1": h64 / rate["harness, 1 trial per block"],
            "harness_f32_over_f64": rate["harness float32"] / h64,
            **({"harness_f64_over_opacus": h64 / rate["opacus"]} if "opacus" in rate else {}),
        },
        "opacus_row": torch_label,
        "scale_2_workers": scale,
        "machine": {"python": sys.version.split()[0], "numpy": np.__version__,
                    "platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_avg_at_end": os.getloadavg() if hasattr(os, "getloadavg") else None},
    }
    print(f"noisy_gd:sound, logistic, n={PARAMS['n']}, d={PARAMS['d']}, T={PARAMS['T']}; "
          f"trials per CPU-second (best of {args.rounds})")
    for k, r in rate.items():
        print(f"  {k:34s} {r:10.1f}   ({r * steps / 1e6:7.1f} M sample-steps/s)")
    for k, v in report["ratios"].items():
        print(f"  ratio {k:48s} x{v:7.1f}")
    if torch_label:
        print(f"  torch row: {torch_label}")
    if scale:
        print(f"  2 local workers: {scale['trials']} trials in {scale['wall_s']:.1f} s wall "
              f"({scale['trials_per_s_wall']:.0f}/s; x{scale['speedup_vs_1_core_cpu']:.2f} "
              f"the 1-core CPU rate; pool start {scale['pool_start_s']:.1f} s)")
        print(f"  1e6 trials, extrapolated from {scale['trials']}: "
              f"{scale['extrapolated_1e6_wall_min']:.1f} min wall at this run's pace, "
              f"{scale['extrapolated_1e6_min_if_cores_free']:.1f} min if both cores were free")
    print(f"  load average at the end: {report['machine']['load_avg_at_end']}")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
