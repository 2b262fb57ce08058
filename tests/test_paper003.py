"""Paper 003 (DP SOSP in minimax): DP RGDA and DP-SGDA, the SOSP metrics, the account checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from algorithms.paper003 import ALGORITHMS
from algorithms.paper003.problems import (
    CosineObjective,
    MatrixSensingObjective,
    make_minimax_problem,
    setting_of,
)
from algorithms.paper003.rgda import (
    SoundPlan,
    UpdaterState,
    _ball,
    escape_schedule,
    outer_loop,
    paper_noise,
    paper_updater,
    sound_updater,
)
from dpverify.accounting.accountant import account_ledger
from dpverify.checks.rates.sosp import (
    grad_norm_phi,
    inner_argmax,
    min_eig_phi,
    phi_at,
    phi_grad,
    phi_hessian,
    sosp_alpha,
)
from dpverify.checks.sensitivity import ledger_excess
from dpverify.core.curator import Curator
from dpverify.core.data import NeighbourPair
from dpverify.core.errors import InputError
from dpverify.core.registry import resolve
from dpverify.execution.trials import build_problem, run_target

TARGETS = [f"{a.name}:{v}" for a in ALGORITHMS for v in a.variants]
SOUND = [f"{a.name}:{v.name}" for a in ALGORITHMS for v in a.variants.values()
         if v.kind == "sound"]


def _run(target: str, trials: int, params: dict | None = None, seed: int = 0, pair=None):
    t = resolve(target)
    p = t.algorithm.params(t.variant.name, params)
    problem = build_problem(t, p, seed)
    out, cur = run_target(t, p, problem, trials=trials, rng=seed + 1, data=pair)
    return np.asarray(out), cur, problem, p


# Declarations ----------------------------------------------------------------------------
# What the variants run and release is checked by their conformance battery (outputs,
# setting, determinism, account, sensitivity, audits, agreement: suites/papers/003.toml,
# ``battery``); these tests check the paper's formulas, schedules and invariants.


def test_variants_declare_claims_theorems_and_findings():
    for target in TARGETS:
        t = resolve(target)
        p = t.algorithm.params(t.variant.name)
        c = t.variant.claim(p)
        assert (c.epsilon, c.delta, c.relation) == (p["epsilon"], p["delta"], "replace_one")
        u = t.variant.utility
        assert u is not None and u.source.startswith("paper 003")
        assert set(u.exponents) == {"n", "d", "epsilon"} and u.sided == "upper"
        if t.variant.kind == "paper":
            assert t.variant.findings
            assert all("line" in f.summary for f in t.variant.findings)
    # Theorem 1: eps_bar^(2/3); Theorem 2's privacy term: eps_bar^(1/2).
    assert resolve("dp_rgda:sound").variant.utility.exponents["n"] == pytest.approx(-2 / 3)
    assert resolve("dp_rgda:paper").variant.utility.exponents["epsilon"] == -0.5


def test_matrix_sensing_runs_on_every_rgda_variant():
    for v in ("sound", "paper_erm"):
        out, cur, problem, p = _run(f"dp_rgda:{v}", trials=2,
                                    params={"problem": "matrix_sensing", "n": 30, "T": 6,
                                            "q": 3})
        assert out.shape == (2, 24) and np.all(np.isfinite(out))


@pytest.mark.torch
def test_torch_backend_agrees_on_matrix_sensing():
    """The battery's agreement runs the cosine problem; matrix sensing's per-record y has
    its own einsums: same noise stream, same trajectory on torch."""
    pytest.importorskip("torch")
    t = resolve("dp_rgda:sound")
    p = t.algorithm.params("sound", {"problem": "matrix_sensing", "n": 40, "T": 6, "q": 3})
    prob = build_problem(t, p, 0)
    a, _ = run_target(t, p, prob, trials=2, rng=1)
    b, _ = run_target(t, p, prob, trials=2, rng=1, backend="torch")
    np.testing.assert_allclose(np.asarray(a), b.numpy(), atol=1e-12)


def test_declared_F0_bounds_every_dataset_and_is_public():
    """F0 (Theorem 1, line 276; the notes' Phi(x0) - inf Phi) is a declared bound: it does
    not move with the records, and it bounds the empirical gap of every draw, the value
    the planted variant reads from the records."""
    from algorithms.paper003.problems import PROBLEM_DEFAULTS, empirical_F0

    for seed in range(5):
        for x0 in (None, [1.0, -0.5, 0.3]):
            params = {**PROBLEM_DEFAULTS, "x0": x0, "s_b": 0.9}
            prob = make_minimax_problem(params, np.random.default_rng(seed))
            declared = prob.setting()["F0"]
            assert declared == make_minimax_problem(
                params, np.random.default_rng(seed + 100)).setting()["F0"]
            assert 0 < empirical_F0(prob.setting(), prob.data, params)["F0"] <= declared


# The warm start -------------------------------------------------------------------------------


def test_sound_warm_start_is_counted():
    _, cur, _, p = _run("dp_rgda:sound_population", trials=1)
    names = [r.name for r in cur.ledger]
    assert names.count("warm_start") == p["warm_start"] > 0
    assert all(r.mechanism == "gaussian" and r.noise > 0 for r in cur.ledger)


# The population setting: one pass over fresh records -----------------------------------


def test_single_pass_reads_each_record_once_and_accounts_in_parallel():
    """Theorem 2's sample budget (line 762): every batch is fresh, so each record meets one
    release, and per-record parallel composition over the touched masks gives back the
    epsilon of that single release, the calibration target; composing every release over
    every record instead would cost far more."""
    import dp_accounting as dpa

    from dpverify.accounting.accountant import epsilon_of_event

    _, cur, _, p = _run("dp_rgda:sound_population", trials=3)
    masks = [r.touched for r in cur.ledger]
    assert all(m is not None and m.shape[0] == 1 for m in masks)  # public order: one row
    uses = np.sum([m[0] for m in masks], axis=0)
    assert uses.max() == 1 and uses.sum() == 1720 <= p["n"]
    assert all(r.sampling == "shuffle" for r in cur.ledger)
    eps = account_ledger(cur.ledger, p["delta"], p["relation"]).epsilon
    assert eps == pytest.approx(p["epsilon"], rel=1e-3) and eps <= p["epsilon"] * 1.001
    z = cur.ledger.releases[0].noise_multiplier
    one = epsilon_of_event(dpa.GaussianDpEvent(z), p["delta"])  # add/remove: distance 1
    assert one == pytest.approx(eps, rel=1e-3)
    every = epsilon_of_event(dpa.GaussianDpEvent(z / math.sqrt(len(cur.ledger))), p["delta"])
    assert every > 5 * eps


def test_single_pass_offset_puts_a_record_in_another_release():
    """The pass's public start (pass_offset) decides which release a slot meets: at
    n - (S1 + S2), slot 0 is read by the t = 0, k = 1 increment, not the first refresh."""
    t = resolve("dp_rgda:paper_population")
    p = t.algorithm.params("paper_population", {"n": 2000, "T": 4, "q": 4, "K": 2,
                                                "S1": 100, "S2": 20})
    prob = build_problem(t, p, 0)
    for offset, first in ((0, "refresh_v"), (2000 - 120, "increment_v")):
        _, cur = run_target(t, {**p, "pass_offset": offset}, prob, trials=1, rng=0)
        hits = [(i, r.name) for i, r in enumerate(cur.ledger) if r.touched[0][0]]
        assert hits[0][1] == first and len(hits) == 2  # the v and u releases of one batch
    assert hits[0][0] == 4  # refresh v, u; k = 0 increment v, u; then k = 1


def test_single_pass_refuses_a_schedule_beyond_n():
    """(T/q) S1 + T K S2 <= n (line 762) is checked before anything is released."""
    from dpverify.core.errors import InputError

    for target in ("dp_rgda:sound_population", "dp_rgda:paper_population"):
        with pytest.raises(InputError, match="single pass"):
            _run(target, trials=1, params={"n": 500})



# The zero-noise k = 0 increment ----------------------------------------------------------


def _far_pair(problem) -> NeighbourPair:
    """Replace record 0 by one whose A is 20 I: its gradient difference across an x-step,
    A (x_t - x_{t-1}), is far from the base record's."""
    D = problem.data
    d = setting_of(problem.setting()).d1
    x_new = np.concatenate([20.0 * np.eye(d).ravel(), np.zeros(d)])
    return NeighbourPair.replace_one(D, 0, x_new, 0.0)


def test_zero_noise_k0_release_fails_sensitivity_not_accounting():
    """Lemma 8's calibration releases every k = 0 increment with declared sensitivity 0 and
    noise 0 (eq. 31, line 632; line 636). The accountant reads a zero-sensitivity release as
    free, so epsilon stays FINITE; replay on neighbours shows the release moving: the
    sensitivity check is what fails."""
    _, cur, problem, p = _run("dp_rgda:paper", trials=2, params={"warm_start": 0})
    k0 = [r for r in cur.ledger if r.name.startswith("increment") and r.sensitivity == 0]
    assert len(k0) == 2 * p["T"] and all(r.noise == 0 for r in k0)
    assert math.isfinite(account_ledger(cur.ledger, p["delta"], p["relation"]).epsilon)

    _, cur, problem, p = _run("dp_rgda:paper", trials=4, params={"warm_start": 0},
                              pair=_far_pair(problem))
    ex = ledger_excess(cur.ledger)
    assert ex.violations > 0 and math.isinf(ex.worst_ratio)
    assert ex.declared == 0.0 and ex.true_difference > 0
    assert ex.query == "increment_u" and ex.release_info["noise"] == 0.0


def test_clipped_batch_mean_breaks_the_declared_refresh_sensitivity():
    """Clipping the batch mean (lines 205-206) bounds a record's influence by 2 C_v, not
    the 2M/S1 of eq. 30 (line 631): a record far outside A1 drags the clipped mean from
    near 0 to the clip boundary, ||M e||, about n/2 times the declaration."""
    _, _, problem, _ = _run("dp_rgda:paper", trials=1, params={"warm_start": 0})
    D = problem.data
    pair = NeighbourPair.replace_one(D, 0, np.full(D.d, 1e3), 0.0)
    _, cur, _, p = _run("dp_rgda:paper", trials=2, params={"warm_start": 0}, pair=pair)
    refresh = [r for r in cur.ledger.records if r.release.name.startswith("refresh")]
    ratio = max(float(np.max(r.true_difference / r.release.sensitivity)) for r in refresh)
    assert ratio > 0.4 * p["n"]


def test_definition3_sigma_is_not_epsilon_delta_dp():
    """Definition 3 (line 63) at (1, 1e-5): sigma/Delta = 3.426 buys epsilon above 1 (the
    true delta at epsilon = 1 is 3.7e-5); the classical sqrt(2) more is within."""
    import dp_accounting as dpa

    from algorithms.paper003.common import def3_sigma
    from dpverify.accounting.accountant import epsilon_of_event

    z = def3_sigma(1.0, 1.0, 1e-5)
    assert epsilon_of_event(dpa.GaussianDpEvent(z), 1e-5) > 1.05
    assert epsilon_of_event(dpa.GaussianDpEvent(z * math.sqrt(2.0)), 1e-5) < 1.0



# The updater ------------------------------------------------------------------------------


def test_sound_spider_tracks_exact_gradients_without_noise():
    """C-A1 of the notes: with zero noise, full batches and no binding clip, the corrected
    recursion gives v_t = grad_x f_S(x_t, y_{t+1}) and u_t = grad_y f_S(x_t, y_{t+1})
    at every t, refresh steps included (no double count of the x-move)."""
    t_ = resolve("dp_rgda:sound")
    p = t_.algorithm.params("sound", {"n": 50, "q": 3, "K": 3, "S1": None, "S2": None,
                                      "clip": 1e9, "Lclip": 1e9})
    p["lam"] = 0.2
    problem = build_problem(t_, p, 0)
    f = problem.info["minimax"]
    cur = Curator(problem.data, trials=2, rng=0)
    full = ("full", 1.0, 50, 50)
    plan = SoundPlan(full, full, 0.0, {})
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3))
    st = UpdaterState(x, x, np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((2, 3)))
    for t in range(7):
        st = sound_updater(cur, problem.setting(), p, plan, t, st)
        np.testing.assert_allclose(st.v, f.grad_x(st.x, st.y), atol=1e-10)
        np.testing.assert_allclose(st.u, f.grad_y(st.x, st.y), atol=1e-10)
        x_new = st.x + 0.3 * rng.standard_normal((2, 3))
        st = UpdaterState(x_new, st.x, st.y, st.v, st.u)


