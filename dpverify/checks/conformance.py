"""The conformance battery: register an algorithm and it is checked.

Like scikit-learn's ``check_estimator``, every registered variant gets the same checks,
generated from its declarations rather than typed into a suite:

==================  =====================================================================
``outputs``         the run returns finite outputs with a leading trial axis
``setting``         the public setting built from D and from D' is the same, field by field
``door``            the output depends on the records only through the curator's releases:
                    the recorded answers played back on other records give the same output
``determinism``     results do not depend on the order blocks run in, on a rerun, on other
                    trials' data (trial separability), or (with ``workers``) on processes
``account``         the accountant's epsilon on the executed ledger is within the claim
``sensitivity``     replay on canaries and a hypothesis search: no release moves more
                    than it declares
``audit.whitebox``  the exact privacy loss of the replayed releases, on the worst pair
``audit.blackbox``  distinguishing tests on the outputs
``agree``           NumPy and torch give the same trajectory and distribution
==================  =====================================================================

The expectation of each is derived, not typed: FAIL exactly where one of the variant's
declared :class:`~dpverify.core.claims.Finding` names the check (``audit`` names both audits),
PASS otherwise; a deliberate exception is a :class:`~dpverify.core.registry.CheckConfig` with
``expected`` and its ``reason``. Test sizes and per-check settings are declared on the
algorithm and variant (:class:`~dpverify.core.registry.Battery`).

From the command line, ``dpverify check TARGET`` (``name``, ``name:variant``, the name of
an installed package's ``dpverify.algorithms`` entry point, or nothing for every registered
algorithm); from pytest, :func:`parametrize_with_checks`; from a suite file,
``battery = [...]`` in its ``[suite]`` table.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math
import pickle
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.checks.base import (
    CheckKind,
    CheckResult,
    CheckSpec,
    Options,
    Outcome,
    Result,
    RunContext,
    doc,
    register_kind,
    run_check,
)
from dpverify.core.claims import Verdict
from dpverify.core.curator import Curator
from dpverify.core.data import Dataset, make_pair
from dpverify.core.errors import InputError, check_positive
from dpverify.core.registry import Battery, Target, all_algorithms, get_algorithm, resolve
from dpverify.execution.executors import Execution, in_fresh_process
from dpverify.execution.experiment import Experiment
from dpverify.execution.trials import BlockPlan, OutputBlock, run_blocks, seed_streams

__all__ = ["BATTERY", "BatteryCheck", "battery_specs", "check_targets",
           "expected_verdict", "parametrize_with_checks", "resolve_check_targets"]


@dataclass(frozen=True)
class BatteryCheck:
    """One check of the battery: its name, the kind that runs it and its default options."""

    name: str
    kind: str
    options: dict[str, Any] = field(default_factory=dict)
    thorough: dict[str, Any] = field(default_factory=dict)


BATTERY: tuple[BatteryCheck, ...] = (
    BatteryCheck("outputs", "outputs"),
    BatteryCheck("setting", "setting"),
    BatteryCheck("door", "door"),
    BatteryCheck("determinism", "determinism", thorough={"workers": 2}),
    BatteryCheck("account", "account"),
    BatteryCheck("sensitivity", "sensitivity", {"search": "all"}),
    # Fixed sizes: a variant's battery declares larger or smaller ones where it needs them.
    BatteryCheck("audit.whitebox", "audit", {"mode": "whitebox", "trials": 1000}),
    BatteryCheck("audit.blackbox", "audit", {"mode": "blackbox", "trials": 20000}),
    BatteryCheck("agree", "agree"),
)
BATTERY_NAMES = tuple(b.name for b in BATTERY)


def expected_verdict(target: Target, name: str) -> Verdict:
    """FAIL where a declared finding of the variant names check ``name``, else PASS.

    A finding that names ``audit`` is detected by both audits.

    Examples
    --------
    >>> t = resolve("noisy_gd:planted_half_steps")  # detected_by account and audit
    >>> [expected_verdict(t, n).value for n in ("account", "sensitivity", "audit.blackbox")]
    ['FAIL', 'PASS', 'FAIL']
    """
    for finding in target.variant.findings:
        for by in finding.detected_by:
            if by == name or (by == "audit" and name.startswith("audit.")):
                return Verdict.FAIL
    return Verdict.PASS


def target_battery(target: Target) -> Battery:
    """The variant's battery declarations laid over its algorithm's."""
    return target.variant.battery.over(target.algorithm.battery)


def battery_specs(target: Target, names: Sequence[str] | None = None) -> list[CheckSpec]:
    """The battery's checks for one variant, with their derived (or overridden) expectations.

    Examples
    --------
    >>> specs = battery_specs(resolve("noisy_gd:planted_no_clip"))
    >>> [(s.id, s.expected.value) for s in specs][:5]  # doctest: +NORMALIZE_WHITESPACE
    [('noisy_gd.planted_no_clip.outputs', 'PASS'), ('noisy_gd.planted_no_clip.setting', 'PASS'),
     ('noisy_gd.planted_no_clip.door', 'PASS'),
     ('noisy_gd.planted_no_clip.determinism', 'PASS'),
     ('noisy_gd.planted_no_clip.account', 'PASS')]
    """
    unknown = sorted(set(names or ()) - set(BATTERY_NAMES))
    if unknown:
        raise InputError(f"unknown battery check(s) {unknown}; known: {list(BATTERY_NAMES)}")
    battery = target_battery(target)
    stray = sorted(set(battery.checks) - set(BATTERY_NAMES))
    if stray:
        raise InputError(f"{target.id} configures unknown battery check(s) {stray}; known: "
                         f"{list(BATTERY_NAMES)}")
    base = f"{target.algorithm.name}.{target.variant.name}"
    specs = []
    for check in BATTERY:
        if names and check.name not in names:
            continue
        for cfg in battery.configs(check.name):
            if cfg.skip:
                continue
            derived = expected_verdict(target, check.name)
            expected = Verdict.parse(cfg.expected) if cfg.expected else derived
            specs.append(CheckSpec(
                id=f"{base}.{check.name}" + (f".{cfg.suffix}" if cfg.suffix else ""),
                kind=check.kind, target=target.id, expected=expected,
                params={**battery.params, **cfg.params},
                options={**check.options, **cfg.options},
                thorough={**check.thorough, **cfg.thorough},
                source=f"the battery of {target.id}", description=cfg.description,
                reason=cfg.reason if expected != derived else ""))
    return specs


def skipped_checks(target: Target) -> dict[str, str]:
    """Battery checks the variant declares not applicable, with the reason for each."""
    battery = target_battery(target)
    return {c.name + (f".{cfg.suffix}" if cfg.suffix else ""): cfg.skip
            for c in BATTERY for cfg in battery.configs(c.name) if cfg.skip}


# What to check --------------------------------------------------------------------------


def _entry_points() -> dict[str, list[str]]:
    """Each ``dpverify.algorithms`` entry point's name and module, with its algorithms."""
    out: dict[str, list[str]] = {}
    for ep in importlib.metadata.entry_points(group="dpverify.algorithms"):
        try:
            obj = ep.load()
            algos = obj() if callable(obj) else obj
        except Exception:  # noqa: BLE001  (the registry warns about a broken plugin)
            continue
        names = [a.name for a in algos]
        out.setdefault(ep.name, []).extend(names)
        module = ep.value.partition(":")[0]
        for key in {module, module.partition(".")[0]}:
            out.setdefault(key, []).extend(names)
    return out


