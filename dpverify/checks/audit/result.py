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

from dpverify.checks.base import Outcome, jsonable
from dpverify.core.claims import Verdict

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
    epsilon_detectable: float | None = None
    detect_probability: float | None = None
    power: dict[str, Any] = field(default_factory=dict)
    # Set by a sequential audit: its own test of the claim, and why it stopped short.
    claim_rejected: bool | None = None
    inconclusive: str | None = None

    @property
    def verdict(self) -> Verdict:
        if self.claim_rejected or self.epsilon_lower > self.epsilon_claimed:
            return Verdict.FAIL
        return Verdict.INCONCLUSIVE if self.inconclusive else Verdict.PASS

    def with_power(self, power: Any) -> AuditResult:
        """Attach a :class:`~dpverify.stats.power.Power` (returns ``self``).

        Examples
        --------
        >>> from dpverify.stats.power import Power
        >>> r = AuditResult("x", "blackbox", 0.5, 1.0, None, 1e-5, 0.95, 10, "cp")
        >>> r.with_power(Power(2.0, 0.9, "gaussian", 0.5, "cp")).epsilon_detectable
        2.0
        """
        self.epsilon_detectable = float(power.epsilon)
        self.detect_probability = float(power.probability)
        self.power = power.to_dict()
        return self

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
            "epsilon_detectable": self.epsilon_detectable,
            "detect_probability": self.detect_probability,
        }
        out.update(self.details)
        return jsonable(out)

    def power_statement(self) -> str:
        """What a PASS rules out: "no violation above epsilon = X at confidence C".

        Examples
        --------
        >>> r = AuditResult("x", "blackbox", 0.5, 1.0, 1.0, 1e-5, 0.95, 1000, "cp",
        ...                 epsilon_detectable=1.8, detect_probability=0.9)
        >>> r.power_statement()
        'no violation above epsilon = 1.8 at confidence 0.9'
        """
        if self.epsilon_detectable is None:
            return f"no evidence of violation at level {1 - self.confidence:.3g}"
        x = self.epsilon_detectable
        shown = f"{x:.3g}" if math.isfinite(x) else "inf (nothing this test can detect)"
        return f"no violation above epsilon = {shown} at confidence {self.detect_probability:g}"

    def message(self) -> str:
        acc = ("n/a" if self.epsilon_accountant is None
               else f"{self.epsilon_accountant:.4g}")
        v = self.verdict
        rel = ">" if v == Verdict.FAIL else "<="
        if v == Verdict.FAIL and self.claim_rejected:
            e = self.details.get("e_value")
            bound = max(self.epsilon_lower, self.epsilon_claimed)
            what = (f"proven violation: epsilon > {bound:.4g}"
                    + (f" (e-value {e:.3g} >= 1/alpha = {1 / (1 - self.confidence):.3g})"
                       if e is not None else "") + self._leak_note())
        elif v == Verdict.FAIL:
            what = (f"proven violation: epsilon >= {self.epsilon_lower:.4g} > "
                    f"{self.epsilon_claimed:.4g} claimed" + self._leak_note())
        elif v == Verdict.INCONCLUSIVE:
            what = f"underpowered: {self.inconclusive}"
        else:
            what = (f"{self.power_statement()} (false alarms at most "
                    f"{1 - self.confidence:.3g})")
        lower = f"epsilon_lower {self.epsilon_lower:.4g}"
        if self.bound == "betting" and self.epsilon_lower > 0:
            # A rejected grid epsilon proves the true one above it, never at it.
            lower = f"epsilon > {self.epsilon_lower:.4g}"
            rel = ">=" if v == Verdict.FAIL else rel
        return (f"{lower} ({self.bound}, {self.mode}, confidence {self.confidence:g}, "
                f"{self.trials} trials) {rel} claimed {self.epsilon_claimed:.4g} at "
                f"delta={self.delta:g}; accountant {acc}: {what}")

    def _leak_note(self) -> str:
        """What a violation found in the outputs' bits means, when that is the evidence."""
        if self.details.get("distinguisher") != "lowbits":
            return ""
        if self.details.get("low_bits_vary") is False:
            return ("; the low-bits test read only the outputs' signs and binary exponents "
                    "(their last bits are all zero: the outputs are on a grid), so the "
                    "evidence is in their magnitudes, not a floating-point artefact")
        return ("; the evidence is in the outputs' floating-point bits, not their values: "
                "arithmetic in floating point leaks the input through the low bits of a "
                "release (Mironov 2012; draw the noise on a grid, snapping, or round the "
                "release), unless the output carries a value of the data that no noise "
                "covers, whose bits show too")

    def to_outcome(self) -> Outcome:
        ev = dict(self.evidence)
        if self.assumptions:
            ev["assumptions"] = list(self.assumptions)
        if self.power:
            ev["power"] = dict(self.power)
        return Outcome(self.verdict, self.metrics(), jsonable(ev), self.message())

    def to_dict(self) -> dict[str, Any]:
        return jsonable({
            "target": self.target,
            "verdict": self.verdict.value,
            "metrics": self.metrics(),
            "evidence": self.evidence,
            "assumptions": self.assumptions,
            "power": self.power,
            "message": self.message(),
        })