def test_printed_refresh_double_counts_the_x_move():
    """Notes A3-2: at a refresh the printed updater (lines 4-17) starts from the fresh
    grad_x f(x_t, y_t) and still adds the k = 0 increment across the x-step, so with no
    noise, full batches and no binding clip, v_t = grad_x f(x_t, y_t) + [grad_x f(x_t, y_t)
    - grad_x f(x_{t-1}, y_t)] exactly: the x-move counted twice."""
    t_ = resolve("dp_rgda:paper_erm")
    p = t_.algorithm.params("paper_erm", {"n": 50, "q": 2, "K": 1, "S1": None, "S2": 50,
                                          "noise": "proof", "c1": 0.0, "c2": 0.0,
                                          "clip": 1e9})
    p["lam"] = 0.1
    problem = build_problem(t_, p, 0)
    f, s = problem.info["minimax"], setting_of(problem.setting())
    cur = Curator(problem.data, trials=2, rng=0)
    pn = paper_noise(p, s, 50, escape_schedule(p, s, 50, style="paper_erm"))
    assert pn.refresh_std == 0 and pn.inc_std == 0
    rng = np.random.default_rng(4)
    x_prev, x = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    y = rng.standard_normal((2, 3))
    st = paper_updater(cur, problem.setting(), p, pn, 2, UpdaterState(x, x_prev, y, 0 * x,
                                                                      0 * y))
    fresh = f.grad_x(x, y)
    np.testing.assert_allclose(st.v, 2 * fresh - f.grad_x(x_prev, y), atol=1e-10)
    assert np.min(np.linalg.norm(st.v - fresh, axis=1)) > 1e-3


