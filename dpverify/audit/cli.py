"""``dpverify audit TARGET --epsilon E --delta D [...]``: audit one target from the shell.

Exit codes: 0 when the audit passes (no evidence of violation at level alpha), 1 when the
epsilon lower bound exceeds the claim (a proven violation at the stated confidence), 2 on
bad input (the message names the bad value).

Examples
--------
>>> from dpverify.cli import main
>>> main(["audit", "gaussian_mechanism:sound", "--epsilon", "nan", "--delta", "1e-5"])
dpverify: error: epsilon must be a finite number > 0, got nan
2
"""

from __future__ import annotations

import argparse
from typing import Any

from dpverify.audit.check import DEFAULT_TRIALS, audit
from dpverify.audit.distinguishers import AUTO, DISTINGUISHERS
from dpverify.audit.result import MODES, AuditResult
from dpverify.cli import add_claim_arguments
from dpverify.data import QUERY_RELATIONS


def configure_parser(p: argparse.ArgumentParser) -> None:
    """Add the audit's arguments (the shared ones are added by :mod:`dpverify.cli`)."""
    p.description = ("Empirical privacy audit: an epsilon lower bound with a stated "
                     "confidence, next to the accountant's epsilon and the claim. TARGET is "
                     "a registered algorithm (name or name:variant; see `dpverify list`) or "
                     "module:function with signature f(data, rng, trials) -> array "
                     "(trials, ...).")
    add_claim_arguments(p)
    p.add_argument("--mode", choices=MODES, default="blackbox",
                   help="blackbox (outputs only), whitebox (every release, by replay) or "
                        "onerun (m canaries, one run)")
    p.add_argument("--neighbours", default=None,
                   help="pair generator(s), comma-separated: search (every built-in one for "
                        "the target's input), a pattern of query answers (one_above, "
                        "one_below, one_up_one_down, one_above_rest_below, "
                        "one_below_rest_above, half_half, all_above, all_below, x_shape), a "
                        "dataset canary (fresh_direction, clip_boundary, outlier, nonfinite, "
                        "random), or module:function returning (D, D') or a list of pairs "
                        "(default: search for a target taking query answers, else "
                        "fresh_direction)")
    p.add_argument("--trials", type=int, default=None,
                   help="runs per neighbouring dataset (default: "
                        + ", ".join(f"{k} {v}" for k, v in DEFAULT_TRIALS.items()) + ")")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence of the lower bound (default 0.95)")
    p.add_argument("--distinguisher", default="auto",
                   help="black-box test statistic(s), comma-separated: " + ", ".join(
                       DISTINGUISHERS) + ", auto (" + ", ".join(AUTO) + "), or "
                        "module:function")
    p.add_argument("--bound", choices=["auto", "cp", "gdp"], default="auto",
                   help="cp: assumption-free; gdp: assumes a Gaussian trade-off curve; auto: "
                        "gdp in white-box when every release is an unsampled Gaussian, else cp")
    p.add_argument("--relation", choices=QUERY_RELATIONS, default=None,
                   help="neighbouring relation (default: the claim's); componentwise only "
                        "for a target taking query answers (every answer moves by <= 1)")
    p.add_argument("--canaries", type=int, default=1000, help="one-run: number of canaries")
    p.add_argument("--scores", choices=["output", "releases"], default="output",
                   help="one-run: score canaries on the output or on every release")
    p.add_argument("--block-size", type=int, default=None,
                   help="trials per seeded block (default: the executor's)")


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def summary(res: AuditResult) -> str:
    """A few lines a person reads after an audit.

    Examples
    --------
    >>> r = AuditResult("x", "blackbox", 0.5, 1.0, 1.0, 1e-5, 0.95, 1000, "cp")
    >>> print(summary(r).splitlines()[-1])
      PASS: no evidence of violation at level 0.05
    """
    d = res.details
    lines = [f"audit of {res.target} ({res.mode}, {res.trials} trials, "
             f"confidence {res.confidence:g}, delta {res.delta:g})"]
    how = res.bound
    if d.get("distinguisher"):
        how += f", distinguisher {d['distinguisher']}"
    if d.get("pair"):
        how += f", neighbours {d['pair']}"
    lines.append(f"  epsilon_lower       {_fmt(res.epsilon_lower)}  ({how})")
    witness = res.evidence.get("witness") or {}
    if "D" in witness and "D_prime" in witness:
        lines.append(f"  witness             D = {witness['D']}, D' = {witness['D_prime']}")
    for key in ("epsilon_lower_cp", "epsilon_lower_gdp"):
        if d.get(key) is not None and key != f"epsilon_lower_{res.bound}":
            lines.append(f"  {key:<19} {_fmt(d[key])}")
    lines.append(f"  epsilon_accountant  {_fmt(res.epsilon_accountant)}")
    lines.append(f"  epsilon_claimed     {_fmt(res.epsilon_claimed)}")
    if res.tightness is not None:
        lines.append(f"  tightness           {res.tightness:.3f}")
    for a in res.assumptions:
        lines.append(f"  assumes: {a}")
    lines.append(f"  {res.verdict.value}: " + res.message().split(": ")[-1])
    return "\n".join(lines)


def run_command(args: argparse.Namespace) -> int:
    """Run the audit the arguments describe; 0 on PASS, 1 on FAIL (2 is the caller's)."""
    from dpverify.audit.check import execution_from_context
    from dpverify.checks import RunContext
    from dpverify.cli import parse_params

    mode = args.mode
    opts: dict[str, Any] = {
        "epsilon": args.epsilon, "delta": args.delta, "confidence": args.confidence,
        "relation": args.relation, "params": parse_params(args.param), "seed": args.seed,
        "scale": args.scale, "backend": args.backend,
    }
    if mode in DEFAULT_TRIALS:
        ctx = RunContext.from_args(args)
        if args.neighbours is not None:
            opts["neighbours"] = args.neighbours
        opts.update(bound=args.bound,
                    trials=args.trials if args.trials is not None else DEFAULT_TRIALS[mode],
                    block_size=args.block_size)
        execution = execution_from_context(ctx)
        if execution is not None:
            opts["execution"] = execution
        if mode == "blackbox":
            opts["distinguisher"] = args.distinguisher
    else:
        opts.update(canaries=args.canaries, scores=args.scores)
    res = audit(args.target, mode=mode, **opts)
    if args.json_path:
        from dpverify.report.io import write_json_atomic

        write_json_atomic(args.json_path, res.to_dict())
    print(summary(res))
    return 0 if res.verdict.value == "PASS" else 1
