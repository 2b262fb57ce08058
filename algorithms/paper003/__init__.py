"""Paper 003: DP second-order stationary points in stochastic minimax optimisation.

Xu, Tao, Ding, Fan, Wang, "Finding Differentially Private Second Order Stationary Points
in Stochastic Minimax Optimization". Registered algorithms (entry point
``dpverify.algorithms``: ``paper003``):

* ``dp_rgda``: DP RGDA, Algorithm 2 (outer loop, perturb-and-monitor escape) with
  Algorithm 3 (inner updater, SPIDER estimators for x and y, projection onto Y);
  ``paper`` (Theorem 2 / Lemma 8 as printed), ``paper_erm`` (Theorem 1 / Algorithm 3's
  noise lines with Lemma 5), ``paper_population`` (Theorem 2's single pass as printed), and
  their corrections ``sound_population`` (single pass) and ``sound``;
* ``dp_sgda``: the DP-SGDA baseline of Section 3 / Figure 1.

Every claim is (epsilon, delta)-DP under replace-one neighbours (Definition 1, line 51).
Test problems: :mod:`algorithms.paper003.problems`; second-order metrics of Phi:
:mod:`dpverify.rates.sosp`. Line numbers refer to ``003_74f15e792d6d2225.txt``.
"""

from __future__ import annotations

import math

from algorithms.paper003.common import PAPER, TABLE1_SGDA, THEOREM1, THEOREM2, claim
from algorithms.paper003.problems import PROBLEM_DEFAULTS, empirical_F0, make_minimax_problem
from algorithms.paper003.rgda import dp_rgda
from algorithms.paper003.sgda import dp_sgda
from dpverify.claims import Finding
from dpverify.rates import register_metric
from dpverify.rates.sosp import METRICS as SOSP_METRICS
from dpverify.registry import Algorithm, Variant

__all__ = ["ALGORITHMS", "DP_RGDA", "DP_SGDA"]

# The utility claims below name these quantities (sosp_alpha for Theorems 1-2, grad_norm_phi
# for Table 1): registering them here means that discovering the algorithms is enough for
# a rate check to measure them.
for _name, _fn in SOSP_METRICS.items():
    register_metric(_name)(_fn)

# Findings -------------------------------------------------------------------------------

ZERO_NOISE_K0 = Finding(
    "Algorithm 3 sets x_{t,-1} = x_{t-1} and y_{t,0} = y_{t,-1} = y_t (line 201), so the "
    "k = 0 increment (lines 212-213) differences gradients across the x-step. Eq. 31 "
    "(line 632) bounds its sensitivity by 2 sqrt(2) L ||y_k - y_{k-1}||/S2 = 0 and line 636 "
    "scales its noise by the same norm: the query is released WITHOUT noise while one record "
    "moves it by up to 2 L ||x_t - x_{t-1}||/S2 (every increment when K = 1, line 243). The "
    "ledger declares sensitivity 0, which the accountant reads as free: the account check "
    "cannot see it, the sensitivity check (replay on neighbours) does",
    source=PAPER, detected_by=("sensitivity", "audit"),
)

CLIPPED_MEAN = Finding(
    "Algorithm 3 clips the minibatch MEAN (Algorithm 1 applied at lines 205-206 and "
    "212-213), not each sample: one record breaking A1/A2 (line 102, line 110) moves the "
    "refresh by up to 2 C_v and an increment by up to 2 C_u, while the noise is scaled to "
    "2M/S1 (eq. 30, line 631) and 2 sqrt(2) L ||dy||/S2 (eq. 31, line 632). Appendix D "
    "(line 889) clips per sample",
    source=PAPER, detected_by=("sensitivity", "audit"),
)

DEF3_SQRT2 = Finding(
    "Definition 3 (line 63) gives the Gaussian mechanism sigma = Delta sqrt(log(1.25/delta))"
    "/epsilon, a factor sqrt(2) below the classical Delta sqrt(2 log(1.25/delta))/epsilon: "
    "at (1, 1e-5) the true delta is 3.7e-5 (analytic Gaussian). Every noise of the paper is "
    "built on it (line 636, Appendix D line 889)",
    source=PAPER, detected_by=("account",),
)