def test_paper_updater_with_one_inner_step_freezes_y():
    """Line 216 with K = 1 (the ERM proofs' setting, line 243): s_t = 0, y_{t+1} = y_t."""
    t_ = resolve("dp_rgda:paper_erm")
    p = t_.algorithm.params("paper_erm", {"n": 50})
    p["lam"] = 0.1
    problem = build_problem(t_, p, 0)
    s = setting_of(problem.setting())
    cur = Curator(problem.data, trials=2, rng=0)
    pn = paper_noise(p, s, 50, escape_schedule(p, s, 50, style="paper_erm"))
    y0 = np.full((2, 3), 0.5)
    x = np.ones((2, 3))
    st = UpdaterState(x, x, y0, np.zeros((2, 3)), np.zeros((2, 3)))
    for t in range(4):
        st = paper_updater(cur, problem.setting(), p, pn, t, st)
        np.testing.assert_array_equal(st.y, y0)
        st = UpdaterState(st.x + 0.1, st.x, st.y, st.v, st.u)


def test_escape_needs_the_perturbation():
    """C-U4 of the notes: Algorithm 2 started at the strict saddle x = 0 of the population
    Phi with exact gradients (no privacy noise). With r > 0 every trial escapes and
    certifies a point near a minimiser (x_1 = +-s, lambda_min = beta^2/mu > 0,
    ||grad Phi|| < alpha); with r = 0 it certifies the saddle itself (a false certificate)."""
    prob = make_minimax_problem({"phi": "population"}, np.random.default_rng(0))
    s, f = setting_of(prob.setting()), prob.info["minimax"]
    cur = Curator(prob.data, trials=4, rng=0)
    x0 = np.zeros((4, 3))

    def exact(t, st):  # grad Phi = A^T (A x - b)/mu - a sin(x_1) e_1 (closed form, TP1)
        g = (st.x @ f.A.T - f.b) @ f.A / f.mu
        g[:, 0] -= f.a * np.sin(st.x[:, 0])
        return UpdaterState(st.x, st.x_prev, st.y, g, st.u)

    for r in (None, 0.0):
        esc = escape_schedule({"alpha": 0.05, "delta2": 0.1, "r": r}, s, 200, style="sound")
        out = outer_loop(cur, 3, esc, 5000, exact, UpdaterState(x0, x0, None, None, None),
                         np.random.default_rng(1))
        if r is None:
            np.testing.assert_allclose(np.abs(out[:, 0]), prob.info["minimum_x1"], atol=0.05)
            assert np.all(grad_norm_phi(prob, out, {}) < esc.alpha)
            np.testing.assert_allclose(min_eig_phi(prob, out, {}), 0.25, atol=1e-3)
        else:
            np.testing.assert_array_equal(out, x0)


