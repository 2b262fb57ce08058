"""The verification suite of paper 001 (suites/papers/001.toml): what it covers, the
declared utility regimes it relies on, and the verdicts of its cheapest privacy checks."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import tomllib

from algorithms.paper001 import ALGORITHMS
from algorithms.paper001.single_pass import single_pass_setup
from dpverify.checks import CheckSpec, RunContext, run_check
from dpverify.claims import Verdict
from dpverify.execution import build_problem
from dpverify.rates.theory import Theory, evaluate
from dpverify.rates.verify import resolve_theory
from dpverify.registry import resolve
from dpverify.suites import load_suite

SUITE = Path(__file__).resolve().parents[1] / "suites" / "papers" / "001.toml"
TARGETS = [f"{a.name}:{v}" for a in ALGORITHMS for v in a.variants]
RATED = [t for t in TARGETS if resolve(t).variant.utility is not None]  # not tree_prefix


def _entries() -> list[dict]:
    return tomllib.loads(SUITE.read_text())["check"]


def test_suite_loads_and_every_check_says_what_it_shows():
    suite = load_suite(SUITE)
    assert len(suite.checks) == len(_entries())
    for e in _entries():
        assert e.get("description"), e["id"]
        name, variant = e["target"].split(":")
        assert e["id"].startswith(f"{name}.{variant}.{e['kind'].split('.')[0]}"), e["id"]


@pytest.mark.parametrize("target", [t for t in TARGETS if resolve(t).variant.kind == "paper"])
def test_every_paper_variant_fails_by_independent_kinds(target):
    kinds = {e["kind"] for e in _entries() if e["target"] == target and e["expected"] == "FAIL"}
    # the ledger's accountant, replay of true differences, and the exact privacy loss
    assert {"account", "sensitivity", "audit"} <= kinds


@pytest.mark.parametrize("target", [t for t in TARGETS if resolve(t).variant.kind == "sound"])
def test_every_sound_variant_passes_the_whole_battery(target):
    mine = [e for e in _entries() if e["target"] == target]
    # privacy is never in question; rate checks state what the data resolve (see below)
    assert all(e["expected"] == "PASS" for e in mine if e["kind"] != "rate")
    assert {"account", "sensitivity", "audit", "agree"} <= {e["kind"] for e in mine}
    audits = [e for e in mine if e["kind"] == "audit"]
    assert all(e["options"]["confidence"] >= 0.999 for e in audits)
    assert any(e["kind"] == "rate" for e in _entries() if resolve(e["target"]).variant.kind
               == "sound")


def test_rate_checks_cover_each_regime_and_the_baseline_line():
    rates = {e["id"]: e for e in _entries() if e["kind"] == "rate"}
    # beta(n) of both single-pass oracles against Theorem 3.1 / 6.1's full three-term
    # bound, and of the multi-pass one, each with a validated window
    for cid in ("o2nc_fo.sound.rate.n.private", "o2nc_zo.sound.rate.n.private"):
        opts = rates[cid]["options"]
        assert opts["vary"] == "n" and opts["rate"].count("**(1/") == 3
    for cid in ("o2nc_fo.sound.rate.n.private", "o2nc_zo.sound.rate.n.private",
                "o2nc_fo.sound.rate.n.nonprivate", "o2nc_erm.sound.rate.n"):
        assert rates[cid]["options"]["saturation"] == 0.5
    # the rate expression is the theorem's bound: positive, falling in n, and its private
    # term the largest where the private regime holds
    e = rates["o2nc_fo.sound.rate.n.private"]
    p = resolve(e["target"]).algorithm.params("sound", e["params"])
    bound = [evaluate(e["options"]["rate"], {**p, "n": n}) for n in e["options"]["values"]]
    assert all(b > 0 for b in bound) and bound == sorted(bound, reverse=True)
    for n in e["options"]["values"]:
        q = {**p, "n": n, "Phi": p["x0_norm"] + 2}
        terms = [evaluate(t, q) for t in ("(Phi * sqrt(d) / (n * alpha))**(1/3)",
                                          "(Phi * d / (n * alpha * epsilon))**(1/2)",
                                          "(Phi**2 * d**1.5 / (n**2 * alpha**2 * epsilon))**(1/5)")]
        assert max(terms) == terms[1]
    # the multi-pass check runs Theorem 4.1's balanced beta, the regime its claim names
    e = rates["o2nc_erm.sound.rate.n"]
    th = Theory.from_claim(resolve(e["target"]).variant.utility)
    p = resolve(e["target"]).algorithm.params("sound", e["params"])
    assert p["beta"] == "balanced" and all(th.in_regime({**p, "n": n})
                                           for n in e["options"]["values"])
    # a sound variant's rate check FAILs only against a line other than its own theorem
    for e in rates.values():
        if e["expected"] == "FAIL":
            assert e["options"].get("theory"), e["id"]
    assert rates["o2nc_zo.sound.rate.d.zhang"]["options"]["theory"] == {"d": 0.75}
    # grid points lie inside the regime each check names
    for cid, inside in (("o2nc_fo.sound.rate.n.private", True),
                        ("o2nc_zo.sound.rate.n.private", True)):
        e = rates[cid]
        th = Theory.from_claim(resolve(e["target"]).variant.utility)
        p = resolve(e["target"]).algorithm.params("sound", e["params"])
        assert all(th.in_regime({**p, "n": n}) == inside for n in e["options"]["values"])
    # the non-private check names its own line (n^-1/3) and regime, which every point meets
    e = rates["o2nc_fo.sound.rate.n.nonprivate"]
    th = resolve_theory(e["target"], theory=e["options"]["theory"],
                        regime=e["options"]["regime"])
    assert th.exponents == {"n": pytest.approx(-1 / 3)}
    p = resolve(e["target"]).algorithm.params("sound", e["params"])
    assert all(th.in_regime({**p, "n": n}) for n in e["options"]["values"])
    private = Theory.from_claim(resolve(e["target"]).variant.utility)
    assert not any(private.in_regime({**p, "n": n}) for n in e["options"]["values"])


def test_the_sound_tree_is_charged_exactly_its_levels():
    """Coverage: noise set for floor(log2 Sigma) + 1 nodes per record buys exactly the claim
    on the ledger's per-record composition; one level fewer (planted) exceeds it."""
    out = _suite_check("tree_prefix.sound.account")
    assert out.verdict == Verdict.PASS
    assert out.metrics["epsilon_accountant"] == pytest.approx(1.0, abs=1e-3)
    out = _suite_check("tree_prefix.planted_levels.account")
    assert out.verdict == Verdict.FAIL and out.metrics["epsilon_accountant"] > 1.05


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
    else:
        # the quick scale fixes beta = 1.2; the exponents are about the balanced beta (None)
        assert not theory.in_regime(p) and theory.in_regime({**p, "beta": None})