def resolve_check_targets(specs: Sequence[str] | None) -> list[Target]:
    """The variants named by ``specs``: ``name``, ``name:variant``, an entry point or
    package name (every algorithm it registers), or nothing (every registered algorithm).

    Examples
    --------
    >>> [t.id for t in resolve_check_targets(["noisy_gd:sound"])]
    ['noisy_gd:sound']
    >>> len(resolve_check_targets(["baselines"])) == len(resolve_check_targets(["noisy_gd",
    ...                                                                      "dp_sgd"]))
    True
    """
    if not specs:
        return [Target(a, v) for a in all_algorithms() for v in a.variants.values()]
    out: list[Target] = []
    packages: dict[str, list[str]] | None = None
    for spec in specs:
        name, sep, variant = str(spec).partition(":")
        if sep:
            out.append(resolve(spec))
            continue
        try:
            algo = get_algorithm(name)
        except InputError:
            packages = _entry_points() if packages is None else packages
            if name not in packages:
                raise InputError(f"{spec!r} is neither a registered algorithm nor a package "
                                 f"that registers algorithms; packages: {sorted(packages)}; "
                                 f"algorithms: {[a.name for a in all_algorithms()]}") from None
            out += [Target(a, v) for n in dict.fromkeys(packages[name])
                    for a in [get_algorithm(n)] for v in a.variants.values()]
            continue
        out += [Target(algo, v) for v in algo.variants.values()]
    return list({t.id: t for t in out}.values())


