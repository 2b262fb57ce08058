"""Re-execute a recorded Opacus run for many trials at once: the white-box trial axis.

An Opacus run's arithmetic is known exactly once its ledger is recorded: each step draws a
Poisson batch at the executed rate, clips every per-sample gradient to the executed norm
(flat clipping, ``DPOptimizer.clip_and_accumulate``), adds N(0, std^2) noise to the sum,
divides by the executed divisor and hands the result to the underlying torch optimizer
with the executed hyperparameters. :class:`Simulator` re-executes exactly that for K
independent trials at once: the user's module (a copy taken before ``make_private``
attached its hooks) evaluated with ``torch.func.functional_call`` over K stacked
parameter sets, per-sample gradients by ``vmap(vmap(grad(loss)))``, and a fresh optimizer
of the user's class over the stacked parameters. Elementwise optimizers (SGD, Adam, ...)
then update the K trials independently, exactly as K separate runs would.

Each step is replayed on the neighbouring pair as :mod:`dpverify.torch.replay` does for a
live run, so the result is a curator-format ledger with a leading trial axis.

Before it is used, :func:`check_fidelity` re-executes the recorded run itself (its
batches and its noise, recorded with ``trace=True``) and compares every step's clipped sum
and the final parameters with what the run produced: a simulation that does not reproduce
the run is refused.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from dpverify.core.curator import Ledger, Release, ReplayRecord
from dpverify.core.errors import InputError
from dpverify.torch.pair import CanaryPair, Slots
from dpverify.torch.replay import OPACUS_NORM_EPS, project

#: torch optimizers whose update is elementwise in the parameters (so stacking trials on a
#: leading axis runs them independently).
ELEMENTWISE = ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam")
#: Relative gap between the re-executed and the recorded run above which the simulation
#: is refused (float32 arithmetic over tens of steps).
FIDELITY_RTOL = 1e-3


@dataclass
class LoopModel:
    """What a simulation needs of a recorded Opacus run besides its ledger."""

    module: torch.nn.Module  # the user's module before training, without Opacus's hooks
    names: list[str]  # the optimised parameters, in the optimiser's order
    groups: list[list[str]]  # their parameter groups
    optimizer: type  # the underlying torch optimiser's class
    criterion: Callable[..., Any]
    final: list[torch.Tensor] | None = field(default=None, repr=False)  # after the run

    def refusal(self) -> str | None:
        """Why this run cannot be simulated (``None`` when it can)."""
        if self.optimizer.__name__ not in ELEMENTWISE:
            return (f"the optimiser {self.optimizer.__name__} is not one whose update is "
                    f"elementwise ({', '.join(ELEMENTWISE)})")
        return None


def snapshot(module: torch.nn.Module) -> torch.nn.Module:
    """A hook-free copy of ``module`` at its current parameters."""
    return copy.deepcopy(module)


@dataclass
class Forced:
    """The batches (row indices per step) and noise of a recorded run, to re-execute it."""

    rows: Sequence[np.ndarray]
    noise: Sequence[np.ndarray]


class Simulator:
    """K trials of a recorded Opacus run in one world of ``pair``.

    Examples
    --------
    See :func:`dpverify.torch.audit.whitebox` (``simulate=True``) and the tests.
    """

    def __init__(self, run: Any, pair: CanaryPair, world: int, trials: int,
                 generator: torch.Generator, forced: Forced | None = None) -> None:
        self.device = generator.device
        model: LoopModel | None = run.model
        if model is None:
            raise InputError("the run was not recorded through Opacus's make_private: "
                             "nothing to simulate")
        why = model.refusal() or _schedule_refusal(run)
        if why:
            raise InputError(f"cannot simulate this run: {why}")
        self.run, self.model, self.world, self.K = run, model, world, int(trials)
        self.slots = Slots(pair if world == 0 else pair.swapped())
        self.gen, self.forced = generator, forced
        self.n_slots = max(len(pair.D), len(pair.D_prime))
        self.tensors = [t.to(self.device) for t in self.slots._tensors[0]]
        slots = np.arange(self.n_slots)
        rows = slots if self.slots.has[0] else np.where(slots > self.slots.c, slots - 1, slots)
        self.rows_of_slot = torch.as_tensor(rows, device=self.device)  # canary's: unread
        module = copy.deepcopy(model.module).to(self.device)
        self._grads = _per_sample_grads(module, model.criterion)
        self._one = _record_grads(module, model.criterion)
        named = dict(module.named_parameters())
        self.shapes = [tuple(named[n].shape) for n in model.names]
        self.theta = {n: named[n].detach().clone().unsqueeze(0).repeat(
            self.K, *[1] * named[n].dim()) for n in model.names}

    # one step -------------------------------------------------------------------------
    def batch(self, t: int, rate: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Per trial, the slots drawn (padded) and which of them are real; the canary's
        slot is kept out (its contribution is added apart)."""
        if self.forced is not None:
            slots = self.slots.to_slots(self.forced.rows[t])
            mask = torch.zeros(1, self.n_slots, dtype=torch.bool, device=self.device)
            mask[0, torch.as_tensor(slots, device=self.device)] = True
        else:
            mask = torch.rand(self.K, self.n_slots, generator=self.gen,
                              device=self.device) < rate
        return mask

    def clipped_sums(self, mask: torch.Tensor, clip: float) -> torch.Tensor:
        """Sum over each trial's batch (canary's slot excluded) of clipped gradients."""
        c = self.slots.c
        body = mask.clone()
        body[:, c] = False
        count = body.sum(1)
        width = max(int(count.max()), 1)
        order = torch.argsort((~body).to(torch.int8), dim=1, stable=True)[:, :width]
        valid = torch.arange(width, device=self.device)[None] < count[:, None]
        rows = self.rows_of_slot[order].clamp(min=0)
        batch = [t[rows] for t in self.tensors]
        grads = self._grads(self.theta, *batch)
        flat = torch.cat([grads[n].reshape(self.K, width, -1) for n in self.model.names], 2)
        norms = flat.norm(dim=2)
        factor = (clip / (norms + OPACUS_NORM_EPS)).clamp(max=1.0) * valid
        return torch.einsum("kb,kbp->kp", factor, flat)

    def canary_grad(self, w: int, clip: float) -> torch.Tensor | None:
        """World ``w``'s clipped gradient at the canary's slot, per trial."""
        record = self.slots.record(w)
        if record is None:
            return None
        g = self._one(self.theta, *(t.to(self.device) for t in record))
        flat = torch.cat([g[n].reshape(self.K, -1) for n in self.model.names], 1)
        return flat * (clip / (flat.norm(dim=1, keepdim=True) + OPACUS_NORM_EPS)).clamp(max=1.0)

    def noise(self, t: int, std: float, like: torch.Tensor) -> torch.Tensor:
        if self.forced is not None:
            return torch.as_tensor(self.forced.noise[t], dtype=like.dtype,
                                   device=self.device)[None]
        return std * torch.randn(like.shape, generator=self.gen, dtype=like.dtype,
                                 device=self.device)

    # the run ----------------------------------------------------------------------------
    def execute(self) -> tuple[Ledger, list[float]]:
        """Run every step for the K trials; the replayed ledger and each step's ||value||
        (trial 0)."""
        opt = self._optimizer()
        ledger = Ledger(dataset_size=self.run.ledger.dataset_size, trials=self.K)
        norms = []
        for t, (rel, step) in enumerate(zip(self.run.ledger, self.run.steps, strict=True)):
            _set_hyper(opt, step.hyper)
            mask = self.batch(t, rel.rate)
            clip = float(step.clip)
            s_out = self.clipped_sums(mask, clip)
            g = [self.canary_grad(w, clip) for w in (0, 1)]
            c_in = mask[:, self.slots.c] & bool(self.slots.has[0])
            value = s_out + (c_in[:, None] * g[0] if g[0] is not None else 0.0)
            answer = value + self.noise(t, step.noise_std, value)
            norms.append(float(value[0].double().norm()))
            ledger.append(rel, self._record(rel, s_out, g, answer, c_in, rel.rate))
            self._update(opt, answer / step.divisor)
        return ledger, norms

    def _record(self, rel: Release, s_out: torch.Tensor, g: list[torch.Tensor | None],
                answer: torch.Tensor, c_in: torch.Tensor, rate: float) -> ReplayRecord:
        out = {k: np.empty((self.K, 2)) for k in ("value_D", "value_D_prime", "value_out",
                                                   "answer")}
        included = np.empty(self.K, dtype=bool)
        v_out = s_out.double().cpu().numpy()
        a = answer.double().cpu().numpy()
        d = [np.zeros_like(v_out) if x is None else x.double().cpu().numpy() for x in g]
        c_in = c_in.cpu()
        coins = torch.rand(self.K, generator=self.gen, device=self.device).cpu().numpy() < rate
        for k in range(self.K):
            inc = bool(c_in[k]) if self.slots.has[0] else bool(coins[k])
            r = project(v_out[k] + d[0][k], v_out[k] + d[1][k], v_out[k], a[k], inc)
            for f in out:
                out[f][k] = getattr(r, f)
            included[k] = inc
        return ReplayRecord(rel, included=included, **out)

    def _optimizer(self) -> torch.optim.Optimizer:
        for p in self.theta.values():
            p.requires_grad_(False)
        groups = [{"params": [self.theta[n] for n in names]} for names in self.model.groups]
        return self.model.optimizer(groups, **_first_hyper(self.model.optimizer,
                                                            self.run.steps))

    def _update(self, opt: torch.optim.Optimizer, grad: torch.Tensor) -> None:
        start = 0
        for n, shape in zip(self.model.names, self.shapes, strict=True):
            size = int(np.prod(shape))
            p = self.theta[n]
            p.grad = grad[:, start:start + size].reshape(p.shape).to(p.dtype)
            start += size
        opt.step()


