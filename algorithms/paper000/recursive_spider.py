"""DP Recursive-SPIDER (paper 000, Algorithm 3, text lines 226-247; Theorems 3, 4, 8).

KL-constrained DRO as the compositional problem (5) (line 192): Psi(w) = f(g(w)) with
w = (x, lambda), g(w; xi) = e^(l(x; xi)/lambda) and f(g) = g1 log g2 + g1 rho. SPIDER
estimators v_t of grad_x g and u_t of d g/d lambda (refreshed on b1 = b3 = n records every q
steps, lines 7-8; corrected by noisy minibatch differences, lines 13-14), a tracker s_t of
g(w) from one sampled record per step (line 16), and the step w_{t+1} = w_t - eta z_t with
z_t = ((lambda_t/s_t) v_t, (lambda_t/s_t) u_t + log s_t + rho) (lines 17-18). Theorem 8
(line 651) sets T, q and b2 from n, d, epsilon, delta, G, L and Psi_0 (we use the public bound
``psi0_bound`` of the problem, not the data's Psi(0) - min Psi). The output is w_tau.

Both variants fix what the printed algorithm cannot run without (each a Finding):
lambda_0 = ``lam_init`` (w_0 = 0, line 228, gives lambda = 0), the loop starts with a refresh
(t = 0..T-1; line 229 starts at t = 1 with t mod q != 0), the SPIDER sums accumulate
(lines 240-241 drop "+ v_{t-1}", "+ u_{t-1}"), the first s is the sample itself (beta = 1),
s_t is projected onto [1, C5] and lambda onto [lambda_0, inf) (post-processing; line 245
takes log s_t of a noisy value), and beta_t is the constant ``beta`` (Lemma 9's schedule,
line 736, gives beta > 1).

The variants differ only in their :class:`NoiseRule` (:data:`PAPER_RULE`,
:data:`SOUND_RULE`): the loop is Algorithm 3's and asks the rule for the noise of the five
streams, the increments' thresholds, the tracker's release and the batches.

``paper``: noise as printed. sigma_1 = sigma_3 = c G sqrt(T log(1/delta))/(n q eps) with the
proof's element bound G (lines 219, 651, 656); line 11's kappa_t ~ N(0, min{sigma_2^2,
sigma^_4^2}) and line 12's zeta_t ~ N(0, min{sigma_4^2, sigma^_2^2}) with sigma_2 =
c L ||x_t - x_{t-1}|| sqrt(log)/eps max{1/b2, sqrt(T)/n} (Theorem 3's ||x_t - x_{t-1}||, Theorem
8's c L), sigma_4 likewise with |lambda_t - lambda_{t-1}|, sigma^_2 = sigma^_4 =
2 c G sqrt(log)/eps max{1/b, sqrt(T)/n}; each pairs with the element bound it is Theorem 5's
noise for; per-sample clipping at the fixed C1..C5; minibatches uniform without replacement;
s_t from ONE record with sigma_st = c G sqrt(T log(1/delta))/(n eps) and the element bound G.

``sound``: per-sample clipping at the threshold the noise is scaled to: C1, C3 for the
refreshes; min(C2, L_g ||Delta w||) and min(C4, ...) for the increments, with L_g the
smoothness of g = e^(l/lambda) over the segment (lambda >= min(lambda_t, lambda_{t-1}), from
released values), not of l; s_t from a Poisson batch of ``s_batch`` records with values in
[1, C5] centred at (1 + C5)/2; one noise multiplier for all five streams, calibrated by PLD.
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
    clip_then_mean,
    finite_records,
    glm_terms,
    log_difference,
    log_sign,
    release,
    sampled_batch,
)
from algorithms.paper000.divergences import safe_log
from dpverify.core.curator import Batch, Curator
from dpverify.core.registry import Setting


def theorem8_schedule(p: Mapping[str, Any], setting: Setting, n: int,
                      d: int) -> tuple[int, int, int]:
    """(T, q, b2) of Theorem 8 (line 651) unless given; q capped at T, b2 at n.

    ``schedule="theorem8"`` uses Theorem 8's values even where T, q, b2 are set (a suite
    can pin them for the scale and still sweep n at the theorem's schedule).

    T = max{((Psi0 L)^(1/4) n eps / sqrt(G d log))^(4/3), n eps / sqrt(d log)},
    q = n^2 eps^2 / (L^2 T d log), b2 = max{(G n eps / sqrt(Psi0 L d log))^(2/3),
    (G n d log)^(1/3) / ((L Psi0)^(1/6) eps^(2/3))}, log = log(1/delta), all floored.

    Examples
    --------
    >>> from algorithms.paper000.problems import make_compositional_problem
    >>> prm = {"n": 500, "d": 5, "rho": 0.5, "lam0": 1e-3, "lam_init": 1.0, "epsilon": 1.0,
    ...        "delta": 1e-3, "T": None, "q": None, "b2": None}
    >>> s = make_compositional_problem(prm, np.random.default_rng(0)).setting()
    >>> theorem8_schedule(prm, s, 500, 5)
    (494, 494, 22)
    >>> theorem8_schedule({**prm, "T": 60, "q": 10, "schedule": "theorem8"}, s, 500, 5)
    (494, 494, 22)
    """
    info = setting.constants
    G, L, psi0 = float(info["lipschitz"]), float(info["smoothness"]), float(info["psi0_bound"])
    eps, logd = float(p["epsilon"]), math.log(1.0 / float(p["delta"]))
    if str(p.get("schedule", "given")) == "theorem8":  # ignore T, q, b2 even when given
        p = {**p, "T": None, "q": None, "b2": None}
    T = p.get("T")
    if T is None:
        T = math.floor(max(((psi0 * L) ** 0.25 * n * eps / math.sqrt(G * d * logd)) ** (4 / 3),
                           n * eps / math.sqrt(d * logd)))
    T = max(1, int(T))
    q = p.get("q")
    if q is None:
        q = math.floor(n**2 * eps**2 / (L**2 * T * d * logd))
    q = min(T, max(1, int(q)))
    b2 = p.get("b2")
    if b2 is None:
        b2 = math.floor(max((G * n * eps / math.sqrt(psi0 * L * d * logd)) ** (2 / 3),
                            (G * n * d * logd) ** (1 / 3) / ((L * psi0) ** (1 / 6)
                                                             * eps ** (2 / 3))))
    return T, q, min(n, max(1, int(b2)))


def _split(xp: Any, Wt: Any) -> tuple[Any, Any]:
    return Wt[:, :-1], Wt[:, -1]


def _log_g_terms(cur: Curator, setting: Setting, Wt: Any, X: Any,
                 y: Any) -> tuple[Any, Any, Any, Any, Any]:
    """log g = l/lambda, and grad_x g = (g/lambda) l' x, dg/dlambda = -g l/lambda^2, in log form."""
    xp = cur.xp
    x, lam = _split(xp, Wt)
    l, dl = glm_terms(cur, setting, x, X, y)
    lam_c = lam[:, None]
    log_g = l / lam_c
    ll, sl = log_sign(xp, dl)
    lv = log_g - xp.log(lam_c) + ll
    lu = log_g + safe_log(xp, l) - 2.0 * xp.log(lam_c)
    return log_g, lv, sl, lu, -xp.ones_like(lu)


