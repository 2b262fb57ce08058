"""Figures of a report, drawn from the numbers a ``report.json`` records.

* :func:`epsilon_plot`: the three epsilons of every check of a paper (lower bound,
  accountant, claim) side by side, grouped by algorithm;
* :func:`roc_plot`: an audit's test in ROC space against the ceiling the claimed
  (epsilon, delta) puts on every test (Kairouz, Oh, Viswanath 2015, Theorem 2.1), with the
  ceilings of the accountant's epsilon and of the proven lower bound;
* :func:`loss_plot`: a white-box audit's privacy-loss profile delta(epsilon) and the
  privacy-loss distribution (a histogram when recorded, else its quantiles);
* :func:`rate_plot`: a rate check's per-point means and medians on log-log axes, the
  fitted curve in its bootstrap band and the theorem's slope.

matplotlib is optional (the ``plots`` extra). Figures are drawn on
:class:`matplotlib.figure.Figure` objects, never through pyplot, so no global backend is
switched and PNGs come from the Agg canvas. Without matplotlib every function returns
``None`` and :func:`unavailable` says why. Each figure is returned as inline SVG text
(text kept as text, element ids salted with the plot's id so figures in one page never
share an id, no timestamp: the same report gives the same bytes) or as base64 PNG.
"""

from __future__ import annotations

import base64
import io
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpverify.checks.base import get_kind, result_of
from dpverify.core.errors import InputError
from dpverify.core.prose import fmt, num
from dpverify.stats.audit_bounds import delta_from_gdp
from dpverify.stats.membership_bounds import tpr_ceiling

FORMATS = ("svg", "png")
_FONT = 8.5


@dataclass
class Plot:
    """A rendered figure: its page id, title, caption and encoded image."""

    id: str
    title: str
    caption: str
    format: str  # "svg" (data is SVG text) or "png" (data is base64)
    data: str


def unavailable() -> str | None:
    """Why figures cannot be drawn (matplotlib missing), or ``None`` when they can.

    Examples
    --------
    >>> unavailable() is None or "matplotlib" in unavailable()
    True
    """
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError as e:
        return f"matplotlib is not installed (pip install 'dpverify[plots]'): {e}"
    return None


def plot_id(kind: str, name: str) -> str:
    """An HTML id for a figure: ``plot-<kind>-<name>`` with unsafe characters replaced.

    Examples
    --------
    >>> plot_id("roc", "dp_svrg.paper.audit:x/1")
    'plot-roc-dp_svrg-paper-audit-x-1'
    """
    return f"plot-{kind}-" + re.sub(r"[^A-Za-z0-9_]+", "-", str(name)).strip("-")


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    return fig


def _encode(fig: Any, fmt_: str, salt: str, *, tight: bool = False,
            drop_minor: bool = True) -> str:
    """Encode a figure. ``tight`` crops to the drawn content (one more full draw, so
    only for figures whose margins depend on their labels); ``drop_minor`` drops the
    minor ticks of log axes (their layout is most of the drawing time of a figure whose
    axes span decades)."""
    import matplotlib
    from matplotlib.ticker import NullLocator

    for ax in fig.axes if drop_minor else []:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale == "log":
                axis.set_minor_locator(NullLocator())
    bbox = "tight" if tight else None
    if fmt_ == "svg":
        buf = io.StringIO()
        # Vertices closer than half a point to the simplified line are not drawn anyway.
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt,
                                    "path.simplify_threshold": 0.5}):
            fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches=bbox)
        text = buf.getvalue()
        return compact_svg(text[text.index("<svg"):], svg_prefix(salt))  # no XML prolog
    bio = io.BytesIO()
    fig.savefig(bio, format="png", dpi=110, metadata={"Software": None}, bbox_inches=bbox)
    return base64.b64encode(bio.getvalue()).decode("ascii")


_SVG_NS, _XLINK_NS = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"
_HREF = f"{{{_XLINK_NS}}}href"
_COORDS = ("d", "x", "y", "x1", "x2", "y1", "y2", "points", "transform", "width", "height",
           "viewBox")
_DECIMALS = re.compile(r"-?\d+\.\d+")


def _round(m: re.Match[str]) -> str:
    """A coordinate to 1/10 pt (a seventh of a pixel at 96 dpi), without a bare ".0"."""
    text = f"{float(m.group(0)):.1f}"
    return text[:-2] if text.endswith(".0") else text


def svg_prefix(plot_id: str) -> str:
    """A short id prefix for one figure's elements, unique in practice (a hash of its id).

    Examples
    --------
    >>> svg_prefix("plot-roc-a"), svg_prefix("plot-roc-a") == svg_prefix("plot-roc-b")
    ('fb4ae02', False)
    """
    import hashlib

    return "f" + hashlib.sha1(plot_id.encode()).hexdigest()[:6]


