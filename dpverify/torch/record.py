"""Recording a PyTorch training run: what it released, step by step, as a dpverify ledger.

:func:`record` is a context manager. Inside it, every noisy release of the run is written
to an executed :class:`~dpverify.core.curator.Ledger` (the curator's format, so
:func:`dpverify.accounting.accountant.account_ledger`, the sensitivity report and the
white-box audit
read it unchanged), with a :class:`StepRecord` beside each release holding how it was
executed (the batch size drawn, the divisor, the clip norm, the measured noise).

* Opacus: nothing to add. ``PrivacyEngine.make_private`` and
  ``make_private_with_epsilon`` called inside the block are observed (what the accountant
  and the normaliser were computed from: a :class:`Declaration`), the returned
  ``DPOptimizer`` is recorded at each step (its clipped sum, its noise, its divisor), the
  data loader's sampler gives the batches drawn, and every Opacus accountant's ``step``
  gives what was accounted.
* Hand-written loops: call :func:`record_noise` where noise is added. Outside a recording
  it does nothing, so the call can stay in the training code.

With a :class:`~dpverify.torch.pair.CanaryPair` the run is replayed as it goes: each
release's query is evaluated on the batch as it reads in D and in D', at the run's
current state (:mod:`dpverify.torch.replay`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.stats
import torch

from dpverify.core.claims import check_relation
from dpverify.core.curator import AMPLIFIED, SAMPLING_SCHEMES, Ledger, Release, ReplayRecord
from dpverify.core.errors import InputError
from dpverify.torch.pair import CanaryPair, Slots
from dpverify.torch.replay import Replayed, flat, project

_ACTIVE: list[Recorder] = []


@dataclass(frozen=True)
class Mechanism:
    """What a hand-written loop declares about one noisy release.

    ``noise_std`` is the standard deviation of the Gaussian noise added; ``sensitivity``
    the L2 sensitivity the loop assumes for the value noise is added to (``clip`` for a
    sum of per-sample gradients clipped to ``clip`` under add/remove, ``clip / divisor``
    for their mean); ``sampling`` and ``rate`` how the batch was drawn (Poisson with
    probability ``rate``, ``shuffle`` for fixed batches of a partition, ``full``);
    ``divisor`` what the released sum is divided by.

    Examples
    --------
    >>> Mechanism(noise_std=1.1, sensitivity=1.0, clip=1.0, rate=0.01).noise_multiplier
    1.1
    """

    noise_std: float
    sensitivity: float
    clip: float | None = None
    sampling: str = "poisson"
    rate: float = 1.0
    divisor: float = 1.0
    name: str = "grad"

    def __post_init__(self) -> None:
        for what in ("noise_std", "sensitivity", "divisor"):
            v = getattr(self, what)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InputError(f"Mechanism.{what} must be a finite number >= 0, got {v!r}")
        if self.sensitivity <= 0 or self.divisor <= 0:
            raise InputError("Mechanism.sensitivity and divisor must be > 0")
        if self.sampling not in SAMPLING_SCHEMES:
            raise InputError(f"Mechanism.sampling must be one of {SAMPLING_SCHEMES}, got "
                             f"{self.sampling!r}")
        if not (0.0 < float(self.rate) <= 1.0):
            raise InputError(f"Mechanism.rate must be in (0, 1], got {self.rate!r}")

    @property
    def noise_multiplier(self) -> float:
        return self.noise_std / self.sensitivity


@dataclass
class StepRecord:
    """How one release was executed, beside its ledger entry (same index)."""

    release: int
    step: int
    source: str  # "opacus" or "record_noise"
    drawn: int | None  # batch size actually drawn
    clip: float | None
    noise_std: float
    divisor: float = 1.0
    value_norm: float | None = None  # ||value noise was added to||
    noise_measured: float | None = None  # sqrt(||noisy - value||^2 / P)
    noise_p_value: float | None = None  # chi-square test of the noise against noise_std
    noise_dof: int | None = None  # coordinates of the noise measured
    replay_error: float | None = None  # replayed query vs executed value, relative
    hyper: list[dict[str, Any]] | None = field(default=None, repr=False)
    rows: np.ndarray | None = field(default=None, repr=False)  # the batch drawn
    noise: np.ndarray | None = field(default=None, repr=False)  # kept when tracing

    def to_dict(self) -> dict[str, Any]:
        keep = ("release", "step", "source", "drawn", "clip", "noise_std", "divisor",
                "value_norm", "noise_measured", "noise_p_value", "noise_dof", "replay_error")
        return {k: getattr(self, k) for k in keep}


@dataclass
class Declaration:
    """What a loop's accountant and normaliser were computed from (one ``make_private*``
    call, or :meth:`Recorder.declare_accounting`)."""

    source: str
    noise_multiplier: float | None = None
    max_grad_norm: float | None = None
    sample_rate: float | None = None
    dataset_size: int | None = None
    batch_size: int | None = None  # the data loader's
    drop_last: bool = False
    loss_reduction: str | None = None
    expected_batch_size: float | None = None  # the divisor of a "mean" reduction
    poisson_sampling: bool | None = None
    accountant: str | None = None
    target_epsilon: float | None = None
    target_delta: float | None = None
    steps: int | None = None  # steps the noise was calibrated or declared for

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Executed:
    """One noisy release as the hooks saw it (internal: becomes a Release and a StepRecord)."""

    name: str
    noise_std: float
    sensitivity: float
    clip: float | None
    sampling: str
    rate: float
    value: np.ndarray | None
    answer: np.ndarray
    source: str
    shape: tuple[int, ...]
    divisor: float = 1.0
    rows: np.ndarray | None = None
    drawn: int | None = None
    dataset_size: int = 0
    hyper: list[dict[str, Any]] | None = None
    replay: Replayed | None = None
    replay_error: float | None = None


def noise_test(noise: np.ndarray, std: float) -> tuple[float | None, float | None]:
    """Measured noise standard deviation and the two-sided chi-square p-value of
    ||noise||^2 / std^2 against chi2(P) (P coordinates of N(0, std^2) noise).

    Examples
    --------
    >>> z = np.random.default_rng(0).normal(0, 2.0, 10000)
    >>> s, p = noise_test(z, 2.0); round(s, 1), p > 1e-3
    (2.0, True)
    >>> noise_test(z, 1.0)[1] < 1e-12
    True
    """
    P = noise.size
    if P == 0:
        return None, None
    ss = float(noise @ noise)
    measured = math.sqrt(ss / P)
    if std == 0:
        return measured, 1.0 if ss == 0 else 0.0
    stat = ss / std**2
    p = 2.0 * min(scipy.stats.chi2.cdf(stat, P), scipy.stats.chi2.sf(stat, P))
    return measured, float(min(1.0, p))


@dataclass(frozen=True)
class ReplaySpec:
    """Replay a recorded run on a neighbouring pair: the run trains on ``pair.world(world)``.

    ``criterion`` is the per-record loss an Opacus replay differentiates (by default the
    ``criterion`` given to ``make_private``, Opacus's own default ``CrossEntropyLoss``);
    ``seed`` draws the canary's inclusion where the run's world lacks it.
    """

    pair: CanaryPair
    world: int = 0
    criterion: Callable[..., Any] | None = None
    seed: int = 0


class Recorder:
    """The active recording: hooks, the executed ledger and its step records.

    Use through :func:`record`.
    """

    def __init__(self, replay: ReplaySpec | None = None, *, relation: str | None = None,
                 dataset_size: int | None = None, trace: bool = False) -> None:
        self.replay = replay
        pair = None if replay is None else replay.pair
        if pair is not None and replay.world not in (0, 1):
            raise InputError(f"replay world must be 0 (D) or 1 (D'), got {replay.world!r}")
        self.relation = check_relation(relation or (pair.relation if pair else "add_remove"))
        if pair is not None and pair.relation != self.relation:
            raise InputError(f"relation {self.relation!r} differs from the pair's "
                             f"{pair.relation!r}")
        self.slots = None if pair is None else Slots(
            pair if replay.world == 0 else pair.swapped())
        if dataset_size is None and pair is not None:
            dataset_size = len(pair.world(replay.world))
        self.dataset_size = int(dataset_size or 0)
        self.trace = bool(trace)
        self.ledger = Ledger(dataset_size=self.dataset_size, trials=1)
        self.steps: list[StepRecord] = []
        self.declarations: list[Declaration] = []
        self.accounted: dict[int, list[tuple[float, float]]] = {}
        self.accountants: dict[int, Any] = {}
        self.notes: list[str] = []
        self._coins = np.random.default_rng(replay.seed if replay else 0)
        self._step: int | None = None
        self._patches: list[tuple[Any, str, Any]] = []
        self.watched: list[Any] = []
        self.models: list[Any] = []  # dpverify.torch.simulate.LoopModel of each optimiser

    # context ----------------------------------------------------------------------
    def __enter__(self) -> Recorder:
        from dpverify.torch import opacus_hooks

        self._patches = opacus_hooks.install(self)
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        from dpverify.torch import opacus_hooks

        if self in _ACTIVE:
            _ACTIVE.remove(self)
        for w in self.watched:
            w.detach()
        opacus_hooks.uninstall(self._patches)
        self._patches = []

    @property
    def run(self) -> Any:
        """The :class:`~dpverify.torch.run.Run` recorded so far."""
        from dpverify.torch.run import Run

        return Run(self.ledger, list(self.steps), list(self.declarations),
                   {k: list(v) for k, v in self.accounted.items()}, dict(self.accountants),
                   self.relation, self.slots is not None, list(self.notes),
                   self.models[0] if len(self.models) == 1 else None)

    # hooks for hand-written loops ------------------------------------------------------
    def step(self, t: int | None) -> None:
        """Label the releases that follow with training step ``t`` (default: one step per
        release)."""
        self._step = t

    def record_noise(self, value: Any, noisy: Any, mechanism: Mechanism, *,
                     batch: Any = None, query: Callable[..., Any] | None = None) -> None:
        """Record one noisy release of a hand-written loop (see :func:`record_noise`)."""
        if not isinstance(mechanism, Mechanism):
            raise InputError(f"record_noise takes a Mechanism, got {type(mechanism).__name__}")
        v, a = flat(value), flat(noisy)
        if v.shape != a.shape:
            raise InputError(f"record_noise: value and noisy value differ in size "
                             f"({v.size} vs {a.size})")
        rows = None if batch is None else _rows(batch)
        ex = Executed(mechanism.name, float(mechanism.noise_std), float(mechanism.sensitivity),
                      mechanism.clip, mechanism.sampling, float(mechanism.rate), v, a,
                      "record_noise", (int(v.size),), divisor=float(mechanism.divisor),
                      rows=rows, drawn=None if rows is None else int(rows.size),
                      dataset_size=self.dataset_size)
        if self.slots is not None:
            self._replay_query(ex, query)
        self.add(ex)

    def declare_accounting(self, *, noise_multiplier: float, sample_rate: float,
                           steps: int | None = None) -> None:
        """Tell the recording what a non-Opacus accountant was given (checked against the
        executed ledger: :mod:`dpverify.torch.findings`)."""
        self.declarations.append(Declaration("declared", float(noise_multiplier),
                                             sample_rate=float(sample_rate), steps=steps))
        acc = self.accounted.setdefault(-1, [])
        if steps is not None:
            acc.extend([(float(noise_multiplier), float(sample_rate))] * int(steps))

    # internals --------------------------------------------------------------------------
    def _replay_query(self, ex: Executed, query: Callable[..., Any] | None) -> None:
        if query is None or ex.rows is None:
            self.notes.append(f"release {len(self.steps)}: not replayed (record_noise got "
                              f"no {'query' if query is None else 'batch'})")
            return
        S = self.slots
        slots = S.to_slots(ex.rows)
        c_in = bool(S.has[0] and np.any(slots == S.c))
        v_D = flat(query(*S.batch(0, slots, canary=True)))
        v_out = flat(query(*S.batch(0, slots, canary=False))) if S.has[0] else v_D
        v_Dp = (v_out if not S.has[1] else flat(query(*S.batch(1, slots, canary=True))))
        executed = v_D if c_in else v_out
        scale = max(float(np.linalg.norm(executed)), 1e-30)
        ex.replay_error = float(np.linalg.norm(executed - ex.value)) / scale
        ex.replay = project(v_D, v_Dp, v_out, ex.answer, self.included(c_in, ex))

    def included(self, c_in: bool, ex: Executed) -> bool:
        """Whether the canary's slot was drawn; where the run's world has no record there,
        a coin of the release's rate (as the curator draws it for an absent slot)."""
        if self.slots is not None and self.slots.has[0]:
            return c_in
        rate = ex.rate if ex.sampling in AMPLIFIED else 1.0
        return bool(self._coins.random() < rate)

    def add(self, ex: Executed) -> None:
        """Write one executed release to the ledger and its step record."""
        index = len(self.ledger.releases)
        step = self._step if self._step is not None else index
        touched = None
        if ex.sampling == "shuffle" and ex.rows is not None and ex.dataset_size > 0:
            touched = np.zeros((1, ex.dataset_size), dtype=bool)
            touched[0, ex.rows[ex.rows < ex.dataset_size]] = True
        rel = Release(index, ex.name, "gaussian", ex.sensitivity, "l2", ex.noise_std,
                      ex.sampling, ex.rate, None if ex.sampling == "poisson" else ex.drawn,
                      ex.dataset_size, step, ex.shape, touched)
        record = ReplayRecord(rel)
        if ex.replay is not None:
            r = ex.replay
            record = ReplayRecord(rel, r.value_D[None], r.value_D_prime[None],
                                  r.value_out[None], np.array([r.included]), r.answer[None])
        self.ledger.append(rel, record)
        rec = StepRecord(index, step, ex.source, ex.drawn, ex.clip, ex.noise_std, ex.divisor,
                         replay_error=ex.replay_error, hyper=ex.hyper, rows=ex.rows)
        if ex.value is not None:
            noise = ex.answer - ex.value
            rec.value_norm = float(np.linalg.norm(ex.value))
            rec.noise_measured, rec.noise_p_value = noise_test(noise, ex.noise_std)
            rec.noise_dof = int(noise.size)
            if self.trace:
                rec.noise = noise.astype(np.float32)
        self.steps.append(rec)


def _rows(batch: Any) -> np.ndarray:
    """Row indices from a list or tensor of indices, or from a boolean mask over the rows.

    Examples
    --------
    >>> _rows(torch.tensor([False, True, True])).tolist(), _rows([4, 0]).tolist()
    ([1, 2], [4, 0])
    """
    b = torch.as_tensor(batch).cpu().reshape(-1)
    if b.dtype == torch.bool:
        return np.flatnonzero(b.numpy()).astype(np.int64)
    if b.numel() and (b.is_floating_point() or b.is_complex()):
        raise InputError(f"record_noise: batch must hold row indices or a boolean mask, got "
                         f"{b.dtype}")
    return b.numpy().astype(np.int64)


def record(replay: ReplaySpec | CanaryPair | None = None, *, relation: str | None = None,
           dataset_size: int | None = None, trace: bool = False) -> Recorder:
    """Record the training run in the ``with`` block; ``recorder.run`` is the result.

    Parameters
    ----------
    replay
        A :class:`ReplaySpec` (or a :class:`~dpverify.torch.pair.CanaryPair`, for a run on
        its D): replay every release on the pair as the run goes.
    relation
        The neighbouring relation the sensitivities are declared under (the pair's, else
        ``add_remove``, the one Opacus's accountants assume).
    dataset_size
        The training set's size for a hand-written loop (Opacus runs read their loader's).
    trace
        Keep each release's batch rows and noise (for :func:`dpverify.torch.simulate`'s
        check that it reproduces the run).

    Examples
    --------
    >>> mech = Mechanism(noise_std=2.0, sensitivity=1.0, clip=1.0, rate=0.5)
    >>> with record(dataset_size=4) as rec:
    ...     for t in range(3):
    ...         g = torch.ones(10)
    ...         record_noise(g, g + 2.0 * torch.randn(10), mech, batch=[0, 3])
    >>> run = rec.run
    >>> len(run.ledger), run.ledger.releases[0].sampling, run.steps[0].drawn
    (3, 'poisson', 2)
    """
    if isinstance(replay, CanaryPair):
        replay = ReplaySpec(replay)
    return Recorder(replay, relation=relation, dataset_size=dataset_size, trace=trace)


def active() -> Recorder | None:
    """The innermost active recording, if any."""
    return _ACTIVE[-1] if _ACTIVE else None


def record_noise(value: Any, noisy: Any, mechanism: Mechanism, *, batch: Any = None,
                 query: Callable[..., Any] | None = None) -> None:
    """Record a noisy release of a hand-written loop; a no-op outside :func:`record`.

    Call it where the loop adds noise, with the value before noise (a tensor or a list of
    tensors, e.g. the clipped gradient sum), the noisy value the loop goes on with, and
    the :class:`Mechanism` it assumes. ``batch`` is the drawn batch as row indices into
    the training set; ``query(*batch_tensors)`` recomputes ``value`` from the batch's
    tensors at the current state (a closure over the model), which lets a replay on a
    neighbouring pair evaluate the release in both worlds.

    Examples
    --------
    >>> record_noise(torch.zeros(2), torch.ones(2), Mechanism(1.0, 1.0)) is None
    True
    """
    rec = active()
    if rec is not None:
        rec.record_noise(value, noisy, mechanism, batch=batch, query=query)