def test_descent_steps_have_length_eta():
    """Algorithm 2, line 6: while ||v_t|| >= the entry threshold, x moves by exactly eta
    along -v_t/||v_t||, whatever ||v_t|| is (notes C-A3)."""
    prob = make_minimax_problem({}, np.random.default_rng(0))
    s = setting_of(prob.setting())
    cur = Curator(prob.data, trials=3, rng=0)
    esc = escape_schedule({"alpha": 0.3, "delta2": 0.1, "eta": 0.07}, s, 200, style="sound")
    v = np.array([[3.0, 0.0, 4.0], [0.0, 0.2, 0.0], [1.0, -1.0, 1.0]])  # norms >= entry

    def const(t, st):
        return UpdaterState(st.x, st.x_prev, st.y, v, st.u)

    x0 = np.zeros((3, 3))
    out = outer_loop(cur, 3, esc, 9, const, UpdaterState(x0, x0, None, None, None),
                     np.random.default_rng(1))
    step = -esc.eta * v / np.linalg.norm(v, axis=1, keepdims=True)
    np.testing.assert_allclose(out, 9 * step, atol=1e-12)


def test_lemma12_gradient_mapping():
    """Lemma 12 (line 879): (mu/2) ||y - y*(x)|| <= ||G_lambda(x, y)|| with G_lambda(x, y) =
    (y - P_Y(y + lambda grad_y f(x, y)))/lambda, for lambda <= 1/L, on the cosine saddle with
    Y a large ball (TP1) and a small binding one (TP4); random x and y in Y."""
    rng = np.random.default_rng(7)
    for radius in (5.0, 0.3):
        f = CosineObjective(1.0, 0.7, 0.5 * np.eye(3) + 0.1 * rng.standard_normal((3, 3)),
                            0.2 * rng.standard_normal(3), y_radius=radius)
        L = 1.0 + np.linalg.norm(f.A, 2) + f.mu  # per-sample smoothness of f in (x, y)
        x = 2.0 * rng.standard_normal((200, 3))
        y = f.project_y(radius * rng.standard_normal((200, 3)))
        y_star, _ = inner_argmax(f, x)
        for lam in (1.0 / L, 0.3 / L):
            G = (y - f.project_y(y + lam * f.grad_y(x, y))) / lam
            lhs = 0.5 * f.mu * np.linalg.norm(y - y_star, axis=1)
            assert np.all(lhs <= np.linalg.norm(G, axis=1) + 1e-9)


