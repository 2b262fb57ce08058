"""A check kind owns its vertical: the report words, reproduces and draws a kind's records
through the kind alone, so a new kind needs no change to the report."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from dpverify.checks.base import CHECK_KINDS, CheckKind, Options, Outcome, get_kind, register_kind
from dpverify.core.claims import Verdict
from dpverify.core.prose import Statement
from dpverify.report.paper import build_document, reproduce, statement, summary_rows
from dpverify.report.plots import check_plots


@dataclass(frozen=True)
class _TallyOptions(Options):
    count: int = 3


class _Tally(CheckKind):
    name = "tally_for_test"
    Options = _TallyOptions
    column = "privacy"

    def run(self, exp: Any, options: _TallyOptions) -> Outcome:  # pragma: no cover
        return Outcome(Verdict.PASS, {"count": options.count})

    def statement(self, check: Mapping[str, Any], claim: str,
                  info: Mapping[str, Any] | None) -> Statement:
        return Statement(f"Claims {claim}.", f"Counted {check['metrics']['count']}.", "Exact.")

    def command(self, check: Mapping[str, Any]) -> list[str] | None:
        return ["dpverify", "tally", str(check.get("target"))]


@pytest.fixture
def tally() -> Iterator[CheckKind]:
    register_kind(_Tally)
    yield get_kind("tally_for_test")
    CHECK_KINDS.pop("tally_for_test")


RECORD = {"id": "t.tally", "kind": "tally_for_test", "target": "noisy_gd:sound",
          "verdict": "FAIL", "expected": "PASS", "met": False, "params": {"T": 5},
          "metrics": {"count": 7},
          "claim": {"epsilon": 1.0, "delta": 1e-5, "relation": "replace_one"}}


def test_the_report_words_a_record_in_its_kinds_words(tally: CheckKind) -> None:
    st = statement(RECORD)
    assert st.measured == "Counted 7." and "ε = 1" in st.claimed


def test_the_reproducing_command_comes_from_the_kind(tally: CheckKind) -> None:
    cmds = reproduce(RECORD, {"seed": 4, "scale": "quick"})
    assert cmds == ["dpverify tally noisy_gd:sound --param T=5 --seed 4 --scale quick"]


def test_the_summary_counts_a_kind_in_the_column_it_declares(tally: CheckKind) -> None:
    row = summary_rows(build_document({"checks": [RECORD]}))[0]
    assert row.privacy == ("FAIL", 0, 1) and row.other is None


def test_a_kind_without_figures_gets_none_and_an_unknown_kind_is_worded_generically(
        tally: CheckKind) -> None:
    assert check_plots(RECORD) == []
    st = statement({"kind": "no_such_kind", "message": "it ran", "metrics": {}})
    assert st.measured == "it ran"


def test_every_builtin_kind_names_only_figures_the_report_draws() -> None:
    from dpverify.report.plots import FIGURES

    get_kind("account")  # loads the built-in kinds
    for kind in CHECK_KINDS.values():
        assert set(kind.figures) <= set(FIGURES), kind.name
        assert kind.column in {"privacy", "rate", "agreement", "other"}, kind.name
