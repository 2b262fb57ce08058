"""``dpverify``: the command line.

Exit codes: 0 when every check met its expectation (or a single check passed), 1 when one
did not, 2 on bad input (with a message naming the bad value, and nothing written).
Subcommands that live with their capability expose ``configure_parser(parser)`` and
``run_command(args) -> int``; this module wires them in and adds the shared options.
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from dpverify.core.errors import InputError

# subcommand -> module with configure_parser / run_command (capabilities of the harness)
PLUGGED = {
    "audit": ("dpverify.cli.audit", "empirical privacy audit of a target (epsilon lower bound)"),
    "sensitivity": ("dpverify.cli.sensitivity",
                    "replay on neighbours: declared vs true sensitivity"),
    "rates": ("dpverify.cli.rates", "fit utility rate exponents against the declared theorem"),
    "agree": ("dpverify.cli.agree", "NumPy vs torch backend agreement"),
    "mia": ("dpverify.cli.mia", "membership inference against a target"),
    "check": ("dpverify.cli.check", "the conformance battery on registered algorithms"),
    "report": ("dpverify.cli.report", "render or merge report.json files as Markdown and HTML"),
}


# Subcommands that run no trials: the shared options of the others do not apply to them.
RENDER_ONLY = {"report"}


def parse_params(items: Sequence[str] | None) -> dict[str, Any]:
    """``["T=10", "loss=huber"]`` -> ``{"T": 10, "loss": "huber"}`` (values read as TOML).

    Examples
    --------
    >>> parse_params(["T=10", "eta=0.5", "loss=huber", "flag=true"])
    {'T': 10, 'eta': 0.5, 'loss': 'huber', 'flag': True}
    """
    import tomllib

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--param expects key=value, got {item!r}")
        try:
            out[key.strip()] = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            out[key.strip()] = raw
    return out


def _integer_at_least(text: str, low: int, words: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low:
        # argparse puts "argument --flag:" in front: the message names flag and value.
        raise argparse.ArgumentTypeError(f"must be {words}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type of every count option (``--trials``, ``--workers``, ``--jobs``...).

    Examples
    --------
    >>> p = argparse.ArgumentParser(exit_on_error=False)
    >>> _ = p.add_argument("--workers", type=positive_int)
    >>> p.parse_args(["--workers", "2"]).workers
    2
    >>> try:
    ...     p.parse_args(["--workers", "0"])
    ... except argparse.ArgumentError as e:
    ...     print(e)
    argument --workers: must be a positive integer, got '0'
    """
    return _integer_at_least(text, 1, "a positive integer")


def nonnegative_int(text: str) -> int:
    """argparse type of a seed, or of a count that may be 0.

    Examples
    --------
    >>> p = argparse.ArgumentParser(exit_on_error=False)
    >>> _ = p.add_argument("--seed", type=nonnegative_int)
    >>> try:
    ...     p.parse_args(["--seed", "-1"])
    ... except argparse.ArgumentError as e:
    ...     print(e)
    argument --seed: must be an integer >= 0, got '-1'
    """
    return _integer_at_least(text, 0, "an integer >= 0")


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that states every option's default: appended wherever the text does not.

    A flag's default is "off"; an option whose default is "not given" must say in its
    own words what happens then (``tests/test_cli.py`` checks every subcommand).
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or action.default is argparse.SUPPRESS
                or "default" in text.lower()):
            return text
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            return f"{text} (default: {'off' if not action.default else 'on'})"
        if action.default is None or action.default == []:
            return text
        return f"{text} (default: %(default)s)"


def add_claim_arguments(p: argparse.ArgumentParser) -> None:
    """TARGET and the claim to judge it against, for commands that test a privacy claim."""
    p.add_argument("target", help="name, name:variant, or module:function")
    p.add_argument("--epsilon", type=float, default=None,
                   help="claimed epsilon (default: a registered target's own claim)")
    p.add_argument("--delta", type=float, default=None,
                   help="claimed delta in [0, 1); 0 claims pure epsilon-DP (default: a registered "
                        "target's own claim)")


def add_common_options(p: argparse.ArgumentParser, *, suite: bool = False) -> None:
    """Options shared by the subcommands that run trials."""
    p.add_argument("--seed", type=nonnegative_int, default=0, help="root seed")
    p.add_argument("--trials", type=positive_int, default=None,
                   help="trials per check (default: each check's own count)")
    p.add_argument("--workers", type=positive_int, default=1, help="local worker processes")
    p.add_argument("--executor", choices=["local", "dask"], default="local",
                   help="where trial blocks run")
    p.add_argument("--scheduler", default=None,
                   help="dask scheduler address (default: none, a local cluster)")
    p.add_argument("--backend", default="numpy", help="numpy | torch | torch:cuda")
    p.add_argument("--scale", choices=["quick", "thorough"], default="quick",
                   help="quick: short runs; thorough: the counts a report is made with")
    p.add_argument("--json", dest="json_path", default=None, metavar="FILE",
                   help="also write the results as JSON here (default: not written)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress display (the reason for exit code 1 is still shown)")
    p.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="keep finished trial blocks here; a rerun resumes from them "
                        "(default: none kept)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help=("algorithm parameter override, applied to every check whose "
                         "algorithm has it (repeatable; default: the suites' own)")
                   if suite else "algorithm parameter override (repeatable; default: the "
                                 "algorithm's own)")