def _v_query(cur: Curator, setting: Setting, Wt: Any, C: float, divisor: float):
    xp = cur.xp

    def query(X: Any, y: Any, w: Any) -> Any:  # line 7
        X, y, w = finite_records(xp, X, y, w)
        _, lv, sv, _, _ = _log_g_terms(cur, setting, Wt, X, y)
        return clip_then_mean(xp, lv, sv, w, divisor, math.log(C), X)

    return query


def _u_query(cur: Curator, setting: Setting, Wt: Any, C: float, divisor: float):
    xp = cur.xp

    def query(X: Any, y: Any, w: Any) -> Any:  # line 8
        X, y, w = finite_records(xp, X, y, w)
        _, _, _, lu, su = _log_g_terms(cur, setting, Wt, X, y)
        return clip_then_mean(xp, lu, su, w, divisor, math.log(C))

    return query


def _v_diff_query(cur: Curator, setting: Setting, W1: Any, W0: Any, thr: Any,
                  divisor: float):
    xp = cur.xp
    log_thr = xp.log(xp.reshape(thr, (-1, 1)))

    def query(X: Any, y: Any, w: Any) -> Any:  # line 13
        X, y, w = finite_records(xp, X, y, w)
        _, l1, s1, _, _ = _log_g_terms(cur, setting, W1, X, y)
        _, l0, s0, _, _ = _log_g_terms(cur, setting, W0, X, y)
        ld, sd = log_difference(xp, l1, s1, l0, s0)
        return clip_then_mean(xp, ld, sd, w, divisor, log_thr, X)

    return query