def compact_svg(svg: str, prefix: str) -> str:
    """A matplotlib SVG made fit for one page among many: unique ids, a fraction of the
    bytes, the same drawing.

    Every figure matplotlib writes names its groups ``figure_1``, ``axes_1``...; in a
    page of many figures those ids repeat. Ids nothing refers to are dropped; those a
    ``url(#...)`` or ``href="#..."`` refers to (clip paths, markers) become ``prefix-0``,
    ``prefix-1``... (``prefix``: one per figure, :func:`svg_prefix`). Each distinct
    inline style becomes a class of the figure's own; metadata, comments, the font list
    repeated on every text (the page's style gives it once), groups with no attribute,
    indentation and coordinates finer than 1/10 pt (below a pixel, even on a
    high-density screen) go.

    Examples
    --------
    >>> svg = ('<svg xmlns="http://www.w3.org/2000/svg"><metadata>m</metadata>'
    ...        '<g id="figure_1"><g><clipPath id="p1"><rect/></clipPath>'
    ...        '<path d="M 0.123456 1.5" clip-path="url(#p1)" style="fill: none"/>'
    ...        '<text style="font-size: 7px; font-family: DejaVu Sans, sans-serif; '
    ...        'text-anchor: middle">0.123456</text></g></g></svg>')
    >>> out = compact_svg(svg, "k")
    >>> print(out.replace("><", ">\\n<"))
    <svg xmlns="http://www.w3.org/2000/svg">
    <style>.k0{fill: none}.k1{font-size: 7px; text-anchor: middle}</style>
    <clipPath id="k-0">
    <rect />
    </clipPath>
    <path d="M0.1 1.5" clip-path="url(#k-0)" class="k0" />
    <text class="k1">0.123456</text>
    </svg>
    """
    import xml.etree.ElementTree as ET

    ET.register_namespace("", _SVG_NS)
    ET.register_namespace("xlink", _XLINK_NS)
    root = ET.fromstring(svg)
    refs = [a or b for a, b in re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', svg)]
    used_ids = {old: f"{prefix}-{i}" for i, old in enumerate(dict.fromkeys(refs))}
    classes: dict[str, str] = {}
    _compact(root, prefix, used_ids, classes)
    if classes:
        style = ET.Element(f"{{{_SVG_NS}}}style")
        style.text = "".join(f".{c}{{{rule}}}" for rule, c in classes.items())
        root.insert(0, style)
    return ET.tostring(root, encoding="unicode")


def _compact(el: Any, prefix: str, used: dict[str, str], classes: dict[str, str]) -> None:
    """Rewrite ``el``'s children in place (see :func:`compact_svg`)."""
    kids = []
    for child in list(el):
        tag = child.tag.rsplit("}", 1)[-1] if isinstance(child.tag, str) else ""
        if tag in ("metadata", ""):
            continue  # metadata, comments
        _compact(child, prefix, used, classes)
        _attributes(child, prefix, used, classes)
        if child.tail is not None and not child.tail.strip():
            child.tail = None  # indentation
        if tag == "g" and not child.attrib:
            kids += list(child)  # a group that says nothing: its children take its place
        else:
            kids.append(child)
    if el.text is not None and not el.text.strip():
        el.text = None
    for child in list(el):
        el.remove(child)
    el.extend(kids)


_MPL_RULE = ('<defs><style type="text/css">*{stroke-linejoin: round; stroke-linecap: butt}'
             "</style></defs>")
#: The page's form of matplotlib's rule for every element of a figure, at the lowest
#: specificity so that each element's own class still wins.
MPL_CSS = "svg *{stroke-linejoin:round;stroke-linecap:butt}"


def share_svg_styles(page: str) -> tuple[str, str]:
    """One set of style classes for every figure of a page: (page, the classes' CSS).

    :func:`compact_svg` gives each figure its own classes; most are the same rules (the
    grid, the ticks, the fonts). Here each distinct rule gets one short class for the
    whole page, defined once in the page's style (``figure.plot .s0{...}``), and
    matplotlib's rule for every element is left to :data:`MPL_CSS`.

    Examples
    --------
    >>> a = '<svg><style>.fa0{fill: none}</style><path class="fa0"/></svg>'
    >>> b = '<svg><style>.fb0{font-size: 7px}.fb1{fill: none}</style><text class="fb1"/></svg>'
    >>> page, css = share_svg_styles(a + b)
    >>> page
    '<svg><path class="s0"/></svg><svg><text class="s0"/></svg>'
    >>> css
    'figure.plot .s0{fill: none}figure.plot .s1{font-size: 7px}'
    """
    rules: dict[str, str] = {}

    def adopt(m: re.Match[str]) -> str:
        local = dict(re.findall(r"\.([\w-]+)\{([^}]*)\}", m.group(2)))
        names = {c: rules.setdefault(rule, f"s{len(rules)}") for c, rule in local.items()}
        body = re.sub(r'class="([\w-]+)"', lambda k: f'class="{names.get(k[1], k[1])}"',
                      m.group(3)).replace(_MPL_RULE, "")
        return m.group(1) + body

    page = re.sub(r"(<svg\b[^>]*>)<style>([^<]*)</style>(.*?</svg>)", adopt, page, flags=re.S)
    return page, "".join(f"figure.plot .{c}{{{r}}}" for r, c in rules.items())


def short_path(d: str) -> str:
    """SVG path data in fewer bytes: no space around commands, and a run of line-tos
    written once (the SVG grammar repeats the last command for further coordinates).

    Examples
    --------
    >>> short_path("M 0 1 L 2 3 L 4 5 L 6 7 z")
    'M0 1L2 3 4 5 6 7z'
    """
    d = re.sub(r"\s*([MLHVCSQTAZmlhvcsqtaz])\s*", r"\1", d.strip())
    out: list[str] = []
    for p in re.split(r"(?=[MLHVCSQTAZmlhvcsqtaz])", d):
        if p.startswith("L") and out and out[-1].startswith("L"):
            out[-1] += " " + p[1:]
        elif p:
            out.append(p)
    return "".join(out)


def _attributes(el: Any, prefix: str, used: dict[str, str], classes: dict[str, str]) -> None:
    a = el.attrib
    if "id" in a:
        if a["id"] in used:
            a["id"] = used[a["id"]]
        else:
            del a["id"]
    for key in ("clip-path", "mask", "fill", "filter"):
        if key in a and a[key].startswith("url(#"):
            a[key] = f"url(#{used.get(a[key][5:-1], a[key][5:-1])})"
    if _HREF in a and a[_HREF].startswith("#"):
        a[_HREF] = "#" + used.get(a[_HREF][1:], a[_HREF][1:])
    if a.get("transform", "").startswith(("rotate(-0 ", "rotate(0 ")):
        del a["transform"]
    for key in _COORDS:
        if key in a:
            a[key] = _DECIMALS.sub(_round, " ".join(a[key].split()))
    if "d" in a:
        a["d"] = short_path(a["d"])
    style = a.pop("style", None)
    if style is not None:
        style = re.sub(r"font-family:[^;]*;?\s*", "", style).strip().rstrip(";").strip()
        if style:
            a["class"] = classes.setdefault(style, f"{prefix}{len(classes)}")


def _style(ax: Any) -> None:
    ax.tick_params(which="both", labelsize=_FONT - 1)
    ax.grid(True, which="major", color="0.9", lw=0.6)
    ax.set_axisbelow(True)


# The three epsilons ----------------------------------------------------------------------


@dataclass
class EpsilonRow:
    """One check's epsilons: proven lower bound, accountant, claim (any may be missing)."""

    label: str
    algorithm: str
    lower: float | None
    accountant: float | None
    claimed: float | None
    verdict: str = ""


def epsilon_rows(checks: Sequence[Mapping[str, Any]],
                 algorithm_of: Mapping[str, str] | None = None) -> list[EpsilonRow]:
    """The rows of :func:`epsilon_plot`: every check that records a claimed epsilon.

    Examples
    --------
    >>> rows = epsilon_rows([{"id": "a", "kind": "account", "target": "t:v", "verdict":
    ...     "FAIL", "metrics": {"epsilon_accountant": "inf", "epsilon_claimed": 1.0}}])
    >>> rows[0].accountant, rows[0].lower
    (inf, None)
    """
    out = []
    for c in checks:
        # Kinds without one of the three fields (an account check proves no lower bound).
        r = result_of(c)
        claimed = num(r.get("epsilon_claimed"))
        if claimed is None:
            continue
        algo = (algorithm_of or {}).get(str(c.get("id"))) or str(c.get("target", "")).split(":")[0]
        out.append(EpsilonRow(str(c.get("id")), algo, num(r.get("epsilon_lower")),
                              num(r.get("epsilon_accountant")), claimed,
                              str(c.get("verdict", ""))))
    return out


_EPS_STYLES = {"lower": ("C3", ">", "ε lower bound (audit)"),
               "accountant": ("C0", "o", "ε accountant (ledger)"),
               "claimed": ("k", "|", "ε claimed")}
_EPS_SIZES = {"claimed": (14, 2.2), "accountant": (7, 1.5), "lower": (6, 1.0)}


def _epsilon_markers(ax: Any, rows: Sequence[EpsilonRow], lo: float,
                     hi: float) -> tuple[bool, bool]:
    """Each row's three epsilons; whether an infinite one and a zero one were drawn."""
    n = len(rows)
    seen: set[str] = set()
    inf_note = zero_note = False
    for i, r in enumerate(rows):
        y = n - 1 - i
        for key in ("claimed", "accountant", "lower"):
            v = getattr(r, key)
            if v is None or math.isnan(v):
                continue
            color, marker, label = _EPS_STYLES[key]
            kw: dict[str, Any] = {"color": color, "ms": _EPS_SIZES[key][0],
                                  "mew": _EPS_SIZES[key][1], "zorder": 3}
            if key == "accountant":  # hollow, so a claim at the same epsilon shows through
                kw["mfc"] = "none"
            if math.isinf(v):
                x, inf_note = hi, True
                ax.annotate("∞", (x, y), xytext=(5, -3), textcoords="offset points",
                            fontsize=_FONT, color=color)
                marker = ">" if key != "claimed" else marker
            elif v <= 0:
                x, zero_note = lo, True
                kw["mfc"] = "none"
            else:
                x = v
            ax.plot([x], [y], marker, label=label if key not in seen else None, **kw)
            seen.add(key)
    return inf_note, zero_note


def _algorithm_bands(ax: Any, rows: Sequence[EpsilonRow]) -> None:
    """Separators and names of the algorithms the rows belong to."""
    n, start = len(rows), 0
    for i in range(1, n + 1):
        if i == n or rows[i].algorithm != rows[start].algorithm:
            if i < n:
                ax.axhline(n - i - 0.5, color="0.6", lw=0.6)
            ax.annotate(rows[start].algorithm, (1.0, n - start - 0.5), xytext=(4, -9),
                        xycoords=("axes fraction", "data"), textcoords="offset points",
                        fontsize=_FONT - 0.5, color="0.35", ha="left")
            start = i


def epsilon_plot(rows: Sequence[EpsilonRow], *, pid: str, title: str,
                 fmt_: str = "svg") -> Plot | None:
    """The three epsilons of each row on one log axis, rows grouped by algorithm.

    An infinite epsilon is drawn at the right edge with an arrow, a zero lower bound at
    the left edge, hollow.

    Examples
    --------
    >>> rows = [EpsilonRow("a.audit", "a", 0.5, 0.9, 1.0), EpsilonRow("b.account", "b",
    ...         None, math.inf, 1.0)]
    >>> p = epsilon_plot(rows, pid="plot-eps-x", title="x")
    >>> p is None or p.data.startswith("<svg")
    True
    """
    if unavailable() or not rows:
        return None
    vals = [v for r in rows for v in (r.lower, r.accountant, r.claimed)
            if v is not None and math.isfinite(v) and v > 0]
    lo = min(vals) / 2.5 if vals else 0.1
    hi = max(vals) * 2.5 if vals else 10.0
    n = len(rows)
    fig = _figure(8.6, 0.9 + 0.26 * n)
    ax = fig.subplots()
    inf_note, zero_note = _epsilon_markers(ax, rows, lo, hi)
    _algorithm_bands(ax, rows)
    ax.set_xscale("log")
    ax.set_xlim(lo / 1.6, hi * 1.6)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_yticks(range(n))
    ax.set_yticklabels([r.label + (f"  [{r.verdict}]" if r.verdict else "")
                        for r in reversed(rows)], fontsize=_FONT - 1)
    ax.set_xlabel("epsilon (log scale)", fontsize=_FONT)
    _style(ax)
    ax.legend(fontsize=_FONT - 1, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3,
              frameon=False)
    notes = []
    if inf_note:
        notes.append("∞ at the right edge")
    if zero_note:
        notes.append("a lower bound of 0 hollow at the left edge")
    caption = ("For every check that records a claimed epsilon: the audit's proven lower "
               "bound, the accountant's epsilon for the ledger, and the claim. They should "
               "appear in that order from left to right; each inversion is a finding."
               + (f" ({'; '.join(notes)}.)" if notes else ""))
    return Plot(pid, title, caption, fmt_, _encode(fig, fmt_, pid, tight=True,
                                                   drop_minor=False))


# ROC of an audit -------------------------------------------------------------------------


def _test_record(ev: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for key in ("test", "roc_test", "cp_test"):
        t = ev.get(key)
        if isinstance(t, Mapping) and all(k in t for k in ("tp", "fp", "n_pos", "n_neg")):
            return t
    return None


@dataclass
class _Roc:
    """What an ROC figure draws: the ceilings' epsilons, the test's point, a curve."""

    delta: float
    claimed: float
    accountant: float | None
    lower: float | None
    test_eps: float | None
    mu: float | None
    roc: Any
    # (fpr, tpr, confidence corner or None, negatives) of the held-out test
    point: tuple[float, float, tuple[float, float] | None, int] | None

    def ceiling(self, xs: np.ndarray, eps: float) -> np.ndarray:
        # Beyond epsilon ~ 50 every ceiling is the unit square to plotting precision (and
        # e^eps overflows at 710).
        return tpr_ceiling(xs, min(eps, 50.0), self.delta)


def _test_point(test: Mapping[str, Any] | None) -> Any:
    if test is None:
        return None
    n_pos, n_neg = max(int(test["n_pos"]), 1), max(int(test["n_neg"]), 1)
    fpr, tpr = int(test["fp"]) / n_neg, int(test["tp"]) / n_pos
    fpr_u, fnr_u = num(test.get("fpr_upper")), num(test.get("fnr_upper"))
    corner = (fpr_u, 1.0 - fnr_u) if fpr_u is not None and fnr_u is not None else None
    return fpr, tpr, corner, n_neg


def _roc_of(check: Mapping[str, Any]) -> _Roc | None:
    """The ROC figure's content from an audit's or a membership attack's record."""
    r, ev = result_of(check), check.get("evidence") or {}
    eps_c, delta = num(r.epsilon_claimed), num(r.delta)
    if eps_c is None or delta is None:
        return None
    test, roc = _test_record(ev), ev.get("roc")
    mu = num(getattr(r, "mu_lower", None))  # a GDP bound: audits only
    if test is None and not isinstance(roc, Mapping) and not mu:
        return None
    return _Roc(delta, eps_c, num(r.epsilon_accountant), num(r.epsilon_lower),
                num(test.get("epsilon")) if test is not None else None, mu, roc,
                _test_point(test))


def _roc_ceilings(ax: Any, xs: np.ndarray, g: _Roc) -> None:
    eps_c, eps_a, eps_l, eps_t = g.claimed, g.accountant, g.lower, g.test_eps
    ax.plot(xs, g.ceiling(xs, eps_c), "k-", lw=1.4,
            label=f"ceiling of the claim, ε = {fmt(eps_c, 3)}")
    if eps_a is not None and math.isfinite(eps_a) and abs(eps_a - eps_c) > 1e-3 * eps_c:
        ax.plot(xs, g.ceiling(xs, eps_a), "--", color="C0", lw=1.1,
                label=f"ceiling of the accountant, ε = {fmt(eps_a, 3)}")
    if eps_l is not None and eps_l > 0:
        ys = g.ceiling(xs, eps_l) if math.isfinite(eps_l) else np.ones_like(xs)
        ax.plot(xs, ys, ":", color="C3", lw=1.4,
                label=f"ceiling of the proven bound, ε = {fmt(eps_l, 3)}")
    if eps_t is not None and eps_t > 0 and eps_t != eps_l and math.isfinite(eps_t):
        ax.plot(xs, g.ceiling(xs, eps_t), "-.", color="0.45", lw=1.0,
                label=f"ceiling of the test's own bound, ε = {fmt(eps_t, 3)}")


def _roc_panel(ax: Any, xs: np.ndarray, g: _Roc) -> None:
    from scipy import stats

    ax.plot(xs, xs, color="0.7", lw=0.8, label="chance")
    _roc_ceilings(ax, xs, g)
    if g.mu:
        # Dong, Roth, Su 2019, Def. 2.7: TPR = 1 - G_mu(FPR) = Phi(Phi^-1(FPR) + mu).
        ax.plot(xs, stats.norm.cdf(stats.norm.ppf(xs) + g.mu), "-", color="C2", lw=1.0,
                label=f"Gaussian ROC of μ_lower = {fmt(g.mu, 3)}")
    if isinstance(g.roc, Mapping) and g.roc.get("fpr") is not None:
        ax.plot(g.roc["fpr"], g.roc["tpr"], "-", color="C1", lw=1.2, label="audit's ROC")
    if g.point is not None:
        fpr, tpr, corner, _ = g.point
        ax.plot([fpr], [tpr], "o", color="C3", ms=5, label="test, observed rates")
        if corner is not None:
            ax.plot([corner[0]], [corner[1]], "x", color="C3", ms=7, mew=1.6,
                    label="test, confidence corner")
            ax.plot([fpr, corner[0], corner[0]], [tpr, tpr, corner[1]], "-", color="C3",
                    lw=0.6, alpha=0.6)
    ax.set_xlabel("false-positive rate", fontsize=_FONT)
    ax.set_ylabel("true-positive rate", fontsize=_FONT)
    _style(ax)


def _roc_caption(check: Mapping[str, Any], g: _Roc) -> str:
    caption = ("The audit's test (a threshold on its distinguishing score) in ROC space. "
               "No test of an (ε, δ)-DP mechanism can lie above the black ceiling of the "
               "claim. The cross, the test's rates at the stated confidence, lies on the "
               "ceiling of the ε that test proves")
    if str(getattr(result_of(check), "bound", None)) == "gdp":
        caption += (f"; the reported bound ε = {fmt(g.lower, 3)} comes instead from the "
                    "Gaussian trade-off curve of μ_lower (green), which holds under the GDP "
                    "assumption stated with the check.")
    else:
        caption += "."
    if not isinstance(g.roc, Mapping):
        caption += (" The audit records one operating point, not its ROC curve.")
    return caption


def roc_plot(check: Mapping[str, Any], fmt_: str = "svg") -> Plot | None:
    """An audit's test in ROC space against the ceilings of the claimed, accounted and
    proven epsilons; linear axes and the low-FPR corner on log axes.

    The ceiling of (epsilon, delta)-DP is :func:`dpverify.stats.membership_bounds.tpr_ceiling`
    (Kairouz, Oh, Viswanath 2015, Theorem 2.1). The test is drawn at its observed rates
    and at its conservative corner (Clopper-Pearson upper FPR, lower TPR), which lies on
    the ceiling of the proven epsilon. A full ROC curve is drawn when the audit records
    ``evidence["roc"] = {"fpr": [...], "tpr": [...]}``; a GDP bound adds the Gaussian
    trade-off curve of ``mu_lower`` (Dong, Roth, Su 2019, Definition 2.7).

    Examples
    --------
    >>> chk = {"id": "a", "kind": "audit", "metrics": {"epsilon_claimed": 1.0, "delta": 1e-5,
    ...        "epsilon_lower": 0.3, "epsilon_accountant": 1.0}, "evidence": {"test": {
    ...        "tp": 700, "fp": 300, "n_pos": 1000, "n_neg": 1000, "fpr_upper": 0.33,
    ...        "fnr_upper": 0.33}}}
    >>> p = roc_plot(chk)
    >>> p is None or p.id
    'plot-roc-a'
    """
    if unavailable():
        return None
    g = _roc_of(check)
    if g is None:
        return None
    floor = 1e-4 if g.point is None else min(1e-4, 0.3 / g.point[3])
    fig = _figure(8.8, 3.7)
    axes = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.07, right=0.985, bottom=0.13, top=0.92, wspace=0.22)
    _roc_panel(axes[0], np.linspace(0.0, 1.0, 401), g)
    _roc_panel(axes[1], np.geomspace(floor, 1.0, 400), g)
    axes[0].set_xlim(0, 1)
    axes[0].set_ylim(0, 1.01)
    axes[0].set_title("ROC", fontsize=_FONT + 0.5)
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlim(floor, 1)
    axes[1].set_ylim(floor, 1.05)
    axes[1].set_title("low false-positive corner (log axes)", fontsize=_FONT + 0.5)
    axes[0].legend(fontsize=_FONT - 1.5, loc="lower right")
    pid = plot_id("roc", str(check.get("id")))
    return Plot(pid, f"ROC of {check.get('id')}", _roc_caption(check, g), fmt_,
                _encode(fig, fmt_, pid))


# White-box privacy loss ------------------------------------------------------------------


def _profile_panel(ax: Any, prof: Mapping[str, Any], r: Any) -> None:
    """The estimated privacy profile against the claim, the GDP curve and the epsilons."""
    eps_c, delta = num(r.epsilon_claimed), num(r.delta)
    e = np.asarray(prof.get("epsilon", []), dtype=float)
    d = np.asarray([num(x) if num(x) is not None else np.nan
                    for x in prof.get("delta_estimate", [])], dtype=float)
    pos = d > 0
    ax.semilogy(e[pos], d[pos], "-", color="C1", lw=1.4, label="δ(ε), estimated")
    mu = num(r.mu_lower)
    if mu and e.size:
        dg = np.array([delta_from_gdp(mu, float(x)) for x in e])
        ax.semilogy(e[dg > 0], dg[dg > 0], "--", color="C2", lw=1.0,
                    label=f"δ(ε) of μ_lower = {fmt(mu, 3)}")
    if eps_c is not None and delta is not None:
        ax.plot([eps_c], [delta], "k*", ms=10, label=f"claim ({fmt(eps_c)}, {fmt(delta)})")
    top = float(e.max()) if e.size else max(2.0 * (eps_c or 1.0), 1.0)
    off = []
    for v, style, name in ((num(r.epsilon_lower), ("C3", ":"), "ε lower bound"),
                           (num(r.epsilon_accountant), ("C0", "--"), "ε accountant")):
        if v is not None and v > top:  # off the profile's grid: named, not drawn
            off.append(f"{name} {fmt(v, 3)} →")
        elif v is not None and math.isfinite(v) and v > 0:
            ax.axvline(v, color=style[0], ls=style[1], lw=1.0, label=f"{name} {fmt(v, 3)}")
    ax.set_xlim(0.0, top)
    if off:
        ax.annotate("\n".join(off), (0.98, 0.97), xycoords="axes fraction", ha="right",
                    va="top", fontsize=_FONT - 1.5, color="0.3")
    ax.set_xlabel("ε", fontsize=_FONT)
    ax.set_ylabel("δ", fontsize=_FONT)
    ax.set_title("privacy profile", fontsize=_FONT + 0.5)
    ax.legend(fontsize=_FONT - 1.5)


def _loss_panel(ax: Any, ev: Mapping[str, Any]) -> None:
    """The privacy-loss distribution: a histogram, else its recorded quantiles."""
    hist = ev.get("loss_histogram")
    qD, qDp = ev.get("loss_quantiles_D"), ev.get("loss_quantiles_D_prime")
    if isinstance(hist, Mapping) and hist.get("edges"):
        edges = np.asarray(hist["edges"], dtype=float)
        for key, color, name in (("counts_D", "C0", "on D"), ("counts_D_prime", "C1", "on D'")):
            if hist.get(key) is not None:
                ax.stairs(np.asarray(hist[key], dtype=float), edges, color=color, label=name)
        ax.set_ylabel("runs", fontsize=_FONT)
        ax.set_title("privacy-loss histogram", fontsize=_FONT + 0.5)
        ax.legend(fontsize=_FONT - 1)
    elif qD:
        for y, q, color in ((1, qD, "C0"), (0, qDp, "C1")):
            if not q or len(q) != 5:
                continue
            q = [num(x) for x in q]
            ax.plot([q[0], q[4]], [y, y], "-", color=color, lw=1)
            ax.plot([q[1], q[3]], [y, y], "-", color=color, lw=5, alpha=0.6)
            ax.plot([q[2]], [y], "|", color="k", ms=12, mew=2)
        ax.set_yticks([0, 1])
        ax.set_yticklabels(["on D'", "on D"], fontsize=_FONT)
        ax.set_ylim(-0.7, 1.7)
        ax.set_title("privacy loss: 0.1–99.9% (thin), 1–99% (thick), median",
                     fontsize=_FONT + 0.5)
    else:
        ax.set_axis_off()
    ax.set_xlabel("privacy loss log(p_D / p_D')", fontsize=_FONT)


def loss_plot(check: Mapping[str, Any], fmt_: str = "svg") -> Plot | None:
    """A white-box audit's privacy profile delta(epsilon) and privacy-loss distribution.

    The profile is the audit's estimate from the exact privacy losses of its replays;
    the claim is a point (epsilon, delta) the profile must pass below. With ``mu_lower``
    the delta(epsilon) of mu-GDP (Dong, Roth, Su 2019, Corollary 2.13) is drawn too. The
    loss distribution is a histogram when the audit records
    ``evidence["loss_histogram"] = {"edges", "counts_D", "counts_D_prime"}``, else its
    recorded quantiles.

    Examples
    --------
    >>> chk = {"id": "w", "kind": "audit", "metrics": {"epsilon_claimed": 1.0, "delta": 1e-5},
    ...        "evidence": {"privacy_profile": {"epsilon": [0, 0.5, 1.0],
    ...                     "delta_estimate": [0.1, 0.01, 0.0]}}}
    >>> p = loss_plot(chk)
    >>> p is None or p.id
    'plot-loss-w'
    """
    if unavailable():
        return None
    ev = check.get("evidence") or {}
    prof, hist = ev.get("privacy_profile"), ev.get("loss_histogram")
    if not isinstance(prof, Mapping) and not isinstance(hist, Mapping) \
            and not ev.get("loss_quantiles_D"):
        return None
    fig = _figure(8.8, 3.4)
    ax1, ax2 = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.075, right=0.985, bottom=0.14, top=0.91, wspace=0.25)
    if isinstance(prof, Mapping):
        _profile_panel(ax1, prof, result_of(check))
    else:
        ax1.set_axis_off()
    _loss_panel(ax2, ev)
    _style(ax1)
    _style(ax2)
    pid = plot_id("loss", str(check.get("id")))
    caption = ("White-box audit: the privacy profile estimated from the exact privacy loss "
               "of every replayed run must pass below the claimed (ε, δ).")
    if not isinstance(hist, Mapping):
        caption += " The audit records the loss distribution's quantiles, not a histogram."
    return Plot(pid, f"Privacy loss of {check.get('id')}", caption, fmt_,
                _encode(fig, fmt_, pid))