# Options holding KEY=VALUE parameter overrides of a command's TARGET.
_PARAM_FLAGS = {"param": "--param", "fixed": "--fixed", "control": "--control"}


def check_params(args: argparse.Namespace) -> None:
    """Parameter overrides of a registered TARGET, checked against it before any work.

    A name the algorithm lacks, or a value of the wrong kind (a word for a number) or out
    of the parameter's range, is an :class:`InputError` naming the flag, the parameter
    and the algorithm.

    Examples
    --------
    >>> try:
    ...     check_params(argparse.Namespace(target="noisy_gd:sound", param=["T=abc"]))
    ... except InputError as e:
    ...     print(e)
    --param T: parameter 'T' of noisy_gd takes an integer >= 1, got 'abc'
    """
    from dpverify.core.registry import is_registered_target, resolve

    target = getattr(args, "target", None)
    if not isinstance(target, str) or not is_registered_target(target):
        return  # a user's callable: its parameters are its own to judge
    t = resolve(target)
    given = {attr: parse_params(getattr(args, attr, None)) for attr in _PARAM_FLAGS}
    for attr, flag in _PARAM_FLAGS.items():
        for key, value in given[attr].items():
            try:
                t.algorithm.check_override(key, value)
            except InputError as e:
                raise InputError(f"{flag} {key}: {e}") from None
    # The rules over several parameters see the flags together, as the runs do: --param
    # and --fixed set every run, --control sets the control arm over them.
    shared = {**given["param"], **given["fixed"]}
    arms = [shared, {**shared, **given["control"]}] if given["control"] else [shared]
    for overrides in arms:
        try:
            t.algorithm.params(t.variant.name, overrides)
        except InputError as e:
            flags = ", ".join(f"{flag} {key}" for attr, flag in _PARAM_FLAGS.items()
                              for key in given[attr] if key in overrides)
            raise InputError(f"{flags}: {e}" if flags else str(e)) from None


def check_outputs(args: argparse.Namespace) -> None:
    """Every file or folder the command will write, checked before any work.

    Examples
    --------
    >>> try:
    ...     check_outputs(argparse.Namespace(json_path="/proc/x/r.json"))
    ... except InputError as e:
    ...     print(str(e).split(":")[0])
    --json '/proc/x/r.json'
    """
    from dpverify.report.io import check_writable

    files = {"json_path": "--json", "plot": "--plot"}
    folders = {"out": "--out", "checkpoint": "--checkpoint"}
    for attr, flag in files.items():
        if getattr(args, attr, None):
            check_writable(getattr(args, attr), flag)
    for attr, flag in folders.items():
        if getattr(args, attr, None):
            check_writable(getattr(args, attr), flag, folder=True)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpverify", formatter_class=DefaultsFormatter,
        description="Testing and verification harness for differentially private optimization",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run the checks of suite files and write a report",
                       formatter_class=DefaultsFormatter, conflict_handler="resolve")
    p.add_argument("suites", nargs="+", help="suite files (TOML) or folders of them")
    p.add_argument("--report-dir", default=None, metavar="DIR",
                   help="where report.json, report.md and report.html go (default: a new "
                        "folder reports/runs/<time>-<suites>, and reports/latest then "
                        "points at it; no run overwrites another's report)")
    p.add_argument("--baseline", default=None, metavar="FILE",
                   help="a report.json to compare against: a changed verdict or a number "
                        "outside its interval exits 1 (default: no comparison)")
    p.add_argument("--only", default=None, metavar="TEXT",
                   help="run only checks whose id contains TEXT (default: every check)")
    p.add_argument("--jobs", "-j", type=positive_int, default=1,
                   help="checks run at a time, each in its own process; results "
                   "are the same for any value")
    add_common_options(p, suite=True)
    # None tells the runner whether --seed was given, so it can override the suites' seeds.
    p.add_argument("--seed", type=nonnegative_int, default=None,
                   help="root seed (default: each suite's own seed, else 0)")

    p = sub.add_parser("list", help="every registered algorithm and variant with its claims",
                       formatter_class=DefaultsFormatter)
    p.add_argument("--json", dest="json_path", default=None, metavar="FILE",
                   help="also write the list as JSON here (default: not written)")

    p = sub.add_parser("account", help="epsilon of a target's ledger (PLD and RDP)",
                       formatter_class=DefaultsFormatter)
    p.add_argument("target", help="name or name:variant")
    p.add_argument("--delta", type=float, default=None, help="delta (default: the claim's)")
    add_common_options(p)

    for name, (module, help_text) in PLUGGED.items():
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name and module.startswith(e.name):
                continue  # capability not installed in this build
            # An optional dependency of one capability (torch, dask) must not take the
            # other commands down: the core installs without the extras.
            warnings.warn(f"dpverify: cannot import {module} ({e}); the {name!r} subcommand "
                          "is unavailable", stacklevel=2)
            continue
        if not (callable(getattr(mod, "configure_parser", None))
                and callable(getattr(mod, "run_command", None))):
            # A capability that offers no subcommand (or not yet) must not take every
            # other command down with it.
            warnings.warn(f"dpverify: {module} has no configure_parser/run_command; "
                          f"the {name!r} subcommand is unavailable", stacklevel=2)
            continue
        # A capability may redefine a shared option (its own help or default) and wins.
        p = sub.add_parser(name, help=help_text, conflict_handler="resolve",
                           formatter_class=DefaultsFormatter)
        if name not in RENDER_ONLY:
            add_common_options(p)
        mod.configure_parser(p)
        p.set_defaults(_plugged=mod)
    return parser