def check_targets(specs: Sequence[str] | None,
                  names: Sequence[str] | None = None) -> list[CheckSpec]:
    """Every battery check of the variants ``specs`` names (see :func:`resolve_check_targets`)."""
    return [s for t in resolve_check_targets(specs) for s in battery_specs(t, names)]


# The checks the battery adds to the other kinds -----------------------------------------


@dataclass(frozen=True)
class OutputsOptions(Options):
    """``trials``: how many runs at once (the trial axis the outputs must carry)."""

    trials: int = 4


@dataclass(frozen=True)
class OutputsMetrics(Result):
    """The ``outputs`` check's numbers: shape and finiteness of the outputs."""

    trials: int | None = doc("runs")
    shape: list[Any] | None = doc("the output array's shape (trials first)")
    releases: int | None = doc("noisy releases in one run's ledger")
    nonfinite: int | None = doc("trials with a non-finite output")


@dataclass(frozen=True)
class SettingMetrics(Result):
    """The ``setting`` check's numbers: the public setting on neighbouring datasets."""

    pairs: int | None = doc("neighbouring pairs compared")
    differing_pairs: int | None = doc("pairs whose public settings differ")
    fields: list[Any] | None = doc("the fields that differ")


@dataclass(frozen=True)
class DeterminismMetrics(Result):
    """The ``determinism`` check's numbers: blocks of trials, reordered and spread."""

    trials: int | None = doc("runs")
    block_size: int | None = doc("trials per block")
    workers: int | None = doc("workers the blocks were spread over")
    reordered_identical: bool | None = doc("whether reordered blocks gave the same outputs")
    separable: bool | None = doc("whether a trial's output depends on its own stream only")


@register_kind
class OutputsCheck(CheckKind):
    """A run of ``trials`` trials returns finite outputs with a leading trial axis."""

    name = "outputs"
    Options = OutputsOptions
    Result = OutputsMetrics
    registered_only = True

    def run(self, exp: Experiment, options: OutputsOptions) -> Outcome:
        k = exp.trial_count(options.trials, 4)
        with np.errstate(all="ignore"):
            out, cur = exp.run(trials=k, rng=seed_streams(exp.seed, 2)[1])
        arr = np.asarray(cur.backend.to_numpy(out), dtype=float)
        metrics = OutputsMetrics(trials=k, shape=list(arr.shape), releases=len(cur.ledger))
        if arr.ndim < 1 or arr.shape[0] != k:
            return Outcome(Verdict.FAIL, metrics, {}, f"the output has shape {arr.shape}: "
                           f"no leading axis of the {k} trials")
        bad = int(np.sum(~np.isfinite(arr)))
        metrics = metrics.replace(nonfinite=bad)
        if bad:
            rows = np.flatnonzero(~np.isfinite(arr.reshape(k, -1)).all(axis=1)).tolist()
            return Outcome(Verdict.FAIL, metrics, {"trials_nonfinite": rows},
                           f"{bad} non-finite output values, in trials {rows}")
        return Outcome(Verdict.PASS, metrics, {}, f"{k} trials, outputs of shape "
                       f"{tuple(arr.shape)}, all finite ({len(cur.ledger)} releases)")


#: Canaries the setting check builds neighbours with (a rerun of the setting is cheap).
SETTING_PAIRS = ("fresh_direction", "clip_boundary", "outlier", "random")


@dataclass(frozen=True)
class SettingOptions(Options):
    """``neighbours``: canary generators; ``relation``: ``claim`` (the claim's relation) or
    ``both``."""

    neighbours: tuple[str, ...] = SETTING_PAIRS
    relation: str = "both"


