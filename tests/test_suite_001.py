"""The verification suite of paper 001 (suites/papers/001.toml), the battery declarations of
its algorithms and its claims register: what they cover and what they claim, without
running the checks (the suite runs them)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
import tomllib

from algorithms.paper001 import ALGORITHMS, REGISTER
from dpverify.checks.conformance import battery_specs
from dpverify.checks.rates.theory import Theory, evaluate
from dpverify.checks.rates.verify import resolve_theory
from dpverify.cli.suites import load_suite
from dpverify.core.claims import Verdict
from dpverify.core.registry import resolve

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "papers" / "001.toml"
TARGETS = [f"{a.name}:{v}" for a in ALGORITHMS for v in a.variants]
RATED = [t for t in TARGETS if resolve(t).variant.utility is not None]  # not tree_prefix
KINDS = ("account", "sensitivity", "audit")


def _entries() -> list[dict]:
    return tomllib.loads(SUITE.read_text())["check"]


def _suite_ids() -> set[str]:
    return {c.id for c in load_suite(SUITE).checks}


def test_suite_holds_the_battery_and_only_what_it_does_not():
    suite = load_suite(SUITE)
    own = _entries()
    assert len(suite.checks) > len(own)  # the battery's checks come first
    battery_ids = {s.id for t in TARGETS for s in battery_specs(resolve(t))}
    assert battery_ids <= {c.id for c in suite.checks}
    for e in own:
        assert e["kind"] == "rate" and e.get("description"), e["id"]
        name, variant = e["target"].split(":")
        assert e["id"].startswith(f"{name}.{variant}.rate"), e["id"]


@pytest.mark.parametrize("target", [t for t in TARGETS if resolve(t).variant.kind != "sound"])
def test_every_flawed_variant_fails_by_two_kinds(target):
    """FAIL is derived from the findings: each flawed variant fails at least two kinds."""
    specs = battery_specs(resolve(target))
    failing = {s.kind for s in specs if s.expected == Verdict.FAIL}
    assert len(failing & set(KINDS)) >= 2, failing


@pytest.mark.parametrize("target", [t for t in TARGETS if resolve(t).variant.kind == "sound"])
def test_sound_variants_expect_every_battery_check_to_pass(target):
    specs = battery_specs(resolve(target))
    assert {s.kind for s in specs} >= {*KINDS, "agree", "outputs", "setting"}
    assert all(s.expected == Verdict.PASS for s in specs)
    audits = [s for s in specs if s.kind == "audit" and s.options["mode"] == "whitebox"]
    assert all(s.options["confidence"] >= 0.999 for s in audits)


# A finding seen by one check kind only must say why in the register (its entry's reason).
_ONE_KIND = {"Lemma 3.4": "F5", "Lemma 6.3": "F5"}


@pytest.mark.parametrize("target", TARGETS)
def test_every_privacy_finding_has_two_kinds_or_a_reason(target):
    register = {e.id: e for e in REGISTER}
    for f in resolve(target).variant.findings:
        kinds = {k.split(".")[0] for k in f.detected_by} & set(KINDS)
        if not kinds or len(kinds) >= 2:
            continue
        entry = next(v for k, v in _ONE_KIND.items() if f.summary.startswith(k))
        assert register[entry].untestable, entry


def test_register_names_only_checks_and_tests_that_exist():
    ids = _suite_ids()
    tests: dict[str, set[str]] = {}
    for e in REGISTER:
        assert e.checks or e.untestable, e.id
        for c in e.checks:
            if c.startswith("test:"):
                path, _, name = c[len("test:"):].partition("::")
                if path not in tests:
                    tree = ast.parse((ROOT / path).read_text())
                    tests[path] = {n.name for n in ast.walk(tree)
                                   if isinstance(n, ast.FunctionDef)}
                assert name in tests[path], c
            else:
                assert c in ids, (e.id, c)
    assert len({e.id for e in REGISTER}) == len(REGISTER)


def test_register_has_every_theorem_in_every_variable_it_names():
    utility = {(e.id.rsplit(".", 1)[0], e.variable) for e in REGISTER if e.kind == "utility"}
    for theorem in ("T3.1", "T6.1", "T4.1"):
        for variable in ("n", "d", "epsilon"):
            assert (theorem, variable) in utility, (theorem, variable)
    kinds = {e.kind for e in REGISTER}
    assert {"privacy", "violation", "utility", "invariant"} <= kinds
    # every violation of the notes' Section 4 list has an entry (F1-F9)
    assert {f"F{i}" for i in range(1, 10)} <= {e.id.split(".")[0] for e in REGISTER}


def _params(e: dict) -> dict:
    return resolve(e["target"]).algorithm.params(resolve(e["target"]).variant.name,
                                                 e["params"])


def test_rate_checks_read_the_theorems_bound_inside_its_regime():
    rates = {e["id"]: e for e in _entries()}
    full = [cid for cid, e in rates.items() if e["options"].get("rate") and "theory"
            not in e["options"]]
    for cid in full:  # the claim's own theory, a window validated on the full bound
        e = rates[cid]
        assert e["options"]["saturation"] == 0.5, cid
        th = Theory.from_claim(resolve(e["target"]).variant.utility)
        p = _params(e)
        vary = e["options"]["vary"]
        assert all(th.in_regime({**p, vary: v}) for v in e["options"]["values"]), cid
        bound = [evaluate(e["options"]["rate"], {**p, vary: v}) for v in e["options"]["values"]]
        assert all(b > 0 and math.isfinite(b) for b in bound), cid
    # the private term is the largest of Theorem 3.1's three where the grid runs
    e = rates["o2nc_fo.sound.rate.n.private"]
    for n in e["options"]["values"]:
        q = {**_params(e), "n": n, "Phi": 3.0}
        terms = [evaluate(t, q) for t in ("(Phi * sqrt(d) / (n * alpha))**(1/3)",
                                          "(Phi * d / (n * alpha * epsilon))**(1/2)",
                                          "(Phi**2 * d**1.5 / (n**2 * alpha**2 * epsilon))**(1/5)")]
        assert max(terms) == terms[1]
    # checks against a line the claim does not state say so, and only they may FAIL
    for cid, e in rates.items():
        if e.get("expected") == "FAIL":
            assert e["options"].get("theory"), cid
    nonpriv = rates["o2nc_fo.sound.rate.n.nonprivate"]
    th = resolve_theory(nonpriv["target"], theory=nonpriv["options"]["theory"],
                        regime=nonpriv["options"]["regime"])
    assert all(th.in_regime({**_params(nonpriv), "n": n})
               for n in nonpriv["options"]["values"])
    # the comparison runs both algorithms on one grid
    assert rates["ztc_zo.sound.rate.d"]["options"]["values"] == \
        rates["o2nc_zo.sound.rate.d"]["options"]["values"]


@pytest.mark.parametrize("target", RATED)
def test_declared_regimes_are_expressions_a_rate_check_evaluates(target):
    t = resolve(target)
    theory = Theory.from_claim(t.variant.utility)
    p = t.algorithm.params(t.variant.name)
    assert theory.in_regime(p) in (True, False)
    assert math.isfinite(theory.log_factor(p))
    if target.startswith(("o2nc_zo", "o2nc_fo")):
        # n = 200 > d^2 / (alpha eps^3) = 90: the non-private term dominates at eps = 1 ...
        assert not theory.in_regime(p)
        # ... and the private one at eps = 0.5 (720), unless T is pinned (not the theorem's)
        assert theory.in_regime({**p, "epsilon": 0.5})
        assert not theory.in_regime({**p, "epsilon": 0.5, "T": 50})
    elif target.startswith("ztc_zo"):
        # n <= d^(5/2) / (alpha eps^3) = 156 at d = 3, eps = 1: not at n = 200
        assert not theory.in_regime(p) and theory.in_regime({**p, "epsilon": 0.5})
    else:
        # the quick scale fixes beta = 1.2; the exponents are about the balanced beta (None)
        assert not theory.in_regime(p) and theory.in_regime({**p, "beta": None})
