"""``report.json`` (versioned schema) and the Markdown report of a suite run."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import math
import platform
from pathlib import Path
from typing import Any

from dpverify.checks import CheckResult, jsonable
from dpverify.errors import InputError
from dpverify.report.io import write_json_atomic, write_text_atomic

SCHEMA_VERSION = "1.0"
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


def report_dict(run: Any, regressions: list[str] | None = None) -> dict[str, Any]:
    """The JSON report of a suite run (see DESIGN.md, public contract).

    Examples
    --------
    >>> from dpverify.suites import SuiteRun
    >>> report_dict(SuiteRun([]))["schema_version"]
    '1.0'
    """
    seeds = getattr(run, "suite_seeds", [])
    return {
        "schema_version": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "packages": package_versions(),
        "seed": run.seed,
        "scale": run.scale,
        "suites": [{"name": s.name, "path": str(s.path), "checks": len(s.checks),
                    "seed": seeds[i] if i < len(seeds) else run.seed}
                   for i, s in enumerate(run.suites)],
        "summary": {
            "checks": len(run.results),
            "met": sum(r.met for r in run.results),
            "by_verdict": {v: sum(r.outcome.verdict.value == v for r in run.results)
                           for v in ("PASS", "FAIL", "INCONCLUSIVE")},
        },
        "regressions": list(regressions or []),
        "checks": [r.to_dict() for r in run.results],
    }


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.4g}"
    return str(v)


def _headline(r: CheckResult) -> str:
    m = r.outcome.metrics
    return ", ".join(f"{k}={_fmt(m[k])}" for k in _HEADLINE if m.get(k) is not None)


def markdown_report(run: Any, regressions: list[str] | None = None) -> str:
    """A Markdown summary: one table row per check, then each check's message."""
    rep = report_dict(run, regressions)
    lines = [
        "# dpverify report",
        "",
        f"Seed {run.seed}, scale {run.scale}, created {rep['created']}; "
        f"{rep['summary']['met']}/{rep['summary']['checks']} checks met their expectation.",
        "",
        "PASS means no evidence of violation at the check's level, not a proof of privacy.",
        "",
        "| check | kind | target | expected | verdict | met | key numbers |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in run.results:
        lines.append(
            f"| {r.spec.id} | {r.spec.kind} | `{r.spec.target}` | {r.spec.expected.value} | "
            f"{r.outcome.verdict.value} | {'yes' if r.met else '**no**'} | {_headline(r)} |"
        )
    if regressions:
        lines += ["", "## Regressions against the baseline", ""]
        lines += [f"- {x}" for x in regressions]
    lines += ["", "## Details", ""]
    for r in run.results:
        lines.append(f"- **{r.spec.id}** ({r.outcome.verdict.value}, {r.seconds:.1f}s): "
                     f"{r.outcome.message}")
    lines += ["", "## Versions", ""]
    lines += [f"- {k}: {v}" for k, v in rep["packages"].items() if v]
    return "\n".join(lines) + "\n"


def write_reports(run: Any, report_dir: Path, *, regressions: list[str] | None = None
                  ) -> list[Path]:
    """Write ``report.json`` and ``report.md`` atomically into ``report_dir``."""
    report_dir = Path(report_dir)
    return [
        write_json_atomic(report_dir / "report.json", report_dict(run, regressions)),
        write_text_atomic(report_dir / "report.md", markdown_report(run, regressions)),
    ]


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


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a ``report.json``, checking its schema version."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"no baseline report {str(p)!r}")
    try:
        rep = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"baseline {str(p)!r} is not valid JSON: {e}") from None
    if not isinstance(rep, dict) or "checks" not in rep:
        raise InputError(f"baseline {str(p)!r} is not a dpverify report")
    major = str(rep.get("schema_version", "0")).split(".")[0]
    if major != SCHEMA_VERSION.split(".")[0]:
        raise InputError(f"baseline {str(p)!r} has schema {rep.get('schema_version')!r}, "
                         f"expected {SCHEMA_VERSION}")
    return rep


def _num(x: Any) -> float | None:
    if isinstance(x, (int, float)):
        return float(x)
    if x in ("inf", "-inf", "nan"):
        return float(x)
    return None


def compare_baseline(run: Any, baseline: dict[str, Any]) -> list[str]:
    """Regressions of ``run`` against a saved report.

    A regression is a changed verdict, or a headline number that left the interval the
    baseline stated for it: an exponent outside the baseline's [ci_low, ci_high], or an
    epsilon lower bound above the baseline's accountant epsilon.
    """
    old = {c["id"]: c for c in baseline.get("checks", [])}
    out: list[str] = []
    for r in run.results:
        b = old.get(r.spec.id)
        if b is None:
            continue
        if b.get("verdict") != r.outcome.verdict.value:
            out.append(f"{r.spec.id}: verdict {b.get('verdict')} -> {r.outcome.verdict.value}")
        m, bm = jsonable(r.outcome.metrics), b.get("metrics", {})
        exp, lo, hi = _num(m.get("exponent")), _num(bm.get("ci_low")), _num(bm.get("ci_high"))
        if exp is not None and lo is not None and hi is not None and not (lo <= exp <= hi):
            out.append(f"{r.spec.id}: exponent {exp:.3g} left the baseline interval "
                       f"[{lo:.3g}, {hi:.3g}]")
        el, ea = _num(m.get("epsilon_lower")), _num(bm.get("epsilon_accountant"))
        if el is not None and ea is not None and math.isfinite(ea) and el > ea * 1.001:
            out.append(f"{r.spec.id}: epsilon_lower {el:.4g} above the baseline accountant "
                       f"epsilon {ea:.4g}")
        ea_new, ea_old = _num(m.get("epsilon_accountant")), ea
        if (ea_new is not None and ea_old is not None and math.isfinite(ea_old)
                and abs(ea_new - ea_old) > 1e-3 * max(1.0, abs(ea_old))):
            out.append(f"{r.spec.id}: epsilon_accountant drifted {ea_old:.6g} -> {ea_new:.6g}")
    return out