@register_kind
class SettingCheck(CheckKind):
    """The public setting built from D and from D' must be the same, field by field."""

    name = "setting"
    Options = SettingOptions
    Result = SettingMetrics
    column = "privacy"
    registered_only = True

    def run(self, exp: Experiment, options: SettingOptions) -> Outcome:
        relations = (("add_remove", "replace_one") if options.relation == "both"
                     else (exp.claim.relation,))
        base = exp.problem.data
        rng = np.random.default_rng(seed_streams(exp.seed, 3)[2])
        found: list[dict[str, Any]] = []
        pairs = 0
        for relation in relations:
            for gen in options.neighbours:
                pair = make_pair(gen, base, rng, relation)
                pairs += 1
                diff = exp.setting(pair.D).differences(exp.setting(pair.D_prime))
                if diff:
                    found.append({"generator": gen, "relation": relation, "fields": diff})
        metrics = SettingMetrics(pairs=pairs, differing_pairs=len(found),
                                 fields=sorted({f for d in found for f in d["fields"]}))
        if found:
            first = found[0]
            return Outcome(Verdict.FAIL, metrics, {"differences": found},
                           f"the public setting differs between D and D' in "
                           f"{', '.join(metrics.fields or ())} ({len(found)} of {pairs} pairs; "
                           f"first: {first['generator']}, {first['relation']}): the variant "
                           "derives it from the records without a release")
        return Outcome(Verdict.PASS, metrics, {}, f"the same public setting on D and D' for "
                       f"{pairs} pairs under {', '.join(relations)}")


@dataclass(frozen=True)
class DoorOptions(Options):
    """``trials``: how many runs are recorded and played back."""

    trials: int = 8


@dataclass(frozen=True)
class DoorMetrics(Result):
    """The ``door`` check's numbers: a recorded run played back on other records."""

    trials: int | None = doc("runs recorded and played back")
    releases: int | None = doc("releases of the recorded run")
    identical: bool | None = doc("whether the playback gave the recorded output, bit for bit")
    moved: float | None = doc("the largest change of an output value on the other records")
    fresh_process: bool | None = doc("whether a playback was also made in a process that never "
                                     "ran the variant on D (see ``fresh_note``)")
    fresh_note: str | None = doc("why no playback was made in a fresh process, where none was")


