"""The classic catalogue audited black-box, beside DP-Sniper's published lower bounds.

Targets (anchors/auditing.md, sections 3.6 and 9):

* ``table``: every mechanism of :mod:`algorithms.catalogue` audited with the defaults
  (pair search over StatDP's patterns, ``auto`` distinguishers), at DP-Sniper's
  confidence 0.9 (Bichsel et al. 2021 report epsilon_lcb with two Clopper-Pearson bounds
  at 0.95 each), from at most 10^7 runs per dataset of the witness pair. Each correct
  mechanism's bound is set beside DP-Sniper's (``eval_sp2021/reference-results`` of
  eth-sri/dp-sniper, searched over the same patterns with 10.7M runs per stage and
  2 x 10^8 for the final estimate); each buggy one must be flagged (bound > 0.1).
* ``efficiency``: the Clopper-Pearson (assumption-free) bound of the Gaussian mechanism at
  epsilon = 1, delta = 1e-5, 95% confidence, at 10^4 / 10^5 / 10^6 runs per dataset, as
  a fraction of epsilon, mean over seeds, against the reference of a threshold test
  bounded on all the runs (0.38 / 0.59 / 0.77).
* ``null``: the false-violation rate of the catalogue's tight Laplace row audited with the
  defaults over many seeds at alpha = 0.2 (its Clopper-Pearson interval).

Speed is reported as wall and CPU seconds and as a CPU ratio to a baseline measured in
the same run: drawing the audit's number of runs with the mechanism alone.

Run: ``python benchmarks/bench_mechanisms.py table --trials 10000000 --json out.json``;
``efficiency --seeds 20``; ``null --seeds 200``; ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from algorithms.catalogue import CATALOGUE
from dpverify.checks.audit import BlackBoxOptions, audit_blackbox, clopper_pearson

# DP-Sniper's published epsilon_lcb (confidence 0.9, to five decimals where a row is compared
# with it) and seconds (search + final estimate),
# eval_sp2021/reference-results/{dd_search_reg,floating_point,floating_fixed}_data.log.
DPSNIPER = {
    "laplace": (0.09680, 19.6 + 1.9), "truncated_geometric": (0.11556, 17.9 + 1.5),
    "noisy_hist1": (0.09779, 34.8 + 2.9), "noisy_hist2": (4.6020, 37.8 + 2.8),
    "rnm1": (0.09225, 58.8 + 3.0), "rnm2": (0.09750, 55.7 + 2.7), "rnm3": (0.2478, 59.4 + 3.0),
    "rnm4": (0.3463, 59.8 + 3.1), "svt1": (0.08580, 118.0 + 8.0),
    "svt2": (0.08593, 148.1 + 11.8), "svt3": (0.1716, 149.8 + 10.5),
    "svt4": (0.1687, 122.7 + 7.8), "svt5": (1.7612, 56.2 + 2.6), "svt6": (0.2720, 90.7 + 4.8),
    "laplace_naive_float": (0.2521, 1816.8 + 307.8), "laplace_snapped": (0.09788, 1256.6 + 1643.9),
    "rappor": (0.29298, 130.6 + 14.2), "one_time_rappor": (0.59778, 79.9 + 9.2),
    "laplace_parallel": (0.03495, 96.5 + 8.0), "svt34_parallel": (0.2610, 341.3 + 22.7),
    "prefix_sum": (0.5040, 92.1 + 4.8), "numerical_svt": (0.03432, 142.2 + 9.5),
}
DPSNIPER_RUNS = 2 * 10**8  # final estimate alone, per dataset; each search stage 10.7M
EFFICIENCY_REFERENCE = {10**4: 0.38, 10**5: 0.59, 10**6: 0.77}


def timed(fn: Any) -> tuple[Any, float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def baseline(name: str, runs: int) -> float:
    """CPU seconds to draw ``runs`` outputs of the mechanism alone on its all-ones input
    (CPU, not wall: the machines these run on are shared)."""
    fn = CATALOGUE[name]
    rng = np.random.default_rng(0)
    a = np.ones(fn.dpverify_declaration.queries)
    t0 = time.process_time()
    for start in range(0, runs, 1 << 20):
        fn(a, rng, min(1 << 20, runs - start))
    return time.process_time() - t0


def table_row(name: str, trials: int, seed: int) -> dict[str, Any]:
    r, wall, cpu = timed(lambda: audit_blackbox(f"algorithms.catalogue:{name}", BlackBoxOptions(
        trials=trials, seed=seed, confidence=0.9, accountant=False)))
    decl = CATALOGUE[name].dpverify_declaration
    bug = decl.epsilon_true is not None and decl.epsilon_true > decl.epsilon
    sniper, sniper_s = DPSNIPER[name]
    runs = int(r.details["runs_total"])
    base = baseline(name, runs)
    met = r.epsilon_lower > decl.epsilon if bug else r.epsilon_lower >= sniper
    return {"mechanism": name, "claimed": decl.epsilon, "true": decl.epsilon_true,
            "expected": "FAIL" if bug else "PASS", "verdict": r.verdict.value,
            "epsilon_lower": r.epsilon_lower, "dpsniper": sniper, "dpsniper_s": sniper_s,
            "met": bool(met and r.verdict.value == ("FAIL" if bug else "PASS")),
            "trials": trials, "runs_total": runs, "wall_s": wall, "cpu_s": cpu,
            "baseline_cpu_s": base, "x_baseline": cpu / base if base > 0 else None,
            "witness": r.details["pair"], "distinguisher": r.details["distinguisher"],
            "statistic": r.details["statistic"]}


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'mechanism':21s} {'claim':>6s} {'true':>6s} {'dpverify':>9s} {'DP-Sniper':>9s} "
          f"{'verdict':>7s} {'runs':>10s} {'cpu s':>7s} {'x base':>7s}  witness / test")
    for r in rows:
        true = "-" if r["true"] is None else f"{r['true']:.4g}"
        print(f"{r['mechanism']:21s} {r['claimed']:6.4f} {true:>6s} {r['epsilon_lower']:9.4f} "
              f"{r['dpsniper']:9.4f} {r['verdict']:>7s} {r['runs_total']:10.3g} "
              f"{r['cpu_s']:7.1f} {r['x_baseline'] or 0:7.1f}  {r['witness']} / "
              f"{r['distinguisher']} ({r['statistic']})" + ("" if r["met"] else "  NOT MET"))
    print(f"DP-Sniper: confidence 0.9, {DPSNIPER_RUNS:.0e} runs per dataset for the final "
          "estimate; dpverify: confidence 0.9, runs_total over both datasets and the search")


def efficiency(seeds: int, sizes: list[int]) -> list[dict[str, Any]]:
    out = []
    for n in sizes:
        vals, walls = [], []
        for s in range(seeds):
            r, wall, _ = timed(lambda s=s, n=n: audit_blackbox(
                "gaussian_mechanism:sound", BlackBoxOptions(trials=n, seed=s, accountant=False,
                block_size=1 << 16)))
            vals.append(r.epsilon_lower / r.epsilon_claimed)
            walls.append(wall)
        ref = EFFICIENCY_REFERENCE.get(n)
        out.append({"trials": n, "seeds": seeds, "mean_ratio": statistics.mean(vals),
                    "min_ratio": min(vals), "reference": ref,
                    "met": ref is None or statistics.mean(vals) >= ref,
                    "wall_s_median": statistics.median(walls)})
        e = out[-1]
        print(f"gaussian eps=1 delta=1e-5 CP bound at {n:>8d} runs: mean {e['mean_ratio']:.3f} "
              f"of epsilon over {seeds} seeds (min {e['min_ratio']:.3f}; reference {ref}) "
              f"{'met' if e['met'] else 'NOT MET'}", flush=True)
    return out


def null_rate(seeds: int, alpha: float, trials: int) -> dict[str, Any]:
    fails = 0
    t0 = time.perf_counter()
    for s in range(seeds):
        r = audit_blackbox("algorithms.catalogue:laplace", BlackBoxOptions(
            trials=trials, seed=10_000 + s, confidence=1 - alpha, accountant=False))
        fails += r.verdict.value == "FAIL"
    lo, hi = clopper_pearson(fails, seeds, 0.05, "two")
    out = {"seeds": seeds, "alpha": alpha, "trials": trials, "false_violations": fails,
           "rate": fails / seeds, "rate_ci95": [float(lo), float(hi)],
           "met": fails / seeds <= alpha, "wall_s": time.perf_counter() - t0}
    print(f"null (catalogue laplace, defaults, alpha {alpha}): {fails}/{seeds} = "
          f"{out['rate']:.3f} false violations (95% CI {lo:.3f}-{hi:.3f})")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["table", "efficiency", "null", "all"])
    ap.add_argument("--trials", type=int, default=10**7, help="table: runs per dataset")
    ap.add_argument("--rows", default=",".join(CATALOGUE), help="table: mechanisms")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument("--json", dest="json_path", default=None)
    args = ap.parse_args(argv)
    report: dict[str, Any] = {"python": sys.version.split()[0], "numpy": np.__version__}
    if args.what in ("table", "all"):
        trials = 100_000 if args.quick else args.trials
        rows = []
        for name in args.rows.split(","):
            rows.append(table_row(name.strip(), trials, args.seed))
            print(json.dumps(rows[-1], default=str), flush=True)
        print_table(rows)
        report["table"] = rows
    if args.what in ("efficiency", "all"):
        sizes = [10**4, 10**5] if args.quick else [10**4, 10**5, 10**6]
        report["efficiency"] = efficiency(args.seeds or (5 if args.quick else 20), sizes)
    if args.what in ("null", "all"):
        report["null"] = null_rate(args.seeds or (50 if args.quick else 200), 0.2, 2000)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
