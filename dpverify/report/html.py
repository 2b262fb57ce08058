"""The HTML report: one self-contained page (inline CSS, figures inline as SVG or base64
PNG, no script, no external asset) with the reviewer's view of a run.

Layout: a header (scale, seed, how to regenerate), a table of contents, the summary table
across papers, regressions against a baseline, then one section per paper (the three
epsilons of its checks in one figure; per algorithm its variants' claims, its checks'
table, each check's statement, commands, figures and raw evidence, and its findings), and
the package versions. Tables carry the classes ``summary``, ``variants``, ``checks`` and
``versions``; every figure is a ``<figure class="plot" id="plot-...">`` holding one
``<svg>`` or ``<img>``.
"""

from __future__ import annotations

import html
import json
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from dpverify.core.errors import InputError
from dpverify.core.prose import claim_text, utility_text
from dpverify.report import plots as _plots
from dpverify.report.markdown import DISCLAIMER, merged_line, regenerate_line, scale_note
from dpverify.report.paper import (
    CheckView,
    Document,
    GroupView,
    build_document,
    group_heading,
    headline,
    summary_rows,
    verdict_words,
)
from dpverify.report.registers import coverage_sentence

#: Longest raw evidence shown per check, in characters (the JSON report has all of it).
EVIDENCE_CHARS = 6000

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d1d1f;
 margin:0 auto;max-width:1180px;padding:0 24px 48px}
h1{margin:24px 0 8px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:40px}
h3{margin-top:28px}h4{margin:18px 0 4px}
code{background:#f3f3f5;border-radius:3px;padding:1px 4px;font-size:12.5px;
 word-break:break-all}