@register_kind
class DoorCheck(CheckKind):
    """The output depends on the records only through the curator's releases.

    A run on D keeps every answer it was released; the same run (same seed, D's public
    setting) is then made on other records (D's own, drawn with replacement) with those
    answers handed out in place of its own, twice (after once on D itself, which must
    repeat the run: else the check is INCONCLUSIVE). Every query is still evaluated on the
    other records and every random draw made as before, so the outputs are bit-identical
    unless the variant reads the records some other way: a query that keeps the records it
    is handed, a read of the curator's private fields, records kept from one run for the
    next (a run on D comes before the recording, and the second playback follows one on
    the other records), and, by a third playback in a process that never ran the variant
    on D (:func:`~dpverify.execution.executors.in_fresh_process`), records a first-ever
    run keeps for every later one (a cache in a module's global; a run that raises there
    needs state of this process, which may be records, and is INCONCLUSIVE). What no
    release carries
    is seen by no accountant and no audit, which read the data through the releases only.
    Out of its reach: records read from elsewhere than the curator (a file), and a
    variant whose code cannot be imported by name in another process (the report says so).
    """

    name = "door"
    Options = DoorOptions
    Result = DoorMetrics
    registered_only = True

    def run(self, exp: Experiment, options: DoorOptions) -> Outcome:
        k = exp.trial_count(options.trials, 8)
        data = exp.problem.data
        seed = seed_streams(exp.seed, 6)[5]
        setting = exp.setting(data)
        with np.errstate(all="ignore"):
            # A run on D before the recorded one: state a run leaves for the next is then
            # D's when the recording and the control below start.
            exp.target.variant.run(Curator(data, trials=k, rng=_copy(seed),
                                           backend=exp.backend, n_public=data.n),
                                   setting, exp.params)
            rec = Curator(data, trials=k, rng=_copy(seed), backend=exp.backend,
                          n_public=data.n, keep_answers=True)
            first = _numpy_rows(rec, exp.target.variant.run(rec, setting, exp.params), k)
            job = Playback(exp.target, dict(exp.params), exp.backend,
                           [r.answer for r in rec.ledger.records], seed, k, setting)
            # First on D's own records: a run that does not repeat itself from its seed and
            # its answers cannot be judged by what other records change.
            again = job.on(data)[0]
            other = _resampled(data, seed)
            plays = [job.on(other) for _ in range(2)]
            status, fresh = job.elsewhere(other)
        answers = job.answers
        made = status == MADE
        metrics = DoorMetrics(trials=k, releases=len(rec.ledger), fresh_process=made,
                              fresh_note=None if made else str(fresh))
        plays += [fresh] if made else []
        if isinstance(again, str) or _largest_move(first, again) != 0.0:
            return Outcome(Verdict.INCONCLUSIVE, metrics, {},
                           "played back on D's own records with its own answers, the run "
                           "does not repeat itself (a global random stream, or state carried "
                           "from run to run: the determinism check tells which), so what "
                           "other records change cannot be told")
        if status == RAISED:
            return Outcome(Verdict.INCONCLUSIVE, metrics, {},
                           f"played back in a fresh process the run raised {fresh}: it needs "
                           "state this process holds beside its curator and setting, which "
                           "may be records (kept by its problem's builder, say), so the door "
                           "cannot be checked there")
        for out, signature in plays:
            why = (out if isinstance(out, str) else "the sequence of releases changed"
                   if signature != rec.ledger.signature() else None)
            if why:
                return Outcome(Verdict.FAIL, metrics.replace(identical=False), {},
                               f"on other records with the same answers {why}: the variant "
                               "reads the records other than through its releases")
        moved = max(_largest_move(first, out) for out, _ in plays)
        metrics = metrics.replace(identical=moved == 0.0, moved=moved)
        if moved != 0.0:
            return Outcome(Verdict.FAIL, metrics, {},
                           f"the output moves by {moved:.3g} on other records given the same "
                           f"{len(answers)} released answers: the variant reads the records "
                           "other than through its releases")
        where = ("twice in this process and once in a fresh one" if made else
                 f"twice (not in a fresh process: {fresh})")
        return Outcome(Verdict.PASS, metrics, {}, f"{k} runs' outputs are bit-identical, "
                       f"{where}, on other records given the same {len(answers)} released "
                       "answers")


@dataclass(frozen=True)
class Playback:
    """A recorded run to play back: the variant (a target, or its run function where it
    travels to another process), its parameters and backend, the answers, seed, trials
    and D's public setting."""

    target: Target | str | None
    params: dict[str, Any]
    backend: str
    answers: list[Any]
    seed: np.random.SeedSequence
    k: int
    setting: Any
    run: Any = None

    def on(self, data: Dataset) -> tuple[Any, list[tuple[Any, ...]]]:
        """The output rows on ``data`` with the answers played back (or the reason, a string,
        where it asked for a release the recorded run did not make), and the sequence of
        releases it made."""
        cur = Curator.playback(data, self.answers, trials=self.k, rng=_copy(self.seed),
                               backend=self.backend, n_public=data.n)
        out = _numpy_rows(cur, self.variant_run()(cur, self.setting, self.params), self.k)
        if cur.unplayed is not None:
            i = cur.unplayed
            out = (f"release {i} was not made by the recorded run, which made "
                   f"{len(self.answers)}" if i >= len(self.answers)
                   else f"release {i} has another shape")
        return out, cur.ledger.signature()

    def variant_run(self) -> Any:
        """The variant's run function: its own, or its target's (resolved by id)."""
        if self.run is not None:
            return self.run
        t = self.target if isinstance(self.target, Target) else resolve(str(self.target))
        return t.variant.run

    def elsewhere(self, data: Dataset) -> tuple[str, Any]:
        """:meth:`on` in a process that never ran the variant on D: (:data:`MADE`, its
        result), (:data:`RAISED`, the exception the run raised there) or
        (:data:`UNAVAILABLE`, why it could not be sent there: the variant's code must be
        importable by name, a registered target's or a run function at a module's top
        level)."""
        t = self.target
        assert isinstance(t, Target)
        try:
            pickle.dumps(t.variant.run)
            job = dataclasses.replace(self, target=None, run=t.variant.run)
        except Exception:
            job = dataclasses.replace(self, target=t.id)
        try:
            return in_fresh_process(_play_elsewhere, pickle.dumps((job, data)))
        except Exception as e:
            return UNAVAILABLE, f"it could not be sent there ({type(e).__name__}: {e})"


