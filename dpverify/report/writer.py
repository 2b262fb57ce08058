"""``report.json`` (versioned schema) and the Markdown report of a suite run."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import math
import platform
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpverify.checks.base import CheckResult, jsonable, result_of
from dpverify.core.errors import InputError
from dpverify.core.prose import num as _num
from dpverify.report import html as report_html
from dpverify.report.io import write_json_atomic, write_text_atomic
from dpverify.report.markdown import render_markdown
from dpverify.report.paper import build_document, target_info
from dpverify.report.registers import collect_registers
from dpverify.stats.audit_bounds import clopper_pearson, epsilon_from_rates

SCHEMA_VERSION = "2.0"
#: The major versions :func:`load_report` reads: 1.x (whose ``metrics`` read into the same
#: typed results, a field it wrote as ``null`` being one left out) and this one.
READ_MAJORS = ("1", "2")
_PACKAGES = ("dpverify", "numpy", "scipy", "dp-accounting", "statsmodels", "hypothesis",
             "torch", "dask", "diffprivlib", "opacus")
# Metrics shown in the summary, in order, when a check has them.
_HEADLINE = ("epsilon_lower", "epsilon_accountant", "epsilon_claimed", "worst_ratio",
             "exponent", "theory", "max_abs_dev")


def package_versions() -> dict[str, str | None]:
    """Installed versions of dpverify and the libraries its results depend on."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _algorithms(results: Any, scale: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Registry information per target, and each check's own claim (at its parameters)."""
    algos: dict[str, Any] = {}
    claims: dict[str, Any] = {}
    for r in results:
        t = r.spec.target
        if t not in algos:
            algos[t] = target_info(t, scale=scale)
        if algos[t] is not None:
            info = target_info(t, r.spec.params, scale) if r.spec.params else algos[t]
            claims[r.spec.id] = info["claim"] if info else None
    return algos, claims


def report_dict(run: Any, regressions: list[str] | None = None) -> dict[str, Any]:
    """The JSON report of a suite run (see DESIGN.md, public contract).

    Schema 2.0 writes each check's ``metrics`` as its kind's typed result
    (:class:`~dpverify.checks.base.Result`; the fields that are not ``null``, under the
    names 1.x used), documented field by field in ``docs/report-schema.md``. Schema 1.1
    added, to 1.0, ``algorithms`` (what the registry knows of each target:
    group, source, claims, utility theorem, findings; ``null`` for a ``module:function``)
    and, per check, ``source`` (suite file and line), ``claim`` (the privacy claim at
    the check's parameters) and ``description`` (the suite entry's, carried by its
    :class:`~dpverify.checks.base.CheckSpec`, when it has one); and, when a paper the run touches
    has one, ``registers`` (its claims register, :mod:`dpverify.report.registers`).

    Examples
    --------
    >>> from dpverify.cli.suites import SuiteRun
    >>> report_dict(SuiteRun([]))["schema_version"]
    '2.0'
    """
    from dpverify.report.merge import summarize

    seeds = getattr(run, "suite_seeds", [])
    algos, claims = _algorithms(run.results, run.scale)
    checks = []
    for r in run.results:
        d = r.to_dict()
        d["source"] = r.spec.source
        if r.spec.id in claims:
            d["claim"] = jsonable(claims[r.spec.id])
        checks.append(d)
    return {
        "schema_version": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "packages": package_versions(),
        "seed": run.seed,
        "scale": run.scale,
        "suites": [{"name": s.name, "path": str(s.path), "checks": len(s.checks),
                    "seed": seeds[i] if i < len(seeds) else run.seed}
                   for i, s in enumerate(run.suites)],
        "summary": summarize(checks),
        "regressions": list(regressions or []),
        **({"param_overrides": jsonable(run.param_overrides)}
           if getattr(run, "param_overrides", None) else {}),
        "algorithms": jsonable(algos),
        **_registers(algos),
        "checks": checks,
    }


def _registers(algos: Mapping[str, Any]) -> dict[str, Any]:
    """The claims registers of the papers the run touched (none: no key)."""
    regs = collect_registers(str(info["group"]) for info in algos.values() if info)
    return {"registers": jsonable(regs)} if regs else {}


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.4g}"
    return str(v)


def _headline(r: CheckResult) -> str:
    res = r.outcome.result
    return ", ".join(f"{k}={_fmt(res.get(k))}" for k in _HEADLINE if res.get(k) is not None)


def markdown_report(run: Any, regressions: list[str] | None = None) -> str:
    """The Markdown report of a run (see :func:`dpverify.report.markdown.render_markdown`)."""
    return render_markdown(report_dict(run, regressions))


