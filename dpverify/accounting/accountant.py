"""Privacy accounting: ledger -> ``dp_accounting`` events -> epsilon; noise calibration.

The ledger says what was released; this module says what that buys. Releases that touch
disjoint records compose in parallel: each record is charged only for the releases that
could have touched it, and the run's epsilon is the worst record's. Amplified sampling
(Poisson, uniform with or without replacement) touches every record with the sampling
probability and is wrapped in the matching sampled event.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import dp_accounting as dpa
import numpy as np
from dp_accounting.pld import PLDAccountant as _LibraryPLDAccountant
from dp_accounting.pld import common as _pld_common
from dp_accounting.pld import privacy_loss_distribution as _pld_lib
from dp_accounting.rdp import RdpAccountant

from dpverify.core.claims import PrivacyClaim, check_relation
from dpverify.core.curator import Ledger, Release
from dpverify.core.errors import InputError, check_delta, check_epsilon, check_positive

_RELATIONS = {
    "add_remove": dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dpa.NeighboringRelation.REPLACE_ONE,
}


class PLDAccountant:
    """dp_accounting's PLD accountant, also taking a pure eps-DP selection under add/remove.

    The privacy profile of every eps-DP mechanism is dominated by two-bucket randomized
    response keeping the truth with probability e^eps / (1 + e^eps) (Kairouz, Oh and
    Viswanath 2015, Theorem 2.1), for each ordered pair of neighbours and so under any
    relation. dp_accounting builds that pair's PLD (``from_privacy_parameters``, a
    pessimistic estimate) but its accountant takes ``RandomizedResponseDpEvent`` only under
    replace-one; here the two-bucket event is composed under add/remove too, so an
    exponential selection is accounted by PLD there as well, not by RDP's looser
    bounded-range answer (at eps = 1, delta = 1e-6: 1.0 instead of 2.75).

    Only the library's public API is used: every other event goes to its accountant, and
    where selections are present the PLD of the whole history is composed from the public
    ``privacy_loss_distribution`` constructors (:func:`_event_pld`).

    Examples
    --------
    >>> acc = PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    >>> ev = dpa.RandomizedResponseDpEvent(noise_parameter=2 / (1 + math.e), num_buckets=2)
    >>> round(acc.compose(ev).get_epsilon(1e-6), 3)
    1.0
    """

    def __init__(self, neighboring_relation: dpa.NeighboringRelation =
                 dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
                 value_discretization_interval: float = 1e-4) -> None:
        self.neighboring_relation = neighboring_relation
        self._interval = value_discretization_interval
        self._library = _LibraryPLDAccountant(neighboring_relation, value_discretization_interval)
        self._rest: list[dpa.DpEvent] = []
        self._selections: Counter = Counter()  # epsilon -> how many selections

    def _split(self, event: dpa.DpEvent) -> tuple[list[dpa.DpEvent], Counter]:
        """The event's pure selections (counted by epsilon) and everything else."""
        rest: list[dpa.DpEvent] = []
        selections: Counter = Counter()
        for ev, count in _flatten(event):
            eps = self._selection_epsilon(ev)
            if eps is None:
                rest.append(ev if count == 1 else dpa.SelfComposedDpEvent(ev, count))
            else:
                selections[eps] += count
        return rest, selections

    def _selection_epsilon(self, event: dpa.DpEvent) -> float | None:
        if (isinstance(event, dpa.RandomizedResponseDpEvent) and event.num_buckets == 2
                and 0 < event.noise_parameter <= 1
                and self.neighboring_relation == dpa.NeighboringRelation.ADD_OR_REMOVE_ONE):
            p = event.noise_parameter  # = 2 / (1 + e^eps): keeps the truth w.p. 1 - p/2
            return math.log((2.0 - p) / p)
        return None

    def supports(self, event: dpa.DpEvent) -> bool:
        """Whether :meth:`compose` accepts ``event`` under this relation."""
        rest, selections = self._split(event)
        if not all(self._library.supports(e) for e in rest):
            return False
        has_selection = bool(selections or self._selections)
        return not has_selection or all(
            _event_pld(e, self.neighboring_relation, self._interval) is not None
            for e in rest + self._rest)

    def compose(self, event: dpa.DpEvent, count: int = 1) -> PLDAccountant:
        """Add ``count`` runs of ``event`` to the history; returns the accountant."""
        if not self.supports(event):
            raise dpa.UnsupportedEventError(f"unsupported event: {event}")
        rest, selections = self._split(event)
        for e in rest:
            self._library.compose(e, count)
            self._rest.append(e if count == 1 else dpa.SelfComposedDpEvent(e, count))
        for eps, c in selections.items():
            self._selections[eps] += c * count
        return self

    def get_epsilon(self, target_delta: float) -> float:
        """Epsilon of the history at ``target_delta``."""
        library_eps = float(self._library.get_epsilon(target_delta))
        if not self._selections or not math.isfinite(library_eps):
            return library_eps
        pld = _pld_lib.identity(value_discretization_interval=self._interval)
        for e in self._rest:
            pld = pld.compose(_event_pld(e, self.neighboring_relation, self._interval))
        for eps, count in self._selections.items():
            one = _pld_lib.from_privacy_parameters(
                _pld_common.DifferentialPrivacyParameters(eps, 0.0),
                value_discretization_interval=self._interval)
            pld = pld.compose(one.self_compose(count) if count > 1 else one)
        return float(pld.get_epsilon_for_delta(target_delta))


