"""Opacus (PyTorch) DP-SGD as audit targets: a one-layer linear model and a canary.

Copy a function, change the constants, and audit your own training loop. Every target
has the signature ``f(data, rng, trials) -> array (trials, d + 1)``: the final weights and
bias of ``trials`` independent trainings on ``data`` (labels in {-1, +1} become {0, 1}
for the logistic loss). Torch runs on the CPU; ``torch`` and ``opacus`` are imported only
when a target runs.

* :func:`dp_sgd_linear`: DP-SGD with Poisson sampling at rate ``1 / BATCHES`` for
  ``STEPS`` steps, per-sample clipping to ``MAX_GRAD_NORM`` and noise
  ``NOISE_MULTIPLIER * MAX_GRAD_NORM``, the summed update divided by the *public*
  expected batch size ``N_PUBLIC / BATCHES``. The trials are vectorized: a block of K
  trials is one Opacus model with K output units, and the loss of a record copied for
  trial k reads only unit k, so its per-sample gradient lives in unit k's weights alone.
  Opacus's per-sample clipping, per-coordinate noise and per-record Poisson sampling then
  act on each trial exactly as in K separate runs (checked against a plain loop,
  :func:`dp_sgd_linear_loop`, in the tests).
* :func:`dp_sgd_linear_mean`: the loop a user writes from Opacus's tutorial: a
  ``DataLoader`` with ``batch_size=BATCH``, ``make_private`` with the default
  ``loss_reduction="mean"``. Opacus then takes the sample rate 1 / len(data_loader) and
  divides by ``int(len(dataset) * sample_rate)``, both computed from the private
  dataset's size (``PrivacyEngine.make_private``, opacus 1.6.0), which add/remove-one DP
  does not allow: on tiny datasets the update scale itself tells D from D' (Opacus
  issue #571). :func:`tiny_pair` is that case.

:func:`claimed_epsilon` is Opacus's own RDP accountant for the constants, the number a
user would report; every target carries its own as ``epsilon_accountant``.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from dpverify.core.data import Dataset, synthetic_classification

NOISE_MULTIPLIER = 4.0
MAX_GRAD_NORM = 1.0
STEPS = 5
BATCHES = 2  # Poisson sample rate 1 / BATCHES
LEARNING_RATE = 1.0
N_PUBLIC = 20  # the dataset size the update is normalized by (public, not counted)
BLOCK = 128  # trials per stacked Opacus model (per-trial cost grows with it: K outputs)
BATCH = 2  # dp_sgd_linear_mean's DataLoader batch size
# dp_sgd_linear_mean's noise: a claim small enough (epsilon 0.57 at delta 1e-5) that the
# size leak on tiny_pair, which no noise level hides, shows in a few hundred trials.
MEAN_NOISE_MULTIPLIER = 8.0


def claimed_epsilon(delta: float, *, steps: int = STEPS, batches: int = BATCHES,
                    noise_multiplier: float = NOISE_MULTIPLIER) -> float:
    """Opacus's RDP accountant for ``steps`` Poisson steps at rate 1 / ``batches``.

    Examples
    --------
    >>> round(claimed_epsilon(1e-5), 2)  # doctest: +SKIP
    1.29
    """
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    for _ in range(steps):
        acc.step(noise_multiplier=noise_multiplier, sample_rate=1.0 / batches)
    return float(acc.get_epsilon(delta))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """One torch thread, and Opacus's notes on empty batches and insecure RNG silenced.

    The models are tiny: intra-op threads only add synchronisation (measured 10x slower
    with two threads on a busy two-core machine).
    """
    import warnings

    import torch

    log = logging.getLogger("opacus.data_loader")
    level, threads = log.level, torch.get_num_threads()
    log.setLevel(logging.ERROR)
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG.*")
            warnings.filterwarnings("ignore", message=".*Full backward hook.*")
            yield
    finally:
        torch.set_num_threads(threads)
        log.setLevel(level)


def _tensors(data: Dataset) -> tuple[Any, Any]:
    import torch

    X = torch.as_tensor(np.asarray(data.X, dtype=np.float32))
    y = torch.as_tensor((np.asarray(data.y) > 0).astype(np.float32))
    return X, y


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**62))


def _stacked_block(X: Any, y: Any, K: int, seed: int, *, noise_multiplier: float,
                   steps: int, batches: int) -> np.ndarray:
    import torch
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    n, d = X.shape
    gen = torch.Generator().manual_seed(seed)
    Xs, ys = X.repeat(K, 1), y.repeat(K)
    heads = torch.arange(K).repeat_interleave(n)
    model = torch.nn.Linear(d, K)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.zero_()
    lr = LEARNING_RATE / (N_PUBLIC / batches)  # mean over the public expected batch
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    # len(loader) == batches, so Opacus samples every record copy at rate 1 / batches.
    loader = DataLoader(TensorDataset(Xs, ys, heads), batch_size=math.ceil(K * n / batches),
                        generator=gen)
    engine = PrivacyEngine(accountant="rdp")
    model, opt, loader = engine.make_private(
        module=model, optimizer=opt, data_loader=loader, noise_multiplier=noise_multiplier,
        max_grad_norm=MAX_GRAD_NORM, loss_reduction="sum", noise_generator=gen)
    done = 0
    while done < steps:
        for xb, yb, kb in loader:
            opt.zero_grad()
            logits = model(xb)
            z = logits.gather(1, kb.reshape(-1, 1)).reshape(-1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(z, yb, reduction="sum")
            loss.backward()
            opt.step()
            done += 1
            if done == steps:
                break
    lin = model._module
    return torch.cat([lin.weight.detach(), lin.bias.detach()[:, None]], 1).double().numpy()


def dp_sgd_linear(data: Dataset, rng: np.random.Generator, trials: int) -> np.ndarray:
    """``trials`` Opacus DP-SGD trainings of a linear logistic model; (weights, bias).

    Examples
    --------
    >>> D, _ = canary_pair()
    >>> dp_sgd_linear(D, np.random.default_rng(0), 3).shape  # doctest: +SKIP
    (3, 3)
    """
    X, y = _tensors(data)
    out = []
    with _quiet():
        for start in range(0, trials, BLOCK):
            k = min(BLOCK, trials - start)
            out.append(_stacked_block(X, y, k, _seed(rng), noise_multiplier=NOISE_MULTIPLIER,
                                      steps=STEPS, batches=BATCHES))
    return np.concatenate(out, axis=0)


dp_sgd_linear.epsilon_accountant = claimed_epsilon  # type: ignore[attr-defined]


def _loop(data: Dataset, rng: np.random.Generator, trials: int, *, batch_size: int,
          reduction: str, noise_multiplier: float, lr: float, steps: int = STEPS) -> np.ndarray:
    """One model per trial through one ``make_private`` pipeline, re-seeded per trial."""
    import torch
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    X, y = _tensors(data)
    gen = torch.Generator()
    model = torch.nn.Linear(X.shape[1], 1)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loader = DataLoader(TensorDataset(X, y), batch_size=batch_size, generator=gen)
    engine = PrivacyEngine(accountant="rdp")
    model, opt, loader = engine.make_private(
        module=model, optimizer=opt, data_loader=loader, noise_multiplier=noise_multiplier,
        max_grad_norm=MAX_GRAD_NORM, loss_reduction=reduction, noise_generator=gen)
    lin = model._module
    out = np.empty((trials, X.shape[1] + 1))
    for t in range(trials):
        gen.manual_seed(_seed(rng))
        with torch.no_grad():
            lin.weight.zero_()
            lin.bias.zero_()
        done = 0
        while done < steps:
            for xb, yb in loader:
                opt.zero_grad()
                z = model(xb).reshape(-1)
                loss = torch.nn.functional.binary_cross_entropy_with_logits(
                    z, yb.reshape(-1), reduction=reduction)
                loss.backward()
                opt.step()
                done += 1
                if done == steps:
                    break
        out[t, :-1] = lin.weight.detach().double().numpy().ravel()
        out[t, -1] = float(lin.bias.detach()[0])
    return out


def dp_sgd_linear_loop(data: Dataset, rng: np.random.Generator, trials: int) -> np.ndarray:
    """:func:`dp_sgd_linear` as a plain loop of single-model runs (the reference, slow)."""
    with _quiet():
        return _loop(data, rng, trials, batch_size=math.ceil(data.n / BATCHES),
                     reduction="sum", noise_multiplier=NOISE_MULTIPLIER,
                     lr=LEARNING_RATE / (N_PUBLIC / BATCHES))


dp_sgd_linear_loop.epsilon_accountant = claimed_epsilon  # type: ignore[attr-defined]


def dp_sgd_linear_mean(data: Dataset, rng: np.random.Generator, trials: int) -> np.ndarray:
    """Opacus's tutorial loop: ``batch_size=BATCH``, ``loss_reduction="mean"``.

    The sample rate (1 / len(loader)) and the divisor (Opacus's ``expected_batch_size``)
    are computed from ``len(data)``; on :func:`tiny_pair` the sample rate is 1/2 on both
    datasets but the divisor is 2 on D and 1 on D'.
    """
    with _quiet():
        return _loop(data, rng, trials, batch_size=BATCH, reduction="mean",
                     noise_multiplier=MEAN_NOISE_MULTIPLIER, lr=LEARNING_RATE)


def claimed_epsilon_mean(delta: float) -> float:
    """Opacus's RDP epsilon for :func:`dp_sgd_linear_mean` on :func:`tiny_pair`.

    Four records in batches of ``BATCH`` make a loader of length 2: sample rate 1/2.
    """
    return claimed_epsilon(delta, batches=2, noise_multiplier=MEAN_NOISE_MULTIPLIER)


dp_sgd_linear_mean.epsilon_accountant = claimed_epsilon_mean  # type: ignore[attr-defined]


def canary_pair() -> tuple[Dataset, Dataset]:
    """Add/remove-one: 19 records in the unit disc, with and without a boundary canary.

    The canary has norm 1 and the label that fights the data, so its clipped gradient
    is as large as clipping allows and points away from everyone else's.

    Examples
    --------
    >>> D, Dp = canary_pair()
    >>> D.n, Dp.n
    (20, 19)
    """
    base, w = synthetic_classification(N_PUBLIC - 1, 2, np.random.default_rng(20240503))
    x = -w / np.linalg.norm(w)
    return base.with_record(x, 1.0, 0), base


def tiny_pair() -> tuple[Dataset, Dataset]:
    """Add/remove-one on four records: Opacus issue #571's tiny-dataset case.

    Examples
    --------
    >>> D, Dp = tiny_pair()
    >>> D.n, Dp.n
    (4, 3)
    """
    base, w = synthetic_classification(3, 2, np.random.default_rng(20240504))
    return base.with_record(-w / np.linalg.norm(w), 1.0, 0), base
