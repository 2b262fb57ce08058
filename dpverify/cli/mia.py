"""``dpverify mia TARGET --epsilon E --delta D [...]``: membership inference from the shell.

Exit codes: 0 when the attack stays within what the claim allows (no evidence of
violation at level alpha), 1 when it exceeds it (a proven violation at the stated
confidence), 2 on bad input.

Examples
--------
>>> from dpverify.cli.app import main
>>> main(["mia", "dp_sgd:sound", "--attack", "guess"])
dpverify: error: unknown attack 'guess'; known: ['loss', 'lira'] or 'auto'
2
"""

from __future__ import annotations

import argparse
from typing import Any

from dpverify.checks.audit.check import execution_from_context
from dpverify.checks.base import RunContext
from dpverify.checks.mia.core import (
    DEFAULT_POOL,
    DEFAULT_TRIALS,
    MembershipOptions,
    MiaResult,
    membership_inference,
)
from dpverify.checks.mia.game import DESIGNS, RECORD_KINDS
from dpverify.cli.app import add_claim_arguments, parse_params, positive_int
from dpverify.core.claims import RELATIONS
from dpverify.report.io import write_json_atomic


def configure_parser(p: argparse.ArgumentParser) -> None:
    """Add the arguments of ``dpverify mia`` (the shared ones come from
    :mod:`dpverify.cli.app`)."""
    p.description = ("Membership inference (loss-threshold or LiRA with shadow trials) against "
                     "a target, judged against the ROC and AUC any (epsilon, delta)-DP model "
                     "must stay under. TARGET is a registered algorithm (name or name:variant) "
                     "or module:function with signature f(data, rng, trials) -> array "
                     "(trials, p).")
    add_claim_arguments(p)
    p.add_argument("--attack", default="lira", help="lira (default), loss, or auto (both)")
    p.add_argument("--trials", type=positive_int, default=None,
                   help=f"models trained, shadows included (default {DEFAULT_TRIALS})")
    p.add_argument("--design", choices=DESIGNS, default=None,
                   help="poisson: every pool record in with probability 1/2 (default for "
                        "registered targets); single: one target record per trial (default "
                        "for callables)")
    p.add_argument("--pool", type=positive_int, default=DEFAULT_POOL,
                   help=f"target records (default {DEFAULT_POOL})")
    p.add_argument("--records", choices=RECORD_KINDS, default="data",
                   help="target records: records of the data, or crafted canaries")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence of the verdict (default 0.95)")
    p.add_argument("--statistic", default="auto",
                   help="how a model scores a record: auto, inner, a loss name, or "
                        "module:function (outputs, X, y) -> (trials, records)")
    p.add_argument("--data", default=None,
                   help="records for a callable: synthetic (default, handed to it as a "
                        "Dataset) or module:function returning (X, y), X or a Dataset, "
                        "handed to it in that form, as the audit hands a target its pair")
    p.add_argument("--nonmembers", default="pool",
                   help="pool (default: the DP game) or module:function f(problem, rng) "
                        "returning held-out records, e.g. a test set (not the DP game)")
    p.add_argument("--relation", choices=RELATIONS, default=None,
                   help="neighbouring relation (default: the claim's)")
    p.add_argument("--no-auc-test", action="store_true",
                   help="judge by the ROC test alone (all of alpha)")
    p.add_argument("--block-size", type=positive_int, default=None,
                   help="trials per seeded block (default: the executor's)")


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def summary(res: MiaResult) -> str:
    """A few lines a person reads after the attack."""
    m = res.metrics()
    lines = [f"membership inference on {res.target} ({res.attack}, {res.design} design, "
             f"{res.trials} trials, confidence {res.confidence:g}, delta {res.delta:g})",
             f"  {'':<22}{'measured':>10}  {'claim allows':>12}",
             f"  {'AUC':<22}{_fmt(res.auc):>10}  {_fmt(m['auc_ceiling']):>12}"]
    for f in res.tpr:
        lines.append(f"  {f'TPR at FPR {f:g}':<22}{_fmt(res.tpr[f]):>10}  "
                     f"{_fmt(m[f'tpr_ceiling_at_fpr_{f:g}']):>12}")
    lines.append(f"  {'AUC lower bound':<22}{_fmt(res.auc_lower):>10}")
    lines.append(f"  {'epsilon_lower':<22}{_fmt(res.epsilon_lower):>10}  "
                 f"{_fmt(res.epsilon_claimed):>12}")
    lines.append(f"  {'epsilon_accountant':<22}{_fmt(res.epsilon_accountant):>10}")
    if res.epsilon_detectable is not None:
        lines.append(f"  {'epsilon_detectable':<22}{_fmt(res.epsilon_detectable):>10}  "
                     f"(caught with probability {res.detect_probability:g})")
    lines.append(f"  {res.verdict.value}: " + res.message().split(": ", 1)[-1])
    return "\n".join(lines)


def run_command(args: argparse.Namespace) -> int:
    """Run the attack the arguments describe; 0 on PASS, 1 on FAIL (2 is the caller's)."""
    ctx = RunContext(seed=args.seed, workers=args.workers, executor=args.executor,
                     scheduler=args.scheduler, extras={"quiet": bool(args.quiet)})
    opts: dict[str, Any] = {
        "epsilon": args.epsilon, "delta": args.delta, "attack": args.attack,
        "trials": args.trials if args.trials is not None else DEFAULT_TRIALS,
        "design": args.design, "pool": args.pool, "records": args.records,
        "confidence": args.confidence, "statistic": args.statistic, "data": args.data,
        "nonmembers": args.nonmembers,
        "relation": args.relation, "auc_test": not args.no_auc_test,
        "block_size": args.block_size, "params": parse_params(args.param), "seed": args.seed,
        "scale": args.scale, "backend": args.backend,
    }
    execution = execution_from_context(ctx)
    if execution is not None:
        opts["execution"] = execution
    res = membership_inference(args.target, MembershipOptions(**opts))
    if args.json_path:
        write_json_atomic(args.json_path, res.to_dict())
    print(summary(res))
    return 0 if res.verdict == res.verdict.PASS else 1