# Rates -------------------------------------------------------------------------------------


def _fit_of(r: Any, parameter: str) -> Mapping[str, Any]:
    """The fit of ``parameter`` in a rate result (its top level when there is one fit)."""
    for f in r.fits or []:
        if f.get("parameter") == parameter:
            return f
    return r.to_metrics()


def _floats(values: Any, size: int) -> np.ndarray | None:
    """A recorded list as floats ("nan"/"inf" strings included), or None if absent/short."""
    if not isinstance(values, Sequence) or isinstance(values, str) or len(values) != size:
        return None
    out = [num(v) for v in values]
    return np.asarray([np.nan if v is None else v for v in out], dtype=float)


@dataclass
class _RatePoints:
    """One swept parameter's grid as drawn: values divided by the log factor where it
    varies along the grid (as the fit divides it out)."""

    x: np.ndarray
    means: np.ndarray
    medians: np.ndarray | None
    in_regime: np.ndarray
    curve: np.ndarray | None  # the fitted curve per grid point
    band: tuple[np.ndarray, np.ndarray] | None
    divided: bool
    log_factor_recorded: bool

    @classmethod
    def of(cls, p: Mapping[str, Any]) -> _RatePoints:
        x = np.asarray(p.get("x") or p.get("values"), dtype=float)
        means = _floats(p["means"], x.size)
        curve, lo_b, hi_b = (_floats(p.get(key), x.size)
                             for key in ("fit", "band_low", "band_high"))
        L = _floats(p.get("log_factor"), x.size)
        # Divide the log factor out, as the fit does, only where it varies along the grid:
        # a constant one would only rescale the axis away from the quantity's units.
        divide = L is not None and bool(np.all(np.isfinite(L) & (L > 0))) and bool(
            np.ptp(np.log(L)) > 1e-9)
        scale = L if divide else np.ones(x.size)
        med = _floats(p.get("medians"), x.size)
        return cls(x, means / scale if means is not None else np.full(x.size, np.nan),
                   med / scale if med is not None else None,
                   np.asarray(p.get("in_regime") or [True] * x.size, dtype=bool),
                   curve / scale if curve is not None else None,
                   (lo_b / scale, hi_b / scale) if lo_b is not None and hi_b is not None
                   else None, divide, L is not None)

    @property
    def ok(self) -> np.ndarray:
        return (self.x > 0) & (self.means > 0) & np.isfinite(self.means)


