"""Paper 004: DP non-convex optimisation under the KL condition, rho-zCDP.

Menart, Ullah, Arora, Bassily, Guzman, "Differentially Private Non-Convex Optimization
under the KL Condition with Optimal Rates". Four algorithms, each as ``paper`` (as printed)
and ``sound`` (corrected):

* ``kl_spider`` (Algorithm 1, Theorem 1): kappa in [1, 2], knows (gamma, kappa);
* ``prox_point_004`` (Algorithm 2 with Algorithm 4 inside, Theorem 2): kappa >= 2;
* ``adaptive_noisy_gd`` (Algorithm 3, Theorems 3-4): adapts to unknown (gamma, kappa),
  noise picked from a released noisy gradient norm, run under a privacy filter;
* ``adaptive_noisy_gd_select`` (Theorem 5): Algorithm 3, then an iterate chosen by the
  exponential mechanism on gradient norms, claimed 2 rho-zCDP;
* ``noisy_gd_004`` (Algorithm 4, Theorem 9): strongly convex subroutine of Algorithm 2.

Every claim is rho-zCDP under replace-one neighbours, the paper's Definition 2 (line 64)
(2 rho for Theorem 5). Every query is an unsampled full-batch Gaussian release or an
exponential selection, so the ledger's zCDP
(:func:`dpverify.accounting.accountant.zcdp_of_ledger`) accounts each run exactly.

Line numbers refer to the paper's text file ``004_1cb6b915a0a92f82.txt``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from algorithms.kl_problems import check_kl_params, make_kl_problem, smooth_kl_params
from algorithms.paper004.adaptive import adaptive_noisy_gd, adaptive_noisy_gd_select
from algorithms.paper004.battery import (
    BLACKBOX_BLIND,
    OPPOSED_D1,
    OPPOSED_D2,
    STATIONARY,
    STATIONARY_AUDIT,
    agree,
    blackbox,
    sensitivity,
    whitebox,
)
from algorithms.paper004.common import (
    PAPER,
    PROBLEM_DEFAULTS,
    PROBLEM_RANGES,
    rate_claim,
    zcdp_claim,
)
from algorithms.paper004.prox import make_regularized_problem, noisy_gd, prox_point
from algorithms.paper004.spider import kl_spider
from dpverify.core.claims import Finding, PrivacyClaim, UtilityClaim
from dpverify.core.ranges import COUNT, POSITIVE
from dpverify.core.registry import Algorithm, Battery, CheckConfig, Variant

__all__ = ["ALGORITHMS", "KL_SPIDER", "PROX_POINT", "ADAPTIVE_NOISY_GD", "ADAPTIVE_NOISY_GD_SELECT",
           "NOISY_GD_004", "REGISTER"]


# The factor-2 error every privacy proof of the paper shares but Appendix E.
def _replace_one_finding(where: str, true_cost: str, detected: tuple[str, ...]) -> Finding:
    return Finding(
        f"{where} declares the sensitivity a query has under add/remove-one neighbours; the "
        "paper's relation is replace-one (Definition 2, line 64), where a mean of "
        f"L0-bounded vectors moves by 2 L0/n, so the printed noise costs {true_cost}",
        source=PAPER,
        detected_by=detected,
    )


# Every printed algorithm clips nothing: its privacy rests on f being L0-Lipschitz (and,
# for Algorithm 1, L1-smooth) wherever a record may lie.
def _unclipped_finding(where: str, detected: tuple[str, ...]) -> Finding:
    return Finding(
        f"{where}; the printed algorithm clips nothing, so on a loss that is Lipschitz "
        "only near the data a record far from the others moves the mean gradient (and a "
        "difference of gradients) far beyond the declared sensitivity",
        source=PAPER, detected_by=detected)


# The unclipped findings show on a loss Lipschitz only near the data (tail = "power":
# r^p/p everywhere), under add/remove where the paper's L0/n is otherwise right.
_UNBOUNDED = {"tail": "power", "relation": "add_remove"}


def _unbounded_configs(params: dict[str, Any]) -> dict[str, CheckConfig]:
    """Sensitivity and white-box configurations that isolate the unclipped finding."""
    p = {**_UNBOUNDED, **params}
    # One far record moves the mean gradient by orders of magnitude more than declared:
    # two canaries and 50 transcripts show it.
    return {
        "sensitivity": CheckConfig(
            params=p, options={"search": "canaries", "neighbours": ("outlier", "opposed"),
                               "random_pairs": 0}, suffix="unbounded",
            description="add/remove, on a loss Lipschitz only near the data: the unclipped "
                        "finding alone"),
        "audit.whitebox": whitebox("outlier", 50, thorough=200, params=p, suffix="unbounded",
                                   description="add/remove, a far record, on a loss "
                                               "Lipschitz only near the data"),
    }


# Algorithm 1 ---------------------------------------------------------------------------

KAPPA1_PROBLEM = {"kappa": 1.0, "huber_delta": 1.0, "radius": 1.25}

def _spider_utility(kappa: float) -> UtilityClaim:
    # Theorem 1 (line 110): (gamma L0 sqrt(d K log(1/beta')) / (n sqrt(rho)))^kappa, with K
    # and log(1/beta') both logarithmic in n sqrt(rho).
    return rate_claim(kappa, "paper 004, Theorem 1")


SPIDER_FINDINGS = (
    _replace_one_finding(
        "Lemma 8 (line 406) uses L0/n for the full gradient and eta L1 ||grad||/n for a "
        "gradient difference;",
        "2 rho (K full gradients) + rho/8 (differences) = 2.125 rho, not the rho of "
        "Theorem 1 (line 108)", ("sensitivity", "audit.whitebox")),
    Finding("Theorem 1 (line 108) claims rho-zCDP while its privacy proof, Lemma 8 "
            "(lines 402, 408), concludes 2 rho in its (Delta/sigma)^2 convention; the sum "
            "at line 408 also drops the gamma^2 that the stated bound Phi^(1/kappa)/n would "
            "carry. Neither is a leak on its own under Bun-Steinke's Delta^2/(2 sigma^2) "
            "with the paper's sensitivities (about 0.53 rho). Lemma 8 also assumes f "
            "Lipschitz and smooth on B_B(w*) (line 402) while Lemma 1 confines the iterates "
            "to B_B(w0) (line 122)", source=PAPER),
    _unclipped_finding("Lemma 8 assumes f L0-Lipschitz and L1-smooth (line 402; notes "
                       "P6, P7)", ("sensitivity", "audit.whitebox")),
    Finding("The inner loop runs while t <= T_k (line 89) with a difference query after "
            "every step (line 92): floor(T_k) + 1 difference queries per round, while "
            "Lemma 8 counts at most T_k (line 406); line 17 continues from w_{k,t-1}, "
            "undefined when the round stops at t = 0", source=PAPER),
)


# Under add/remove neighbours Lemma 8's sensitivities are right: the printed algorithm's
# only privacy error is the relation (controls of the paper variant's FAILs).
_ADD_REMOVE_CONTROL = ("under add/remove the paper's L0/n is the true sensitivity of a mean: "
                       "the control for the replace-one finding")

# kappa < 2 at n = 100: c_K = 4 (the schedule's pace, line 3) makes rounds with T_k > 1,
# i.e. difference queries; the sound noise is calibrated to whatever schedule runs.
_SMALL_KAPPA = {"d": 2, "rho": 16.0, "c_K": 4.0}
_SMALL_KAPPA_BATTERY = Battery(_SMALL_KAPPA, {
    "audit.whitebox": whitebox(OPPOSED_D2), "audit.blackbox": blackbox(OPPOSED_D2)})

# kappa = 1.5 (p = 3: neither Lipschitz nor smooth off the data) with difference queries.
_SPIDER_UNBOUNDED = _unbounded_configs({"kappa": 1.5, **_SMALL_KAPPA})

KL_SPIDER = Algorithm(
    name="kl_spider",
    source="paper 004, Algorithm 1",
    description="KL Spider: variance-reduced normalised GD with a data-independent schedule",
    make_problem=make_kl_problem,
    requires=(smooth_kl_params,),
    defaults={**PROBLEM_DEFAULTS, "c_floor": 1.0, "c_K": 64.0},
    ranges={**PROBLEM_RANGES, "c_floor": POSITIVE, "c_K": POSITIVE},
    variants={
        "sound": Variant(
            "sound", "sound", kl_spider(sound=True), zcdp_claim,
            "Per-sample clipping (gradients to L0, differences to L1 s_k), t < T_k, no "
            "unused last difference, noise scaled to cost exactly rho in the worst case; "
            "c_floor = 1 (privacy does not depend on it; 32 makes no progress below n~1e5)",
            utility=_spider_utility(2.0),
            battery=Battery(checks={
                "account": (CheckConfig(), CheckConfig(
                    params={"relation": "add_remove"}, suffix="add_remove",
                    description="calibrated under add/remove (sensitivities L0/n)")),
                "sensitivity": (sensitivity(), sensitivity(
                    relation="add_remove", suffix="add_remove",
                    description="configured for add/remove (sensitivities L0/n)")),
            }),
        ),
        "sound_kappa1": Variant(
            "sound_kappa1", "sound", kl_spider(sound=True), zcdp_claim,
            "The sound variant on a (gamma, 1)-KL problem (a Huber loss whose kink at 1 "
            "and KL ball of radius 1.25 keep K, which grows like gamma^2 L1 / F0, small)",
            utility=_spider_utility(1.0), params=KAPPA1_PROBLEM,
            battery=_SMALL_KAPPA_BATTERY,
        ),
        "sound_kappa1p5": Variant(
            "sound_kappa1p5", "sound", kl_spider(sound=True), zcdp_claim,
            "The sound variant on a (gamma, 1.5)-KL problem", utility=_spider_utility(1.5),
            params={"kappa": 1.5}, battery=_SMALL_KAPPA_BATTERY,
        ),
        "paper": Variant(
            "paper", "paper", kl_spider(sound=False), zcdp_claim,
            "As printed: noise of lines 4 and 7, loop t <= T_k, restart from w_{k,t-1}, "
            "sensitivities of Lemma 8, no clipping, c_floor = 32",
            utility=_spider_utility(2.0), findings=SPIDER_FINDINGS,
            params={"c_floor": 32.0},
            battery=Battery(checks={
                "sensitivity": (sensitivity(finite=True), sensitivity(
                    finite=True, params={"relation": "add_remove"}, suffix="add_remove",
                    expected="PASS", reason=_ADD_REMOVE_CONTROL),
                    _SPIDER_UNBOUNDED["sensitivity"]),
                "audit.whitebox": (whitebox(trials=300), whitebox(
                    "outlier", trials=300, params={"relation": "add_remove"},
                    suffix="add_remove", expected="PASS", reason=_ADD_REMOVE_CONTROL),
                    _SPIDER_UNBOUNDED["audit.whitebox"]),
                "audit.blackbox": blackbox(description=BLACKBOX_BLIND),
            }),
        ),
    },
    quick={},
    thorough={"n": 5000},
    battery=Battery({"n": 100}, {
        "sensitivity": sensitivity(), "audit.whitebox": whitebox(),
        "audit.blackbox": blackbox(), "agree": agree()}),
)


# Algorithm 2 with Algorithm 4 ----------------------------------------------------------

def _prox_utility(kappa: float) -> UtilityClaim:
    # Theorem 2 (line 215): (gamma L0 sqrt(T d log(n^2 log^2(1/beta')/(d beta')))
    # / (n sqrt(rho)))^kappa; reached only once T_in is uncapped (Theorem 9's n^2 rho/d).
    return rate_claim(kappa, "paper 004, Theorem 2",
                      regime=("n*sqrt(rho) >= sqrt(d)",))


PROX_FINDINGS = (
    Finding("Privacy of Algorithm 4 (line 908) and hence of Algorithm 2 (line 219) assumes "
            "f globally L0-Lipschitz (Theorem 2, line 213); the printed algorithm does not "
            "clip, so a record whose gradient exceeds L0 breaks the declared 2 L0/n. "
            "Under the assumption the printed noise is conservative: (T-1) rho/(2T) per "
            "call, under rho/2 in all", source=PAPER, detected_by=("sensitivity", "audit")),
)

# The paper variants of Algorithms 2 and 4 are checked on a loss that is L0-Lipschitz only
# near the data (tail = "power": r^2/2 everywhere), so a record far from the others breaks
# the global Lipschitzness their privacy proof assumes; on the globally Lipschitz problem
# they are private as printed (the controls).
_LIPSCHITZ_CONTROL = ("on a globally L0-Lipschitz loss (the paper's assumption, Theorem 2, "
                      "line 213) 2 L0/n is the replace-one sensitivity and the printed noise "
                      "is conservative: the control for the unclipped-loss finding")


def _unclipped_battery(trials: int) -> Battery:
    lipschitz = {"tail": "linear"}
    return Battery({"tail": "power"}, {
        "sensitivity": (sensitivity(finite=True), sensitivity(
            finite=True, params=lipschitz, suffix="lipschitz", expected="PASS",
            reason=_LIPSCHITZ_CONTROL)),
        "audit.whitebox": (whitebox(trials=trials), whitebox(
            trials=trials, params=lipschitz, suffix="lipschitz", expected="PASS",
            reason=_LIPSCHITZ_CONTROL)),
        # At rho = 0.1 the claim's epsilon at delta = 1e-5 (1.9) is within what a
        # Clopper-Pearson bound from a few hundred runs can reach when outputs separate.
        "audit.blackbox": blackbox(trials=trials, params={"rho": 0.1}),
    })


PROX_POINT = Algorithm(
    name="prox_point_004",
    source="paper 004, Algorithm 2 (Algorithm 4 as subroutine)",
    description="Private proximal point method for kappa >= 2, weakly convex losses",
    make_problem=make_kl_problem,
    requires=(check_kl_params,),
    defaults={**PROBLEM_DEFAULTS, "L1_tilde": 0.5, "T_in_max": 10},
    ranges={**PROBLEM_RANGES, "L1_tilde": POSITIVE, "T_in_max": COUNT},
    variants={
        "sound": Variant(
            "sound", "sound", prox_point(sound=True), zcdp_claim,
            "Clipped per-sample gradients; each call's T_in - 1 releases cost exactly rho/T",
            utility=_prox_utility(2.0),
            battery=Battery(checks={
                "account": (CheckConfig(), CheckConfig(
                    params={"kappa": 3.0, "d": 1}, suffix="kappa3",
                    description="kappa = 3 (Theorem 8's instance, d = 1)")),
                "sensitivity": (sensitivity(), sensitivity(
                    relation="add_remove", suffix="add_remove",
                    description="configured for add/remove (sensitivities L0/n)")),
            }),
        ),
        "paper": Variant(
            "paper", "paper", prox_point(sound=False), zcdp_claim,
            "As printed: Theorem 9's sigma and 2 L0/n, no clipping (T_in capped, sigma "
            "from the capped T_in)",
            utility=_prox_utility(2.0), findings=PROX_FINDINGS,
            battery=_unclipped_battery(200),
        ),
    },
    quick={},
    thorough={"n": 5000, "T_in_max": 200},
    # T_in_max pinned: the thorough default's 200 inner steps would make every audit 20x
    # slower without changing what it checks (sigma follows the T_in that runs).
    battery=Battery({"n": 100, "T_in_max": 10}, {
        "sensitivity": sensitivity(), "audit.whitebox": whitebox(),
        "audit.blackbox": blackbox(), "agree": agree()}),
)


# Algorithm 3 ---------------------------------------------------------------------------

def _adaptive_utility(kappa: float) -> UtilityClaim:
    # Theorem 4 (line 266): main term r^(2 kappa/(4 - kappa)), which dominates the
    # (n sqrt(rho))^(-kappa/2) term only when d >= (n sqrt(rho))^(kappa/2) (line 268).
    e = 2.0 * kappa / (4.0 - kappa)
    return rate_claim(kappa, "paper 004, Theorem 4", exponent=e,
                      regime=(f"d >= (n*sqrt(rho))**{kappa / 2.0:g}",))


ADAPTIVE_FINDINGS = (
    Finding("N_t (line 241) is a noisy norm and can be negative. Line 242 then uses the "
            "noise floor 2 L0/(n sqrt(rho)), whose release costs about rho/8, while line "
            "244 charges min{L0^2 d log(.)/(n^2 N_t^2), rho/2} with the large N_t^2, i.e. "
            "almost nothing; the stopping rule (line 240) lets the loop run on at floor "
            "noise and the realised cost exceeds rho near stationary points",
            source=PAPER, detected_by=("account", "audit.whitebox")),
    _replace_one_finding(
        "Appendix D.2 (line 658, 'the sensitivity of any gradient estimate is at most "
        "L0/n') charges (L0/(n sigma))^2 per release;",
        "twice the charge of line 244, up to 2 rho for a run the filter stops at rho",
        ("sensitivity", "audit.whitebox")),
    _unclipped_finding("Theorem 3 assumes f Lipschitz (line 252) and so does every "
                       "release's sensitivity (Appendix D.2, line 658; notes P7)",
                       ("sensitivity", "audit.whitebox")),
)


# P1 needs a start near stationarity: from the default start (far from it) the printed
# stopping rule ends before N_t is often negative.
_FAR_START = ("from a start far from stationarity N_t is rarely negative before the printed "
              "stopping rule ends the run: finding P1 needs the stationary start")
_P1_ACCOUNT = (
    CheckConfig(expected="PASS", reason=_FAR_START),
    CheckConfig(params=STATIONARY, options={"runs": 20}, thorough={"runs": 100},
                suffix="stationary_start",
                description="P1: started at the data centre, the worst of the runs spends "
                            "more than claimed on the paper's own sensitivities"))
# Both findings at once: started at the data centre (P1) and replayed on the opposed pair
# (2 L0/n).
_P1_WHITEBOX = (whitebox(OPPOSED_D1, params=STATIONARY_AUDIT, suffix="stationary_start",
                         description="P1 and the replace-one error at once: started at "
                                     "the data centre, on the opposed pair"),)

_ADAPTIVE_UNBOUNDED = _unbounded_configs({})

ADAPTIVE_NOISY_GD = Algorithm(
    name="adaptive_noisy_gd",
    source="paper 004, Algorithm 3",
    description="Noisy GD with noise proportional to a noisy gradient norm, under a filter",
    make_problem=make_kl_problem,
    requires=(smooth_kl_params,),
    defaults=dict(PROBLEM_DEFAULTS),
    ranges=PROBLEM_RANGES,
    variants={
        "sound": Variant(
            "sound", "sound", adaptive_noisy_gd(sound=True), zcdp_claim,
            "Clipping, N_t^+ = max(N_t, 0), exact costs admitted by a zCDP privacy filter",
            utility=_adaptive_utility(2.0),
            battery=Battery(checks={
                "account": (CheckConfig(), CheckConfig(
                    params=STATIONARY, options={"runs": 20}, thorough={"runs": 100},
                    suffix="stationary_start",
                    description="started at the data centre, where the printed variant "
                                "leaks: no run spends more than rho")),
                "sensitivity": (sensitivity(), sensitivity(
                    relation="add_remove", suffix="add_remove",
                    description="configured for add/remove (sensitivities L0/n)")),
                "audit.whitebox": (whitebox(trials=300, thorough=3000), whitebox(
                    OPPOSED_D1, params=STATIONARY_AUDIT, suffix="stationary_start",
                    description="the configuration where the printed variant FAILs")),
            }),
        ),
        "sound_kappa1": Variant(
            "sound_kappa1", "sound", adaptive_noisy_gd(sound=True), zcdp_claim,
            "The sound variant on a (gamma, 1)-KL problem", utility=_adaptive_utility(1.0),
            params=KAPPA1_PROBLEM,
        ),
        "sound_kappa1p5": Variant(
            "sound_kappa1p5", "sound", adaptive_noisy_gd(sound=True), zcdp_claim,
            "The sound variant on a (gamma, 1.5)-KL problem", utility=_adaptive_utility(1.5),
            params={"kappa": 1.5},
        ),
        "paper": Variant(
            "paper", "paper", adaptive_noisy_gd(sound=False), zcdp_claim,
            "As printed: signed N_t, line 6's charges as the stopping rule, sensitivity L0/n",
            utility=_adaptive_utility(2.0), findings=ADAPTIVE_FINDINGS,
            battery=Battery(checks={
                "account": _P1_ACCOUNT,
                "sensitivity": (sensitivity(finite=True), sensitivity(
                    finite=True, params={"relation": "add_remove"}, suffix="add_remove",
                    expected="PASS", reason=_ADD_REMOVE_CONTROL + " (P1 is not a "
                    "sensitivity error)"), _ADAPTIVE_UNBOUNDED["sensitivity"]),
                "audit.whitebox": (*_P1_WHITEBOX, _ADAPTIVE_UNBOUNDED["audit.whitebox"]),
                "audit.blackbox": blackbox(description=BLACKBOX_BLIND),
            }),
        ),
    },
    quick={},
    thorough={"n": 5000},
    battery=Battery({"n": 100}, {
        "sensitivity": sensitivity(), "audit.whitebox": whitebox(trials=300, thorough=3000),
        "audit.blackbox": blackbox(), "agree": agree(300, thorough=3000)}),
)


# Theorem 5 -----------------------------------------------------------------------------

def zcdp_claim_2rho(p: Mapping[str, Any]) -> PrivacyClaim:
    """2 rho-zCDP (Theorem 5, line 280): rho for Algorithm 3, rho/2 for the selection."""
    return PrivacyClaim(rho=2.0 * float(p["rho"]), relation=str(p["relation"]))


SELECT_FINDINGS = (
    _replace_one_finding(
        "Appendix D.6 (line 843) takes the selection to be sqrt(rho)-DP with scores of "
        "sensitivity L0/n, as Appendix D.2 (line 658) does for Algorithm 3;",
        "2 sqrt(rho)-DP for the selection (rho/2-zCDP as an eps-bounded-range mechanism, "
        "2 rho by Lemma 14) on top of up to 2 rho for Algorithm 3: above the claimed 2 rho",
        ("sensitivity",)),
    Finding(ADAPTIVE_FINDINGS[0].summary + " (finding P1 of Algorithm 3, which the selection "
            "inherits; the white-box audit that sees it there is blind here: the selection's "
            "exact loss makes the transcript non-Gaussian, and the audit's Clopper-Pearson "
            "fallback stays far below the 2 rho claim)", source=PAPER,
            detected_by=("account",)),
)

# Theorem 5 (line 280), its worst case (line 284): ||grad F(w_t*)|| up to
# d^(1/4) / (sqrt(n) rho^(1/4)), logs aside.
SELECT_UTILITY = UtilityClaim(
    quantity="grad_norm",
    exponents={"n": -0.5, "d": 0.25, "rho": -0.25},
    log_factors=("log(n*sqrt(rho))**0.5",),
    sided="upper",
    regime=("n*sqrt(rho) >= sqrt(d)",),
    source="paper 004, Theorem 5",
)

ADAPTIVE_NOISY_GD_SELECT = Algorithm(
    name="adaptive_noisy_gd_select",
    source="paper 004, Theorem 5 (Algorithm 3, then exponential selection of t*)",
    description="Adaptive noisy GD returning an iterate drawn by the exponential mechanism "
                "on its exact gradient norms",
    make_problem=make_kl_problem,
    requires=(smooth_kl_params,),
    defaults=dict(PROBLEM_DEFAULTS),
    ranges=PROBLEM_RANGES,
    variants={
        "sound": Variant(
            "sound", "sound", adaptive_noisy_gd_select(sound=True), zcdp_claim_2rho,
            "The sound Algorithm 3 (rho, filter), then selection on clipped gradient norms "
            "with the run's sensitivity and eps = sqrt(rho): rho + rho/8 spent",
            utility=SELECT_UTILITY,
        ),
        "paper": Variant(
            "paper", "paper", adaptive_noisy_gd_select(sound=False), zcdp_claim_2rho,
            "As printed: Algorithm 3 as printed, then P(t) ~ exp(-n sqrt(rho) ||grad F(w_t)|| "
            "/ (2 L0)) on unclipped norms, i.e. sensitivity L0/n and eps = sqrt(rho)",
            utility=SELECT_UTILITY, findings=SELECT_FINDINGS,
            battery=Battery(checks={
                "account": _P1_ACCOUNT, "sensitivity": sensitivity(finite=True),
                "audit.blackbox": blackbox(description=BLACKBOX_BLIND)}),
        ),
    },
    quick={},
    thorough={"n": 5000},
    battery=Battery({"n": 100}, {
        "sensitivity": sensitivity(), "audit.whitebox": whitebox(trials=300, thorough=3000),
        "audit.blackbox": blackbox(), "agree": agree(300, thorough=3000)}),
)


# Algorithm 4 ---------------------------------------------------------------------------

# Theorem 9 (line 905): L0^2 d log(n^2 log^2(2/beta)/(d beta)) / (L1~ n^2 rho) on
# F~ = F + L1~ ||w - w0||^2, once T_in = n^2 rho log^2(2/beta)/d steps are run.
NOISY_GD_004_UTILITY = UtilityClaim(
    quantity="excess_risk",
    exponents={"n": -2.0, "d": 1.0, "rho": -1.0, "L1_tilde": -1.0},
    log_factors=("log(n**2*log(2/beta)**2/(d*beta))",),
    sided="upper",
    regime=("n*sqrt(rho) >= sqrt(d)",),
    source="paper 004, Theorem 9",
)

NOISY_GD_004 = Algorithm(
    name="noisy_gd_004",
    source="paper 004, Algorithm 4 (Appendix E)",
    description="Projected noisy GD with step 1/(L1~ t) on F + L1~ ||w - w0||^2",
    make_problem=make_regularized_problem,
    requires=(check_kl_params,),
    defaults={**PROBLEM_DEFAULTS, "L1_tilde": 0.5, "T_in_max": 200},
    ranges={**PROBLEM_RANGES, "L1_tilde": POSITIVE, "T_in_max": COUNT},
    variants={
        "sound": Variant(
            "sound", "sound", noisy_gd(sound=True), zcdp_claim,
            "Clipped per-sample gradients; T_in - 1 releases cost exactly rho",
            utility=NOISY_GD_004_UTILITY,
            battery=Battery(checks={
                "sensitivity": (sensitivity(), sensitivity(
                    relation="add_remove", suffix="add_remove",
                    description="configured for add/remove (sensitivities L0/n)")),
            }),
        ),
        "paper": Variant(
            "paper", "paper", noisy_gd(sound=False), zcdp_claim,
            "As printed: sigma^2 = 4 L0^2 T/(n^2 rho), sensitivity 2 L0/n, no clipping",
            utility=NOISY_GD_004_UTILITY, findings=PROX_FINDINGS,
            battery=_unclipped_battery(200),
        ),
    },
    quick={},
    thorough={"n": 5000, "T_in_max": 5000},
    battery=Battery({"n": 100, "T_in_max": 200}, {
        "sensitivity": sensitivity(), "audit.whitebox": whitebox(),
        "audit.blackbox": blackbox(), "agree": agree()}),
)

ALGORITHMS = [KL_SPIDER, PROX_POINT, ADAPTIVE_NOISY_GD, ADAPTIVE_NOISY_GD_SELECT, NOISY_GD_004]

from algorithms.paper004.register import REGISTER  # noqa: E402  (the register names the ids above)
