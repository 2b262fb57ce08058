"""Pieces paper 000's algorithms share: claims, noise rules, releases and clipped queries.

Neighbours "differ by only one entry" (Definition 1, line 52) of a dataset of fixed size n
(S in X^n, Algorithm 3 line 227; D in Y^n, Theorem 5 line 418): replace-one.

Noise rules:

* ``paper`` variants use the printed formulas, each an instance of Theorem 5 (line 418),
  sigma = c * bound * sqrt(log(1/delta)) / epsilon * max{1/b, sqrt(T)/n}, whose "universal
  constant" c the paper never gives. We take the smallest c with which Theorem 5 holds in
  its own base case b = n: T full-batch Gaussian queries of replace-one sensitivity
  2 bound / n at multiplier c sqrt(T log(1/delta)) / (2 eps) compose to ONE Gaussian of
  multiplier c sqrt(log(1/delta)) / (2 eps), whatever T, so c = 2 eps z / sqrt(log(1/delta))
  with z the exact (analytic) Gaussian multiplier for (eps, delta) (Balle and Wang 2018).
  Each printed full-batch line alone then costs exactly (epsilon, delta), which is what
  the proofs claim per line; c = 1.96 at (1, 1e-3).
* ``sound`` variants give every release one noise multiplier z (noise = z * declared
  replace-one sensitivity), calibrated by the PLD accountant for the composition of all
  their streams, built from the same events
  :func:`dpverify.accounting.accountant.release_event` makes
  of the ledger.

Releases whose clip threshold follows the iterates (the increments of Algorithms 2 and 3)
are made through :func:`release` with a per-trial ``scale``: the curator sees the query
divided by the threshold (so its sensitivity and noise are the same numbers for every trial
and step), and the answer is multiplied back. The distribution is exactly query + N(0,
(scale * noise)^2); the ledger holds one event per stream.

Per-sample values such as e^(l/lambda) grad l are kept as ``(log |value|, sign)`` pairs and
clipped in log space (:func:`clip_each`, :func:`clip_mean`), so no exponential overflows.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import dp_accounting as dpa
import numpy as np
from dp_accounting.pld import PLDAccountant

from algorithms.paper000.divergences import safe_log
from dpverify.accounting.accountant import calibrate_gaussian, release_event
from dpverify.core.claims import PrivacyClaim
from dpverify.core.curator import Batch, Curator, Release
from dpverify.core.errors import InputError, check_delta, check_epsilon

PAPER = "paper 000 (Xu, Ding, Ma, Xie, Tao, Slaitane, Wang: DP non-convex DRO)"
RELATION = "replace_one"
# Threshold floor: a threshold of exactly 0 (no movement) would make the scaled query 0/0.
TINY = 1e-100


def claim(p: Mapping[str, Any]) -> PrivacyClaim:
    """(epsilon, delta)-DP under replace-one neighbours (Theorems 1, 3, 6, 8).

    Examples
    --------
    >>> claim({"epsilon": 1.0, "delta": 1e-3}).relation
    'replace_one'
    """
    return PrivacyClaim(epsilon=float(p["epsilon"]), delta=float(p["delta"]), relation=RELATION)


def paper_c(epsilon: float, delta: float) -> float:
    """The exact constant c of Theorem 5's base case b = n (module docstring).

    Examples
    --------
    >>> round(paper_c(1.0, 1e-3), 2)
    1.96
    """
    z = calibrate_gaussian(target_epsilon=float(epsilon), target_delta=float(delta))
    return 2.0 * float(epsilon) * z / math.sqrt(math.log(1.0 / float(delta)))


def c_of(p: Mapping[str, Any]) -> float:
    """``c_noise`` when given, else :func:`paper_c` at the run's (epsilon, delta).

    Examples
    --------
    >>> c_of({"c_noise": 5.0, "epsilon": 1.0, "delta": 1e-3})
    5.0
    """
    c = p.get("c_noise")
    return paper_c(float(p["epsilon"]), float(p["delta"])) if c is None else float(c)


def thm5_sigma(c: float, bound: float, epsilon: float, delta: float, b: float, T: float,
               n: float, *, typeset: bool = False) -> float:
    """Theorem 5 (line 418): c bound sqrt(log(1/delta)) / epsilon max{1/b, sqrt(T)/n}.

    ``typeset=True`` reads the theorem as printed, sqrt(log(1/delta) / epsilon), which for
    epsilon < 1 is sqrt(epsilon) times less noise.

    Examples
    --------
    >>> round(thm5_sigma(1.0, 1.0, 1.0, math.exp(-4.0), 10, 100, 1000), 4)
    0.2
    """
    L = math.log(1.0 / delta)
    root = math.sqrt(L / epsilon) if typeset else math.sqrt(L) / epsilon
    return c * bound * root * max(1.0 / b, math.sqrt(T) / n)


def gaussian_delta(noise_over_sensitivity: float, epsilon: float) -> float:
    """Exact delta of the Gaussian mechanism at epsilon (Balle and Wang 2018, Thm 8).

    Definition 3 (line 64) sets sigma / Delta = sqrt(log(1.25/delta)) / epsilon, without the
    factor 2 of Dwork and Roth (2014, Thm A.1); at epsilon = 1, delta = 1e-5 this gives
    delta ~ 3.7e-5.

    Examples
    --------
    >>> s = math.sqrt(math.log(1.25 / 1e-5)) / 1.0
    >>> round(gaussian_delta(s, 1.0) / 1e-5, 1)
    3.7
    """
    from scipy.stats import norm

    s = float(noise_over_sensitivity)
    return float(norm.cdf(0.5 / s - epsilon * s) - math.exp(epsilon) * norm.cdf(-0.5 / s
                                                                                  - epsilon * s))


# Calibration of the sound variants ------------------------------------------------------

Stream = tuple[str, float, int]  # (sampling scheme, rate, number of releases)


def _event(z: float, scheme: str, rate: float, n: int) -> dpa.DpEvent:
    # The very event the accountant will build from the ledger for such a release.
    proto = Release(0, "calibration", "gaussian", 1.0, "l2", z, scheme, rate, None, n, None, ())
    return release_event(proto, RELATION, "pld")


@functools.lru_cache(maxsize=256)
def calibrate_streams(epsilon: float, delta: float, n: int,
                      streams: tuple[Stream, ...]) -> float:
    """One noise multiplier for every release of a run, so that all streams meet (eps, delta).

    ``streams`` lists ``(scheme, rate, count)``: ``("full", 1.0, R)`` for R full-batch
    releases, ``("poisson", b/n, k)`` for k Poisson-sampled ones. The multiplier is relative
    to each release's declared replace-one sensitivity, and found by bisection on the PLD
    accountant between the unsampled zCDP answer (enough) and an eighth of it (divided
    further until it is too little).

    Examples
    --------
    >>> z = calibrate_streams(1.0, 1e-3, 100, (("full", 1.0, 2),))
    >>> 3.0 < z < 6.0
    True
    """
    merged: dict[tuple[str, float], int] = {}
    for s, r, k in streams:
        if int(k) > 0:
            key = ("full", 1.0) if s == "full" or float(r) >= 1.0 else (s, float(r))
            merged[key] = merged.get(key, 0) + int(k)
    if not merged:
        raise InputError("calibrate_streams needs at least one release")
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    parts = [(s, r, k) for (s, r), k in merged.items()]

    def make(z: float) -> dpa.DpEvent:
        evs = [dpa.SelfComposedDpEvent(_event(z, s, r, n), k) if k > 1 else _event(z, s, r, n)
               for s, r, k in parts]
        return evs[0] if len(evs) == 1 else dpa.ComposedDpEvent(evs)

    # The PLD grid spans privacy losses up to ~epsilon: a step proportional to epsilon keeps
    # its size (and the time) bounded at large epsilon (rate sweeps up to 16).
    step = 1e-3 * max(1.0, epsilon)

    def fresh() -> dpa.PrivacyAccountant:
        # coarser than the ledger's accountant: pessimistic, so the noise found is enough
        return PLDAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE,
                             value_discretization_interval=step)

    def eps_of(z: float) -> float:
        return float(fresh().compose(make(z)).get_epsilon(delta))

    # Upper end: sampling never costs more than the unsampled Gaussian, whose k releases at
    # multiplier z are k/(2 z^2)-zCDP (Bun and Steinke 2016, Prop. 1.6, Lemma 2.3); the
    # rho meeting (eps, delta) by Prop. 1.3 gives a z that surely meets the target.
    total = sum(merged.values())
    L = math.log(1.0 / delta)
    rho = (math.sqrt(L + epsilon) - math.sqrt(L)) ** 2
    hi = math.sqrt(total / (2.0 * rho))
    lo = hi / 8.0
    while eps_of(lo) <= epsilon:
        hi, lo = lo, lo / 8.0
        if lo < 1e-6:
            raise InputError(f"cannot calibrate noise for epsilon={epsilon}: needs < 1e-6")
    return float(dpa.calibrate_dp_mechanism(
        fresh, make, epsilon, delta,
        bracket_interval=dpa.ExplicitBracketInterval(lo, hi), tol=1e-4 * hi))


# Releases -----------------------------------------------------------------------------

def release(cur: Curator, name: str, query: Callable[[Any, Any, Any], Any], *,
            sensitivity: float, noise: float, batch: Batch | None = None,
            scale: Any = None) -> Any:
    """A Gaussian release of ``query``; with ``scale`` (trials,), of query / scale, times scale.

    ``sensitivity`` and ``noise`` are those of the (scaled) query the curator sees.

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.ones((2, 1)), np.ones(2)), trials=2, rng=0)
    >>> s = cur.backend.asarray(np.array([1.0, 10.0]))
    >>> release(cur, "q", lambda X, y, w: w @ X, sensitivity=1.0, noise=0.0, scale=s).tolist()
    [[2.0], [2.0]]
    """
    if scale is None:
        return cur.gaussian(name, query, sensitivity=sensitivity, noise_std=noise, batch=batch)
    xp = cur.xp
    scale = xp.clip(scale, min=TINY)

    def scaled(X: Any, y: Any, w: Any) -> Any:
        out = query(X, y, w)
        return out / xp.reshape(scale, (-1,) + (1,) * (out.ndim - 1))

    ans = cur.gaussian(name, scaled, sensitivity=sensitivity, noise_std=noise, batch=batch)
    return ans * xp.reshape(scale, (-1,) + (1,) * (ans.ndim - 1))


def sampled_batch(cur: Curator, size: int, *, sound: bool) -> Batch:
    """A batch of nominal ``size``: Poisson (rate size/n) when sound, else uniform without
    replacement, the "batches of size b sampled uniformly at random" of Theorem 5 (line 418).

    Never with replacement: a record drawn twice would double its sensitivity.

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.ones((10, 1)), np.ones(10)), rng=0)
    >>> sampled_batch(cur, 3, sound=True).scheme, sampled_batch(cur, 3, sound=False).size
    ('poisson', 3)
    """
    if size >= cur.n:
        return cur.full_batch()
    if sound:
        return cur.sample("poisson", rate=size / cur.n)
    return cur.sample("uniform_without_replacement", size=size)


# Per-sample values in log space ---------------------------------------------------------

def finite_records(xp: Any, X: Any, y: Any, w: Any) -> tuple[Any, Any, Any]:
    """Zero a non-finite record and its weight, so it cannot slip through clipping.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> X, y, w = finite_records(xp, np.array([[np.nan], [1.0]]), np.ones(2), np.ones((1, 2)))
    >>> X.tolist(), w.tolist()
    ([[0.0], [1.0]], [[0.0, 1.0]])
    """
    ok = xp.all(xp.isfinite(X), axis=1) & xp.isfinite(y)
    X = xp.where(ok[:, None], X, xp.zeros_like(X))
    y = xp.where(ok, y, xp.zeros_like(y))
    return X, y, w * xp.astype(ok, w.dtype)


def log_sign(xp: Any, v: Any) -> tuple[Any, Any]:
    """``(log |v|, sign v)`` of a finite array.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> [a.tolist() for a in log_sign(xp, np.array([-1.0, 0.0]))]
    [[0.0, -inf], [-1.0, 0.0]]
    """
    return safe_log(xp, xp.abs(v)), xp.sign(v)


def log_difference(xp: Any, la: Any, sa: Any, lb: Any, sb: Any) -> tuple[Any, Any]:
    """``(log |d|, sign d)`` of d = sa e^la - sb e^lb, shifted so that nothing overflows.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> l, s = log_difference(xp, np.array([1000.0]), np.array([1.0]),
    ...                       np.array([999.0]), np.array([1.0]))
    >>> round(float(l[0] - 1000.0), 6), float(s[0])  # log(1 - 1/e)
    (-0.458675, 1.0)
    """
    m = xp.maximum(la, lb)
    m = xp.where(xp.isfinite(m), m, xp.zeros_like(m))
    inner = sa * xp.exp(la - m) - sb * xp.exp(lb - m)
    return safe_log(xp, xp.abs(inner)) + m, xp.sign(inner)


def clip_each(xp: Any, la: Any, sa: Any, log_cap: Any) -> Any:
    """Per-sample clipping of values sa e^la to magnitude e^log_cap: sa e^min(la, log_cap).

    For a vector value ``coef_i * x_i`` pass ``log_cap = log C - log ||x_i||``.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> clip_each(xp, np.array([1000.0, 0.0]), np.array([-1.0, 1.0]), np.log(2.0)).tolist()
    [-2.0, 1.0]
    """
    return sa * xp.exp(xp.minimum(la, log_cap))


def clip_mean(xp: Any, la: Any, sa: Any, w: Any, divisor: float, log_cap: float,
              X: Any = None) -> Any:
    """Clip(mean, C) of the batch mean of sa e^la (times x_i when ``X`` is given).

    Algorithm 2 as printed clips the batch mean (lines 142-150), not each sample. Returns
    (trials,) for scalars, (trials, d) for vectors; the mean is formed after a shift by the
    largest log-magnitude in the batch, so it stays finite however large e^la is.
    ``log_cap`` is a number or a (trials, 1) array of per-trial thresholds.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> la = np.array([[1000.0, 0.0]]); sa = np.ones((1, 2)); w = np.ones((1, 2))
    >>> clip_mean(xp, la, sa, w, 2.0, np.log(3.0)).round(12).tolist()  # ~e^1000/2, clipped
    [3.0]
    """
    if X is not None:
        nx = xp.linalg.vector_norm(X, axis=1)
        lx = la + safe_log(xp, nx)[None, :]
    else:
        lx = la
    lx = xp.where(w > 0, lx, xp.full_like(lx, -math.inf))
    M = xp.max(lx, axis=1, keepdims=True)
    M = xp.where(xp.isfinite(M), M, xp.zeros_like(M))
    terms = w * sa * xp.exp(lx - M)  # each of magnitude <= 1
    if X is not None:
        unit = X / xp.clip(nx, min=TINY)[:, None]
        v = terms @ unit / divisor
        nv = xp.linalg.vector_norm(v, axis=1, keepdims=True)
        return v * xp.exp(xp.minimum(M, log_cap - safe_log(xp, nv)))
    v = xp.sum(terms, axis=1, keepdims=True) / divisor
    out = xp.sign(v) * xp.exp(xp.minimum(M + safe_log(xp, xp.abs(v)), log_cap))
    return out[:, 0]


def clip_then_mean(xp: Any, la: Any, sa: Any, w: Any, divisor: float, log_cap: Any,
                   X: Any = None) -> Any:
    """Mean of per-sample values sa e^la (times x_i when ``X`` is given), each clipped to
    norm e^log_cap: one record moves it by at most 2 e^log_cap / divisor (notes 2, sound
    variant, lines 4'-12'), unlike :func:`clip_mean`. ``log_cap`` is a number or a
    (trials, 1) array of per-trial thresholds.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> la = np.array([[1000.0, 0.0]]); sa = np.ones((1, 2)); w = np.ones((1, 2))
    >>> clip_then_mean(xp, la, sa, w, 2.0, np.log(3.0)).tolist()  # (3 + 1) / 2
    [2.0]
    """
    if X is None:
        return xp.sum(w * clip_each(xp, la, sa, log_cap), axis=1) / divisor
    cap = log_cap + row_log_cap(xp, 1.0, X)[None, :]  # ||coef_i x_i|| <= e^log_cap
    return (w * clip_each(xp, la, sa, cap)) @ X / divisor


def row_log_cap(xp: Any, C: float, X: Any) -> Any:
    """log C - log ||x_i|| per record: the cap :func:`clip_each` needs for coef_i * x_i.

    A zero row gets a large finite cap (its product with x_i is 0 anyway).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> np.exp(row_log_cap(xp, 2.0, np.array([[0.5, 0.0]]))).tolist()
    [4.0]
    """
    return math.log(C) - xp.log(xp.clip(xp.linalg.vector_norm(X, axis=1), min=TINY))


def glm_terms(cur: Curator, setting: Any, W: Any, X: Any, y: Any) -> tuple[Any, Any]:
    """Losses and loss derivatives in the margin, (trials, slots), on the curator's backend.

    Examples
    --------
    >>> from algorithms.losses import get_loss
    >>> from dpverify.core.data import Dataset
    >>> from dpverify.core.registry import Problem
    >>> D = Dataset(np.ones((2, 1)), np.ones(2))
    >>> s = Problem(D, loss=get_loss("sigmoid")).setting()
    >>> l, dl = glm_terms(Curator(D), s, np.zeros((1, 1)), D.X, D.y)
    >>> l.tolist(), dl.tolist()
    ([[0.5, 0.5]], [[-0.25, -0.25]])
    """
    Z = W @ X.T
    return setting.loss.value(Z, y, cur.xp), cur.backend.glm_coefficients(setting.loss, Z, y)


# Output ------------------------------------------------------------------------------

#: What a run returns: the iterate of a uniformly random step, or the last.
OUTPUTS = ("random", "last")


class RandomIterate:
    """The returned iterate x_tau, tau ~ Uniform{1..T}, kept on the fly for every trial.

    "Randomly select x, eta from 1, ..., T" (Algorithm 2 line 17, line 155); "tau ~ [T]"
    (Algorithm 3 line 20, line 247). tau is drawn from the curator's stream up front and
    does not depend on the data. ``mode="last"`` returns the last iterate instead.

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.ones((2, 1)), np.ones(2)), trials=3, rng=0)
    >>> it = RandomIterate(cur, 4, np.zeros((3, 1)))
    >>> for t in range(1, 5):
    ...     it.offer(t, np.full((3, 1), float(t)))
    >>> bool(np.all(it.value[:, 0] == it.tau))
    True
    """

    def __init__(self, cur: Curator, T: int, first: Any, mode: str = "random") -> None:
        if mode not in OUTPUTS:
            raise InputError(f"output must be one of {OUTPUTS}, got {mode!r}")
        self.cur, self.mode = cur, mode
        self.tau = (np.asarray(cur.rng.integers(1, T + 1, size=cur.trials))
                    if mode == "random" else None)
        self.value = first

    def offer(self, t: int, x: Any) -> None:
        """Offer iterate number ``t`` (1..T)."""
        if self.mode == "last":
            self.value = x
            return
        hit = self.tau == t
        if not hit.any():
            return
        m = self.cur.backend.asarray(hit.astype(float))
        m = self.cur.xp.reshape(m, (-1,) + (1,) * (x.ndim - 1))
        self.value = m * x + (1.0 - m) * self.value


