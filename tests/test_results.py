"""Typed check results: each kind's result declares its fields, a run cannot write another,
``report.json`` (schema 2.0) writes them under ``metrics``, old reports still read, and the
schema page is generated from the declarations."""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dpverify.checks.account import AccountMetrics
from dpverify.checks.base import (
    CHECK_KINDS,
    CheckKind,
    CheckSpec,
    Options,
    Outcome,
    Result,
    RunContext,
    available_check_kinds,
    get_kind,
    register_kind,
    result_of,
    run_check,
)
from dpverify.cli.app import main
from dpverify.core.claims import Verdict
from dpverify.report.paper import statement
from dpverify.report.schema import DOC_PATH, REGENERATE, schema_markdown
from dpverify.report.writer import SCHEMA_VERSION, load_report

ROOT = Path(__file__).resolve().parents[1]
# The paper report as schema 1.1 wrote it: its first 40 checks and two of each kind.
OLD_REPORT = ROOT / "tests" / "data" / "report-1.1.json"


@pytest.fixture(scope="module")
def papers() -> dict[str, Any]:
    return json.loads(OLD_REPORT.read_text())


# The declarations ---------------------------------------------------------------------


@pytest.mark.parametrize("name", available_check_kinds())
def test_every_kind_declares_its_own_frozen_result(name: str) -> None:
    cls = get_kind(name).Result
    assert cls is not Result and issubclass(cls, Result) and cls.kind == name
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    hints = typing.get_type_hints(cls)
    for key, f in cls.schema_fields().items():
        assert f.default is None and f.metadata.get("doc"), (name, key)
        args = typing.get_args(hints[f.name])
        assert type(None) in args, (name, key, hints[f.name])  # optional: None by default
    assert len({cls.__name__ for cls in (get_kind(k).Result for k in
                                         available_check_kinds())}) == len(CHECK_KINDS)


def test_an_undeclared_key_or_a_wrong_type_is_refused_naming_the_kind_and_the_key() -> None:
    with pytest.raises(ValueError, match=r"an 'account' check result has no field 'epsilon_low'"):
        AccountMetrics.from_metrics({"epsilon_low": 1.0})
    with pytest.raises(ValueError, match=r"an 'account' check result's 'releases' must be an "
                                         r"integer or none, got 'many'"):
        AccountMetrics.from_metrics({"releases": "many"})
    # A saved record is read leniently: what the class does not declare is kept aside.
    r = AccountMetrics.of({"metrics": {"epsilon_low": 1.0, "ratio": "inf"}})
    assert r.extra == {"epsilon_low": 1.0} and math.isinf(r.ratio)


def test_an_outcome_is_typed_at_the_kind_boundary() -> None:
    o = Outcome(Verdict.PASS, {"ratio": 0.5, "releases": 3, "rho_claimed": None})
    typed = o.typed(AccountMetrics)
    assert isinstance(typed.result, AccountMetrics) and typed.result.releases == 3
    assert dict(typed.metrics) == {"ratio": 0.5, "releases": 3}  # None: not measured
    with pytest.raises(TypeError):
        typed.metrics["ratio"] = 1.0  # type: ignore[index]  # a result is not edited in place


@dataclass(frozen=True)
class _Opts(Options):
    key: str = "count"


@dataclass(frozen=True)
class _CountMetrics(Result):
    count: int | None = dataclasses.field(default=None, metadata={"doc": "a count"})


class _Counting(CheckKind):
    """A kind whose run may write a key its result does not declare."""

    name = "counting_for_test"
    Options = _Opts
    Result = _CountMetrics

    def run(self, exp: Any, options: _Opts) -> Outcome:
        return Outcome(Verdict.PASS, {options.key: 3}).typed(_CountMetrics)


@pytest.fixture
def counting() -> Iterator[CheckKind]:
    register_kind(_Counting)
    yield get_kind("counting_for_test")
    CHECK_KINDS.pop("counting_for_test")


def test_a_run_cannot_write_a_field_the_report_does_not_know(counting: CheckKind) -> None:
    ok = run_check(CheckSpec("c", "counting_for_test", "noisy_gd:sound"), RunContext())
    assert ok.outcome.result == _CountMetrics(count=3) and ok.to_dict()["metrics"] == {
        "count": 3}
    bad = run_check(CheckSpec("c", "counting_for_test", "noisy_gd:sound",
                              options={"key": "cnt"}), RunContext())
    assert bad.outcome.verdict == Verdict.INCONCLUSIVE
    assert "'counting_for_test' check result has no field 'cnt'" in bad.outcome.result.error


