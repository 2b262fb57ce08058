"""The torch backend: construction, arrays, noise streams and autograd derivatives."""

from __future__ import annotations

from typing import Any

import array_api_compat.numpy as np_xp
import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")

from algorithms.losses import LOSSES, Huber, SmoothedHinge  # noqa: E402
from dpverify.core.backends import get_backend  # noqa: E402
from dpverify.core.backends.torch_backend import TorchBackend  # noqa: E402
from dpverify.core.curator import Curator  # noqa: E402
from dpverify.core.data import Dataset  # noqa: E402
from dpverify.core.errors import InputError  # noqa: E402

pytestmark = pytest.mark.torch
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Any:
    # The tensors here are small: intra-op threads only add synchronisation, which costs
    # several times the work itself when the cores are shared with other processes.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# construction ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["torch", "torch:cpu"])
def test_get_backend_by_name(spec: str) -> None:
    b = get_backend(spec)
    assert isinstance(b, TorchBackend)
    assert b.device.type == "cpu"
    assert b.dtype == torch.float64


def test_constructor_options() -> None:
    b = get_backend("torch", dtype="float32", noise="own", seed=3)
    assert b.dtype == torch.float32 and b.noise == "own" and b.seed == 3
    assert b.asarray(np.arange(3)).dtype == torch.float32


@pytest.mark.parametrize(
    "kwargs", [{"dtype": "float16"}, {"noise": "mine"}, {"device": "tpu"},
               {"device": "not a device"}],
)
def test_bad_options_are_input_errors(kwargs: dict) -> None:
    with pytest.raises(InputError):
        TorchBackend(**kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_gpu_is_an_input_error() -> None:
    with pytest.raises(InputError, match="CUDA is not available"):
        get_backend("torch:cuda")


# arrays ----------------------------------------------------------------------------------


def test_round_trip_and_passthrough() -> None:
    b = TorchBackend()
    a = np.array([[1.0, -2.5], [3.0, 4.0]])
    t = b.asarray(a)
    assert isinstance(t, torch.Tensor)
    np.testing.assert_array_equal(b.to_numpy(t), a)
    # A tensor with a graph must come back as plain numbers.
    g = t.clone().requires_grad_(True) * 2.0
    np.testing.assert_array_equal(b.to_numpy(g), 2.0 * a)
    np.testing.assert_array_equal(b.to_numpy([1.0, 2.0]), [1.0, 2.0])
    assert b.asarray(t) is t or torch.equal(b.asarray(t), t)


# noise -----------------------------------------------------------------------------------


def test_shared_noise_is_the_numpy_stream() -> None:
    b = TorchBackend(noise="shared")
    n = b.to_numpy(b.normal(np.random.default_rng(5), (3, 4)))
    np.testing.assert_array_equal(n, np.random.default_rng(5).standard_normal((3, 4)))
    lap = b.to_numpy(b.laplace(np.random.default_rng(6), (7,)))
    np.testing.assert_array_equal(lap, np.random.default_rng(6).laplace(0.0, 1.0, 7))


def test_own_noise_is_reproducible_and_not_numpys() -> None:
    a = TorchBackend(noise="own").normal(np.random.default_rng(1), (50,))
    b = TorchBackend(noise="own").normal(np.random.default_rng(1), (50,))
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    ref = np.random.default_rng(1).standard_normal(50)
    assert not np.allclose(a.numpy(), ref)
    # An explicit seed fixes the stream whatever the curator's generator.
    c = TorchBackend(noise="own", seed=9).normal(np.random.default_rng(1), (50,))
    d = TorchBackend(noise="own", seed=9).normal(np.random.default_rng(2), (50,))
    torch.testing.assert_close(c, d, rtol=0, atol=0)


def test_own_noise_reseeds_for_a_new_stream_and_continues_within_one() -> None:
    b = TorchBackend(noise="own")
    rng = np.random.default_rng(4)
    first = b.normal(rng, (5,))
    second = b.normal(rng, (5,))
    assert not torch.equal(first, second)  # one stream continues
    again = b.normal(np.random.default_rng(4), (5,))
    torch.testing.assert_close(again, first, rtol=0, atol=0)  # a new run starts afresh


@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["normal", "laplace"])
def test_own_noise_has_the_right_distribution(kind: str) -> None:
    # Fixed seed; under a correct sampler this fails with probability 1e-3 (KS level).
    b = TorchBackend(noise="own", seed=12)
    draws = b.to_numpy(getattr(b, kind)(np.random.default_rng(0), (20000,)))
    ref = stats.norm if kind == "normal" else stats.laplace
    assert stats.kstest(draws, ref.cdf).pvalue > 1e-3
    # A sampler off by 10% in scale is far outside what the test accepts at this size.
    assert stats.kstest(draws * 1.10, ref.cdf).pvalue < 1e-3