def _flatten(event: dpa.DpEvent, count: int = 1) -> list[tuple[dpa.DpEvent, int]]:
    """The leaves of a composition with how often each runs."""
    if isinstance(event, dpa.ComposedDpEvent):
        return [leaf for e in event.events for leaf in _flatten(e, count)]
    if isinstance(event, dpa.SelfComposedDpEvent):
        return _flatten(event.event, count * int(event.count))
    return [(event, count)]


def _event_pld(event: dpa.DpEvent, relation: dpa.NeighboringRelation,
               interval: float) -> Any:
    """The PLD of one event by the library's public constructors, as its PLD accountant
    builds it; ``None`` for an event outside the noise-adding mechanisms it covers.

    Leaves that make a history non-private (no noise) are passed over: the library's
    accountant, composed alongside, answers ``inf`` for them first."""
    leaves = _flatten(event)
    pld = _pld_lib.identity(value_discretization_interval=interval)
    for leaf, count in leaves:
        inner, rate = leaf, None
        if isinstance(leaf, dpa.PoissonSampledDpEvent):
            inner, rate = leaf.event, float(leaf.sampling_probability)
        noiseless = getattr(inner, "noise_multiplier", None) == 0
        if isinstance(leaf, (dpa.NoOpDpEvent, dpa.NonPrivateDpEvent)) or rate == 0 or noiseless:
            continue
        if isinstance(inner, dpa.GaussianDpEvent) and inner.noise_multiplier > 0:
            # The library's accountant merges k unsampled Gaussians into one of std/sqrt(k).
            std = inner.noise_multiplier / (math.sqrt(count) if rate is None else 1.0)
            one = _pld_lib.from_gaussian_mechanism(
                standard_deviation=std, value_discretization_interval=interval,
                sampling_prob=1.0 if rate is None else rate, neighboring_relation=relation)
            pld = pld.compose(one if rate is None else one.self_compose(count))
        elif isinstance(inner, dpa.LaplaceDpEvent) and inner.noise_multiplier > 0:
            one = _pld_lib.from_laplace_mechanism(
                parameter=inner.noise_multiplier, value_discretization_interval=interval,
                sampling_prob=1.0 if rate is None else rate)
            pld = pld.compose(one.self_compose(count))
        else:
            return None
    return pld

# Dense orders make the zCDP -> (epsilon, delta) conversion tight (libraries.md, section 2).
_DENSE_ORDERS = list(np.linspace(1.01, 10.0, 200)) + list(range(11, 200)) + [256, 512, 1024]


def _rdp_orders(event: dpa.DpEvent) -> list[float]:
    """Dense orders where they are cheap; dp_accounting's defaults for sampling without
    replacement, whose RDP is computed in pure Python order by order (the default grid
    is what dp_accounting and TF Privacy report with)."""
    amplified = (dpa.SampledWithoutReplacementDpEvent, dpa.SampledWithReplacementDpEvent)
    if any(isinstance(e, amplified) for e in _subevents(event)):
        return list(dpa.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS)
    return _DENSE_ORDERS
# Orders for bracketing a PLD calibration: RDP at any set of orders is a valid bound, and
# integer orders have a closed form for sampled Gaussians (Mironov et al. 2019, Sec. 3.3),
# where each fractional order costs a slowly converging series.
_BRACKET_ORDERS = [1.25, 1.5, 1.75] + list(range(2, 65)) + [80, 96, 128, 192, 256, 512, 1024]