def _rate_markers(ax: Any, d: _RatePoints) -> None:
    x, means, ok, inr = d.x, d.means, d.ok, d.in_regime
    ax.loglog(x[ok & inr], means[ok & inr], "o", color="C0", ms=5, label="mean over seeds")
    if (ok & ~inr).any():
        ax.loglog(x[ok & ~inr], means[ok & ~inr], "o", mfc="none", color="C0", ms=5,
                  label="mean, outside the regime")
    if d.medians is not None:
        okm = (d.medians > 0) & np.isfinite(d.medians)
        ax.loglog(x[okm], d.medians[okm], "s", mfc="none", color="0.45", ms=4, label="median")


def _rate_curve(ax: Any, d: _RatePoints, slope: str, pct: str) -> bool | None:
    """The recorded fitted curve in its band; whether a band was drawn (None: no curve)."""
    drawn = d.in_regime & (d.x > 0)
    if d.curve is None:
        return None
    drawn &= np.isfinite(d.curve) & (d.curve > 0)
    if drawn.sum() < 2:
        return None
    banded = False
    if d.band is not None:
        lb, hb = d.band
        band = drawn & np.isfinite(lb) & np.isfinite(hb) & (lb > 0)
        if band.sum() >= 2:
            ax.fill_between(d.x[band], lb[band], hb[band], color="C1", alpha=0.25, lw=0,
                            label=f"{pct}bootstrap band")
            banded = True
    ax.loglog(d.x[drawn], d.curve[drawn], "-", color="C1", label=f"fit{slope}")
    return banded


