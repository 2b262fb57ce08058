"""Claims registers in the report: statuses read from the checks, coverage, rendering."""

from __future__ import annotations

import pytest

from dpverify.core.claims import RegisterEntry
from dpverify.report.html import render_html
from dpverify.report.markdown import render_markdown
from dpverify.report.paper import build_document
from dpverify.report.registers import coverage, register_rows

ENTRIES = [
    RegisterEntry("P1", "sound variant private", "Thm 1", "privacy",
                  ("noisy_gd.sound.account",)).to_dict(),
    RegisterEntry("V1", "printed noise too small", "line 10", "violation",
                  ("noisy_gd.planted_half_steps.account",)).to_dict(),
    RegisterEntry("U1", "rate in n", "Thm 2", "utility", ("noisy_gd.sound.rate.n",),
                  variable="n").to_dict(),
    RegisterEntry("U2", "rate in d", "Thm 2", "utility", (), variable="d",
                  untestable="d = 1e4 needed: 3e9 steps").to_dict(),
    RegisterEntry("I1", "schedule invariant", "Alg 1", "invariant",
                  ("test:tests/test_x.py::test_y",)).to_dict(),
    RegisterEntry("X1", "table 2", "Table 2", "experiment", ("missing.check",)).to_dict(),
]


def _check(cid, verdict, expected=None, kind="account", message=""):
    target = "noisy_gd:" + cid.split(".")[1]
    return {"id": cid, "kind": kind, "target": target, "verdict": verdict,
            "expected": expected or verdict, "met": expected in (None, verdict),
            "metrics": {}, "message": message}


CHECKS = [_check("noisy_gd.sound.account", "PASS"),
          _check("noisy_gd.planted_half_steps.account", "FAIL"),
          _check("noisy_gd.sound.rate.n", "INCONCLUSIVE", kind="rate",
                 message="every point saturated")]


def test_statuses_follow_the_checks():
    rows = register_rows(ENTRIES, CHECKS)
    assert [r.status for r in rows] == ["verified", "confirmed", "inconclusive",
                                        "not testable", "unit test", "not run"]
    assert "saturated" in rows[2].detail and "3e9" in rows[3].detail
    cov = coverage(rows)
    assert (cov["entries"], cov["decided"]) == (6, 5)
    unmet = [dict(CHECKS[0], verdict="FAIL", met=False)]
    assert register_rows(ENTRIES[:1], unmet)[0].status == "unexpected"


def test_a_refuted_claim_is_a_fail_met_as_expected():
    row = register_rows(ENTRIES[2:3], [_check("noisy_gd.sound.rate.n", "FAIL", kind="rate")])
    assert row[0].status == "refuted"


@pytest.mark.parametrize("render", [render_html, render_markdown])
def test_the_paper_section_opens_with_its_register(render):
    rep = {"scale": "quick", "seed": 0, "suites": [], "summary": {}, "checks": CHECKS,
           "registers": {"baselines": ENTRIES}}
    doc = build_document(rep)
    assert [len(g.register) for g in doc.groups] == [6]
    page = render(rep)
    assert "Claims register" in page and "5 of 6 claims" in page and "(83%)" in page
    group = page.index("Claims register")
    first_algorithm = page.index('class="algorithm"') if render is render_html else \
        page.index("### noisy_gd")
    assert group < first_algorithm
