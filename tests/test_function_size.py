"""dpverify's functions stay short and take few parameters.

No function (nested ones included) over :data:`MAX_LINES` lines, counted from ``def`` to its
last line, docstring included; no public function with more than :data:`MAX_PARAMS`
parameters (``self`` and ``cls`` not counted): a long tail of keywords becomes one object.
"""

from __future__ import annotations

import ast
from pathlib import Path

MAX_LINES = 80
MAX_PARAMS = 8
ROOT = Path(__file__).resolve().parents[1] / "dpverify"


def parameter_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    n = len(names) + (a.vararg is not None) + (a.kwarg is not None)
    return n - (bool(names) and names[0].arg in ("self", "cls"))


def oversized(source: str, where: str) -> list[str]:
    """Every function of ``source`` over the limits, as ``where:line name (why)``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_LINES:
            out.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
        params = parameter_count(node)
        if not node.name.startswith("_") and params > MAX_PARAMS:
            out.append(f"{where}:{node.lineno} {node.name} ({params} parameters)")
    return out


def test_the_rule_sees_a_long_function_and_a_long_signature() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    src = (f"def long():\n{body}\n\n"
           "def wide(self, a, b, c, d, e, f, g, h, *, i=1):\n    pass\n\n"
           "def _private_wide(a, b, c, d, e, f, g, h, i):\n    pass\n\n"
           "def fine(self, a, b, c, d, e, f, g, h):\n    pass\n")
    found = oversized(src, "m.py")
    assert found == ["m.py:1 long (81 lines)", f"m.py:{MAX_LINES + 3} wide (9 parameters)"]


def test_dpverify_functions_are_short_and_narrow() -> None:
    found = [f for p in sorted(ROOT.rglob("*.py"))
             for f in oversized(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT.parent)))]
    assert not found, "over the limits:\n" + "\n".join(found)
