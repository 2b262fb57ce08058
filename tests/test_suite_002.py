"""The suite and the claims register of paper 002: their shape, not their verdicts.

The battery's checks of every variant are generated from the algorithms' declarations; the
suite file adds only rates, gradient complexity, the figure protocols and a membership
game. The register must name checks that exist.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from algorithms.paper002 import ALGORITHMS, REGISTER
from dpverify.cli.suites import load_suite

SUITE = Path(__file__).resolve().parents[1] / "suites" / "papers" / "002.toml"
BATTERY_KINDS = {"account", "sensitivity", "audit", "agree", "outputs", "setting",
                 "determinism"}


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITE)


def test_suite_holds_what_the_battery_does_not(suite):
    import tomllib

    raw = tomllib.loads(SUITE.read_text(encoding="utf-8"))
    assert set(raw["suite"]["battery"]) == {a.name for a in ALGORITHMS}
    for entry in raw["check"]:
        assert entry["kind"] not in BATTERY_KINDS, entry["id"]
        assert entry.get("description"), entry["id"]
    generated = [s for s in suite.checks if s.source.startswith("the battery")]
    variants = sum(len(a.variants) for a in ALGORITHMS)
    assert len(generated) >= 8 * variants


def test_every_utility_claim_evaluates_at_its_variants_parameters():
    # Rate checks evaluate a claim's regime and log factors as expressions in the grid
    # parameters; prose there stops every rate check.
    from dpverify.checks.rates.theory import Theory

    for algo in ALGORITHMS:
        for name, variant in algo.variants.items():
            th = Theory.from_claim(variant.utility)
            p = algo.params(name)
            assert th.log_factor(p) > 0, (algo.name, name)
            assert isinstance(th.in_regime(p), bool), (algo.name, name)


def test_register_names_only_checks_that_exist(suite):
    """Every check of the register is a battery or suite check of the paper, or a test of
    tests/test_paper002.py; every entry has a check or a reason."""
    import ast

    root = SUITE.parents[2]
    tree = ast.parse((root / "tests" / "test_paper002.py").read_text(encoding="utf-8"))
    tests = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}
    ids = {s.id for s in suite.checks}
    for entry in REGISTER:
        assert entry.checks or entry.untestable, entry.id
        for check in entry.checks:
            if check.startswith("test:"):
                path, _, name = check[len("test:"):].partition("::")
                assert path == "tests/test_paper002.py", check
                assert name in tests, check
            else:
                assert check in ids, (entry.id, check)
    assert len({e.id for e in REGISTER}) == len(REGISTER)
