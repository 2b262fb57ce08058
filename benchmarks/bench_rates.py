"""Speed and statistical behaviour of rate verification, measured in one run.

Speed (ratios against baselines measured in the same run, never absolute bars):

* ``sweep``: one n-sweep of noisy GD (5 points, 20 seeds, T=100) with the seeds batched on
  the trial axis, against the same sweep run one seed at a time (the baseline a harness
  without a trial axis pays), and against batching with OpenBLAS free to use its threads.
* ``fit``: one fit with 2000 bootstrap resamples (both models refitted per resample).

Statistics (``--coverage R``): over R synthetic replications of n^(-2/3) (7 log2 points
over 64x, log-normal noise sd 0.3) the coverage of the 95% interval of the recommended
fit and of a plain log-log fit, for a pure power law, a floor of half the smallest signal,
an undivided log n factor (the recommended fit divides it out) and both; and the verdicts
on a rate 0.5 slower than the theorem (never PASS is the bar).

Run: ``python benchmarks/bench_rates.py [--coverage 300] [--seeds 10 20] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import time
from collections import Counter
from typing import Any

import numpy as np

from dpverify.checks.rates import FitSettings, GridPoints, SweepPlan, fit_rate, run_sweep
from dpverify.checks.rates.grids import single_threaded_blas
from dpverify.checks.rates.metrics import excess_risk
from dpverify.core.registry import resolve
from dpverify.execution.trials import build_problem, run_target

N_VALUES = [250, 500, 1000, 2000, 4000]
PARAMS = {"T": 100}


def _timed(fn: Any, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_sweep(seeds: int = 20) -> dict[str, Any]:
    t = resolve("noisy_gd:sound")

    def batched() -> None:
        run_sweep(t, "n", N_VALUES, params=PARAMS, plan=SweepPlan(seeds=seeds))

    def one_at_a_time() -> None:
        with single_threaded_blas():
            for n in N_VALUES:
                p = t.algorithm.params("sound", {**PARAMS, "n": n})
                prob = build_problem(t, p, 0)
                for s in range(seeds):
                    out, _ = run_target(t, p, prob, trials=1, rng=s)
                    excess_risk(prob, np.asarray(out), p)

    def threaded() -> None:
        # run_sweep pins BLAS to one thread; undo that to see what the pin buys.
        import dpverify.checks.rates.grids as g

        saved = g.single_threaded_blas
        g.single_threaded_blas = contextlib.nullcontext
        try:
            run_sweep(t, "n", N_VALUES, params=PARAMS, plan=SweepPlan(seeds=seeds))
        finally:
            g.single_threaded_blas = saved

    batched()  # warm the calibration cache
    tb, t1, tt = _timed(batched), _timed(one_at_a_time, 1), _timed(threaded, 1)
    steps = seeds * sum(N_VALUES) * PARAMS["T"]
    return {"seeds": seeds, "batched_s": tb, "per_seed_s": t1, "blas_threads_s": tt,
            "speedup_vs_per_seed": t1 / tb, "speedup_vs_blas_threads": tt / tb,
            "sample_steps_per_s": steps / tb}


def bench_fit() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    n = 2.0 ** np.arange(8, 15)
    Y = n[:, None] ** (-2 / 3) * np.exp(0.3 * rng.standard_normal((7, 20))) + 0.5 * n.max() ** (
        -2 / 3)
    fit_rate(n, Y, theory=-2 / 3, rng=0)
    return {"fit_2000_boot_s": _timed(lambda: fit_rate(n, Y, theory=-2 / 3, rng=1), 5)}


def synthetic(rng: np.random.Generator, seeds: int, floor: bool, log: bool,
              p: float) -> np.ndarray:
    n = 2.0 ** np.arange(8, 15)
    signal = n**p * (np.log(n) if log else 1.0)
    Y = signal[:, None] * np.exp(0.3 * rng.standard_normal((n.size, seeds)))
    return Y + (0.5 * signal.min() if floor else 0.0)


def bench_coverage(reps: int, seeds: int) -> dict[str, Any]:
    n = 2.0 ** np.arange(8, 15)
    p0 = -2 / 3
    out: dict[str, Any] = {}
    for name, floor, log, p in (("pure", False, False, p0), ("floor", True, False, p0),
                                ("log", False, True, p0), ("floor+log", True, True, p0),
                                ("slower_by_0.5", False, False, p0 + 0.5)):
        rec = plain = 0
        verdicts: Counter[str] = Counter()
        for r in range(reps):
            Y = synthetic(np.random.default_rng([99, r]), seeds, floor, log, p)
            f = fit_rate(n, Y, theory=p0, points=GridPoints(log_factor=np.log(n) if log else None),
                         settings=FitSettings(n_boot=400), rng=r)
            g = fit_rate(n, Y, theory=p0, settings=FitSettings(model="power", n_boot=400), rng=r)
            rec += f.ci_low <= p <= f.ci_high
            plain += g.ci_low <= p <= g.ci_high
            verdicts[f.verdict.value] += 1
        out[name] = {"recommended_coverage": rec / reps, "plain_coverage": plain / reps,
                     "verdicts": dict(verdicts)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coverage", type=int, default=0, help="replications (0: skip)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[10, 20])
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    res: dict[str, Any] = {"machine": platform.processor() or platform.machine(),
                           "sweep": bench_sweep(), "fit": bench_fit()}
    print(json.dumps(res["sweep"], indent=1))
    print(json.dumps(res["fit"], indent=1))
    if args.coverage:
        res["coverage"] = {}
        for k in args.seeds:
            res["coverage"][k] = cov = bench_coverage(args.coverage, k)
            for name, c in cov.items():
                print(f"seeds={k:3d} {name:>14}: recommended {c['recommended_coverage']:.3f} "
                      f"plain {c['plain_coverage']:.3f} verdicts {c['verdicts']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