def _rate_lines(ax: Any, d: _RatePoints, f: Mapping[str, Any], level: float | None) -> bool:
    """The fit (its curve and band, else its slope and the slopes its interval allows) and
    the theorem's slope, through the centroid of the in-regime means; whether a band of
    the curve was drawn."""
    sel = d.ok & d.in_regime
    if sel.sum() < 2:
        return False
    p_hat, lo, hi, th = (num(f.get(key)) for key in ("exponent", "ci_low", "ci_high",
                                                     "theory"))
    lx, ly = float(np.mean(np.log(d.x[sel]))), float(np.mean(np.log(d.means[sel])))
    grid = np.geomspace(d.x[sel].min(), d.x[sel].max(), 60)
    lg = np.log(grid) - lx
    slope = f", slope {fmt(p_hat, 3)}" if p_hat is not None else ""
    banded = _rate_curve(ax, d, slope, f"{100 * level:.3g}% " if level is not None else "")
    if banded is None:
        banded = False
        if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
            a, b = np.exp(ly + lo * lg), np.exp(ly + hi * lg)
            ax.fill_between(grid, np.minimum(a, b), np.maximum(a, b), color="C1",
                            alpha=0.25, lw=0, label=f"slopes in [{fmt(lo, 3)}, {fmt(hi, 3)}]")
        if p_hat is not None and math.isfinite(p_hat):
            ax.loglog(grid, np.exp(ly + p_hat * lg), "-", color="C1", label=f"fit{slope}")
    if th is not None and math.isfinite(th):
        ax.loglog(grid, np.exp(ly + th * lg), "--", color="C2",
                  label=f"theorem, slope {fmt(th, 3)}")
    return banded