def _multiplier_scale(relation: str, accountant: str) -> float:
    """How dp_accounting reads a noise multiplier under ``relation``.

    The ledger declares the sensitivity under the claim's relation: the largest distance
    between q(D) and q(D'). dp_accounting's PLD accountant reads a Gaussian multiplier
    under REPLACE_ONE relative to half that distance (a record's contribution moves from
    -1 to +1), while its RDP accountant reads it relative to the whole distance. Checked
    against both: N(0, s) vs N(Delta, s) has the same epsilon either way.
    """
    return 2.0 if (relation == "replace_one" and accountant == "pld") else 1.0


def release_event(rel: Release, relation: str = "add_remove",
                  accountant: str = "pld") -> dpa.DpEvent:
    """The ``dp_accounting`` event of one release, sampling included.

    Examples
    --------
    >>> from dpverify.core.curator import Release
    >>> r = Release(0, "g", "gaussian", 1.0, "l2", 2.0, "poisson", 0.01, None, 100, 0, (3,))
    >>> release_event(r)
    PoissonSampledDpEvent(sampling_probability=0.01, event=GaussianDpEvent(noise_multiplier=2.0))
    """
    if rel.mechanism == "exact":
        return dpa.NonPrivateDpEvent()
    if rel.mechanism == "exponential":
        return _exponential_event(float(rel.epsilon), accountant)
    if rel.sensitivity == 0:
        return dpa.NoOpDpEvent()
    if rel.noise == 0:
        return dpa.NonPrivateDpEvent()
    mult = rel.noise_multiplier
    if rel.mechanism == "gaussian":
        base: dpa.DpEvent = dpa.GaussianDpEvent(mult * _multiplier_scale(relation, accountant))
    else:
        base = dpa.LaplaceDpEvent(mult)
    if rel.sampling == "poisson":
        return dpa.PoissonSampledDpEvent(rel.rate, base)
    if rel.sampling == "uniform_without_replacement":
        return dpa.SampledWithoutReplacementDpEvent(rel.dataset_size, rel.batch_size, base)
    if rel.sampling == "uniform_with_replacement":
        return dpa.SampledWithReplacementDpEvent(rel.dataset_size, rel.batch_size, base)
    return base  # full batch or a shuffled partition: no amplification


def _exponential_event(eps: float, accountant: str) -> dpa.DpEvent:
    """The event of an eps-DP exponential-mechanism selection, per accountant.

    PLD: randomized response on two buckets keeping the truth with probability
    e^eps / (1 + e^eps), whose privacy profile dominates that of every eps-DP mechanism
    (Kairouz, Oh and Viswanath 2015, Theorem 2.1), under either relation
    (:class:`PLDAccountant` takes it under add/remove too).
    RDP: the exponential mechanism is eps-bounded-range (Durfee and Rogers 2019, "Practical
    DP top-k selection", Section 4), hence eps^2/8-zCDP (Cesar and Rogers 2021, "Bounding,
    concentrating, and truncating", Section 3: eps-BR implies eps^2/8-zCDP), four times below
    the eps^2/2 of a generic eps-DP mechanism (Bun and Steinke 2016, Proposition 1.4).
    """
    if not math.isfinite(eps):
        return dpa.NonPrivateDpEvent()
    if accountant == "rdp":
        return dpa.ZCDpEvent(eps * eps / 8.0)
    return dpa.RandomizedResponseDpEvent(noise_parameter=2.0 / (1.0 + math.exp(eps)),
                                         num_buckets=2)


def _compose(counts: Counter) -> dpa.DpEvent:
    """One event for a record's history.

    Unsampled Gaussian releases are merged first: composing Gaussians with multipliers
    m_i is exactly one Gaussian with multiplier (sum m_i^-2)^(-1/2) (Dong, Roth and Su
    2019, Corollary 3.3: mu-GDP composes as sqrt(sum mu_i^2)). An adaptive run whose every
    release has its own noise then costs one PLD instead of hundreds.
    """
    inv_sq = 0.0
    rest: list[dpa.DpEvent] = []
    for e, c in counts.items():
        if isinstance(e, dpa.GaussianDpEvent) and e.noise_multiplier > 0:
            inv_sq += c / e.noise_multiplier**2
        else:
            rest.append(dpa.SelfComposedDpEvent(e, c) if c > 1 else e)
    if inv_sq > 0:
        rest.insert(0, dpa.GaussianDpEvent(inv_sq**-0.5))
    if not rest:
        return dpa.NoOpDpEvent()
    return rest[0] if len(rest) == 1 else dpa.ComposedDpEvent(rest)


