"""``dpverify audit TARGET --epsilon E --delta D [...]``: audit one target from the shell.

Exit codes: 0 when the audit passes (no violation above the epsilon it could detect), 1
when the epsilon lower bound exceeds the claim (a proven violation at the stated
confidence) or when a sequential audit ran out of trials before it could detect a
violation of ``--detect`` times the claim (INCONCLUSIVE, "underpowered"), 2 on bad input
(the message names the bad value).

Without ``--trials``, black-box and white-box audits are sequential
(:mod:`dpverify.checks.audit.sequential`): they sample in rounds until they prove a violation or
their detectable epsilon falls to ``--detect`` times the claim (default 2 black-box, 1.25
for a pure-DP claim, 1.1 white-box), within ``--max-trials`` runs per world.

Examples
--------
>>> from dpverify.cli.app import main
>>> main(["audit", "gaussian_mechanism:sound", "--epsilon", "nan", "--delta", "1e-5"])
dpverify: error: epsilon must be a finite number > 0, got nan
2
"""

from __future__ import annotations

import argparse
from typing import Any

from dpverify.checks.audit.check import DEFAULT_TRIALS, audit, execution_from_context
from dpverify.checks.audit.distinguishers import AUTO, DISTINGUISHERS
from dpverify.checks.audit.result import MODES, AuditResult
from dpverify.checks.audit.sequential import (
    DEFAULT_DETECT,
    DEFAULT_MAX_TRIALS,
    PURE_DP_DETECT,
)
from dpverify.checks.base import RunContext
from dpverify.cli.app import add_claim_arguments, parse_params, positive_int
from dpverify.core.data import QUERY_PATTERNS, QUERY_RELATIONS
from dpverify.report.io import write_json_atomic
from dpverify.stats.power import DETECT_PROBABILITY


def configure_parser(p: argparse.ArgumentParser) -> None:
    """Add the audit's arguments (the shared ones are added by :mod:`dpverify.cli.app`)."""
    p.description = ("Empirical privacy audit: an epsilon lower bound with a stated "
                     "confidence, next to the accountant's epsilon and the claim. TARGET is "
                     "a registered algorithm (name or name:variant; see `dpverify list`) or "
                     "module:function with signature f(data, rng, trials) -> array "
                     "(trials, ...).")
    add_claim_arguments(p)
    p.add_argument("--mode", choices=MODES, default="blackbox",
                   help="blackbox (outputs only), whitebox (every release, by replay) or "
                        "onerun (m canaries, one run)")
    p.add_argument("--neighbours", default="auto",
                   help="pair generator(s), comma-separated: auto (default: search for "
                        "query answers and a user's callable, the worst-case canary where a "
                        "registered target declares a clip, else fresh_direction), search "
                        "(every built-in one for the target's input), a pattern of query "
                        f"answers ({', '.join(QUERY_PATTERNS)}), a "
                        "dataset canary (worst_case, fresh_direction, clip_boundary, outlier, "
                        "box_corners, zero_base, nonfinite, random), or module:function "
                        "returning (D, D') or a list of pairs")
    p.add_argument("--trials", type=positive_int, default=None,
                   help="runs per neighbouring dataset, a fixed-size audit (default: none, "
                        "a sequential audit for black-box and white-box, see --detect; "
                        "one-run: one run)")
    p.add_argument("--detect", type=float, default=None, metavar="R",
                   help="a sequential audit stops with PASS once it would catch a violation "
                        "of R x the claimed epsilon (default: "
                        + ", ".join(f"{k} {v}" for k, v in DEFAULT_DETECT.items())
                        + f"; black-box at delta 0: {PURE_DP_DETECT})")
    p.add_argument("--max-trials", type=positive_int, default=None,
                   help="a sequential audit's budget of runs per neighbouring dataset "
                        "(default: " + ", ".join(f"{k} {v:,}" for k, v in
                                                 DEFAULT_MAX_TRIALS.items()) + ")")
    p.add_argument("--detect-probability", type=float, default=DETECT_PROBABILITY,
                   help="probability with which epsilon_detectable is caught (default "
                        f"{DETECT_PROBABILITY:g})")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence of the lower bound (default 0.95)")
    p.add_argument("--distinguisher", default="auto",
                   help="black-box test statistic(s), comma-separated: " + ", ".join(
                       DISTINGUISHERS) + ", auto (" + ", ".join(AUTO) + "), or "
                        "module:function")
    p.add_argument("--bound", choices=["auto", "cp", "gdp", "parametric"], default="auto",
                   help="cp: assumption-free; gdp: assumes a Gaussian trade-off curve; "
                        "parametric (white-box): assumes the Poisson-sampled Gaussian family "
                        "the accountant assumes; auto: gdp in white-box when every release is "
                        "an unsampled Gaussian, parametric when every release is a "
                        "Poisson-sampled Gaussian, else cp")
    p.add_argument("--relation", choices=QUERY_RELATIONS, default=None,
                   help="neighbouring relation (default: the claim's); componentwise only "
                        "for a target taking query answers (every answer moves by <= 1)")
    p.add_argument("--canaries", type=positive_int, default=1000,
                   help="one-run: number of canaries")
    p.add_argument("--scores", choices=["auto", "output", "releases"], default="auto",
                   help="one-run: score canaries on the output or on every release (auto: "
                        "releases for a registered algorithm, else the output)")
    p.add_argument("--block-size", type=positive_int, default=None,
                   help="trials per seeded block (default: the executor's)")


