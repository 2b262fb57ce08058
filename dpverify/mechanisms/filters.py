"""Privacy filters: adaptive noise with a hard zCDP budget (fully adaptive composition).

An algorithm that picks each release's noise from values it already released (paper 004's
adaptive noisy GD scales its gradient noise with a noisy gradient norm) cannot be
accounted by fixed-sequence composition: the number of releases and their costs are
random. A *privacy filter* restores a guarantee: before each release the filter is asked
whether its cost, fixed by the past, still fits in the budget; if the sum of the admitted
costs never exceeds rho, the whole interaction is rho-zCDP.

The result is the Renyi filter of Feldman and Zrnic 2021 ("Individual Privacy Accounting
via a Renyi Filter", NeurIPS, Theorem 3.1): adaptively chosen (alpha, eps_t)-RDP
mechanisms with ``sum_t eps_t <= B`` almost surely compose to (alpha, B)-RDP. A
rho_t-zCDP release is (alpha, alpha rho_t)-RDP for every alpha (Bun and Steinke 2016,
Definition 1.1), so costs ``rho_t`` with ``sum_t rho_t <= rho`` on every run give
rho-zCDP. Whitehouse, Ramdas, Rogers and Wu ("Fully Adaptive Composition in Differential
Privacy", ICML 2023) extend filters to approximate DP; paper 004 cites their zCDP
statement for its Theorem 3.

:class:`ZCDPFilter` keeps one budget per trial (the leading axis), so trials stop
independently; :func:`gaussian_per_trial` makes a Gaussian release whose noise scale
differs between trials through the curator, which takes one scale per release.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.accounting.accountant import zcdp_of_ledger
from dpverify.core.errors import InputError, check_positive

# Relative slack on the budget comparison: costs are sums of floats.
_RTOL = 1e-12


class FilterExhausted(RuntimeError):
    """A release was attempted that the filter had not admitted."""


def gaussian_zcdp(sensitivity: Any, noise_std: Any) -> Any:
    """rho of a Gaussian release: ``Delta^2 / (2 sigma^2)`` (Bun and Steinke 2016, Prop 1.6).

    Examples
    --------
    >>> gaussian_zcdp(1.0, 1.0)
    0.5
    """
    s = np.asarray(noise_std, dtype=float)
    with np.errstate(divide="ignore"):
        out = np.where(s > 0, np.asarray(sensitivity, float) ** 2 / (2.0 * s**2), np.inf)
    return float(out) if out.ndim == 0 else out


def noise_for_zcdp(sensitivity: Any, rho: Any) -> Any:
    """The Gaussian standard deviation whose release costs exactly ``rho``.

    Examples
    --------
    >>> noise_for_zcdp(1.0, 0.5)
    1.0
    """
    r = np.asarray(rho, dtype=float)
    with np.errstate(divide="ignore"):
        root = np.sqrt(2.0 * np.where(r > 0, r, 1.0))
        out = np.where(r > 0, np.asarray(sensitivity, float) / root, np.inf)
    return float(out) if out.ndim == 0 else out


@dataclass
class ZCDPFilter:
    """A rho-zCDP privacy filter with one budget per trial.

    Parameters
    ----------
    budget
        The total rho every trial may spend.
    trials
        Number of independent runs the filter keeps apart.

    Examples
    --------
    >>> f = ZCDPFilter(1.0, trials=2)
    >>> f.allows(0.6).tolist()
    [True, True]
    >>> f.spend(0.6)
    >>> f.allows(0.6).tolist(), f.remaining().tolist()
    ([False, False], [0.4, 0.4])
    """

    budget: float
    trials: int = 1
    spent: np.ndarray = field(init=False)
    releases: int = field(default=0, init=False)
    history: list[np.ndarray] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self.budget = check_positive(self.budget, "budget")
        self.trials = int(check_positive(self.trials, "trials", integer=True))
        self.spent = np.zeros(self.trials)

    def remaining(self) -> np.ndarray:
        """Budget left per trial (never negative)."""
        return np.maximum(self.budget - self.spent, 0.0)

    def allows(self, cost: Any, active: Any = None) -> np.ndarray:
        """Per trial: whether a release of ``cost`` still fits (inactive trials: False).

        ``cost`` must be fixed by what was released before (a predictable cost); the
        filter's guarantee holds only then.
        """
        cost = np.broadcast_to(np.asarray(cost, dtype=float), (self.trials,))
        if np.any(cost < 0) or np.any(np.isnan(cost)):
            raise InputError(f"privacy costs must be >= 0, got {cost}")
        ok = self.spent + cost <= self.budget * (1.0 + _RTOL)
        if active is not None:
            ok &= np.asarray(active, dtype=bool)
        return ok

    def spend(self, cost: Any, active: Any = None) -> None:
        """Charge ``cost`` to the active trials; refuses (raises) a release that does not fit.

        Raises
        ------
        FilterExhausted
            If an active trial's release was not admitted by :meth:`allows`.
        """
        act = (np.ones(self.trials, bool) if active is None
               else np.asarray(active, dtype=bool).reshape(self.trials))
        cost = np.broadcast_to(np.asarray(cost, dtype=float), (self.trials,))
        if np.any(act & ~self.allows(cost)):
            worst = float(np.max(np.where(act, self.spent + cost, -np.inf)))
            raise FilterExhausted(
                f"release of cost up to {float(np.max(np.where(act, cost, 0.0))):.6g} would "
                f"bring a trial to {worst:.6g} > budget {self.budget:.6g}"
            )
        charged = np.where(act, cost, 0.0)
        self.spent = self.spent + charged
        self.releases += 1
        self.history.append(charged)

    def exhausted(self, smallest_cost: float) -> np.ndarray:
        """Per trial: whether not even a release of ``smallest_cost`` fits any more."""
        return ~self.allows(smallest_cost)

    def summary(self) -> dict[str, Any]:
        """JSON-ready state: budget, spent (max and per trial), releases."""
        return {"budget": self.budget, "spent_max": float(np.max(self.spent)),
                "spent": self.spent.tolist(), "releases": self.releases}


def gaussian_per_trial(
    cur: Any,
    name: str,
    query: Callable[[Any, Any, Any], Any],
    *,
    sensitivity: float,
    noise_std: Any,
    active: Any = None,
) -> Any:
    """A Gaussian release through the curator with a noise scale per trial.

    The curator adds one noise scale per release. The release is made on the query
    divided, trial by trial, by its scale ``sigma_k`` (inactive trials: by nothing, and
    their query set to zero), with unit noise, and the answer is multiplied back: each
    trial receives ``q_k + N(0, sigma_k^2)``. The ledger records the normalised release,
    whose declared sensitivity is the largest ``Delta / sigma_k`` over active trials: the
    exact cost for one trial, an upper bound for every trial of a batch.

    Examples
    --------
    >>> from dpverify.core.curator import Curator
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.ones((4, 1)), np.zeros(4)), trials=2, rng=0)
    >>> q = lambda X, y, w: w @ X
    >>> out = gaussian_per_trial(cur, "s", q, sensitivity=1.0, noise_std=np.array([1.0, 2.0]))
    >>> out.shape, cur.ledger.releases[0].sensitivity, cur.ledger.releases[0].noise
    ((2, 1), 1.0, 1.0)
    """
    xp, backend = cur.xp, cur.backend
    K = cur.trials
    sig = np.broadcast_to(np.asarray(noise_std, dtype=float), (K,)).copy()
    act = np.ones(K, bool) if active is None else np.asarray(active, bool).reshape(K)
    if np.any(act & ~(np.isfinite(sig) & (sig > 0))):
        raise InputError(f"release {name!r}: per-trial noise must be finite and > 0 for "
                         f"active trials, got {sig[act]}")
    safe = np.where(act, sig, 1.0)
    inv = np.where(act, 1.0 / safe, 0.0)
    declared = float(sensitivity) * float(np.max(inv)) if np.any(act) else 0.0
    inv_b = backend.asarray(inv)

    def normalised(X: Any, y: Any, w: Any) -> Any:
        v = query(X, y, w)
        return v * xp.reshape(inv_b, (K,) + (1,) * (v.ndim - 1))

    ans = cur.gaussian(name, normalised, sensitivity=declared, noise_std=1.0)
    return ans * xp.reshape(backend.asarray(safe), (K,) + (1,) * (ans.ndim - 1))


def filter_guarantee(
    ledger: Any, claim: Any, privacy_filter: ZCDPFilter | None = None, rtol: float = 1e-3,
) -> dict[str, Any]:
    """What a filtered run's ledger and filter say about a zCDP claim.

    The ledger's rho (:func:`dpverify.accounting.accountant.zcdp_of_ledger`) is the realised cost of
    the run; for an adaptive algorithm it is a sample, and the guarantee is the filter's:
    every run is ``filter.budget``-zCDP when each release was admitted. Both must be within
    the claim: ``violated`` is True when either exceeds ``claim.rho (1 + rtol)``.

    Examples
    --------
    >>> from dpverify.core.claims import PrivacyClaim
    >>> from dpverify.core.curator import Ledger
    >>> f = ZCDPFilter(0.5)
    >>> filter_guarantee(Ledger(), PrivacyClaim(rho=0.5), f)["violated"]
    False
    """
    rho_ledger = zcdp_of_ledger(ledger)
    out: dict[str, Any] = {"rho_ledger": rho_ledger, "rho_claimed": claim.rho}
    if claim.rho is None:
        raise InputError("filter_guarantee needs a zCDP claim (rho)")
    limit = claim.rho * (1.0 + rtol)
    violated = rho_ledger is not None and rho_ledger > limit
    if privacy_filter is not None:
        out.update({"filter_budget": privacy_filter.budget,
                    "filter_spent_max": float(np.max(privacy_filter.spent)),
                    "filter_releases": privacy_filter.releases})
        violated = violated or privacy_filter.budget > limit
        violated = violated or bool(np.max(privacy_filter.spent) > privacy_filter.budget
                                    * (1.0 + _RTOL))
    out["violated"] = bool(violated)
    if rho_ledger is not None and not math.isfinite(rho_ledger):
        out["violated"] = True
    return out


def attach(ledger: Any, privacy_filter: ZCDPFilter) -> ZCDPFilter:
    """Record on the ledger that its releases were admitted by ``privacy_filter``.

    Checks find it with :func:`filters_of`; the ledger itself is unchanged otherwise.

    Examples
    --------
    >>> from dpverify.core.curator import Ledger
    >>> led = Ledger(); f = attach(led, ZCDPFilter(1.0))
    >>> filters_of(led) == [f]
    True
    """
    existing = list(getattr(ledger, "privacy_filters", []))
    existing.append(privacy_filter)
    ledger.privacy_filters = existing
    return privacy_filter


def filters_of(ledger: Any) -> list[ZCDPFilter]:
    """The filters attached to ``ledger`` (empty for a non-adaptive run)."""
    return list(getattr(ledger, "privacy_filters", []))