def _rate_axes(ax: Any, d: _RatePoints, p: Mapping[str, Any], quantity: str,
               log_factors: str) -> None:
    par = str(p.get("parameter"))
    if d.ok.any():  # the grid's own values as ticks: a rate plot spans a decade or two
        from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

        ax.xaxis.set_major_locator(FixedLocator(d.x[d.ok]))
        ax.xaxis.set_major_formatter(FixedFormatter([f"{v:.4g}" for v in d.x[d.ok]]))
        ax.xaxis.set_minor_formatter(NullFormatter())
    gdp = p.get("x") is not None and p.get("values") is not None and list(
        p["x"]) != list(p["values"])
    xlabel = (f"1 / the theorem's full bound ({par} axis)" if p.get("axis") == "rate"
              else f"GDP μ of the ledger ({par} axis)" if gdp else par)
    ax.set_xlabel(xlabel, fontsize=_FONT)
    ax.set_ylabel(f"{quantity} / ({log_factors})" if d.divided and log_factors
                  else f"{quantity} / log factor" if d.divided else quantity, fontsize=_FONT)


def _rate_note(d: _RatePoints, par: str, log_factors: str) -> str | None:
    if d.divided:
        return (f"the log factor {log_factors or 'L'} varies with {par} and is divided "
                "out of every plotted value, as out of the fit")
    if not d.log_factor_recorded and re.search(rf"\b{re.escape(par)}\b", log_factors):
        return (f"the log factor {log_factors} varies with {par} and is not divided "
                "out of the plotted means")
    return None