# What became of a playback in a fresh process.
MADE, RAISED, UNAVAILABLE = "made", "raised", "unavailable"


def _play_elsewhere(payload: bytes) -> tuple[str, Any]:
    try:
        job, data = pickle.loads(payload)
        job.variant_run()
    except Exception as e:
        return UNAVAILABLE, f"its code could not be found there ({type(e).__name__}: {e})"
    try:
        with np.errstate(all="ignore"):
            return MADE, job.on(data)
    except Exception as e:
        return RAISED, f"{type(e).__name__}: {e}"


def _numpy_rows(cur: Curator, out: Any, k: int) -> np.ndarray:
    return np.asarray(cur.backend.to_numpy(out), dtype=float).reshape(k, -1)


def _largest_move(a: np.ndarray, b: np.ndarray) -> float:
    """0 where ``a`` and ``b`` are the same (NaN where NaN), else the largest change."""
    if a.shape == b.shape and np.array_equal(a, b, equal_nan=True):
        return 0.0
    if a.shape != b.shape:
        return math.inf
    with np.errstate(invalid="ignore"):
        d = np.abs(a - b)
    return float(np.nanmax(d)) if np.isfinite(d).any() and np.nanmax(d) > 0 else math.inf


def _resampled(data: Dataset, seed: Any) -> Dataset:
    """Other records of the same kind: D's own, drawn with replacement."""
    idx = np.random.default_rng(seed_streams(_copy(seed), 2)[1]).integers(0, data.n, data.n)
    return Dataset(data.X[idx], data.y[idx], data.allow_nonfinite)


@dataclass(frozen=True)
class DeterminismOptions(Options):
    """``trials`` in blocks of ``block_size``; ``workers`` > 0 also runs the blocks in that
    many local processes."""

    trials: int = 8
    block_size: int = 4
    workers: int = 0

    def validate(self) -> None:
        check_positive(self.trials, "trials", integer=True)
        check_positive(self.block_size, "block_size", integer=True)
        if self.workers < 0:
            raise InputError(f"workers must be >= 0, got {self.workers}")


@register_kind
class DeterminismCheck(CheckKind):
    """Results depend on the seed and the block size alone.

    The same blocks give bit-identical outputs run in order and in reverse (no state
    carried from block to block, no global random stream), in worker processes when asked,
    and each trial's output is the same whatever data the block's other trials hold
    (trials are separable: the batched run is K independent runs).
    """

    name = "determinism"
    Options = DeterminismOptions
    Result = DeterminismMetrics
    registered_only = True

    def run(self, exp: Experiment, options: DeterminismOptions) -> Outcome:
        trials = exp.trial_count(options.trials, 8)
        k = min(options.block_size, trials)
        data = exp.problem.data
        seed = seed_streams(exp.seed, 4)[3]
        fn = OutputBlock(exp.target, exp.params, exp.problem, data, exp.backend)
        with np.errstate(all="ignore"):
            forward = run_blocks(fn, trials, seed=_copy(seed), plan=BlockPlan(k)).concatenate()
            backward = _reversed_blocks(fn, trials, _copy(seed), k)
            parallel = (run_blocks(fn, trials, seed=_copy(seed), plan=BlockPlan(
                            k, Execution("local", workers=options.workers))).concatenate()
                        if options.workers > 0 else None)
            separable, moved = _trial_separable(exp, data, k, seed)
        problems = []
        if not _same(forward, backward):
            problems.append("blocks run in reverse order give other outputs (state carried "
                            "between blocks, or a global random stream)")
        if parallel is not None and not _same(forward, parallel):
            problems.append(f"{options.workers} worker processes give other outputs")
        if not separable:
            problems.append(f"trial 0's output moves by {moved:.3g} when the block's other "
                            "trials hold other data: trials are not independent runs")
        metrics = DeterminismMetrics(trials=trials, block_size=k, workers=options.workers,
                                     separable=bool(separable),
                                     reordered_identical=bool(_same(forward, backward)))
        if problems:
            return Outcome(Verdict.FAIL, metrics, {}, "; ".join(problems))
        return Outcome(Verdict.PASS, metrics, {}, f"{trials} trials in blocks of {k}: "
                       "identical in reverse block order" +
                       (f" and on {options.workers} workers" if options.workers else "") +
                       "; each trial independent of the others' data")


