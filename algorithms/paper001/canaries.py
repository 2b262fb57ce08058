"""Neighbouring datasets for the audits of paper 001 (notes 001, Sections 6 and 7, N1).

Each function takes no argument and returns ``(D, D')``, the form an audit's
``neighbours = "algorithms.paper001.canaries:NAME"`` calls. The records are those of the
``absolute`` problem, f(x; (a, b)) = |<a, x> - b|: record 0 is the canary a = u, b = -B
with B = 10 above every |<a, x>| a run reaches from its start of norm 1 (its steps total
at most D T, below 3 in every configuration used), so f = <u, x> + B is linear there and
1-Lipschitz; every other record is (0, 0), f = 0, whose zero-order estimate is exactly 0
and adds no variance. The sizes are fixed here; a check using a pair runs at the same n
and d (its battery configuration says so).
"""

from __future__ import annotations

import numpy as np

from dpverify.core.data import Dataset

#: Label of the canary record: f = <u, x> + CANARY_OFFSET where the runs go.
CANARY_OFFSET = 10.0
#: n and d of :func:`linear_canary_pair`.
LINEAR_PAIR_SIZE = (20, 3)
#: n and d of :func:`linear_canary_null_pair`.
NULL_PAIR_SIZE = (10, 1)
#: n and d of :func:`tree_opposed_pair` (the tree mechanism's defaults).
TREE_PAIR_SIZE = (64, 2)


def _canary_data(n: int, d: int, a0: np.ndarray, b0: float) -> Dataset:
    X, y = np.zeros((n, d)), np.zeros(n)
    X[0], y[0] = a0, b0
    return Dataset(X, y)


def linear_canary_pair() -> tuple[Dataset, Dataset]:
    """N1: f = <u, x> + B in D, f = <-u, x> + B in D', alone among records f = 0.

    The canary's gradients are u and -u, 2L apart: the largest first-step difference a
    replace-one neighbour can make.

    Examples
    --------
    >>> D, Dp = linear_canary_pair()
    >>> D.n, D.d, D.X[0].tolist(), (Dp.X[0] + 0.0).tolist(), float(abs(D.X[1:]).sum())
    (20, 3, [1.0, 0.0, 0.0], [-1.0, 0.0, 0.0], 0.0)
    """
    n, d = LINEAR_PAIR_SIZE
    u = np.eye(d)[0]
    return (_canary_data(n, d, u, -CANARY_OFFSET), _canary_data(n, d, -u, -CANARY_OFFSET))


def linear_canary_null_pair() -> tuple[Dataset, Dataset]:
    """In one dimension, f = x + B in D against the background record f = 0 in D'.

    With d = 1 the sphere is {-1, +1}, so the zero-order estimate of a linear f is its
    slope exactly, whatever the directions: a full step moves by exactly L / n, the
    sensitivity Lemma 3.4 declares for Algorithm 4 (line 328), and a difference step by 0.
    The replayed privacy loss is then exactly Gaussian with the mu the printed noise buys on
    the declared sensitivities, which isolates the unstated O(.) constant of Lemma 4.3.

    Examples
    --------
    >>> D, Dp = linear_canary_null_pair()
    >>> D.X[:2, 0].tolist(), Dp.X[:2, 0].tolist(), bool(D.y[0] == Dp.y[0])
    ([1.0, 0.0], [0.0, 0.0], False)
    """
    n, d = NULL_PAIR_SIZE
    return (_canary_data(n, d, np.ones(d), -CANARY_OFFSET), _canary_data(n, d, np.zeros(d), 0.0))


def tree_opposed_pair() -> tuple[Dataset, Dataset]:
    """Record 0 is e_1 in D and -e_1 in D', the rest fixed unit rows: the first leaf moves by
    exactly its declared sensitivity 2C/B (C = 1), under floor(log2 Sigma) + 1 tree nodes.

    Examples
    --------
    >>> D, Dp = tree_opposed_pair()
    >>> (D.X[0] + Dp.X[0]).tolist(), bool(np.allclose(np.linalg.norm(D.X, axis=1), 1.0))
    ([0.0, 0.0], True)
    """
    n, d = TREE_PAIR_SIZE
    rows = np.random.default_rng(0).standard_normal((n, d))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    y = np.zeros(n)
    rows[0] = np.eye(d)[0]
    other = rows.copy()
    other[0] = -rows[0]
    return Dataset(rows, y), Dataset(other, y)


__all__ = ["CANARY_OFFSET", "linear_canary_null_pair", "linear_canary_pair",
           "tree_opposed_pair"]
