"""Replay on neighbours: the true difference of every release against its declared bound.

Two measurements on one neighbouring pair (D, D'):

* :func:`measure_pair` runs the target on a replaying curator
  (:meth:`dpverify.core.curator.Curator.replay`): every query is evaluated on D and on D' at the
  same state, with the same batch and the same released history, and
  ``ReplayRecord.true_difference`` gives ||q(D) - q(D')|| in the declared norm. The worst ratio
  true / declared over releases and trials, and where it happened, is the result. A
  non-finite difference, an ``exact`` release that moves, or a run that raises on the pair
  is a violation.
* :func:`check_invariance` is the post-processing taint test: the target runs once in the
  world of D and once in the world of D', the second run receiving the first run's released
  answers verbatim (the coupling noise' = noise + q(D) - q(D')). Whatever the algorithm does
  apart from its queries (how many releases, their names, declared sensitivities, noise
  scales, sampling schemes and rates, the batches it draws, and its output) must then be
  identical. A difference means the data reach the algorithm through a side door.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.core.curator import Batch, Curator, Ledger
from dpverify.core.data import Dataset, NeighbourPair
from dpverify.core.registry import Problem, Target
from dpverify.execution.trials import run_target

#: Relative tolerance: a difference counts as a violation above
#: ``declared * (1 + rtol) + rtol * max(||q(D)||, ||q(D')||)``; the second term absorbs the
#: rounding of sums over many records.
DEFAULT_RTOL = 1e-6

_SIGNATURE_FIELDS = ("name", "mechanism", "sensitivity", "noise", "sampling", "rate",
                     "batch_size", "shape")


@dataclass
class LedgerExcess:
    """The worst release of a replayed ledger, relative to its declared sensitivity."""

    worst_ratio: float
    declared: float | None
    true_difference: float
    release: int | None
    query: str | None
    step: int | None
    trial: int | None
    violations: int  # (release, trial) cells above the declared bound
    nonfinite: int  # cells whose difference is NaN or infinite
    cells: int
    release_info: dict[str, Any] = field(default_factory=dict)


def ledger_excess(ledger: Ledger, rtol: float = DEFAULT_RTOL) -> LedgerExcess:
    """Worst ratio ||q(D) - q(D')|| / declared over the replayed releases of ``ledger``.

    An ``exact`` release counts as declared sensitivity 0: if it moves, the ratio is inf.

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> D = Dataset(np.eye(3), np.zeros(3))
    >>> cur = Curator.replay(NeighbourPair.add_remove(D, 1), trials=2, rng=0)
    >>> _ = cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=0.5, noise_std=1.0)
    >>> ex = ledger_excess(cur.ledger)
    >>> ex.worst_ratio, ex.violations, ex.query
    (2.0, 2, 'sum')
    """
    ratios, viol, nonfin, rels = [], [], [], []
    for rec in ledger.records:
        td, r = rec.true_difference, rec.release
        if td is None:
            continue
        declared = float(r.sensitivity) if r.sensitivity is not None else 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            mag = np.maximum(_finite_norm(rec.value_D), _finite_norm(rec.value_D_prime))
            bad = ~np.isfinite(td)
            allowed = declared * (1.0 + rtol) + rtol * mag
            over = bad | (td > allowed)
            if declared > 0:
                ratio = np.where(bad, np.inf, td / declared)
            else:
                ratio = np.where(over, np.inf, 0.0)
        ratios.append(ratio)
        viol.append(over)
        nonfin.append(bad)
        rels.append(rec)
    if not rels:
        return LedgerExcess(0.0, None, 0.0, None, None, None, None, 0, 0, 0)
    R = np.stack(ratios)  # (releases, trials)
    V = np.stack(viol)
    # The worst cell: a violating one first, then the largest ratio, then the earliest.
    key = np.where(V, 1.0, 0.0) * 2.0 + np.where(R > 0, 1.0 - 1.0 / (1.0 + R), 0.0)
    i, k = np.unravel_index(int(np.argmax(key)), R.shape)
    rec = rels[i]
    r = rec.release
    return LedgerExcess(
        worst_ratio=float(R[i, k]),
        declared=None if r.sensitivity is None else float(r.sensitivity),
        true_difference=float(rec.true_difference[k]),
        release=int(r.index), query=r.name, step=r.step, trial=int(k),
        violations=int(V.sum()), nonfinite=int(np.stack(nonfin).sum()), cells=int(V.size),
        release_info=r.summary(),
    )


def _finite_norm(v: np.ndarray | None) -> np.ndarray:
    if v is None:
        return np.zeros(1)
    return np.linalg.norm(np.where(np.isfinite(v), v, 0.0), axis=1)


def _record(D: Dataset, i: int) -> dict[str, Any]:
    return {"x": D.X[i].tolist(), "y": float(D.y[i])}


def differing_records(pair: NeighbourPair) -> tuple[dict | None, dict | None]:
    """The record at ``pair.index`` in D and in D' (None where a dataset lacks it).

    Examples
    --------
    >>> D = Dataset(np.eye(2), np.ones(2))
    >>> differing_records(NeighbourPair.add_remove(D, 1))
    ({'x': [0.0, 1.0], 'y': 1.0}, None)
    """
    D, Dp, i = pair.D, pair.D_prime, pair.index
    if pair.relation == "replace_one":
        return _record(D, i), _record(Dp, i)
    return (_record(D, i), None) if D.n > Dp.n else (None, _record(Dp, i))


@dataclass
class PairResult:
    """The sensitivity measured on one neighbouring pair."""

    generator: str
    relation: str
    index: int
    record_D: dict | None
    record_D_prime: dict | None
    worst_ratio: float
    declared: float | None
    true_difference: float
    release: int | None
    query: str | None
    step: int | None
    trial: int | None
    violations: int
    nonfinite: int
    cells: int
    releases: int
    error: str | None = None
    release_info: dict[str, Any] = field(default_factory=dict, repr=False)
    pair: NeighbourPair | None = field(default=None, repr=False, compare=False)
    # Fields of the public setting that came out different on D and D': data the variant
    # used before it ran, outside every release (declared sensitivity 0, moved).
    setting_differences: list[str] = field(default_factory=list)

    @property
    def violated(self) -> bool:
        """Whether some release moved more than it declared, the public setting differs
        between D and D', or the run failed on the pair."""
        return self.violations > 0 or self.error is not None or bool(self.setting_differences)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (without the datasets)."""
        d = dataclasses.asdict(dataclasses.replace(self, pair=None))
        d.pop("pair")
        d["violated"] = self.violated
        return d

    def describe(self) -> str:
        """One line: where and by how much."""
        if self.error is not None:
            return f"{self.generator} ({self.relation}): the run raised {self.error}"
        if self.setting_differences:
            return (f"{self.generator} ({self.relation}, index {self.index}): the public "
                    f"setting differs between D and D' in {', '.join(self.setting_differences)}")
        where = (f"release {self.release} {self.query!r}"
                 + (f" step {self.step}" if self.step is not None else ""))
        declared = "exact" if self.declared is None else f"{self.declared:.4g}"
        return (f"{self.generator} ({self.relation}, index {self.index}): ratio "
                f"{self.worst_ratio:.4g} = {self.true_difference:.4g} / {declared} at {where}")


@dataclass(frozen=True)
class Replay:
    """What is replayed on neighbouring pairs, and how: the target with its parameters and
    problem, the trials of each replay, their seed and the backend.

    Every pair is replayed with the same seed, so pairs differ only in their records.

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> from dpverify.execution.trials import build_problem
    >>> t = resolve("noisy_gd:sound")
    >>> p = t.algorithm.params("sound", {"T": 3, "n": 50})
    >>> rp = Replay(t, p, build_problem(t, p, 0), trials=2, rng=np.random.SeedSequence(1))
    >>> rp.on(rp.problem).trials, rp.backend
    (2, 'numpy')
    """

    target: Target
    params: Mapping[str, Any]
    problem: Problem
    trials: int
    rng: np.random.SeedSequence
    backend: str = "numpy"

    def on(self, problem: Problem) -> Replay:
        """The same replay with another problem (a user's pair brings its own data)."""
        return dataclasses.replace(self, problem=problem)


def measure_pair(replay: Replay, pair: NeighbourPair, *, generator: str = "",
                 rtol: float = DEFAULT_RTOL) -> PairResult:
    """Replay the target on ``pair`` and return its worst release.

    A run that raises on the pair is recorded as a violation (its failure is itself an
    event that differs between D and D'). ``rtol`` is the tolerance of
    :func:`ledger_excess`; ``generator`` names the pair (default: its label).

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> from dpverify.core.data import canary_outlier
    >>> from dpverify.execution.trials import build_problem
    >>> t = resolve("noisy_gd:planted_no_clip")
    >>> p = t.algorithm.params(t.variant.name, {"T": 3, "n": 50})
    >>> prob = build_problem(t, p, 0)
    >>> pair = canary_outlier(prob.data, np.random.default_rng(0))
    >>> res = measure_pair(Replay(t, p, prob, trials=2, rng=np.random.SeedSequence(1)), pair)
    >>> res.violated, res.query, res.worst_ratio > 10
    (True, 'grad_sum', True)
    """
    rec_D, rec_Dp = differing_records(pair)
    base = dict(generator=generator or pair.label, relation=pair.relation, index=pair.index,
                record_D=rec_D, record_D_prime=rec_Dp, pair=pair)
    rp = replay
    try:
        with np.errstate(all="ignore"):
            _, cur = run_target(rp.target, rp.params, rp.problem, trials=rp.trials, rng=rp.rng,
                                data=pair, backend=rp.backend)
    except Exception as e:  # noqa: BLE001  (a run that fails on a pair is a finding)
        return PairResult(**base, worst_ratio=np.inf, declared=None, true_difference=np.nan,
                          release=None, query=None, step=None, trial=None, violations=0,
                          nonfinite=0, cells=0, releases=0, error=f"{type(e).__name__}: {e}")
    ex = ledger_excess(cur.ledger, rtol)
    if cur.setting_differences:
        return PairResult(
            **base, worst_ratio=np.inf, declared=0.0, true_difference=np.inf, release=None,
            query="setting: " + ", ".join(cur.setting_differences), step=None, trial=None,
            violations=ex.violations, nonfinite=ex.nonfinite, cells=ex.cells,
            releases=len(cur.ledger), release_info=ex.release_info,
            setting_differences=list(cur.setting_differences))
    return PairResult(
        **base, worst_ratio=ex.worst_ratio, declared=ex.declared,
        true_difference=ex.true_difference, release=ex.release, query=ex.query, step=ex.step,
        trial=ex.trial, violations=ex.violations, nonfinite=ex.nonfinite, cells=ex.cells,
        releases=len(cur.ledger), release_info=ex.release_info,
    )


# Invariance ---------------------------------------------------------------------------


class _CoupledCurator(Curator):
    """A replaying curator that records the batches it hands out; run in the second world,
    it plays the first world's answers back (:meth:`Curator.play`), so the algorithm sees
    one released history in both worlds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[tuple[str, np.ndarray | None]] = []

    def full_batch(self) -> Batch:
        b = super().full_batch()
        self.batches.append(("full", None))
        return b

    def sample(self, scheme: str, *, rate: float | None = None,
               size: int | None = None) -> Batch:
        b = super().sample(scheme, rate=rate, size=size)
        if scheme != "full":
            self.batches.append((scheme, b.weights.copy()))
        return b

    def epoch(self, size: int, *, epoch: int | None = None) -> list[Batch]:
        out = super().epoch(size, epoch=epoch)
        self.batches.extend(("shuffle", b.weights.copy()) for b in out)
        return out


@dataclass
class InvarianceResult:
    """The taint test on one pair: what differed although the released answers did not."""

    generator: str
    relation: str
    differences: list[str]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return not self.differences and self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {"generator": self.generator, "relation": self.relation, "ok": self.ok,
                "differences": self.differences, "error": self.error}


def _swapped(pair: NeighbourPair) -> NeighbourPair:
    return NeighbourPair(pair.D_prime, pair.D, pair.relation, pair.index, pair.label)


def check_invariance(replay: Replay, pair: NeighbourPair, *, generator: str = "",
                     n_public: int | None = None) -> InvarianceResult:
    """Run in D's world, then in D''s world fed D's released answers; compare the rest.

    Both runs use the same seed and the same record slots (add/remove leaves the missing
    record's slot empty), so their batches are drawn identically; each run's ``problem``
    carries its own world's data, so an algorithm that reads ``problem.data`` instead of
    asking the curator shows up here. ``n_public`` is the public record count (default:
    the problem's).

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> from dpverify.core.data import canary_outlier
    >>> from dpverify.execution.trials import build_problem
    >>> t = resolve("dp_sgd:sound")
    >>> p = t.algorithm.params("sound", {"T": 3, "n": 60})
    >>> prob = build_problem(t, p, 0)
    >>> pair = canary_outlier(prob.data, np.random.default_rng(0))
    >>> rp = Replay(t, p, prob, trials=2, rng=np.random.SeedSequence(1))
    >>> check_invariance(rp, pair).ok
    True
    """
    gen = generator or pair.label
    target, params, problem = replay.target, replay.params, replay.problem
    n_pub = int(n_public if n_public is not None else problem.data.n)
    runs = []
    try:
        for world in (pair, _swapped(pair)):
            cur = _CoupledCurator.replay(world, trials=replay.trials, rng=replay.rng,
                                         backend=replay.backend, n_public=n_pub,
                                         keep_answers=not runs)
            if runs:
                cur.play([r.answer for r in runs[0][1].ledger.records])
            # Each world's setting is built from its own records, as a run on it would be.
            setting = target.setting(problem, params, world.D)
            with np.errstate(all="ignore"):
                out = target.variant.run(cur, setting, params)
            runs.append((out, cur))
    except Exception as e:  # noqa: BLE001  (a run that fails in one world is a finding)
        return InvarianceResult(gen, pair.relation, [], f"{type(e).__name__}: {e}")
    (out_a, a), (out_b, b) = runs
    return InvarianceResult(gen, pair.relation, _compare(out_a, a, out_b, b))


def _compare(out_a: Any, a: _CoupledCurator, out_b: Any, b: _CoupledCurator) -> list[str]:
    diffs: list[str] = []
    la, lb = a.ledger, b.ledger
    if len(la) != len(lb):
        diffs.append(f"control flow: {len(la)} releases in D's world, {len(lb)} in D''s, "
                     "with the same released answers")
    if b.unplayed is not None and b.unplayed < len(la):
        diffs.append(f"release {b.unplayed} has a different shape in D''s world")
    sig_a, sig_b = la.signature(), lb.signature()
    for j, (fa, fb) in enumerate(zip(sig_a, sig_b, strict=False)):
        changed = [f"{name} {x!r} vs {y!r}"
                   for name, x, y in zip(_SIGNATURE_FIELDS, fa, fb, strict=True) if x != y]
        if changed:
            diffs.append(f"release {j} ({fa[0]!r}): " + ", ".join(changed))
            break  # later releases follow from the first divergence
    if len(a.batches) != len(b.batches):
        diffs.append(f"{len(a.batches)} batches drawn in D's world, {len(b.batches)} in D''s")
    for j, ((ka, wa), (kb, wb)) in enumerate(zip(a.batches, b.batches, strict=False)):
        if ka != kb:
            diffs.append(f"batch {j}: scheme {ka!r} vs {kb!r}")
            break
        if wa is not None and wb is not None and not np.array_equal(wa, wb):
            trials = int(np.any(wa != wb, axis=1).sum()) if wa.shape == wb.shape else -1
            diffs.append(f"batch {j} ({ka}): the records drawn differ"
                         + (f" in {trials} trials" if trials >= 0 else ""))
            break
    for ra, rb in zip(la, lb, strict=False):
        if (ra.touched is not None and rb.touched is not None
                and not np.array_equal(ra.touched, rb.touched)):
            diffs.append(f"release {ra.index} ({ra.name!r}): touched records differ")
            break
    try:
        oa = np.asarray(a.backend.to_numpy(out_a), dtype=float)
        ob = np.asarray(b.backend.to_numpy(out_b), dtype=float)
    except (TypeError, ValueError):
        return diffs  # an output that is not an array is not compared
    if oa.shape != ob.shape or not np.array_equal(oa, ob, equal_nan=True):
        diffs.append("the output differs although every released answer was the same: "
                     "the algorithm reads the data outside the curator")
    return diffs
