"""White-box audit of the Opacus tutorial loop against the reference ``dp_sgd:sound``.

Both audits run in this process at the same size: epsilon = 1 at delta = 1e-5, by default
one epoch of Poisson-sampled DP-SGD over 245 records at rate 1/10 (ten steps, bounded by
the parametric bound in the accountant's family of Poisson-sampled Gaussians; ``--n``,
``--batch``, ``--epochs``; ``--batch`` = ``--n`` gives full-batch steps, whose unsampled
Gaussian releases the GDP bound takes), ``--trials`` runs per world, an add/remove canary.
The tutorial loop (``examples/opacus_loop``: Opacus's MNIST convolutional network on
synthetic 28 x 28 images) is audited by :func:`dpverify.torch.whitebox`, its trials
re-executed over stacked parameters; ``dp_sgd:sound`` (a five-feature logistic model
through the curator) by :func:`dpverify.checks.audit.audit_whitebox`. Reported for each:
epsilon_lower, its fraction of the ledger's (accountant's) epsilon, and wall time; the ratio
of the two wall times; and, with ``--runs R``, the tutorial's cost per trial when each
trial calls the training function (``simulate=False``) against the stacked simulation.

Run: ``python benchmarks/bench_torch_loop.py [--trials 1000] [--runs 20] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DELTA = 1e-5


def _tutorial(args: argparse.Namespace) -> tuple[Any, Any]:
    sys.path.insert(0, str(ROOT / "examples" / "opacus_loop"))
    import audit_loops
    import tutorial_loop as tu

    config = tu.Config(epsilon=1.0, epochs=args.epochs, batch_size=args.batch,
                       loss_reduction=args.reduction, lr=args.lr)
    n = args.n

    def train(data, seed=0):
        return tu.train(data, seed, config)

    return train, audit_loops.canary_pair(n)


def timed(fn: Any) -> tuple[Any, float, float]:
    """``fn()``, its wall time and this process's CPU time (shared machines: read both)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def row(name: str, res: Any, wall: float, cpu: float) -> dict[str, Any]:
    """One audit's figures, printed as soon as it is done."""
    acc = res.epsilon_accountant
    r = {"audit": name, "epsilon_lower": res.epsilon_lower, "bound": res.bound,
         "epsilon_accountant": acc, "fraction": res.epsilon_lower / acc if acc else None,
         "trials": res.trials, "wall_s": wall, "cpu_s": cpu,
         "epsilon_replayed": res.details.get("epsilon_replayed"),
         "detectable": res.epsilon_detectable or res.details.get("detectable")}
    print(f"{r['audit']:58s} trials {r['trials']:6d}  epsilon_lower {r['epsilon_lower']:.3f}"
          f" ({r['bound']}) / ledger {r['epsilon_accountant']:.3f} = {r['fraction']:.3f}"
          f"  detectable {r['detectable']:.3f}  wall {r['wall_s']:.1f} s  cpu {r['cpu_s']:.1f} s",
          flush=True)
    return r


def main(argv: list[str] | None = None) -> int:
    import torch

    import dpverify.torch as dpt
    from dpverify.checks.audit import WhiteBoxOptions, audit_whitebox

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--runs", type=int, default=0, help="also time R trials by calling train")
    p.add_argument("--device", default="cpu", help="where the simulation runs (cpu, cuda)")
    p.add_argument("--block", type=int, default=64, help="simulated trials at a time")
    p.add_argument("--n", type=int, default=245, help="records, the canary included")
    p.add_argument("--batch", type=int, default=25, help="the loader's batch size")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.1, help="the tutorial's learning rate (with "
                   "--reduction sum, divide it by the batch size)")
    p.add_argument("--reference-loss", default=None, choices=["logistic", "linear"],
                   help="dp_sgd:sound's loss (default: the audit's own instance, the linear "
                        "loss whose worst-case canary stays at the clip norm)")
    p.add_argument("--reduction", default="mean", choices=["mean", "sum"],
                   help="Opacus's loss_reduction (full batches: 'sum', whose divisor is 1 "
                        "where 'mean' divides by the dataset's size)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    train, pair = _tutorial(args)
    per_epoch = -(-args.n // args.batch)
    rows = []
    if args.device.startswith("cuda"):
        print("device:", torch.cuda.get_device_name(), flush=True)
    plan = dpt.WhiteboxPlan(trials=args.trials, block=args.block, device=args.device)
    res, wall, cpu = timed(lambda: dpt.whitebox(train, pair, (1.0, DELTA), plan))
    rows.append(row(f"tutorial loop (dpverify.torch, simulated on {args.device})", res, wall, cpu))
    params = {"n": args.n, "T": per_epoch * args.epochs, "q": 1 / per_epoch, "epsilon": 1.0,
              "delta": DELTA}
    if args.reference_loss:
        params["loss"] = args.reference_loss
    res, wall, cpu = timed(lambda: audit_whitebox("dp_sgd:sound", WhiteBoxOptions(
        trials=args.trials, params=params)))
    rows.append(row("dp_sgd:sound (curator)", res, wall, cpu))
    if args.runs:
        res, wall, cpu = timed(lambda: dpt.whitebox(train, pair, (1.0, DELTA), dpt.WhiteboxPlan(
            trials=args.runs, simulate=False)))
        rows.append(row("tutorial loop (dpverify.torch, train called per trial)", res, wall, cpu))
    print(f"replayed-sensitivity epsilon of the tutorial loop: {rows[0]['epsilon_replayed']:.4f}"
          f"; detectable with these trials: {rows[0]['detectable']:.2f}")
    ratio = rows[0]["wall_s"] / rows[1]["wall_s"]
    cpu_ratio = rows[0]["cpu_s"] / rows[1]["cpu_s"]
    print(f"tutorial / dp_sgd:sound at {args.trials} trials: wall-time ratio {ratio:.1f}, "
          f"CPU-time ratio {cpu_ratio:.1f}")
    if args.runs:
        per_sim = rows[0]["wall_s"] / args.trials
        per_run = rows[2]["wall_s"] / args.runs
        print(f"per trial: {per_run:.2f} s calling train, {per_sim:.3f} s simulated "
              f"({per_run / per_sim:.1f}x)")
    if args.json:
        out = {"rows": rows, "ratio": ratio, "cpu_ratio": cpu_ratio}
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