def _cmd_list(args: argparse.Namespace) -> int:
    from dpverify.core.registry import all_algorithms

    rows = []
    for algo in all_algorithms():
        p0 = dict(algo.defaults)
        for vname, var in algo.variants.items():
            p = algo.params(vname)
            try:
                claim = var.claim(p).to_dict()
            except InputError as e:  # a claim that cannot be formed is shown, not hidden
                claim = {"error": str(e)}
            rows.append({
                "target": f"{algo.name}:{vname}", "kind": var.kind, "source": algo.source,
                "claim": claim, "utility": var.utility.to_dict() if var.utility else None,
                "description": var.description,
                "findings": [f.summary for f in var.findings],
                "params": {k: v for k, v in p.items() if p0.get(k) != v or k in var.params},
            })
    if args.json_path:
        from dpverify.report.io import write_json_atomic

        write_json_atomic(args.json_path, rows)
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Registered algorithms")
    # Targets are what users copy into other commands: never fold one over two lines.
    table.add_column("target", no_wrap=True)
    for col in ("kind", "claim", "utility", "description"):
        table.add_column(col, overflow="fold")
    for r in rows:
        c = r["claim"]
        claim = (f"rho={c['rho']}" if c.get("rho") is not None
                 else f"({c.get('epsilon')}, {c.get('delta')})-DP") + f" {c.get('relation', '')}"
        u = r["utility"]
        util = (f"{u['quantity']} ~ " + " ".join(f"{k}^{v:g}" for k, v in u["exponents"].items())
                if u else "")
        table.add_row(r["target"], r["kind"], claim, util, r["description"])
    Console(width=160).print(table)
    return 0


def _cmd_account(args: argparse.Namespace) -> int:
    from dpverify.accounting.accountant import claimed_epsilon, ledger_events, unsupported_reason
    from dpverify.checks.account import account_target, exceeds_claim
    from dpverify.core.errors import check_delta

    if args.delta is not None:
        check_delta(args.delta)
    res, claim, ledger = account_target(args.target, parse_params(args.param), seed=args.seed,
                                        scale=args.scale, delta=args.delta)
    eps_claimed = claimed_epsilon(claim, res.delta)
    # An accountant that cannot compose these releases gives NaN: say why, not "nan".
    why = {acc: unsupported_reason(ledger_events(ledger, res.relation, acc), res.relation, acc)
           or "unsupported events" for acc, eps in res.by_accountant.items() if math.isnan(eps)}
    out = {"target": args.target, **res.to_dict(), "epsilon_claimed": eps_claimed,
           "claim": claim.to_dict(), "releases": len(ledger),
           "gradient_evaluations": ledger.records_touched,
           **({"not_computed": why} if why else {})}
    if args.json_path:
        from dpverify.report.io import write_json_atomic

        write_json_atomic(args.json_path, out)
    print(f"{args.target}: {len(ledger)} releases, relation {res.relation}, delta {res.delta:g}")
    for acc, eps in res.by_accountant.items():
        print(f"  epsilon ({acc.upper()}): "
              + (f"not computed: {why[acc]}" if acc in why else f"{eps:.6g}"))
    if res.rho is not None:
        print(f"  rho (zCDP): {res.rho:.6g}")
    print(f"  epsilon claimed: {eps_claimed:.6g}")
    ok = not exceeds_claim(res, claim, eps_claimed)  # the verdict of the account check
    print("  PASS: within the claim" if ok else "  FAIL: the ledger exceeds the claim")
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpverify`` command.

    Examples
    --------
    >>> main(["account", "noisy_gd:sound", "--param", "T=3", "--delta", "2"])
    dpverify: error: delta must be a number in [0, 1), got 2.0
    2
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: 2 on bad usage, 0 on --help
        return int(e.code or 0)
    try:
        check_outputs(args)
        check_params(args)
        if args.command == "run":
            from dpverify.cli.suites import run_command

            return run_command(args)
        if args.command == "list":
            return _cmd_list(args)
        if args.command == "account":
            return _cmd_account(args)
        return int(args._plugged.run_command(args))
    except InputError as e:
        print(f"dpverify: error: {e}", file=sys.stdout if argv is not None else sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dpverify: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
