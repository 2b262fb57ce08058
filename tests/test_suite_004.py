"""The verification of paper 004: its suite (suites/papers/004.toml), battery and register.

The suite itself is run by ``dpverify run suites/papers/004.toml``; these tests pin what it
must contain (only what the battery does not check; every rate a claim states, or the
register's reason; each finding seen by two kinds of check, or the register's reason;
every item of the notes in the register) and that the audit FAILs do not hinge on the
root seed.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import array_api_compat.numpy as xp
import numpy as np
import pytest
import tomllib

from algorithms.paper004 import ALGORITHMS, REGISTER
from algorithms.paper004.canaries import opposed_n100_d5
from dpverify.checks.audit import audit
from dpverify.checks.conformance import check_targets
from dpverify.cli.suites import load_suite
from dpverify.core.claims import Verdict
from dpverify.core.registry import resolve
from dpverify.execution.trials import build_problem

SUITE = Path(__file__).resolve().parents[1] / "suites" / "papers" / "004.toml"
TESTS = Path(__file__).resolve().parent
# What the suite keeps beside the battery (a rate's theory, a lower bound, an MIA game).
OWN_KINDS = {"rate", "lower_bound", "mia"}
PRIVACY_KINDS = ("account", "sensitivity", "audit")
# Findings one check kind alone can see, and the register entry that says why.
ONE_KIND = {"Appendix D.6 (line 843) takes the selection": "F2.select.transcript"}
# Rates in a variable of a claim that no check fits, and the register entry that says why.
UNFITTED = {("kl_spider:sound_kappa1", "d"): "T1.d.k1",
            ("adaptive_noisy_gd:sound_kappa1", "d"): "T4.d.k1",
            ("adaptive_noisy_gd_select:sound", "d"): "T5.d"}
# The notes' section 7 and violation list (4.3), each of which the register must carry.
NOTES_ITEMS = ({f"S{i}" for i in range(1, 10)} | {"A1", "A2"}
               | {f"U{i}" for i in (1, 2, 3, 4, 5, 7, 8, 10, 11)}
               | {f"P{i}" for i in range(1, 9)} | {"F2.alg1", "F2.alg3", "F2.select"})


def _checks() -> list[dict]:
    return tomllib.loads(SUITE.read_text())["check"]


def _register() -> dict:
    return {e.id: e for e in REGISTER}


def test_suite_holds_only_what_the_battery_does_not():
    suite = load_suite(SUITE)
    battery = [c.id for c in check_targets([a.name for a in ALGORITHMS])]
    assert [c.id for c in suite.checks[:len(battery)]] == battery
    assert len(suite.checks) == len(battery) + len(_checks())
    for c in _checks():
        assert c["kind"] in OWN_KINDS, c["id"]
        name, variant = c["target"].split(":")
        # ids read algorithm.variant.kind...: the report groups and sorts by them.
        assert c["id"].startswith(f"{name}.{variant}."), c["id"]
        assert c.get("description", "").strip() and "\n" not in c["description"], c["id"]


def test_every_finding_has_two_check_kinds_or_a_stated_reason():
    """Each privacy finding of a printed algorithm is seen by two independent kinds of check
    (a finding carried by several variants counts the kinds over all of them), or the
    register says why one kind alone can see it."""
    kinds: dict[str, set[str]] = defaultdict(set)
    for algo in ALGORITHMS:
        for v in algo.variants.values():
            for f in v.findings:
                if f.detected_by:
                    kinds[f.summary[:80]] |= {b.partition(".")[0] for b in f.detected_by}
    assert kinds
    register = _register()
    for summary, found in kinds.items():
        assert found <= set(PRIVACY_KINDS), (summary, found)
        if len(found) >= 2:
            continue
        (why,) = [e for k, e in ONE_KIND.items() if summary.startswith(k)]
        assert register[why].untestable, why


def _exists(check: str, ids: set[str]) -> bool:
    if not check.startswith("test:"):
        return check in ids
    path, _, name = check[len("test:"):].partition("::")
    return f"def {name}(" in (TESTS.parent / path).read_text()


def test_register_names_only_checks_that_exist_and_covers_the_notes():
    ids = {c.id for c in load_suite(SUITE).checks}
    register = _register()
    assert len(register) == len(REGISTER)  # ids unique
    for e in REGISTER:
        assert e.checks or e.untestable, e.id
        for check in e.checks:
            assert _exists(check, ids), (e.id, check)
    assert NOTES_ITEMS <= set(register), NOTES_ITEMS - set(register)


def test_every_rate_a_claim_states_is_fitted_or_the_register_says_why():
    """Theorems 1, 2, 4, 5 and 9 in every variable their claims name (n, d, rho, L1~), at
    every kappa a variant states them for."""
    varied = defaultdict(set)
    for c in _checks():
        if c["kind"] == "rate":
            varied[c["target"]].add(c["options"]["vary"])
    register = _register()
    for algo in ALGORITHMS:
        for v in algo.variants.values():
            if v.kind != "sound" or v.utility is None:
                continue
            target = f"{algo.name}:{v.name}"
            for var in v.utility.exponents:
                if var in varied[target]:
                    continue
                entry = register[UNFITTED[(target, var)]]
                assert entry.untestable and entry.variable == var, (target, var)


def test_declared_exponents_of_the_rate_checks_follow_kappa():
    """The rate checks test the claims' own exponents (Theorem 1: n^-kappa d^(kappa/2)
    rho^(-kappa/2); Theorem 4 in its main-term regime: n^(-2 kappa/(4 - kappa))) unless they
    say which term they test."""
    for c in _checks():
        if c["kind"] != "rate":
            continue
        claim = resolve(c["target"]).variant.utility
        theory = c["options"].get("theory")
        if theory is None:  # the claim's exponents
            assert c["options"]["vary"] in claim.exponents
        else:
            # Theorem 4's second term, (n sqrt(rho))^(-kappa/2), outside the main regime.
            kappa = resolve(c["target"]).algorithm.params(
                resolve(c["target"]).variant.name)["kappa"]
            assert theory == {"n": -kappa / 2}


def test_main_term_check_of_theorem_4_lies_in_its_regime_at_every_grid_point():
    """Theorem 4's main term dominates only where d >= (n sqrt(rho))^(kappa/2); the check
    that claims to test it must sit there at every n, not only on average."""
    from dpverify.checks.rates.theory import Theory

    (c,) = [c for c in _checks() if c["id"].endswith("rate.n.main")]
    t = resolve(c["target"])
    theory = Theory.from_claim(t.variant.utility)
    assert theory.exponent("n") == pytest.approx(-2 * 1.5 / (4 - 1.5))
    for n in c["options"]["values"]:
        p = t.algorithm.params(t.variant.name, {**c["params"], "n": n})
        assert theory.in_regime(p), (n, p["d"], p["rho"])


def test_rate_checks_pin_what_the_thorough_scale_would_change():
    """--scale thorough raises seeds only: every rate check's fixed sizes are the same at
    both scales (the algorithms' thorough defaults would otherwise raise n or T_in)."""
    for c in _checks():
        if c["kind"] != "rate":
            continue
        t = resolve(c["target"])
        vary = c["options"]["vary"]
        quick = t.algorithm.params(t.variant.name, c.get("params", {}), "quick")
        thorough = t.algorithm.params(t.variant.name, c.get("params", {}), "thorough")
        changed = {k for k in quick if quick[k] != thorough[k]} - {vary}
        assert not changed, (c["id"], changed)


def test_opposed_pair_moves_a_mean_gradient_by_twice_the_add_remove_sensitivity():
    t = resolve("kl_spider:paper")
    p = t.algorithm.params("paper", {"n": 100})
    problem = build_problem(t, p, 0)
    loss, L0 = problem.loss, problem.info["lipschitz"]
    D, Dp = opposed_n100_d5()
    W = np.random.default_rng(0).uniform(-1.0, 1.0, (50, 5))
    ones = np.ones((50, 100))
    gap = (loss.grad_sum(W, D.X, D.y, ones, xp) - loss.grad_sum(W, Dp.X, Dp.y, ones, xp)) / 100
    np.testing.assert_allclose(np.linalg.norm(gap, axis=1), 2 * L0 / 100, rtol=1e-3)


@pytest.mark.statistical
def test_the_audit_fails_of_the_suite_hold_at_another_root_seed():
    """The battery's two white-box FAILs, rerun at root seed 11 with its settings.

    Each verdict is a one-sided test at confidence 0.999 whose true mu (2.0 for KL Spider,
    about 2.0 for Algorithm 3 from the data centre) is far above the claim's 1.505; over
    root seeds 0-8 the bounds were 1.82-1.95 and 1.71-1.88. A FAIL here is missed with
    probability well below 1e-3 per audit.
    """
    spider = audit("kl_spider:paper", mode="whitebox", params={"n": 100}, seed=11,
                   neighbours="algorithms.paper004.canaries:opposed_n100_d5", trials=300,
                   confidence=0.999)
    assert spider.verdict == Verdict.FAIL, spider.message()
    adaptive = audit("adaptive_noisy_gd:paper", mode="whitebox", seed=11,
                     params={"n": 1000, "d": 1, "w0_distance": 0.0},
                     neighbours="algorithms.paper004.canaries:opposed_n1000_d1", trials=200,
                     confidence=0.999)
    assert adaptive.verdict == Verdict.FAIL, adaptive.message()
    # The replayed mean loss is the KL divergence, which rho-zCDP bounds by rho.
    assert adaptive.details["kl_estimate"] > 1.5 * 1.0
