"""Per-sample losses: closed-form derivatives, Lipschitz and smoothness constants."""

from __future__ import annotations

import array_api_compat.numpy as xp
import numpy as np
import pytest

from algorithms.losses import LOSSES, get_loss
from dpverify.core.errors import InputError

# Margins include each loss's kinks (hinge at y z = 1 and 1 - h, Huber at |z - y| = 1).
Z = np.concatenate([np.linspace(-6.0, 6.0, 241), [0.5, 1.0, 2.0, -1.0, 1e-3]])
Y = np.array([-2.0, -1.0, -0.3, 0.0, 0.5, 1.0, 2.0])


def _grid(z=Z, y=Y):
    zz, yy = np.meshgrid(z, y)
    return zz.ravel(), yy.ravel()


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_dvalue_is_the_derivative_of_value(name):
    """Central differences with h = 1e-6: truncation error h^2 |f'''| away from kinks and at
    most h |jump of f''| / 4 at a kink, far below the tolerance."""
    loss = LOSSES[name]
    z, y = _grid()
    h = 1e-6
    numeric = (loss.value(z + h, y, xp) - loss.value(z - h, y, xp)) / (2 * h)
    closed = loss.dvalue(z, y, xp)
    assert closed.shape == z.shape
    np.testing.assert_allclose(closed, numeric, rtol=1e-6, atol=2e-6)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_dvalue_is_vectorized_over_trials(name):
    """(trials, n) margins against (n,) labels, as glm_coefficients calls it."""
    loss = LOSSES[name]
    z = np.random.default_rng(0).standard_normal((4, 9))
    y = np.sign(np.random.default_rng(1).standard_normal(9))
    out = loss.dvalue(z, y, xp)
    assert out.shape == (4, 9)
    np.testing.assert_allclose(out[2], loss.dvalue(z[2], y, xp))


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_lipschitz_constant_bounds_the_derivative(name):
    """|phi'(z, y)| <= lipschitz for labels in [-1, 1] (for the squared loss, also |z| <= 1)."""
    loss = LOSSES[name]
    zmax = 1.0 if name == "squared" else 50.0
    z, y = _grid(np.linspace(-zmax, zmax, 2001), np.linspace(-1.0, 1.0, 21))
    assert np.max(np.abs(loss.dvalue(z, y, xp))) <= loss.lipschitz * (1 + 1e-12)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_smoothness_constant_bounds_the_second_derivative(name):
    """|phi''| <= smoothness for labels in [-1, 1]: central differences of dvalue with
    h = 1e-5, whose error is far below the 1e-3 relative slack."""
    loss = LOSSES[name]
    z, y = _grid(np.linspace(-8.0, 8.0, 3201), np.linspace(-1.0, 1.0, 21))
    h = 1e-5
    second = (loss.dvalue(z + h, y, xp) - loss.dvalue(z - h, y, xp)) / (2 * h)
    assert np.max(np.abs(second)) <= loss.smoothness * (1 + 1e-3) + 1e-9


def test_logistic_is_stable_at_large_margins():
    loss = get_loss("logistic")
    z = np.array([-800.0, 800.0])
    y = np.array([1.0, 1.0])
    np.testing.assert_allclose(loss.value(z, y, xp), [800.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(loss.dvalue(z, y, xp), [-1.0, 0.0], atol=1e-12)


def test_get_loss():
    for name, loss in LOSSES.items():
        assert get_loss(name) is loss and loss.name == name
    with pytest.raises(InputError, match="unknown loss 'hinge'"):
        get_loss("hinge")
