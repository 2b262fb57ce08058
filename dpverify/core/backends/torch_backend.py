"""The torch backend: the same algorithm code on torch tensors, derivatives by autograd.

The NumPy backend computes per-sample GLM gradient coefficients from each loss's
closed-form ``dvalue``; this backend differentiates the loss's ``value`` with
``torch.func``. Running one algorithm on both and comparing (:mod:`dpverify.checks.agreement`)
therefore checks every hand-written derivative against autograd, and the algorithm's
Array API code against a second array library, on CPU or GPU.

Noise comes in two modes:

* ``noise="shared"`` (default): draws come from the NumPy generator the curator holds and
  are converted, so a NumPy run and a torch run with one seed see the same noise and
  their trajectories can be compared step by step;
* ``noise="own"``: draws come from a ``torch.Generator`` (on the backend's device),
  seeded from ``seed`` or, lazily, from the curator's NumPy generator; trajectories then
  differ and only distributions can be compared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import array_api_compat.torch as torch_xp
import numpy as np
import torch

from dpverify.core.backends.base import Backend, GLMLossLike, register_backend
from dpverify.core.errors import InputError

NOISE_MODES = ("shared", "own")

_DTYPES = {"float64": torch.float64, "float32": torch.float32}


class TorchBackend(Backend):
    """torch tensors, autograd derivatives, noise shared with NumPy or drawn by torch.

    Parameters
    ----------
    dtype
        ``"float64"`` (default) or ``"float32"``.
    device
        ``"cpu"`` (default), ``"cuda"``, ``"cuda:1"``... A CUDA device that is not
        available raises :class:`~dpverify.core.errors.InputError`.
    noise
        ``"shared"``: convert the NumPy reference stream (step-by-step comparison);
        ``"own"``: draw from a ``torch.Generator`` (distributional comparison).
    seed
        Seed of the ``torch.Generator`` under ``noise="own"``. When ``None`` the generator
        is seeded from the curator's NumPy generator at its first draw, so a run stays
        reproducible from the root seed alone.

    Examples
    --------
    >>> from dpverify.core.backends import get_backend
    >>> b = get_backend("torch:cpu", dtype="float32")
    >>> b.name, b.device.type, b.asarray([1, 2]).dtype
    ('torch', 'cpu', torch.float32)
    >>> b.to_numpy(b.asarray([1.5])).tolist()
    [1.5]
    """

    name = "torch"
    xp = torch_xp

    def __init__(
        self,
        dtype: str = "float64",
        device: str | torch.device | None = None,
        noise: str = "shared",
        seed: int | None = None,
    ) -> None:
        super().__init__(dtype)
        if noise not in NOISE_MODES:
            raise InputError(f"noise must be one of {NOISE_MODES}, got {noise!r}")
        self.dtype = _DTYPES[dtype]
        self.device = _check_device(device)
        self.noise = noise
        self.seed = seed
        self._generator: torch.Generator | None = None
        # The NumPy generator the torch one was seeded from. Generators cannot be weakly
        # referenced, so a strong reference keeps its id from being reused by a new one.
        self._seeded_from: np.random.Generator | None = None
        if noise == "own" and seed is not None:
            self._generator = self._new_generator(int(seed))

    def __repr__(self) -> str:
        return (f"TorchBackend(dtype={self.dtype_name!r}, device={str(self.device)!r}, "
                f"noise={self.noise!r})")

    # arrays -----------------------------------------------------------------
    def asarray(self, a: Any) -> torch.Tensor:
        """A tensor of the backend's dtype on its device (no copy when already there)."""
        if isinstance(a, torch.Tensor):
            return a.to(dtype=self.dtype, device=self.device)
        return torch.as_tensor(np.asarray(a, dtype=self.dtype_name), device=self.device)

    def to_numpy(self, a: Any) -> np.ndarray:
        """A NumPy array, moved off the GPU and out of any autograd graph first."""
        if isinstance(a, torch.Tensor):
            return a.detach().cpu().numpy()
        return np.asarray(a)

    # randomness -------------------------------------------------------------
    def normal(self, rng: np.random.Generator, shape: tuple[int, ...]) -> torch.Tensor:
        """Standard normal draws: NumPy's stream converted, or the torch generator's."""
        if self.noise == "shared":
            return super().normal(rng, shape)
        gen = self._generator_for(rng)
        return torch.randn(tuple(shape), generator=gen, dtype=self.dtype, device=self.device)

    def laplace(self, rng: np.random.Generator, shape: tuple[int, ...]) -> torch.Tensor:
        """Standard Laplace draws: NumPy's stream converted, or the torch generator's."""
        if self.noise == "shared":
            return super().laplace(rng, shape)
        gen = self._generator_for(rng)
        # The difference of two Exp(1) variables is Laplace(0, 1); unlike the inverse CDF
        # on torch.rand's [0, 1) it never takes log(0).
        e = torch.empty((2, *shape), dtype=self.dtype, device=self.device)
        e.exponential_(generator=gen)
        return e[0] - e[1]

    def _new_generator(self, seed: int) -> torch.Generator:
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed)
        return gen

    def _generator_for(self, rng: np.random.Generator) -> torch.Generator:
        if self.seed is not None and self._generator is not None:
            return self._generator
        # Seeded lazily from the curator's stream, once per stream: a backend reused by a
        # second curator (a new rng) starts afresh instead of continuing the first run.
        if self._generator is None or rng is not self._seeded_from:
            self._generator = self._new_generator(int(rng.integers(2**63)))
            self._seeded_from = rng
        return self._generator

    # derivatives ------------------------------------------------------------
    def glm_coefficients(self, loss: GLMLossLike, Z: Any, y: Any) -> torch.Tensor:
        """d loss / d z at every margin ``Z`` (trials, n), by autograd of ``loss.value``.

        ``loss.dvalue`` is never called: the point of this backend is an independent
        derivative. ``grad`` is taken of the scalar loss of one sample and ``vmap``-ed over
        samples and trials, so a loss that is (wrongly) not elementwise cannot leak
        derivatives across samples.

        Examples
        --------
        >>> from algorithms.losses import Squared
        >>> b = TorchBackend()
        >>> b.glm_coefficients(Squared(), b.asarray([[3.0, 0.0]]), b.asarray([1.0, 1.0]))
        tensor([[ 2., -1.]], dtype=torch.float64)
        """
        xp = self.xp

        def one(z: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            return loss.value(z, yi, xp)

        per_sample = torch.func.vmap(torch.func.grad(one), in_dims=(0, 0))
        per_trial = torch.func.vmap(per_sample, in_dims=(0, None))
        Z = self.asarray(Z)
        y = self.asarray(y)
        if Z.ndim == 1:
            return per_sample(Z, y)
        return per_trial(Z, y)

    def per_sample_grads(
        self,
        fn: Callable[[Any, Any, Any, Any], Any],
        theta: Any,
        X: Any,
        y: Any,
    ) -> torch.Tensor:
        """Per-sample gradients of any loss ``fn(theta, x, y, xp) -> scalar`` by autograd.

        ``theta`` is (d,) or (trials, d); ``X`` is (n, d) and ``y`` (n,). Returns (n, d)
        or (trials, n, d): the gradient of ``fn`` in ``theta`` at every record. For models
        that are not GLMs, where no scalar-coefficient shortcut exists.

        Examples
        --------
        >>> b = TorchBackend()
        >>> sq = lambda th, x, yi, xp: 0.5 * (xp.sum(th * x) - yi) ** 2
        >>> g = b.per_sample_grads(sq, b.asarray([[1.0, 0.0]]), b.asarray([[2.0, 1.0]]),
        ...                        b.asarray([0.0]))
        >>> g.tolist()
        [[[4.0, 2.0]]]
        """
        xp = self.xp

        def one(th: torch.Tensor, x: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            return fn(th, x, yi, xp)

        per_sample = torch.func.vmap(torch.func.grad(one), in_dims=(None, 0, 0))
        theta, X, y = self.asarray(theta), self.asarray(X), self.asarray(y)
        if theta.ndim == 1:
            return per_sample(theta, X, y)
        return torch.func.vmap(per_sample, in_dims=(0, None, None))(theta, X, y)


def _check_device(device: str | torch.device | None) -> torch.device:
    try:
        dev = torch.device(device if device is not None else "cpu")
    except (RuntimeError, TypeError):
        raise InputError(f"not a torch device: {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"torch device {str(dev)!r} requested but CUDA is not available")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise InputError(f"torch device {str(dev)!r} does not exist "
                         f"({torch.cuda.device_count()} CUDA devices)")
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"torch device must be cpu or cuda, got {str(dev)!r}")
    return dev


register_backend("torch", TorchBackend)
