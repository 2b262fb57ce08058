"""``dpverify agree TARGET``: NumPy vs torch backend agreement."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from dpverify.checks.agreement import (
    DEFAULT_ALPHA,
    DEFAULT_SAFETY,
    DEFAULT_TRIALS,
    MODES,
    AgreeMetrics,
    AgreeOptions,
    agree_check,
    torch_status,
)
from dpverify.checks.base import CheckResult, CheckSpec, RunContext
from dpverify.cli.app import nonnegative_int, parse_params, positive_int
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError, check_positive, check_probability
from dpverify.execution.experiment import Experiment
from dpverify.report.io import write_json_atomic


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``dpverify agree TARGET``.

    Examples
    --------
    >>> p = argparse.ArgumentParser(); configure_parser(p)
    >>> a = p.parse_args(["noisy_gd:sound", "--param", "T=5", "--dtype", "float32"])
    >>> a.target, a.param, a.dtype
    ('noisy_gd:sound', ['T=5'], 'float32')
    """
    parser.add_argument("target", help="a registered algorithm: name or name:variant")
    parser.add_argument("--param", action="append", default=[], metavar="K=V",
                        help="override an algorithm parameter (repeatable; default: the "
                             "algorithm's own)")
    parser.add_argument("--trials", type=positive_int, default=None,
                        help=f"trials per backend for the distributional test "
                             f"(default {DEFAULT_TRIALS})")
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="root seed (default 0)")
    parser.add_argument("--device", default="cpu", help="torch device: cpu or cuda")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                        help="torch precision; numpy is the float64 reference")
    parser.add_argument("--mode", choices=MODES, default="both",
                        help="trajectory (shared noise), distribution (own noise) or both")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help=f"family-wise level of the distributional test "
                             f"(default {DEFAULT_ALPHA})")
    parser.add_argument("--safety", type=float, default=DEFAULT_SAFETY,
                        help=f"ulps of difference allowed per release (default "
                             f"{DEFAULT_SAFETY:g})")
    parser.add_argument("--scale", choices=("quick", "thorough"), default="quick",
                        help="parameter set of the algorithm (default quick)")
    # dest json_path: the name the dpverify CLI's shared options use for --json.
    parser.add_argument("--json", dest="json_path", metavar="FILE", default=None,
                        help="write the check record as JSON (default: not written)")


def run_command(args: argparse.Namespace) -> int:
    """Run ``dpverify agree``: print the verdict; 0 on PASS, 1 otherwise.

    Bad input (unknown target or parameter, a CUDA device that is not there, torch not
    installed) raises :class:`~dpverify.core.errors.InputError`, which the CLI turns into 2.

    Examples
    --------
    >>> p = argparse.ArgumentParser(); configure_parser(p)
    >>> run_command(p.parse_args(["noisy_gd:sound", "--param", "T=3",
    ...                           "--mode", "trajectory"]))  # doctest: +ELLIPSIS
    PASS  noisy_gd:sound: trajectory (float64, 3 releases): max relative deviation ...
    0
    """
    params = parse_params(args.param)
    reason = torch_status(args.device)
    if reason is not None:
        raise InputError(f"dpverify agree: {reason}")
    trials = DEFAULT_TRIALS if args.trials is None else args.trials
    check_positive(trials, "--trials", integer=True)
    check_positive(args.safety, "--safety")
    check_probability(args.alpha, "--alpha")
    spec = CheckSpec(
        id=f"agree:{args.target}", kind="agree", target=args.target, params=params,
        options={"mode": args.mode, "trials": trials, "alpha": args.alpha,
                 "device": args.device, "dtype": args.dtype, "safety": args.safety},
    )
    ctx = RunContext.from_args(args)
    t0 = time.perf_counter()
    outcome = agree_check(Experiment.from_context(spec.target, params, ctx),
                          AgreeOptions.parse(spec.options)).typed(AgreeMetrics)
    result = CheckResult(spec, outcome, time.perf_counter() - t0)
    print(f"{outcome.verdict.value}  {spec.target}: {outcome.message}")
    json_path = getattr(args, "json_path", None)
    if json_path:
        record = {"seed": args.seed, **result.to_dict()}
        try:
            write_json_atomic(json_path, record)
        except OSError as e:
            raise InputError(f"cannot write {json_path!r}: {e}") from None
    return 0 if outcome.verdict == Verdict.PASS else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (``python -m dpverify.cli.agree TARGET ...``)."""
    parser = argparse.ArgumentParser(prog="dpverify agree", description=__doc__.splitlines()[0])
    configure_parser(parser)
    try:
        return run_command(parser.parse_args(argv))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2



if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