def _u_diff_query(cur: Curator, setting: Setting, W1: Any, W0: Any, thr: Any,
                  divisor: float):
    xp = cur.xp
    log_thr = xp.log(xp.reshape(thr, (-1, 1)))

    def query(X: Any, y: Any, w: Any) -> Any:  # line 14
        X, y, w = finite_records(xp, X, y, w)
        _, _, _, l1, s1 = _log_g_terms(cur, setting, W1, X, y)
        _, _, _, l0, s0 = _log_g_terms(cur, setting, W0, X, y)
        ld, sd = log_difference(xp, l1, s1, l0, s0)
        return clip_then_mean(xp, ld, sd, w, divisor, log_thr)

    return query


def _s_query(cur: Curator, setting: Setting, Wt: Any, C5: float, factor: Any,
             centre: float, divisor: float):
    """factor * (Clip(g(w; xi), C5) - centre), summed over the batch / divisor (line 16)."""
    xp = cur.xp

    def query(X: Any, y: Any, w: Any) -> Any:
        X, y, w = finite_records(xp, X, y, w)
        log_g, *_ = _log_g_terms(cur, setting, Wt, X, y)
        g = xp.exp(xp.minimum(log_g, math.log(C5)))  # g >= 1 for l >= 0: Clip is min(g, C5)
        return factor * xp.sum(w * (g - centre), axis=1) / divisor

    return query


def _g_smoothness_log(xp: Any, info: Mapping[str, Any], lam_min: Any, dx: Any,
                      dlam: Any) -> tuple[Any, Any]:
    """log of per-sample bounds on ||Delta grad_x g|| and |Delta dg/dlambda| over a segment.

    With l in [0, B], ||grad l|| <= G, ||hess l|| <= L and lambda >= lam_min on the segment,
    E = e^(B/lam_min): ||d grad_x g/dx|| <= E (G^2/lam^2 + L/lam), ||d grad_x g/dlam|| <=
    E G (B/lam^3 + 1/lam^2), |d^2 g/dlam^2| <= E (B^2/lam^4 + 2B/lam^3). E stays in log form.
    """
    G, L, B = float(info["lipschitz"]), float(info["smoothness"]), float(info["loss_bound"])
    lm = lam_min
    vx = G * G / lm**2 + L / lm
    vl = G * (B / lm**3 + 1.0 / lm**2)
    ul = B * B / lm**4 + 2.0 * B / lm**3
    logE = B / lm
    return logE + safe_log(xp, vx * dx + vl * dlam), logE + safe_log(xp, vl * dx + ul * dlam)


# What the variants differ in ------------------------------------------------------------

Sizes = tuple[int, int, int, int, int]  # (n, T, q, b2, s_batch)


@dataclass(frozen=True)
class Streams:
    """Declared sensitivity and noise of each stream (the increments' per unit threshold),
    and the s_t query's clip, centre and batch."""

    sens_v: float
    sens_u: float
    noise_v: float
    noise_u: float
    noise_dv: float
    noise_du: float
    sens_s: float
    noise_s: float
    C5: float
    centre: float
    bs: int