_STOPS = {"violation": "stopped on a proven violation",
          "powered": "stopped once a violation of --detect x the claim would be caught",
          "budget": "ran out of trials (--max-trials)"}


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def summary(res: AuditResult) -> str:
    """A few lines a person reads after an audit.

    Examples
    --------
    >>> r = AuditResult("x", "blackbox", 0.5, 1.0, 1.0, 1e-5, 0.95, 1000, "cp",
    ...                 epsilon_detectable=1.8, detect_probability=0.9)
    >>> print(summary(r).splitlines()[-1])
      PASS: no violation above epsilon = 1.8 at confidence 0.9 (false alarms at most 0.05)
    """
    d = res.details
    relation = f", {d['relation'].replace('_', '-')}" if d.get("relation") else ""
    lines = [f"audit of {res.target} ({res.mode}, {res.trials} trials, "
             f"confidence {res.confidence:g}, delta {res.delta:g}{relation})"]
    if d.get("stop"):
        lines.append(f"  sequential: {_STOPS[d['stop']]} after {res.trials} trials per world"
                     + (f" (e-value at the claim {d['e_value']:.3g})" if "e_value" in d
                        else ""))
    lines.extend(f"  {note}" for note in d.get("instance") or [])
    how = res.bound
    if d.get("distinguisher"):
        how += f", distinguisher {d['distinguisher']}"
    if d.get("pair"):
        how += f", neighbours {d['pair']}"
    strict = "> " if res.bound == "betting" and res.epsilon_lower > 0 else ""
    lines.append(f"  epsilon_lower       {strict}{_fmt(res.epsilon_lower)}  ({how})")
    witness = res.evidence.get("witness") or {}
    if "D" in witness and "D_prime" in witness:
        lines.append(f"  witness             D = {witness['D']}, D' = {witness['D_prime']}")
    elif "record" in witness:
        lines.append(f"  witness             record {witness['index']} = {witness['record']}, "
                     f"in one dataset of the pair only")
    elif "record_D" in witness:
        lines.append(f"  witness             record {witness['index']} = "
                     f"{witness['record_D']} in D, {witness['record_D_prime']} in D'")
    for key in ("epsilon_lower_cp", "epsilon_lower_gdp"):
        if d.get(key) is not None and key != f"epsilon_lower_{res.bound}":
            lines.append(f"  {key:<19} {_fmt(d[key])}")
    lines.append(f"  epsilon_accountant  {_fmt(res.epsilon_accountant)}")
    lines.append(f"  epsilon_claimed     {_fmt(res.epsilon_claimed)}")
    if res.tightness is not None:
        lines.append(f"  tightness           {res.tightness:.3f}")
    if res.epsilon_detectable is not None:
        lines.append(f"  epsilon_detectable  {_fmt(res.epsilon_detectable)}  (caught with "
                     f"probability {res.detect_probability:g}; reference "
                     f"{res.power.get('reference')}, {res.power.get('method')})")
    for a in res.assumptions:
        lines.append(f"  assumes: {a}")
    lines.append(f"  {res.verdict.value}: " + res.message().split("; accountant ")[-1]
                 .split(": ", 1)[-1])
    return "\n".join(lines)


def run_command(args: argparse.Namespace) -> int:
    """Run the audit the arguments describe; 0 on PASS, 1 on FAIL (2 is the caller's)."""
    mode = args.mode
    opts: dict[str, Any] = {
        "epsilon": args.epsilon, "delta": args.delta, "confidence": args.confidence,
        "relation": args.relation, "params": parse_params(args.param), "seed": args.seed,
        "scale": args.scale, "backend": args.backend,
        "detect_probability": args.detect_probability,
    }
    if mode in DEFAULT_TRIALS:
        ctx = RunContext.from_args(args)
        opts.update(neighbours=args.neighbours, bound=args.bound, block_size=args.block_size)
        if args.trials is not None:
            opts["trials"] = args.trials
        else:
            opts.update(sequential=True, detect=args.detect, max_trials=args.max_trials)
        execution = execution_from_context(ctx)
        if execution is not None:
            opts["execution"] = execution
        if mode == "blackbox":
            opts["distinguisher"] = args.distinguisher
    else:
        opts.update(canaries=args.canaries, scores=args.scores)
    res = audit(args.target, mode=mode, **opts)
    if args.json_path:
        write_json_atomic(args.json_path, res.to_dict())
    print(summary(res))
    return 0 if res.verdict.value == "PASS" else 1
