"""Opacus's MNIST tutorial loop, on synthetic MNIST-sized data, on the CPU.

This file is the code under audit: a plain Opacus training loop with nothing of dpverify
in it (compare Opacus's ``tutorials/building_image_classifier.ipynb`` and
``examples/mnist.py``). ``audit_loops.py`` beside it records and audits it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def synthetic_mnist(n: int, seed: int = 0) -> TensorDataset:
    """``n`` 28 x 28 grey images in ten classes: a noisy prototype per class."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=gen)
    prototypes = torch.rand(10, 1, 28, 28, generator=gen)
    images = (prototypes[labels] + 0.3 * torch.randn(n, 1, 28, 28, generator=gen)).clamp(0, 1)
    return TensorDataset((images - MNIST_MEAN) / MNIST_STD, labels)


class SampleConvNet(nn.Module):
    """The convolutional network of Opacus's MNIST example."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 8, 2, padding=3)
        self.conv2 = nn.Conv2d(16, 32, 4, 2)
        self.fc1 = nn.Linear(32 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2, 1)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2, 1)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


@dataclass(frozen=True)
class Config:
    """The tutorial's hyperparameters (smaller, for a CPU)."""

    epsilon: float = 8.0
    delta: float = 1e-5
    epochs: int = 2
    batch_size: int = 64
    max_grad_norm: float = 1.0
    lr: float = 0.1
    poisson_sampling: bool = True
    loss_reduction: str = "mean"
    extra_epochs: int = 0  # epochs trained beyond those the noise was calibrated for
    noise_multiplier: float | None = None  # given: make_private, no calibration


def train(data: TensorDataset, seed: int = 0, config: Config = Config()):
    """Train the tutorial's model with DP-SGD; returns the model and the privacy engine."""
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = SampleConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    data_loader = DataLoader(data, batch_size=config.batch_size, generator=gen)

    privacy_engine = PrivacyEngine(accountant="prv")
    common = dict(module=model, optimizer=optimizer, data_loader=data_loader,
                  max_grad_norm=config.max_grad_norm, poisson_sampling=config.poisson_sampling,
                  loss_reduction=config.loss_reduction, noise_generator=gen)
    if config.noise_multiplier is None:
        model, optimizer, data_loader = privacy_engine.make_private_with_epsilon(
            target_epsilon=config.epsilon, target_delta=config.delta, epochs=config.epochs,
            **common)
    else:
        model, optimizer, data_loader = privacy_engine.make_private(
            noise_multiplier=config.noise_multiplier, **common)
    criterion = nn.CrossEntropyLoss()
    model.train()
    for _ in range(config.epochs + config.extra_epochs):
        for images, target in data_loader:
            optimizer.zero_grad()
            loss = criterion(model(images), target)
            loss.backward()
            optimizer.step()
    return model, privacy_engine


if __name__ == "__main__":
    model, engine = train(synthetic_mnist(2048))
    print(f"trained; Opacus reports epsilon = {engine.get_epsilon(1e-5):.3f} at delta = 1e-5")
