"""The NumPy fast path of the clipped gradient sum and the curator's shared full batch.

They exist for speed only: every number must be bit-identical to the plain Array API
formula (written out below as the reference), for every loss, both float types, clipping
that binds or not, non-finite records with and without the guard, sampled batches and
replay on neighbours.
"""

from __future__ import annotations

from typing import Any

import array_api_compat.numpy as xp
import numpy as np
import pytest

from algorithms.losses import LOSSES
from algorithms.problems import clipped_grad_sum
from dpverify.core.backends.base import NumpyBackend
from dpverify.core.curator import Curator
from dpverify.core.data import Dataset, NeighbourPair


def reference_query(loss: Any, theta: Any, clip: float | None, guard: bool):
    """sum_i w_i clip_C(phi'(x_i . theta, y_i) x_i), the generic formula step by step."""

    def query(X: Any, y: Any, w: Any) -> Any:
        if guard:
            ok = xp.all(xp.isfinite(X), axis=1) & xp.isfinite(y)
            X = xp.where(ok[:, None], X, xp.zeros_like(X))
            y = xp.where(ok, y, xp.zeros_like(y))
            w = w * xp.astype(ok, w.dtype)
        coef = loss.dvalue(theta @ X.T, y, xp)
        if clip is not None:
            norms = xp.abs(coef) * xp.linalg.vector_norm(X, axis=1)
            factor = xp.where(norms > clip, clip / xp.where(norms > clip, norms, 1.0), 1.0)
            coef = coef * factor
        return (w * coef) @ X

    return query


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fast_clipped_sum_is_bit_identical(loss_name: str, dtype: str) -> None:
    loss = LOSSES[loss_name]
    rng = np.random.default_rng([sorted(LOSSES).index(loss_name), dtype == "float32"])
    n, d, K = 40, 3, 5
    for clip, real_labels in ((None, False), (5.0, False), (0.3, False), (0.02, False),
                              (None, True), (0.3, True)):
        for nan_row in (False, True):
            for guard in (True, False):
                X = rng.standard_normal((n, d)) * rng.uniform(0.1, 3.0, (n, 1))
                y = np.sign(rng.standard_normal(n))
                if real_labels:  # not +-1: the logistic shortcut through y/2 must not apply
                    y *= rng.uniform(0.5, 2.0, n)
                if nan_row:
                    X[2, 1] = np.nan
                D = Dataset(X, y, allow_nonfinite=nan_row)
                for mode in ("full", "poisson", "replace", "add_remove"):
                    b = NumpyBackend(dtype)
                    if mode == "replace":
                        pair = NeighbourPair(D, D.replaced(4, np.full(d, 9.0), 1.0),
                                             "replace_one", 4)
                    elif mode == "add_remove":
                        pair = NeighbourPair.add_remove(D, 4)
                    if mode in ("replace", "add_remove"):
                        cur = Curator.replay(pair, trials=K, rng=1, backend=b)
                        ref = Curator.replay(pair, trials=K, rng=1, backend=b)
                    else:
                        cur = Curator(D, trials=K, rng=1, backend=b)
                        ref = Curator(D, trials=K, rng=1, backend=b)
                    theta = b.asarray(rng.standard_normal((K, d)) * 2.0)
                    outs = []
                    for c, q in ((cur, clipped_grad_sum(cur, loss, theta, clip,
                                                        guard_nonfinite=guard)),
                                 (ref, reference_query(loss, theta, clip, guard))):
                        batch = c.sample("poisson", rate=0.5) if mode == "poisson" \
                            else c.full_batch()
                        with np.errstate(all="ignore"):
                            v = c.gaussian("g", q, sensitivity=1.0, noise_std=0.5, batch=batch)
                        rel = c.ledger.records[0]
                        outs.append((v, rel.value_D, rel.value_D_prime))
                    for a, r in zip(outs[0], outs[1], strict=True):
                        if r is None:
                            assert a is None
                            continue
                        assert a.dtype == r.dtype
                        assert np.array_equal(a, r, equal_nan=True), (clip, nan_row, guard,
                                                                      mode)


def test_full_batch_weights_are_shared_and_read_only(small_data: Dataset) -> None:
    cur = Curator(small_data, trials=3, rng=0)
    b1, b2 = cur.full_batch(), cur.full_batch()
    assert b1.weights is b2.weights and b1.weights.shape == (3, small_data.n)
    assert np.all(b1.weights == 1.0)
    with pytest.raises(ValueError):
        b1.weights[0, 0] = 0.0
    seen = []
    cur.gaussian("s", lambda X, y, w: seen.append(cur.all_ones(w)) or w @ X,
                 sensitivity=1.0, noise_std=0.0)
    assert seen == [True]
    assert cur.ledger.records_touched == small_data.n
    # A sampled batch is not all ones; under add/remove replay, one world lacks a record.
    cur.gaussian("s", lambda X, y, w: seen.append(cur.all_ones(w)) or w @ X,
                 sensitivity=1.0, noise_std=0.0, batch=cur.sample("poisson", rate=0.5))
    rep = Curator.replay(NeighbourPair.add_remove(small_data, 0), trials=2, rng=0)
    rep.gaussian("s", lambda X, y, w: seen.append(rep.all_ones(w)) or w @ X,
                 sensitivity=1.0, noise_std=0.0)
    assert seen == [True, False, True, False]
    assert rep.ledger.records_touched == small_data.n
