"""The backend protocol and the NumPy reference backend."""

from __future__ import annotations

import abc
from typing import Any, Protocol

import array_api_compat.numpy as np_xp
import numpy as np

from dpverify.core.errors import InputError


class GLMLossLike(Protocol):
    """A per-sample loss phi(x . theta, y) written once in the Array API."""

    def value(self, z: Any, y: Any, xp: Any) -> Any: ...

    def dvalue(self, z: Any, y: Any, xp: Any) -> Any: ...


class Backend(abc.ABC):
    """Base class: how arrays are made, noise is drawn and gradients are computed."""

    name = "base"
    xp: Any = None

    def __init__(self, dtype: str = "float64") -> None:
        if dtype not in ("float64", "float32"):
            raise InputError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
        self.dtype_name = dtype

    # arrays -----------------------------------------------------------------
    @abc.abstractmethod
    def asarray(self, a: Any) -> Any:
        """``a`` as this backend's array, in its dtype (and device)."""

    @abc.abstractmethod
    def to_numpy(self, a: Any) -> np.ndarray:
        """A NumPy copy (or view) of a backend array."""

    # randomness -------------------------------------------------------------
    def normal(self, rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
        """Standard normal draws. The reference stream is NumPy's; backends convert it."""
        return self.asarray(rng.standard_normal(shape))

    def laplace(self, rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
        """Standard Laplace draws (scale 1)."""
        return self.asarray(rng.laplace(0.0, 1.0, shape))

    # derivatives ------------------------------------------------------------
    @abc.abstractmethod
    def glm_coefficients(self, loss: GLMLossLike, Z: Any, y: Any) -> Any:
        """d loss / d z at every margin ``Z`` (trials, n): per-sample grads are coef * x."""

    def per_sample_grads(self, fn: Any, theta: Any, X: Any, y: Any) -> Any:
        """Per-sample gradients of a general loss; they need autograd (the torch backend).

        Algorithms with closed-form gradients write them in the Array API instead, or use
        :meth:`glm_coefficients` for generalized linear models.
        """
        raise InputError(
            f"general per-sample gradients need autograd; backend {self.name!r} has none: "
            "use the torch backend, or glm_coefficients for GLMs"
        )


class NumpyBackend(Backend):
    """The reference: NumPy arrays and closed-form derivatives.

    Examples
    --------
    >>> b = NumpyBackend()
    >>> b.asarray([1, 2]).dtype
    dtype('float64')
    """

    name = "numpy"
    xp = np_xp

    def asarray(self, a: Any) -> np.ndarray:
        return np.asarray(a, dtype=self.dtype_name)

    def to_numpy(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def glm_coefficients(self, loss: GLMLossLike, Z: Any, y: Any) -> Any:
        return loss.dvalue(Z, y, self.xp)


_BACKENDS: dict[str, type[Backend]] = {"numpy": NumpyBackend}


def register_backend(name: str, cls: type[Backend]) -> None:
    """Make a backend available under ``name``."""
    _BACKENDS[name] = cls


def get_backend(spec: str | Backend | None = None, **kwargs: Any) -> Backend:
    """A backend from its name (``numpy``, ``torch``, ``torch:cuda``) or pass one through.

    Examples
    --------
    >>> get_backend("numpy").name
    'numpy'
    """
    if isinstance(spec, Backend):
        return spec
    spec = spec or "numpy"
    name, _, device = spec.partition(":")
    if name == "torch" and name not in _BACKENDS:
        try:
            import dpverify.core.backends.torch_backend  # noqa: F401  (registers itself)
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise InputError(f"backend 'torch' needs torch installed ({e})") from None
    if name not in _BACKENDS:
        raise InputError(f"unknown backend {spec!r}; known: {sorted(_BACKENDS)}")
    if device:
        kwargs["device"] = device
    return _BACKENDS[name](**kwargs)
