"""The three-way record every audit returns: epsilon_lower, epsilon_accountant, epsilon_claimed.

epsilon_lower <= epsilon_accountant <= epsilon_claimed should hold. A lower bound above
the claim is a proven violation at the stated confidence (verdict FAIL); otherwise PASS,
which means "no evidence of violation at level alpha", never "private". A lower bound
above the accountant's epsilon (tightness > 1) with one below the claim points at the
accountant (or at a ledger that does not describe what the code does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dpverify.checks import Outcome, jsonable
from dpverify.claims import Verdict

MODES = ("blackbox", "whitebox", "onerun")


@dataclass
class AuditResult:
    """The outcome of one audit, with the numbers behind it.

    ``trials`` counts runs per neighbouring dataset (black-box and white-box) or runs
    (one-run: 1); ``details`` holds the mode's own numbers (counts, thresholds, mu, ...),
    ``evidence`` the test that achieved the bound.

    Examples
    --------
    >>> r = AuditResult("x", "blackbox", 1.2, 1.0, 1.1, 1e-5, 0.95, 1000, "cp")
    >>> r.verdict, round(r.tightness, 3)
    (<Verdict.FAIL: 'FAIL'>, 1.091)
    """

    target: str
    mode: str
    epsilon_lower: float
    epsilon_claimed: float
    epsilon_accountant: float | None
    delta: float
    confidence: float
    trials: int
    bound: str
    details: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        return Verdict.FAIL if self.epsilon_lower > self.epsilon_claimed else Verdict.PASS

    @property
    def tightness(self) -> float | None:
        """epsilon_lower / epsilon_accountant (None without a finite, positive accountant)."""
        acc = self.epsilon_accountant
        if acc is None or not math.isfinite(acc) or acc <= 0:
            return None
        return self.epsilon_lower / acc

    def metrics(self) -> dict[str, Any]:
        """The public report contract (see DESIGN.md) plus the mode's details."""
        out: dict[str, Any] = {
            "epsilon_lower": self.epsilon_lower,
            "epsilon_accountant": self.epsilon_accountant,
            "epsilon_claimed": self.epsilon_claimed,
            "confidence": self.confidence,
            "trials": self.trials,
            "delta": self.delta,
            "tightness": self.tightness,
            "mode": self.mode,
            "bound": self.bound,
        }
        out.update(self.details)
        return jsonable(out)

    def message(self) -> str:
        acc = ("n/a" if self.epsilon_accountant is None
               else f"{self.epsilon_accountant:.4g}")
        rel = ">" if self.verdict == Verdict.FAIL else "<="
        what = ("proven violation" if self.verdict == Verdict.FAIL
                else f"no evidence of violation at level {1 - self.confidence:.3g}")
        return (f"epsilon_lower {self.epsilon_lower:.4g} ({self.bound}, {self.mode}, "
                f"confidence {self.confidence:g}, {self.trials} trials) {rel} claimed "
                f"{self.epsilon_claimed:.4g} at delta={self.delta:g}; accountant {acc}: {what}")

    def to_outcome(self) -> Outcome:
        ev = dict(self.evidence)
        if self.assumptions:
            ev["assumptions"] = list(self.assumptions)
        return Outcome(self.verdict, self.metrics(), jsonable(ev), self.message())

    def to_dict(self) -> dict[str, Any]:
        return jsonable({
            "target": self.target,
            "verdict": self.verdict.value,
            "metrics": self.metrics(),
            "evidence": self.evidence,
            "assumptions": self.assumptions,
            "message": self.message(),
        })