def _schedule_refusal(run: Any) -> str | None:
    for rel, step in zip(run.ledger, run.steps, strict=True):
        if rel.sampling not in ("poisson", "full"):
            return f"step {step.step} draws {rel.sampling!r} batches (Poisson or full only)"
        if step.clip is None or step.hyper is None:
            return f"step {step.step} was not recorded from a DPOptimizer"
    return None


def _first_hyper(cls: type, steps: Sequence[Any]) -> dict[str, Any]:
    """The first step's hyperparameters that ``cls``'s constructor takes."""
    import inspect

    known = inspect.signature(cls).parameters
    first = steps[0].hyper[0] if steps and steps[0].hyper else {}
    return {k: v for k, v in first.items() if k in known and k != "params"}


def _set_hyper(opt: torch.optim.Optimizer, hyper: list[dict[str, Any]] | None) -> None:
    for group, values in zip(opt.param_groups, hyper or [], strict=False):
        for k, v in values.items():
            if k in group:
                group[k] = v


def _loss(module: torch.nn.Module, criterion: Callable[..., Any]) -> Callable[..., Any]:
    from torch.func import functional_call

    def loss(params: dict[str, torch.Tensor], *record: torch.Tensor) -> torch.Tensor:
        out = functional_call(module, params, tuple(x[None] for x in record[:-1]))
        return criterion(out, record[-1][None])

    return loss


