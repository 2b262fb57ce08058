"""A recorded run: the executed ledger, how each release was executed, what was accounted."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.accounting.accountant import AccountingResult, account_ledger
from dpverify.checks.sensitivity.replay import LedgerExcess, ledger_excess
from dpverify.core.curator import Ledger
from dpverify.core.errors import check_delta
from dpverify.torch.findings import LoopFinding, ledger_findings
from dpverify.torch.record import Declaration, StepRecord

#: Tolerance of the replayed sensitivity check: the model computes in float32, whose sums
#: over a batch round at about 1e-7 relative per term.
REPLAY_RTOL = 1e-4
#: Largest relative gap between a replayed query and the value the run released before
#: the replay is not trusted to evaluate the same query.
REPLAY_TOLERANCE = 1e-3
# Which dpverify accountant reads a ledger the way each Opacus accountant reads its history.
_FAMILY = {"prv": "pld", "rdp": "rdp", "gdp": "pld"}


@dataclass
class Run:
    """What a recorded training run released, and what it was accounted as.

    ``ledger`` is a :class:`~dpverify.core.curator.Ledger` (one trial); ``steps[i]`` says how
    release ``i`` was executed; ``declarations`` what the accountant and normaliser were
    computed from; ``accounted`` every accountant's steps, in order (key -1: declared by
    hand); ``accountants`` the Opacus accountant objects seen.
    """

    ledger: Ledger
    steps: list[StepRecord]
    declarations: list[Declaration]
    accounted: dict[int, list[tuple[float, float]]]
    accountants: dict[int, Any]
    relation: str
    replayed: bool
    notes: list[str] = field(default_factory=list)
    model: Any = None  # dpverify.torch.simulate.LoopModel of an Opacus run (one optimiser)
    _epsilons: dict[float, AccountingResult] = field(default_factory=dict, repr=False)

    def epsilon(self, delta: float) -> AccountingResult:
        """Epsilon of the executed ledger at ``delta`` (dpverify's PLD and RDP)."""
        delta = check_delta(delta)
        if delta not in self._epsilons:
            self._epsilons[delta] = account_ledger(self.ledger, delta, self.relation)
        return self._epsilons[delta]

    def library_epsilon(self, delta: float) -> dict[str, float]:
        """Each Opacus accountant's own epsilon at ``delta``, by its mechanism name."""
        out: dict[str, float] = {}
        for acc in self.accountants.values():
            name = acc.mechanism()
            key = name if name not in out else f"{name}#{len(out)}"
            out[key] = float(acc.get_epsilon(check_delta(delta)))
        return out

    def compare_epsilon(self, delta: float) -> list[dict[str, Any]]:
        """Each Opacus accountant's epsilon beside the ledger's by the same family.

        Opacus's ``prv`` is set beside dpverify's PLD (both numerical privacy-loss
        distributions; PRV reports the upper end of its bracket, ``eps_error = 0.01``
        absolute by default, and dpverify's PLD is pessimistic on a 1e-4 grid), its
        ``rdp`` beside dpverify's RDP (they differ only in the grid of orders), its ``gdp``
        (a central-limit approximation, which Opacus warns can underestimate) beside PLD.
        """
        acc = self.epsilon(delta)
        rows = []
        for name, eps in self.library_epsilon(delta).items():
            family = _FAMILY.get(name.split("#")[0], "pld")
            ours = acc.by_accountant.get(family, acc.epsilon)
            rows.append({"opacus": name, "opacus_epsilon": eps, "ledger": family,
                         "ledger_epsilon": ours,
                         "relative_difference": eps / ours - 1.0 if ours else math.inf})
        return rows

    def findings(self) -> list[LoopFinding]:
        """Findings of the executed ledger alone (:mod:`dpverify.torch.findings`)."""
        return ledger_findings(self)

    def sensitivity(self) -> LedgerExcess | None:
        """The worst replayed release against its declared sensitivity (``None`` if the
        run was not replayed)."""
        if not self.replayed or not any(r.value_D is not None for r in self.ledger.records):
            return None
        return ledger_excess(self.ledger, REPLAY_RTOL)

    def replay_error(self) -> float | None:
        """The largest relative gap between a replayed query and the released value."""
        errs = [s.replay_error for s in self.steps if s.replay_error is not None]
        return max(errs) if errs else None

    def drawn(self) -> np.ndarray:
        """The batch sizes actually drawn, release by release (-1 where unknown)."""
        return np.array([-1 if s.drawn is None else s.drawn for s in self.steps])

    def segments(self) -> list[dict[str, Any]]:
        """The ledger in runs of identical declarations: what the loop released."""
        out: list[dict[str, Any]] = []
        for r, s in zip(self.ledger, self.steps, strict=True):
            key = (r.name, r.sampling, r.rate, r.noise, r.sensitivity, s.clip, s.divisor)
            if out and out[-1]["key"] == key:
                seg = out[-1]
            else:
                seg = {"key": key, "first": s.step, "releases": 0, "drawn": Counter()}
                out.append(seg)
            seg["last"] = s.step
            seg["releases"] += 1
            if s.drawn is not None:
                seg["drawn"][s.drawn] += 1
        return [_segment_dict(seg) for seg in out]

    def to_dict(self, delta: float) -> dict[str, Any]:
        """JSON-ready: the ledger's segments, epsilons, findings and replay."""
        acc = self.epsilon(delta)
        sens = self.sensitivity()
        return {
            "relation": self.relation,
            "releases": len(self.ledger),
            "segments": self.segments(),
            "epsilon": acc.to_dict(),
            "opacus_epsilon": self.compare_epsilon(delta),
            "declarations": [d.to_dict() for d in self.declarations],
            "accounted_steps": {str(k): len(v) for k, v in self.accounted.items()},
            "findings": [f.to_dict() for f in self.findings()],
            "sensitivity": None if sens is None else {
                "worst_ratio": sens.worst_ratio, "declared": sens.declared,
                "true_difference": sens.true_difference, "step": sens.step,
                "violations": sens.violations},
            "replay_error": self.replay_error(),
            "notes": list(self.notes),
        }

    def summary(self, delta: float) -> str:
        """A few lines a person reads: the ledger, epsilon beside the accountant's, findings.

        Examples
        --------
        >>> import torch
        >>> from dpverify.torch.record import Mechanism, record, record_noise
        >>> m = Mechanism(noise_std=4.0, sensitivity=1.0, clip=1.0, rate=0.5)
        >>> gen = torch.Generator().manual_seed(0)
        >>> with record(dataset_size=8) as rec:
        ...     for t in range(3):
        ...         g = torch.full((100,), 0.01)
        ...         record_noise(g, g + 2.0 * torch.randn(100, generator=gen), m,
        ...                      batch=[1, 2, 5])
        >>> print(rec.run.summary(1e-5))  # doctest: +ELLIPSIS
        executed ledger: 3 releases
          steps 0-2: 3 x grad gaussian poisson q=0.5 noise 4 (multiplier 4) clip 1.0 ...
        epsilon at delta=1e-05: ledger 0.9047 (PLD), 1.009 (RDP)
        findings:
          violation: noise_below_declared (step 0): the noise added at step 0 has ...
        """
        lines = [f"executed ledger: {len(self.ledger)} releases"]
        for seg in self.segments():
            drawn = seg["drawn"]
            sizes = (f"drawn {drawn['min']}-{drawn['max']} (mean {drawn['mean']:.4g})"
                     if drawn else "drawn ?")
            lines.append(
                f"  steps {seg['first']}-{seg['last']}: {seg['releases']} x {seg['name']} "
                f"gaussian {seg['sampling']} q={seg['rate']:.4g} noise {seg['noise_std']:.4g} "
                f"(multiplier {seg['noise_multiplier']:.4g}) clip {seg['clip']} divisor "
                f"{seg['divisor']:g}, {sizes}")
        by = self.epsilon(delta).by_accountant
        lines.append(f"epsilon at delta={delta:g}: ledger {by.get('pld', math.nan):.4g} (PLD), "
                     f"{by.get('rdp', math.nan):.4g} (RDP)"
                     + "".join(f"; Opacus's {c['opacus']} accountant {c['opacus_epsilon']:.4g}"
                               f" against the ledger's {c['ledger'].upper()} "
                               f"{c['ledger_epsilon']:.4g} "
                               f"({100 * c['relative_difference']:+.2f}%)"
                               for c in self.compare_epsilon(delta)))
        found = self.findings()
        lines.append("findings:" if found else "findings: none")
        lines.extend(f"  {f}" for f in found)
        sens = self.sensitivity()
        if sens is not None:
            lines.append(f"replayed sensitivity: worst ratio {sens.worst_ratio:.4g} "
                         f"({sens.true_difference:.4g} / declared {sens.declared}) at step "
                         f"{sens.step}; {sens.violations} releases over")
        lines.extend(f"note: {n}" for n in self.notes[:5])
        return "\n".join(lines)


def _segment_dict(seg: dict[str, Any]) -> dict[str, Any]:
    name, sampling, rate, noise, sens, clip, divisor = seg["key"]
    drawn: Counter = seg["drawn"]
    sizes = list(drawn.elements())
    return {
        "first": seg["first"], "last": seg["last"], "releases": seg["releases"],
        "name": name, "sampling": sampling, "rate": rate, "noise_std": noise,
        "sensitivity": sens, "noise_multiplier": noise / sens if sens else math.inf,
        "clip": clip, "divisor": divisor,
        "drawn": {"min": min(sizes), "max": max(sizes), "mean": float(np.mean(sizes))}
        if sizes else {},
    }