def ledger_events(ledger: Ledger | Iterable[Release], relation: str = "add_remove",
                  accountant: str = "pld") -> list[dpa.DpEvent]:
    """One composed event per distinct record history (parallel composition).

    Releases on the whole pool (full batch, amplified sampling) are charged to every
    record. Releases on a partition (shuffled epochs) are charged to the records they
    touched; records with the same history share one event. Every trial is looked at,
    and the accountant keeps the worst.

    Examples
    --------
    >>> from dpverify.core.curator import Curator
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.ones((4, 1)), np.zeros(4)), rng=0)
    >>> for b in cur.epoch(2):
    ...     _ = cur.gaussian("s", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0, batch=b)
    >>> ledger_events(cur.ledger)  # each record is in one of the two batches
    [GaussianDpEvent(noise_multiplier=1.0)]
    """
    releases = list(ledger)
    common: Counter = Counter()
    partitioned: list[tuple[dpa.DpEvent, np.ndarray]] = []
    for rel in releases:
        ev = release_event(rel, relation, accountant)
        if isinstance(ev, dpa.NoOpDpEvent):
            continue
        if rel.touched is None:
            common[ev] += 1
        else:
            partitioned.append((ev, rel.touched))
    if not partitioned:
        return [_compose(common)]
    # Per (trial, record): how often each distinct partitioned event touched it.
    kinds = list(dict.fromkeys(ev for ev, _ in partitioned))
    # Masks hold one row when every trial touched the same records (see the curator).
    trials = max(t.shape[0] for _, t in partitioned)
    hist = np.zeros((len(kinds), trials, partitioned[0][1].shape[1]), dtype=np.int64)
    for ev, touched in partitioned:
        hist[kinds.index(ev)] += touched
    rows = np.unique(hist.reshape(len(kinds), -1).T, axis=0)
    out = []
    for row in rows:
        counts = Counter(common)
        for k, c in zip(kinds, row, strict=True):
            if c:
                counts[k] += int(c)
        out.append(_compose(counts))
    return out


@dataclass(frozen=True)
class AccountingResult:
    """Epsilon (or delta) of a ledger by each accountant, and the events behind it."""

    epsilon: float  # the tightest valid answer (PLD where supported, else RDP)
    delta: float
    relation: str
    by_accountant: dict[str, float] = field(default_factory=dict)
    rho: float | None = None
    events: tuple[Any, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": _jsonable(self.epsilon),
            "delta": self.delta,
            "relation": self.relation,
            "rho": self.rho,
            "by_accountant": {k: _jsonable(v) for k, v in self.by_accountant.items()},
            "events": [str(e) for e in self.events],
        }


def _jsonable(x: float) -> float | str:
    if math.isnan(x):  # an accountant that does not support the events
        return "nan"
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def epsilon_of_event(
    event: dpa.DpEvent, delta: float, relation: str = "add_remove", accountant: str = "pld"
) -> float:
    """Epsilon of one event at ``delta`` by ``accountant`` (``pld`` or ``rdp``).

    Returns ``nan`` when the accountant does not support the event under the relation.

    Examples
    --------
    >>> ev = dpa.GaussianDpEvent(1.0)
    >>> round(epsilon_of_event(ev, 1e-5), 3)
    4.377
    """
    relation = check_relation(relation)
    if delta == 0:
        return pure_epsilon(event, relation)
    rel = _RELATIONS[relation]
    if accountant == "pld" and type(event) is dpa.GaussianDpEvent and event.noise_multiplier > 0:
        # A lone Gaussian (every unsampled history, once merged) has a closed form, the
        # analytic Gaussian mechanism (Balle and Wang 2018, Theorem 8): exact, and instant
        # where a PLD of a small multiplier needs a fine grid over a wide support. PLD reads a
        # REPLACE_ONE multiplier relative to half the distance (see _multiplier_scale).
        scale = _multiplier_scale(relation, "pld")
        return float(dpa.get_epsilon_gaussian(event.noise_multiplier / scale, delta))
    if accountant == "pld":
        acc = PLDAccountant(neighboring_relation=rel, value_discretization_interval=1e-4)
    elif accountant == "rdp":
        acc = RdpAccountant(orders=_rdp_orders(event), neighboring_relation=rel)
    else:
        raise InputError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    if not acc.supports(event):
        return math.nan
    with _orders_left_out_quietly():
        return float(acc.compose(event).get_epsilon(delta))


