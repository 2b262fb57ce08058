"""Claims registers in the report: every testable claim of a paper, and its verdict.

A paper's register (``REGISTER``, a tuple of :class:`~dpverify.core.claims.RegisterEntry`, in the
module of its ``dpverify.algorithms`` entry point) is copied into ``report.json`` when a run
touches the paper; each entry's status is read from the checks it names, whenever the
report is rendered (so merged reports judge entries on all their checks):

============== ===========================================================================
verified       every check it names ran and met its expectation, none FAIL or INCONCLUSIVE
confirmed      a ``violation`` entry whose detectors FAIL as the notes predict
refuted        a claim its checks show wrong (a FAIL met as expected: a rate the grid
               refutes, a privacy claim of a printed algorithm that does not hold)
inconclusive   a check could not decide (its reason is shown)
not testable   no check can decide it here, and the entry says why
unit test      decided by the unit tests it names (they run in CI, not in a report)
unexpected     a check did not meet its expectation
not run        a check it names is not in this report
============== ===========================================================================
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Statuses that count towards coverage: a verdict, or a stated reason.
DECIDED = ("verified", "confirmed", "refuted", "inconclusive", "not testable", "unit test")


@dataclass
class RegisterRow:
    """One entry of a register with its status, and the words that justify it."""

    entry: Mapping[str, Any]
    status: str
    detail: str = ""

    @property
    def checks(self) -> list[str]:
        return [str(c) for c in self.entry.get("checks") or []]


def collect_registers(groups: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """The registers of the named groups (entry points), as plain data for ``report.json``.

    Examples
    --------
    >>> regs = collect_registers(["baselines"])  # the baselines declare no register
    >>> regs
    {}
    """
    import importlib.metadata

    modules = {ep.name: ep.value.partition(":")[0]
               for ep in importlib.metadata.entry_points(group="dpverify.algorithms")}
    out: dict[str, list[dict[str, Any]]] = {}
    for g in dict.fromkeys(groups):
        if g not in modules:
            continue
        try:
            register = getattr(importlib.import_module(modules[g]), "REGISTER", None)
        except ImportError:
            continue
        if register:
            out[g] = [e.to_dict() for e in register]
    return out


def entry_status(entry: Mapping[str, Any], checks: Mapping[str, Mapping[str, Any]]
                 ) -> RegisterRow:
    """The status of one register entry given the report's checks by id.

    Examples
    --------
    >>> e = {"id": "T1.n", "kind": "utility", "checks": ["a.rate.n"], "untestable": ""}
    >>> entry_status(e, {"a.rate.n": {"verdict": "PASS", "met": True}}).status
    'verified'
    >>> entry_status(e, {"a.rate.n": {"verdict": "INCONCLUSIVE", "met": True,
    ...                               "message": "every point saturated"}}).detail
    'a.rate.n: every point saturated'
    >>> entry_status({**e, "checks": [], "untestable": "n = 1e7 needed"}, {}).status
    'not testable'
    """
    names = [str(c) for c in entry.get("checks") or []]
    tests = [c for c in names if c.startswith("test:")]
    ids = [c for c in names if not c.startswith("test:")]
    if not names:
        return RegisterRow(entry, "not testable", str(entry.get("untestable") or ""))
    missing = [c for c in ids if c not in checks]
    if ids and len(missing) == len(ids) and not tests:
        return RegisterRow(entry, "not run", ", ".join(missing))
    if not ids or len(missing) == len(ids):
        return RegisterRow(entry, "unit test", ", ".join(t[5:] for t in tests))
    ran = [(c, checks[c]) for c in ids if c in checks]
    unmet = [f"{c}: {r.get('verdict')} (expected {r.get('expected')})" for c, r in ran
             if not r.get("met")]
    if unmet:
        return RegisterRow(entry, "unexpected", "; ".join(unmet))
    if missing:
        return RegisterRow(entry, "not run", ", ".join(missing))
    verdicts = [str(r.get("verdict")) for _, r in ran]
    if "INCONCLUSIVE" in verdicts:
        c, r = next((c, r) for c, r in ran if r.get("verdict") == "INCONCLUSIVE")
        return RegisterRow(entry, "inconclusive", f"{c}: {r.get('message', '')}")
    if "FAIL" in verdicts:
        failed = ", ".join(c for c, r in ran if r.get("verdict") == "FAIL")
        return RegisterRow(entry, "confirmed" if entry.get("kind") == "violation" else
                           "refuted", failed)
    return RegisterRow(entry, "verified", f"{len(ran)} check(s)" +
                       (f" and {len(tests)} unit test(s)" if tests else ""))


def register_rows(entries: Sequence[Mapping[str, Any]],
                  checks: Iterable[Mapping[str, Any]]) -> list[RegisterRow]:
    """Every entry of a register with its status, in the register's order."""
    by_id = {str(c.get("id")): c for c in checks}
    return [entry_status(e, by_id) for e in entries]


def coverage(rows: Sequence[RegisterRow]) -> dict[str, Any]:
    """How many entries have a verdict or a stated reason, and the count of each status.

    Examples
    --------
    >>> rows = [RegisterRow({}, "verified"), RegisterRow({}, "not run")]
    >>> coverage(rows)["fraction"]
    0.5
    """
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    decided = sum(counts.get(s, 0) for s in DECIDED)
    return {"entries": len(rows), "decided": decided,
            "fraction": decided / len(rows) if rows else 1.0, "statuses": counts}


def coverage_sentence(rows: Sequence[RegisterRow]) -> str:
    """One line: how much of the register the report decides, and how.

    Examples
    --------
    >>> coverage_sentence([RegisterRow({}, "verified"), RegisterRow({}, "refuted")])
    '2 of 2 claims have a verdict or a stated reason (100%): verified 1, refuted 1.'
    """
    c = coverage(rows)
    parts = ", ".join(f"{s} {n}" for s, n in sorted(c["statuses"].items(),
                                                     key=lambda kv: _ORDER.get(kv[0], 99)))
    return (f"{c['decided']} of {c['entries']} claims have a verdict or a stated reason "
            f"({c['fraction']:.0%}): {parts}.")


_ORDER = {s: i for i, s in enumerate(
    ("verified", "confirmed", "refuted", "inconclusive", "unit test", "not testable",
     "unexpected", "not run"))}