def _render(name: str, make: Any, rep: dict[str, Any]) -> str:
    """Render one human report; a renderer's bug leaves a page that says so, and the JSON
    (written first) keeps every number, so nothing a long run measured is lost."""
    try:
        return make(rep)
    except Exception as e:
        import traceback

        warnings.warn(f"dpverify: the {name} report could not be rendered ({type(e).__name__}:"
                      f" {e}); report.json is complete: re-render it with `dpverify report`",
                      stacklevel=3)
        tb = traceback.format_exc(limit=6)
        if name == "html":
            import html

            return (f"<!DOCTYPE html><html><body><h1>dpverify report</h1><p>Rendering failed:"
                    f"</p><pre>{html.escape(tb)}</pre></body></html>\n")
        return f"# dpverify report\n\nRendering failed:\n\n```\n{tb}```\n"


def write_rendered(rep: dict[str, Any], out_dir: Path, *, formats: tuple[str, ...] = (
        "md", "html"), plot_format: str = "svg") -> list[Path]:
    """Write ``report.md`` and/or ``report.html`` of a report dictionary, atomically.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> rep = {"scale": "quick", "seed": 0, "suites": [], "summary": {}, "checks": []}
    >>> out = write_rendered(rep, pathlib.Path(tempfile.mkdtemp()), formats=("md",))
    >>> [p.name for p in out]
    ['report.md']
    """
    doc = build_document(rep)
    makers = {"md": lambda r: render_markdown(r, doc),
              "html": lambda r: report_html.render_html(r, plot_format=plot_format, doc=doc)}
    out = []
    for f in formats:
        out.append(write_text_atomic(Path(out_dir) / f"report.{f}", _render(f, makers[f], rep)))
    return out


def write_reports(run: Any, report_dir: Path, *, regressions: list[str] | None = None,
                  plot_format: str = "svg") -> list[Path]:
    """Write ``report.json``, ``report.md`` and ``report.html`` atomically into
    ``report_dir`` (the JSON first: it alone is enough to render the others again)."""
    report_dir = Path(report_dir)
    rep = report_dict(run, regressions)
    paths = [write_json_atomic(report_dir / "report.json", rep)]
    return paths + write_rendered(jsonable(rep), report_dir, plot_format=plot_format)


def summary_table(run: Any) -> Any:
    """A rich table of the run, one row per check."""
    from rich.table import Table

    t = Table(title="dpverify summary")
    for col in ("check", "target", "expected", "verdict", "met", "key numbers"):
        t.add_column(col, overflow="fold")
    for r in run.results:
        colour = {"PASS": "green", "FAIL": "red"}.get(r.outcome.verdict.value, "yellow")
        t.add_row(r.spec.id, r.spec.target, r.spec.expected.value,
                  f"[{colour}]{r.outcome.verdict.value}[/{colour}]",
                  "yes" if r.met else "[bold red]no[/bold red]", _headline(r))
    return t


