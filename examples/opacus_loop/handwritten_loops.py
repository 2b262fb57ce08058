"""Hand-written DP-SGD loops with dpverify's hook where the noise is added.

``train_per_sample`` is DP-SGD (Abadi et al. 2016, Algorithm 1): Poisson-sampled batches,
per-sample gradients clipped to ``clip`` by ``torch.func``, their sum noised with
``noise_multiplier * clip`` and divided by the public expected batch size.
``train_per_batch`` is the common mistake: the batch's mean gradient is clipped once
(``clip_grad_norm_`` style) and noised as a release of sensitivity ``clip``, which one
record can move by twice that. Both declare the noise multiplier and sampling rate they
execute, and both account with Opacus's RDP accountant: the ledger is in order, and only a
replay on neighbouring datasets tells the loops apart.

The one dpverify line in each loop is ``dpt.record_noise(...)``: a no-op unless a
recording is active.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from opacus.accountants import RDPAccountant
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.utils.data import TensorDataset

import dpverify.torch as dpt


class MLP(nn.Module):
    """A small fully connected network for 28 x 28 images."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


@dataclass(frozen=True)
class Setup:
    """Hyperparameters: ``expected_batch`` is public (not counted from the data)."""

    steps: int = 20
    rate: float = 1 / 16
    expected_batch: float = 32.0
    noise_multiplier: float = 1.0
    clip: float = 1.0
    lr: float = 0.5


def clipped_grad_sum(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float
                     ) -> list[torch.Tensor]:
    """Sum over the batch of per-sample gradients, each clipped to norm ``clip``."""
    params = {n: p.detach() for n, p in model.named_parameters()}
    if len(x) == 0:
        return [torch.zeros_like(p) for p in params.values()]

    def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(model, p, (xi[None],)), yi[None])

    g = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    norms = torch.sqrt(sum(v.reshape(len(x), -1).pow(2).sum(1) for v in g.values()))
    factor = (clip / (norms + 1e-6)).clamp(max=1.0)
    return [torch.einsum("b,b...->...", factor, g[n]) for n in params]


def batch_clipped_grad(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float,
                       divisor: float) -> list[torch.Tensor]:
    """The gradient of the batch's summed loss over ``divisor``, clipped as a whole."""
    params = list(model.parameters())
    if len(x) == 0:
        return [torch.zeros_like(p) for p in params]
    loss = F.cross_entropy(model(x), y, reduction="sum") / divisor
    grads = torch.autograd.grad(loss, params)
    total = torch.sqrt(sum(g.pow(2).sum() for g in grads))
    return [g * (clip / (total + 1e-6)).clamp(max=1.0) for g in grads]


def _model(seed: int) -> nn.Module:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return MLP()


def _step(model: nn.Module, noisy: list[torch.Tensor], lr: float) -> None:
    with torch.no_grad():
        for p, g in zip(model.parameters(), noisy, strict=True):
            p -= lr * g


def train_per_sample(data: TensorDataset, seed: int = 0, setup: Setup = Setup()):
    """DP-SGD with per-sample clipping; returns the model and its accountant."""
    gen = torch.Generator().manual_seed(seed)
    model, (x_all, y_all) = _model(seed), data.tensors
    c, s = setup.clip, setup.noise_multiplier * setup.clip
    mech = dpt.Mechanism(noise_std=s, sensitivity=c, clip=c, rate=setup.rate)
    accountant = RDPAccountant()
    for _ in range(setup.steps):
        batch = (torch.rand(len(x_all), generator=gen) < setup.rate).nonzero().reshape(-1)

        def query(x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
            return clipped_grad_sum(model, x, y, c)

        summed = query(x_all[batch], y_all[batch])
        noisy = [v + s * torch.randn(v.shape, generator=gen) for v in summed]
        dpt.record_noise(summed, noisy, mech, batch=batch, query=query)
        accountant.step(noise_multiplier=setup.noise_multiplier, sample_rate=setup.rate)
        _step(model, [g / setup.expected_batch for g in noisy], setup.lr)
    return model, accountant


def train_per_batch(data: TensorDataset, seed: int = 0, setup: Setup = Setup()):
    """The same loop clipping the batch's mean gradient to ``clip`` instead of each
    sample's gradient, and noising it as a release of sensitivity ``clip``."""
    gen = torch.Generator().manual_seed(seed)
    model, (x_all, y_all) = _model(seed), data.tensors
    c, s = setup.clip, setup.noise_multiplier * setup.clip
    mech = dpt.Mechanism(noise_std=s, sensitivity=c, clip=c, rate=setup.rate)
    accountant = RDPAccountant()
    for _ in range(setup.steps):
        batch = (torch.rand(len(x_all), generator=gen) < setup.rate).nonzero().reshape(-1)

        def query(x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
            return batch_clipped_grad(model, x, y, c, setup.expected_batch)

        mean = query(x_all[batch], y_all[batch])
        noisy = [v + s * torch.randn(v.shape, generator=gen) for v in mean]
        dpt.record_noise(mean, noisy, mech, batch=batch, query=query)
        accountant.step(noise_multiplier=setup.noise_multiplier, sample_rate=setup.rate)
        _step(model, noisy, setup.lr)
    return model, accountant