def _copy(ss: np.random.SeedSequence) -> np.random.SeedSequence:
    """A fresh copy: spawning children advances a SeedSequence, and each run needs the same."""
    return np.random.SeedSequence(ss.entropy, spawn_key=ss.spawn_key, pool_size=ss.pool_size)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def _reversed_blocks(fn: OutputBlock, trials: int, seed: Any, k: int) -> np.ndarray:
    sizes = [min(k, trials - s) for s in range(0, trials, k)]
    seeds = seed_streams(seed, len(sizes))
    out: list[Any] = [None] * len(sizes)
    for i in reversed(range(len(sizes))):
        out[i] = fn(seeds[i], sizes[i], i)
    return np.concatenate(out, axis=0)


def _trial_separable(exp: Experiment, data: Dataset, k: int, seed: Any) -> tuple[bool, float]:
    """Trial 0 of a block, with the other trials on D and then on other records.

    Both runs hold the same slots (D's records, then as many others), so every random draw
    is the same; only the data the other trials see differs.
    """
    if k < 2:
        return True, 0.0
    other = _resampled(data, seed)
    slots = Dataset(np.vstack([data.X, other.X]), np.concatenate([data.y, other.y]),
                    data.allow_nonfinite)
    n = data.n
    same = np.zeros((k, 2 * n), dtype=bool)
    same[:, :n] = True
    mixed = same.copy()
    mixed[1:] = ~same[1:]
    setting = exp.setting(data)
    outs = []
    for mask in (same, mixed):
        cur = Curator.membership(slots, mask, trials=k, rng=seed_streams(_copy(seed), 1)[0],
                                 backend=exp.backend, n_public=n)
        out = exp.target.variant.run(cur, setting, exp.params)
        outs.append(_numpy_rows(cur, out, k)[0])
    moved = _largest_move(*outs)
    return moved == 0.0, moved


# pytest ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatteryTest:
    """One battery check as a pytest parameter: call it to run it and assert it was met."""

    spec: CheckSpec
    seed: int = 0
    scale: str = "quick"

    def __call__(self) -> CheckResult:
        res = run_check(self.spec, RunContext(seed=self.seed, scale=self.scale))
        if not res.met:
            o = res.outcome
            raise AssertionError(
                f"{self.spec.id}: {o.verdict.value}, expected {self.spec.expected.value}: "
                f"{o.message}\nmetrics: {o.metrics}")
        return res

    def __repr__(self) -> str:
        return self.spec.id


def parametrize_with_checks(targets: Iterable[str] | str | None = None, *,
                            names: Sequence[str] | None = None, seed: int = 0,
                            scale: str = "quick") -> Any:
    """A ``pytest.mark.parametrize`` over the battery of ``targets``, one test per check.

    ``targets`` as for ``dpverify check`` (``name``, ``name:variant``, a package's entry
    point, or ``None`` for everything registered); ``names`` picks battery checks.

    Examples
    --------
    >>> mark = parametrize_with_checks(["noisy_gd:sound"], names=["account"])
    >>> mark.args[0], [p.id for p in mark.args[1]] == ["noisy_gd.sound.account"]
    ('check', True)

    In a test file::

        from dpverify.checks.conformance import parametrize_with_checks

        @parametrize_with_checks(["my_algorithm"])
        def test_my_algorithm(check):
            check()
    """
    import pytest

    specs = check_targets([targets] if isinstance(targets, str) else
                          (list(targets) if targets is not None else None), names)
    return pytest.mark.parametrize(
        "check", [pytest.param(BatteryTest(s, seed, scale), id=s.id) for s in specs])