def load_report(path: str | Path, what: str = "baseline") -> dict[str, Any]:
    """Read a ``report.json``: schema 2.x, or 1.x whose ``metrics`` read into the same typed
    results (:data:`READ_MAJORS`); another version is refused, naming the file, its version
    and the versions read.

    ``what`` names the file in error messages ("baseline", "report"). Each record's
    ``metrics`` must be a table; the report reads it into its kind's result
    (:func:`~dpverify.checks.base.result_of`).

    Examples
    --------
    >>> try:
    ...     load_report("/nonexistent/report.json", what="report")
    ... except InputError as e:
    ...     print(e)
    no report '/nonexistent/report.json'
    >>> import json, tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "r.json"
    >>> _ = f.write_text(json.dumps({"schema_version": "3.0", "checks": []}))
    >>> try:
    ...     load_report(f, what="report")
    ... except InputError as e:
    ...     print(str(e).replace(str(f), "F"))  # doctest: +NORMALIZE_WHITESPACE
    report 'F' has schema version '3.0'; this dpverify (schema 2.0) reads 1.x and 2.x:
    a newer version needs a newer dpverify
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"no {what} {str(p)!r}" + (" report" if what == "baseline" else ""))
    try:
        rep = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"{what} {str(p)!r} is not valid JSON: {e}") from None
    if not isinstance(rep, dict) or "checks" not in rep:
        raise InputError(f"{what} {str(p)!r} is not a dpverify report")
    version = str(rep.get("schema_version", "0"))
    major = version.split(".")[0]
    if major not in READ_MAJORS:
        newer = major.isdigit() and int(major) > int(READ_MAJORS[-1])
        raise InputError(
            f"{what} {str(p)!r} has schema version {version!r}; this dpverify (schema "
            f"{SCHEMA_VERSION}) reads {' and '.join(m + '.x' for m in READ_MAJORS)}"
            + (": a newer version needs a newer dpverify" if newer else ""))
    for i, c in enumerate(rep["checks"]):
        if not isinstance(c, dict) or not isinstance(c.get("metrics", {}), dict):
            raise InputError(f"{what} {str(p)!r}: check {i} ({_name(c)}) has no metrics "
                             "table")
    return rep


def _name(check: Any) -> str:
    return repr(check.get("id")) if isinstance(check, dict) else "not a record"


def epsilon_lower_interval(check: dict[str, Any]) -> tuple[str, float, float] | None:
    """The interval an audit's epsilon lower bound was measured to, where recorded.

    ``metrics["epsilon_lower_ci"] = [low, high]`` when an auditor states one; else, from
    the held-out counts of the audit's Clopper-Pearson test (``evidence["test"]``,
    ``["roc_test"]`` or ``["cp_test"]``): its lower end is the bound itself (upper
    confidence limits of FPR and FNR, each at alpha/2), its upper end the epsilon of the
    lower limits, i.e. the largest epsilon the same counts are consistent with
    (Kairouz, Oh, Viswanath 2015, Theorem 2.1, through
    :func:`dpverify.stats.audit_bounds.epsilon_from_rates`). Returns (name, low, high).

    Examples
    --------
    >>> from dpverify.stats.audit_bounds import epsilon_lower_bound
    >>> eps = float(epsilon_lower_bound(1000, 10000, 1000, 10000, 1e-5, 0.05))
    >>> chk = {"metrics": {"delta": 1e-5, "confidence": 0.95, "epsilon_lower": eps},
    ...        "evidence": {"test": {"method": "cp", "epsilon": eps, "tp": 9000,
    ...        "fp": 1000, "n_pos": 10000, "n_neg": 10000, "alpha": 0.05}}}
    >>> name, lo, hi = epsilon_lower_interval(chk)  # the point estimate is log(9) = 2.197
    >>> name, round(lo, 3), round(hi, 3)
    ('epsilon_lower', 2.132, 2.264)
    """
    # Any kind's record: the fields are read by name, a kind without them has none.
    r, ev = result_of(check), check.get("evidence") or {}
    ci = r.get("epsilon_lower_ci")
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_num(x) is not None for x in ci):
        return "epsilon_lower", float(_num(ci[0])), float(_num(ci[1]))  # type: ignore[arg-type]
    delta = _num(r.get("delta"))
    for key in ("test", "roc_test", "cp_test"):
        t = ev.get(key)
        if not isinstance(t, dict) or t.get("method", "cp") != "cp" or delta is None:
            continue
        if not all(isinstance(t.get(k), int) for k in ("tp", "fp", "n_pos", "n_neg")):
            continue

        alpha = _num(t.get("alpha"))
        if alpha is None:
            alpha = 1.0 - (_num(r.get("confidence")) or 0.95)
        fpr_lo = clopper_pearson(t["fp"], t["n_neg"], alpha / 2, "lower")
        fnr_lo = clopper_pearson(t["n_pos"] - t["tp"], t["n_pos"], alpha / 2, "lower")
        hi = float(epsilon_from_rates(fpr_lo, fnr_lo, delta))
        lo = _num(t.get("epsilon"))
        if lo is None:
            continue
        el = _num(r.get("epsilon_lower"))
        name = "epsilon_lower" if el is not None and el == lo else f"epsilon_lower ({key})"
        return name, lo, max(hi, lo)
    return None


def _scope(run: Any) -> tuple[list[dict[str, Any]], set[str], set[str], str | None]:
    """(check records, ids the run's suites hold, suite paths, scale) of a run or report."""
    if isinstance(run, dict):
        recs = list(run.get("checks") or [])
        return (recs, {str(c.get("id")) for c in recs},
                {str(s.get("path")) for s in run.get("suites") or []}, run.get("scale"))
    recs = []
    for r in run.results:
        d = jsonable(r.to_dict())
        d["source"] = r.spec.source
        recs.append(d)
    ids = {c.id for s in run.suites for c in s.checks}
    return recs, ids, {str(s.path) for s in run.suites}, run.scale


def suite_path(check: Mapping[str, Any]) -> str | None:
    """The suite file a check record came from (its ``source`` without the line number)."""
    src = str(check.get("source") or "")
    head, sep, tail = src.rpartition(":")
    return head if sep and tail.isdigit() else (src or None)


def compare_baseline(run: Any, baseline: dict[str, Any]) -> list[str]:
    """Regressions of ``run`` (a suite run, or a report dictionary) against a saved report.

    A regression is:

    * a changed verdict;
    * a fitted exponent (of every swept parameter) outside the baseline's interval
      [ci_low, ci_high] for it;
    * an epsilon lower bound whose interval (:func:`epsilon_lower_interval`) no longer
      meets the baseline's: the two measurements disagree at their confidence;
    * an epsilon lower bound above the baseline's accountant epsilon;
    * an accountant epsilon that moved (it is a deterministic computation);
    * a check of the baseline that the run's suites no longer hold (a check the run
      skipped with ``--only`` is not missing), or a baseline run at another scale, whose
      numbers are not comparable.

    Examples
    --------
    >>> base = {"scale": "quick", "suites": [{"path": "s.toml"}], "checks": [
    ...     {"id": "a", "verdict": "PASS", "metrics": {}, "source": "s.toml:3"},
    ...     {"id": "b", "verdict": "PASS", "metrics": {}, "source": "s.toml:9"}]}
    >>> now = {"scale": "quick", "suites": [{"path": "s.toml"}], "checks": [
    ...     {"id": "a", "verdict": "FAIL", "metrics": {}, "source": "s.toml:3"}]}
    >>> for line in compare_baseline(now, base):
    ...     print(line)
    a: verdict PASS -> FAIL
    b: missing: in the baseline, not in the suites run
    """
    records, ids, paths, scale = _scope(run)
    bscale = baseline.get("scale")
    if bscale is not None and scale is not None and bscale != scale:
        return [f"the baseline ran at scale {bscale}, this run at {scale}: its numbers are "
                f"not comparable (run with --scale {bscale})"]
    old = {c["id"]: c for c in baseline.get("checks", [])}
    out: list[str] = []
    for rec in records:
        cid = str(rec.get("id"))
        b = old.get(cid)
        if b is None:
            continue
        if b.get("verdict") != rec.get("verdict"):
            out.append(f"{cid}: verdict {b.get('verdict')} -> {rec.get('verdict')}")
        m, bm = result_of(rec), result_of(b)
        # Fits are matched by parameter: the deciding fit (the metrics' top level) can be
        # another parameter's from one run to the next.
        base_fits = {g.get("parameter"): g for g in bm.get("fits") or [bm.to_metrics()]}
        for f in m.get("fits") or [m.to_metrics()]:
            bf = base_fits.get(f.get("parameter"), {})
            exp, lo, hi = _num(f.get("exponent")), _num(bf.get("ci_low")), _num(bf.get("ci_high"))
            if exp is not None and lo is not None and hi is not None and not (lo <= exp <= hi):
                par = f" in {f.get('parameter')}" if f.get("parameter") else ""
                out.append(f"{cid}: exponent{par} {exp:.3g} left the baseline interval "
                           f"[{lo:.3g}, {hi:.3g}]")
        new_iv, old_iv = epsilon_lower_interval(rec), epsilon_lower_interval(b)
        if new_iv is not None and old_iv is not None and new_iv[0] == old_iv[0]:
            name, nlo, nhi = new_iv
            _, blo, bhi = old_iv
            if nlo > bhi or nhi < blo:
                out.append(f"{cid}: {name} {nlo:.4g} (interval [{nlo:.4g}, {nhi:.4g}]) left "
                           f"the baseline's interval [{blo:.4g}, {bhi:.4g}]")
        el, ea = _num(m.get("epsilon_lower")), _num(bm.get("epsilon_accountant"))
        if el is not None and ea is not None and math.isfinite(ea) and el > ea * 1.001:
            out.append(f"{cid}: epsilon_lower {el:.4g} above the baseline accountant "
                       f"epsilon {ea:.4g}")
        ea_new, ea_old = _num(m.get("epsilon_accountant")), ea
        if (ea_new is not None and ea_old is not None and math.isfinite(ea_old)
                and abs(ea_new - ea_old) > 1e-3 * max(1.0, abs(ea_old))):
            out.append(f"{cid}: epsilon_accountant drifted {ea_old:.6g} -> {ea_new:.6g}")
        elif (ea_new is not None and ea_old is not None and math.isinf(ea_old)
              != math.isinf(ea_new)):
            out.append(f"{cid}: epsilon_accountant drifted {ea_old:.6g} -> {ea_new:.6g}")
    bpaths = {str(s.get("path")) for s in baseline.get("suites") or []}
    for cid, b in old.items():
        if cid in ids:
            continue
        path = suite_path(b)
        in_scope = (path in paths) if path is not None else bool(bpaths) and bpaths <= paths
        if in_scope:
            out.append(f"{cid}: missing: in the baseline, not in the suites run")
    return out
