"""The verification suite of paper 004 (suites/papers/004.toml): its shape, and its verdicts.

The suite itself is run by ``dpverify run suites/papers/004.toml``; these tests pin what it
must contain (each printed algorithm found to leak is failed by two independent kinds of
check; each corrected variant faces every kind) and that its two audit FAILs do not hinge
on the suite's root seed.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import array_api_compat.numpy as xp
import numpy as np
import pytest
import tomllib

from algorithms.paper004 import ALGORITHMS
from algorithms.paper004.canaries import opposed_n100_d5
from dpverify.audit import audit
from dpverify.claims import Verdict
from dpverify.execution import build_problem
from dpverify.registry import resolve
from dpverify.suites import load_suite

SUITE = Path(__file__).resolve().parents[1] / "suites" / "papers" / "004.toml"
# The printed algorithms whose privacy claim the notes and findings say is broken.
LEAKING = ("kl_spider:paper", "adaptive_noisy_gd:paper", "adaptive_noisy_gd_select:paper")
PRIVACY_KINDS = ("account", "sensitivity", "audit")
# Algorithms whose utility theorem has a rate check for every sound variant.
RATED = ("kl_spider", "adaptive_noisy_gd", "noisy_gd_004", "prox_point_004")


def _checks() -> list[dict]:
    return tomllib.loads(SUITE.read_text())["check"]


def test_suite_loads_and_every_check_is_named_and_described():
    suite = load_suite(SUITE)
    assert len(suite.checks) == len(_checks())
    for c in _checks():
        name, variant = c["target"].split(":")
        # ids read algorithm.variant.kind...: the report groups and sorts by them.
        assert c["id"].startswith(f"{name}.{variant}."), c["id"]
        assert c.get("description", "").strip(), c["id"]
        assert "\n" not in c["description"]


def test_each_leaking_paper_variant_fails_two_independent_checks():
    """Two kinds of evidence (e.g. sensitivity replay and a white-box audit) per finding."""
    kinds = defaultdict(set)
    for c in _checks():
        if c["expected"] == "FAIL" and "claim" in c.get("options", {}):
            # judged against a stricter claim than the run's own (the lower-bound demo):
            # not a finding about the variant
            assert c["kind"] == "lower_bound", c["id"]
            assert c["options"]["claim"]["rho"] < c["params"]["rho"], c["id"]
            continue
        if c["expected"] == "FAIL":
            kinds[c["target"]].add(c["kind"])
    for target in LEAKING:
        assert len(kinds[target] & set(PRIVACY_KINDS)) >= 2, (target, kinds[target])
    # Nothing else is expected to fail: the other paper variants are private as printed.
    assert set(kinds) == set(LEAKING)


def test_every_sound_variant_faces_every_kind_of_check():
    by_target = defaultdict(set)
    for c in _checks():
        if c["expected"] == "PASS":
            by_target[c["target"]].add(c["kind"])
    for algo in ALGORITHMS:
        for v in algo.variants.values():
            if v.kind != "sound":
                continue
            target = f"{algo.name}:{v.name}"
            need = {"account", "sensitivity", "audit", "agree"}
            if algo.name in RATED:
                need.add("rate")
            assert need <= by_target[target], (target, need - by_target[target])


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


def test_kl_spider_exponents_in_n_d_and_rho_are_checked_at_two_kappas():
    """Theorem 1's three exponents (n^-kappa, d^(kappa/2), rho^(-kappa/2)) at kappa = 2 and 1.5."""
    varied = defaultdict(set)
    for c in _checks():
        if c["kind"] == "rate" and c["target"].startswith("kl_spider:"):
            varied[c["target"]].add(c["options"]["vary"])
    for target in ("kl_spider:sound", "kl_spider:sound_kappa1p5"):
        assert varied[target] == {"n", "d", "rho"}, (target, varied[target])


def test_main_term_check_of_theorem_4_lies_in_its_regime_at_every_grid_point():
    """Theorem 4's main term dominates only where d >= (n sqrt(rho))^(kappa/2); the check
    that claims to test it must sit there at every n, not only on average."""
    from dpverify.rates.theory import Theory

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
    """The suite's two white-box FAILs, rerun at root seed 11 with the suite's settings.

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