def _per_sample_grads(module: torch.nn.Module, criterion: Callable[..., Any]
                      ) -> Callable[..., Any]:
    """grads(theta (K, ...), *batch (K, B, ...)) -> {name: (K, B, ...)}."""
    from torch.func import grad, vmap

    g = grad(_loss(module, criterion))

    def per_trial(params: dict[str, torch.Tensor], *batch: torch.Tensor) -> Any:
        return vmap(g, in_dims=(None,) + (0,) * len(batch))(params, *batch)

    return vmap(per_trial)


def _record_grads(module: torch.nn.Module, criterion: Callable[..., Any]
                  ) -> Callable[..., Any]:
    """grads(theta (K, ...), *record) -> {name: (K, ...)}: one record, every trial."""
    from torch.func import grad, vmap

    g = grad(_loss(module, criterion))

    def run(params: dict[str, torch.Tensor], *record: torch.Tensor) -> Any:
        return vmap(g, in_dims=(0,) + (None,) * len(record))(params, *record)

    return run


def check_fidelity(run: Any, pair: CanaryPair, world: int = 0) -> dict[str, float]:
    """Re-execute the recorded ``run`` (traced) and compare it with what it produced.

    Returns the largest relative gaps of the per-step clipped sums' norms and of the final
    parameters; raises :class:`InputError` when either exceeds :data:`FIDELITY_RTOL`.
    """
    steps = run.steps
    if not steps or any(s.rows is None or s.noise is None for s in steps):
        raise InputError("checking a simulation needs a run recorded with trace=True")
    forced = Forced([s.rows for s in steps], [s.noise for s in steps])
    sim = Simulator(run, pair, world, 1, torch.Generator().manual_seed(0), forced)
    _, norms = sim.execute()
    rec = np.array([s.value_norm for s in steps])
    gap_sum = float(np.max(np.abs(np.array(norms) - rec) / np.maximum(rec, 1e-12)))
    final = run.model.final
    gap_final = 0.0
    if final is not None:
        got = torch.cat([sim.theta[n][0].reshape(-1) for n in run.model.names]).double().cpu()
        want = torch.cat([p.reshape(-1) for p in final]).double()
        gap_final = float((got - want).norm() / max(float(want.norm()), 1e-12))
    gaps = {"clipped_sum": gap_sum, "final_parameters": gap_final}
    if max(gaps.values()) > FIDELITY_RTOL:
        raise InputError(f"the simulation does not reproduce the recorded run (relative gaps "
                         f"{gaps}): the loop does something the recording did not see")
    return gaps


def simulate(run: Any, pair: CanaryPair, world: int, trials: int, seed: int,
             block: int = 64, device: str = "cpu") -> Ledger:
    """``trials`` simulated runs in world ``world`` of ``pair``, as one replayed ledger,
    ``block`` trials at a time on ``device``."""
    parts = []
    seeds = np.random.SeedSequence(seed).generate_state(-(-trials // block), np.uint32)
    for b, s in enumerate(seeds):
        k = min(block, trials - b * block)
        gen = torch.Generator(device=device).manual_seed(int(s))
        parts.append(Simulator(run, pair, world, k, gen).execute()[0])
    from dpverify.torch.audit import stack_ledgers

    return stack_ledgers(parts)
