"""What a rate check tests: a theorem's exponents, log factors, regime and sidedness.

A :class:`Theory` is read from a variant's declared :class:`~dpverify.core.claims.UtilityClaim`
or written by a user (``--theory n=-1``). Log factors and regime constraints are small
arithmetic expressions in the grid parameters, evaluated here without ``eval`` on
untrusted names: only numbers, parameter names, arithmetic, comparisons and a few math
functions are allowed.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dpverify.core.claims import UtilityClaim
from dpverify.core.errors import InputError

SIDES = ("upper", "two")

_FUNCS: dict[str, Any] = {
    "log": math.log, "ln": math.log, "log2": math.log2, "log10": math.log10,
    "sqrt": math.sqrt, "exp": math.exp, "abs": abs, "min": min, "max": max,
}
_CONSTS = {"pi": math.pi, "e": math.e, "inf": math.inf}
_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.Pow: operator.pow, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_CMPS = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}


def evaluate(expr: str, params: Mapping[str, Any]) -> Any:
    """Evaluate an arithmetic or comparison expression in the grid parameters.

    Parameters
    ----------
    expr
        E.g. ``"log(1/delta)"`` or ``"n*epsilon >= sqrt(d)"``; ``^`` is read as a power.
    params
        The grid point's parameters (names usable in ``expr``).

    Examples
    --------
    >>> round(evaluate("log(1/delta)", {"delta": 1e-5}), 3)
    11.513
    >>> evaluate("n*epsilon >= sqrt(d)", {"n": 10, "epsilon": 0.1, "d": 4})
    False
    >>> evaluate("not beta or beta == 'balanced'", {"beta": "balanced"})
    True
    """
    try:
        tree = ast.parse(str(expr).replace("^", "**"), mode="eval")
    except SyntaxError as e:
        raise InputError(f"cannot parse expression {expr!r}: {e.msg}") from None

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in params:
                return params[node.id]
            if node.id in _CONSTS:
                return _CONSTS[node.id]
            raise InputError(f"expression {expr!r} names {node.id!r}, which is neither a "
                             f"parameter ({sorted(params)}) nor a constant")
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(left, str) or isinstance(right, str):  # strings only compare
                raise InputError(f"expression {expr!r}: arithmetic on a string")
            return _BINOPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                if type(op) not in _CMPS:
                    break
                right = ev(comp)
                if not _CMPS[type(op)](left, right):
                    return False
                left = right
            else:
                return True
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _FUNCS and not node.keywords):
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise InputError(f"expression {expr!r}: {ast.dump(node)[:40]}... is not allowed "
                         f"(numbers, strings, parameter names, + - * / ** and {sorted(_FUNCS)})")

    try:
        return ev(tree)
    except (ArithmeticError, ValueError, TypeError) as e:
        if isinstance(e, InputError):
            raise
        raise InputError(f"cannot evaluate {expr!r} at {dict(params)}: {e}") from None


@dataclass(frozen=True)
class Theory:
    """The rate a check compares against: ``utility <= C * prod(x ** p) * log factors``.

    Parameters
    ----------
    quantity
        The metric's name (``excess_risk``, ``grad_norm``, or one registered in
        :mod:`dpverify.checks.rates.metrics`).
    exponents
        Exponent of each parameter.
    log_factors
        Expressions multiplied into the rate; a fit divides them out.
    sided
        ``"upper"`` (an upper bound: only a provably worse rate fails) or ``"two"``.
    regime
        Expressions that must hold at a grid point for the theorem to apply.

    Examples
    --------
    >>> th = Theory("excess_risk", {"n": -2.0}, log_factors=("log(n)",))
    >>> round(th.log_factor({"n": 100}), 3)
    4.605
    """

    quantity: str
    exponents: Mapping[str, float]
    log_factors: tuple[str, ...] = ()
    sided: str = "upper"
    regime: tuple[str, ...] = ()
    source: str = ""
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.sided not in SIDES:
            raise InputError(f"sided must be one of {SIDES}, got {self.sided!r}")

    @classmethod
    def from_claim(cls, claim: UtilityClaim) -> Theory:
        """The theory a variant declares.

        Examples
        --------
        >>> from dpverify.core.registry import resolve
        >>> Theory.from_claim(resolve("noisy_gd:sound").variant.utility).exponents["n"]
        -2.0
        """
        return cls(quantity=claim.quantity, exponents=dict(claim.exponents),
                   log_factors=tuple(claim.log_factors), sided=claim.sided,
                   regime=tuple(claim.regime), source=claim.source)

    def exponent(self, parameter: str) -> float:
        """The theorem's exponent of ``parameter`` (0 when the rate does not depend on it)."""
        return float(self.exponents.get(parameter, 0.0))

    def log_factor(self, params: Mapping[str, Any]) -> float:
        """Product of the log factors at one grid point (1 when there are none)."""
        out = 1.0
        for expr in self.log_factors:
            out *= float(evaluate(expr, params))
        return out

    def in_regime(self, params: Mapping[str, Any]) -> bool:
        """Whether every regime constraint holds at ``params``."""
        return all(bool(evaluate(expr, params)) for expr in self.regime)

    def to_dict(self) -> dict[str, Any]:
        return {"quantity": self.quantity, "exponents": dict(self.exponents),
                "log_factors": list(self.log_factors), "sided": self.sided,
                "regime": list(self.regime), "source": self.source}
