"""Findings read off an executed ledger alone, before any audit trial.

Each :class:`LoopFinding` names the step where it happened and carries its evidence. A
``violation`` means the run does not do what its accounting assumes; a ``note`` is worth
knowing but breaks nothing on this run.

* ``size_derived_sample_rate`` / ``size_derived_divisor``: Opacus's ``make_private`` takes
  ``sample_rate = 1 / len(data_loader)`` and divides a ``"mean"`` reduction by
  ``int(len(dataset) * sample_rate)``, both functions of the dataset's size, which is
  private under add/remove neighbours. Where a neighbouring size (n - 1 or n + 1) gives a
  different value, the run itself tells the neighbours apart (Opacus issue #571).
* ``divisor_follows_batch``: noise added to a mean over the batch actually drawn, whose
  size is private under Poisson sampling (the divisor, or the noise scale, tracks it).
* ``steps_not_accounted``: more noisy releases executed than the accountant was given;
  ``steps_not_executed`` (a note): fewer.
* ``steps_beyond_calibration``: more steps executed than the noise was calibrated for
  (``make_private_with_epsilon``'s epochs, or a declared step count).
* ``noise_multiplier_mismatch`` / ``sample_rate_mismatch``: the accountant was given a
  noise multiplier above the one executed, or a sampling rate below it.
* ``sampling_not_poisson``: fixed-size or shuffled batches accounted as Poisson samples
  (amplification the sampling does not give).
* ``sample_rate_mismatch`` also where the Poisson batches actually drawn are larger than
  the rate the releases declare allows (a binomial test of their sizes).
* ``release_exceeds_clip_bound``: the value noise is added to is longer than per-sample
  clipping allows (drawn batch size x clip / divisor): clipping is not per-sample.
* ``noise_below_declared`` / ``no_noise``: the noise actually added (measured from the
  noisy minus the clean value) is smaller than declared, at one release or pooled over
  all of them, or absent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import scipy.stats

from dpverify.core.curator import AMPLIFIED

if TYPE_CHECKING:
    from dpverify.torch.record import Declaration, StepRecord
    from dpverify.torch.run import Run

#: Family-wise false-alarm probability of the noise-level test over a run's releases.
NOISE_ALPHA = 1e-6
#: Relative tolerance of the comparisons of executed and declared numbers.
RTOL = 1e-6
#: Relative slack of the clip bound: float32 sums of a batch round at about 1e-7 per term.
CLIP_RTOL = 1e-4


@dataclass(frozen=True)
class LoopFinding:
    """One finding: what, where (the step), how bad, and the numbers behind it."""

    kind: str
    step: int | None
    message: str
    severity: str = "violation"
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def violation(self) -> bool:
        return self.severity == "violation"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "step": self.step, "severity": self.severity,
                "message": self.message, "evidence": dict(self.evidence)}

    def __str__(self) -> str:
        where = "" if self.step is None else f" (step {self.step})"
        return f"{self.severity}: {self.kind}{where}: {self.message}"


def ledger_findings(run: Run) -> list[LoopFinding]:
    """Every finding of ``run``'s executed ledger, violations first.

    Examples
    --------
    >>> import torch
    >>> from dpverify.torch.record import Mechanism, record, record_noise
    >>> m = Mechanism(noise_std=1.0, sensitivity=1.0, clip=1.0, rate=0.5)
    >>> with record(dataset_size=8) as rec:
    ...     rec.declare_accounting(noise_multiplier=1.0, sample_rate=0.5, steps=1)
    ...     for t in range(2):
    ...         record_noise(torch.zeros(4000), torch.randn(4000), m, batch=[1, 2])
    >>> [(f.kind, f.step) for f in ledger_findings(rec.run)]
    [('steps_not_accounted', 1)]
    """
    out: list[LoopFinding] = []
    for check in (_size_derived, _divisor_follows_batch, _accounting, _calibration,
                  _sampling, _drawn_rate, _clip_bound, _noise_level):
        out.extend(check(run))
    return sorted(out, key=lambda f: (not f.violation, f.step if f.step is not None else -1))


# Opacus's size-derived quantities -----------------------------------------------------


def opacus_sample_rate(n: int, batch_size: int, drop_last: bool = False) -> float | None:
    """``1 / len(DataLoader(range(n), batch_size))``, as ``make_private`` computes it.

    Examples
    --------
    >>> opacus_sample_rate(4, 2), opacus_sample_rate(5, 2)
    (0.5, 0.3333333333333333)
    """
    batches = n // batch_size if drop_last else -(-n // batch_size)
    return 1.0 / batches if batches > 0 else None


def _size_derived(run: Run) -> list[LoopFinding]:
    if run.relation != "add_remove" or not run.ledger.releases:
        return []
    out = []
    for d in run.declarations:
        if d.dataset_size is None or not d.batch_size or d.sample_rate is None:
            continue
        out.extend(_size_findings(d, int(d.dataset_size), int(d.batch_size)))
    return out


def _size_findings(d: Declaration, n: int, b: int) -> list[LoopFinding]:
    mean = d.loss_reduction == "mean"
    by_size: dict[int, tuple[float | None, int | None]] = {}
    for m in (n - 1, n, n + 1):
        qm = opacus_sample_rate(m, b, d.drop_last) if m > 0 else None
        by_size[m] = (qm, int(m * qm) if (mean and qm) else None)
    ev = {"dataset_size": n, "batch_size": b, "loss_reduction": d.loss_reduction,
          "by_size": {str(m): {"sample_rate": v[0], "divisor": v[1]}
                      for m, v in by_size.items()}}
    out = []
    for k, kind, what in ((0, "size_derived_sample_rate", "the sampling rate 1/len(data_loader)"),
                          (1, "size_derived_divisor", "the divisor int(len(dataset) * "
                                                      "sample_rate) of the noisy sum")):
        here = by_size[n][k]
        other = {m: by_size[m][k] for m in (n - 1, n + 1)
                 if by_size[m][k] is not None and here is not None and by_size[m][k] != here}
        if not other:
            continue
        there = ", ".join(f"{v:.6g} on {m}" for m, v in other.items())
        why = ("the update's scale tells the neighbouring datasets apart whatever the noise "
               "(Opacus #571)" if k else "the run's sampling, its number of steps per epoch "
               "and a noise multiplier calibrated for the rate depend on the private size")
        out.append(LoopFinding(kind, 0, f"{what} is {here:.6g} on {n} records, {there}: {why}",
                               evidence=ev))
    if not out:
        what = "sample rate and divisor" if mean else "sample rate"
        out.append(LoopFinding(
            "size_derived_sample_rate", 0,
            f"the {what} are computed from len(dataset) = {n}; they take the same values on "
            f"{n - 1} and {n + 1} records, so this run leaks nothing through them, but the "
            "size is private under add/remove", severity="note", evidence=ev))
    return out


# Executed against accounted ---------------------------------------------------------------


def _divisor_follows_batch(run: Run) -> list[LoopFinding]:
    poisson = [s for s, r in zip(run.steps, run.ledger, strict=True)
               if s.drawn is not None and s.source == "record_noise" and r.sampling == "poisson"]
    if len({s.drawn for s in poisson}) < 2:
        return []
    for what, value in (("divisor", lambda s: s.divisor),
                        ("noise scale", lambda s: 1.0 / s.noise_std if s.noise_std else 0.0)):
        vals = [value(s) for s in poisson]
        ratio = [v / max(s.drawn, 1) for v, s in zip(vals, poisson, strict=True)]
        if len(set(vals)) > 1 and max(ratio) - min(ratio) <= RTOL * max(ratio):
            first = next(s for s in poisson if value(s) != vals[0])
            return [LoopFinding(
                "divisor_follows_batch", first.step,
                f"the {what} follows the batch size actually drawn ({first.drawn} at step "
                f"{first.step}), which Poisson sampling keeps private: noise is added to a "
                "mean whose divisor depends on the data",
                evidence={"drawn": [s.drawn for s in poisson][:20], what: vals[:20]})]
    return []


def _executed_multiplier(run: Run, i: int) -> float:
    """Noise std over the sensitivity of one record's contribution: the multiplier
    Opacus's accountants read (under replace-one a record moves the sum by twice that)."""
    r = run.ledger.releases[i]
    base = r.sensitivity / (2.0 if run.relation == "replace_one" else 1.0)
    return run.steps[i].noise_std / base if base else math.inf


