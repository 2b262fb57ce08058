"""Per-sample losses phi(x . theta, y), written once in the Array API.

Each loss gives its value and its closed-form derivative in the margin z = x . theta; the
per-sample gradient is ``dvalue(z, y) * x``. The NumPy backend uses ``dvalue``; the torch
backend differentiates ``value`` by autograd, so backend agreement checks the formulas.
Constants are per unit feature norm: a record with ||x|| <= 1 has gradient norm at most
``lipschitz`` (for the squared loss, given |z| and |y| bounded by ``bound``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Logistic:
    """log(1 + exp(-y z)) for labels y in {-1, +1}.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> float(Logistic().value(np.array(0.0), np.array(1.0), xp))  # log 2
    0.6931471805599453
    """

    name: str = "logistic"
    lipschitz: float = 1.0
    smoothness: float = 0.25

    def value(self, z: Any, y: Any, xp: Any) -> Any:
        return xp.logaddexp(xp.zeros_like(z), -y * z)

    def dvalue(self, z: Any, y: Any, xp: Any) -> Any:
        # sigma(-y z) = (1 - tanh(y z / 2)) / 2 without overflow
        return -y * 0.5 * (1.0 - xp.tanh(0.5 * y * z))


@dataclass(frozen=True)
class Squared:
    """(z - y)^2 / 2; Lipschitz only on a bounded domain (project theta onto a ball).

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> float(Squared().dvalue(np.array(3.0), np.array(1.0), xp))
    2.0
    """

    name: str = "squared"
    bound: float = 1.0  # |z| <= radius * ||x||, |y| <= bound: |phi'| <= radius + bound
    smoothness: float = 1.0

    @property
    def lipschitz(self) -> float:
        return 2.0 * self.bound

    def value(self, z: Any, y: Any, xp: Any) -> Any:
        return 0.5 * (z - y) ** 2

    def dvalue(self, z: Any, y: Any, xp: Any) -> Any:
        return z - y


@dataclass(frozen=True)
class SmoothedHinge:
    """Hinge loss on the margin m = y z, smoothed quadratically over [1 - h, 1].

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> float(SmoothedHinge(h=0.5).value(np.array(2.0), np.array(1.0), xp))
    0.0
    """

    h: float = 0.5
    name: str = "smoothed_hinge"
    lipschitz: float = 1.0

    @property
    def smoothness(self) -> float:
        return 1.0 / self.h

    def value(self, z: Any, y: Any, xp: Any) -> Any:
        m = y * z
        quad = (1.0 - m) ** 2 / (2.0 * self.h)
        lin = 1.0 - m - self.h / 2.0
        return xp.where(m >= 1.0, xp.zeros_like(m), xp.where(m <= 1.0 - self.h, lin, quad))

    def dvalue(self, z: Any, y: Any, xp: Any) -> Any:
        m = y * z
        dm = xp.where(m >= 1.0, xp.zeros_like(m),
                      xp.where(m <= 1.0 - self.h, -xp.ones_like(m), -(1.0 - m) / self.h))
        return y * dm


@dataclass(frozen=True)
class Huber:
    """Huber loss of the residual r = z - y with threshold ``delta``.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> float(Huber(delta=1.0).dvalue(np.array(5.0), np.array(0.0), xp))
    1.0
    """

    delta: float = 1.0
    name: str = "huber"

    @property
    def lipschitz(self) -> float:
        return self.delta

    smoothness: float = 1.0

    def value(self, z: Any, y: Any, xp: Any) -> Any:
        r = z - y
        a = xp.abs(r)
        return xp.where(a <= self.delta, 0.5 * r**2, self.delta * (a - 0.5 * self.delta))

    def dvalue(self, z: Any, y: Any, xp: Any) -> Any:
        return xp.clip(z - y, min=-self.delta, max=self.delta)


@dataclass(frozen=True)
class Linear:
    """-y z: a linear loss whose gradient ignores theta (the canary of white-box audits).

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> float(Linear().dvalue(np.array(7.0), np.array(1.0), xp))
    -1.0
    """

    name: str = "linear"
    lipschitz: float = 1.0
    smoothness: float = 0.0

    def value(self, z: Any, y: Any, xp: Any) -> Any:
        return -y * z

    def dvalue(self, z: Any, y: Any, xp: Any) -> Any:
        return -y + 0.0 * z


LOSSES = {
    "logistic": Logistic(),
    "squared": Squared(),
    "smoothed_hinge": SmoothedHinge(),
    "huber": Huber(),
    "linear": Linear(),
}


def get_loss(name: str) -> Any:
    """A loss by name.

    Examples
    --------
    >>> get_loss("huber").name
    'huber'
    """
    from dpverify.core.errors import InputError

    if name not in LOSSES:
        raise InputError(f"unknown loss {name!r}; known: {sorted(LOSSES)}")
    return LOSSES[name]


@dataclass(frozen=True)
class Sigmoid:
    """1 / (1 + exp(y z)): a smooth, bounded, nonconvex classification loss.

    Its derivative in z is -y s (1 - s) with s = 1 / (1 + exp(y z)), so it is 1/4-Lipschitz
    and 1/(6 sqrt 3)-smooth per unit feature norm; the nonconvex test loss of the
    gradient-norm theorems (Wang, Ye and Xu 2017, Theorem 6.3).

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> float(Sigmoid().value(np.array(0.0), np.array(1.0), xp))
    0.5
    >>> float(Sigmoid().dvalue(np.array(0.0), np.array(1.0), xp))
    -0.25
    """

    name: str = "sigmoid"
    lipschitz: float = 0.25
    smoothness: float = 1.0 / (6.0 * 3.0**0.5)

    def value(self, z: Any, y: Any, xp: Any) -> Any:
        # 1 / (1 + exp(m)) = (1 - tanh(m / 2)) / 2 without overflow
        return 0.5 * (1.0 - xp.tanh(0.5 * y * z))

    def dvalue(self, z: Any, y: Any, xp: Any) -> Any:
        t = xp.tanh(0.5 * y * z)
        return -0.25 * y * (1.0 - t * t)


LOSSES["sigmoid"] = Sigmoid()