UNCOUNTED_WARM_START = Finding(
    "Lemma 8 (line 625) requires a warm start ||G_lambda(x0, y0)|| <= eps_bar^(1/2)/kappa, "
    "a 'PiSARAH initialisation' (line 774) computed from the data, whose privacy cost no "
    "proof charges; here it is exact gradient ascent on y at x0 through cur.exact, so the "
    "accountant reports epsilon = inf",
    source=PAPER, detected_by=("account",),
)

NO_COMPOSITION = Finding(
    "Lemma 8's privacy proof (line 636) makes each of the v and u queries (eps/2, delta)-DP "
    "and concludes (eps, delta) 'by the composition theorem': the T/q refreshes and T K "
    "increments are never composed, two (eps/2, delta) releases give (eps, 2 delta), and the "
    "increment noise 2 C2 L sqrt(log(1.25/delta))/(n eps) ||dy|| relies on amplification "
    "linear in q_t = S2/n, which holds only for small per-query epsilon. C1, C2 'O(1), to be "
    "decided later' (line 625) are never decided; even C1 = 4, C2 = 2 sqrt(2), which make "
    "the per-query statement hold by Definition 3, leave the run far above eps",
    source=PAPER, detected_by=("account",),
)

ALG3_NOISE = Finding(
    "Algorithm 3's noise (lines 199-200) has no factor 2 for replace-one sensitivity, "
    "log(1/delta) for log(1.25/delta), and sqrt(T) where there are T K increments; the "
    "'universal constant c' it mentions does not appear in the formula (the literal C_v, "
    "C_u are the clip thresholds). With C_v = M the T/q refreshes alone, at eq. 30's "
    "sensitivity 2M/S1, cost more than eps",
    source=PAPER, detected_by=("account",),
)

LEMMA5_SENSITIVITY = Finding(
    "Lemma 5's privacy proof (line 506) bounds each gradient variation by "
    "L ||w_t - w_{t-1}|| = L ||y_t - y_{t-1}||, dropping the x-move; with K = 1 (line 243) "
    "y_{t,0} = y_{t,-1} makes that 0 at every increment, so every increment is declared "
    "free while one record moves it by up to 2 L ||x_t - x_{t-1}||/S2",
    source=PAPER, detected_by=("sensitivity",),
)

FROZEN_Y = Finding(
    "Line 216 selects s_t = argmin over the K computed points y_{t,0..K-1}; with K = 1, "
    "the setting of the ERM proofs (line 243, line 426), s_t = 0 and y_{t+1} = y_t: y never "
    "leaves y0, and v tracks grad_x f(x, y0), not grad Phi. The proof of eq. 41 (line 739) "
    "averages over k = 1..K",
    source=PAPER, detected_by=("rate",),
)

REFRESH_DOUBLE_COUNT = Finding(
    "At a refresh (lines 4-8) v_{t,-1} is already fresh at (x_t, y_t), yet the k = 0 "
    "increment still adds grad F(x_t, y_t) - grad F(x_{t-1}, y_t) (line 201): the x-move is "
    "counted twice (notes A3-2)",
    source=PAPER, detected_by=("rate",),
)

SGDA_COMPOSITION = Finding(
    "Appendix D (line 889) allots per-query noise 'using advanced composition in the code' "
    "without the split; we take delta' = delta/2, delta0 = delta/(2T) and Definition 3's "
    "sigma (line 63, missing sqrt(2)). Advanced composition ignores the amplification of "
    "minibatches, so the result is conservative despite the constant",
    source=PAPER, detected_by=("account",),
)

PRIVATE_SCHEDULE = Finding(
    "F0, which sets the escape schedule (chi and the perturbation radius of Algorithm 2, and "
    "with schedule = 'auto' T, q and S2 of Theorem 1, line 513), is computed as Phi_S(x0) - "
    "min Phi from the private records, outside any release: the perturbation radius moves "
    "with the data (0.02565 on one draw, 0.02565 - 3e-6 on a neighbour), and the public "
    "setting built from D and from D' differs in F0",
    source="dpverify", detected_by=("setting", "sensitivity"),
)