@contextlib.contextmanager
def _orders_left_out_quietly() -> Iterator[None]:
    """dp_accounting's RDP accountant warns (through absl) for each order whose series does
    not converge, and leaves that order out: the epsilon stays valid, read off the other
    orders, and a long ledger's hundreds of such lines tell a user nothing to act on."""
    log = logging.getLogger("absl")
    level = log.level
    log.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        log.setLevel(level)


def unsupported_reason(events: Iterable[dpa.DpEvent], relation: str, accountant: str) -> str:
    """Why ``accountant`` gives no epsilon for ``events`` (its NaN), in words; "" if it does.

    Names the innermost event dp_accounting's accountant does not support under the
    relation (its ``supports`` says no), e.g. its RDP accountant has no Poisson subsampling
    under replace-one neighbours.

    Examples
    --------
    >>> ev = dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(2.0))
    >>> print(unsupported_reason([ev], "replace_one", "rdp"))  # doctest: +NORMALIZE_WHITESPACE
    dp_accounting's RDP accountant does not support PoissonSampledDpEvent under
    replace-one neighbours
    >>> unsupported_reason([ev], "add_remove", "rdp")
    ''
    """
    rel = _RELATIONS[check_relation(relation)]
    if accountant == "pld":
        acc: Any = PLDAccountant(neighboring_relation=rel)
    else:
        acc = RdpAccountant(neighboring_relation=rel)
    todo = list(events)
    culprit = None
    while todo:
        ev = todo.pop(0)
        if acc.supports(ev):
            continue
        culprit = ev
        subs = getattr(ev, "events", None) or [getattr(ev, "event", None)]
        todo = [e for e in subs if e is not None]  # look inside the unsupported one
    if culprit is None:
        return ""
    return (f"dp_accounting's {accountant.upper()} accountant does not support "
            f"{type(culprit).__name__} under {relation.replace('_', '-')} neighbours")


def pure_epsilon(event: dpa.DpEvent, relation: str = "add_remove") -> float:
    """Epsilon of ``event`` at delta = 0 (pure DP): ``inf`` where no epsilon holds.

    Laplace noise with multiplier b (scale over sensitivity) is 1/b-DP (Dwork, McSherry,
    Nissim and Smith 2006, Proposition 1); randomized response on k buckets keeping the
    truth with probability 1 - p + p/k is log(1 + k (1 - p) / p)-DP; pure DP composes
    additively (Dwork and Roth 2014, Theorem 3.16). Sampling amplifies it to
    log(1 + q (e^eps - 1)): Poisson at rate q under add/remove, and m of n without
    replacement (q = m / n) under replace-one (Balle, Barthe and Gaboardi 2018, Theorems 8
    and 9). Gaussian noise and zCDP are never pure (``inf``); a sampling scheme the
    theorems do not cover under ``relation`` gives ``nan`` (not supported).

    Examples
    --------
    >>> pure_epsilon(dpa.ComposedDpEvent([dpa.LaplaceDpEvent(10.0), dpa.LaplaceDpEvent(5.0)]))
    0.30000000000000004
    >>> round(pure_epsilon(dpa.PoissonSampledDpEvent(0.1, dpa.LaplaceDpEvent(1.0))), 4)
    0.1586
    >>> pure_epsilon(dpa.GaussianDpEvent(3.0))
    inf
    """
    if isinstance(event, dpa.NoOpDpEvent):
        return 0.0
    if isinstance(event, dpa.LaplaceDpEvent):
        b = float(event.noise_multiplier)
        return 1.0 / b if b > 0 else math.inf
    if isinstance(event, dpa.RandomizedResponseDpEvent):
        p, k = float(event.noise_parameter), int(event.num_buckets)
        return math.log1p(k * (1.0 - p) / p) if p > 0 else math.inf
    if isinstance(event, dpa.ComposedDpEvent):
        return float(sum(pure_epsilon(e, relation) for e in event.events))
    if isinstance(event, dpa.SelfComposedDpEvent):
        return int(event.count) * pure_epsilon(event.event, relation)
    rate = _pure_sampling_rate(event, relation)
    if rate is not None:
        inner = pure_epsilon(event.event, relation)
        return math.log1p(rate * math.expm1(inner)) if math.isfinite(inner) else inner
    if isinstance(event, (dpa.SampledWithReplacementDpEvent, dpa.PoissonSampledDpEvent,
                          dpa.SampledWithoutReplacementDpEvent)):
        return math.nan
    return math.inf  # Gaussian, zCDP, non-private: no finite epsilon at delta = 0