def theorem8_noise(p: Mapping[str, Any], info: Mapping[str, Any], sizes: Sizes) -> Streams:
    """The printed noise: Theorems 3 and 8 (lines 219, 651) with n q, not n sqrt(q), and
    the element bound G; kappa and zeta per unit element bound; sigma_st for one record.

    Examples
    --------
    >>> st = theorem8_noise({"epsilon": 1.0, "delta": 1e-3, "c_noise": 1.0, "clip_s": 3.0},
    ...                     {"lipschitz": 0.25}, (100, 16, 4, 10, 1))
    >>> round(st.noise_v, 5), st.sens_s, st.centre
    (0.00657, 0.5, 0.0)
    """
    n, T, q, b2, bs = sizes
    G = float(info["lipschitz"])
    eps, logd = float(p["epsilon"]), math.log(1.0 / float(p["delta"]))
    cc = c_of(p)
    sigma1 = cc * G * math.sqrt(T * logd) / (n * q * eps)
    m2 = max(1.0 / b2, math.sqrt(T) / n)
    noise_d = cc * math.sqrt(logd) / eps * m2  # per unit element bound
    return Streams(
        sens_v=2.0 * G / n, sens_u=2.0 * G / n, noise_v=sigma1, noise_u=sigma1,
        noise_dv=noise_d, noise_du=noise_d,
        sens_s=2.0 * G,  # Theorem 5 with element bound G, batch of one
        noise_s=cc * G * math.sqrt(T * logd) / (n * eps),  # sigma_st, line 651
        C5=float(p["clip_s"]), centre=0.0, bs=bs)


def calibrated_noise(p: Mapping[str, Any], info: Mapping[str, Any], sizes: Sizes) -> Streams:
    """One multiplier z for all five streams, calibrated by PLD on the full-batch refreshes,
    the Poisson increments and the Poisson s_t batches (notes 3.4); s_t's values in
    [1, C5] centred at (1 + C5)/2, so one record moves their sum by C5 - 1.

    Examples
    --------
    >>> st = calibrated_noise({"epsilon": 1.0, "delta": 1e-3, "clip_v": 1.0, "clip_u": 2.0,
    ...                        "clip_s": 3.0}, {}, (100, 16, 4, 10, 10))
    >>> st.noise_u / st.noise_v, st.sens_s, st.centre
    (2.0, 0.2, 2.0)
    """
    n, T, q, b2, bs = sizes
    C1, C3, C5 = float(p["clip_v"]), float(p["clip_u"]), float(p["clip_s"])
    R = math.ceil(T / q)
    z = calibrate_streams(float(p["epsilon"]), float(p["delta"]), n,
                          (("full", 1.0, 2 * R), ("poisson", b2 / n, 2 * (T - R)),
                           ("poisson", bs / n, T)))
    sens_v, sens_u = 2.0 * C1 / n, 2.0 * C3 / n
    sens_s = (C5 - 1.0) / bs
    return Streams(sens_v=sens_v, sens_u=sens_u, noise_v=z * sens_v, noise_u=z * sens_u,
                   noise_dv=z * 2.0 / b2, noise_du=z * 2.0 / b2, sens_s=sens_s,
                   noise_s=z * sens_s, C5=C5, centre=0.5 * (1.0 + C5), bs=bs)


Moves = tuple[Any, Any, Any]  # ||x_t - x_{t-1}||, |lambda_t - lambda_{t-1}|, min lambda


def theorem3_thresholds(xp: Any, info: Mapping[str, Any], clips: tuple[float, float],
                        mv: Moves) -> tuple[Any, Any, Any, Any]:
    """(C2, C4, scale_v, scale_u): the fixed clips, and the element bounds the printed
    noises are Theorem 5's noise for: kappa takes min{sigma_2, sigma^_4}, zeta
    min{sigma_4, sigma^_2} (lines 11-12), i.e. min{L ||dx||, 2G} and min{L |dlambda|, 2G}.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> mv = (np.array([0.1, 1.0]), np.array([0.2, 0.0]), np.ones(2))
    >>> thr = theorem3_thresholds(xp, {"lipschitz": 0.25, "smoothness": 2.0}, (1.0, 0.5), mv)
    >>> [a.tolist() for a in thr]
    [[1.0, 1.0], [0.5, 0.5], [0.2, 0.5], [0.4, 0.0]]
    """
    G, L = float(info["lipschitz"]), float(info["smoothness"])
    dx, dl, _ = mv
    return (xp.zeros_like(dx) + clips[0], xp.zeros_like(dx) + clips[1],
            xp.minimum(L * dx, xp.zeros_like(dx) + 2.0 * G),
            xp.minimum(L * dl, xp.zeros_like(dl) + 2.0 * G))