def _accounting(run: Run) -> list[LoopFinding]:
    out: list[LoopFinding] = []
    T = len(run.ledger)
    for key, acc in run.accounted.items():
        name = "the declared accounting" if key == -1 else "the accountant"
        if len(acc) < T:
            s = run.steps[len(acc)]
            out.append(LoopFinding(
                "steps_not_accounted", s.step,
                f"{T} noisy releases were executed, {name} was given {len(acc)}: from step "
                f"{s.step} on, releases are not accounted",
                evidence={"executed": T, "accounted": len(acc)}))
        elif len(acc) > T:
            out.append(LoopFinding(
                "steps_not_executed", None,
                f"{name} was given {len(acc)} steps; noisy releases recorded: {T}; "
                "stopping early spends less than accounted, but a step that trains on the "
                "data without recording its noise is neither noised nor audited",
                severity="note", evidence={"executed": T, "accounted": len(acc)}))
        out.extend(_mismatch(run, name, acc))
    return out


def _mismatch(run: Run, name: str, acc: list[tuple[float, float]]) -> list[LoopFinding]:
    out: list[LoopFinding] = []
    for i, (sigma, q) in enumerate(acc[:len(run.ledger)]):
        r, s = run.ledger.releases[i], run.steps[i]
        executed = _executed_multiplier(run, i)
        if not out and executed < sigma * (1 - RTOL):
            out.append(LoopFinding(
                "noise_multiplier_mismatch", s.step,
                f"{name} was given noise multiplier {sigma:.6g}, the release at step "
                f"{s.step} added {executed:.6g} (std {s.noise_std:.6g} / clip)",
                evidence={"accounted": sigma, "executed": executed, "release": i}))
        if r.sampling in AMPLIFIED and r.rate > q * (1 + RTOL):
            out.append(LoopFinding(
                "sample_rate_mismatch", s.step,
                f"{name} was given sampling rate {q:.6g}, the loop sampled at {r.rate:.6g}",
                evidence={"accounted": q, "executed": r.rate, "release": i}))
            break
    return out