@pytest.mark.statistical
def test_perturbation_is_uniform_in_the_ball():
    """Alg. 2 line 9 (notes A2-4, pitfall 16): ||xi|| <= r and P(||xi|| <= s) = (s/r)^d.
    KS test on 4000 draws, fixed seed; a correct sampler fails with probability 0.01."""
    xi = _ball(np.random.default_rng(0), 4000, 3, 0.5)
    radii = np.linalg.norm(xi, axis=1)
    assert radii.max() <= 0.5
    assert scipy.stats.kstest(radii, lambda s: (np.clip(s, 0, 0.5) / 0.5) ** 3).pvalue > 0.01


# Second-order metrics -------------------------------------------------------------------------


def _fd_grad(fun, x: np.ndarray, h: float = 1e-5) -> np.ndarray:
    g = np.zeros_like(x)
    for j in range(x.shape[1]):
        e = np.zeros_like(x)
        e[:, j] = h
        g[:, j] = (fun(x + e) - fun(x - e)) / (2 * h)
    return g


def _fd_hessian(obj, x: np.ndarray, h: float = 1e-5) -> np.ndarray:
    cols = []
    for j in range(x.shape[1]):
        e = np.zeros_like(x)
        e[:, j] = h
        cols.append((phi_grad(obj, x + e) - phi_grad(obj, x - e)) / (2 * h))
    H = np.stack(cols, axis=2)
    return 0.5 * (H + H.transpose(0, 2, 1))