def g_smoothness_thresholds(xp: Any, info: Mapping[str, Any], clips: tuple[float, float],
                            mv: Moves) -> tuple[Any, Any, Any, Any]:
    """min(C2, L_g ||Delta w||) and min(C4, ...) with g's smoothness over the segment
    (:func:`_g_smoothness_log`; notes 4, A3-L13 fix): each the clip and the noise scale.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> info = {"lipschitz": 1.0, "smoothness": 1.0, "loss_bound": 1.0}
    >>> mv = (np.array([1e-3, 1.0]), np.zeros(2), np.ones(2))
    >>> thr_v, _, scale_v, _ = g_smoothness_thresholds(xp, info, (1.0, 1.0), mv)
    >>> [round(v, 6) for v in thr_v.tolist()], bool(np.all(scale_v == thr_v))  # 2e * dx
    ([0.005437, 1.0], True)
    """
    dx, dl, lam_min = mv
    lv, lu = _g_smoothness_log(xp, info, lam_min, dx, dl)
    thr_v = xp.exp(xp.minimum(lv, math.log(clips[0])))
    thr_u = xp.exp(xp.minimum(lu, math.log(clips[1])))
    return thr_v, thr_u, thr_v, thr_u


def _printed_tracker(cur: Curator, setting: Setting, Wt: Any, beta_t: float, batch: Batch,
                    st: Streams) -> Any:
    """Line 16: beta_t Clip(g(w_t; xi0), C5) + N(0, sigma_st^2)."""
    return release(cur, "s_tracker", _s_query(cur, setting, Wt, st.C5, beta_t, 0.0,
                                              float(st.bs)),
                   sensitivity=st.sens_s, noise=st.noise_s, batch=batch)


def _centred_tracker(cur: Curator, setting: Setting, Wt: Any, beta_t: float, batch: Batch,
                    st: Streams) -> Any:
    """beta_t times the noisy batch mean of Clip(g, C5), released centred at (1 + C5)/2."""
    sample = release(cur, "s_tracker", _s_query(cur, setting, Wt, st.C5, 1.0, st.centre,
                                                float(st.bs)),
                     sensitivity=st.sens_s, noise=st.noise_s, batch=batch) + st.centre
    return beta_t * sample


@dataclass(frozen=True)
class NoiseRule:
    """What the variants of Algorithm 3 differ in: everything else is the printed loop.

    ``noise(p, constants, (n, T, q, b2, s_batch))``: the five streams' :class:`Streams`;
    ``thresholds(xp, constants, (C2, C4), moves)``: the increments' clips and noise scales;
    ``tracker(cur, setting, w_t, beta_t, batch, streams)``: line 16's release of g(w_t);
    ``poisson``: batches are Poisson (else uniform without replacement).
    """

    name: str
    noise: Callable[[Mapping[str, Any], Mapping[str, Any], Sizes], Streams]
    thresholds: Callable[[Any, Mapping[str, Any], tuple[float, float], Moves],
                         tuple[Any, Any, Any, Any]]
    tracker: Callable[[Curator, Setting, Any, float, Batch, Streams], Any]
    poisson: bool


# Algorithm 3 as printed (lines 226-247, Theorems 3 and 8).
PAPER_RULE = NoiseRule("paper", theorem8_noise, theorem3_thresholds, _printed_tracker,
                       poisson=False)
# Notes 4 (A3-L7..L16 fixes) and 3.4: clips at the noise's thresholds, one accountant.
SOUND_RULE = NoiseRule("sound", calibrated_noise, g_smoothness_thresholds, _centred_tracker,
                       poisson=True)


