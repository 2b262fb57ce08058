"""Merging ``report.json`` files of separate runs (one per paper, CI shards) into one.

Runs are mergeable when they are one run cut in pieces: the same schema version, root
seed and scale. The merged report holds the union of their suites, algorithms and checks,
and a summary recomputed from the checks, so it reads as if one ``dpverify run`` had run
every suite.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dpverify.checks.base import jsonable, result_of
from dpverify.core.errors import InputError
from dpverify.report.writer import load_report, suite_path

# What a merge may differ in without meaning another result: when and how fast it ran.
_VOLATILE = ("seconds",)


def _key(check: Mapping[str, Any]) -> tuple[str, str]:
    # One id may appear in two suites of one run (suites are written independently), so a
    # check is its id within its suite file.
    return str(check.get("id")), suite_path(check) or ""


def _result(check: Mapping[str, Any]) -> dict[str, Any]:
    """A record as compared: its typed result in place of the metrics it was written as
    (a field written as ``null`` or left out is the same result)."""
    out = {k: v for k, v in check.items() if k not in _VOLATILE}
    out["metrics"] = jsonable(result_of(check).to_metrics())
    return out


def _first_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """The first field where two records differ, as ``field: A vs B`` (values shortened)."""
    def short(v: Any) -> str:
        s = json.dumps(v, sort_keys=True, default=str)
        return s if len(s) <= 80 else s[:77] + "..."

    for k in ("verdict", "expected", "met", "metrics", "params", "options", "evidence",
              *sorted(set(a) | set(b))):
        if a.get(k) != b.get(k):
            if isinstance(a.get(k), Mapping) and isinstance(b.get(k), Mapping):
                sub = next(s for s in sorted(set(a[k]) | set(b[k]), key=str)
                           if a[k].get(s) != b[k].get(s))
                return f"{k}.{sub}: {short(a[k].get(sub))} vs {short(b[k].get(sub))}"
            return f"{k}: {short(a.get(k))} vs {short(b.get(k))}"
    return "no difference"


def _same(field: str, reports: Sequence[tuple[str, Mapping[str, Any]]]) -> Any:
    values = {json.dumps(r.get(field), sort_keys=True): r.get(field) for _, r in reports}
    if len(values) > 1:
        per_file = ", ".join(f"{name}: {r.get(field)!r}" for name, r in reports)
        raise InputError(f"cannot merge reports with different {field.replace('_', ' ')}s "
                         f"({per_file})")
    return next(iter(values.values()))


def merge_reports(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """One report from the reports of several runs, given as ``(file name, report)`` pairs.

    Refuses (:class:`~dpverify.core.errors.InputError`, naming the files and the values) when
    the schema versions, root seeds or scales differ, when one suite file ran with two
    seeds, or when two reports hold the same check (its id in the same suite file) with
    different results; the same check with the same result (overlapping shards) is kept
    once. Checks keep the order of the files, then of each file. The summary is
    recomputed; regressions are the union of the files' (``dpverify report --baseline``
    recomputes them for the merged report); ``merged_from`` lists the files, with their
    creation times and, where they differ from the first file's, package versions.

    Examples
    --------
    >>> def rep(cid, verdict):
    ...     return {"schema_version": "1.1", "seed": 0, "scale": "quick", "packages": {},
    ...             "suites": [{"name": cid, "path": f"{cid}.toml", "checks": 1, "seed": 0}],
    ...             "checks": [{"id": cid, "verdict": verdict, "met": True, "seconds": 1.0,
    ...                         "source": f"{cid}.toml:3"}]}
    >>> m = merge_reports([("a.json", rep("a", "PASS")), ("b.json", rep("b", "FAIL"))])
    >>> [c["id"] for c in m["checks"]], m["summary"]["by_verdict"]["FAIL"]
    (['a', 'b'], 1)
    >>> clash = dict(rep("a", "FAIL"), seed=1)
    >>> try:
    ...     merge_reports([("a.json", rep("a", "PASS")), ("c.json", clash)])
    ... except InputError as e:
    ...     print(e)
    cannot merge reports with different seeds (a.json: 0, c.json: 1)
    """
    if not reports:
        raise InputError("no reports to merge")
    if len(reports) == 1:
        return dict(reports[0][1])
    version = _same("schema_version", reports)
    seed, scale = _same("seed", reports), _same("scale", reports)
    first = reports[0][1]
    records = _merged_checks(reports)
    created = [str(rep.get("created")) for _, rep in reports if rep.get("created")]
    registers = _union(reports, "registers")
    out: dict[str, Any] = {
        "schema_version": version,
        # ISO 8601 UTC timestamps sort as text: the merge is as recent as its newest run.
        "created": max(created) if created else None,
        "packages": first.get("packages"),
        "seed": seed,
        "scale": scale,
        "suites": _merged_suites(reports),
        "summary": summarize(records),
        "regressions": list(dict.fromkeys(r for _, rep in reports
                                          for r in rep.get("regressions") or [])),
        "algorithms": _union(reports, "algorithms"),
        **({"registers": registers} if registers else {}),
        "checks": records,
        "merged_from": _merged_from(reports),
    }
    # Keys only some writer puts in (a later minor version) pass through from the first
    # file that has them.
    for _, rep in reports:
        for k, v in rep.items():
            out.setdefault(k, v)
    return out


def _merged_suites(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The union of the runs' suites; one suite file run with two seeds is an error."""
    suites: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for name, rep in reports:
        for s in rep.get("suites") or []:
            key = (str(s.get("path")), str(s.get("name")))
            if key not in suites:
                suites[key] = (name, dict(s))
            elif suites[key][1].get("seed") != s.get("seed"):
                other, prev = suites[key]
                raise InputError(f"cannot merge: suite {key[0]} ran with seed "
                                 f"{prev.get('seed')!r} in {other} and {s.get('seed')!r} in "
                                 f"{name}")
    return [s for _, s in suites.values()]


