"""DP Double-SPIDER (paper 000, Algorithm 2, text lines 138-155; Theorems 1, 6, 7).

Minimises the dual (3) L(x, eta) = (lambda/n) sum_i psi*((l_i(x) - G eta)/lambda) + G eta,
the rescaled L(x, eta) = L^(x, G eta) of line 130 (with which Lemma 1's L2 = G^2 M/lambda,
line 392, is the eta-smoothness). Two SPIDER estimators: g_t for d L/d eta (refreshed on the
full data every q steps, line 4; corrected by noisy minibatch differences, line 6) and v_t for
grad_x L (lines 10 and 12), with steps alpha = 1/(4 L2) and
beta_t = min{1/(2 L0 + L1 sqrt(H)), 1/(L0 sqrt(n) ||v_t||)} (Theorem 7, line 480), H read as
H0 of Proposition 1 (line 466). N1 = N3 = n (Remark 2, line 184), N2 = N4 = q and
q = (n eps / sqrt(d log(1/delta)))^(2/3) (Theorem 7). The output is x_tau, tau uniform on
1..T (line 155).

The variants differ only in their :class:`NoiseRule` (:data:`PAPER_RULE`,
:data:`SOUND_RULE`): the loop is Algorithm 2's and asks the rule for every noise scale,
threshold, clip and batch.

``paper``: as printed. Each of the four noisy queries clips the batch MEAN at its threshold
(Algorithm 1 applied to L(.; B), lines 142-150); the increments are drawn uniformly without
replacement; C2_t and C4_t are Theorem 6's (line 470), C4_t with |eta_t - eta_{t-1}| and
Lemma 5's M L/lambda; sigma_1..sigma_4 are Theorem 6's with the c of
:func:`~algorithms.paper000.common.paper_c`, each from the full (epsilon, delta); declared
sensitivities are 2 C / N (elements bounded by C, Theorem 5); Table 1's printed conjugate.

``sound``: per-sample clipping at the threshold the noise is scaled to; increments on
Poisson batches; C2_t = L2 (||x_t - x_{t-1}|| + |eta_t - eta_{t-1}|) and
C4_t = (K L + L2) ||x_t - x_{t-1}|| + L2 |eta_{t+1} - eta_t| (per-sample Lipschitz bounds,
K = ``weight_bound`` on (psi*)'; clipping enforces them whatever the data); all four streams
share one noise multiplier calibrated by the PLD accountant; the correct conjugate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.paper000.common import (
    TINY,
    RandomIterate,
    c_of,
    calibrate_streams,
    clip_mean,
    clip_then_mean,
    finite_records,
    glm_terms,
    log_difference,
    log_sign,
    release,
    sampled_batch,
)
from algorithms.paper000.divergences import get_divergence
from dpverify.core.curator import Curator
from dpverify.core.errors import InputError
from dpverify.core.registry import Setting

# Table 1 as printed, or corrected (notes 000).
TABLES = ("printed", "corrected")


def divergence_of(p: Mapping[str, Any]) -> Any:
    """The run's divergence: Table 1 as printed (``table="printed"``) or corrected.

    Examples
    --------
    >>> divergence_of({"divergence": "chi2", "table": "printed"}).printed
    True
    """
    table = str(p.get("table", "corrected"))
    if table not in TABLES:
        raise InputError(f"table must be one of {TABLES}, got {table!r}")
    return get_divergence(str(p["divergence"]), printed=table == "printed",
                          alpha=float(p.get("alpha", 0.5)), k=float(p.get("k", 2.0)))


def dual_constants(p: Mapping[str, Any], setting: Setting, div: Any) -> dict[str, float]:
    """G, L, M, lambda and Lemma 1's L0, L1, L2 (line 392), H0 (Prop. 1, line 466), K.

    M is psi*'s smoothness on the domain |u| <= S0 of Assumption 3 (line 122).

    Examples
    --------
    >>> from algorithms.paper000.problems import make_dual_problem
    >>> prm = {"n": 20, "d": 2, "divergence": "chi2", "dro_lambda": 0.5, "S0": 2.0,
    ...        "weight_bound": 4.0}
    >>> c = dual_constants(prm, make_dual_problem(prm, np.random.default_rng(0)).setting(),
    ...                    get_divergence("chi2"))
    >>> c["L2"], c["H0"]
    (0.125, 49.0)
    """
    G = float(setting["lipschitz"])
    L = float(setting["smoothness"])
    lam = float(p["dro_lambda"])
    S0 = float(p["S0"])
    M = float(div.smoothness(S0))
    if not math.isfinite(M) or M <= 0:
        raise InputError(
            f"Algorithm 2 needs psi* to be M-smooth with 0 < M < inf (Assumption 2, line 118); "
            f"{div.name}{' as printed' if div.printed else ''} gives M = {M}")
    L2 = G * G * M / lam
    return {
        "G": G, "L": L, "lam": lam, "M": M, "S0": S0,
        "L0": G + G * G * M / lam, "L1": L / G, "L2": L2,
        "H0": 2.0 * S0**3 * math.sqrt(M) + 2.0 * M * S0**4 + 1.0,
        "K": float(p["weight_bound"]),
    }


def spider_schedule(p: Mapping[str, Any], n: int, d: int) -> tuple[int, int, int]:
    """(q, T, N): epoch length, iterations and increment batch size.

    q = ceil((n eps / sqrt(d log(1/delta)))^(2/3)) (Theorem 7, line 480) unless given;
    T = ``epochs`` q, or with ``T_per_n`` the smallest multiple of q at least
    ``T_per_n`` n (Theorem 7's T = n0 q >= 6 n c0 (L(x0, eta0) - inf L) is Theta(n)
    whatever epsilon; its constant 6 c0 (L(x0, eta0) - inf L) is at most 18 here);
    N2 = N4 = ``batch`` or q, the Theta(q) of Theorem 7 (its other terms' constants exceed
    n at these sizes), capped at n.

    Examples
    --------
    >>> spider_schedule({"epsilon": 1.0, "delta": 1e-3, "q": None, "epochs": 3,
    ...                  "batch": None}, 500, 5)
    (20, 60, 20)
    >>> spider_schedule({"epsilon": 1.0, "delta": 1e-3, "q": None, "epochs": 3,
    ...                  "T_per_n": 2, "batch": None}, 500, 5)
    (20, 1000, 20)
    """
    eps, delta = float(p["epsilon"]), float(p["delta"])
    q = p.get("q")
    if q is None:
        q = math.ceil((n * eps / math.sqrt(d * math.log(1.0 / delta))) ** (2.0 / 3.0))
    q = max(1, int(q))
    per_n = p.get("T_per_n")
    # Theorem 7's T = n0 q >= 6 n c0 (L(x0, eta0) - inf L) is Theta(n) whatever epsilon;
    # T_per_n sets that n-proportional schedule with a constant of our choosing.
    epochs = int(p["epochs"]) if per_n is None else math.ceil(float(per_n) * n / q)
    T = q * max(1, epochs)
    N = p.get("batch")
    N = min(n, max(1, int(q if N is None else N)))
    return q, T, N


def clips(p: Mapping[str, Any], c: Mapping[str, float]) -> tuple[float, float]:
    """(C1, C3): never given by the paper; defaults G (1 + K) and G K (per-sample bounds of
    d L / d eta and grad_x L when (psi*)' <= K).

    Examples
    --------
    >>> clips({"clip_eta": None, "clip_x": 2.0}, {"G": 0.25, "K": 4.0})
    (1.25, 2.0)
    """
    G, K = c["G"], c["K"]
    c1 = p.get("clip_eta")
    c3 = p.get("clip_x")
    return (G * (1.0 + K) if c1 is None else float(c1)), (G * K if c3 is None else float(c3))


# What the variants differ in ------------------------------------------------------------

Sizes = tuple[int, int, int, int]  # (n, q, T, N)


def theorem6_noise(p: Mapping[str, Any], c: Mapping[str, float], sizes: Sizes
                   ) -> tuple[float, float, float, float]:
    """sigma_1..sigma_4 of Theorem 6 (line 470), each from the full (epsilon, delta), with
    the c of :func:`~algorithms.paper000.common.paper_c`; sigma_2 and sigma_4 per unit
    threshold (they are Theorem 5's sigma for C2_t, C4_t).

    Examples
    --------
    >>> c = {"G": 0.25, "K": 4.0}
    >>> [round(s, 4) for s in theorem6_noise({"epsilon": 1.0, "delta": 1e-3, "c_noise": 1.0,
    ...     "clip_eta": None, "clip_x": None}, c, (100, 4, 8, 4))]
    [0.0465, 0.6571, 0.0372, 0.6571]
    """
    n, q, T, N = sizes
    C1, C3 = clips(p, c)
    eps, cc = float(p["epsilon"]), c_of(p)
    logd = math.log(1.0 / float(p["delta"]))
    s1 = cc * C1 * math.sqrt(T * logd) / (n * math.sqrt(q) * eps)
    s3 = cc * C3 * math.sqrt(logd) / eps * max(1.0 / n, math.sqrt(T) / (n * math.sqrt(q)))
    s2 = cc * math.sqrt(logd) / (N * eps)  # sigma_2 / C2_t: no sqrt(T)/n branch
    s4 = cc * math.sqrt(logd) / eps * max(1.0 / N, math.sqrt(T) / (n * math.sqrt(q)))
    return s1, s2, s3, s4


def calibrated_noise(p: Mapping[str, Any], c: Mapping[str, float], sizes: Sizes
                     ) -> tuple[float, float, float, float]:
    """One multiplier z for all four streams, calibrated by the PLD accountant on the
    ceil(T/q) full-batch refreshes and Poisson increments of each of lines 4-12 (notes
    3.4); noise z times each replace-one sensitivity, per unit threshold for increments.

    Examples
    --------
    >>> c = {"G": 0.25, "K": 4.0}
    >>> s = calibrated_noise({"epsilon": 1.0, "delta": 1e-3, "clip_eta": None,
    ...                       "clip_x": None}, c, (100, 4, 8, 4))
    >>> s[0] / s[2] == 1.25 / 1.0, s[1] == s[3]  # C1 / C3; both increments at 2z/N
    (True, True)
    """
    n, q, T, N = sizes
    C1, C3 = clips(p, c)
    R = math.ceil(T / q)  # refreshes: t = 0, q, 2q, ...
    z = calibrate_streams(float(p["epsilon"]), float(p["delta"]), n,
                          (("full", 1.0, 2 * R), ("poisson", N / n, 2 * (T - R))))
    s2 = z * 2.0 / N  # of the increments scaled by their thresholds
    return z * 2.0 * C1 / n, s2, z * 2.0 * C3 / n, s2


def theorem6_c2(xp: Any, c: Mapping[str, float], dx: Any, de: Any, de_next: Any) -> Any:
    """C2_t = 2 max{L2 |eta_t - eta_{t-1}|, G M ||x_t - x_{t-1}|| / lambda} (Theorem 6,
    line 470).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> c = {"L2": 0.5, "G": 0.25, "M": 1.0, "lam": 0.5, "K": 4.0, "L": 0.1, "L0": 0.75,
    ...      "L1": 0.4, "H0": 49.0}
    >>> round(float(theorem6_c2(xp, c, np.array([0.1]), np.array([0.2]), np.array([0.3]))[0]), 6)
    0.2
    """
    return 2.0 * xp.maximum(c["L2"] * de, c["G"] * c["M"] * dx / c["lam"])


def lipschitz_c2(xp: Any, c: Mapping[str, float], dx: Any, de: Any, de_next: Any) -> Any:
    """L2 (||x_t - x_{t-1}|| + |eta_t - eta_{t-1}|): the per-sample Lipschitz bound of
    d L / d eta (notes 2, Alg 2 thresholds), which per-sample clipping enforces.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> c = {"L2": 0.5, "G": 0.25, "M": 1.0, "lam": 0.5, "K": 4.0, "L": 0.1, "L0": 0.75,
    ...      "L1": 0.4, "H0": 49.0}
    >>> round(float(lipschitz_c2(xp, c, np.array([0.1]), np.array([0.2]), np.array([0.3]))[0]), 6)
    0.15
    """
    return c["L2"] * (dx + de)


def theorem6_c4(xp: Any, c: Mapping[str, float], dx: Any, de: Any, de_next: Any) -> Any:
    """C4_t of Theorem 6 (line 470) as printed: |eta_t - eta_{t-1}| where line 12 moves
    eta_t -> eta_{t+1}, and Lemma 5's M L / lambda.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> c = {"L2": 0.5, "G": 0.25, "M": 1.0, "lam": 0.5, "K": 4.0, "L": 0.1, "L0": 0.75,
    ...      "L1": 0.4, "H0": 49.0}
    >>> round(float(theorem6_c4(xp, c, np.array([0.1]), np.array([0.2]), np.array([0.3]))[0]), 6)
    0.71
    """
    return 2.0 * xp.maximum(c["M"] * c["L"] * de / c["lam"],
                            (c["L0"] + c["L1"] * math.sqrt(c["H0"])) * dx)


def lipschitz_c4(xp: Any, c: Mapping[str, float], dx: Any, de: Any, de_next: Any) -> Any:
    """(K L + L2) ||x_t - x_{t-1}|| + L2 |eta_{t+1} - eta_t|: the per-sample bound of
    grad_x L across line 12's move (notes 2, Alg 2 thresholds), enforced by clipping.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> c = {"L2": 0.5, "G": 0.25, "M": 1.0, "lam": 0.5, "K": 4.0, "L": 0.1, "L0": 0.75,
    ...      "L1": 0.4, "H0": 49.0}
    >>> round(float(lipschitz_c4(xp, c, np.array([0.1]), np.array([0.2]), np.array([0.3]))[0]), 6)
    0.24
    """
    return (c["K"] * c["L"] + c["L2"]) * dx + c["L2"] * de_next


Threshold = Callable[[Any, Mapping[str, float], Any, Any, Any], Any]


@dataclass(frozen=True)
class NoiseRule:
    """What the variants of Algorithm 2 differ in: everything else is the printed loop.

    ``noise(p, c, (n, q, T, N))``: sigma_1..sigma_4 (per unit threshold for the
    increments); ``clip(xp, log|v|, sign v, w, divisor, log C, X)``: the clipped batch
    mean of a query; ``c2``, ``c4``: the increments' thresholds from the moves
    (||dx||, |eta_t - eta_{t-1}|, |eta_{t+1} - eta_t|); ``poisson``: the increments'
    batches are Poisson (else uniform without replacement).
    """

    name: str
    noise: Callable[[Mapping[str, Any], Mapping[str, float], Sizes],
                    tuple[float, float, float, float]]
    clip: Callable[..., Any]
    c2: Threshold
    c4: Threshold
    poisson: bool


# Algorithm 2 as printed (lines 138-155, Theorem 6): the batch MEAN is clipped (lines 4-12).
PAPER_RULE = NoiseRule("paper", theorem6_noise, clip_mean, theorem6_c2, theorem6_c4,
                       poisson=False)
# Notes 2, "Alg 2, sound variant": per-sample clipping at the thresholds the noise is scaled
# to, Poisson increments, one accountant for the four streams.
SOUND_RULE = NoiseRule("sound", calibrated_noise, clip_then_mean, lipschitz_c2, lipschitz_c4,
                  poisson=True)


# The queries --------------------------------------------------------------------------------

def _weights(cur: Curator, div: Any, c: Mapping[str, float], l: Any, eta: Any) -> tuple[Any, Any]:
    a = (l - c["G"] * eta[:, None]) / c["lam"]
    return div.log_dconj(a, cur.xp)


def _eta_query(cur: Curator, setting: Setting, div: Any, c: Mapping[str, float], W: Any,
               eta: Any, C: float, divisor: float, clip: Callable[..., Any]):
    """d L(x, eta; xi)/d eta = G (1 - (psi*)'(a)) per sample, clipped, averaged (line 4)."""
    xp = cur.xp
    lg = math.log(c["G"])

    def query(X: Any, y: Any, w: Any) -> Any:
        X, y, w = finite_records(xp, X, y, w)
        l, _ = glm_terms(cur, setting, W, X, y)
        lD, sD = _weights(cur, div, c, l, eta)
        ld, sd = log_difference(xp, xp.zeros_like(lD) + lg, xp.ones_like(sD), lD + lg, sD)
        return clip(xp, ld, sd, w, divisor, math.log(C))

    return query


def _eta_diff_query(cur: Curator, setting: Setting, div: Any, c: Mapping[str, float],
                    W1: Any, e1: Any, W0: Any, e0: Any, thr: Any, divisor: float,
                    clip: Callable[..., Any]):
    """d L/d eta at (x_t, eta_t) minus at (x_{t-1}, eta_{t-1}) per sample (line 6)."""
    xp = cur.xp
    lg = math.log(c["G"])
    log_thr = xp.log(xp.reshape(thr, (-1, 1)))

    def query(X: Any, y: Any, w: Any) -> Any:
        X, y, w = finite_records(xp, X, y, w)
        l1, _ = glm_terms(cur, setting, W1, X, y)
        l0, _ = glm_terms(cur, setting, W0, X, y)
        lD1, s1 = _weights(cur, div, c, l1, e1)
        lD0, s0 = _weights(cur, div, c, l0, e0)
        # G (1 - D1) - G (1 - D0) = G D0 - G D1
        ld, sd = log_difference(xp, lD0 + lg, s0, lD1 + lg, s1)
        return clip(xp, ld, sd, w, divisor, log_thr)

    return query


def _x_coefs(cur: Curator, setting: Setting, div: Any, c: Mapping[str, float], W: Any,
             eta: Any, X: Any, y: Any) -> tuple[Any, Any]:
    # grad_x L(x, eta; xi) = (psi*)'(a) l'(z) x_i: its coefficient in log form
    l, dl = glm_terms(cur, setting, W, X, y)
    lD, sD = _weights(cur, div, c, l, eta)
    ll, sl = log_sign(cur.xp, dl)
    return lD + ll, sD * sl


def _x_query(cur: Curator, setting: Setting, div: Any, c: Mapping[str, float], W: Any,
             eta: Any, C: float, divisor: float, clip: Callable[..., Any]):
    """grad_x L(x_t, eta_{t+1}; xi) per sample, clipped, averaged (line 10)."""
    xp = cur.xp

    def query(X: Any, y: Any, w: Any) -> Any:
        X, y, w = finite_records(xp, X, y, w)
        la, sa = _x_coefs(cur, setting, div, c, W, eta, X, y)
        return clip(xp, la, sa, w, divisor, math.log(C), X)

    return query


def _x_diff_query(cur: Curator, setting: Setting, div: Any, c: Mapping[str, float],
                  W1: Any, e1: Any, W0: Any, e0: Any, thr: Any, divisor: float,
                  clip: Callable[..., Any]):
    """grad_x L(x_t, eta_{t+1}; xi) - grad_x L(x_{t-1}, eta_t; xi) per sample (line 12)."""
    xp = cur.xp
    log_thr = xp.log(xp.reshape(thr, (-1, 1)))

    def query(X: Any, y: Any, w: Any) -> Any:
        X, y, w = finite_records(xp, X, y, w)
        l1, s1 = _x_coefs(cur, setting, div, c, W1, e1, X, y)
        l0, s0 = _x_coefs(cur, setting, div, c, W0, e0, X, y)
        ld, sd = log_difference(xp, l1, s1, l0, s0)
        return clip(xp, ld, sd, w, divisor, log_thr, X)

    return query


def double_spider(rule: NoiseRule):
    """Algorithm 2 under ``rule`` as a ``run(cur, setting, params)`` function (module
    docstring).

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> from dpverify.execution.trials import build_problem
    >>> t = resolve("dp_double_spider:paper"); p = t.algorithm.params("paper", {"epochs": 1})
    >>> cur = Curator(build_problem(t, p, 0).data, trials=2, rng=0)
    >>> run = double_spider(PAPER_RULE)
    >>> run(cur, build_problem(t, p, 0).setting(), p).shape, len(cur.ledger)
    ((2, 5), 40)
    """

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        xp, b = cur.xp, cur.backend
        n, d = cur.n, cur.d
        div = divergence_of(p)
        c = dual_constants(p, setting, div)
        q, T, N = spider_schedule(p, n, d)
        C1, C3 = clips(p, c)
        s1, s2, s3, s4 = rule.noise(p, c, (n, q, T, N))
        alpha = 1.0 / (4.0 * c["L2"])  # Theorem 7 (line 480)
        beta_cap = 1.0 / (2.0 * c["L0"] + c["L1"] * math.sqrt(c["H0"]))
        x = b.asarray(np.zeros((cur.trials, d)))
        eta = b.asarray(np.full(cur.trials, float(p["eta0"])))
        out = RandomIterate(cur, T, x, str(p["output"]))
        x_prev = eta_prev = g = v = dx = de = None
        for t in range(T):
            cur.step(t)
            if t % q == 0:  # line 4
                g = release(cur, "eta_refresh",
                            _eta_query(cur, setting, div, c, x, eta, C1, float(n), rule.clip),
                            sensitivity=2.0 * C1 / n, noise=s1)
            else:  # line 6
                dx = xp.linalg.vector_norm(x - x_prev, axis=1)
                de = xp.abs(eta - eta_prev)
                thr = xp.clip(rule.c2(xp, c, dx, de, None), min=TINY)
                g = g + release(
                    cur, "eta_increment",
                    _eta_diff_query(cur, setting, div, c, x, eta, x_prev, eta_prev, thr,
                                    float(N), rule.clip),
                    sensitivity=2.0 / N, noise=s2,
                    batch=sampled_batch(cur, N, sound=rule.poisson), scale=thr)
            eta_new = eta - alpha * g  # line 8
            if t % q == 0:  # line 10
                v = release(cur, "x_refresh",
                            _x_query(cur, setting, div, c, x, eta_new, C3, float(n), rule.clip),
                            sensitivity=2.0 * C3 / n, noise=s3)
            else:  # line 12
                thr = xp.clip(rule.c4(xp, c, dx, de, xp.abs(eta_new - eta)), min=TINY)
                v = v + release(
                    cur, "x_increment",
                    _x_diff_query(cur, setting, div, c, x, eta_new, x_prev, eta, thr,
                                  float(N), rule.clip),
                    sensitivity=2.0 / N, noise=s4,
                    batch=sampled_batch(cur, N, sound=rule.poisson), scale=thr)
            vn = xp.linalg.vector_norm(v, axis=1, keepdims=True)
            beta = xp.minimum(
                xp.zeros_like(vn) + beta_cap,
                1.0 / (c["L0"] * math.sqrt(n) * xp.clip(vn, min=1e-300)))  # Theorem 7
            x_prev, eta_prev = x, eta
            x, eta = x - beta * v, eta_new  # line 14
            out.offer(t + 1, x)
        return out.value

    return run
