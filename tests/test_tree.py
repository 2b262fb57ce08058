"""The tree mechanism as a curator primitive: prefix sums, per-record charges, accounting
against dp_accounting's tree event, the printed Algorithm 1's gaps, noise statistics."""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest
import scipy.stats
from dp_accounting.rdp import RdpAccountant

from dpverify.accounting.accountant import account_ledger, ledger_events
from dpverify.core.curator import Curator
from dpverify.core.data import Dataset, NeighbourPair
from dpverify.core.errors import InputError
from dpverify.mechanisms.tree import (
    TreeAggregator,
    dyadic_nodes,
    paper_nodes,
    paper_tree_nodes,
    tree_epsilon_rdp,
    tree_levels,
    tree_noise_std,
    uncovered_leaves,
)


def sum_query(X, y, w):
    return w @ X


def _load(event) -> float:
    """sum of (sensitivity / noise)^2 over the Gaussian releases an event composes.

    Independent of how the ledger writes them (self-composed, or folded into one
    equivalent Gaussian): n releases of multiplier s compose to one of s / sqrt(n).
    """
    if isinstance(event, dpa.GaussianDpEvent):
        return event.noise_multiplier ** -2
    if isinstance(event, dpa.SelfComposedDpEvent):
        return event.count * _load(event.event)
    if isinstance(event, dpa.ComposedDpEvent):
        return sum(_load(e) for e in event.events)
    raise AssertionError(f"unexpected event {event}")


def _tree(length: int, *, per_leaf: int = 1, d: int = 3, noise: float = 0.0,
          trials: int = 1, mode: str = "binary", seed: int = 0):
    X = np.random.default_rng(seed).normal(size=(length * per_leaf, d))
    cur = Curator(Dataset(X, np.zeros(len(X))), trials=trials, rng=seed)
    tree = TreeAggregator(cur, "t", length=length, noise_std=noise, mode=mode)
    outs = [tree.add(sum_query, cur.subset(np.arange(j * per_leaf, (j + 1) * per_leaf)),
                     sensitivity=1.0) for j in range(length)]
    return X, cur, np.stack(outs, axis=1)  # (trials, length, d)