SINGLE_PASS_AMPLIFICATION = Finding(
    "Lemma 8 (line 636) sets the increment noise to 2 C2 L sqrt(log(1.25/delta))/(n eps) "
    "||dy|| by amplification at the sampling rate q_t = S2/n, while its sample budget (line "
    "762, (T/q) S1 + T K S2 <= n) reads every batch once from fresh samples: a record of a "
    "disjoint batch is in it with probability 1, not S2/n, so each increment is a plain "
    "Gaussian with noise multiplier C2 (S2/n) sqrt(log(1.25/delta))/(sqrt(2) eps), far below "
    "what (eps, delta) needs (notes P-5)",
    source=PAPER, detected_by=("account", "audit"),
)

# Algorithms -----------------------------------------------------------------------------

#: The population setting as the variants run it by default: one pass over n = 2000
#: records that the schedule below fits (4 refreshes of 100 and 56 increments of 20 for the
#: sound variant, 2 warm-start releases of 100: 1720 records).
POPULATION = {"phi": "population", "sampling": "single_pass", "n": 2000, "schedule": "given",
              "T": 20, "q": 5, "K": 2, "S1": 100, "S2": 20, "warm_start": 2}

RGDA_DEFAULTS = {
    **PROBLEM_DEFAULTS,
    "epsilon": 1.0, "delta": 1e-5, "relation": "replace_one",
    # "given": the values below; "theorem1" / "population": Theorem 1's / 2's settings
    # (capped at T_max); "auto": by phi
    "schedule": "given", "T_max": 2000, "c_alpha": 1.0,
    "T": 30, "q": 5, "K": 2, "S1": None, "S2": 40,
    # Algorithm 2 (None: escape_schedule's defaults for the variant)
    "alpha": 0.3, "entry": None, "eta": None, "eta_H": None, "r": None, "t_thres": None,
    "D_bar": None, "delta1": 0.1, "delta2": 0.1,
    # Algorithm 3: inner step (None: 1/(2L) sound, 1/(6L) paper, Lemma 8), clipping
    # (None: the problem's M; Lclip None: its L), warm-start steps
    "lam": None, "clip": None, "Lclip": None, "warm_start": 0,
    # "pool": full or Poisson batches of the n records (ERM); "single_pass": fresh disjoint
    # blocks, each record read once (Theorem 2's sample budget, line 762)
    "sampling": "pool",
    # printed noise: "proof" (Lemma 8, line 636) or "alg3" (lines 199-200)
    "noise": "proof", "c1": 4.0, "c2": 2.0 * math.sqrt(2.0), "c_noise": 1.0, "C_u": None,
    # outputs: x_out, or [x_out, certified] with certificate = True (dpverify.certificates);
    # exact_gradients: noise-free queries (cur.exact, epsilon = inf), sound variants only,
    # for the escape demonstration (notes C-U4)
    "certificate": False, "exact_gradients": False,
}

