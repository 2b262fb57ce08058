"""Imports in dpverify only run downward through its layers.

The layers, lowest first; a module may import from its own layer and the layers below it,
never from one above. A module belongs to the layer whose longest package prefix it has.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("dpverify.core",)),
    ("stats", ("dpverify.stats",)),
    ("accounting", ("dpverify.accounting",)),
    ("mechanisms", ("dpverify.mechanisms",)),
    ("execution", ("dpverify.execution",)),
    ("checks", ("dpverify.checks",)),
    ("report", ("dpverify.report",)),
    ("integrations", ("dpverify.torch", "dpverify.adapters")),
    ("front ends", ("dpverify.cli", "dpverify.pytest_plugin")),
]
ROOT = Path(__file__).resolve().parents[1] / "dpverify"


def layer_of(module: str) -> int | None:
    """Index of ``module``'s layer in :data:`LAYERS`; ``None`` for the bare package."""
    best: tuple[int, int] | None = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (rank, len(p))
    return None if best is None else best[0]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str) -> list[tuple[int, str]]:
    """Every dpverify module ``source`` imports (at any depth, in functions too), by line.

    ``from P import name`` counts as importing ``P.name`` (a submodule, or a name of P;
    either way P's layer or the submodule's is reached)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing package
                pkg = module.split(".")[: -node.level] if node.level else []
                base = ".".join([*pkg, base] if base else pkg)
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return [(line, m) for line, m in out if m.split(".")[0] == "dpverify"]


def upward_imports(root: Path = ROOT) -> list[str]:
    """``file:line: importer (layer) -> imported (layer)`` for every import that runs up."""
    found = []
    for path in sorted(root.rglob("*.py")):
        mod = module_name(path, root)
        here = layer_of(mod)
        if here is None:
            continue
        for line, target in imported_modules(path.read_text(), mod):
            there = layer_of(target)
            if there is not None and there > here:
                found.append(f"{path.relative_to(root.parent)}:{line}: {mod} ({LAYERS[here][0]})"
                             f" -> {target} ({LAYERS[there][0]})")
    return found


def test_every_module_has_a_layer():
    orphans = [module_name(p, ROOT) for p in ROOT.rglob("*.py")
               if layer_of(module_name(p, ROOT)) is None and p.parent != ROOT.parent
               and module_name(p, ROOT) != "dpverify"]
    assert orphans == []


def test_imports_run_downward():
    assert upward_imports() == []


def test_an_upward_import_is_caught(tmp_path):
    """The checker on a fixture tree: a core module importing the report layer inside a
    function (the way a cycle is usually dodged) is reported; a downward one is not."""
    pkg = tmp_path / "dpverify"
    (pkg / "core").mkdir(parents=True)
    (pkg / "report").mkdir()
    (pkg / "core" / "data.py").write_text(
        "from dpverify.core import errors\n\n\ndef f():\n    from dpverify.report import io\n")
    (pkg / "report" / "io.py").write_text("from dpverify.core.data import f\n")
    found = upward_imports(pkg)
    assert len(found) == 1
    assert "dpverify/core/data.py:5" in found[0] and "(report)" in found[0]


@pytest.mark.parametrize(("module", "layer"), [
    ("dpverify.core.curator", "core"), ("dpverify.checks.audit.blackbox", "checks"),
    ("dpverify.cli.app", "front ends"), ("dpverify.pytest_plugin", "front ends"),
])
def test_layer_of(module, layer):
    assert LAYERS[layer_of(module)][0] == layer
