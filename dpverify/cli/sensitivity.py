"""``dpverify sensitivity TARGET``: replay on neighbours, declared vs true sensitivity."""

from __future__ import annotations

import argparse

from dpverify.checks.sensitivity import (
    DEFAULT_MAX_ABS,
    DEFAULT_MAX_EXAMPLES,
    DEFAULT_RANDOM_PAIRS,
    DEFAULT_RTOL,
    DEFAULT_TRIALS,
    GENERATORS,
    RELATION_CHOICES,
    SEARCHES,
    SearchSettings,
    SensitivityReport,
    check_sensitivity,
)
from dpverify.cli.app import nonnegative_int, parse_params, positive_int
from dpverify.report.io import write_json_atomic


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``dpverify sensitivity TARGET``.

    Examples
    --------
    >>> p = argparse.ArgumentParser(); configure_parser(p)
    >>> a = p.parse_args(["noisy_gd:sound", "--neighbours", "outlier", "nonfinite",
    ...                   "--relation", "both"])
    >>> a.neighbours, a.relation, a.search
    (['outlier', 'nonfinite'], 'both', 'all')
    """
    parser.description = ("Replay TARGET on neighbouring datasets and compare each release's "
                          "true difference with its declared sensitivity.")
    parser.add_argument("target", help="name[:variant], or module:function of your own "
                                       "algo(cur, setting, params)")
    parser.add_argument("--neighbours", nargs="+", action="extend", default=None,
                        metavar="SPEC", help=f"canary generators ({', '.join(GENERATORS)}) or "
                                             "module:function returning (D, D_prime); default all")
    parser.add_argument("--relation", choices=RELATION_CHOICES, default="claim",
                        help="neighbouring relation(s) to check (default: the claim's)")
    parser.add_argument("--search", choices=SEARCHES, default="all",
                        help="canaries and random pairs, the hypothesis search, or all")
    parser.add_argument("--max-examples", type=positive_int, default=DEFAULT_MAX_EXAMPLES,
                        help=f"hypothesis examples per relation (default "
                             f"{DEFAULT_MAX_EXAMPLES})")
    parser.add_argument("--trials", type=positive_int, default=DEFAULT_TRIALS,
                        help="trials per replay: independent noise, so different trajectories "
                             f"past each pair (default {DEFAULT_TRIALS})")
    parser.add_argument("--random-pairs", type=nonnegative_int, default=DEFAULT_RANDOM_PAIRS,
                        help=f"random pairs per relation (default {DEFAULT_RANDOM_PAIRS})")
    parser.add_argument("--data", default=None, metavar="MODULE:FUNCTION",
                        help="your data: a function returning (X, y); default synthetic "
                             "(--param n=.. --param d=..) or the algorithm's own problem")
    parser.add_argument("--rtol", type=float, default=DEFAULT_RTOL,
                        help=f"tolerance on the ratio true / declared (default {DEFAULT_RTOL:g})")
    parser.add_argument("--max-abs", type=float, default=DEFAULT_MAX_ABS,
                        help="bound on the coordinates hypothesis draws "
                             f"(default {DEFAULT_MAX_ABS:g})")
    parser.add_argument("--finite-only", action="store_true",
                        help="no records holding NaN or inf: the nonfinite canary is left "
                             "out of the defaults and hypothesis draws none")
    parser.add_argument("--no-invariance", action="store_true",
                        help="skip the taint test (identical answers on D and D')")


def run_command(args: argparse.Namespace) -> int:
    """Run ``dpverify sensitivity``: print the verdict; 0 on PASS, 1 otherwise.

    Bad input (unknown target, generator or parameter, a bad number) raises
    :class:`~dpverify.core.errors.InputError`, which the CLI turns into exit code 2.

    Examples
    --------
    >>> from dpverify.cli.app import add_common_options
    >>> p = argparse.ArgumentParser(conflict_handler="resolve")
    >>> add_common_options(p); configure_parser(p)
    >>> run_command(p.parse_args(["noisy_gd:sound", "--param", "T=3", "--param", "n=50",
    ...                           "--search", "canaries", "--quiet"]))  # doctest: +ELLIPSIS
    noisy_gd:sound: PASS: no violation in 13 pairs under add_remove; worst ratio 1 ...
    0
    """
    how = SearchSettings(
        neighbours=args.neighbours, relation=args.relation, search=args.search,
        max_examples=args.max_examples,
        trials=args.trials if args.trials is not None else DEFAULT_TRIALS,
        random_pairs=args.random_pairs, rtol=args.rtol, max_abs=args.max_abs,
        nonfinite=not args.finite_only, invariance=not args.no_invariance,
    )
    report = check_sensitivity(args.target, parse_params(getattr(args, "param", [])),
                               settings=how, seed=args.seed, scale=args.scale,
                               backend=args.backend, data=args.data)
    json_path = getattr(args, "json_path", None)
    if json_path:
        write_json_atomic(json_path, report.to_dict())
    if not getattr(args, "quiet", False):
        _print_table(report)
    print(report.summary())
    return 0 if report.passed else 1


def _print_table(report: SensitivityReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"sensitivity of {report.target}")
    for col in ("pair", "relation", "ratio", "true / declared", "where", "status"):
        table.add_column(col, overflow="fold")
    for p in report.pairs:
        declared = "exact" if p.declared is None else f"{p.declared:.4g}"
        where = "-" if p.release is None else (
            f"#{p.release} {p.query}" + (f" t={p.step}" if p.step is not None else ""))
        status = "error" if p.error else ("VIOLATION" if p.violated else "ok")
        table.add_row(p.generator, p.relation, f"{p.worst_ratio:.4g}",
                      f"{p.true_difference:.4g} / {declared}", where, status)
    Console(width=120).print(table)