def _pure_sampling_rate(event: dpa.DpEvent, relation: str) -> float | None:
    """The amplification rate of a sampled event where Balle et al. 2018 cover it."""
    if isinstance(event, dpa.PoissonSampledDpEvent) and relation == "add_remove":
        return float(event.sampling_probability)
    if isinstance(event, dpa.SampledWithoutReplacementDpEvent) and relation == "replace_one":
        return float(event.sample_size) / float(event.source_dataset_size)
    return None


def account_events(
    events: list[dpa.DpEvent] | dict[str, list[dpa.DpEvent]], delta: float,
    relation: str = "add_remove",
) -> AccountingResult:
    """Worst epsilon over record histories, by PLD and RDP (pure DP at delta = 0).

    ``events`` is one list for both accountants, or a list per accountant name (the
    ledger's releases read in each accountant's convention). The headline epsilon is PLD's
    (tight) where it supports every event, else the smaller of RDP's and the pure epsilon.
    At delta = 0 the one answer is the pure epsilon of :func:`pure_epsilon` (reported as
    ``pure``).
    """
    delta = check_delta(delta)
    per = events if isinstance(events, dict) else {"pld": events, "rdp": events}
    if delta == 0:
        per = {"pure": per.get("pld") or per.get("rdp") or []}
    shown = per.get("pld") or per.get("rdp") or per.get("pure") or []
    if any(_has_nonprivate(e) for evs in per.values() for e in evs):
        return AccountingResult(math.inf, delta, relation, dict.fromkeys(per, math.inf),
                                events=tuple(shown))
    by: dict[str, float] = {}
    for name, evs in per.items():
        vals = [epsilon_of_event(e, delta, relation, name) for e in evs]
        by[name] = math.nan if any(math.isnan(v) for v in vals) else max(vals, default=0.0)
    eps = by.get("pure", by.get("pld", math.nan))
    if math.isnan(eps):
        eps = by.get("rdp", math.nan)
        # An (eps, 0)-DP history is (eps, delta)-DP at every delta: where PLD is silent
        # (Laplace under replace-one), RDP's conversion must not be looser than that.
        pures = [pure_epsilon(e, relation) for e in shown]
        if not any(math.isnan(v) for v in pures):
            pure = max(pures, default=0.0)
            eps = min(eps, pure) if not math.isnan(eps) else pure
    if math.isnan(eps):
        raise InputError(
            f"no accountant supports these releases under {relation}: {shown[:1]}"
        )
    return AccountingResult(eps, delta, relation, by, events=tuple(shown))


def _subevents(event: dpa.DpEvent) -> list[dpa.DpEvent]:
    """``event`` and every event nested in it (compositions and sampling wrappers)."""
    subs = list(getattr(event, "events", None) or [])
    inner = getattr(event, "event", None)
    if isinstance(inner, dpa.DpEvent):
        subs.append(inner)
    return [event] + [s for sub in subs for s in _subevents(sub)]


def _has_nonprivate(event: dpa.DpEvent) -> bool:
    return any(isinstance(e, dpa.NonPrivateDpEvent) for e in _subevents(event))


def account_ledger(
    ledger: Ledger, delta: float, relation: str = "add_remove"
) -> AccountingResult:
    """Epsilon at ``delta`` of everything the ledger released.

    Examples
    --------
    >>> from dpverify.core.curator import Curator
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.ones((4, 1)), np.zeros(4)), rng=0)
    >>> _ = cur.exact("peek", lambda X, y, w: w @ X)
    >>> account_ledger(cur.ledger, 1e-5).epsilon
    inf
    """
    per = {acc: ledger_events(ledger, relation, acc) for acc in ("pld", "rdp")}
    res = account_events(per, delta, relation)
    rho = zcdp_of_ledger(ledger)
    return AccountingResult(res.epsilon, res.delta, res.relation, res.by_accountant, rho,
                            res.events)


