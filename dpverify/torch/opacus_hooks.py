"""Hooks into Opacus for :func:`dpverify.torch.record`, removed when the recording ends.

* ``PrivacyEngine.make_private`` / ``make_private_with_epsilon``: the returned
  ``DPOptimizer`` is watched, and a :class:`~dpverify.torch.record.Declaration` records
  what the accountant and the normaliser were computed from (Opacus 1.6:
  ``sample_rate = 1 / len(data_loader)``, ``expected_batch_size = int(len(dataset) *
  sample_rate)``, ``PrivacyEngine.make_private``; ``steps = int(epochs / sample_rate)``,
  ``accountants.utils.get_noise_multiplier``).
* The watched ``DPOptimizer``: ``pre_step`` (the batch drawn, its size, the canary's
  per-sample gradient for a replay), ``add_noise`` (the clipped sum before and after the
  noise), ``scale_grad`` (the divisor). Instance attributes, deleted at the end.
* ``step`` of every registered Opacus accountant: what was accounted, in order.
* ``__iter__`` of the batch samplers: the row indices of every batch drawn, matched to the
  optimizer steps of the loader they belong to, first in first out.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.torch.record import Declaration, Executed, Recorder
from dpverify.torch.replay import flat, opacus_clip, project, sample_grad
from dpverify.torch.simulate import LoopModel, snapshot

_MISSING = object()


def _patch(patches: list[tuple[Any, str, Any]], owner: Any, name: str,
           make: Callable[[Any], Any]) -> None:
    """Replace ``owner.name`` by ``make(original)``; remember how to undo it."""
    own = owner.__dict__.get(name, _MISSING) if isinstance(owner, type) else _MISSING
    setattr(owner, name, make(getattr(owner, name)))
    patches.append((owner, name, own))


def uninstall(patches: list[tuple[Any, str, Any]]) -> None:
    """Undo :func:`install`'s patches, last first."""
    for owner, name, own in reversed(patches):
        if own is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, own)


def install(rec: Recorder) -> list[tuple[Any, str, Any]]:
    """Patch Opacus's classes for ``rec``; nothing when Opacus is not installed.

    Examples
    --------
    >>> from opacus import PrivacyEngine
    >>> from dpverify.torch.record import record
    >>> before = PrivacyEngine.make_private
    >>> with record():
    ...     PrivacyEngine.make_private is before
    False
    >>> PrivacyEngine.make_private is before
    True
    """
    try:
        from opacus import PrivacyEngine
        from opacus.accountants import registry
        from opacus.utils.uniform_sampler import (
            DistributedUniformWithReplacementSampler,
            UniformWithReplacementSampler,
        )
    except ImportError:
        return []
    from torch.utils.data import BatchSampler

    patches: list[tuple[Any, str, Any]] = []
    _patch(patches, PrivacyEngine, "make_private", lambda f: _make_private(rec, f))
    _patch(patches, PrivacyEngine, "make_private_with_epsilon",
           lambda f: _make_private_with_epsilon(rec, f))
    for cls in {c for c in registry._ACCOUNTANTS.values() if "step" in c.__dict__}:
        _patch(patches, cls, "step", lambda f: _accountant_step(rec, f))
    for cls in (UniformWithReplacementSampler, DistributedUniformWithReplacementSampler,
                BatchSampler):
        _patch(patches, cls, "__iter__", lambda f: _sampler_iter(rec, f))
    return patches