def recursive_spider(rule: NoiseRule):
    """Algorithm 3 under ``rule`` as a ``run(cur, setting, params)`` function (module
    docstring).

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> from dpverify.execution.trials import build_problem
    >>> t = resolve("dp_recursive_spider:paper")
    >>> p = t.algorithm.params("paper", {"T": 4, "q": 2})
    >>> cur = Curator(build_problem(t, p, 0).data, trials=2, rng=0)
    >>> s = build_problem(t, p, 0).setting()
    >>> recursive_spider(PAPER_RULE)(cur, s, p).shape, len(cur.ledger)
    ((2, 6), 12)
    """

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        xp, b = cur.xp, cur.backend
        n, d = cur.n, cur.d
        info = setting.constants
        T, q, b2 = theorem8_schedule(p, setting, n, d)
        rho, lam0 = float(p["rho"]), float(p["lam0"])
        lr, beta = float(p["lr"]), float(p["beta"])
        C1, C3, C5 = float(p["clip_v"]), float(p["clip_u"]), float(p["clip_s"])
        C2 = C1 if p.get("clip_dv") is None else float(p["clip_dv"])
        C4 = C3 if p.get("clip_du") is None else float(p["clip_du"])
        bs = b2 if p.get("s_batch") is None else int(p["s_batch"])
        st = rule.noise(p, info, (n, T, q, b2, bs))
        x = b.asarray(np.zeros((cur.trials, d)))
        lam = b.asarray(np.full(cur.trials, max(float(p["lam_init"]), lam0)))
        Wt = xp.concat([x, lam[:, None]], axis=1)
        out = RandomIterate(cur, T, Wt, str(p["output"]))
        W_prev = v = u = s = None
        for t in range(T):
            cur.step(t)
            if t % q == 0:  # lines 5-8
                v = release(cur, "v_refresh", _v_query(cur, setting, Wt, C1, float(n)),
                            sensitivity=st.sens_v, noise=st.noise_v)
                u = release(cur, "u_refresh", _u_query(cur, setting, Wt, C3, float(n)),
                            sensitivity=st.sens_u, noise=st.noise_u)
            else:  # lines 10-14
                x_t, lam_t = _split(xp, Wt)
                x_p, lam_p = _split(xp, W_prev)
                dx = xp.linalg.vector_norm(x_t - x_p, axis=1)
                dl = xp.abs(lam_t - lam_p)
                thr_v, thr_u, scale_v, scale_u = rule.thresholds(
                    xp, info, (C2, C4), (dx, dl, xp.minimum(lam_t, lam_p)))
                thr_v, thr_u = xp.clip(thr_v, min=TINY), xp.clip(thr_u, min=TINY)
                batch = sampled_batch(cur, b2, sound=rule.poisson)
                v = v + release(cur, "v_increment",
                                _v_diff_query(cur, setting, Wt, W_prev, thr_v, float(b2)),
                                sensitivity=2.0 / b2, noise=st.noise_dv, batch=batch,
                                scale=scale_v)
                batch = sampled_batch(cur, b2, sound=rule.poisson)  # b4 = b2
                u = u + release(cur, "u_increment",
                                _u_diff_query(cur, setting, Wt, W_prev, thr_u, float(b2)),
                                sensitivity=2.0 / b2, noise=st.noise_du, batch=batch,
                                scale=scale_u)
            beta_t = 1.0 if t == 0 else beta
            batch = sampled_batch(cur, bs, sound=rule.poisson)
            fresh = rule.tracker(cur, setting, Wt, beta_t, batch, st)  # line 16
            s = fresh if t == 0 else fresh + (1.0 - beta_t) * s
            s = xp.clip(s, min=1.0, max=C5)
            x_t, lam_t = _split(xp, Wt)
            ratio = (lam_t / s)[:, None]  # grad f(s_t) = lambda_t / s_t (line 18)
            zx = ratio * v
            zl = (lam_t / s) * u + xp.log(s) + rho
            W_prev = Wt
            Wt = xp.concat([x_t - lr * zx, xp.clip(lam_t - lr * zl, min=lam0)[:, None]],
                           axis=1)  # line 17
            out.offer(t + 1, Wt)
        return out.value

    return run