def test_metrics_on_the_closed_form_cosine_saddle():
    """Population Phi(x) = a cos(x_1) + beta^2 ||x||^2/(2 mu): grad Phi and hess Phi at
    known points, against the closed form and against finite differences of Phi computed by
    the inner solver."""
    a, mu, beta = 1.0, 1.0, 0.5
    prob = make_minimax_problem({"phi": "population", "a": a, "mu": mu, "beta": beta},
                                np.random.default_rng(0))
    f = prob.info["minimax"]
    kappa = beta**2 / mu
    s = prob.info["minimum_x1"]
    x = np.array([[0.0, 0.0, 0.0], [s, 0.0, 0.0], [0.4, -0.7, 1.1]])
    # gradient: -a sin(x1) e1 + (beta^2/mu) x
    g_true = kappa * x
    g_true[:, 0] -= a * np.sin(x[:, 0])
    np.testing.assert_allclose(phi_grad(f, x), g_true, atol=1e-12)
    np.testing.assert_allclose(phi_grad(f, x), _fd_grad(lambda z: phi_at(f, z), x), atol=1e-8)
    np.testing.assert_allclose(phi_at(f, x), f.phi_closed(x), atol=1e-13)
    # Hessian: diag(-a cos(x1) + kappa, kappa, kappa)
    lam = np.minimum(-a * np.cos(x[:, 0]) + kappa, kappa)
    np.testing.assert_allclose(min_eig_phi(prob, x, {}), lam, atol=1e-12)
    np.testing.assert_allclose(phi_hessian(f, x), _fd_hessian(f, x), atol=1e-7)
    assert min_eig_phi(prob, x[:1], {})[0] == pytest.approx(-prob.info["saddle_gap"])
    assert grad_norm_phi(prob, x[:2], {}) == pytest.approx([0.0, 0.0], abs=1e-12)
    # sosp_alpha (Definition 4): the saddle needs alpha = gap^2 / rho_Phi, a minimum 0.
    np.testing.assert_allclose(sosp_alpha(prob, x[:2], {}), [0.75**2 / a, 0.0], atol=1e-12)


def test_schur_complement_matters():
    """f_xx alone gives lambda_min = -a at the saddle; Phi's Hessian adds the PSD
    -f_xy f_yy^{-1} f_yx = beta^2/mu I."""
    f = CosineObjective(1.0, 1.0, 0.5 * np.eye(3), np.zeros(3))
    x = np.zeros((1, 3))
    y, _ = inner_argmax(f, x)
    assert np.linalg.eigvalsh(f.hess_xx(x, y))[0, 0] == pytest.approx(-1.0)
    assert np.linalg.eigvalsh(phi_hessian(f, x))[0, 0] == pytest.approx(-0.75)


def test_metrics_on_the_empirical_cosine_saddle():
    prob = make_minimax_problem({"n": 50, "s_A": 0.3, "s_b": 0.4}, np.random.default_rng(1))
    f = prob.info["minimax"]
    x = np.random.default_rng(2).standard_normal((4, 3))
    np.testing.assert_allclose(phi_at(f, x), f.phi_closed(x), atol=1e-12)
    np.testing.assert_allclose(phi_grad(f, x), _fd_grad(lambda z: f.phi_closed(z), x),
                               atol=1e-8)
    np.testing.assert_allclose(phi_hessian(f, x), _fd_hessian(f, x), atol=1e-7)


def test_metrics_on_matrix_sensing():
    """Phi = (1/(2n)) sum r_i^2; (U, V) = 0 is stationary with lambda_min = -sigma_max(M),
    M = (1/n) sum_i b_i A_i (notes TP2); the Schur Hessian matches finite differences."""
    prob = make_minimax_problem({"problem": "matrix_sensing", "n": 40, "ms_p": 3, "ms_q": 2,
                                 "ms_rank": 2}, np.random.default_rng(0))
    f = prob.info["minimax"]
    assert isinstance(f, MatrixSensingObjective)
    zero = np.zeros((1, 10))
    assert grad_norm_phi(prob, zero, {})[0] == pytest.approx(0.0, abs=1e-14)
    assert min_eig_phi(prob, zero, {})[0] == pytest.approx(prob.info["saddle_lambda_min"],
                                                           rel=1e-10)
    x = np.random.default_rng(3).standard_normal((3, 10))
    np.testing.assert_allclose(phi_at(f, x), f.phi_closed(x), rtol=1e-12)
    np.testing.assert_allclose(phi_grad(f, x), _fd_grad(lambda z: f.phi_closed(z), x),
                               atol=1e-7)
    np.testing.assert_allclose(phi_hessian(f, x), _fd_hessian(f, x), atol=1e-6)


def test_inner_solver_on_a_binding_ball():
    """With Y a small ball, y*(x) is the projection of (A x - b)/mu (f is an isotropic
    quadratic in y); the Hessian of Phi is undefined (NaN) there."""
    f = CosineObjective(1.0, 1.0, 0.5 * np.eye(3), np.zeros(3), y_radius=0.1)
    x = np.array([[0.1, 0.0, 0.0], [2.0, 1.0, -1.0]])
    y, interior = inner_argmax(f, x)
    assert interior.tolist() == [True, False]
    np.testing.assert_allclose(y, f.y_star_closed(x), atol=1e-11)
    H = phi_hessian(f, x)
    assert np.all(np.isfinite(H[0])) and np.all(np.isnan(H[1]))


