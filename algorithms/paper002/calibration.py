"""Noise and step counts of paper 002: as printed (with stated constants) and calibrated.

Every noise formula of the paper carries a universal constant it never gives (c in
(3), (6), (9), (11); c2 in Theorem 3.1). We fix each constant to the value the paper's
own proof route yields when carried out with explicit constants: the moments accountant
(Abadi et al. 2016, Thm 2.2, quoted on lines 472-478) at the order
lambda = 2 ln(1/delta) / epsilon, which meets exp(-lambda eps / 2) <= delta exactly, and
the per-step log-moments the proofs use, with their leading terms taken at face value:

* full-batch Gaussian, replace-one sensitivity 2G/n (eq. 19 and 26, lines 461, 509):
  alpha(lambda) = 2 lambda (lambda + 1) / (n^2 sigma^2);
* one index sampled with q = 1/n, function bounded by G (Abadi's Lemma 3 as used in
  eq. 17, line 453, dropping the O(lambda^3) term as the proof does):
  alpha(lambda) = lambda (lambda + 1) / (n^2 sigma_1^2).

Solving T alpha(lambda) <= lambda epsilon / 2 for sigma gives the constants below. The
sound variants do not use them: they calibrate with ``dp_accounting`` the events the
curator will record.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import dp_accounting as dpa
from dp_accounting.rdp import RdpAccountant

from dpverify.core.errors import check_delta, check_epsilon, check_positive

RELATION = "replace_one"  # "the n-th data differs" (proof of Thm 4.1, line 437)


def _tail(epsilon: float, delta: float) -> float:
    """1 + eps / (2 ln(1/delta)): the (lambda + 1) / lambda factor at lambda = 2 ln(1/delta)/eps."""
    return 1.0 + epsilon / (2.0 * math.log(1.0 / delta))


def c_full_batch(epsilon: float, delta: float) -> float:
    """The c of eqs. (9) and (11) (Thms 5.3 and 6.1, lines 272 and 306).

    From the proof B.3 (eqs. 26-27, lines 509-521): T * 2 lambda (lambda + 1) / (n^2
    sigma^2) <= lambda eps / 2 at lambda = 2 ln(1/delta) / eps gives
    sigma^2 = 8 (1 + eps / (2 ln(1/delta))) G^2 T ln(1/delta) / (n^2 eps^2).

    Examples
    --------
    >>> round(c_full_batch(1.0, 1e-3), 3)
    8.579
    """
    return 8.0 * _tail(epsilon, delta)


def c_svrg(epsilon: float, delta: float) -> float:
    """The c of eqs. (3) and (6) (Thms 4.1 and 4.3, lines 160 and 209).

    The proof B.2 splits the noise into sigma_1 (sampled term, eq. 15) and sigma_2 (full
    gradient, eq. 16), with sigma_1 and sigma_2 of the same form (eqs. 23-24, lines
    486-490); we take them equal (c4 = c5), so sigma_1^2 = sigma_2^2 = sigma^2 / 2. Then
    steps * lambda (lambda + 1) (1 / sigma_1^2 + 2 / sigma_2^2) / n^2 <= lambda eps / 2
    (eqs. 20-21 and line 474) gives c = 24 (1 + eps / (2 ln(1/delta))).

    Examples
    --------
    >>> round(c_svrg(1.0, 1e-3), 3)
    25.737
    """
    return 24.0 * _tail(epsilon, delta)


def c2_dp_sgd(epsilon: float, delta: float) -> float:
    """The c2 of Theorem 3.1 (Abadi et al.'s DP-SGD as quoted on lines 109-113).

    Lemma 3's leading term q^2 lambda (lambda + 1) / sigma^2 per step, T steps, at
    lambda = 2 ln(1/delta) / eps: sigma^2 >= q^2 T (4 ln(1/delta) + 2 eps) / eps^2.

    Examples
    --------
    >>> round(c2_dp_sgd(1.0, 1e-3), 4)
    2.0711
    """
    return math.sqrt(4.0 * _tail(epsilon, delta))


def paper_sigma_full_batch(G: float, T: int, n: int, epsilon: float, delta: float) -> float:
    """sigma of eqs. (9)/(11): sigma^2 = c G^2 T ln(1/delta) / (n^2 eps^2), c = c_full_batch.

    Examples
    --------
    >>> round(paper_sigma_full_batch(1.0, 10, 100, 1.0, 1e-3), 5)
    0.24344
    """
    return math.sqrt(c_full_batch(epsilon, delta) * G**2 * T * math.log(1.0 / delta)
                     / (n**2 * epsilon**2))


def paper_sigma_svrg(G: float, T: int, m: int, n: int, epsilon: float, delta: float) -> float:
    """sigma of eq. (3) (Thm 4.1, line 160): c G^2 T m ln(1/delta) / (n^2 eps^2).

    Examples
    --------
    >>> round(paper_sigma_svrg(1.0, 2, 50, 200, 1.0, 1e-3), 4)
    0.6667
    """
    return math.sqrt(c_svrg(epsilon, delta) * G**2 * T * m * math.log(1.0 / delta)
                     / (n**2 * epsilon**2))


def paper_sigma_svrg_pp(G: float, T: int, m: int, n: int, epsilon: float,
                        delta: float) -> float:
    """sigma of eq. (6) (Thm 4.3, line 209): c G^2 2^T m ln(2/delta) / (n^2 eps^2).

    The 2^T m printed here is about half the m (2^(T+1) - 2) noisy steps Alg. 2 takes
    (lines 195-199); the proof itself counts 2^(T+1) m (line 497).

    Examples
    --------
    >>> round(paper_sigma_svrg_pp(1.0, 3, 10, 200, 1.0, 1e-3), 4)
    0.6255
    """
    return math.sqrt(c_svrg(epsilon, delta) * G**2 * 2**T * m * math.log(2.0 / delta)
                     / (n**2 * epsilon**2))


def paper_sigma_dp_sgd(q: float, T: int, epsilon: float, delta: float) -> float:
    """sigma of Theorem 3.1 (line 113): c2 q sqrt(T ln(1/delta)) / eps; noise std is G sigma.

    Examples
    --------
    >>> round(paper_sigma_dp_sgd(0.05, 100, 1.0, 1e-3), 4)
    2.7217
    """
    return c2_dp_sgd(epsilon, delta) * q * math.sqrt(T * math.log(1.0 / delta)) / epsilon


# Sound calibration ----------------------------------------------------------------------

# RDP orders for calibrating sampled-without-replacement events. Any subset of orders gives
# a valid (never smaller) epsilon, so the noise found here is at least what a denser grid
# would find, and accounting the ledger on a denser grid stays within the target. The
# without-replacement RDP of dp_accounting is a pure-Python O(order^2) sum; orders above 64
# cost seconds and matter only for epsilon far below the ones used here.
_CAL_ORDERS = (1.1, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0,
               7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 16.0, 18.0, 20.0, 22.0, 24.0, 26.0,
               28.0, 32.0, 36.0, 40.0, 44.0, 48.0, 56.0, 64.0)


def _calibrate_rdp(make_event: Callable[[float], dpa.DpEvent], epsilon: float,
                   delta: float) -> float:
    def fresh() -> dpa.PrivacyAccountant:
        return RdpAccountant(orders=list(_CAL_ORDERS),
                             neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)

    return float(dpa.calibrate_dp_mechanism(
        fresh, make_event, epsilon, delta,
        bracket_interval=dpa.LowerEndpointAndGuess(1e-3, 1.0), tol=1e-7,
    ))


def _composed(*parts: tuple[dpa.DpEvent, int]) -> dpa.DpEvent:
    events = [dpa.SelfComposedDpEvent(e, c) if c > 1 else e for e, c in parts if c > 0]
    return events[0] if len(events) == 1 else dpa.ComposedDpEvent(events)


@functools.lru_cache(maxsize=256)
def calibrate_sampled_with_snapshots(
    *, epsilon: float, delta: float, n: int, batch: int, steps: int, snapshots: int,
    snapshot_share: float = 0.5,
) -> tuple[float, float]:
    """Noise multipliers (z_sampled, z_snapshot) of an SVRG-type run, replace-one.

    The run releases ``steps`` Gaussian sums over a uniform without-replacement batch of
    ``batch`` of the ``n`` records (``SampledWithoutReplacementDpEvent``, the event that
    matches drawing indices uniformly; Abadi's Poisson Lemma 3 does not) and ``snapshots``
    full-batch Gaussian releases. ``z_snapshot`` is set so the snapshots alone use
    ``snapshot_share`` of epsilon; ``z_sampled`` so that everything composed meets
    (epsilon, delta) by RDP.

    Examples
    --------
    >>> z1, z2 = calibrate_sampled_with_snapshots(epsilon=1.0, delta=1e-3, n=100, batch=1,
    ...                                           steps=100, snapshots=2)
    >>> 0.5 < z1 < 5 and 1 < z2 < 10
    True
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta, positive=True)
    check_positive(steps, "steps", integer=True)
    z2 = 0.0
    if snapshots > 0:
        z2 = _calibrate_rdp(lambda z: _composed((dpa.GaussianDpEvent(z), snapshots)),
                            snapshot_share * epsilon, delta)

    def make(z: float) -> dpa.DpEvent:
        parts = [(dpa.SampledWithoutReplacementDpEvent(n, batch, dpa.GaussianDpEvent(z)),
                  steps)]
        if snapshots > 0:
            parts.append((dpa.GaussianDpEvent(z2), snapshots))
        return _composed(*parts)

    return _calibrate_rdp(make, epsilon, delta), z2


# Step counts of the theorems (each O(.) with constant 1) -------------------------------

def svrg_schedule(L: float, mu: float, n: int, d: int, G: float, epsilon: float,
                  delta: float, gap0: float) -> tuple[float, int, int]:
    """(eta, m, T) for DP-SVRG (Thm 4.2, lines 170-174).

    eta = 1/(48 L) and m = ceil(192 L/mu + 1): the printed eta <= 1/(12 L) cannot meet
    condition (4) (its second term alone exceeds 1/2), and with u = 8 L eta condition (4)
    reads m > 2 (8 kappa / u + u) / (1 - 3u), least at u = 1/6. T = ceil(log2(gap0 n^2
    eps^2 mu / (d G^2 ln(1/delta)))): with A < 1/2 per epoch (eq. 39) this brings
    A^T gap0 down to the noise floor, the O(log(.)) of line 174 with constant 1.

    Examples
    --------
    >>> svrg_schedule(0.25, 0.25, 200, 5, 1.0, 1.0, 1e-3, math.log(2))
    (0.08333333333333333, 193, 8)
    """
    eta = 1.0 / (48.0 * L)
    m = math.ceil(192.0 * L / mu + 1.0)
    A = (1.0 / (eta * (1 - 8 * eta * L) * mu * m)
         + 8 * L * eta * (m + 1) / (m * (1 - 8 * L * eta)))  # eq. (4), line 172
    assert A < 0.5, A
    arg = gap0 * n**2 * epsilon**2 * mu / (d * G**2 * math.log(1.0 / delta))
    return eta, m, max(1, math.ceil(math.log2(max(arg, 1.0))))


def svrg_pp_schedule(L: float, n: int, d: int, G: float, epsilon: float,
                     delta: float) -> tuple[float, int]:
    """(eta, T) for DP-SVRG++ (Thm 4.4, line 215): eta = 1/(13 L), T = ceil(log2(n eps /
    (G sqrt(d ln(1/delta))))); the bound (58) is A / 2^T plus noise growing with 2^T.

    Examples
    --------
    >>> svrg_pp_schedule(0.25, 200, 5, 1.0, 1.0, 1e-3)
    (0.3076923076923077, 6)
    """
    arg = n * epsilon / (G * math.sqrt(d * math.log(1.0 / delta)))
    return 1.0 / (13.0 * L), max(1, math.ceil(math.log2(max(arg, 1.0))))


def accmd_iterations(L: float, radius: float, n: int, d: int, G: float, epsilon: float,
                     delta: float) -> int:
    """T of DP-AccMD for C the l1 ball of ``radius`` (Thm 5.4, line 280, constant 1).

    T^2 = L ||C||_2^2 sqrt(B_w) n eps / (G sqrt(ln 1/delta) sqrt(G_C^2 + ||C||_2^2)) with
    ||C||_2 = 2 radius (the l2 diameter, line 233), B_w(x*, x_0) <= ln(2d) for the entropy
    started at the centre, and Gaussian width G_C ~ radius sqrt(2 ln(2d)).

    Examples
    --------
    >>> accmd_iterations(0.25, 5.0, 100, 200, 1.0, 1.0, 1e-3)
    11
    """
    diam2 = (2.0 * radius) ** 2
    width2 = radius**2 * 2.0 * math.log(2 * d)
    t2 = (L * diam2 * math.sqrt(math.log(2 * d)) * n * epsilon
          / (G * math.sqrt(math.log(1.0 / delta)) * math.sqrt(width2 + diam2)))
    return max(1, math.ceil(math.sqrt(t2)))


def gd_pl_iterations(L: float, mu: float, n: int, d: int, G: float, epsilon: float,
                     delta: float, gap0: float) -> int:
    """T of DP-GD under PL (Thm 6.2, line 326): (L/mu) ln(gap0 n^2 eps^2 / (d G^2 ln(1/delta))).

    The Otilde(log(.)) of line 326 hides L/mu; (81) contracts by (1 - mu/L) per step.

    Examples
    --------
    >>> gd_pl_iterations(0.5, 0.25, 200, 5, 1.0, 1.0, 1e-3, math.log(2))
    14
    """
    arg = gap0 * n**2 * epsilon**2 / (d * G**2 * math.log(1.0 / delta))
    return max(1, math.ceil(L / mu * math.log(max(arg, 1.0))))


def gd_nonconvex_iterations(L: float, n: int, d: int, G: float, epsilon: float,
                            delta: float) -> int:
    """T of DP-GD, nonconvex (Thm 6.3, line 340): sqrt(L) n eps / (sqrt(d ln(1/delta)) G).

    Examples
    --------
    >>> gd_nonconvex_iterations(0.0962, 200, 5, 0.25, 1.0, 1e-3)
    43
    """
    return max(1, math.ceil(math.sqrt(L) * n * epsilon
                            / (math.sqrt(d * math.log(1.0 / delta)) * G)))
