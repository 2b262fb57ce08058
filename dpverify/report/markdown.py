"""The Markdown report: the reviewer's view (:mod:`dpverify.report.paper`) as text.

The figures are in the HTML page (:mod:`dpverify.report.html`); the Markdown carries every
table, statement, finding and command, so it reads on its own (in a terminal, a diff, or a
code-hosting site's viewer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpverify.core.prose import claim_text, utility_text
from dpverify.report.paper import (
    Document,
    build_document,
    group_heading,
    headline,
    run_command_line,
    summary_rows,
    verdict_cell,
    verdict_words,
)
from dpverify.report.registers import RegisterRow, coverage_sentence

DISCLAIMER = ("PASS means no evidence of violation at the check's level, not a proof of "
              "privacy. On a `paper` variant (the algorithm as printed) a FAIL of a privacy "
              "check is the harness finding the defect the text carries; on a `sound` variant "
              "a privacy FAIL would be a bug. A rate check tests a stated utility theorem, "
              "not the variant's privacy: its FAIL names the claim the measurements refute "
              "(the paper's own rate at the schedule it states, or another paper's bound), "
              "and an INCONCLUSIVE says why the grid could not decide.")


def cell(text: Any) -> str:
    """Text for a Markdown table cell (pipes escaped, one line).

    Examples
    --------
    >>> cell("a | b\\nc")
    'a \\\\| b c'
    """
    return " ".join(str(text).replace("|", "\\|").split())


def scale_note(scale: str) -> str:
    """What the scale means for the numbers of the report."""
    if scale == "thorough":
        return "Run at the **thorough** scale: the trial and seed counts the suites ask for."
    return (f"Run at the **{scale}** scale: short runs (fewer trials, seeds and grid points) "
            "that check the harness and lay out the report. Verdicts of accounting and "
            "sensitivity checks do not depend on the scale; statistical numbers (lower "
            "bounds, exponents) are looser than at `--scale thorough`.")


def header_lines(rep: Mapping[str, Any]) -> list[str]:
    s = rep.get("summary") or {}
    bv = s.get("by_verdict") or {}
    pk = rep.get("packages") or {}
    return [
        f"Scale **{rep.get('scale')}**, root seed {rep.get('seed')}, created "
        f"{rep.get('created', '?')}, dpverify {pk.get('dpverify', '?')}. "
        f"{s.get('met', '?')}/{s.get('checks', '?')} checks met their expectation "
        f"(PASS {bv.get('PASS', 0)}, FAIL {bv.get('FAIL', 0)}, "
        f"INCONCLUSIVE {bv.get('INCONCLUSIVE', 0)}).",
        *([merged_line(rep), ""] if rep.get("merged_from") else [""]),
        scale_note(str(rep.get("scale"))),
        "",
        DISCLAIMER,
        "",
        regenerate_line(rep),
    ]


def merged_line(rep: Mapping[str, Any]) -> str:
    """Which runs' reports a merged report holds (``dpverify report A B``); "" if one run.

    Examples
    --------
    >>> rep = {"merged_from": [{"file": "a.json", "created": "t1", "checks": 2},
    ...                        {"file": "b.json", "created": "t2", "checks": 3}]}
    >>> print(merged_line(rep))  # doctest: +ELLIPSIS
    Merged from the reports of 2 runs: `a.json` (2 checks, created t1), `b.json` (3 ...
    """
    runs = [m for m in rep.get("merged_from") or [] if isinstance(m, Mapping)]
    if not runs:
        return ""
    parts = [f"`{m.get('file')}` ({m.get('checks', '?')} checks, created "
             f"{m.get('created') or '?'}"
             + (", other package versions" if m.get("packages") else "") + ")" for m in runs]
    return f"Merged from the reports of {len(runs)} runs: " + ", ".join(parts) + "."


def regenerate_line(rep: Mapping[str, Any]) -> str:
    """How to run the report again, and at full size when it ran at the quick scale.

    Examples
    --------
    >>> print(regenerate_line({"scale": "quick", "suites": [{"path": "a.toml"}]}))
    ... # doctest: +NORMALIZE_WHITESPACE
    Regenerate: `dpverify run a.toml --scale quick`; at full size:
    `dpverify run a.toml --scale thorough`.
    """
    line = f"Regenerate: `{run_command_line(rep)}`"
    if rep.get("scale") != "thorough":
        line += f"; at full size: `{run_command_line(dict(rep, scale='thorough'))}`"
    return line + "."


def render_markdown(rep: Mapping[str, Any], doc: Document | None = None) -> str:
    """The Markdown report of a report dictionary.

    Examples
    --------
    >>> rep = {"scale": "quick", "seed": 0, "suites": [], "summary": {}, "checks": [
    ...     {"id": "x", "kind": "account", "target": "noisy_gd:sound", "verdict": "PASS",
    ...      "expected": "PASS", "met": True, "metrics": {}}]}
    >>> md = render_markdown(rep)
    >>> md.startswith("# dpverify report"), "| x |" in md
    (True, True)
    """
    doc = doc or build_document(rep)
    lines = ["# dpverify report", "", *header_lines(rep), ""]
    rows = summary_rows(doc)
    if rows:
        lines += ["## Summary", "",
                  "| group | algorithm | variant | kind | privacy | rate | agreement |",
                  "|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r.group} | {r.algorithm} | `{r.target}` | {r.kind} | "
                         f"{verdict_cell(r.privacy)} | {cell(r.rate_words)} | "
                         f"{verdict_cell(r.agreement)} |")
        lines.append("")
    regressions = rep.get("regressions") or []
    if regressions:
        lines += ["## Regressions against the baseline", ""]
        lines += [f"- {cell(x)}" for x in regressions]
        lines.append("")
    for g in doc.groups:
        lines += [f"## {group_heading(g)}", ""]
        if g.register:
            lines += register_lines(g.register)
        for a in g.algorithms:
            lines += [f"### {a.name}", ""]
            if a.source or a.description:
                lines += [f"{a.description}" + (f" (Source: {a.source}.)" if a.source else ""),
                          ""]
            lines += ["| variant | kind | privacy claim | utility theorem | known findings |",
                      "|---|---|---|---|---|"]
            for v in a.variants:
                info = v.info or {}
                lines.append(f"| `{v.target}` | {v.kind} | {cell(claim_text(info.get('claim')))}"
                             f" | {cell(utility_text(info.get('utility')))} | "
                             f"{len(info.get('findings') or [])} |")
            lines += ["", "| check | kind | target | expected | verdict | met | key numbers |",
                      "|---|---|---|---|---|---|---|"]
            checks = [c for v in a.variants for c in v.checks]
            for c in checks:
                r = c.record
                lines.append(f"| {r.get('id')} | {r.get('kind')} | `{r.get('target')}` | "
                             f"{r.get('expected')} | {r.get('verdict')} | "
                             f"{'yes' if r.get('met') else '**no**'} | {cell(headline(r))} |")
            lines.append("")
            for c in checks:
                r = c.record
                cmds = "; ".join(f"`{x}`" for x in c.commands)
                desc = f"*{str(r['description']).rstrip('.')}.* " if r.get("description") else ""
                lines.append(f"- **{c.id}**: {verdict_words(r)} (expected {r.get('expected')}, "
                             f"{r.get('seconds', 0):.1f} s). {desc}{c.statement.text()}"
                             + (f" Reproduce: {cmds}." if cmds else ""))
            findings = a.findings
            if findings:
                lines += ["", f"#### Findings of {a.name}", ""]
                lines += [f"{i}. {f.paragraph()}" for i, f in enumerate(findings, 1)]
            lines.append("")
    lines += ["## Versions", ""]
    lines += [f"- {k}: {v}" for k, v in (rep.get("packages") or {}).items() if v]
    return "\n".join(lines) + "\n"


def register_lines(rows: list[RegisterRow]) -> list[str]:
    """A paper's claims register as a Markdown table, led by its coverage.

    Examples
    --------
    >>> r = RegisterRow({"id": "T1", "claim": "rate", "source": "Thm 1", "kind": "utility",
    ...                  "variable": "n", "checks": ["a.rate.n"]}, "verified", "1 check(s)")
    >>> register_lines([r])[4]
    '| **T1** rate | Thm 1 | utility in n | `a.rate.n` | verified: 1 check(s) |'
    """
    out = [f"**Claims register.** {coverage_sentence(rows)}", "",
           "| claim | source | kind | checks | status |", "|---|---|---|---|---|"]
    for r in rows:
        e = r.entry
        kind = str(e.get("kind", "")) + (f" in {e['variable']}" if e.get("variable") else "")
        checks = ", ".join(f"`{c}`" for c in r.checks)
        status = r.status + (f": {r.detail}" if r.detail else "")
        out.append(f"| **{e.get('id')}** {cell(e.get('claim'))} | {cell(e.get('source'))} | "
                   f"{cell(kind)} | {checks} | {cell(status)} |")
    return [*out, ""]