def test_certificate_column_and_exact_gradients_are_explicit():
    """``certificate`` appends Algorithm 2's line-19 flag as a last column; ``exact_gradients``
    reads every gradient through ``cur.exact`` (the accountant then reports epsilon = inf)
    and is refused by the printed variants."""
    t = resolve("dp_rgda:sound")
    p = t.algorithm.params("sound", {"s_A": 0.0, "s_b": 0.0, "S1": 20, "S2": 20, "n": 20,
                                     "T": 40, "r": 0.0, "exact_gradients": True,
                                     "certificate": True})
    out, cur = run_target(t, p, build_problem(t, p, 0), trials=3, rng=0)
    assert out.shape == (3, 4)
    np.testing.assert_array_equal(out, [[0.0, 0.0, 0.0, 1.0]] * 3)  # the saddle, certified
    assert {r.mechanism for r in cur.ledger} == {"exact"}
    assert math.isinf(account_ledger(cur.ledger, 1e-5, "replace_one").epsilon)
    plain, _ = run_target(t, {**p, "certificate": False, "exact_gradients": False},
                          build_problem(t, p, 0), trials=3, rng=0)
    assert plain.shape == (3, 3)
    tp = resolve("dp_rgda:paper")
    pp = tp.algorithm.params("paper", {"exact_gradients": True})
    with pytest.raises(InputError, match="exact_gradients"):
        run_target(tp, pp, build_problem(tp, pp, 0), trials=1, rng=0)


# The baselines of Table 2 ------------------------------------------------------------------


def test_phi_model_gradients_are_those_of_the_per_record_value():
    """l_i(x) = max_{y_i} F_i = r_i(x)^2/2 (Section 5.1): PhiModel's per-sample gradients
    match finite differences of r_i^2/2, and their mean is grad Phi of the closed form."""
    import array_api_compat.numpy as xp

    from algorithms.paper003.spider import PhiModel

    prob = make_minimax_problem({"problem": "matrix_sensing", "n": 30, "ms_p": 3, "ms_q": 2,
                                 "ms_rank": 2}, np.random.default_rng(0))
    f, s = prob.info["minimax"], setting_of(prob.setting())
    x = np.random.default_rng(1).standard_normal((2, s.d1))
    gx, gy = PhiModel(s.model).per_sample(xp, prob.data.X, x, np.zeros((2, 0)))
    assert gy.shape == (2, 30, 0)
    fd = _fd_grad(lambda z: 0.5 * f.residuals(z)[:, 4] ** 2, x)
    np.testing.assert_allclose(gx[:, 4], fd, atol=1e-7)
    np.testing.assert_allclose(gx.mean(axis=1), phi_grad(f, x), atol=1e-10)


def test_minimisation_baseline_is_gradient_descent_on_phi_without_noise():
    """Sto-SPIDER with exact gradients, full batches and a refresh every step is plain
    gradient descent on the explicit Phi (line 354); it refuses the cosine problem, whose
    Phi_S is not a mean over records."""
    t = resolve("sto_spider:sound")
    p = t.algorithm.params("sound", {"n": 30, "ms_p": 3, "ms_q": 2, "ms_rank": 2, "T": 5,
                                     "q": 1, "S1": None, "S2": None, "clip": 1e9,
                                     "eta_x": 0.05, "exact_gradients": True})
    prob = build_problem(t, p, 0)
    out, cur = run_target(t, p, prob, trials=2, rng=0)
    x = np.repeat(prob.setting()["minimax_setting"].x0[None], 2, axis=0)
    for _ in range(5):
        x = x - 0.05 * phi_grad(prob.info["minimax"], x)
    np.testing.assert_allclose(np.asarray(out), x, atol=1e-10)
    assert {r.mechanism for r in cur.ledger} == {"exact"}
    with pytest.raises(InputError, match="matrix_sensing"):
        pc = t.algorithm.params("sound", {"problem": "cosine", "n": 30, "T": 2})
        run_target(t, pc, build_problem(t, pc, 0), trials=1, rng=0)