@pytest.mark.parametrize("length,per_leaf", [(1, 1), (5, 2), (8, 1), (13, 3)])
def test_prefix_sums_are_exact_with_zero_noise(length, per_leaf):
    X, cur, out = _tree(length, per_leaf=per_leaf, trials=2)
    leaf_sums = X.reshape(length, per_leaf, -1).sum(axis=1)
    np.testing.assert_allclose(out[0], np.cumsum(leaf_sums, axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(out[0], out[1])
    assert len(cur.ledger) == length  # one node per leaf, released lazily


def test_dyadic_nodes_tile_every_prefix():
    for length in range(1, 301):
        for p in range(1, length + 1):
            nodes = dyadic_nodes(p)
            assert uncovered_leaves(p, nodes) == []
            assert sum(v - u + 1 for u, v in nodes) == p  # disjoint
            assert len(nodes) <= tree_levels(length)


def test_printed_node_function_misses_what_the_notes_say():
    # Alg. 1 (lines 158-166): exact for p < Sigma, but NODE(Sigma) drops the last leaf when
    # Sigma is a power of two, and Sigma = 1 has no nodes at all.
    for length in range(2, 301):
        for p in range(1, length):
            assert uncovered_leaves(p, paper_nodes(p, length)) == []
    for k in range(1, 8):
        assert uncovered_leaves(2**k, paper_nodes(2**k, 2**k)) == [2**k]
    assert paper_nodes(1, 1) == [] and paper_nodes(0, 6) == []
    # line 152's node set lacks the block NODE uses for Sigma = 5
    assert (1, 4) in paper_nodes(4, 5) and (1, 4) not in paper_tree_nodes(5)


@pytest.mark.parametrize("length", [8, 13, 16])
def test_each_record_is_charged_one_node_per_level(length):
    _, cur, _ = _tree(length, noise=1.0)
    charges = sum(r.touched[0].astype(int) for r in cur.ledger)
    assert charges.max() == tree_levels(length) == math.floor(math.log2(length)) + 1
    assert charges[0] == tree_levels(length)  # the first leaf lies below (1, 2^b) for all b
    # noise = sensitivity = 1: the worst record's load is its number of nodes
    loads = [_load(e) for e in ledger_events(cur.ledger, "replace_one", "rdp")]
    assert max(loads) == pytest.approx(tree_levels(length), rel=1e-12)


@pytest.mark.parametrize("noise_multiplier,golden", [(1.13, 19.74), (8.83, 2.04)])
def test_ledger_accounting_matches_dp_accountings_tree_event(noise_multiplier, golden):
    # dp_accounting's test_compute_eps_tree: the StackOverflow setting of Kairouz et al.
    # 2021 (1600 steps, delta = 1e-6) has epsilon below 19.74 at noise multiplier 1.13 and
    # below 2.04 at 8.83. Its tree event needs REPLACE_SPECIAL; the ledger's worst record
    # must carry the same RDP under replace-one with the leaf's sensitivity declared.
    orders = [1 + x / 10 for x in range(1, 100)] + list(range(12, 64))
    _, cur, _ = _tree(1600, d=1, noise=noise_multiplier)
    worst = [RdpAccountant(orders, dpa.NeighboringRelation.REPLACE_ONE).compose(e)
             .get_epsilon(1e-6) for e in ledger_events(cur.ledger, "replace_one", "rdp")]
    theirs = tree_epsilon_rdp(noise_multiplier, 1600, 1e-6, orders)
    assert max(worst) == pytest.approx(theirs, rel=1e-9)
    assert theirs < golden
    if noise_multiplier > 5:  # the tight (PLD) answer is no larger (cheap at this noise)
        assert account_ledger(cur.ledger, 1e-6, "replace_one").epsilon <= theirs + 1e-6


def test_printed_tree_releases_the_period_end_without_noise():
    _, cur, _ = _tree(4, noise=1.0, mode="paper")
    exact = [r.index for r in cur.ledger if r.mechanism == "exact"]
    assert exact == [len(cur.ledger) - 1]  # TREE(4 mod 4) = TREE(0) = 0
    assert math.isinf(account_ledger(cur.ledger, 1e-5, "replace_one").epsilon)
    _, cur3, _ = _tree(3, noise=1.0, mode="paper")  # not a power of two: the same at p = 3
    assert [r.mechanism for r in cur3.ledger] == ["gaussian", "gaussian", "exact"]
    _, cur_one, _ = _tree(1, noise=1.0, mode="paper")
    assert [r.mechanism for r in cur_one.ledger] == ["exact"]


def test_printed_tree_outputs_prefix_plus_its_noise():
    X, cur, out = _tree(6, noise=0.0, mode="paper")
    np.testing.assert_allclose(out[0], np.cumsum(X, axis=0), atol=1e-12)


@pytest.mark.statistical
def test_tree_noise_has_popcount_variance():
    """E TREE(p) = 0 and Var TREE(p) = sigma^2 popcount(p) per coordinate (notes check 2).

    8 positions, each a two-sided chi-square test on 20000 zero-data trials at level
    1e-7, and a z-test of the mean at 1e-7: failure probability below 2e-6 (seed fixed).
    """
    trials, length, sigma = 20000, 8, 2.0
    cur = Curator(Dataset(np.zeros((length, 1)), np.zeros(length)), trials=trials, rng=7)
    tree = TreeAggregator(cur, "t", length=length, noise_std=sigma)
    for p in range(1, length + 1):
        out = tree.add(sum_query, cur.subset([p - 1]), sensitivity=1.0)[:, 0]
        var = sigma**2 * bin(p).count("1")
        stat = (trials - 1) * out.var(ddof=1) / var
        lo, hi = scipy.stats.chi2.ppf([0.5e-7, 1 - 0.5e-7], trials - 1)
        assert lo < stat < hi
        assert abs(out.mean()) / math.sqrt(var / trials) < scipy.stats.norm.isf(0.5e-7)


def test_replay_records_the_leaf_difference_in_every_node_above_it():
    X = np.random.default_rng(1).normal(size=(8, 2))
    pair = NeighbourPair.replace_one(Dataset(X, np.zeros(8)), 2, np.array([5.0, 5.0]), 0.0)
    cur = Curator.replay(pair, trials=2, rng=0)
    tree = TreeAggregator(cur, "t", length=8, noise_std=1.0)
    for j in range(8):
        tree.add(sum_query, cur.subset([j]), sensitivity=1.0)
    jump = np.linalg.norm(X[2] - 5.0)
    for rel, (u, v) in zip(cur.ledger.records, [(1, 1), (1, 2), (3, 3), (1, 4), (5, 5), (5, 6),
                                        (7, 7), (1, 8)], strict=True):
        expected = jump if u <= 3 <= v else 0.0
        np.testing.assert_allclose(rel.true_difference, expected, atol=1e-12)


def test_calibrated_noise_buys_the_target_epsilon():
    sens = [0.5] + [2.0] * 12
    sigma = tree_noise_std(sens, 13, epsilon=1.0, delta=1e-5)
    cur = Curator(Dataset(np.zeros((13, 1)), np.zeros(13)), rng=0)
    tree = TreeAggregator(cur, "t", length=13, noise_std=sigma)
    for j, s in enumerate(sens):
        tree.add(sum_query, cur.subset([j]), sensitivity=s)
    eps = account_ledger(cur.ledger, 1e-5, "replace_one").epsilon
    assert 0.99 < eps <= 1.0 + 1e-3


def test_refuses_leaves_beyond_its_length_and_sampled_batches():
    cur = Curator(Dataset(np.zeros((4, 1)), np.zeros(4)), rng=0)
    tree = TreeAggregator(cur, "t", length=1, noise_std=1.0)
    tree.add(sum_query, cur.subset([0]), sensitivity=1.0)
    with pytest.raises(InputError):
        tree.add(sum_query, cur.subset([1]), sensitivity=1.0)
    tree2 = TreeAggregator(cur, "t", length=2, noise_std=1.0)
    with pytest.raises(InputError):
        tree2.add(sum_query, cur.sample("poisson", rate=0.5), sensitivity=1.0)
