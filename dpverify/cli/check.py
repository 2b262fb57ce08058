"""``dpverify check [TARGET ...]``: the conformance battery on registered algorithms."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from rich.console import Console

from dpverify.checks.base import CheckResult, RunContext
from dpverify.checks.conformance import BATTERY_NAMES, check_targets
from dpverify.checks.runner import run_checks
from dpverify.cli.app import positive_int
from dpverify.cli.suites import Suite, SuiteRun
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError
from dpverify.report.io import write_json_atomic
from dpverify.report.writer import report_dict, write_reports


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``dpverify check [TARGET ...]``."""
    parser.description = (
        "Run the conformance battery on registered algorithms: outputs, setting, "
        "determinism, account, sensitivity, white-box and black-box audits, backend "
        "agreement; each check's expectation is derived from the variant's findings.")
    parser.add_argument("targets", nargs="*", metavar="TARGET",
                        help="name, name:variant, or a package's entry point (default: every "
                             "registered algorithm)")
    parser.add_argument("--check", dest="names", action="append", default=None,
                        choices=BATTERY_NAMES, help="run only this battery check (repeatable; "
                        "default: every check of the battery)")
    parser.add_argument("--jobs", "-j", type=positive_int, default=1,
                        help="checks run at a time, each in its own process (default 1)")
    parser.add_argument("--expect-pass", action="store_true",
                        help="judge every check against the claim alone (PASS expected), "
                             "ignoring the findings the variants declare: what an algorithm "
                             "that declares none gets")
    parser.add_argument("--report-dir", default=None,
                        help="also write report.json and the human reports here (default: "
                             "none, the table only)")


def run_command(args: argparse.Namespace) -> int:
    """``dpverify check``: 0 when every check met its expectation, 1 when one did not."""
    specs = check_targets(args.targets, args.names)
    if args.expect_pass:
        specs = [dataclasses.replace(s, expected=Verdict.PASS, reason="") for s in specs]
    if getattr(args, "param", None):
        raise InputError("dpverify check runs each variant at its declared test sizes; "
                         "--param does not apply")
    ctx = RunContext.from_args(args)
    console = Console(stderr=True, quiet=args.quiet)
    console.print(f"dpverify check: {len(specs)} checks of "
                  f"{len({s.target for s in specs})} variant(s), seed {ctx.seed}, "
                  f"scale {ctx.scale}", highlight=False)
    done = 0

    def show(res: CheckResult) -> None:
        nonlocal done
        done += 1
        mark = "ok " if res.met else "!! "
        console.print(f"[{done}/{len(specs)}] {mark}{res.spec.id}: {res.outcome.verdict.value} "
                      f"(expected {res.spec.expected.value}, {res.seconds:.1f}s)",
                      highlight=False)

    results = run_checks([(s, ctx) for s in specs], jobs=args.jobs, on_result=show)
    _write(results, args, ctx)
    missed = [r for r in results if not r.met]
    out = Console(width=140)
    for r in missed:
        out.print(f"not met: {r.spec.id}: {r.outcome.verdict.value} (expected "
                  f"{r.spec.expected.value}): {r.outcome.message}", highlight=False)
    out.print(f"{len(results) - len(missed)}/{len(results)} battery checks met their "
              "expectation", highlight=False)
    return 0 if not missed else 1


def _write(results: list[CheckResult], args: argparse.Namespace, ctx: Any) -> None:
    if not (args.report_dir or args.json_path):
        return
    suite = Suite(Path("battery"), "conformance battery", [r.spec for r in results])
    run = SuiteRun([suite], results, seed=ctx.seed, scale=ctx.scale, suite_seeds=[ctx.seed])
    if args.report_dir:
        write_reports(run, Path(args.report_dir))
    if args.json_path:
        write_json_atomic(args.json_path, report_dict(run, []))