def test_curator_runs_on_torch() -> None:
    D = Dataset(np.ones((4, 2)), np.zeros(4))
    cur = Curator(D, trials=3, rng=0, backend="torch")
    ans = cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=0.0)
    assert isinstance(ans, torch.Tensor) and tuple(ans.shape) == (3, 2)
    assert float(ans[0, 0]) == 4.0


# derivatives -----------------------------------------------------------------------------


def _margins(loss: object, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random margins, large ones, and the kinks where a where-branch switches."""
    Z = np.concatenate([rng.normal(scale=3.0, size=(3, 40)), np.full((1, 40), 0.0)], axis=0)
    Z[0, :4] = [40.0, -40.0, 700.0, -700.0]  # overflow territory for a naive exp
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    if isinstance(loss, SmoothedHinge):  # m = y z at 1 and 1 - h
        Z[1, :2] = np.array([1.0, 1.0 - loss.h]) * y[:2]
    if isinstance(loss, Huber):  # r = z - y at +-delta
        Z[1, :2] = y[:2] + np.array([loss.delta, -loss.delta])
    return Z, y


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_autograd_coefficients_equal_the_closed_form(name: str, dtype: str) -> None:
    loss = LOSSES[name]
    Z, y = _margins(loss, np.random.default_rng(0))
    b = TorchBackend(dtype=dtype)
    got = b.to_numpy(b.glm_coefficients(loss, b.asarray(Z), b.asarray(y)))
    zt, yt = Z.astype(dtype), y.astype(dtype)
    want = loss.dvalue(zt.astype(float), yt.astype(float), np_xp)
    tol = 1e-14 if dtype == "float64" else 1e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert got.shape == Z.shape
    # One sample's margin (a 1-D call) gives the same.
    row = b.to_numpy(b.glm_coefficients(loss, b.asarray(Z[0]), b.asarray(y)))
    np.testing.assert_allclose(row, want[0], rtol=tol, atol=tol)


def test_coefficients_come_from_value_not_dvalue() -> None:
    class WrongDerivative(type(LOSSES["logistic"])):
        def dvalue(self, z: Any, y: Any, xp: Any) -> Any:
            raise AssertionError("the torch backend must not use the closed form")

    b = TorchBackend()
    Z = b.asarray(np.linspace(-2, 2, 10)[None])
    out = b.glm_coefficients(WrongDerivative(), Z, b.asarray(np.ones(10)))
    assert torch.all(out < 0)


def test_coefficients_are_per_sample_even_for_a_coupled_loss() -> None:
    # A (wrong) loss that sums over samples: per-sample grad sees each sample alone, so
    # the coupling cannot leak into another sample's coefficient.
    class Coupled:
        def value(self, z: Any, y: Any, xp: Any) -> Any:
            return xp.sum(z) ** 2

    b = TorchBackend()
    out = b.glm_coefficients(Coupled(), b.asarray([[1.0, 2.0]]), b.asarray([0.0, 0.0]))
    np.testing.assert_allclose(b.to_numpy(out), [[2.0, 4.0]])


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_per_sample_grads_match_glm_closed_form(name: str) -> None:
    loss = LOSSES[name]
    rng = np.random.default_rng(1)
    theta, X = rng.normal(size=(2, 3)), rng.normal(size=(6, 3))
    y = np.where(rng.random(6) < 0.5, -1.0, 1.0)
    b = TorchBackend()

    def fn(th: Any, x: Any, yi: Any, xp: Any) -> Any:
        return loss.value(xp.sum(th * x), yi, xp)

    got = b.to_numpy(b.per_sample_grads(fn, theta, X, y))
    want = loss.dvalue(theta @ X.T, y, np_xp)[:, :, None] * X[None]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    one = b.to_numpy(b.per_sample_grads(fn, theta[0], X, y))
    np.testing.assert_allclose(one, want[0], rtol=1e-12, atol=1e-12)


# CUDA ------------------------------------------------------------------------------------


@needs_cuda
def test_cuda_backend_round_trip_and_noise() -> None:
    b = get_backend("torch:cuda")
    t = b.asarray(np.arange(4.0))
    assert t.device.type == "cuda"
    np.testing.assert_array_equal(b.to_numpy(t * 2), 2 * np.arange(4.0))
    shared = b.to_numpy(b.normal(np.random.default_rng(0), (3,)))
    np.testing.assert_array_equal(shared, np.random.default_rng(0).standard_normal(3))
    own = get_backend("torch:cuda", noise="own", seed=1).normal(np.random.default_rng(0), (3,))
    assert own.device.type == "cuda"


@needs_cuda
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_cuda_autograd_coefficients(name: str) -> None:
    loss = LOSSES[name]
    Z, y = _margins(loss, np.random.default_rng(2))
    b = get_backend("torch:cuda")
    got = b.to_numpy(b.glm_coefficients(loss, b.asarray(Z), b.asarray(y)))
    np.testing.assert_allclose(got, loss.dvalue(Z, y, np_xp), rtol=1e-13, atol=1e-13)
