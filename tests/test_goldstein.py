"""The Goldstein stationarity metric: exact on known cases, upper >= lower on every
piecewise-linear test problem, the hull solver against a generic QP."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

from algorithms.paper001.problems import (
    PROBLEMS,
    MaxAffineDifference,
    PiecewiseLinearGLM,
    make_problem,
)
from dpverify.checks.rates.goldstein import (
    GoldsteinSettings,
    certified_lower,
    goldstein,
    goldstein_bounds,
    goldstein_lower,
    min_norm_in_hull,
)
from dpverify.core.data import Dataset
from dpverify.core.registry import Problem


def _abs_problem(d: int = 1) -> Problem:
    """F(x) = |x_1|: the amplitude loss | |<a, x>| - b | with a = e_1 and b = 0."""
    X = np.zeros((1, d))
    X[0, 0] = 1.0
    data = Dataset(X, np.zeros(1))
    return Problem(data=data, loss=PiecewiseLinearGLM("amplitude"), info={"population": data})


@pytest.mark.parametrize("alpha", [1e-3, 0.1, 1.0])
def test_abs_at_its_kink_is_stationary_for_every_radius(alpha):
    bd = goldstein_bounds(_abs_problem(), np.zeros((1, 1)), alpha)
    assert abs(bd.upper[0]) < 1e-12 and abs(bd.lower[0]) < 1e-12


def test_abs_away_from_its_kink_has_norm_one_and_in_two_dimensions_too():
    bd = goldstein_bounds(_abs_problem(), np.array([[1.0], [-2.0]]), 0.5)
    np.testing.assert_allclose(bd.upper, 1.0, atol=1e-12)
    np.testing.assert_allclose(bd.lower, 1.0, atol=1e-12)
    # the ball crosses the kink: stationary; it stops just short of it: norm one
    x = np.array([[0.3 - 1e-6, 5.0], [0.3 + 1e-6, 0.0]])
    bd2 = goldstein_bounds(_abs_problem(2), x, 0.3)
    np.testing.assert_allclose(bd2.lower, [0.0, 1.0], atol=1e-9)
    np.testing.assert_allclose(bd2.upper, [0.0, 1.0], atol=1e-9)
    # the closed ball touches the kink, whose subdifferential [-1, 1] e_1 then counts
    assert goldstein_lower(PiecewiseLinearGLM("amplitude"), np.eye(1), np.zeros(1),
                           np.array([[0.3]]), 0.3)[0] == 0.0


@pytest.mark.parametrize("kind", PROBLEMS)
@pytest.mark.parametrize("n", [1, 7, 150])
def test_upper_bound_is_never_below_the_lower_bound(kind, n):
    prob = make_problem({"problem": kind, "n": n, "d": 3}, np.random.default_rng(n))
    x = np.random.default_rng(100 + n).normal(scale=0.4, size=(6, 3))
    for r in (0.05, 0.3):
        bd = goldstein_bounds(prob, x, r, GoldsteinSettings(samples=128))
        assert np.all(np.isfinite(bd.lower)) and np.all(bd.lower >= 0)
        assert np.all(bd.upper >= bd.lower - 1e-9), (bd.upper, bd.lower)


@pytest.mark.parametrize("kind", ["amplitude", "capped", "relu"])
def test_bounds_coincide_for_one_record(kind):
    # With one record the slope interval is exactly d_r f (a segment), and the sampled
    # gradients next to its kinks reach both ends of it.
    prob = make_problem({"problem": kind, "n": 1, "d": 3}, np.random.default_rng(3))
    x = np.random.default_rng(4).normal(scale=0.5, size=(8, 3))
    bd = goldstein_bounds(prob, x, 0.4)
    np.testing.assert_allclose(bd.upper, bd.lower, atol=1e-9)


def test_lower_bound_of_a_max_affine_difference_at_a_smooth_point():
    W = np.array([[1.0, 0.0], [0.0, 1.0]])
    f = MaxAffineDifference(W, np.array([[0.5, 0.5]]))
    x = np.array([[3.0, 0.0]])  # piece 1 active in the whole ball of radius 0.5
    low = goldstein_lower(f, np.zeros((1, 2)), np.zeros(1), x, 0.5)
    np.testing.assert_allclose(low, np.linalg.norm([0.5, -0.5]), atol=1e-12)


def test_min_norm_point_matches_a_generic_qp():
    rng = np.random.default_rng(0)
    for _ in range(20):
        N, d = rng.integers(2, 12), rng.integers(1, 5)
        G = rng.normal(loc=rng.normal(size=d), size=(N, d))
        res = scipy.optimize.minimize(
            lambda lam, G=G: float(np.sum((G.T @ lam) ** 2)), np.full(N, 1.0 / N),
            method="SLSQP", bounds=[(0, 1)] * N,
            constraints=[{"type": "eq", "fun": lambda lam: lam.sum() - 1.0}],
            options={"ftol": 1e-14, "maxiter": 500})
        ours = min_norm_in_hull(G)
        assert np.linalg.norm(ours) <= np.sqrt(res.fun) + 1e-7
        assert np.linalg.norm(ours) == pytest.approx(np.sqrt(res.fun), abs=1e-5)


def test_certified_lower_bound_of_a_box_is_its_distance():
    def box(u):  # [1, 2] x [-1, 3]: the vertex minimising <u, .>
        return np.array([1.0 if u[0] > 0 else 2.0, -1.0 if u[1] > 0 else 3.0])

    assert certified_lower(box, np.array([1.0, 1.0])) == pytest.approx(1.0, abs=1e-9)


def test_metric_plugin_measures_at_twice_alpha():
    prob = make_problem({"problem": "relu", "n": 60, "d": 2}, np.random.default_rng(1))
    x = np.random.default_rng(2).normal(size=(4, 2))
    params = {"alpha": 0.1, "stationarity_of": "population"}
    got = goldstein(prob, x, params)
    want = goldstein_bounds(prob, x, 0.2, GoldsteinSettings(on="population")).upper
    assert got.shape == (4,)
    np.testing.assert_allclose(got, want)
    emp = goldstein(prob, x, {"alpha": 0.1, "stationarity_of": "empirical"})
    np.testing.assert_allclose(emp, goldstein_bounds(prob, x, 0.2).upper)