def test_a_kinds_run_returns_its_typed_result_and_report_json_reads_it_back() -> None:
    res = run_check(CheckSpec("a", "account", "noisy_gd:sound", params={"T": 5}),
                    RunContext())
    r = res.outcome.result
    assert isinstance(r, AccountMetrics) and r.releases == 5 and r.ratio <= 1.0 + 1e-3
    rec = json.loads(json.dumps(res.to_dict()))
    assert result_of(rec) == r


# Old and foreign reports --------------------------------------------------------------


def test_a_1x_report_reads_strictly_into_the_typed_results(papers) -> None:
    assert papers["schema_version"].startswith("1.")
    kinds = set()
    for c in papers["checks"]:
        typed = get_kind(c["kind"]).Result.from_metrics(c["metrics"])  # no key undeclared
        kinds.add(c["kind"])
        assert typed.to_metrics().keys() <= c["metrics"].keys()
    # Every kind the report's schema knew; the door check came after it.
    assert kinds == set(available_check_kinds()) - {"door"}


def test_a_1x_report_renders_again(papers, tmp_path: Path) -> None:
    # One record of each kind, as schema 1.1 wrote it (nulls included).
    seen: dict[str, Any] = {}
    for c in papers["checks"]:
        seen.setdefault(c["kind"], c)
    old = {**papers, "checks": list(seen.values())}
    old.pop("registers", None)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    assert load_report(path, "report")["schema_version"] == papers["schema_version"]
    assert main(["report", str(path), "--out", str(tmp_path / "out"), "--format", "md",
                 "--quiet"]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    for c in seen.values():
        assert statement(c, (old["algorithms"].get(c["target"]) or {})).measured[:60] in md


def test_an_unknown_kind_keeps_its_numbers_in_the_generic_result() -> None:
    r = result_of({"kind": "gone", "metrics": {"x": 1, "error": "boom"}})
    assert type(r) is Result and r.extra == {"x": 1} and r.error == "boom"
    assert r.to_metrics() == {"error": "boom", "x": 1}


@pytest.mark.parametrize("version,newer", [("3.0", True), ("0.9", False)])
def test_another_major_version_is_refused_naming_file_version_and_supported(
        papers, tmp_path: Path, capsys, version: str, newer: bool) -> None:
    path = tmp_path / "future.json"
    path.write_text(json.dumps({**papers, "schema_version": version, "checks": []}))
    assert main(["report", str(path), "--out", str(tmp_path / "o")]) == 2
    msg = capsys.readouterr().out
    for words in (str(path), repr(version), "reads 1.x and 2.x", SCHEMA_VERSION):
        assert words in msg, (words, msg)
    assert ("newer dpverify" in msg) == newer
    assert not (tmp_path / "o").exists()


# The schema page ----------------------------------------------------------------------


def test_the_schema_page_is_generated_from_the_result_classes() -> None:
    page = (ROOT / DOC_PATH).read_text()
    assert page == schema_markdown(), f"{DOC_PATH} is stale: regenerate it with `{REGENERATE}`"
    for name in available_check_kinds():
        for key in get_kind(name).Result.schema_fields():
            assert f"| `{key}` |" in page, (name, key)
    assert DOC_PATH in (ROOT / "README.md").read_text()


def test_a_2x_run_compares_against_a_1x_baseline_by_its_typed_results(papers) -> None:
    from dpverify.report.writer import compare_baseline

    old = {**papers, "checks": papers["checks"][:40]}
    # The same results as schema 2.0 writes them: the typed fields, nulls left out.
    new_checks = [{**c, "metrics": json.loads(json.dumps(result_of(c).to_metrics()))}
                  for c in old["checks"]]
    assert any(c["metrics"] != o["metrics"] for c, o in zip(new_checks, old["checks"],
                                                            strict=True))
    assert compare_baseline({**old, "schema_version": SCHEMA_VERSION,
                             "checks": new_checks}, old) == []
    moved = [dict(c) for c in new_checks]
    i = next(j for j, c in enumerate(moved) if c["kind"] == "account")
    moved[i]["metrics"] = {**moved[i]["metrics"], "epsilon_accountant": 9.0}
    assert any("epsilon_accountant drifted" in line for line in compare_baseline(
        {**old, "checks": moved}, old))
