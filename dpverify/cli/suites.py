"""Suite files: schema, loading with errors that name file, line and value, and running.

A suite is a TOML file::

    [suite]
    name = "smoke"
    seed = 0                      # optional root seed
    battery = ["noisy_gd"]        # optional: the conformance battery of these targets

    [[check]]
    id = "noisy_gd.sound.account"
    kind = "account"
    target = "noisy_gd:sound"     # name:variant, or module:function for a user's callable
    expected = "PASS"             # PASS | FAIL | INCONCLUSIVE
    [check.params]                # algorithm parameter overrides
    T = 10
    [check.options]               # options of the check kind
    rtol = 1e-3
    [check.thorough]              # option overrides at --scale thorough (optional), and
    trials = 100000               # expected = "..." where the larger sample decides

A relative file path in a ``file.py:function`` (the target, or an option's value) is read
from the suite file's own folder, not the working directory.

Every file is validated before any check runs, so bad input costs nothing and writes
nothing. ``battery`` generates the conformance battery's checks of the named algorithms,
variants or packages (:mod:`dpverify.checks.conformance`) ahead of the suite's own: a suite holds
only what the battery does not check.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from dpverify.checks.base import CheckKind, CheckResult, CheckSpec, RunContext, get_kind
from dpverify.checks.conformance import check_targets
from dpverify.checks.runner import run_checks, warning_summary, with_params
from dpverify.cli.app import parse_params
from dpverify.core.claims import Verdict, check_relation
from dpverify.core.errors import InputError, check_delta, check_epsilon, check_positive
from dpverify.core.prose import with_article
from dpverify.core.registry import all_algorithms, is_registered_target, load_callable, resolve
from dpverify.report.io import write_json_atomic
from dpverify.report.runs import RunOutput
from dpverify.report.writer import (
    compare_baseline,
    load_report,
    report_dict,
    summary_table,
    write_reports,
)

_CHECK_KEYS = {"id", "kind", "target", "expected", "params", "options", "thorough",
               "description"}
# Keys whose values are privacy parameters wherever they appear.
_EPSILON_KEYS = {"epsilon", "target_epsilon"}
_DELTA_KEYS = {"delta", "target_delta"}
_RHO_KEYS = {"rho", "target_rho"}


@dataclass
class Suite:
    """A loaded, validated suite file."""

    path: Path
    name: str
    checks: list[CheckSpec]
    seed: int | None = None
    description: str = ""


@dataclass
class SuiteRun:
    """The results of running suites."""

    suites: list[Suite]
    results: list[CheckResult] = field(default_factory=list)
    seed: int = 0
    scale: str = "quick"
    suite_seeds: list[int] = field(default_factory=list)  # the root seed each suite ran with
    param_overrides: dict[str, Any] = field(default_factory=dict)  # run --param
    placement: dict[str, str] = field(default_factory=dict)  # check id -> where it ran

    @property
    def all_met(self) -> bool:
        return all(r.met for r in self.results)


def _line_of(text: str, check_index: int | None, key: str | None) -> int:
    """1-based line of ``key`` inside the ``check_index``-th ``[[check]]`` block.

    A dotted key (``params.T``, ``options.trials``) is looked for under its table's
    header (``[check.params]``) first: the same name may sit in two tables.

    Examples
    --------
    >>> text = "\\n".join(["[[check]]", 'id = "a"', "[check.params]", "epsilon = 1",
    ...                   "[check.options]", "epsilon = 2"])
    >>> [_line_of(text, 0, k) for k in ("id", "params.epsilon", "options.epsilon")]
    [2, 4, 6]
    """
    lines = text.splitlines()
    start, end = 0, len(lines)
    if check_index is not None:
        heads = [i for i, ln in enumerate(lines) if re.match(r"\s*\[\[\s*check\s*\]\]", ln)]
        if check_index < len(heads):
            start = heads[check_index]
            end = heads[check_index + 1] if check_index + 1 < len(heads) else len(lines)
    if key is None:
        return start + 1
    table, _, name = key.rpartition(".")
    pat = re.compile(rf"^\s*\"?{re.escape(name)}\"?\s*=")
    if table:
        head = re.compile(rf"^\s*\[\s*check\.{re.escape(table)}\s*\]")
        section = next((i for i in range(start, end) if head.match(lines[i])), None)
        if section is not None:
            stop = next((i for i in range(section + 1, end)
                         if lines[i].lstrip().startswith("[")), end)
            found = next((i for i in range(section + 1, stop) if pat.match(lines[i])), None)
            if found is not None:
                return found + 1
    return next((i + 1 for i in range(start, end) if pat.match(lines[i])), start + 1)


def _fail(path: Path, text: str, idx: int | None, key: str | None, msg: str) -> InputError:
    return InputError(f"{path}:{_line_of(text, idx, key)}: {msg}")


def _check_privacy_values(table: dict[str, Any], where: Callable[[str], str], *,
                          option: bool = False) -> None:
    def relation(v: Any, k: str) -> Any:
        # A check's own relation option may also ask for every relation or the claim's.
        return v if option and v in ("both", "claim") else check_relation(v)

    checkers: tuple[tuple[set[str], Callable[[Any, str], Any]], ...] = (
        (_EPSILON_KEYS, check_epsilon),
        (_DELTA_KEYS, check_delta),
        (_RHO_KEYS, lambda v, k: check_positive(v, k)),
        ({"relation"}, relation),
    )
    for k, v in table.items():
        for keys, check in checkers:
            if k in keys:
                try:
                    check(v, k)
                except InputError as e:
                    raise InputError(f"{where(k)}: {e}") from None
        if isinstance(v, float) and not math.isfinite(v):
            raise InputError(f"{where(k)}: {k} must be finite, got {v!r}")


def load_suite(path: str | Path) -> Suite:
    """Load and validate one suite file.

    Errors name the file, the line and the bad value.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "s.toml"
    >>> _ = p.write_text('[[check]]\\nid = "a"\\nkind = "account"\\ntarget = "nope:sound"\\n')
    >>> try:
    ...     load_suite(p)
    ... except InputError as e:
    ...     print(str(e).split(": ", 1)[1].split(";")[0])
    unknown algorithm 'nope'
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no suite file {str(path)!r}")
    text = path.read_text(encoding="utf-8")
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: invalid TOML: {e}") from None
    head = doc.get("suite", {})
    if not isinstance(head, dict):
        raise _fail(path, text, None, "suite", "[suite] must be a table")
    unknown_head = sorted(set(head) - {"name", "seed", "description", "battery"})
    if unknown_head:
        raise _fail(path, text, None, unknown_head[0], f"unknown key {unknown_head[0]!r} in "
                    "[suite]; allowed: battery, description, name, seed")
    unknown_top = set(doc) - {"suite", "check"}
    if unknown_top:
        key = sorted(unknown_top)[0]
        raise _fail(path, text, None, key, f"unknown top-level key {key!r}")
    entries = doc.get("check", [])
    battery = _battery(head, path, text)
    if not isinstance(entries, list) or not (entries or battery):
        raise _fail(path, text, None, None, "a suite needs at least one [[check]] entry")
    seen: set[str] = {s.id for s in battery}
    checks: list[CheckSpec] = list(battery)
    for i, entry in enumerate(entries):
        if isinstance(entry, dict):
            entry = _anchored(entry, path.parent)
        checks.append(_load_check(entry, i, seen, lambda key, i=i: (
            f"{path}:{_line_of(text, i, key)}")))
    seed = head.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise _fail(path, text, None, "seed", f"seed must be an integer >= 0, got {seed!r}")
    return Suite(path, str(head.get("name", path.stem)), checks, seed,
                 str(head.get("description", "")))


