"""psi-divergences of paper 000's Table 1 (text lines 40-44) and their conjugates.

The dual (3) (line 128) needs psi*, the convex conjugate psi*(u) = sup_t (u t - psi(t))
(Definition 8, line 106), of a psi with psi(1) = 0 and psi(t) = +inf for t < 0 (line 76),
and its derivative (psi*)', whose value at the dual optimum is n times the worst-case
weight of a record. Everything is written in the Array API (``xp``) so the same code runs
on NumPy and torch. Derivatives are also available in log form, ``(log |(psi*)'|, sign)``,
because KL's (psi*)'(u) = e^u overflows at the paper's lambda_0 = 1e-3 (line 259): u =
(loss - eta)/lambda reaches 1000 for a loss in [0, 1].

Two rows of Table 1 are wrong as printed; both are kept, marked ``printed``:

* chi^2 (line 42): psi(t) = (t - 1)^2 / 2 is paired with -1 + (u + 2)^2 / 4, the conjugate
  of (t - 1)^2 (and only for u >= -2: the table drops the positive part). The conjugate of
  the printed psi is u + u^2/2 for u >= -1 and -1/2 below, Cressie-Read with k = 2.
* KL-regularised CVaR (line 43): the line alpha^-1 (1 + u + log alpha) is tangent to e^u at
  u = log(1/alpha), so the printed min always returns the line. The conjugate is e^u - 1
  for u <= log(1/alpha) and alpha^-1 (1 + u + log alpha) - 1 above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpverify.core.errors import InputError


def safe_log(xp: Any, a: Any) -> Any:
    """log(a) for a >= 0, with log(0) = -inf and no warning on any backend.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> safe_log(xp, np.array([0.0, 1.0])).tolist()
    [-inf, 0.0]
    """
    pos = a > 0
    return xp.where(pos, xp.log(xp.where(pos, a, xp.ones_like(a))), -math.inf)


@dataclass(frozen=True)
class KL:
    """psi(t) = t log t - t + 1, psi*(u) = e^u - 1 (Table 1; used in Sec. 4 and Sec. 5).

    psi* is not globally smooth: on |u| <= S0 (Assumption 3, line 122) it is e^S0-smooth.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> float(KL().conj(np.array(0.0), xp)), KL().log_dconj(np.array(2.0), xp)[0].item()
    (0.0, 2.0)
    """

    name: str = "kl"
    printed: bool = False

    def psi(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(t > 0, t * np.log(np.where(t > 0, t, 1.0)) - t + 1.0, 1.0)
        return np.where(t < 0, np.inf, v)

    def domain(self) -> tuple[float, float]:
        return (0.0, math.inf)

    def conj(self, u: Any, xp: Any) -> Any:
        return xp.expm1(u)

    def log_dconj(self, u: Any, xp: Any) -> tuple[Any, Any]:
        return u, xp.ones_like(u)

    def smoothness(self, S0: float) -> float:
        return math.exp(S0)


@dataclass(frozen=True)
class CressieRead:
    """psi(t) = (t^k - k t + k - 1) / (k (k - 1)), psi*(u) = (((k-1) u + 1)_+^(k/(k-1)) - 1) / k.

    Table 1, line 44 (correct as printed). k = 2 is the chi^2 divergence psi(t) = (t - 1)^2 / 2,
    whose conjugate is 1-smooth everywhere; for 1 < k < 2 psi* is smooth only on a bounded
    domain, for k > 2 not near u = -1/(k - 1).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> float(CressieRead(k=2.0).conj(np.array(1.0), xp))  # u + u^2/2
    1.5
    """

    k: float = 2.0
    name: str = "cressie_read"
    printed: bool = False

    def __post_init__(self) -> None:
        if not self.k > 1.0:
            raise InputError(f"Cressie-Read needs k > 1, got {self.k!r}")

    def psi(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        k = self.k
        v = (np.abs(t) ** k - k * t + k - 1.0) / (k * (k - 1.0))
        return np.where(t < 0, np.inf, v)

    def domain(self) -> tuple[float, float]:
        return (0.0, math.inf)

    def _base(self, u: Any, xp: Any) -> Any:
        return xp.clip((self.k - 1.0) * u + 1.0, min=0.0)

    def conj(self, u: Any, xp: Any) -> Any:
        k = self.k
        return (self._base(u, xp) ** (k / (k - 1.0)) - 1.0) / k

    def log_dconj(self, u: Any, xp: Any) -> tuple[Any, Any]:
        return safe_log(xp, self._base(u, xp)) / (self.k - 1.0), xp.ones_like(u)

    def smoothness(self, S0: float) -> float:
        # (psi*)''(u) = ((k-1) u + 1)^((2-k)/(k-1)) on its support
        k = self.k
        if k == 2.0:
            return 1.0
        if k < 2.0:
            return ((k - 1.0) * S0 + 1.0) ** ((2.0 - k) / (k - 1.0))
        return math.inf


@dataclass(frozen=True)
class CVaRKL:
    """KL-regularised CVaR: psi(t) = I_[0, 1/alpha](t) + t log t - t + 1 (Table 1, line 43).

    Conjugate (derived; the printed one is :class:`CVaRKLPrinted`): e^u - 1 for
    u <= log(1/alpha), alpha^-1 (1 + u + log alpha) - 1 above; (1/alpha)-smooth.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> float(CVaRKL(alpha=0.5).conj(np.array(0.0), xp))
    0.0
    """

    alpha: float = 0.5
    name: str = "cvar_kl"
    printed: bool = False

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise InputError(f"CVaR needs alpha in (0, 1), got {self.alpha!r}")

    def psi(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        base = KL().psi(t)
        return np.where(t > 1.0 / self.alpha, np.inf, base)

    def domain(self) -> tuple[float, float]:
        return (0.0, 1.0 / self.alpha)

    def _line(self, u: Any) -> Any:
        a = self.alpha
        return (1.0 + u + math.log(a)) / a

    def conj(self, u: Any, xp: Any) -> Any:
        knot = -math.log(self.alpha)
        return xp.where(u <= knot, xp.expm1(xp.clip(u, max=knot)), self._line(u) - 1.0)

    def log_dconj(self, u: Any, xp: Any) -> tuple[Any, Any]:
        return xp.clip(u, max=-math.log(self.alpha)), xp.ones_like(u)

    def smoothness(self, S0: float) -> float:
        return 1.0 / self.alpha


@dataclass(frozen=True)
class ChiSquarePrinted:
    """Table 1's chi^2 row as printed (line 42): psi(t) = (t-1)^2/2 with -1 + (u+2)^2/4.

    The printed psi* is the conjugate of (t - 1)^2 for u >= -2 only; below it turns back up,
    so (psi*)'(u) = (u + 2)/2 goes negative and the dual gives records negative weight.
    1/2-smooth. Kept for the ``paper`` variants; the correct pair is ``CressieRead(k=2)``.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> float(ChiSquarePrinted().conj(np.array(1.0), xp))  # the true conjugate gives 1.5
    1.25
    """

    name: str = "chi2"
    printed: bool = True

    def psi(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return np.where(t < 0, np.inf, 0.5 * (t - 1.0) ** 2)

    def domain(self) -> tuple[float, float]:
        return (0.0, math.inf)

    def conj(self, u: Any, xp: Any) -> Any:
        return -1.0 + 0.25 * (u + 2.0) ** 2

    def log_dconj(self, u: Any, xp: Any) -> tuple[Any, Any]:
        half = 0.5 * (u + 2.0)
        return safe_log(xp, xp.abs(half)), xp.sign(half)

    def smoothness(self, S0: float) -> float:
        return 0.5


@dataclass(frozen=True)
class CVaRKLPrinted:
    """Table 1's CVaR row as printed (line 43): min(e^u, alpha^-1 (1 + u + log alpha)) - 1.

    The line is tangent to e^u from below, so the min is the line for every u and
    (psi*)' = 1/alpha is constant: the dual (3) is then unbounded below in eta (its
    eta-coefficient is 1 - 1/alpha < 0). Kept for the ``paper`` variants.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> round(float(CVaRKLPrinted(alpha=0.5).conj(np.array(0.0), xp)), 4)  # true: 0.0
    -0.3863
    """

    alpha: float = 0.5
    name: str = "cvar_kl"
    printed: bool = True

    def psi(self, t: np.ndarray) -> np.ndarray:
        return CVaRKL(self.alpha).psi(t)

    def domain(self) -> tuple[float, float]:
        return (0.0, 1.0 / self.alpha)

    def conj(self, u: Any, xp: Any) -> Any:
        a = self.alpha
        line = (1.0 + u + math.log(a)) / a
        # e^u is evaluated only below the tangent point, where it cannot overflow; above
        # it, the min is the line anyway (convexity).
        knot = -math.log(a)
        return xp.minimum(xp.exp(xp.clip(u, max=knot)), line) - 1.0

    def log_dconj(self, u: Any, xp: Any) -> tuple[Any, Any]:
        # the min is the line everywhere, whose slope is 1/alpha
        return xp.zeros_like(u) - math.log(self.alpha), xp.ones_like(u)

    def smoothness(self, S0: float) -> float:
        return 0.0


DIVERGENCES = ("kl", "chi2", "cressie_read", "cvar_kl")


def get_divergence(name: str, *, printed: bool = False, alpha: float = 0.5,
                   k: float = 2.0) -> Any:
    """A divergence of Table 1 by name; ``printed=True`` gives the table's own conjugate.

    Only the chi^2 and CVaR rows differ as printed; KL and Cressie-Read are printed right.

    Examples
    --------
    >>> get_divergence("chi2").k, get_divergence("chi2", printed=True).printed
    (2.0, True)
    """
    if name == "kl":
        return KL()
    if name == "chi2":
        return ChiSquarePrinted() if printed else CressieRead(k=2.0, name="chi2")
    if name == "cressie_read":
        return CressieRead(k=float(k))
    if name == "cvar_kl":
        return CVaRKLPrinted(float(alpha)) if printed else CVaRKL(float(alpha))
    raise InputError(f"unknown divergence {name!r}; known: {DIVERGENCES}")


def numeric_conjugate(div: Any, u: float, *, upper: float = 60.0) -> float:
    """sup_t (u t - psi(t)) by bounded scalar maximisation (scipy), for checking conj.

    Examples
    --------
    >>> round(numeric_conjugate(KL(), 1.0), 6)  # e - 1
    1.718282
    """
    import scipy.optimize

    lo, hi = div.domain()
    hi = min(hi, upper)

    def neg(t: float) -> float:
        return -(u * t - float(div.psi(np.asarray(t))))

    res = scipy.optimize.minimize_scalar(neg, bounds=(lo, hi), method="bounded",
                                         options={"xatol": 1e-12, "maxiter": 2000})
    best = -float(res.fun)
    # the supremum may sit on the boundary of psi's domain
    for t in (lo, hi):
        best = max(best, u * t - float(div.psi(np.asarray(t))))
    return best