def _rate_caption(notes: list[str], banded: bool) -> str:
    if banded:
        caption = ("Utility against the swept parameter on log-log axes: the fitted curve "
                   "(solid) inside its pointwise bootstrap band (shaded; seeds resampled "
                   "jointly across the grid, the model refitted on each resample), and the "
                   "theorem's slope (dashed) through the centroid of the in-regime means.")
    else:
        caption = ("Utility against the swept parameter on log-log axes: the fitted slope "
                   "(solid), the slopes its interval allows (band) and the theorem's slope "
                   "(dashed), all through the centroid of the in-regime means.")
    return caption + (" Note: " + "; ".join(notes) + "." if notes else "")


def rate_plot(check: Mapping[str, Any], fmt_: str = "svg") -> Plot | None:
    """Log-log panels of a rate check: means and medians per grid point, the fitted curve
    inside its bootstrap band, and the theorem's slope.

    When the check records the fitted curve per grid point
    (``evidence["points"][i]["fit"]``, ``["band_low"]``, ``["band_high"]``,
    ``["log_factor"]``; see :func:`dpverify.checks.rates.verify.curve_band`), the curve is drawn
    through its grid points with the band shaded around it, and a log factor that varies
    along the grid is divided out of everything drawn, as it is out of the fit, so a power
    law is a straight line. Records without them (older reports) get the fitted slope and
    the band of slopes its interval allows, through the centroid of the in-regime means
    (where a least-squares power fit passes). The theorem's line passes through that
    centroid too.

    Examples
    --------
    >>> chk = {"id": "r", "kind": "rate", "metrics": {"parameter": "n", "exponent": -1.0,
    ...        "ci_low": -1.1, "ci_high": -0.9, "theory": -1.0}, "evidence": {"points": [
    ...        {"parameter": "n", "values": [100, 200, 400], "x": [100, 200, 400],
    ...        "in_regime": [True] * 3, "medians": [0.01, 0.005, 0.0025],
    ...        "means": [0.011, 0.0052, 0.0026], "fit": [0.011, 0.0053, 0.0026],
    ...        "band_low": [0.009, 0.0048, 0.0023], "band_high": [0.013, 0.006, 0.003],
    ...        "log_factor": [1.0, 1.0, 1.0]}]}}
    >>> p = rate_plot(chk)
    >>> p is None or (p.id, "bootstrap band" in p.data)
    ('plot-rate-r', True)
    """
    if unavailable():
        return None
    r, ev = result_of(check), check.get("evidence") or {}
    points = [p for p in ev.get("points") or [] if p.get("means")]
    if not points:
        return None
    theory = ev.get("theory") or {}
    log_factors = " ".join(theory.get("log_factors") or [])
    quantity = str(r.quantity or theory.get("quantity") or "utility")
    k = len(points)
    fig = _figure(4.4 * k, 3.6)
    axes = np.atleast_1d(fig.subplots(1, k))
    fig.subplots_adjust(left=0.17 / k, right=1 - 0.03 / k, bottom=0.14, top=0.91,
                        wspace=0.3)
    notes, banded = [], False
    for ax, p in zip(axes, points, strict=True):
        par, d = str(p.get("parameter")), _RatePoints.of(p)
        f = _fit_of(r, par)
        _rate_markers(ax, d)
        banded |= _rate_lines(ax, d, f, num(f.get("confidence")) or num(r.confidence))
        note = _rate_note(d, par, log_factors)
        notes += [note] if note else []
        _rate_axes(ax, d, p, quantity, log_factors)
        ax.set_title(f"{par}: {f.get('verdict') or check.get('verdict', '')}",
                     fontsize=_FONT + 0.5)
        _style(ax)
        ax.legend(fontsize=_FONT - 1.5)
    if str(r.model) == "offset":
        notes.append("the fit has a floor (offset model)" + (
            "; its curve bends toward the floor" if banded else
            "; the straight lines show its slope only"))
    pid = plot_id("rate", str(check.get("id")))
    return Plot(pid, f"Rate of {check.get('id')}", _rate_caption(notes, banded), fmt_,
                _encode(fig, fmt_, pid, tight=True, drop_minor=False))


#: The figures a check kind may name (``CheckKind.figures``), each drawn from its record.
FIGURES: dict[str, Callable[[Mapping[str, Any], str], Plot | None]] = {
    "roc": roc_plot, "loss": loss_plot, "rate": rate_plot}


def check_plots(check: Mapping[str, Any], fmt_: str = "svg") -> list[Plot]:
    """Every figure a check's record supports (none without matplotlib).

    Examples
    --------
    >>> check_plots({"id": "a", "kind": "account", "metrics": {}})
    []
    """
    try:
        figures = get_kind(str(check.get("kind"))).figures
    except InputError:  # a kind this installation lacks
        return []
    out = [FIGURES[name](check, fmt_) for name in figures]
    return [p for p in out if p is not None]