# A file-path callable inside a value: "mech.py:f", and each item of "a.py:pair,random".
_FILE_CALLABLE = re.compile(r"^(?P<file>[^:,]+\.py):(?P<attr>[A-Za-z_]\w*)$")


def _anchor(value: Any, folder: Path) -> Any:
    """``value`` with each relative ``file.py:function`` read from ``folder``.

    Examples
    --------
    >>> _anchor("mech.py:f,random", Path("/suites"))
    '/suites/mech.py:f,random'
    >>> _anchor(["/abs/m.py:g", "noisy_gd:sound", 3], Path("/suites"))
    ['/abs/m.py:g', 'noisy_gd:sound', 3]
    """
    if isinstance(value, (list, tuple)):
        return type(value)(_anchor(v, folder) for v in value)
    if not isinstance(value, str):
        return value
    parts = []
    for part in value.split(","):
        m = _FILE_CALLABLE.match(part.strip())
        if m and not Path(m["file"]).is_absolute():
            part = f"{_shown(folder / m['file'])}:{m['attr']}"
        parts.append(part)
    return ",".join(parts)


def _shown(path: Path) -> str:
    # Shorter in reports and commands where the file lies under the working directory.
    full = Path(os.path.abspath(path))
    try:
        return str(full.relative_to(Path.cwd()))
    except ValueError:
        return str(full)


