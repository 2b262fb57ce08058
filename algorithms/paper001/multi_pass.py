"""Multi-pass ERM oracle of paper 001: Algorithm 4 (Theorem 4.1) inside Algorithm 2.

Every step reads the whole dataset. A period of Sigma steps starts with the full-batch
zero-order estimate at z_t plus N(0, sigma1^2 I_d) (lines 3-8); each later step adds the
full-batch increment est(z_t) - est(z_{t-1}) to the previous NOISY output plus fresh
N(0, sigma2^2 I_d) (lines 10-16), so the noise accumulates within a period (unlike the
single-pass oracles, whose tree adds correlated noise to a noiseless sum). Privacy is the
composition of T Gaussian releases that all touch every record (Lemma 4.3, line 332).

``paper``: the printed sigma1, sigma2 (line 321) with every O constant set to
``noise_constant`` (1 by default), the printed m (a variance choice), and the sensitivities
of Lemma 3.4 with B1 = B2 = n (line 328), constants 1. ``sound``: per-record estimates and
differences projected onto balls, so the replace-one sensitivities 2 R1 / n and 2 R2 / n
hold surely, and sigma1, sigma2 calibrated by the accountant for the T releases.

Reduced setting: the quick scale takes n = 100 and beta = 1.2, so T = Phi L^2 /
(alpha^2 beta^3) = 174 full passes; the balanced beta of Theorem 4.1 (``beta = None``, what
its rate is about) needs T of order 1e5 at n = 100, and the thorough scale's beta = 0.8 at
n = 1000 still 586 passes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from algorithms.paper001 import battery as bt
from algorithms.paper001 import settings as st
from algorithms.paper001.estimators import EstimatorSpec, draw_directions, record_query
from algorithms.paper001.o2nc import o2nc
from algorithms.paper001.problems import make_problem
from algorithms.paper001.single_pass import _PERIOD_START, O2NC_RANGES
from dpverify.core.claims import Finding, UtilityClaim
from dpverify.core.curator import Curator
from dpverify.core.ranges import POSITIVE, Range, one_of
from dpverify.core.registry import Algorithm, RunFn, Setting, Variant


class MultiPassOracle:
    """Algorithm 4 with its state across calls (the previous output and point)."""

    def __init__(self, cur: Curator, loss: Any, sched: st.MultiPassSchedule, *,
                 alpha: float, sigma1: float, sigma2: float, delta1: float, delta2: float,
                 R1: float | None, R2: float | None) -> None:
        self.cur, self.sched = cur, sched
        self.sigma1, self.sigma2 = float(sigma1), float(sigma2)
        self.delta1, self.delta2 = float(delta1), float(delta2)
        guard = R1 is not None
        self.first = EstimatorSpec(loss, alpha, True, R1, guard)
        self.diff = EstimatorSpec(loss, alpha, True, R2, guard)
        self.g_prev: Any = None
        self.z_prev: Any = None

    def __call__(self, z: Any, t: int) -> Any:
        cur, s = self.cur, self.sched
        if (t - 1) % s.Sigma == 0:
            q = record_query(cur, self.first, None, z,
                             draw_directions(cur, s.m, kind="sphere"), divisor=cur.n)
            g = cur.gaussian("erm_full", q, sensitivity=self.delta1, noise_std=self.sigma1)
        else:
            # directions on the sphere where line 307 prints B_alpha (zero-order formula)
            q = record_query(cur, self.diff, None, z,
                             draw_directions(cur, 2 * s.m, kind="sphere"), divisor=cur.n,
                             z_old=self.z_prev)
            g = self.g_prev + cur.gaussian("erm_diff", q, sensitivity=self.delta2,
                                           noise_std=self.sigma2)  # line 15: NOISY g_{t-1}
        self.g_prev, self.z_prev = g, z
        return g


def multi_pass_setup(p: Mapping[str, Any], setting: Setting, n: int,
                     d: int, *, sound: bool) -> dict[str, Any]:
    """Schedule, noise, sensitivities, radii and step size of one Algorithm 4 variant.

    Examples
    --------
    >>> import numpy as np
    >>> params = O2NC_ERM.params("paper")
    >>> prob = make_problem(params, np.random.default_rng(0))
    >>> s = multi_pass_setup(params, prob.setting(), params["n"], params["d"], sound=False)
    >>> s["sched"].T, s["sched"].Sigma, s["sched"].M, s["sched"].m
    (174, 4, 1, 5)
    """
    L, Phi = float(setting["lipschitz"]), float(setting["phi"])
    alpha, eps, delta = float(p["alpha"]), float(p["epsilon"]), float(p["delta"])
    sched = st.multi_pass_schedule(p, L, Phi, n, d)
    if sound:
        R1, R2 = st.sound_radii(L, sched.D, alpha, d, sched.m,
                                float(p["gamma"]) / max(1, sched.T), first_order=False)
        d1, d2, sigma1, sigma2 = st.sound_multi_pass_noise(R1, R2, sched, n, eps, delta)
    else:
        R1 = R2 = None
        d1, d2 = st.paper_multi_pass_sensitivities(L, sched, alpha, d, n)
        sigma1, sigma2 = sched.sigma1, sched.sigma2
    g1 = st.multi_pass_g1(L, sched, sigma1, sigma2, d, n)
    eta = float(p["eta"]) if p.get("eta") is not None else sched.D / (g1 * math.sqrt(sched.M))
    return {"sched": sched, "sigma1": sigma1, "sigma2": sigma2, "delta1": d1, "delta2": d2,
            "R1": R1, "R2": R2, "eta": eta, "G1": g1}


def _run(*, sound: bool) -> RunFn:
    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        s = multi_pass_setup(p, setting, cur.n, cur.d, sound=sound)
        sched = s["sched"]
        oracle = MultiPassOracle(cur, setting.loss, sched, alpha=float(p["alpha"]),
                                 sigma1=s["sigma1"], sigma2=s["sigma2"], delta1=s["delta1"],
                                 delta2=s["delta2"], R1=s["R1"], R2=s["R2"])
        return o2nc(cur, oracle, x0=setting["x0"], D=sched.D, eta=s["eta"], M=sched.M,
                    T=sched.T)

    return run


ERM_UTILITY = UtilityClaim(
    quantity="goldstein",
    # beta balanced against n (line 536): Phi^(1/3) L^(2/3) d^(1/2) / ((n eps)^(2/3) alpha^(1/3))
    exponents={"n": -2.0 / 3.0, "d": 0.5, "epsilon": -2.0 / 3.0},
    log_factors=("log(1/delta)",),
    sided="upper",
    # Evaluated at every grid point of a rate check (prose here made every rate check of
    # this claim fail to parse). beta = None or "balanced": the balanced beta of Theorem 4.1
    # re-derived for every n, which the exponents are about. The quantity is (2 alpha,
    # beta)-stationarity of the empirical F^D; alpha <= Phi / L holds for every problem of
    # algorithms.paper001.problems at its defaults.
    regime=("not beta or beta == 'balanced'",),
    source="paper 001, Theorem 4.1",
)

ERM_FINDINGS = (
    Finding(
        "Lemma 4.3 (line 332) gives sigma1 = O(L sqrt(T log(1/delta) / Sigma) / (n eps)) and "
        "sigma2 = O(L D sqrt(T d log(1/delta)) / (alpha n eps)) without constants. With the "
        "constant 1 and the sensitivities the proof uses (L/n, L sqrt(d) D / (alpha n)), the "
        "T Gaussian releases compose to mu = eps sqrt((1 + (T - T/Sigma)/T) / log(1/delta)) "
        "(about 0.42 at eps = 1, delta = 1e-5): more than the claimed epsilon, so the O must "
        "hide a constant of about 1.6 or more (parameter noise_constant).",
        source="paper 001, Lemma 4.3 (line 332), Theorem 4.1 (line 321)",
        # the white-box audit isolates it at d = 1 (suffix constant): see the battery
        detected_by=("account", "audit.whitebox"),
    ),
    Finding(
        "Theorem 4.1's m = L^2 d Sigma / (n sigma1^2) + L^2 d / (n sigma2^2) (line 321) is a "
        "variance choice and does not grow with d^2: Lemma 3.4's high-probability "
        "sensitivity needs m of order d^2 log(.) for a full step (about 3.9e6 vs 5.8e3 at "
        "n = 1e4, d = 10, beta = 0.3); and a record enters all T steps while line 328 "
        "applies Lemma 3.4 once, with no union bound over t.",
        source="paper 001, Theorem 4.1 (line 321), line 328",
        detected_by=("sensitivity", "audit"),
    ),
    _PERIOD_START,
    Finding(
        "Line 307 (Alg. 4 line 11) draws the difference-step directions from B_alpha for "
        "the zero-order formula, which needs the sphere; implemented with the sphere.",
        source="paper 001, Algorithm 4 line 11 (line 307)",
    ),
    Finding(
        "Theorem 4.1 sets D = alpha^2 beta^2 / L^2 (line 321), a squared length; "
        "D = alpha beta^2 / L^2 with T = Phi L^2 / (alpha beta^3) is dimensionally consistent "
        "and keeps D T = Phi / beta (d_rule = 'consistent').",
        source="paper 001, Theorem 4.1 (line 321)",
        detected_by=("rate",),
    ),
    Finding(
        "Remark 4.2 / Prop. 5.1 (lines 326, 349) transfer Goldstein stationarity from F^D to "
        "F through a gradient uniform-convergence bound for smooth losses (line 544, Mei et "
        "al. 2018); for nonsmooth Lipschitz losses it can fail (notes 001, F8).",
        source="paper 001, Proposition 5.1 (lines 349, 544-556)",
        detected_by=("rate",),
    ),
)

O2NC_ERM = Algorithm(
    name="o2nc_erm",
    source=f"{st.SOURCE}, Algorithms 2 and 4, Theorem 4.1",
    description="Multi-pass zero-order O2NC for ERM: full-batch variance-reduced estimates "
                "with Gaussian noise",
    make_problem=make_problem,
    defaults={
        "problem": "relu", "n": 200, "d": 3, "label_noise": 0.05, "n_population": 1000,
        "x0_norm": 1.0,
        "alpha": 0.1, "epsilon": 1.0, "delta": 1e-5, "beta": None, "d_rule": "paper",
        "noise_constant": 1.0, "T": None, "D": None, "Sigma": None, "M": None, "m": None,
        "m_max": None, "eta": None, "gamma": 0.01, "stationarity_of": "empirical",
        "goldstein_radius": None,
    },
    ranges={**{k: v for k, v in O2NC_RANGES.items() if k not in ("B1", "B2")},
            "beta": Range(0, low_open=True, words=("balanced",)), "noise_constant": POSITIVE,
            "d_rule": one_of(*st.D_RULES)},
    variants={
        "paper": Variant(
            "paper", "paper", _run(sound=False), st.claim,
            "As printed: sigma1, sigma2 and m of Theorem 4.1 (O constants = noise_constant, "
            "1), sensitivities of Lemma 3.4 with B = n, no projection",
            utility=ERM_UTILITY, findings=ERM_FINDINGS, battery=bt.MULTI_PASS_PAPER,
        ),
        "sound": Variant(
            "sound", "sound", _run(sound=True), st.claim,
            "Per-record estimates and differences projected onto balls; sigma1, sigma2 "
            "calibrated by PLD for the T full-batch releases, the budget split equally",
            utility=ERM_UTILITY, battery=bt.MULTI_PASS_SOUND,
        ),
    },
    quick={"n": 100, "beta": 1.2},
    thorough={"n": 1000, "d": 5, "beta": 0.8, "m_max": 256, "n_population": 20000},
    battery=bt.MULTI_PASS,
)

__all__ = ["O2NC_ERM", "MultiPassOracle", "multi_pass_setup"]