def _calibration(run: Run) -> list[LoopFinding]:
    out = _configured_noise(run)
    T = len(run.ledger)
    for d in run.declarations:
        if d.steps is not None and T > d.steps and d.source != "declared":
            s = run.steps[d.steps]
            target = ("" if d.target_epsilon is None else
                      f" to meet epsilon {d.target_epsilon:g} at delta {d.target_delta:g}")
            out.append(LoopFinding(
                "steps_beyond_calibration", s.step,
                f"the noise was calibrated for {d.steps} steps{target}; {T} were executed",
                evidence={"calibrated_steps": d.steps, "executed": T,
                          "target_epsilon": d.target_epsilon}))
    return out


def _configured_noise(run: Run) -> list[LoopFinding]:
    """Less noise executed than ``make_private*`` set up (the optimiser's noise multiplier
    lowered afterwards: its accountant follows, the calibration to a target does not)."""
    opacus = [i for i, s in enumerate(run.steps) if s.source == "opacus"]
    for d in run.declarations:
        if d.source == "declared" or d.noise_multiplier is None:
            continue
        for i in opacus:
            executed = _executed_multiplier(run, i)
            if executed < d.noise_multiplier * (1 - RTOL):
                s = run.steps[i]
                return [LoopFinding(
                    "noise_multiplier_mismatch", s.step,
                    f"{d.source} set noise multiplier {d.noise_multiplier:.6g}; the release at "
                    f"step {s.step} added {executed:.6g}",
                    evidence={"configured": d.noise_multiplier, "executed": executed,
                              "target_epsilon": d.target_epsilon})]
    return []


def _sampling(run: Run) -> list[LoopFinding]:
    accounted_q = [q for acc in run.accounted.values() for _, q in acc[:1]]
    for r, s in zip(run.ledger, run.steps, strict=True):
        if r.sampling not in AMPLIFIED and any(q < 1 for q in accounted_q):
            return [LoopFinding(
                "sampling_not_poisson", s.step,
                f"the batches are {r.sampling!r} (each record in a fixed batch per epoch), the "
                f"accountant assumes Poisson sampling at rate {min(accounted_q):.6g}: it "
                "credits an amplification the sampling does not give",
                evidence={"executed": r.sampling, "accounted_rate": min(accounted_q)})]
    return []