def zcdp_of_ledger(ledger: Ledger | Iterable[Release]) -> float | None:
    """rho of the ledger when every release is an unsampled Gaussian or an exponential
    selection, else ``None``.

    A Gaussian release with sensitivity Delta and standard deviation sigma is
    Delta^2 / (2 sigma^2)-zCDP (Bun and Steinke 2016, Prop 1.6); an eps-DP exponential
    selection is eps^2/8-zCDP (bounded range: Cesar and Rogers 2021, Section 3); zCDP
    composes additively (Bun and Steinke 2016, Lemma 2.3), and in parallel over disjoint
    records.

    Examples
    --------
    >>> from dpverify.core.curator import Curator
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.ones((4, 1)), np.zeros(4)), rng=0)
    >>> _ = cur.gaussian("s", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)
    >>> _ = cur.exponential("pick", lambda X, y, w: w @ X, sensitivity=1.0, epsilon=2.0)
    >>> zcdp_of_ledger(cur.ledger)  # 1/2 + 2^2/8
    1.0
    """
    per_record: np.ndarray | float = 0.0
    common = 0.0
    for rel in ledger:
        if rel.mechanism == "exponential":
            eps = float(rel.epsilon)
            rho = eps * eps / 8.0
        elif rel.mechanism != "gaussian" or rel.sampling in (
                "poisson", "uniform_with_replacement", "uniform_without_replacement"):
            if rel.mechanism == "exact":
                return math.inf
            return None
        elif rel.sensitivity == 0:
            continue
        else:
            rho = math.inf if rel.noise == 0 else rel.sensitivity**2 / (2.0 * rel.noise**2)
        if rel.touched is None:
            common += rho
        else:
            per_record = per_record + rho * rel.touched
    worst = float(np.max(per_record)) if isinstance(per_record, np.ndarray) else per_record
    return common + worst


def claimed_epsilon(claim: PrivacyClaim, delta: float | None = None) -> float:
    """The claim's epsilon at ``delta`` (its own delta by default).

    zCDP claims are converted through the RDP curve of rho-zCDP, the tight route.

    Examples
    --------
    >>> claimed_epsilon(PrivacyClaim(epsilon=2.0, delta=1e-6))
    2.0
    """
    delta = claim.delta if delta is None else delta
    if claim.rho is not None and claim.epsilon is None:
        return epsilon_of_event(dpa.ZCDpEvent(claim.rho), delta, claim.relation, "rdp")
    return claim.epsilon_at(delta)


def calibrate_noise_multiplier(
    make_event: Callable[[float], dpa.DpEvent],
    *,
    target_epsilon: float,
    target_delta: float,
    relation: str = "add_remove",
    accountant: str = "pld",
) -> float:
    """The smallest noise multiplier whose event meets (target_epsilon, target_delta).

    Examples
    --------
    >>> sigma = calibrate_noise_multiplier(dpa.GaussianDpEvent, target_epsilon=1.0,
    ...                                    target_delta=1e-5)
    >>> abs(epsilon_of_event(dpa.GaussianDpEvent(sigma), 1e-5) - 1.0) < 1e-3
    True
    """
    target_epsilon = check_epsilon(target_epsilon, "target_epsilon")
    target_delta = check_delta(target_delta, "target_delta", positive=True)
    rel = _RELATIONS[check_relation(relation)]

    def fresh_rdp() -> dpa.PrivacyAccountant:
        return RdpAccountant(orders=_DENSE_ORDERS, neighboring_relation=rel)

    def fresh_rdp_bracket() -> dpa.PrivacyAccountant:
        return RdpAccountant(orders=_BRACKET_ORDERS, neighboring_relation=rel)

    def fresh_pld() -> dpa.PrivacyAccountant:
        # A coarser grid than for reporting: PLD stays pessimistic, so the noise found is
        # at worst slightly larger than needed, and the search is 10x faster. Calibrated
        # events are noise-adding, so the library's own accountant serves.
        return _LibraryPLDAccountant(neighboring_relation=rel, value_discretization_interval=1e-3)

    # RDP is cheap at any noise level and never tighter than PLD, so its answer brackets
    # PLD's from above; a PLD search started at tiny noise would allocate without bound.
    if accountant not in ("pld", "rdp"):
        raise InputError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    # Under replace-one the two accountants read one event differently (see
    # _multiplier_scale), so an RDP answer cannot bracket a PLD search there.
    if fresh_rdp().supports(make_event(1.0)) and (relation == "add_remove"
                                                  or accountant == "rdp"):
        if accountant == "rdp":
            return float(dpa.calibrate_dp_mechanism(
                fresh_rdp, make_event, target_epsilon, target_delta,
                bracket_interval=dpa.LowerEndpointAndGuess(1e-3, 1.0), tol=1e-7,
            ))
        # Only a bracket for PLD: coarse orders and a loose tolerance suffice (the answer
        # meets the target, so it lies above PLD's), and cost a tenth of the dense search.
        s_rdp = float(dpa.calibrate_dp_mechanism(
            fresh_rdp_bracket, make_event, target_epsilon, target_delta,
            bracket_interval=dpa.LowerEndpointAndGuess(1e-3, 1.0), tol=1e-4,
        ))
        bracket: dpa.BracketInterval = dpa.ExplicitBracketInterval(0.2 * s_rdp, 1.001 * s_rdp)
    elif accountant == "rdp":
        raise InputError(f"the RDP accountant does not support {make_event(1.0)}")
    else:
        bracket = _pld_bracket(fresh_pld, make_event, target_epsilon, target_delta)
    return float(dpa.calibrate_dp_mechanism(
        fresh_pld, make_event, target_epsilon, target_delta, bracket_interval=bracket, tol=1e-5,
    ))