def _suite_check(check_id: str, **options):
    """Run one check of the suite as written, with some options overridden (fewer trials)."""
    spec = next(c for c in load_suite(SUITE).checks if c.id == check_id)
    opts = {k: v for k, v in spec.options.items() if k != "_thorough"} | options
    spec = CheckSpec(spec.id, spec.kind, spec.target, spec.expected, spec.params, opts)
    return run_check(spec, RunContext(seed=0)).outcome


@pytest.mark.statistical
def test_whitebox_audit_proves_the_printed_tree_leaks_and_passes_the_sound_one():
    """The printed first-order oracle's period-end release is exact, so its privacy loss is
    infinite in every trial and the Clopper-Pearson bound exceeds 1 whatever the noise; the
    sound oracle is audited at confidence 0.999, a false alarm has probability <= 0.001
    (fixed seed)."""
    out = _suite_check("o2nc_fo.paper.audit.whitebox", trials=100)
    assert out.verdict == Verdict.FAIL
    assert out.metrics["bound"] == "cp" and out.metrics["epsilon_lower"] > 1.0
    out = _suite_check("o2nc_fo.sound.audit.whitebox", trials=100, neighbours="outlier")
    assert out.verdict == Verdict.PASS
    assert out.metrics["epsilon_lower"] <= out.metrics["epsilon_accountant"] <= 1.0 + 1e-6
    assert out.metrics["mu_replay_max"] > 0  # the canary is seen: the audit is not vacuous


def test_sensitivity_replay_names_the_exact_period_end_release():
    out = _suite_check("o2nc_zo.paper.sensitivity", neighbours=["fresh_direction"],
                       random_pairs=0)
    assert out.verdict == Verdict.FAIL
    assert out.metrics["query"] == "zo_exact" and math.isinf(out.metrics["worst_ratio"])
    spec = next(c for c in load_suite(SUITE).checks if c.id == "o2nc_zo.paper.sensitivity")
    t = resolve(spec.target)
    p = t.algorithm.params("paper", spec.params, scale="quick")
    sched = single_pass_setup(p, build_problem(t, p, 0).setting(), p["n"], p["d"], zero_order=True,
                              sound=False)["sched"]
    assert out.metrics["step"] % sched.Sigma == 0  # TREE(t mod Sigma) is empty there