def _drawn_rate(run: Run) -> list[LoopFinding]:
    """Poisson batches larger than the rate their releases declare allows: all the records
    drawn at one rate are Binomial(records offered, rate), tested for too many, each rate
    at :data:`NOISE_ALPHA` over the number of rates (too few would be privacy kept, not
    spent)."""
    groups: dict[float, list[tuple[int, int, int]]] = {}
    for r, s in zip(run.ledger, run.steps, strict=True):
        if r.sampling == "poisson" and s.drawn is not None and r.dataset_size > 0:
            groups.setdefault(r.rate, []).append((s.step, s.drawn, r.dataset_size))
    for q, rows in groups.items():
        drawn, offered = sum(d for _, d, _ in rows), sum(n for _, _, n in rows)
        p = float(scipy.stats.binom.sf(drawn - 1, offered, q))
        if p < NOISE_ALPHA / len(groups):
            return [LoopFinding(
                "sample_rate_mismatch", rows[0][0],
                f"the Poisson batches drew {drawn} of {offered} records offered over "
                f"{len(rows)} steps (rate {drawn / offered:.4g}), the releases declare rate "
                f"{q:.6g} (binomial p = {p:.3g}; false alarm probability {NOISE_ALPHA:g} "
                "per run): the loop samples at another rate than it accounts",
                evidence={"declared": q, "drawn": drawn, "offered": offered,
                          "executed": drawn / offered, "p_value": p})]
    return []


def _clip_bound(run: Run) -> list[LoopFinding]:
    for s in run.steps:
        if s.value_norm is None or s.clip is None or s.drawn is None:
            continue
        bound = s.drawn * s.clip / (s.divisor if s.source == "record_noise" else 1.0)
        if s.value_norm > bound * (1 + CLIP_RTOL) + 1e-12:
            return [LoopFinding(
                "release_exceeds_clip_bound", s.step,
                f"the value noise was added to has norm {s.value_norm:.6g}; per-sample "
                f"clipping to {s.clip:g} bounds it by {bound:.6g} ({s.drawn} records drawn"
                + (f", divided by {s.divisor:g}" if s.source == "record_noise" else "")
                + "): clipping is not per-sample",
                evidence={"norm": s.value_norm, "bound": bound, "drawn": s.drawn,
                          "clip": s.clip, "divisor": s.divisor})]
    return []


def _noise_level(run: Run) -> list[LoopFinding]:
    """Noise absent, or below the declared level: each release tested alone (a step that
    falls short) and all of them pooled (a shortfall of every step, each too small to
    show alone in a model of few parameters), half the false-alarm probability each."""
    for s in run.steps:
        if s.noise_std == 0:
            return [LoopFinding("no_noise", s.step, f"the release at step {s.step} adds no "
                                "noise", evidence={"noise_std": 0.0})]
    tested = [s for s in run.steps if s.noise_p_value is not None]
    for s in tested:
        if s.noise_p_value < NOISE_ALPHA / (2 * len(tested)) and s.noise_measured < s.noise_std:
            return [LoopFinding(
                "noise_below_declared", s.step,
                f"the noise added at step {s.step} has standard deviation "
                f"{s.noise_measured:.6g}, declared {s.noise_std:.6g} (chi-square p = "
                f"{s.noise_p_value:.3g}; false alarm probability {NOISE_ALPHA:g} per run)",
                evidence={"measured": s.noise_measured, "declared": s.noise_std,
                          "p_value": s.noise_p_value})]
    return _pooled_noise_level([s for s in tested if s.noise_dof])


def _pooled_noise_level(tested: list[StepRecord]) -> list[LoopFinding]:
    """The releases' noise pooled: sum of ||noise||^2 / std^2 against chi2(sum of sizes)."""
    if len(tested) < 2:
        return []
    dof = sum(s.noise_dof for s in tested)
    stat = sum(s.noise_dof * (s.noise_measured / s.noise_std) ** 2 for s in tested)
    p = float(scipy.stats.chi2.cdf(stat, dof))
    if p >= NOISE_ALPHA / 2:
        return []
    ratio = math.sqrt(stat / dof)
    return [LoopFinding(
        "noise_below_declared", tested[0].step,
        f"the noise added over the {len(tested)} releases has {ratio:.4g} times the "
        f"declared standard deviation (pooled chi-square p = {p:.3g} on {dof} "
        f"coordinates; false alarm probability {NOISE_ALPHA:g} per run)",
        evidence={"measured_ratio": ratio, "releases": len(tested), "coordinates": dof,
                  "p_value": p})]