def _anchored(entry: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A check table whose file-path callables (its target and its options' values) are
    read relative to its suite file's folder, not the working directory."""
    out = dict(entry)
    if "target" in out:
        out["target"] = _anchor(out["target"], folder)
    for table in ("options", "thorough"):
        if isinstance(out.get(table), dict):
            out[table] = {k: _anchor(v, folder) for k, v in out[table].items()}
    return out


def _load_check(entry: Any, i: int, seen: set[str],
                where: Callable[[str | None], str]) -> CheckSpec:
    """Check #``i + 1`` of a suite, validated; ``where(key)`` is ``file:line`` of a key."""
    if not isinstance(entry, dict):
        raise InputError(f"{where(None)}: check #{i + 1} must be a table ([[check]]), "
                         f"got {entry!r}")
    for req in ("id", "kind", "target"):
        if not isinstance(entry.get(req), str) or not entry.get(req):
            raise InputError(f"{where(req)}: check #{i + 1} needs a string {req!r}")
    extra = set(entry) - _CHECK_KEYS
    if extra:
        k = sorted(extra)[0]
        raise InputError(f"{where(k)}: unknown key {k!r} in check {entry['id']!r}; "
                         f"allowed: {sorted(_CHECK_KEYS)}")
    cid = entry["id"]
    if cid in seen:
        raise InputError(f"{where('id')}: duplicate check id {cid!r}")
    seen.add(cid)
    kind = get_kind(entry["kind"], where("kind"))
    try:
        expected = Verdict.parse(entry.get("expected", "PASS"))
    except InputError as e:
        raise InputError(f"{where('expected')}: {e}") from None
    params = entry.get("params", {})
    options = entry.get("options", {})
    thorough = entry.get("thorough", {})
    expected_thorough = None
    if isinstance(thorough, dict) and "expected" in thorough:
        thorough = dict(thorough)
        try:
            expected_thorough = Verdict.parse(thorough.pop("expected"))
        except InputError as e:
            raise InputError(f"{where('thorough')}: expected: {e}") from None
    for name, tbl in (("params", params), ("options", options), ("thorough", thorough)):
        if not isinstance(tbl, dict):
            raise InputError(f"{where(name)}: {name} must be a table")
    _check_privacy_values(params, lambda k: where(f"params.{k}"))
    _check_privacy_values(options, lambda k: where(f"options.{k}"), option=True)
    # options at --scale thorough
    _check_privacy_values(thorough, lambda k: where(f"thorough.{k}"), option=True)
    parsed = _check_options(kind, options, thorough, where)
    target = entry["target"]
    _check_target(target, params, where)
    _check_arms(kind, (target, params), parsed, where)
    description = entry.get("description", "")
    if not isinstance(description, str):
        raise InputError(f"{where('description')}: description of check {cid!r} must be "
                         f"a string, got {description!r}")
    # Where each value was written: an error found only when the check runs points there.
    lines = {f"{name}.{k}": where(f"{name}.{k}")
             for name, tbl in (("params", params), ("options", options), ("thorough", thorough))
             for k in tbl}
    return CheckSpec(cid, entry["kind"], target, expected, dict(params), dict(options),
                     source=where("id"), description=description, thorough=dict(thorough),
                     expected_thorough=expected_thorough, lines=lines)


def _check_target(target: str, params: dict[str, Any],
                  where: Callable[[str | None], str]) -> None:
    """A registered target and its parameters at both scales (the algorithm's thorough
    settings meet the check's parameters there), or a user's ``module:function`` that
    imports."""
    if is_registered_target(target) or ":" not in target:
        scale = "quick"
        try:
            t = resolve(target)
            for scale in ("quick", "thorough"):
                t.algorithm.params(t.variant.name, params, scale)
        except InputError as e:
            # Point at the offending parameter's own line, not the first parameter's.
            if "unknown algorithm" in str(e) or "variant" in str(e):
                raise InputError(f"{where('target')}: {e}") from None
            spec = CheckSpec("", "", target, params=params, source=where("params"),
                             lines={f"params.{k}": where(f"params.{k}") for k in params})
            raise InputError(f"{spec.locate(str(e))}: {_at_scale(scale)}{e}") from None
        return
    # Not a registered name, so a user's module:function. Import it now: a typo in an
    # algorithm's name must fail here, before anything runs or is written.
    try:
        load_callable(target)
    except InputError as e:
        name = target.partition(":")[0]
        known = sorted(a.name for a in all_algorithms())
        raise InputError(f"{where('target')}: unknown algorithm {name!r}; registered: "
                         f"{known}; nor is {target!r} a module:function ({e})") from None


def _battery(head: dict[str, Any], path: Path, text: str) -> list[CheckSpec]:
    """The battery checks a ``[suite]`` table asks for (``battery = [targets]``)."""
    names = head.get("battery")
    if names is None:
        return []
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _fail(path, text, None, "battery", f"battery must be a list of targets, got "
                    f"{names!r}")

    try:
        return check_targets(names)
    except InputError as e:
        raise _fail(path, text, None, "battery", str(e)) from None


def _check_options(kind: CheckKind, options: dict[str, Any], thorough: dict[str, Any],
                   where: Callable[[str | None], str]) -> list[tuple[Any, set[str]]]:
    """Parse a check's options, at both scales, against its kind's schema; returns each
    scale's parsed options with the keys its thorough table overrides.

    An unknown key, a wrong type or a broken rule is an error naming the file, the line of
    the offending key and the known keys: found here, before any check runs.
    """
    known = {f.name for f in dataclasses.fields(kind.Options)}
    for name, table in (("options", options), ("thorough", thorough)):
        for key in table:
            if key not in known:
                raise InputError(f"{where(f'{name}.{key}')}: unknown option {key!r} for "
                                 f"{with_article(kind.name)} check; known: {sorted(known)}")
    parsed = []
    for table in (options, {**options, **thorough}):
        try:
            parsed.append((kind.options(table), set(thorough) if table is not options
                           else set()))
        except InputError as e:
            key = next((k for k in table if repr(k) in str(e)), None)
            at = None if key is None else (f"thorough.{key}" if key in thorough
                                           and table is not options else f"options.{key}")
            raise InputError(f"{where(at or 'kind')}: {e}") from None
    return parsed


def _check_arms(kind: CheckKind, own: tuple[str, dict[str, Any]],
                parsed: list[tuple[Any, set[str]]],
                where: Callable[[str | None], str]) -> None:
    """Every other run the check sets up (a baseline, a grid of values: ``kind.arms``),
    at both scales, resolved against its algorithm's ranges and rules at its scale."""
    for (opts, overridden), scale in zip(parsed, ("quick", "thorough"), strict=True):
        try:  # a grid the check cannot set up is the check's own error
            refused = kind.refused_arm(*own, opts, scale)
        except InputError as e:
            raise InputError(f"{where(None)}: {_at_scale(scale)}{own[0]}: {e}") from None
        if refused is not None:
            target, _, key, e = refused
            option = key.partition(".")[2]
            at = f"thorough.{option}" if option in overridden else key
            raise InputError(f"{where(at)}: {_at_scale(scale)}{target}: {e}")


def _at_scale(scale: str) -> str:
    """How an error found only at thorough scale says so (quick: nothing)."""
    return "" if scale == "quick" else f"at scale {scale}: "


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Suite files named directly or found (``*.toml``, recursively) in folders.

    A file named twice (directly, through another spelling of its path, or inside a
    folder also given) is kept once, where it first appears.
    """
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found.extend(sorted(p.rglob("*.toml")))
        elif p.exists():
            found.append(p)
        else:
            raise InputError(f"no suite file or folder {str(p)!r}")
    if not found:
        raise InputError(f"no suite files found in {[str(p) for p in paths]}")
    unique = {f.resolve(): f for f in reversed(found)}  # the first spelling wins
    return [f for f in found if unique[f.resolve()] is f]


def scaled(spec: CheckSpec, scale: str) -> CheckSpec:
    """The spec with its ``[check.thorough]`` overrides (options, and an ``expected`` that
    differs there) applied at thorough scale; every other field (description, source...)
    is kept.

    Examples
    --------
    >>> s = CheckSpec("a", "account", "noisy_gd:sound", options={"rtol": 0.1},
    ...               thorough={"rtol": 0.01}, description="why",
    ...               expected=Verdict.INCONCLUSIVE, expected_thorough=Verdict.FAIL)
    >>> t = scaled(s, "thorough")
    >>> t.options, t.description, t.expected.value, scaled(s, "quick").expected.value
    ({'rtol': 0.01}, 'why', 'FAIL', 'INCONCLUSIVE')
    """
    expected = (spec.expected_thorough if scale == "thorough" and spec.expected_thorough
                else spec.expected)
    return dataclasses.replace(spec, options=spec.options_at(scale), thorough={},
                               expected=expected, expected_thorough=None)


def run_suites(
    suites: Sequence[Suite],
    ctx: RunContext,
    *,
    only: str | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    jobs: int = 1,
    placed: dict[str, str] | None = None,
) -> SuiteRun:
    """Run every check of ``suites`` (already validated) and collect the results.

    ``jobs`` checks run at a time in worker processes, or whole checks on a Dask cluster
    when ``ctx.executor`` is ``"dask"`` (see :mod:`dpverify.checks.runner`); the results, and
    their order, are the same for every ``jobs`` and executor.
    """
    run = SuiteRun(list(suites), seed=ctx.seed, scale=ctx.scale)
    todo = []
    for suite in suites:
        sctx = ctx
        if suite.seed is not None and ctx.extras.get("seed_from_cli") is not True:
            sctx = RunContext(**{**ctx.__dict__, "seed": suite.seed})
        run.suite_seeds.append(sctx.seed)
        todo += [(scaled(spec, ctx.scale), sctx) for spec in suite.checks
                 if not only or only in spec.id]
    # The caller's dict is filled as checks finish (its on_result may show where each ran).
    run.placement = run.placement if placed is None else placed
    run.results.extend(run_checks(todo, jobs=jobs, on_result=on_result,
                                  placed=run.placement))
    return run


def check_only(only: str | None, suites: Sequence[Suite], shown: int = 10) -> None:
    """Refuse an ``--only`` text that no check id contains, listing some of the ids.

    Examples
    --------
    >>> s = Suite(Path("s.toml"), "s", [CheckSpec(i, "account", "t") for i in ("a.x", "b.x")])
    >>> check_only("x", [s])
    >>> try:
    ...     check_only("y", [s])
    ... except InputError as e:
    ...     print(e)
    --only 'y' matches no check id; the ids: a.x, b.x
    """
    ids = [spec.id for s in suites for spec in s.checks]
    if only is None or any(only in i for i in ids):
        return
    more = f", ... ({len(ids) - shown} more)" if len(ids) > shown else ""
    raise InputError(f"--only {only!r} matches no check id; the ids: "
                     f"{', '.join(ids[:shown])}{more}")


def run_command(args: Any) -> int:
    """``dpverify run``: validate all suites, run them, write the reports, show a summary."""
    from rich.console import Console


    suites = [load_suite(p) for p in discover(args.suites)]
    check_only(args.only, suites)
    # Found now rather than after every check has run and the results have nowhere to go.
    output = RunOutput.check(args.report_dir, [Path(a).stem for a in args.suites])
    overrides = _cli_params(args)
    if overrides:
        suites = [dataclasses.replace(s, checks=with_params(s.checks, overrides))
                  for s in suites]
    baseline = None
    if args.baseline:
        baseline = load_report(args.baseline)
    # --seed given on the command line overrides the suites' own seeds; otherwise a suite's
    # seed (or 0) is its root seed. The report records the seed each suite ran with.
    seed_from_cli = args.seed is not None
    ctx = RunContext.from_args(args, extras={"seed_from_cli": seed_from_cli})
    total = sum(len(s.checks) for s in suites)
    console = Console(stderr=True, quiet=args.quiet)
    done = 0

    placement: dict[str, str] = {}
    on_dask = ctx.executor == "dask"

    def show(res: CheckResult) -> None:
        nonlocal done
        done += 1
        mark = "ok " if res.met else "!! "
        where = f" on {placement[res.spec.id]}" if on_dask and res.spec.id in placement else ""
        console.print(f"[{done}/{total}] {mark}{res.spec.id}: {res.outcome.verdict.value} "
                      f"(expected {res.spec.expected.value}, {res.seconds:.1f}s){where}",
                      highlight=False)

    console.print(f"dpverify: {total} checks from {len(suites)} suite(s), seed {ctx.seed}, "
                  f"scale {ctx.scale}" + (f", on the Dask cluster {ctx.scheduler or '(local)'}"
                                          if on_dask else ""), highlight=False)
    run = run_suites(suites, ctx, only=args.only, on_result=show,
                     jobs=getattr(args, "jobs", 1), placed=placement)
    run.param_overrides = overrides
    regressions = compare_baseline(run, baseline) if baseline is not None else []
    paths = write_reports(run, output.folder(), regressions=regressions)
    latest = output.publish()
    if args.json_path:
        write_json_atomic(args.json_path, report_dict(run, regressions))
    ok = run.all_met and not regressions
    out = Console(width=140, quiet=args.quiet and ok)  # --quiet never hides why it is 1
    if not args.quiet:
        out.print(summary_table(run))
    for r in run.results:
        if not r.met:
            out.print(f"not as expected: {r.spec.id}: {r.outcome.verdict.value}, expected "
                      f"{r.spec.expected.value}: {r.outcome.message}", highlight=False)
    if on_dask and not args.quiet:
        out.print(spread(run), highlight=False)
    for r in regressions:
        out.print(f"regression: {r}", highlight=False)
    warned = warning_summary(run.results)
    if warned and not args.quiet:
        out.print(warned, highlight=False)
    met = sum(r.met for r in run.results)
    out.print(f"{met}/{len(run.results)} checks met their expectation"
              + (f"; {len(regressions)} regression(s) against {args.baseline}"
                 if regressions else ""), highlight=False)
    html = next((p for p in paths if p.suffix == ".html"), paths[0])
    out.print(f"report: {html}" + (f" (also {latest / html.name})" if latest else ""),
              highlight=False, soft_wrap=True)
    return 0 if ok else 1


def _cli_params(args: Any) -> dict[str, Any]:
    return parse_params(getattr(args, "param", None))


def spread(run: SuiteRun) -> str:
    """How the checks spread over the places they ran: count and seconds of each.

    Examples
    --------
    >>> from dpverify.checks.base import CheckResult, Outcome
    >>> from dpverify.core.claims import Verdict
    >>> r = SuiteRun([], [CheckResult(CheckSpec(i, "account", "t"), Outcome(Verdict.PASS), 2.0)
    ...                   for i in "abc"], placement={"a": "w1", "b": "w2", "c": "w1"})
    >>> spread(r)
    'checks per worker: w1 2 (4.0 s), w2 1 (2.0 s)'
    """
    per: dict[str, list[float]] = {}
    for r in run.results:
        per.setdefault(run.placement.get(r.spec.id, "?"), []).append(r.seconds)
    return "checks per worker: " + ", ".join(f"{w} {len(v)} ({sum(v):.1f} s)"
                                             for w, v in sorted(per.items()))
