"""Tightness, power, soundness and speed of the auditors, measured in one run.

Targets (the auditors' done-when bars, anchors/auditing.md section 9):

* ``gaussian``: black-box audit of the Gaussian mechanism calibrated to (1, 1e-5)-DP from
  at most 10^6 samples (5 x 10^5 per world): epsilon_lower >= 0.9 epsilon at confidence
  0.95 with the likelihood-ratio statistic (the projection on the canary direction) and
  the GDP bound, valid here because the output is a Gaussian mechanism's. The
  assumption-free Clopper-Pearson bound from the same samples is reported next to it.
* ``laplace``: black-box audit of the Laplace mechanism at epsilon = 0.1 (pure DP):
  epsilon_lower >= 0.95 epsilon with the Clopper-Pearson bound (DP-Sniper reports 0.0968
  at confidence 0.9 from about 2 x 10^8 samples).
* ``whitebox``: white-box audit of sound noisy GD (n=500, d=5, T=50) with a linear-loss
  canary: epsilon_lower >= 0.9 epsilon_accountant from at most 10^4 trials (5000 replays
  per world).
* ``planted`` / ``null``: every check of suites/planted.toml flagged, every check of
  suites/null.toml passing, and the false-violation rate of the Laplace audit over many
  seeds at or below alpha (with a Clopper-Pearson interval on the rate).

Speed is reported as wall time and CPU time of this process, and as a ratio against a
baseline measured in the same run: drawing the same number of mechanism outputs with
bare NumPy (the least any auditor must do). Several seeds are run per target and the
smallest bound is reported with the median.

Run: ``python benchmarks/bench_audit.py [--seeds 3] [--json out.json]``; ``--quick`` for a
short smoke run (fewer samples, fewer seeds; the bars are then not expected to hold).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dpverify.accounting.accountant import calibrate_gaussian
from dpverify.checks.audit import (
    AuditResult,
    BlackBoxOptions,
    WhiteBoxOptions,
    audit_blackbox,
    audit_whitebox,
    clopper_pearson,
)
from dpverify.checks.base import RunContext
from dpverify.cli.suites import load_suite, run_suites

ROOT = Path(__file__).resolve().parent.parent


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def baseline_gaussian(samples: int) -> float:
    """Wall time to draw ``samples`` Gaussian-mechanism outputs with bare NumPy and sort."""
    rng = np.random.default_rng(0)
    sigma = calibrate_gaussian(target_epsilon=1.0, target_delta=1e-5)
    t0 = time.perf_counter()
    half = samples // 2
    a = 1.0 + sigma * rng.standard_normal(half)
    b = sigma * rng.standard_normal(half)
    np.sort(a)
    np.sort(b)
    return time.perf_counter() - t0


def baseline_laplace(samples: int) -> float:
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    half = samples // 2
    np.sort(1.0 + 10.0 * rng.laplace(size=half))
    np.sort(10.0 * rng.laplace(size=half))
    return time.perf_counter() - t0


def run_target(name: str, seeds: int, fn: Callable[[int], AuditResult], samples: int,
               baseline: Callable[[int], float] | None, ratio_of: str,
               bar: float) -> dict[str, Any]:
    rows = []
    for s in range(seeds):
        res, wall, cpu = timed(lambda s=s: fn(s))
        d = res.details
        rows.append({"seed": s, "epsilon_lower": res.epsilon_lower,
                     "epsilon_lower_cp": d.get("epsilon_lower_cp"),
                     "epsilon_accountant": res.epsilon_accountant,
                     "epsilon_claimed": res.epsilon_claimed, "bound": res.bound,
                     "verdict": res.verdict.value, "wall_s": wall, "cpu_s": cpu})
    ref = rows[0]["epsilon_accountant"] if ratio_of == "accountant" else rows[0][
        "epsilon_claimed"]
    lows = [r["epsilon_lower"] / ref for r in rows]
    base = baseline(samples) if baseline else None
    wall = statistics.median(r["wall_s"] for r in rows)
    out = {
        "target": name, "samples": samples, "seeds": seeds, "bar": bar,
        "ratio_of": ratio_of, "reference_epsilon": ref,
        "ratio_min": min(lows), "ratio_median": statistics.median(lows),
        "met": min(lows) >= bar, "wall_s_median": wall,
        "cpu_s_median": statistics.median(r["cpu_s"] for r in rows),
        "baseline_s": base, "slowdown_vs_baseline": None if not base else wall / base,
        "runs": rows,
    }
    cp = [r["epsilon_lower_cp"] for r in rows if r["epsilon_lower_cp"] is not None]
    if cp and rows[0]["bound"] != "cp":
        out["cp_ratio_median"] = statistics.median(c / ref for c in cp)
    return out


def suite_results(path: Path, seed: int) -> dict[str, Any]:
    suite = load_suite(path)
    t0 = time.perf_counter()
    run = run_suites([suite], RunContext(seed=seed, extras={"quiet": True}))
    checks = [{"id": r.spec.id, "verdict": r.outcome.verdict.value, "met": r.met,
               "epsilon_lower": r.outcome.metrics.get("epsilon_lower"),
               "epsilon_claimed": r.outcome.metrics.get("epsilon_claimed"),
               "seconds": round(r.seconds, 2)} for r in run.results]
    return {"suite": path.name, "checks": len(checks),
            "met": sum(c["met"] for c in checks), "wall_s": time.perf_counter() - t0,
            "results": checks}


def null_rate(seeds: int, alpha: float) -> dict[str, Any]:
    fails = 0
    t0 = time.perf_counter()
    for s in range(seeds):
        r = audit_blackbox("laplace_mechanism:sound", BlackBoxOptions(trials=2000, seed=10_000 + s,
                           confidence=1 - alpha, distinguisher="projection",
                           accountant=False))
        fails += r.verdict.value == "FAIL"
    lo, hi = clopper_pearson(fails, seeds, 0.05, "two")
    return {"seeds": seeds, "alpha": alpha, "false_violations": fails,
            "rate": fails / seeds, "rate_ci95": [float(lo), float(hi)],
            "met": fails / seeds <= alpha, "wall_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds per tightness target")
    ap.add_argument("--null-seeds", type=int, default=500)
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument("--json", dest="json_path", default=None)
    args = ap.parse_args(argv)
    q = args.quick
    seeds = 1 if q else args.seeds
    g_trials = 50_000 if q else 500_000
    l_trials = 100_000 if q else 2_000_000
    w_trials = 500 if q else 5_000

    report: dict[str, Any] = {
        "python": sys.version.split()[0], "numpy": np.__version__,
        "machine": platform.platform(), "quick": q, "targets": [],
    }
    report["targets"].append(run_target(
        "gaussian eps=1 delta=1e-5 (black-box, GDP, projection)", seeds,
        lambda s: audit_blackbox("gaussian_mechanism:sound", BlackBoxOptions(
            trials=g_trials, seed=s, distinguisher="projection", bound="gdp",
            block_size=8192)),
        2 * g_trials, baseline_gaussian, "claimed", 0.9))
    report["targets"].append(run_target(
        "laplace eps=0.1 (black-box, CP, projection)", seeds,
        lambda s: audit_blackbox("laplace_mechanism:sound", BlackBoxOptions(params={"epsilon": 0.1},
                                 trials=l_trials, seed=s, distinguisher="projection",
                                 block_size=8192)),
        2 * l_trials, baseline_laplace, "claimed", 0.95))
    report["targets"].append(run_target(
        "noisy GD linear canary (white-box, GDP)", seeds,
        lambda s: audit_whitebox("noisy_gd:sound", WhiteBoxOptions(params={"loss": "linear"},
                                 trials=w_trials, seed=s)),
        2 * w_trials, None, "accountant", 0.9))
    report["planted"] = suite_results(ROOT / "suites" / "planted.toml", 0)
    report["null"] = suite_results(ROOT / "suites" / "null.toml", 0)
    report["null_rate"] = null_rate(50 if q else args.null_seeds, 0.05)

    print(f"{'target':58s} {'samples':>9s} {'ratio min/med':>14s} {'bar':>5s} "
          f"{'wall s':>7s} {'cpu s':>7s} {'x base':>7s}")
    for t in report["targets"]:
        base = t["slowdown_vs_baseline"]
        print(f"{t['target']:58s} {t['samples']:>9d} {t['ratio_min']:6.3f}/"
              f"{t['ratio_median']:.3f} {t['bar']:5.2f} {t['wall_s_median']:7.2f} "
              f"{t['cpu_s_median']:7.2f} {'' if base is None else f'{base:7.1f}'}"
              f"  {'met' if t['met'] else 'NOT MET'}")
        if "cp_ratio_median" in t:
            print(f"{'':58s} assumption-free CP bound from the same samples: "
                  f"{t['cp_ratio_median']:.3f} of epsilon")
    for key in ("planted", "null"):
        s = report[key]
        print(f"{s['suite']}: {s['met']}/{s['checks']} checks met their expectation "
              f"({s['wall_s']:.1f} s)")
        for c in s["results"]:
            if not c["met"]:
                print(f"   not met: {c['id']} ({c['verdict']})")
    n = report["null_rate"]
    print(f"null false-violation rate (Laplace, black-box CP, alpha {n['alpha']}): "
          f"{n['false_violations']}/{n['seeds']} = {n['rate']:.3f} "
          f"(95% CI {n['rate_ci95'][0]:.3f}-{n['rate_ci95'][1]:.3f})")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
