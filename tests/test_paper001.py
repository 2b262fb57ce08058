"""Paper 001 (private nonsmooth nonconvex optimization): the formulas, schedules and
invariants of the notes' Section 7 that the conformance battery does not check (the battery
of every variant runs from suites/papers/001.toml): single-pass bookkeeping, estimator
bias and concentration, the smoothing constant, the O2NC bound with an exact oracle, the
tree's charges, the step-size rules, Prop. 5.1's control, and the claims register."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import scipy.stats

from algorithms.paper001 import ALGORITHMS, settings
from algorithms.paper001.estimators import (
    EstimatorSpec,
    draw_directions,
    first_order,
    record_query,
    zero_order,
)
from algorithms.paper001.generalization import generalization_gap
from algorithms.paper001.multi_pass import multi_pass_setup
from algorithms.paper001.o2nc import o2nc
from algorithms.paper001.problems import PiecewiseLinearGLM, make_problem
from algorithms.paper001.single_pass import single_pass_setup
from algorithms.paper001.tree_mechanism import tree_noise
from dpverify.checks.base import CheckSpec, RunContext, run_check
from dpverify.core.curator import Curator
from dpverify.core.data import Dataset
from dpverify.core.registry import all_algorithms, resolve
from dpverify.execution.trials import build_problem, run_target
from dpverify.mechanisms.tree import tree_levels

O2NC = [a for a in ALGORITHMS if a.name.startswith("o2nc")]  # tree_prefix: tests below
VARIANTS = [(a.name, v) for a in O2NC for v in a.variants]
SINGLE_PASS = ["o2nc_zo", "o2nc_fo"]


def _run(target: str, overrides: dict | None = None, trials: int = 3, rng: int = 1):
    t = resolve(target)
    p = t.algorithm.params(t.variant.name, overrides)
    problem = build_problem(t, p, 0)
    out, cur = run_target(t, p, problem, trials=trials, rng=rng)
    return np.asarray(out), cur, problem, p


def _account(target: str, params: dict | None = None):
    return run_check(CheckSpec(f"{target}.account", "account", target, params=params or {}),
                     RunContext()).outcome


def test_registered_through_the_entry_point():
    assert {"o2nc_zo", "o2nc_erm", "o2nc_fo"} <= {a.name for a in all_algorithms()}


@pytest.mark.parametrize("name,variant", VARIANTS)
def test_every_variant_declares_its_claims(name, variant):
    t = resolve(f"{name}:{variant}")
    claim = t.variant.claim(t.algorithm.params(variant))
    assert claim.relation == "replace_one" and claim.epsilon == 1.0
    u = t.variant.utility
    assert u is not None and u.quantity == "goldstein" and u.source.startswith("paper 001")
    assert set(u.exponents) == {"n", "d", "epsilon"}
    if t.variant.kind == "paper":
        assert t.variant.findings
        assert all("line" in f.source for f in t.variant.findings)
        assert any("account" in f.detected_by for f in t.variant.findings)


@pytest.mark.parametrize("name", SINGLE_PASS)
@pytest.mark.parametrize("variant", ["paper", "sound"])
def test_single_pass_reads_every_record_in_one_period_only(name, variant):
    out, cur, problem, p = _run(f"{name}:{variant}", trials=1)
    sched = single_pass_setup(p, problem.setting(), cur.n, cur.d, zero_order=name == "o2nc_zo",
                              sound=variant == "sound")["sched"]
    assert sched.records_used <= cur.n
    periods = {}
    for rel in cur.ledger:
        for i in np.flatnonzero(rel.touched[0]):
            periods.setdefault(int(i), set()).add((rel.step - 1) // sched.Sigma)
    assert all(len(v) == 1 for v in periods.values())
    assert len(periods) == sched.records_used


@pytest.mark.parametrize("name", SINGLE_PASS)
def test_printed_tree_leaks_exactly_at_period_ends_and_the_sound_one_never(name):
    _, cur, problem, p = _run(f"{name}:paper", trials=1)
    sigma = single_pass_setup(p, problem.setting(), cur.n, cur.d, zero_order=name == "o2nc_zo",
                              sound=False)["sched"].Sigma
    steps = [r.step for r in cur.ledger if r.mechanism == "exact"]
    assert steps and all(t % sigma == 0 for t in steps)
    assert len(steps) == max(r.step for r in cur.ledger) // sigma
    _, cur_s, _, _ = _run(f"{name}:sound", trials=1)
    assert all(r.mechanism == "gaussian" and r.noise > 0 for r in cur_s.ledger)


@pytest.mark.parametrize("name,variant", VARIANTS)
def test_output_stays_within_d_times_t_of_the_start(name, variant):
    out, cur, problem, p = _run(f"{name}:{variant}")
    if name == "o2nc_erm":
        sched = multi_pass_setup(p, problem.setting(), cur.n, cur.d,
                                 sound=variant == "sound")["sched"]
    else:
        sched = single_pass_setup(p, problem.setting(), cur.n, cur.d, zero_order=name == "o2nc_zo",
                                  sound=variant == "sound")["sched"]
    assert np.all(np.linalg.norm(out, axis=1) <= sched.D * sched.T * (1 + 1e-9))


def _smoothed_abs_grad(a: np.ndarray, z: float, alpha: float, d: int) -> np.ndarray:
    """grad of E_{u ~ B} |<a, x + alpha u> - b| for ||a|| = 1 (notes 001, Section 6).

    a (1 - 2 F_d(-(<a,x> - b) / alpha)), F_d the CDF of a coordinate of the uniform ball:
    (t + 1) / 2 ~ Beta((d + 1) / 2, (d + 1) / 2).
    """
    c = (d + 1) / 2
    return a * (1.0 - 2.0 * scipy.special.betainc(c, c, (1.0 - z / alpha) / 2.0))


@pytest.mark.statistical
@pytest.mark.parametrize("zero_order", [True, False])
def test_estimators_are_unbiased_for_the_smoothed_gradient(zero_order):
    """E[estimate] = grad f_alpha (Fact 2.3(iv)); z-test per coordinate, 4000 trials.

    Each coordinate is tested two-sided at level 1e-7 (3 coordinates): failure
    probability below 1e-6 with the fixed seed.
    """
    d, alpha, trials, m = 3, 0.5, 4000, 16
    a = np.array([0.6, 0.0, 0.8])
    loss = PiecewiseLinearGLM("capped", tau=10.0)  # |<a, x> - b| near the kink
    cur = Curator(Dataset(a[None, :], np.array([0.2])), trials=trials, rng=11)
    z = np.tile(np.array([0.3, -1.0, 0.1]), (trials, 1))
    spec = EstimatorSpec(loss, alpha, zero_order)
    dirs = (draw_directions(cur, m, kind="sphere") if zero_order
            else draw_directions(cur, m, kind="ball", radius=alpha))
    est = cur.exact("est", record_query(cur, spec, None, z, dirs, divisor=1.0))
    want = _smoothed_abs_grad(a, float(a @ z[0]) - 0.2, alpha, d)
    se = est.std(axis=0, ddof=1) / math.sqrt(trials)
    assert np.all(np.abs(est.mean(axis=0) - want) <= scipy.stats.norm.isf(0.5e-7) * se + 1e-12)
    if zero_order:  # each direction term has norm <= L d (line 446)
        assert np.all(np.linalg.norm(est, axis=1) <= d * 1.0 + 1e-9)
    else:  # a mean of gradients of a 1-Lipschitz loss
        assert np.all(np.linalg.norm(est, axis=1) <= 1.0 + 1e-9)


# The tree mechanism alone (Algorithm 1) ----------------------------------------------------


@pytest.mark.parametrize("Sigma", [1, 5, 8, 16])
def test_tree_charges_each_record_only_the_nodes_above_its_leaf(Sigma):
    # B = 2 records per leaf; the first leaf lies below one node per level, the last one
    # below the nodes its prefix needs: at most floor(log2 Sigma) + 1, never more.
    _, cur, _, _ = _run("tree_prefix:sound", {"Sigma": Sigma, "n": 2 * Sigma, "B": 2})
    charges = sum(r.touched[0].astype(int) for r in cur.ledger)
    assert charges.max() == charges[0] == tree_levels(Sigma)
    assert len(cur.ledger) == Sigma and cur.ledger.records_touched > 0
    # the account is tight: noise set for exactly levels nodes buys exactly the claim
    out = _account("tree_prefix:sound", {"Sigma": Sigma, "n": 2 * Sigma, "B": 2})
    assert out.result.epsilon_accountant == pytest.approx(1.0, abs=2e-3)


def test_tree_prefix_sums_are_the_clipped_leaf_means_plus_noise():
    # a large epsilon for small noise (PLD calibration slows as epsilon grows: 10 is seconds)
    p = {"Sigma": 4, "n": 8, "B": 2, "epsilon": 10.0}
    out, cur, problem, params = _run("tree_prefix:sound", p, trials=2)
    X = problem.data.X / np.maximum(1.0, np.linalg.norm(problem.data.X, axis=1))[:, None]
    want = np.cumsum(X.reshape(4, 2, -1).mean(axis=1), axis=0).reshape(-1)
    sigma = tree_noise(params, 2.0 / 2, rule="levels")
    assert np.all(np.abs(out - want) < 8 * sigma * math.sqrt(3))


def test_tree_noise_rules_differ_where_the_notes_say():
    p = {"epsilon": 1.0, "delta": 1e-5}
    # one level short exactly at powers of two (ceil(log2 S) = floor(log2 S) + 1 - 1)
    for S in (2, 4, 16, 64):
        ratio = tree_noise({**p, "Sigma": S}, 1.0, rule="levels") / tree_noise(
            {**p, "Sigma": S}, 1.0, rule="ceil_log2")
        assert ratio == pytest.approx(math.sqrt(tree_levels(S) / (tree_levels(S) - 1)))
    assert tree_noise({**p, "Sigma": 5}, 1.0, rule="levels") == pytest.approx(
        tree_noise({**p, "Sigma": 5}, 1.0, rule="ceil_log2"))
    assert tree_noise({**p, "Sigma": 1}, 1.0, rule="paper") == 0.0  # Prop. 2.5 at Sigma = 1


# Estimators: the printed sampling, concentration, smoothness ------------------------------


def _estimates(zero_order_formula: bool, Y: np.ndarray, z: np.ndarray, alpha: float):
    import array_api_compat.numpy as xp

    a, b = np.array([[0.6, 0.0, 0.8]]), np.array([0.2])
    loss = PiecewiseLinearGLM("capped", tau=10.0)  # |<a, x> - b| near its kink
    zz = np.tile(z, (Y.shape[0], 1))
    if zero_order_formula:
        return zero_order(loss, zz, a, b, Y, alpha, xp)[:, 0]
    return first_order(loss, zz, a, b, Y, xp)[:, 0]


@pytest.mark.statistical
@pytest.mark.parametrize("zero_order_formula", [True, False])
def test_printed_sampling_typos_bias_the_estimators(zero_order_formula):
    """Lines 218/307 (ball directions in the zero-order formula) and eq. (10) (sphere points
    in the first-order one) give biased estimates of grad f_alpha (notes 4.F4).

    z-test over 4000 trials of 16 samples each; the bias exceeds 12 standard errors (the
    failure probability of a 12-sigma event under no bias is below 1e-30, fixed seed).
    """
    d, alpha, trials, m = 3, 0.5, 4000, 16
    z = np.array([0.3, -1.0, 0.1])
    rng = np.random.default_rng(5)
    g = rng.standard_normal((trials, 1, m, d))
    unit = g / np.linalg.norm(g, axis=-1, keepdims=True)
    if zero_order_formula:  # y ~ Unif(B) where the formula needs the sphere
        Y = unit * rng.random((trials, 1, m, 1)) ** (1.0 / d)
    else:  # alpha y with y on the sphere where the gradient needs the ball
        Y = alpha * unit
    est = _estimates(zero_order_formula, Y, z, alpha)
    a = np.array([0.6, 0.0, 0.8])
    want = _smoothed_abs_grad(a, float(a @ z) - 0.2, alpha, d)
    se = est.std(axis=0, ddof=1) / math.sqrt(trials)
    k = int(np.argmax(np.abs(a)))
    assert abs(est.mean(axis=0)[k] - want[k]) > 12 * se[k]


@pytest.mark.statistical
def test_estimator_error_stays_below_the_pinelis_bound():
    """P(||ZO_est - grad f_alpha|| > u(m, gamma)) <= gamma (notes 7.7; settings.estimate_error).

    4000 estimates of m = 16 directions, gamma = 0.05: the count above the bound is
    Binomial(4000, <= 0.05), and it is tested against 0.06 * 4000 (a one-sided tail of
    probability below 1e-3 under the bound). The bound is loose: the notes expect the
    scale L sqrt(d/m), the 95% quantile is checked below half of it.
    """
    d, alpha, trials, m, gamma = 3, 0.5, 4000, 16, 0.05
    z = np.array([0.3, -1.0, 0.1])
    g = np.random.default_rng(6).standard_normal((trials, 1, m, d))
    est = _estimates(True, g / np.linalg.norm(g, axis=-1, keepdims=True), z, alpha)
    a = np.array([0.6, 0.0, 0.8])
    err = np.linalg.norm(est - _smoothed_abs_grad(a, float(a @ z) - 0.2, alpha, d), axis=1)
    u = settings.estimate_error(m, d, 1.0, gamma, first_order=False)
    assert np.sum(err > u) <= 0.06 * trials
    assert np.quantile(err, 0.95) < 0.5 * u


@pytest.mark.parametrize("d", [1, 2, 3, 10])
def test_smoothed_gradient_is_c_d_over_alpha_lipschitz_and_tight_at_a_kink(d):
    """grad f_alpha of f = |<a, x>| changes at rate exactly L c_d / alpha across the kink
    (notes Section 1: the constant replacing Fact 2.3(iii)'s O(L sqrt(d) / alpha)), and
    nowhere faster."""
    alpha, a = 0.5, np.eye(d)[0]
    t = np.linspace(-alpha, alpha, 2001)
    g = np.array([_smoothed_abs_grad(a, s, alpha, d)[0] for s in t])
    slopes = np.diff(g) / np.diff(t)
    bound = settings.smoothing_constant(d) / alpha
    assert slopes.max() <= bound * (1 + 1e-6)
    assert slopes.max() == pytest.approx(bound, rel=1e-3)  # at the kink t = 0


def test_rules_give_first_order_d_squared_fewer_calls():
    """Remark 6.2: the m of Lemma 3.5 over the m of Lemma 6.4 grows as d^2 at a fixed schedule
    (B1 = Sigma, D) where the difference steps dominate m (d B1^2 D^2 << alpha^2), and so
    does the ratio of the deterministic-bound m's of the sound
    variants, ((d + 1) / 2)^2 (settings.estimate_error: b = L (d + 1) against 2 L)."""
    p = {"alpha": 0.1, "epsilon": 1.0, "delta": 1e-5, "T": 500, "D": 1e-4, "Sigma": 20}
    ratios = []
    for d in (4, 16, 64):
        zo = settings.single_pass_schedule(p, 1.0, 3.0, 1000, d, first_order=False)
        fo = settings.single_pass_schedule(p, 1.0, 3.0, 1000, d, first_order=True)
        ratios.append(zo.m_theorem / fo.m_theorem)
        u_zo = settings.estimate_error(100, d, 1.0, 0.01, first_order=False)
        u_fo = settings.estimate_error(100, d, 1.0, 0.01, first_order=True)
        assert (u_zo / u_fo) ** 2 == pytest.approx(((d + 1) / 2) ** 2)
    slope = np.polyfit(np.log([4, 16, 64]), np.log(ratios), 1)[0]
    assert 1.9 < slope < 2.1


# Algorithm 2 with an exact oracle (Proposition 2.6) ---------------------------------------


def test_o2nc_with_an_exact_oracle_meets_proposition_2_6():
    """With the oracle grad F_alpha (G0 = 0, G1 = L), eta = D / (L sqrt M) and M D <= alpha,
    the mean over blocks of ||(1/M) sum_m grad F_alpha(z_m)||, which bounds
    ||dbar_alpha F_alpha(xbar_k)|| from above, stays below (F_alpha(x0) - inf F_alpha)/(D T)
    + 3 L / (2 sqrt M) (Prop. 2.6, line 189; F_alpha >= 0 and F_alpha(x0) <= F(x0) + L alpha).

    grad F_alpha is the ball average of grad F over 4096 fixed points: an exact gradient of
    that average, a smoothing of F with the same Lipschitz constant.
    """
    prob = make_problem({"problem": "amplitude", "n": 40, "d": 3}, np.random.default_rng(2))
    alpha, L, T, M = 0.2, 1.0, 400, 8
    D = alpha / M
    ball = np.random.default_rng(3).standard_normal((4096, 3))
    ball *= alpha * np.random.default_rng(4).random((4096, 1)) ** (1 / 3) / np.linalg.norm(
        ball, axis=1, keepdims=True)
    grads = []

    def oracle(z, t):
        g = np.stack([prob.loss.mean_grad(zk + ball, prob.data).mean(axis=0) for zk in z])
        grads.append(g)
        return g

    cur = Curator(prob.data, trials=4, rng=0)
    x0 = prob.info["x0"]
    o2nc(cur, oracle, x0=x0, D=D, eta=D / (L * math.sqrt(M)), M=M, T=T)
    G = np.stack(grads, axis=1)  # (trials, T, d)
    blocks = G[:, : (T // M) * M].reshape(4, T // M, M, 3).mean(axis=2)
    measured = np.linalg.norm(blocks, axis=-1).mean()
    f0 = float(prob.objective(x0[None])[0]) + L * alpha
    assert measured <= f0 / (D * T) + 1.5 * L / math.sqrt(M)


# Theorem 4.1's step rules and Prop. 5.1's control ------------------------------------------


def test_both_step_rules_keep_d_times_t():
    """D = alpha^2 beta^2 / L^2 (line 321) and the dimensionally consistent alpha beta^2 / L^2
    both give D T = Phi / beta; the printed one needs 1/alpha times more steps."""
    p = {"alpha": 0.1, "epsilon": 1.0, "delta": 1e-5, "beta": 0.5}
    paper = settings.multi_pass_schedule({**p, "d_rule": "paper"}, 1.0, 3.0, 1000, 4)
    cons = settings.multi_pass_schedule({**p, "d_rule": "consistent"}, 1.0, 3.0, 1000, 4)
    for s in (paper, cons):
        assert s.D * s.T == pytest.approx(3.0 / 0.5, rel=1e-3)
    assert paper.T / cons.T == pytest.approx(1 / 0.1, rel=1e-3)


def test_generalization_gap_closes_on_a_smooth_enough_sample():
    """The control of the Prop. 5.1 counterexample: with K0 = 1 (kinks 1/(2K) apart, a
    handful per ball) F^D's slopes average out and the gap falls below c/2 at n = 2000;
    with K0 = 1e8 every ball holds points where F^D is stationary, and the gap is c."""
    gaps = {}
    for K0, n in ((1.0, 2000), (1e8, 160)):
        prob = make_problem({"problem": "triangle", "n": n, "d": 1, "K0": K0},
                            np.random.default_rng(7))
        gaps[K0] = generalization_gap(prob, np.array([[1.0]]),
                                      {"alpha": 0.05, "gap_samples": 1 << 15})[0]
    assert gaps[1.0] < 0.1
    assert gaps[1e8] == pytest.approx(0.2)
