"""The tree mechanism (binary counting mechanism) as a curator primitive.

A stream of leaf vectors v_1, v_2, ..., each a query on its own batch of records, is
released as noisy prefix sums S_p = v_1 + ... + v_p (Dwork, Naor, Pitassi, Rothblum 2010;
Chan, Shi, Song 2011). Every node of the binary tree over the leaves is ONE Gaussian
release through ``cur.gaussian``, of the sum of the leaves below it, on the union of their
batches. The ledger therefore charges a record only for the nodes above its leaf, at most
``tree_levels(length) = floor(log2 length) + 1`` of them, and parallel composition across
disjoint leaves does the rest (:func:`dpverify.accounting.accountant.ledger_events`).
Prefix sums are
sums of released nodes: post-processing.

Only the nodes a prefix sum needs are released, lazily: after leaf p, the dyadic block
ending at p (p - lowbit(p) + 1, p). Leaf 1 lies below one such node per level, so the worst
record is charged exactly ``tree_levels`` nodes, as in the full tree.

``mode="paper"`` reproduces Algorithm 1 of Kornowski, Liu, Talwar (paper 001) as printed
and as Algorithms 3 and 5 index it, ``TREE(t mod Sigma)``: the noise of NODE(q) is added for
q = p mod length, and whatever part of the prefix sum those nodes do not cover is released
through ``cur.exact`` (it reaches the output with no noise), so the accountant sees it.

Examples
--------
>>> from dpverify.core.curator import Curator
>>> from dpverify.core.data import Dataset
>>> cur = Curator(Dataset(np.arange(1.0, 5.0)[:, None], np.zeros(4)), rng=0)
>>> tree = TreeAggregator(cur, "sum", length=4, noise_std=0.0)
>>> [float(tree.add(lambda X, y, w: w @ X, cur.subset([j]), sensitivity=1.0)[0, 0])
...  for j in range(4)]
[1.0, 3.0, 6.0, 10.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import dp_accounting as dpa
import numpy as np

from dpverify.accounting.accountant import calibrate_gaussian
from dpverify.core.curator import AMPLIFIED, Batch, Curator, Query
from dpverify.core.errors import InputError, check_delta, check_epsilon, check_positive

Node = tuple[int, int]  # (u, v): the leaves u..v, 1-based and inclusive


def _device(a: Any) -> Any:
    from array_api_compat import device

    return device(a)


def tree_levels(length: int) -> int:
    """Levels of the binary tree over ``length`` leaves: floor(log2 length) + 1.

    It equals dp_accounting's ``ceil(log2(length + 1))`` for the tree aggregation event.

    Examples
    --------
    >>> [tree_levels(s) for s in (1, 2, 3, 4, 7, 8, 1600)]
    [1, 2, 2, 3, 3, 4, 11]
    """
    length = int(check_positive(length, "length", integer=True))
    return length.bit_length()


def dyadic_nodes(p: int) -> list[Node]:
    """The dyadic blocks that tile the prefix [1, p], largest first (the binary digits of p).

    Examples
    --------
    >>> dyadic_nodes(6), dyadic_nodes(8), dyadic_nodes(7)
    ([(1, 4), (5, 6)], [(1, 8)], [(1, 4), (5, 6), (7, 7)])
    """
    p = int(p)
    out, k = [], 0
    for b in range(p.bit_length() - 1, -1, -1):
        if k + (1 << b) <= p:
            out.append((k + 1, k + (1 << b)))
            k += 1 << b
    return out


def _ceil_log2(length: int) -> int:
    return (int(length) - 1).bit_length()  # ceil(log2 length), 0 for length 1


def paper_nodes(t: int, length: int) -> list[Node]:
    """Function NODE of Algorithm 1 (paper 001, lines 158-166) exactly as printed.

    It greedily adds blocks of 2^(ceil(log length) - i), i = 1..ceil(log length), so its
    largest block is half of 2^ceil(log length): NODE(length) misses the last leaf when
    ``length`` is a power of two, NODE(0) and every NODE at length 1 are empty.

    Examples
    --------
    >>> paper_nodes(8, 8), paper_nodes(1, 1), paper_nodes(0, 5)
    ([(1, 4), (5, 6), (7, 7)], [], [])
    """
    top = _ceil_log2(length)
    out, k = [], 0
    for i in range(1, top + 1):
        if k >= t:
            break
        kp = k + (1 << (top - i))
        if kp <= t:
            out.append((k + 1, kp))
            k = kp
    return out


def paper_tree_nodes(length: int) -> set[Node]:
    """The node set of Algorithm 1, line 2 (paper 001, line 152), as printed.

    Levels l = 1..floor(log2 length) with blocks of 2^(l-1) leaves: the blocks of size
    2^floor(log2 length) and larger, which NODE uses when ``length`` is not a power of two
    (e.g. (1, 4) for length 5), have no noise drawn for them.

    Examples
    --------
    >>> sorted(paper_tree_nodes(4))
    [(1, 1), (1, 2), (2, 2), (3, 3), (3, 4), (4, 4)]
    >>> (1, 4) in paper_tree_nodes(5), (1, 4) in paper_nodes(4, 5)
    (False, True)
    """
    out = set()
    for level in range(1, int(math.log2(length)) + 1 if length > 1 else 1):
        size = 1 << (level - 1)
        for j in range(length // size):
            out.add((j * size + 1, (j + 1) * size))
    return out


def uncovered_leaves(p: int, nodes: Sequence[Node]) -> list[int]:
    """Leaves of [1, p] that no node of ``nodes`` covers.

    Examples
    --------
    >>> uncovered_leaves(8, paper_nodes(8, 8)), uncovered_leaves(8, dyadic_nodes(8))
    ([8], [])
    """
    covered = set()
    for u, v in nodes:
        covered.update(range(u, v + 1))
    return [j for j in range(1, int(p) + 1) if j not in covered]


@dataclass
class _Leaf:
    query: Query
    batch: Batch
    sensitivity: float
    cache: dict = field(default_factory=dict)
    mask: Any = None  # the batch's weights on the backend, built on first use
    slots: Any = None  # the slots any trial's batch holds (backend index array)


class TreeAggregator:
    """Noisy prefix sums of a stream of leaf queries: one Gaussian release per tree node.

    Parameters
    ----------
    cur
        The curator every node is released through.
    name
        Release name prefix (nodes are ``{name}_node``, uncovered parts ``{name}_exact``).
    length
        Number of leaves the tree is built for (the period Sigma of paper 001).
    noise_std
        Standard deviation of the Gaussian noise of every node (per coordinate).
    mode
        ``"binary"``: the dyadic tree, every prefix tiled exactly. ``"paper"``: Algorithm 1
        of paper 001 as printed, indexed by ``t mod length`` as Algorithms 3 and 5 do.

    Notes
    -----
    A node's declared sensitivity is the largest of its leaves' (one record changes one
    leaf). Each leaf is evaluated once per world and reused by every node above it; its
    query receives the node's weights restricted to the leaf's batch.

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.ones((8, 1)), np.zeros(8)), rng=0)
    >>> tree = TreeAggregator(cur, "s", length=8, noise_std=1.0)
    >>> for j in range(8):
    ...     _ = tree.add(lambda X, y, w: w @ X, cur.subset([j]), sensitivity=1.0)
    >>> len(cur.ledger)  # one node per leaf: (1,1) (1,2) (3,3) (1,4) (5,5) (5,6) (7,7) (1,8)
    8
    >>> sum(r.touched[0].astype(int) for r in cur.ledger).tolist()  # nodes above each record
    [4, 3, 3, 2, 3, 2, 2, 1]
    """

    def __init__(self, cur: Curator, name: str, *, length: int, noise_std: float,
                 mode: str = "binary") -> None:
        if mode not in ("binary", "paper"):
            raise InputError(f"tree mode must be 'binary' or 'paper', got {mode!r}")
        self.cur = cur
        self.name = name
        self.length = int(check_positive(length, "length", integer=True))
        self.noise_std = float(noise_std)
        self.mode = mode
        self.leaves: list[_Leaf] = []
        self.released: dict[Node, Any] = {}

    @property
    def position(self) -> int:
        """Leaves added so far."""
        return len(self.leaves)

    def needed_nodes(self, p: int) -> list[Node]:
        """The nodes whose noisy sums make up the released prefix sum after leaf ``p``."""
        if self.mode == "binary":
            return dyadic_nodes(p)
        return paper_nodes(p % self.length, self.length)  # TREE(t mod Sigma), Alg 3 line 18

    def add(self, query: Query, batch: Batch, *, sensitivity: float) -> Any:
        """Append a leaf (``query`` on ``batch``) and return the noisy prefix sum up to it.

        ``sensitivity`` is the leaf's declared L2 sensitivity under the claim's relation.
        """
        if self.position >= self.length:
            raise InputError(f"tree {self.name!r} holds {self.length} leaves; start a new one")
        if batch.scheme in AMPLIFIED:
            raise InputError(f"tree leaves take fixed batches, not {batch.scheme!r} samples "
                             "(the tree's accounting credits no amplification)")
        self.leaves.append(_Leaf(query, batch, float(sensitivity)))
        p = self.position
        nodes = self.needed_nodes(p)
        total = None
        for node in nodes:
            if node not in self.released:
                self.released[node] = self._release_node(node)
            total = self.released[node] if total is None else total + self.released[node]
        missing = uncovered_leaves(p, nodes)
        if missing:
            exact = self.cur.exact(f"{self.name}_exact", self._sum_query(missing),
                                   batch=self._union(missing))
            total = exact if total is None else total + exact
        return total

    # internals ------------------------------------------------------------------------
    def _release_node(self, node: Node) -> Any:
        leaves = list(range(node[0], node[1] + 1))
        sens = max(self.leaves[j - 1].sensitivity for j in leaves)
        return self.cur.gaussian(f"{self.name}_node", self._sum_query(leaves),
                                 sensitivity=sens, noise_std=self.noise_std,
                                 batch=self._union(leaves))

    def _union(self, leaves: Sequence[int]) -> Batch:
        batches = [self.leaves[j - 1].batch for j in leaves]
        if len(batches) == 1:
            return batches[0]
        if any(b.scheme == "full" for b in batches):
            return self.cur.full_batch()
        w = np.maximum.reduce([b.weights for b in batches])
        size = sum(b.size or 0 for b in batches)
        return Batch("shuffle", w, size / self.cur.n, size)

    def _sum_query(self, leaves: Sequence[int]) -> Query:
        parts = [self._leaf_value(j) for j in leaves]

        def query(X: Any, y: Any, w: Any) -> Any:
            total = parts[0](X, y, w)
            for part in parts[1:]:
                total = total + part(X, y, w)
            return total

        return query

    def _leaf_value(self, j: int) -> Query:
        leaf = self.leaves[j - 1]
        xp = self.cur.xp
        if leaf.mask is None:
            leaf.mask = self.cur.backend.asarray(leaf.batch.weights)
            slots = np.flatnonzero(np.any(leaf.batch.weights > 0, axis=0))
            leaf.slots = xp.asarray(slots, device=_device(leaf.mask))

        def value(X: Any, y: Any, w: Any) -> Any:
            # One evaluation per world (and per set of weights the leaf sees): the nodes
            # above a leaf all reuse it, so a tree costs one pass over its leaves. The
            # weights are compared on the leaf's own slots only, which is all it reads.
            key = (id(X), id(y))
            sig = xp.take(w, leaf.slots, axis=1)
            hit = leaf.cache.get(key)
            if hit is not None and bool(xp.all(hit[0] == sig)):
                return hit[1]
            out = leaf.query(X, y, w * leaf.mask)
            leaf.cache[key] = (sig, out)
            return out

        return value


def binary_nodes(length: int) -> list[Node]:
    """The nodes :class:`TreeAggregator` releases in binary mode over ``length`` leaves.

    After leaf p, the dyadic block ending at p: (p - lowbit(p) + 1, p).

    Examples
    --------
    >>> binary_nodes(6)
    [(1, 1), (1, 2), (3, 3), (1, 4), (5, 5), (5, 6)]
    """
    return [(p - (p & -p) + 1, p) for p in range(1, int(length) + 1)]


def worst_leaf_load(sensitivities: Sequence[float]) -> float:
    """max over leaves j of sum over the binary nodes above j of (node sensitivity)^2.

    A node's sensitivity is the largest of its leaves'; a record in leaf j is charged one
    Gaussian release per node above it, and Gaussian releases compose to one Gaussian
    whose squared sensitivity-to-noise ratios add (Dong, Roth, Su 2022, Cor. 3.3).

    Examples
    --------
    >>> worst_leaf_load([1.0] * 8)  # leaf 1 lies below (1,1), (1,2), (1,4), (1,8)
    4.0
    >>> worst_leaf_load([1.0, 3.0, 3.0, 3.0])  # leaf 1: (1,1) of 1, (1,2) and (1,4) of 3
    19.0
    """
    sens = [float(v) for v in sensitivities]
    load = [0.0] * len(sens)
    for u, v in binary_nodes(len(sens)):
        s2 = max(sens[u - 1:v]) ** 2
        for j in range(u - 1, v):
            load[j] += s2
    return max(load)


def tree_noise_std(sensitivity: float | Sequence[float], length: int, *, epsilon: float,
                   delta: float) -> float:
    """Node noise making the binary tree (epsilon, delta)-DP.

    ``sensitivity`` is every leaf's L2 sensitivity, or a list of one per leaf (then
    ``length`` must match it). The worst record's node releases compose to one Gaussian
    with squared sensitivity :func:`worst_leaf_load`; its noise multiplier is calibrated
    by the PLD accountant (:func:`dpverify.accounting.accountant.calibrate_gaussian`).

    Examples
    --------
    >>> s = tree_noise_std(1.0, 50, epsilon=1.0, delta=1e-5)
    >>> round(s / math.sqrt(tree_levels(50)), 2)  # one Gaussian at mu = 0.268 (notes 001)
    3.73
    >>> tree_noise_std([1.0, 3.0, 3.0, 3.0], 4, epsilon=1.0, delta=1e-5) < 3 * s
    True
    """
    check_epsilon(epsilon)
    check_delta(delta, positive=True)
    length = int(check_positive(length, "length", integer=True))
    if isinstance(sensitivity, (int, float)):
        sens = [float(sensitivity)] * length
    else:
        sens = [float(v) for v in sensitivity]
        if len(sens) != length:
            raise InputError(f"{len(sens)} leaf sensitivities for a tree of {length} leaves")
    z = calibrate_gaussian(target_epsilon=float(epsilon), target_delta=float(delta))
    return z * math.sqrt(worst_leaf_load(sens))


def tree_dp_event(noise_multiplier: float, length: int | Sequence[int]) -> dpa.DpEvent:
    """dp_accounting's event for restarted trees over disjoint records.

    ``SingleEpochTreeAggregationDpEvent`` (Kairouz et al. 2021, App. D); dp_accounting's RDP
    accountant supports it only under ``REPLACE_SPECIAL`` neighbours.

    Examples
    --------
    >>> tree_dp_event(1.13, 1600)
    SingleEpochTreeAggregationDpEvent(noise_multiplier=1.13, step_counts=1600)
    """
    return dpa.SingleEpochTreeAggregationDpEvent(float(noise_multiplier), length)


def tree_epsilon_rdp(noise_multiplier: float, length: int | Sequence[int], delta: float,
                     orders: Sequence[float] | None = None) -> float:
    """Epsilon of :func:`tree_dp_event` by dp_accounting's RDP accountant (REPLACE_SPECIAL).

    Examples
    --------
    >>> tree_epsilon_rdp(8.83, 1600, 1e-6) < 2.04  # dp_accounting's own golden bound
    True
    """
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(orders=list(orders) if orders is not None else None,
                        neighboring_relation=dpa.NeighboringRelation.REPLACE_SPECIAL)
    return float(acc.compose(tree_dp_event(noise_multiplier, length)).get_epsilon(delta))