def _make_private(rec: Recorder, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def make_private(engine: Any, *args: Any, **kwargs: Any) -> Any:
        start = snapshot(kwargs["module"]) if "module" in kwargs else None
        out = original(engine, *args, **kwargs)
        module, optimizer, loader = out[0], out[1], out[-1]
        decl = _declaration(engine, kwargs, optimizer, loader)
        rec.declarations.append(decl)
        watched = Watched(rec, optimizer, module, loader, kwargs.get("criterion"), decl,
                          start=start)
        rec.watched.append(watched)
        watched.attach()
        return out

    return make_private


def _make_private_with_epsilon(rec: Recorder, original: Callable[..., Any]
                               ) -> Callable[..., Any]:
    @functools.wraps(original)
    def make_private_with_epsilon(engine: Any, *args: Any, **kwargs: Any) -> Any:
        n = len(rec.declarations)
        out = original(engine, *args, **kwargs)
        for decl in rec.declarations[n:]:
            decl.source = "make_private_with_epsilon"
            decl.target_epsilon = float(kwargs["target_epsilon"])
            decl.target_delta = float(kwargs["target_delta"])
            if decl.sample_rate:
                decl.steps = int(kwargs["epochs"] / decl.sample_rate)
        return out

    return make_private_with_epsilon


def _declaration(engine: Any, kwargs: dict[str, Any], optimizer: Any, loader: Any
                 ) -> Declaration:
    given = kwargs.get("data_loader")
    n = len(given.dataset) if given is not None else None
    return Declaration(
        "make_private", noise_multiplier=float(kwargs["noise_multiplier"]),
        max_grad_norm=_total_clip(kwargs["max_grad_norm"]),
        sample_rate=1.0 / len(given) if given is not None else None,
        dataset_size=n, batch_size=getattr(given, "batch_size", None),
        drop_last=bool(getattr(given, "drop_last", False)),
        loss_reduction=optimizer.loss_reduction,
        expected_batch_size=optimizer.expected_batch_size,
        poisson_sampling=bool(kwargs.get("poisson_sampling", True)),
        accountant=engine.accountant.mechanism(),
    )


def _total_clip(max_grad_norm: Any) -> float:
    """The clip bound of the whole gradient (per-layer bounds combine in L2)."""
    if isinstance(max_grad_norm, (list, tuple)):
        return float(np.sqrt(sum(float(c) ** 2 for c in max_grad_norm)))
    return float(max_grad_norm)


def _accountant_step(rec: Recorder, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def step(acc: Any, *, noise_multiplier: float, sample_rate: float) -> Any:
        rec.accountants[id(acc)] = acc
        rec.accounted.setdefault(id(acc), []).append((float(noise_multiplier),
                                                      float(sample_rate)))
        return original(acc, noise_multiplier=noise_multiplier, sample_rate=sample_rate)

    return step


def _sampler_iter(rec: Recorder, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def iterate(sampler: Any) -> Iterator[Any]:
        for batch in original(sampler):
            for w in rec.watched:
                w.on_batch(sampler, batch)
            yield batch

    return iterate


@dataclass
class Watched:
    """One ``DPOptimizer`` being recorded, with its module, loader and declaration."""

    rec: Recorder
    optimizer: Any
    module: Any
    loader: Any
    criterion: Any
    declaration: Declaration
    batches: collections.deque = field(default_factory=collections.deque)
    pending: dict[str, Any] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    start: Any = None  # the module as make_private received it (a copy)
    model: LoopModel | None = None

    @property
    def inner(self) -> Any:
        """The user's module (inside Opacus's ``GradSampleModule``)."""
        return getattr(self.module, "_module", self.module)

    def attach(self) -> None:
        opt = self.optimizer
        ids = {id(p): n for n, p in self.inner.named_parameters()}
        self.names = [ids[id(p)] for p in opt.params]
        if self.start is not None:
            groups = [[ids[id(p)] for p in g["params"] if p.requires_grad]
                      for g in opt.param_groups]
            self.model = LoopModel(self.start, self.names, groups,
                                   type(opt.original_optimizer), self._criterion())
            self.rec.models.append(self.model)
        pre, noise, scale = opt.pre_step, opt.add_noise, opt.scale_grad

        def pre_step(closure: Any = None) -> Any:
            self.before_step()
            return pre(closure)

        def add_noise() -> None:
            before = flat([p.summed_grad for p in opt.params])
            noise()
            self.released(before, flat([p.grad for p in opt.params]))

        def scale_grad() -> None:
            scale()
            if opt.loss_reduction == "mean" and self.rec.steps:
                self.rec.steps[-1].divisor = float(opt.expected_batch_size
                                                   * opt.accumulated_iterations)

        opt.pre_step, opt.add_noise, opt.scale_grad = pre_step, add_noise, scale_grad

    def detach(self) -> None:
        if self.model is not None:
            self.model.final = [p.detach().clone() for p in self.optimizer.params]
        for name in ("pre_step", "add_noise", "scale_grad"):
            self.optimizer.__dict__.pop(name, None)

    def on_batch(self, sampler: Any, batch: Any) -> None:
        if self.loader is not None and sampler is self.loader.batch_sampler:
            self.batches.append(np.asarray(list(batch), dtype=np.int64))

    # the sampling the loader executes -----------------------------------------------
    def sampling(self) -> tuple[str, float]:
        bs = getattr(self.loader, "batch_sampler", None)
        if hasattr(bs, "sample_rate"):
            return "poisson", float(bs.sample_rate)
        n = len(self.loader.dataset) if self.loader is not None else 0
        size = getattr(bs, "batch_size", None)
        if size and n:
            return "shuffle", min(1.0, size / n)
        return "full", 1.0

    def before_step(self) -> None:
        """The batch drawn and, under replay, the canary's clipped per-sample gradients."""
        opt = self.optimizer
        gs = opt.grad_samples if opt.params else []
        drawn = int(len(gs[0])) if gs else 0
        rows = self.batches.popleft() if self.batches else None
        if rows is not None and rows.size != drawn:
            self.rec.notes.append(f"release {len(self.rec.steps)}: the sampler's batch "
                                  f"({rows.size}) does not match the gradient's ({drawn}); "
                                  "batch rows unknown")
            rows = None
            self.batches.clear()
        self.pending = {"drawn": drawn, "rows": rows}
        if self.rec.slots is not None:
            self.pending.update(self.canary_grads(gs, rows))

    def canary_grads(self, gs: list[Any], rows: np.ndarray | None) -> dict[str, Any]:
        """The clipped gradients of world 0's and world 1's records at the canary's slot."""
        S, clip = self.rec.slots, float(self.optimizer.max_grad_norm)
        if rows is None:
            self.rec.notes.append(f"release {len(self.rec.steps)}: not replayed (the batch's "
                                  "rows are unknown: iterate the loader make_private returned)")
            return {"skip": True}
        crit = self._criterion()
        out: dict[str, Any] = {"c_in": False, "error": None}
        # Opacus's per-sample hooks must not see the replay's forward and backward passes.
        enabled = getattr(self.module, "hooks_enabled", None)
        if enabled is not None:
            self.module.hooks_enabled = False
        try:
            for w in (0, 1):
                record = S.record(w)
                out[f"g{w}"] = (None if record is None else opacus_clip(
                    sample_grad(self.inner, self.names, crit, record), clip))
        finally:
            if enabled is not None:
                self.module.hooks_enabled = enabled
        slots = S.to_slots(rows)
        if S.has[0] and np.any(slots == S.c):
            j = int(np.flatnonzero(slots == S.c)[0])
            executed = opacus_clip(flat([g[j] for g in gs]), clip)
            scale = max(float(np.linalg.norm(executed)), 1e-30)
            out["error"] = float(np.linalg.norm(executed - out["g0"])) / scale
            out["g0"], out["c_in"] = executed, True
        return out

    def _criterion(self) -> Any:
        crit = (self.rec.replay.criterion if self.rec.replay else None) or self.criterion
        if crit is None:
            import torch

            crit = torch.nn.CrossEntropyLoss()  # make_private's default
        return crit

    def released(self, before: np.ndarray, after: np.ndarray) -> None:
        opt, decl = self.optimizer, self.declaration
        clip = _total_clip(opt.max_grad_norm)
        scheme, rate = self.sampling()
        sens = clip * (2.0 if self.rec.relation == "replace_one" else 1.0)
        p = self.pending
        ex = Executed("grad_sum", float(opt.noise_multiplier) * clip, sens, clip, scheme, rate,
                      before, after, "opacus", (int(before.size),), rows=p.get("rows"),
                      drawn=p.get("drawn"), dataset_size=int(decl.dataset_size or 0),
                      hyper=_hyper(opt))
        if self.rec.slots is not None and not p.get("skip"):
            self.replay(ex, p)
        self.rec.add(ex)

    def replay(self, ex: Executed, p: dict[str, Any]) -> None:
        """The replay fields from the executed clipped sum and the canary's gradients."""
        zero = np.zeros_like(ex.answer)
        g0 = p["g0"] if p["g0"] is not None else zero
        g1 = p["g1"] if p["g1"] is not None else zero
        v_out = ex.value - (g0 if p["c_in"] else zero)
        ex.replay_error = p["error"]
        ex.replay = project(v_out + g0, v_out + g1, v_out, ex.answer,
                            self.rec.included(p["c_in"], ex))


def _hyper(opt: Any) -> list[dict[str, Any]]:
    """Each parameter group's settings at this step (learning rate, momentum, betas, ...)."""
    def keep(v: Any) -> bool:
        return v is None or isinstance(v, (int, float, bool)) or (
            isinstance(v, tuple) and all(isinstance(x, (int, float)) for x in v))

    return [{k: (float(v) if isinstance(v, float) else v) for k, v in g.items()
             if k != "params" and keep(v)} for g in opt.param_groups]
