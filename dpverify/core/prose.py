"""Numbers and claims in words: the vocabulary in which every check kind states its results.

Each check kind words its own records (its ``statement``, see
:class:`dpverify.checks.CheckKind`); the report assembles them. Both use the helpers here,
which read the plain dictionaries of a ``report.json``, so a saved report reads the same
later.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any


def num(x: Any) -> float | None:
    """A report value as a float (``"inf"`` and ``"nan"`` included), else ``None``.

    Examples
    --------
    >>> num("inf"), num(2), num("x"), num(None), num(True)
    (inf, 2.0, None, None, None)
    """
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if x in ("inf", "-inf", "nan"):
        return float(x)
    return None


def with_article(word: str) -> str:
    """``word`` after "a" or "an", by its first sound (quotes and backticks ignored).

    Examples
    --------
    >>> with_article("audit"), with_article("'account'"), with_article("blackbox")
    ('an audit', "an 'account'", 'a blackbox')
    >>> with_article("onerun"), with_article("uniform")
    ('a onerun', 'a uniform')
    """
    bare = word.lstrip("'\"`").lower()
    # A written vowel that sounds "w" or "y" ("one", "unit", "user") takes "a".
    vowel = bare[:1] in set("aeiou") and not bare.startswith(("one", "uni", "use", "eu"))
    return f"{'an' if vowel else 'a'} {word}"


def fmt(x: Any, digits: int = 4) -> str:
    """A number for a sentence: 4 significant digits, ``∞`` for infinity, ``n/a`` for none.

    Examples
    --------
    >>> fmt(0.123456), fmt("inf"), fmt(None), fmt(1e-5), fmt("text")
    ('0.1235', '∞', 'n/a', '1e-05', 'text')
    """
    v = num(x)
    if v is None:
        return "n/a" if x is None else str(x)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    return f"{v:.{digits}g}"


# Registry information ------------------------------------------------------------------------


def claim_text(claim: Mapping[str, Any] | None) -> str:
    """A privacy claim in words.

    Examples
    --------
    >>> claim_text({"epsilon": 1.0, "delta": 1e-5, "rho": None, "relation": "replace_one"})
    '(ε = 1, δ = 1e-05)-DP, replace-one neighbours'
    >>> claim_text({"epsilon": None, "delta": None, "rho": 0.5, "relation": "add_remove"})
    'ρ = 0.5 zCDP, add/remove neighbours'
    """
    if not claim:
        return "no privacy claim recorded"
    if claim.get("error"):
        return f"claim could not be formed ({claim['error']})"
    rel = {"replace_one": "replace-one", "add_remove": "add/remove"}.get(
        str(claim.get("relation")), str(claim.get("relation")))
    if claim.get("rho") is not None:
        return f"ρ = {fmt(claim['rho'])} zCDP, {rel} neighbours"
    return f"(ε = {fmt(claim.get('epsilon'))}, δ = {fmt(claim.get('delta'))})-DP, {rel} neighbours"


def utility_text(utility: Mapping[str, Any] | None) -> str:
    """A utility theorem in words.

    Examples
    --------
    >>> utility_text({"quantity": "excess_risk", "exponents": {"n": -2.0, "d": 1.0},
    ...               "log_factors": ["log(1/delta)"], "sided": "upper", "regime": [],
    ...               "source": "BST14, Thm 2.4"})
    'excess_risk ≲ n^-2 · d^1 · log(1/delta) (upper bound; BST14, Thm 2.4)'
    """
    if not utility:
        return "no utility theorem declared"
    terms = [f"{k}^{fmt(v)}" for k, v in (utility.get("exponents") or {}).items()]
    terms += list(utility.get("log_factors") or [])
    rel = "≲" if utility.get("sided", "upper") == "upper" else "≍"
    notes = ["upper bound" if utility.get("sided", "upper") == "upper" else "tight rate"]
    if utility.get("regime"):
        notes.append("when " + ", ".join(utility["regime"]))
    if utility.get("source"):
        notes.append(str(utility["source"]))
    return f"{utility.get('quantity', '?')} {rel} {' · '.join(terms)} ({'; '.join(notes)})"


@dataclass
class Statement:
    """A check in plain words: what is claimed, what was measured, how sure we are."""

    claimed: str
    measured: str
    confidence: str
    short: str = ""  # the measurement and its confidence in a clause, for findings

    def text(self) -> str:
        return " ".join(s for s in (self.claimed, self.measured, self.confidence) if s)


def metrics_of(check: Mapping[str, Any]) -> Mapping[str, Any]:
    """A check record's metrics (an empty mapping when it has none).

    Examples
    --------
    >>> metrics_of({"metrics": {"ratio": 2.0}})["ratio"], dict(metrics_of({}))
    (2.0, {})
    """
    return check.get("metrics") or {}


def order_sentence(r: Any) -> str:
    """Whether ε_lower ≤ ε_accountant ≤ ε_claimed holds, and if not, which link breaks.

    ``r`` is a typed result with the three fields (an audit's, a membership attack's).

    Examples
    --------
    >>> from types import SimpleNamespace as R
    >>> order_sentence(R(epsilon_lower=0.5, epsilon_accountant=0.9, epsilon_claimed=1))
    'ε_lower ≤ ε_accountant ≤ ε_claimed holds.'
    """
    lo, acc, cl = num(r.epsilon_lower), num(r.epsilon_accountant), num(r.epsilon_claimed)
    if lo is None or cl is None:
        return ""
    broken = []
    if acc is not None and lo > acc * (1 + 1e-9):
        broken.append("ε_lower > ε_accountant (the ledger or the accountant understates "
                      "what the code leaks)")
    if acc is not None and acc > cl * (1 + 1e-3):
        broken.append("ε_accountant > ε_claimed (the noise added does not buy the claim)")
    if lo > cl:
        broken.append("ε_lower > ε_claimed (a proven violation of the claim)")
    if not broken:
        return ("ε_lower ≤ ε_accountant ≤ ε_claimed holds." if acc is not None
                else "ε_lower ≤ ε_claimed holds.")
    return "Broken: " + "; ".join(broken) + "."


def power_text(name: str, p: Any) -> str:
    """``name^p`` with a simple fraction where the exponent is one.

    Examples
    --------
    >>> power_text("d", 0.75), power_text("n", -2 / 3), power_text("n", -2.0)
    ('d^(3/4)', 'n^(-2/3)', 'n^-2')
    """
    x = num(p)
    if x is None or not math.isfinite(x):
        return f"{name}^{fmt(p)}"
    fr = Fraction(x).limit_denominator(12)
    if abs(float(fr) - x) > 1e-3:
        return f"{name}^{fmt(x, 3)}"
    return f"{name}^{fr.numerator}" if fr.denominator == 1 else f"{name}^({fr})"


def inconclusive_reason(check: Mapping[str, Any]) -> str:
    """Why a check could not decide, in a few words ("" when it decided).

    Examples
    --------
    >>> inconclusive_reason({"verdict": "INCONCLUSIVE", "kind": "rate", "message":
    ...     "n: INCONCLUSIVE: 0 usable grid points (need 3); left out: 4 saturated",
    ...     "evidence": {"points": [{"excluded": ["saturated: mean 1"] * 4}]}})
    'not observable on this grid: every point saturated'
    """
    if check.get("verdict") != "INCONCLUSIVE":
        return ""
    m, msg = metrics_of(check), str(check.get("message") or "")
    if m.get("error"):
        return "the check did not complete"
    if "usable grid points" in msg:
        left = [w.split(":")[0] for pt in (check.get("evidence") or {}).get("points") or []
                for w in pt.get("excluded") or [] if w]
        total = sum(len(pt.get("excluded") or []) for pt in
                    (check.get("evidence") or {}).get("points") or [])
        if left and len(left) == total and len(set(left)) == 1:
            return f"not observable on this grid: every point {left[0]}"
        return "too few grid points in the window to fit"
    for key, words in (("wide", "interval too wide to decide"),
                       ("hinges on the floor", "the verdict hinges on an unmeasured floor"),
                       ("floor dominates", "a floor dominates the signal"),
                       ("lack of fit", "the power law is rejected: no single exponent fits")):
        if key in msg:
            return words
    tail = msg.split("INCONCLUSIVE:", 1)[-1].strip()
    return re.split(r" \(|; ", tail)[0][:90]


def param_args(params: Mapping[str, Any]) -> list[str]:
    """``--param KEY=VALUE`` arguments that give ``params`` back on a command line.

    Examples
    --------
    >>> param_args({"T": 5, "loss": "linear", "clip": True})
    ['--param', 'T=5', '--param', 'loss=linear', '--param', 'clip=true']
    """
    out = []
    for k, v in params.items():
        if isinstance(v, bool):
            val = "true" if v else "false"
        elif isinstance(v, str):
            val = v
        elif isinstance(v, (list, dict)):
            val = json.dumps(v)
        else:
            val = repr(v)
        out += ["--param", f"{k}={val}"]
    return out


def check_options(check: Mapping[str, Any]) -> dict[str, Any]:
    """A check record's options, without the private ones (a leading underscore).

    Examples
    --------
    >>> check_options({"options": {"trials": 10, "_scale": "quick"}})
    {'trials': 10}
    """
    return {k: v for k, v in (check.get("options") or {}).items() if not str(k).startswith("_")}
