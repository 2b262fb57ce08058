"""Replay of one noisy release on a neighbouring pair, in the curator's record format.

At the moment a release is made, its query is evaluated on the batch as it would read in
each world, at the run's current state (the released history is common to both worlds):

* ``value_D``: the query in the run's own world with the canary's slot forced into the
  batch (where that world has a record there);
* ``value_D_prime``: the same in the other world;
* ``value_out``: the run's world with the canary's slot left out;
* ``included``: whether the run's batch drew the canary's slot;
* ``answer``: the noisy value the run released.

These are the fields of :class:`dpverify.core.curator.ReplayRecord` that the sensitivity report
(:func:`dpverify.checks.sensitivity.ledger_excess`) and the white-box audit
(:func:`dpverify.checks.audit.whitebox.transcript_privacy_loss`) read.

The records are stored in coordinates of the (at most two-dimensional) subspace in which
the worlds differ, with ``value_out`` at the origin. Under isotropic Gaussian noise this
is exact: ||a - v||^2 for v in {value_D, value_D_prime, value_out} differs between the
three only through the projections of a - value_out and v - value_out on
span{value_D - value_out, value_D_prime - value_out}; the component of a - value_out
orthogonal to it adds the same amount to every squared distance and cancels from every
likelihood ratio, mixture or not. True differences ||value_D - value_D_prime|| are kept
exactly. A model of P parameters then stores 4 x 2 numbers per release instead of 4 x P.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

WIDTH = 2  # coordinates per replayed vector: add/remove needs 1, replace-one 2

# Opacus's flat clipping divides by the norm plus this constant
# (opacus.optimizers.optimizer.DPOptimizer.clip_and_accumulate).
OPACUS_NORM_EPS = 1e-6


def flat(values: torch.Tensor | Sequence[torch.Tensor]) -> np.ndarray:
    """One float64 vector from a tensor or a list of tensors (a model's gradient).

    Examples
    --------
    >>> flat([torch.ones(2, 2), torch.zeros(1)]).tolist()
    [1.0, 1.0, 1.0, 1.0, 0.0]
    """
    if isinstance(values, torch.Tensor):
        values = [values]
    parts = [v.detach().reshape(-1).to("cpu", torch.float64) for v in values]
    return torch.cat(parts).numpy() if parts else np.zeros(0)


@dataclass
class Replayed:
    """One release's replay fields, in subspace coordinates (see the module docstring)."""

    value_D: np.ndarray
    value_D_prime: np.ndarray
    value_out: np.ndarray
    answer: np.ndarray
    included: bool


def project(v_D: np.ndarray, v_Dp: np.ndarray, v_out: np.ndarray, answer: np.ndarray,
            included: bool) -> Replayed:
    """The replay fields of one release, in coordinates of span{v_D - v_out, v_Dp - v_out}.

    Examples
    --------
    >>> v_out, v_D = np.zeros(5), np.array([3.0, 4.0, 0, 0, 0])
    >>> r = project(v_D, v_out, v_out, np.array([3.0, 4.0, 7.0, 0, 0]), True)
    >>> r.value_D.tolist(), r.value_D_prime.tolist(), r.answer.tolist()
    ([5.0, 0.0], [0.0, 0.0], [5.0, 0.0])
    """
    d0, d1, res = v_D - v_out, v_Dp - v_out, answer - v_out
    scale = max(float(np.linalg.norm(d0)), float(np.linalg.norm(d1)))
    basis: list[np.ndarray] = []
    for d in (d0, d1):
        u = d - sum((float(d @ e) * e for e in basis), np.zeros_like(d))
        nu = float(np.linalg.norm(u))
        # A direction below rounding of the larger difference carries no information.
        if nu > 1e-12 * scale and nu > 0:
            basis.append(u / nu)

    def coords(x: np.ndarray) -> np.ndarray:
        out = np.zeros(WIDTH)
        out[:len(basis)] = [float(x @ e) for e in basis]
        return out

    return Replayed(coords(d0), coords(d1), np.zeros(WIDTH), coords(res), bool(included))


def opacus_clip(g: np.ndarray, clip: float) -> np.ndarray:
    """Opacus's flat per-sample clipping of one flattened gradient.

    Examples
    --------
    >>> float(np.linalg.norm(opacus_clip(np.array([30.0, 40.0]), 1.0))) < 1.0
    True
    """
    factor = min(1.0, clip / (float(np.linalg.norm(g)) + OPACUS_NORM_EPS))
    return g * factor


def sample_grad(module: torch.nn.Module, names: Sequence[str], criterion: Callable[..., Any],
                record: Sequence[torch.Tensor]) -> np.ndarray:
    """The gradient of ``criterion(module(inputs), target)`` on one record, flattened in
    the order of ``names`` (the module's parameters at their current values).

    The record's last tensor is the target, the others the model's inputs. Plain autograd
    (not ``torch.func``): the module may carry Opacus's backward hooks, which functorch
    transforms refuse; the parameters' ``.grad`` is left alone.

    Examples
    --------
    >>> lin = torch.nn.Linear(2, 1, bias=False)
    >>> with torch.no_grad():
    ...     _ = lin.weight.fill_(1.0)
    >>> mse = torch.nn.MSELoss()
    >>> sample_grad(lin, ["weight"], mse, (torch.tensor([1.0, 2.0]), torch.tensor([0.0]))).tolist()
    [6.0, 12.0]
    """
    named = dict(module.named_parameters())
    params = [named[n] for n in names]
    inputs, target = tuple(record[:-1]), record[-1]
    with torch.enable_grad():
        loss = criterion(module(*(x[None] for x in inputs)), target[None])
        grads = torch.autograd.grad(loss, params, allow_unused=True)
    return flat([torch.zeros_like(p) if g is None else g for p, g in zip(params, grads,
                                                                          strict=True)])
