"""The ``report.json`` schema in words, generated from the typed results of the check kinds.

``docs/report-schema.md`` is :func:`schema_markdown`'s output; regenerate it after a
change to a kind's result with::

    python -m dpverify.report.schema docs/report-schema.md

(a test fails while the committed page is stale).
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from pathlib import Path

from dpverify.checks.base import Result, available_check_kinds, get_kind
from dpverify.report.io import write_text_atomic
from dpverify.report.writer import READ_MAJORS, SCHEMA_VERSION

#: Where the page lives in the repository, and the command that writes it.
DOC_PATH = "docs/report-schema.md"
REGENERATE = f"python -m dpverify.report.schema {DOC_PATH}"

_TOP = (
    ("schema_version", "string", f"`{SCHEMA_VERSION}`: major.minor; a reader refuses another "
                                 "major version"),
    ("created", "string", "when the run ended (ISO 8601, UTC)"),
    ("packages", "table", "versions of Python, dpverify and the libraries results depend on"),
    ("seed", "integer", "the root seed"),
    ("scale", "string", "`quick` or `thorough`"),
    ("suites", "list", "per suite file: `name`, `path`, `checks`, `seed`"),
    ("summary", "table", "`checks`, `met`, and `by_verdict` (PASS, FAIL, INCONCLUSIVE)"),
    ("regressions", "list", "lines of the comparison with a baseline (`--baseline`)"),
    ("param_overrides", "table", "`--param` values, when given"),
    ("algorithms", "table", "per target: what the registry knows of it (group, source, "
                            "claims, utility theorem, findings); null for `module:function`"),
    ("registers", "table", "per paper the run touches: its claims register, when it has one"),
    ("checks", "list", "one record per check (below)"),
    ("merged_from", "list", "the files a merged report was made from (`dpverify report A B`)"),
)

_RECORD = (
    ("id", "string", "the check's id in its suite"),
    ("kind", "string", "the check kind (a section below)"),
    ("target", "string", "`algorithm:variant`, or a `module:function`"),
    ("expected", "string", "the expected verdict"),
    ("verdict", "string", "PASS, FAIL or INCONCLUSIVE"),
    ("met", "boolean", "verdict == expected"),
    ("metrics", "table", "the kind's typed result: its fields that are not null"),
    ("evidence", "table", "what the verdict rests on (tests, witnesses, per-point data)"),
    ("message", "string", "the verdict in a sentence"),
    ("params", "table", "the algorithm's parameters"),
    ("options", "table", "the check's options, as written in the suite"),
    ("seconds", "number", "wall-clock time of the check"),
    ("source", "string", "the suite file and line"),
    ("claim", "table", "the privacy claim at the check's parameters"),
    ("description", "string", "the suite entry's own words, when it has them"),
    ("reason", "string", "why the expectation differs from the derived one, when it does"),
)


def _table(rows: typing.Iterable[tuple[str, str, str]]) -> list[str]:
    out = ["| field | type | meaning |", "|---|---|---|"]
    out += [f"| `{name}` | {tp} | {text} |" for name, tp, text in rows]
    return out


_JSON_TYPES = {float: "number", int: "integer", str: "string", bool: "boolean",
               list: "list", dict: "table"}


def _type_words(tp: typing.Any) -> str:
    """A field's JSON type, without its ``None`` (every result field may be null)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
    return " or ".join(_JSON_TYPES.get(typing.get_origin(a) or a, str(a)) for a in args)


def result_rows(cls: type[Result]) -> list[tuple[str, str, str]]:
    """(``report.json`` name, type, meaning) of every field of a result class.

    Examples
    --------
    >>> from dpverify.checks.account import AccountMetrics
    >>> {name: (tp, text) for name, tp, text in result_rows(AccountMetrics)}["delta"]
    ('number', 'the δ the ledger is accounted at')
    """
    hints = typing.get_type_hints(cls)
    return [(key, _type_words(hints[f.name]), f.metadata.get("doc", ""))
            for key, f in cls.schema_fields().items()]


def _kind_section(name: str) -> list[str]:
    cls = get_kind(name).Result
    doc = " ".join((cls.__doc__ or "").split())
    base = {f.name for f in dataclasses.fields(Result)}
    rows = [r for r in result_rows(cls) if r[0] not in base]
    return [f"### `{name}`: `{cls.__name__}`", "", doc, "", *_table(rows), ""]


def schema_markdown() -> str:
    """The page ``docs/report-schema.md``: the report's top level, a check record, the
    fields every result has, and each kind's result.

    Examples
    --------
    >>> page = schema_markdown()
    >>> "### `audit`: `AuditMetrics`" in page and "`tpr_at_fpr_0.01`" in page
    True
    """
    common = result_rows(Result)
    lines = [
        f"# `report.json`, schema {SCHEMA_VERSION}",
        "",
        f"<!-- Generated from the result classes by `{REGENERATE}`; do not edit. -->",
        "",
        "`dpverify run` writes `report.json` (and `report.md`, `report.html` from it);",
        "`dpverify report FILE` renders a saved one again. This dpverify reads schema "
        + " and ".join(f"{m}.x" for m in READ_MAJORS) + " and refuses another major version",
        "(exit 2, naming the file, its version and the versions it reads).",
        "",
        "## Top level",
        "",
        *_table(_TOP),
        "",
        "## A check record",
        "",
        *_table(_RECORD),
        "",
        "## `metrics`: the typed result of each kind",
        "",
        "Each check kind declares its result as a frozen dataclass (`CheckKind.Result`,",
        "a subclass of `dpverify.checks.base.Result`). `metrics` holds its fields that",
        "are not null, under the names below; a field left out was not measured",
        "(schema 1.x wrote some of them as `null`: the same result). Infinite and",
        "undefined numbers are written as the strings `\"inf\"`, `\"-inf\"`, `\"nan\"`.",
        "A kind's run cannot write a field its result does not declare. A record of a",
        "kind this installation lacks, or a field a 1.x report holds and the result no",
        "longer declares, is kept as written and shown, not interpreted.",
        "",
        "Every result has:",
        "",
        *_table(common),
        "",
    ]
    for name in available_check_kinds():
        lines += _kind_section(name)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the page to the path given (default :data:`DOC_PATH`)."""
    args = sys.argv[1:] if argv is None else argv
    write_text_atomic(Path(args[0] if args else DOC_PATH), schema_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