table{border-collapse:collapse;margin:8px 0 14px;font-size:13px;width:100%}
th,td{border:1px solid #d6d6da;padding:4px 7px;text-align:left;vertical-align:top}
th{background:#f5f5f7}
.v{font-weight:600;padding:1px 6px;border-radius:3px;white-space:nowrap}
.v-PASS{background:#e3f4e6;color:#17622a}.v-FAIL{background:#fbe4e2;color:#9b1c13}
.v-INCONCLUSIVE{background:#fff3cd;color:#7a5b00}
.unmet{background:#9b1c13;color:#fff;font-weight:700;padding:1px 6px;border-radius:3px}
.scale{padding:8px 12px;border-left:4px solid #7a5b00;background:#fffaf0}
.scale-thorough{border-left-color:#17622a;background:#f3fbf4}
.check{border-left:3px solid #e3e3e8;padding:2px 0 2px 12px;margin:14px 0}
.cmd{margin:4px 0}
figure.plot{margin:12px 0;text-align:center}figure.plot svg,figure.plot img{max-width:100%;
 height:auto}
figure.plot svg text{font-family:"DejaVu Sans","Bitstream Vera Sans",Verdana,Arial,
 sans-serif}
figcaption{font-size:12.5px;color:#555;max-width:900px;margin:4px auto;text-align:left}
details pre{max-height:320px;overflow:auto;background:#fafafa;border:1px solid #eee;
 padding:8px;font-size:11.5px}
nav ul{font-size:13px;margin:2px 0}nav details ul{columns:2}nav li{break-inside:avoid}
nav summary{cursor:pointer}nav .v{font-size:11px;padding:0 4px}.note{color:#7a5b00}
.desc{font-style:italic;color:#333;margin:2px 0}.vnote{font-weight:400;font-size:13px}
ol.findings li{margin-bottom:8px}
.register summary{cursor:pointer;margin:6px 0}.status{font-size:12.5px}
.status-verified,.status-confirmed{color:#17622a}.status-refuted,.status-unexpected{color:#9b1c13}
.status-inconclusive,.status-not-run{color:#7a5b00}
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _with_code(text: str) -> str:
    """Escape ``text`` and turn its Markdown code spans into ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", _e(text))


def anchor(prefix: str, name: str) -> str:
    """An HTML id from a name.

    Examples
    --------
    >>> anchor("c", "dp_svrg.paper.account")
    'c-dp_svrg-paper-account'
    """
    return f"{prefix}-" + re.sub(r"[^A-Za-z0-9_]+", "-", str(name)).strip("-")


def _verdict(v: Any) -> str:
    return f'<span class="v v-{_e(v)}">{_e(v)}</span>'


def _cell(v: tuple[str, int, int] | None) -> str:
    if v is None:
        return "—"
    cls = "" if v[1] == v[2] else ' class="unmet"'
    return f"{_verdict(v[0])} <span{cls}>{v[1]}/{v[2]} as expected</span>"


def _words(v: tuple[str, int, int] | None, words: str) -> str:
    """A summary cell in words (the rate column), badged with its worst verdict."""
    if v is None:
        return "—"
    cls = "" if v[1] == v[2] else ' class="unmet"'
    text, _, count = words.rpartition(" (")
    text = text.removeprefix(f"{v[0]}: ")
    text = "" if re.fullmatch(rf"\d+ {v[0]}", text) else text  # all passed: the badge says it
    return f"{_verdict(v[0])} {_e(text)} <span{cls}>({_e(count)}</span>"


def _figure(p: _plots.Plot) -> str:
    if p.format == "svg":
        body = p.data
    else:
        body = f'<img alt="{_e(p.title)}" src="data:image/png;base64,{p.data}">'
    return (f'<figure class="plot" id="{_e(p.id)}">{body}'
            f"<figcaption><b>{_e(p.title)}.</b> {_e(p.caption)}</figcaption></figure>")


def _safe(make: Callable[[], Any], what: str) -> tuple[list[_plots.Plot], str]:
    """Run a plot maker; a failing figure becomes a note, never a failed report."""
    try:
        out = make()
    except Exception as e:  # a figure must not sink a report whose numbers are fine
        warnings.warn(f"dpverify report: {what} failed: {type(e).__name__}: {e}", stacklevel=2)
        return [], (f'<p class="note">Figure of {_e(what)} not drawn: '
                    f"{_e(type(e).__name__)}: {_e(e)}</p>")
    if out is None:
        return [], ""
    return (out if isinstance(out, list) else [out]), ""


def _group_epsilons(g: GroupView, fmt_: str) -> str:
    algo_of = {c.id: a.name for a in g.algorithms for v in a.variants for c in v.checks}
    rows = _plots.epsilon_rows([c.record for c in g.checks], algo_of)
    if not rows:
        return ""
    ps, note = _safe(lambda: _plots.epsilon_plot(
        rows, pid=_plots.plot_id("eps", g.key), title=f"{g.key}: the three epsilons",
        fmt_=fmt_), f"the epsilons of {g.key}")
    return note + "".join(_figure(p) for p in ps)


#: Longest list of plain values shown whole in a check's numbers; longer ones are cut.
LIST_ITEMS = 24


def _shown(obj: Any) -> Any:
    """``obj`` for reading: floats to 6 significant digits, long lists of plain values cut
    to their ends (report.json keeps every value)."""
    if isinstance(obj, float):
        return float(f"{obj:.6g}")
    if isinstance(obj, Mapping):
        return {k: _shown(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        items = [_shown(v) for v in obj]
        plain = all(not isinstance(v, (Mapping, list, tuple)) for v in items)
        if plain and len(items) > LIST_ITEMS:
            items = [*items[:10], f"... {len(items) - 12} more in report.json ...",
                     *items[-2:]]
        return items
    return obj


def evidence_text(obj: Any, width: int = 96) -> str:
    """A check's numbers as JSON for reading: a value that fits in ``width`` characters
    on one line, anything longer opened up one level at a time.

    Examples
    --------
    >>> print(evidence_text({"means": [1.5, 2.123456789], "fit": {"p": -1}}, width=30))
    {
     "means": [1.5, 2.12346],
     "fit": {"p": -1}
    }
    >>> evidence_text({"x": list(range(30))})
    '{"x": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "... 18 more in report.json ...", 28, 29]}'
    """
    return _dump(_shown(obj), 0, width)


def _dump(obj: Any, depth: int, width: int) -> str:
    flat = json.dumps(obj)
    if len(flat) + depth <= width or not isinstance(obj, (Mapping, list)) or not obj:
        return flat
    pad = " " * (depth + 1)
    if isinstance(obj, Mapping):
        items = [f"{pad}{json.dumps(str(k))}: {_dump(v, depth + 1, width)}"
                 for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"
    items = [pad + _dump(v, depth + 1, width) for v in obj]
    return "[\n" + ",\n".join(items) + "\n" + " " * depth + "]"


def _note(r: Mapping[str, Any]) -> str:
    """What a verdict means, beside its badge: whose claim a FAIL refutes, why an
    INCONCLUSIVE could not decide."""
    words = verdict_words(r)
    extra = words.partition(": ")[2]
    return f' <span class="vnote">{_e(extra)}</span>' if extra else ""


def _check_html(c: CheckView, fmt_: str | None) -> str:
    r = c.record
    met = "" if r.get("met") else ' <span class="unmet">not as expected</span>'
    out = [f'<div class="check" id="{anchor("c", c.id)}">',
           f"<h4>{_e(c.id)} {_verdict(r.get('verdict'))}{_note(r)}{met}</h4>",
           *([f'<p class="desc">{_e(r["description"])}</p>'] if r.get("description") else []),
           f"<p>Expected {_e(r.get('expected'))}; {float(r.get('seconds') or 0):.1f} s. "
           f"{_e(c.statement.text())}</p>"]
    for cmd in c.commands:
        out.append(f'<p class="cmd">Reproduce: <code>{_e(cmd)}</code></p>')
    if fmt_ is not None:
        ps, note = _safe(lambda: _plots.check_plots(r, fmt_), f"check {c.id}")
        out.append(note + "".join(_figure(p) for p in ps))
    raw = evidence_text({"message": r.get("message"), "metrics": r.get("metrics"),
                         "evidence": r.get("evidence"), "params": r.get("params"),
                         "options": r.get("options")})
    if len(raw) > EVIDENCE_CHARS:
        raw = raw[:EVIDENCE_CHARS] + f"\n... ({len(raw) - EVIDENCE_CHARS} more characters " \
                                     "in report.json)"
    out.append("<details><summary>Numbers and evidence</summary>"
               f"<pre>{html.escape(raw, quote=False)}</pre>"
               "</details></div>")
    return "\n".join(out)


def _register_html(g: GroupView, ids: set[str]) -> str:
    """The paper's claims register: each claim, where it is stated, its checks and status."""
    rows = []
    for r in g.register:
        e = r.entry
        kind = str(e.get("kind", "")) + (f" in {e['variable']}" if e.get("variable") else "")
        links = ", ".join(f'<a href="#{anchor("c", c)}">{_e(c)}</a>' if c in ids
                          else f"<code>{_e(c)}</code>" for c in r.checks)
        rows.append(f'<tr><td><b>{_e(e.get("id"))}</b> {_e(e.get("claim"))}</td>'
                    f"<td>{_e(e.get('source'))}</td><td>{_e(kind)}</td><td>{links}</td>"
                    f'<td class="status status-{_e(r.status.replace(" ", "-"))}">'
                    f"{_e(r.status)}{': ' + _e(r.detail) if r.detail else ''}</td></tr>")
    return (f'<details open class="register"><summary><b>Claims register.</b> '
            f"{_e(coverage_sentence(g.register))}</summary>"
            '<table class="register"><thead><tr><th>claim</th><th>source</th><th>kind</th>'
            "<th>checks</th><th>status</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table></details>")


def _contents(doc: Document) -> str:
    """The table of contents: each group, and in it a link to every check (folded per
    group, with its verdict), so any check is two clicks away."""
    out = ['<nav id="contents"><h2>Contents</h2><ul><li><a href="#summary">Summary</a></li>']
    for g in doc.groups:
        items = "".join(f'<li><a href="#{anchor("c", c.id)}">{_e(c.id)}</a> '
                        f"{_verdict(c.record.get('verdict'))}</li>" for c in g.checks)
        out.append(f'<li><a href="#{anchor("g", g.key)}">{_e(group_heading(g, 90))}</a>'
                   f"<details><summary>{len(g.checks)} checks</summary><ul>{items}</ul>"
                   "</details></li>")
    out.append('<li><a href="#versions">Versions</a></li></ul></nav>')
    return "".join(out)


def _header_html(rep: Mapping[str, Any], missing: str | None, plot_format: str) -> list[str]:
    """The page's head and its header: scale, seed, counts, how to regenerate it."""
    s = rep.get("summary") or {}
    bv = s.get("by_verdict") or {}
    pk = rep.get("packages") or {}
    scale = str(rep.get("scale", "quick"))
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>dpverify report ({_e(scale)})</title><style>{_CSS}</style></head><body>",
        "<header><h1>dpverify report</h1>",
        f"<p>Scale <b>{_e(scale)}</b>, root seed {_e(rep.get('seed'))}, created "
        f"{_e(rep.get('created', '?'))}, dpverify {_e(pk.get('dpverify', '?'))}. "
        f"{_e(s.get('met', '?'))}/{_e(s.get('checks', '?'))} checks met their expectation "
        f"(PASS {_e(bv.get('PASS', 0))}, FAIL {_e(bv.get('FAIL', 0))}, INCONCLUSIVE "
        f"{_e(bv.get('INCONCLUSIVE', 0))}).</p>",
        *([f"<p>{_with_code(merged_line(rep))}</p>"] if rep.get("merged_from") else []),
        f'<p class="scale scale-{_e(scale)}">{_with_code(scale_note(scale).replace("**", ""))}'
        "</p>",
        f"<p>{_with_code(DISCLAIMER)}</p>",
        f"<p>{_with_code(regenerate_line(rep))}</p>",
    ]
    if missing and plot_format != "none":
        parts.append(f'<p class="note" id="no-plots">Figures are not drawn: {_e(missing)}.</p>')
    parts.append("</header>")
    return parts


def _summary_html(doc: Document, rep: Mapping[str, Any]) -> list[str]:
    """The summary table (a row per group, algorithm and variant) and the regressions."""
    parts = ['<section id="summary"><h2>Summary</h2>', '<table class="summary"><thead><tr>'
             "<th>group</th><th>algorithm</th><th>variant</th><th>kind</th><th>privacy</th>"
             "<th>rate</th><th>agreement</th></tr></thead><tbody>"]
    for row in summary_rows(doc):
        parts.append(f"<tr><td>{_e(row.group)}</td><td>{_e(row.algorithm)}</td>"
                     f"<td><code>{_e(row.target)}</code></td><td>{_e(row.kind)}</td>"
                     f"<td>{_cell(row.privacy)}</td><td>{_words(row.rate, row.rate_words)}</td>"
                     f"<td>{_cell(row.agreement)}</td></tr>")
    parts.append("</tbody></table>")
    parts.append("<p>Privacy: account, audit, sensitivity and membership-inference checks; "
                 "each cell shows the worst verdict and how many checks met their "
                 "expectation. — means not checked in this run.</p></section>")
    regressions = rep.get("regressions") or []
    if regressions:
        parts.append('<section id="regressions"><h2>Regressions against the baseline</h2><ul>'
                     + "".join(f"<li>{_e(x)}</li>" for x in regressions) + "</ul></section>")
    return parts


def _algorithm_html(g: GroupView, a: Any, fmt_: str | None) -> list[str]:
    """One algorithm: its variants, a table of its checks, each check, its findings."""
    parts = [f'<section class="algorithm" id="{anchor("a", g.key + "-" + a.name)}">'
             f"<h3>{_e(a.name)}</h3><p>{_e(a.description)}"
             + (f" <i>Source: {_e(a.source)}.</i>" if a.source else "") + "</p>"]
    parts.append('<table class="variants"><thead><tr><th>variant</th><th>kind</th>'
                 "<th>privacy claim</th><th>utility theorem</th><th>known findings"
                 "</th></tr></thead><tbody>")
    for v in a.variants:
        info = v.info or {}
        parts.append(f"<tr><td><code>{_e(v.target)}</code></td><td>{_e(v.kind)}</td>"
                     f"<td>{_e(claim_text(info.get('claim')))}</td>"
                     f"<td>{_e(utility_text(info.get('utility')))}</td>"
                     f"<td>{len(info.get('findings') or [])}</td></tr>")
    parts.append("</tbody></table>")
    checks = [c for v in a.variants for c in v.checks]
    parts.append('<table class="checks"><thead><tr><th>check</th><th>kind</th>'
                 "<th>target</th><th>expected</th><th>verdict</th><th>met</th>"
                 "<th>key numbers</th></tr></thead><tbody>")
    for c in checks:
        r = c.record
        met = "yes" if r.get("met") else '<span class="unmet">no</span>'
        parts.append(f'<tr><td><a href="#{anchor("c", c.id)}">{_e(c.id)}</a></td>'
                     f"<td>{_e(r.get('kind'))}</td><td><code>{_e(r.get('target'))}"
                     f"</code></td><td>{_e(r.get('expected'))}</td>"
                     f"<td>{_verdict(r.get('verdict'))}</td><td>{met}</td>"
                     f"<td>{_e(headline(r))}</td></tr>")
    parts.append("</tbody></table>")
    parts += [_check_html(c, fmt_) for c in checks]
    if a.findings:
        parts.append(f"<h4>Findings of {_e(a.name)}</h4><ol class=\"findings\">"
                     + "".join(f"<li>{_with_code(f.paragraph())}</li>" for f in a.findings)
                     + "</ol>")
    parts.append("</section>")
    return parts


def _group_html(g: GroupView, fmt_: str | None) -> list[str]:
    parts = [f'<section class="group" id="{anchor("g", g.key)}">'
             f"<h2>{_e(group_heading(g))}</h2>"]
    if g.register:
        parts.append(_register_html(g, {c.id for c in g.checks}))
    if fmt_ is not None:
        parts.append(_group_epsilons(g, fmt_))
    for a in g.algorithms:
        parts += _algorithm_html(g, a, fmt_)
    parts.append("</section>")
    return parts


def render_html(rep: Mapping[str, Any], *, plot_format: str = "svg",
                doc: Document | None = None) -> str:
    """The self-contained HTML report of a report dictionary.

    ``plot_format`` is ``svg`` (inline SVG), ``png`` (base64 images) or ``none``. Without
    matplotlib the page says so in place of the figures.

    Examples
    --------
    >>> rep = {"scale": "quick", "seed": 0, "suites": [], "summary": {}, "checks": [
    ...     {"id": "x", "kind": "account", "target": "noisy_gd:sound", "verdict": "PASS",
    ...      "expected": "PASS", "met": True, "metrics": {"epsilon_accountant": 0.9,
    ...      "epsilon_claimed": 1.0}}]}
    >>> page = render_html(rep)
    >>> page.startswith("<!DOCTYPE html>"), page.count('<table class="checks">')
    (True, 1)
    """
    if plot_format not in (*_plots.FORMATS, "none"):
        raise InputError(f"plot format must be one of {(*_plots.FORMATS, 'none')}, "
                         f"got {plot_format!r}")
    doc = doc or build_document(rep)
    missing = _plots.unavailable() if plot_format != "none" else None
    fmt_ = None if (plot_format == "none" or missing) else plot_format
    parts = _header_html(rep, missing, plot_format)
    parts.append(_contents(doc))
    parts += _summary_html(doc, rep)
    for g in doc.groups:
        parts += _group_html(g, fmt_)
    pk = rep.get("packages") or {}
    parts.append('<section id="versions"><h2>Versions</h2><table class="versions"><tbody>'
                 + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>"
                           for k, v in pk.items() if v)
                 + "</tbody></table></section></body></html>")
    page, css = _plots.share_svg_styles("\n".join(parts) + "\n")
    return page.replace("</style></head>", f"{_plots.MPL_CSS}{css}</style></head>", 1)
