"""Audit the loops of ``tutorial_loop.py`` and ``handwritten_loops.py`` with dpverify.torch.

    python examples/opacus_loop/audit_loops.py            # the figures of the README section
    python examples/opacus_loop/audit_loops.py --small    # seconds: what CI runs
    python examples/opacus_loop/audit_loops.py --whitebox 200   # + a white-box audit at epsilon 1

1. The tutorial loop, recorded unmodified: its executed ledger, and the ledger's epsilon
   beside Opacus's own accountant's.
2. The same loop on a four-record dataset (Opacus issue #571), and on a dataset whose size
   is a multiple of the batch size: flagged from the ledger alone.
3. Hand-written DP-SGD with per-sample and with per-batch clipping, replayed on a
   neighbouring pair: the replayed sensitivity check catches the second.
4. With ``--whitebox K``: a white-box audit of the tutorial loop at epsilon = 1, K runs per
   world re-executed over stacked trials, beside the reference ``dp_sgd:sound`` white-box
   audit of the same size.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import handwritten_loops as hw  # noqa: E402
import tutorial_loop as tu  # noqa: E402

import dpverify.torch as dpt  # noqa: E402

DELTA = 1e-5


def outlier_image(scale: float = 50.0) -> torch.Tensor:
    """A checkerboard of +-scale: far outside the data, in a direction images do not take,
    so its gradient is clipped to the bound at every step."""
    i = torch.arange(28)
    return scale * (((i[:, None] + i[None, :]) % 2) * 2 - 1).float()[None]


def canary_pair(n: int, seed: int = 1) -> dpt.CanaryPair:
    """Add/remove-one: ``n`` synthetic images plus the outlier canary (D), and without it."""
    return dpt.CanaryPair.add(tu.synthetic_mnist(n - 1, seed), (outlier_image(), torch.tensor(3)))


def tutorial_ledger(n: int, config: tu.Config) -> dpt.Run:
    with dpt.record() as rec:
        tu.train(tu.synthetic_mnist(n), seed=0, config=config)
    return rec.run


def section(title: str) -> None:
    print(f"\n== {title}")


def part_ledger(n: int, config: tu.Config) -> None:
    section(f"1. the tutorial loop on {n} records, recorded unmodified")
    t0 = time.perf_counter()
    run = tutorial_ledger(n, config)
    print(run.summary(DELTA))
    for row in run.compare_epsilon(DELTA):
        print(f"   ledger {row['ledger'].upper()} {row['ledger_epsilon']:.4f} vs Opacus "
              f"{row['opacus']} {row['opacus_epsilon']:.4f}: "
              f"{100 * row['relative_difference']:+.2f}%")
    print(f"   ({time.perf_counter() - t0:.1f} s)")


def part_size(config: tu.Config) -> None:
    for n, b in ((4, 2), (1024, 64)):
        section(f"2. the same loop on {n} records in batches of {b}: the ledger alone")
        run = tutorial_ledger(n, replace(config, batch_size=b, epochs=1))
        for f in run.findings():
            print(f"   {f}")


def part_clipping(n: int, steps: int) -> None:
    pair = canary_pair(n)
    setup = hw.Setup(steps=steps)
    for fn in (hw.train_per_sample, hw.train_per_batch):
        section(f"3. {fn.__name__}, replayed on {n} records +- an outlier canary")

        def train(data, seed=0, fn=fn):
            return fn(data, seed, setup)

        train.__name__ = fn.__name__
        audit = dpt.audit_loop(train, (8.0, DELTA), pair)
        print("   " + audit.message().replace("\n", "\n   "))


def part_whitebox(trials: int, n: int) -> None:
    from dpverify.checks.audit import WhiteBoxOptions, audit_whitebox

    config = tu.Config(epsilon=1.0, epochs=1, batch_size=25)
    pair = canary_pair(n)

    def train(data, seed=0):
        return tu.train(data, seed, config)

    section(f"4. white-box audit of the tutorial loop at epsilon 1 ({n} records, "
            f"{trials} runs per world)")
    t0 = time.perf_counter()
    res = dpt.whitebox(train, pair, (1.0, DELTA), dpt.WhiteboxPlan(trials=trials))
    ours = time.perf_counter() - t0
    d = res.details
    print(f"   {res.message()}")
    print(f"   fraction of the ledger epsilon: {res.epsilon_lower / res.epsilon_accountant:.3f}"
          f" ({res.bound}); replayed-sensitivity epsilon {d['epsilon_replayed']:.4f} "
          f"({d['epsilon_replayed'] / res.epsilon_accountant:.3f} of the ledger's); trials by "
          f"{d['trials_by']}; {ours:.1f} s")
    steps = len(pair.D) // config.batch_size + (len(pair.D) % config.batch_size > 0)
    t0 = time.perf_counter()
    ref = audit_whitebox("dp_sgd:sound", WhiteBoxOptions(trials=trials, params={
        "n": len(pair.D), "T": steps, "q": 1 / steps, "epsilon": 1.0, "delta": DELTA}))
    theirs = time.perf_counter() - t0
    print(f"   reference dp_sgd:sound (n={len(pair.D)}, T={steps}, q=1/{steps}): "
          f"{ref.message()}; {theirs:.1f} s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="a few seconds per part (CI)")
    p.add_argument("--whitebox", type=int, default=0, metavar="K",
                   help="also a white-box audit with K runs per world")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG.*")
    warnings.filterwarnings("ignore", message=".*Full backward hook.*")
    warnings.filterwarnings("ignore", message=".*Optimal order is the largest alpha.*")
    torch.set_num_threads(1)
    # Sizes whose neighbours (n - 1, n + 1) give the same loader length and divisor:
    # n mod 64 and n mod len(loader) avoid 0 and their largest value (see part 2).
    n, config = (250, tu.Config(epochs=1)) if args.small else (1000, tu.Config(epochs=3))
    part_ledger(n, config)
    part_size(config)
    part_clipping(250 if args.small else 500, 5 if args.small else 20)
    if args.whitebox:
        part_whitebox(args.whitebox, 245)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