DP_RGDA = Algorithm(
    name="dp_rgda",
    source="paper 003, Algorithms 2-3",
    description="DP RGDA: SPIDER gradient descent ascent with a perturb-and-monitor escape",
    make_problem=make_minimax_problem,
    defaults=RGDA_DEFAULTS,
    variants={
        "sound": Variant(
            "sound", "sound", dp_rgda(sound=True, style="sound"), claim,
            "ERM (Theorem 1's setting, full-batch refresh): per-sample clipping of gradients "
            "at clip and of differences at Lclip ||dw||, one joint (v, u) release, no k = 0 "
            "increment after a refresh, s_t over 1..K, one noise multiplier calibrated by PLD "
            "on every release of the run",
            utility=THEOREM1,
        ),
        "sound_population": Variant(
            "sound_population", "sound", dp_rgda(sound=True, style="sound"), claim,
            "Theorem 2's setting: one pass over fresh disjoint batches (line 762, (T/q) S1 + "
            "T K S2 <= n), a private warm start of y0 from fresh records too; each record "
            "meets one release, so per-record parallel composition makes the noise that of a "
            "single Gaussian at (epsilon, delta)",
            utility=THEOREM2,
            params=POPULATION,
        ),
        "paper": Variant(
            "paper", "paper", dp_rgda(sound=False, style="paper"), claim,
            "As printed for Theorem 2: Lemma 8's noise and eqs. 30-31's sensitivities (zero "
            "noise at k = 0), clip of the batch mean, separate v and u releases, argmin over "
            "0..K-1, exact warm start (Lemma 8), S1 = n, lambda = 1/(6L)",
            utility=THEOREM2,
            findings=(ZERO_NOISE_K0, CLIPPED_MEAN, DEF3_SQRT2, UNCOUNTED_WARM_START,
                      NO_COMPOSITION, REFRESH_DOUBLE_COUNT),
            params={"phi": "population", "warm_start": 3},
        ),
        "paper_population": Variant(
            "paper_population", "paper", dp_rgda(sound=False, style="paper"), claim,
            "Theorem 2 as printed, on the single pass its sample budget prescribes (line 762): "
            "Lemma 8's noise (line 636) and eqs. 30-31's sensitivities on fresh disjoint "
            "batches, where the linear amplification q_t = S2/n that sets the increment noise "
            "does not exist; warm start off (the exact one is the paper variant's finding)",
            utility=THEOREM2,
            findings=(SINGLE_PASS_AMPLIFICATION, ZERO_NOISE_K0, CLIPPED_MEAN,
                      REFRESH_DOUBLE_COUNT),
            params={**POPULATION, "warm_start": 0},
        ),
        "planted_private_schedule": Variant(
            "planted_private_schedule", "planted", dp_rgda(sound=True, style="sound"), claim,
            "The sound variant, but its schedule's F0 is the data's Phi_S(x0) - min Phi instead "
            "of the declared bound",
            utility=THEOREM1, findings=(PRIVATE_SCHEDULE,), derive_setting=empirical_F0,
        ),
        "paper_erm": Variant(
            "paper_erm", "paper", dp_rgda(sound=False, style="paper_erm"), claim,
            "As printed for Theorem 1: Algorithm 3's noise (lines 199-200, C_v = M), Lemma 5's "
            "sensitivities (line 506), clip of the batch mean, K = 1, S1 = n, eta = 1/(2L)",
            utility=THEOREM1,
            findings=(ALG3_NOISE, LEMMA5_SENSITIVITY, CLIPPED_MEAN, FROZEN_Y,
                      REFRESH_DOUBLE_COUNT),
            params={"noise": "alg3", "K": 1},
        ),
    },
    quick={},
    thorough={"n": 2000, "schedule": "auto", "T_max": 3000},
)

SGDA_DEFAULTS = {
    **PROBLEM_DEFAULTS,
    "epsilon": 1.0, "delta": 1e-5, "relation": "replace_one",
    "T": 60, "B": 40, "clip": 2.0, "eta_x": 0.1, "eta_y": 0.5,
}

DP_SGDA = Algorithm(
    name="dp_sgda",
    source="paper 003, Section 3 and Figure 1 (DP-SGDA baseline, Yang et al. 2022)",
    description="Single-loop DP stochastic gradient descent ascent with projection onto Y",
    make_problem=make_minimax_problem,
    defaults=SGDA_DEFAULTS,
    variants={
        "sound": Variant(
            "sound", "sound", dp_sgda(sound=True), claim,
            "Poisson batches of expected size B, per-sample joint clipping, noise multiplier "
            "calibrated by PLD for the T sampled releases",
            utility=TABLE1_SGDA,
        ),
        "paper": Variant(
            "paper", "paper", dp_sgda(sound=False), claim,
            "Appendix D: fixed-size batches, sensitivity 2C/B, Definition 3's sigma at the "
            "per-query budget of advanced composition over T queries",
            utility=TABLE1_SGDA, findings=(DEF3_SQRT2, SGDA_COMPOSITION),
        ),
    },
    quick={},
    thorough={"n": 2000, "T": 400, "B": 100},
)

ALGORITHMS = [DP_RGDA, DP_SGDA]
