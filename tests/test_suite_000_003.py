"""The verification suites of papers 000 (DP non-convex DRO) and 003 (DP SOSP in minimax).

The suite files are data: these tests check that they load, that they hold the checks the
verification needs (every sound variant: account, sensitivity, audit, agreement; every paper
variant that breaks its claim: FAIL by two independent kinds; a rate check per paper), that
the utility claims they test are evaluable, and they run a fast subset of the checks at
quick scale with the suites' own seed (the full suites are ``dpverify run
suites/papers/000.toml`` and ``003.toml``, about a minute of CPU each).
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

from dpverify.checks.base import RunContext, run_check
from dpverify.checks.rates import get_metric
from dpverify.checks.rates.theory import Theory
from dpverify.cli.suites import load_suite, scaled
from dpverify.core.claims import Verdict
from dpverify.core.registry import resolve

SUITES = Path(__file__).resolve().parents[1] / "suites" / "papers"
PAPERS = {"000": ("dp_double_spider", "dp_recursive_spider", "dp_sgd_dro"),
          "003": ("dp_rgda", "dp_sgda", "sto_spider", "ada_dp_spider", "private_diff")}
SOUND_KINDS = {"account", "sensitivity", "audit", "agree"}


def _suite(paper: str):
    return load_suite(SUITES / f"{paper}.toml")


def _by_target(paper: str) -> dict[str, list]:
    out: dict[str, list] = collections.defaultdict(list)
    for spec in _suite(paper).checks:
        out[spec.target].append(spec)
    return out


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_every_check_is_named_after_its_target_and_described(paper):
    text = (SUITES / f"{paper}.toml").read_text()
    suite = _suite(paper)
    own = [s for s in suite.checks if not s.source.startswith("the battery of")]
    assert text.count("[[check]]") == len(own)
    assert text.count("\ndescription = ") == len(own)
    for spec in suite.checks:
        name, variant = spec.target.split(":")
        assert name in PAPERS[paper]
        assert spec.id.startswith(f"{name}.{variant}.{spec.kind}"), spec.id
        resolve(spec.target)


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_sound_variants_get_every_kind_of_check_and_pass_them(paper):
    # A rate check tests the paper's theorem, not our correction of its privacy: it may be
    # expected to FAIL on a sound variant when the theorem's own schedule cannot deliver
    # its rate (paper 003, Theorem 2), and its description must then say so.
    for target, specs in _by_target(paper).items():
        if resolve(target).variant.kind != "sound":
            continue
        assert SOUND_KINDS <= {s.kind for s in specs}, target
        # A certificate check may FAIL on a sound variant only as paper 003's r = 0
        # demonstration (notes C-U4): no perturbation, so the saddle is certified.
        demo = [s for s in specs if s.kind == "certificate" and s.expected != Verdict.PASS]
        assert all(s.params.get("r") == 0 and "r = 0" in s.description for s in demo), target
        # A protocol judges a table's comparative claims (paper 003, Table 2), not the
        # variant's privacy: it may FAIL on a sound variant.
        assert all(s.expected == Verdict.PASS for s in specs
                   if s.kind not in ("rate", "protocol") and s not in demo), target
        for s in specs:
            if s.kind == "rate" and s.expected != Verdict.PASS:
                assert "Theorem" in getattr(s, "description", ""), s.id
        audits = [s for s in specs if s.kind == "audit"]
        assert all(float(s.options["confidence"]) >= 0.99 for s in audits), target


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_a_violating_paper_variant_fails_two_independent_kinds(paper):
    for target, specs in _by_target(paper).items():
        if resolve(target).variant.kind != "paper":
            continue
        failing = {s.kind for s in specs if s.expected == Verdict.FAIL}
        if failing:
            assert len(failing & {"account", "sensitivity", "audit"}) >= 2, (target, failing)
        else:  # private as printed: every check of it must pass
            assert {"account", "sensitivity", "audit"} <= {s.kind for s in specs}, target


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_each_paper_has_a_rate_check_of_a_sound_variant(paper):
    rates = [s for s in _suite(paper).checks if s.kind == "rate" and s.expected == Verdict.PASS]
    assert any(resolve(s.target).variant.kind == "sound" for s in rates)


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_sampled_checks_grow_at_thorough_scale(paper):
    # Audits and rate fits are statistical: --scale thorough must buy them more runs (one
    # option away in [check.thorough]), while exact checks keep their quick settings.
    grow = {"audit": "trials", "rate": "seeds", "certificate": "trials", "protocol": "trials"}
    for spec in _suite(paper).checks:
        if spec.kind in grow:
            key = grow[spec.kind]
            quick, thorough = scaled(spec, "quick"), scaled(spec, "thorough")
            assert thorough.options[key] > quick.options[key], spec.id


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_thorough_scale_runs_the_same_problem(paper):
    # Pinned parameters: at --scale thorough an algorithm's own thorough sizes (n = 2000,
    # other schedules) must not replace the problem a check was designed and timed on.
    def effective(p: dict) -> dict:
        # T_max caps a theorem's schedule only (paper 003); with the given one it is unused
        return {k: v for k, v in p.items() if not (k == "T_max" and p["schedule"] == "given")}

    for spec in _suite(paper).checks:
        t = resolve(spec.target)
        quick, thorough = (t.algorithm.params(t.variant.name, spec.params, s)
                           for s in ("quick", "thorough"))
        if "schedule" in quick:
            quick, thorough = effective(quick), effective(thorough)
        swept = spec.options.get("vary") if spec.kind == "rate" else None
        if isinstance(swept, str):  # a rate check's grid sets it at every point
            quick.pop(swept)
            thorough.pop(swept)
        assert quick == thorough, spec.id


def test_the_utility_claims_are_evaluable_and_their_metrics_registered():
    # Importing the algorithms registers paper 003's second-order metrics; every declared
    # regime and log factor must evaluate on the variant's parameters (a string comparison
    # such as phi == 'empirical' would not).
    for paper in PAPERS.values():
        for name in paper:
            algo = resolve(name).algorithm
            for v in algo.variants.values():
                th = Theory.from_claim(v.utility)
                p = algo.params(v.name)
                assert isinstance(th.in_regime(p), bool)
                assert np.isfinite(th.log_factor(p))
                assert callable(get_metric(th.quantity))
    for metric in ("sosp_alpha", "grad_norm_phi", "min_eig_phi", "phi_value"):
        get_metric(metric)


# A fast subset, run as the suites run them (quick scale, root seed 0) -------------------

FAST = {
    "000": ["dp_double_spider.paper.account", "dp_double_spider.paper.sensitivity",
            "dp_sgd_dro.sound.audit.whitebox.eps0.1", "dp_sgd_dro.paper.audit.whitebox.eps0.1"],
    "003": ["dp_rgda.sound_population.rate.n", "dp_rgda.sound.certificate.escape_r0",
            "dp_rgda.sound.certificate.escape_r", "dp_rgda.sound.certificate.private"],
}


@pytest.mark.statistical
@pytest.mark.parametrize("paper,check_id", [(p, c) for p, ids in FAST.items() for c in ids])
def test_fast_subset_meets_its_expectation(paper, check_id):
    """Each listed check at the suites' quick scale and seed 0.

    Account, sensitivity and agreement verdicts are exact computations (no sampling). The
    white-box audits are statistical at confidence 0.99: a sound control fails with
    probability at most 0.01 under its claim; the paper audit at eps = 0.1 has its lower
    bound (0.32) three times the claim (0.1), a margin the fixed seed reproduces exactly.
    (Paper 003's privacy checks are its battery's, run by ``dpverify check``; only its
    suite's own checks are here.) The population rate check (Theorem 2 on its own
    schedule) fails with its upper interval end near -0.05 against the -0.35 the rule
    allows, at seeds 0, 1 and 2; a run that converged at the claimed rate would pass it
    with probability about 0.975 (one-sided interval), so the check can fail the other
    way. Certificate checks: r = 0 is
    deterministic (every run certifies the saddle); the r > 0 and private ones see 1.5-5%
    false certificates against delta1 + delta2 = 0.2 (upper 95% bounds 0.04-0.08 at seeds
    0-2), so a FAIL needs a lower bound above 0.2, probability far below 0.05 at these rates.
    """
    spec = next(s for s in _suite(paper).checks if s.id == check_id)
    if spec.kind == "agree":
        pytest.importorskip("torch")
    res = run_check(scaled(spec, "quick"), RunContext(seed=0))
    assert res.outcome.verdict == spec.expected, res.outcome.message
    m = res.outcome.metrics
    if spec.kind == "audit":
        assert m["epsilon_lower"] <= m["epsilon_accountant"] or spec.expected == Verdict.FAIL
    if spec.kind == "sensitivity" and spec.expected == Verdict.FAIL:
        assert m["worst_ratio"] > 1.0
    if spec.kind == "rate" and spec.expected == Verdict.FAIL:
        assert m["ci_high"] > spec.options["tolerance"] + m["theory"]
    if spec.kind == "certificate":
        # escaping changes where outputs sit: the saddle's -0.75 only without perturbation
        lam = res.outcome.evidence["summaries"]["min_eig_phi"]["certified"]["median"]
        assert (lam < -0.7) == (spec.expected == Verdict.FAIL), lam


# Paper 003's claims register ----------------------------------------------------------------


def _test_names(path: Path) -> set[str]:
    import ast

    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_003_register_names_checks_that_exist():
    """Every check id of the register is a generated battery check or a suite check of
    suites/papers/003.toml, and every unit test it names exists; utility entries cover
    Theorems 1 and 2 in n, d and epsilon."""
    from algorithms.paper003 import REGISTER

    ids = {s.id for s in _suite("003").checks}
    root = SUITES.parents[1]
    for entry in REGISTER:
        for c in entry.checks:
            if c.startswith("test:"):
                path, _, name = c[len("test:"):].partition("::")
                assert name in _test_names(root / path), c
            else:
                assert c in ids, (entry.id, c)
    assert len({e.id for e in REGISTER}) == len(REGISTER)
    for theorem in ("T1", "T2"):
        variables = {e.variable for e in REGISTER
                     if e.kind == "utility" and e.id.startswith(theorem + ".") and e.checks}
        assert {"n", "d", "epsilon"} <= variables, theorem


def test_003_privacy_findings_have_two_check_kinds_or_a_reason():
    """A finding of a privacy defect is detected by two independent check kinds (the two
    audits are one kind), or the register entry of the defect says why only one can see
    it. Findings no check kind detects are correctness defects (rate checks, unit tests) or
    documented as not changing any verdict."""
    from algorithms.paper003 import ALGORITHMS, REGISTER

    reasons = {e.id: e.untestable for e in REGISTER}
    one_kind = {"NO_COMPOSITION": "P-6", "ALG3_NOISE": "P-7"}
    import algorithms.paper003 as pkg

    names = {id(v): k for k, v in vars(pkg).items() if type(v).__name__ == "Finding"}
    privacy = {"account", "sensitivity", "setting", "audit"}
    for algo in ALGORITHMS:
        for v in algo.variants.values():
            for f in v.findings:
                kinds = {k.partition(".")[0] for k in f.detected_by} & privacy
                if len(kinds) == 1:
                    assert reasons[one_kind[names[id(f)]]], names[id(f)]
                elif not kinds:
                    assert set(f.detected_by) <= {"rate"}, names[id(f)]