def _pld_bracket(fresh: Callable[[], dpa.PrivacyAccountant],
                 make_event: Callable[[float], dpa.DpEvent], eps: float, delta: float
                 ) -> dpa.BracketInterval:
    """A bracket for a PLD-only search, found from above: noise is cheap to account when
    large and a PLD at tiny noise allocates without bound, so double until the target is
    met, then halve until it is missed."""
    def epsilon(m: float) -> float:
        return float(fresh().compose(make_event(m)).get_epsilon(delta))

    hi = 1.0
    while epsilon(hi) > eps:
        hi *= 2.0
        if hi > 1e6:
            raise InputError(f"no noise multiplier up to 1e6 meets epsilon={eps}")
    lo = hi / 2.0
    while lo > 1e-4 and epsilon(lo) <= eps:
        lo /= 2.0
    return dpa.ExplicitBracketInterval(lo, hi)


@functools.lru_cache(maxsize=256)
def calibrate_gaussian(
    *,
    target_epsilon: float,
    target_delta: float,
    steps: int = 1,
    sampling_probability: float | None = None,
    relation: str = "add_remove",
) -> float:
    """Noise multiplier for ``steps`` Gaussian releases, Poisson-sampled if a rate is given.

    Examples
    --------
    >>> s = calibrate_gaussian(target_epsilon=1.0, target_delta=1e-5)
    >>> round(s, 2)  # the analytic Gaussian mechanism (Balle and Wang 2018)
    3.73
    """
    steps = int(check_positive(steps, "steps", integer=True))
    check_relation(relation)  # unsampled calibration never passes it to an accountant
    if sampling_probability is not None and not (0 < float(sampling_probability) <= 1):
        # NaN or a rate above 1 would otherwise pass as "unsampled" and 0 as a search error.
        raise InputError(f"sampling_probability must be in (0, 1], got {sampling_probability!r}")
    sampled = sampling_probability is not None and sampling_probability < 1
    # Unsampled, only the distance between q(D) and q(D') matters, whatever the relation;
    # sampled under replace-one, only PLD has the right event (see _multiplier_scale).
    acc_relation = relation if sampled else "add_remove"
    scale = _multiplier_scale(acc_relation, "pld")

    def make(sigma: float) -> dpa.DpEvent:
        ev: dpa.DpEvent = dpa.GaussianDpEvent(sigma * scale)
        if sampled:
            ev = dpa.PoissonSampledDpEvent(sampling_probability, ev)
        return dpa.SelfComposedDpEvent(ev, steps) if steps > 1 else ev

    return calibrate_noise_multiplier(
        make, target_epsilon=target_epsilon, target_delta=target_delta, relation=acc_relation
    )


def rho_to_epsilon(rho: float, delta: float) -> float:
    """Tight (epsilon, delta) of rho-zCDP through its Renyi curve.

    Examples
    --------
    >>> rho_to_epsilon(0.5, 1e-5) < 0.5 + 2 * math.sqrt(0.5 * math.log(1e5))
    True
    """
    return epsilon_of_event(dpa.ZCDpEvent(check_positive(rho, "rho")), check_delta(delta),
                            "add_remove", "rdp")


def gaussian_sigma_for_rho(rho: float, sensitivity: float = 1.0, steps: int = 1) -> float:
    """Noise std making ``steps`` Gaussian releases rho-zCDP (Bun and Steinke 2016, Prop 1.6).

    Examples
    --------
    >>> gaussian_sigma_for_rho(0.5)
    1.0
    """
    return sensitivity * math.sqrt(steps / (2.0 * check_positive(rho, "rho")))