def _merged_checks(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The union of the runs' checks, in order; one check with two results is an error."""
    checks: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for name, rep in reports:
        for c in rep.get("checks") or []:
            key = _key(c)
            if key not in checks:
                checks[key] = (name, dict(c))
                continue
            other, prev = checks[key]
            if _result(prev) != _result(c):
                where = f" of {key[1]}" if key[1] else ""
                raise InputError(f"cannot merge: check {key[0]!r}{where} has different "
                                 f"results in {other} and {name} "
                                 f"({_first_difference(_result(prev), _result(c))})")
    return [c for _, c in checks.values()]


def _union(reports: Sequence[tuple[str, Mapping[str, Any]]], field: str) -> dict[str, Any]:
    """The union of a table the runs hold (``algorithms``, ``registers``), first wins."""
    out: dict[str, Any] = {}
    for _, rep in reports:
        for key, value in (rep.get(field) or {}).items():
            out.setdefault(key, value)
    return out


def _merged_from(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The files merged, with their creation times and, where they differ from the first
    file's, package versions."""
    first = reports[0][1]
    out = []
    for name, rep in reports:
        entry: dict[str, Any] = {"file": name, "created": rep.get("created"),
                                 "checks": len(rep.get("checks") or [])}
        if rep.get("packages") != first.get("packages"):
            entry["packages"] = rep.get("packages")
        out.append(entry)
    return out


def summarize(checks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``summary`` block of a report, from its check records.

    Examples
    --------
    >>> summarize([{"verdict": "PASS", "met": True}, {"verdict": "FAIL", "met": False}])
    {'checks': 2, 'met': 1, 'by_verdict': {'PASS': 1, 'FAIL': 1, 'INCONCLUSIVE': 0}}
    """
    return {
        "checks": len(checks),
        "met": sum(bool(c.get("met")) for c in checks),
        "by_verdict": {v: sum(c.get("verdict") == v for c in checks)
                       for v in ("PASS", "FAIL", "INCONCLUSIVE")},
    }


def load_reports(paths: Sequence[str | Path]) -> list[tuple[str, dict[str, Any]]]:
    """Read each ``report.json`` (a file, or the folder holding one) for :func:`merge_reports`.

    Examples
    --------
    >>> try:
    ...     load_reports(["/nonexistent/a.json"])
    ... except InputError as e:
    ...     print(e)
    no report '/nonexistent/a.json'
    """
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            p = p / "report.json"
        out.append((str(p), load_report(p, what="report")))
    return out
