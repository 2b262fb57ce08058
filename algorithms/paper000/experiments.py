"""What paper 000's experiments (Sec. 5, lines 253-291; App. D, lines 826-848) measure, on
data two cores can make or ship.

The paper trains ResNet20 on CIFAR10-ST, MNIST-ST, CelebA and Fashion-MNIST (lines
253-259); none is shipped here and none fits on two cores. Two stand-ins keep their shape,
an imbalanced training set and a balanced test set:

* ``groups`` (:func:`algorithms.paper000.problems.imbalanced_groups`): a majority and a
  small minority group whose labels follow another direction;
* ``digits_st``: scikit-learn's bundled digits (1797 images of 8x8) made "ST" as the paper
  makes MNIST-ST (line 255): digits 0-4 are class -1, 5-9 class +1, the positives
  subsampled to ``imratio`` in training, the test split balanced.

Each problem carries, for the harness only (never the algorithms), a balanced test set
and a holdout drawn like the training set (the same imbalance): Table 3's accuracy,
Figure 2's ROC-AUC and Figure 3's F1 are read on the test set; Table 2's membership
attack scores training records against the test set (the paper's protocol, whose
non-members differ in distribution from its members) and against the holdout (the same
distribution: the membership game the DP ceiling e^eps/(1 + e^eps) bounds).

The metrics, registered under the names below, score each trial's returned model x (the
first d coordinates of the output): ``test_accuracy``, ``test_auc``, ``test_f1``,
``mia_auc_testset``, ``mia_auc_samepool``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from dpverify.checks.rates import register_metric
from dpverify.core.data import Dataset
from dpverify.core.errors import InputError
from dpverify.core.registry import Problem

__all__ = ["DATASETS", "auc", "digits_st", "holdout_set", "balanced_split"]

#: The stand-ins a problem's ``data`` parameter names.
DATASETS = ("groups", "digits_st")
#: Records per class in the balanced test split of digits_st, and in its holdout.
TEST_PER_CLASS = 150
HOLDOUT = 150


def _unit_rows(A: np.ndarray) -> np.ndarray:
    """Rows scaled into the unit ball (the sigmoid loss's G = 1/4 needs ||a|| <= 1)."""
    nrm = np.linalg.norm(A, axis=1, keepdims=True)
    return A * ((1.0 - 1e-15) / np.maximum(nrm, 1e-300))


# The digits 0-4 and 5-9 of scikit-learn's digits (1,797 images).
DIGITS_ST_CLASSES = (901, 896)


def check_digits_st(n: int, imratio: float) -> None:
    """Refuse a Digits-ST draw its images cannot hold: ``imratio`` in (0, 0.5], and n
    training records at that ratio beside the test split and holdout.

    Examples
    --------
    >>> check_digits_st(500, 0.1)
    >>> try:
    ...     check_digits_st(1500, 0.1)
    ... except InputError as e:
    ...     print(str(e)[:62])
    digits_st has 901 negatives and 896 positives: n = 1500 at imr
    """
    if not 0.0 < imratio <= 0.5:
        raise InputError(f"imratio must be in (0, 0.5], got {imratio!r}")
    n_pos = max(1, int(round(imratio * n)))
    h_pos = max(1, int(round(imratio * HOLDOUT)))
    need = (TEST_PER_CLASS + n - n_pos + HOLDOUT - h_pos, TEST_PER_CLASS + n_pos + h_pos)
    neg, pos = DIGITS_ST_CLASSES
    if need[0] > neg or need[1] > pos:
        raise InputError(f"digits_st has {neg} negatives and {pos} positives: n = {n} at "
                         f"imratio {imratio} with the test split and holdout needs "
                         f"{need[0]} and {need[1]}")


def digits_st(n: int, rng: np.random.Generator, *, imratio: float = 0.1
              ) -> tuple[Dataset, Dataset, Dataset]:
    """Digits-ST: (training set of n records, balanced test set, holdout like training).

    Features: the 8x8 pixels pooled to 4x4, / 16, centred at the middle of their range (a
    public constant), and a constant 1 (the bias), each record scaled to unit norm: a
    per-record transform, so neighbouring datasets stay neighbours. Labels: +1 for 5-9
    (the positives, kept at a fraction ``imratio`` of the training set), -1 for 0-4.

    Examples
    --------
    >>> D, test, hold = digits_st(500, np.random.default_rng(0))
    >>> D.X.shape, float(np.mean(D.y > 0)), float(np.mean(test.y > 0)), hold.n
    ((500, 17), 0.1, 0.5, 150)
    """
    from sklearn.datasets import load_digits

    check_digits_st(n, imratio)
    pixels, digit = load_digits(return_X_y=True)
    # 2x2 average pooling (8x8 -> 4x4): a fixed per-record map, which leaves the private
    # methods a problem they can learn at n ~ 500 (65 dimensions they cannot, at eps <= 10)
    pooled = pixels.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4)).reshape(-1, 16)
    A = _unit_rows(np.hstack([pooled / 16.0 - 0.5, np.ones((len(digit), 1))]))
    y = np.where(digit >= 5, 1.0, -1.0)
    pos = rng.permutation(np.flatnonzero(y > 0))
    neg = rng.permutation(np.flatnonzero(y < 0))
    n_pos = max(1, int(round(imratio * n)))
    n_neg = n - n_pos
    h_pos = max(1, int(round(imratio * HOLDOUT)))
    test = np.concatenate([neg[:TEST_PER_CLASS], pos[:TEST_PER_CLASS]])
    neg, pos = neg[TEST_PER_CLASS:], pos[TEST_PER_CLASS:]
    train = rng.permutation(np.concatenate([neg[:n_neg], pos[:n_pos]]))
    hold = np.concatenate([neg[n_neg:n_neg + HOLDOUT - h_pos], pos[n_pos:n_pos + h_pos]])

    def ds(idx: np.ndarray) -> Dataset:
        return Dataset(A[idx], y[idx])

    return ds(train), ds(test), ds(hold)


def balanced_split(problem: Problem, rng: np.random.Generator | None = None) -> Dataset:
    """The problem's balanced test set (the ``nonmembers`` source of Table 2's protocol).

    Examples
    --------
    >>> from algorithms.paper000.problems import make_dual_problem
    >>> p = make_dual_problem({"n": 40, "d": 2, "divergence": "kl", "dro_lambda": 0.5},
    ...                       np.random.default_rng(0))
    >>> float(np.mean(balanced_split(p).y > 0)), balanced_split(p).n
    (0.5, 40)
    """
    return problem.info["test_set"]


def holdout_set(problem: Problem, rng: np.random.Generator | None = None) -> Dataset:
    """Records drawn like the training set but not in it (the same-pool non-members)."""
    return problem.info["holdout_set"]


def _models(problem: Problem, outputs: np.ndarray) -> np.ndarray:
    """Each trial's x: the first d coordinates (Algorithm 3 appends lambda)."""
    out = np.asarray(outputs, dtype=float)
    return out.reshape(out.shape[0], -1)[:, :problem.data.d]


def auc(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """P(score of a positive > score of a negative) + P(tie)/2, per row (Mann-Whitney).

    Examples
    --------
    >>> auc(np.array([[2.0, 3.0]]), np.array([[1.0, 2.0]])).tolist()
    [0.875]
    """
    pos, neg = np.atleast_2d(pos), np.atleast_2d(neg)
    greater = (pos[:, :, None] > neg[:, None, :]).mean(axis=(1, 2))
    ties = (pos[:, :, None] == neg[:, None, :]).mean(axis=(1, 2))
    return greater + 0.5 * ties


def _scores(problem: Problem, outputs: np.ndarray, data: Dataset) -> np.ndarray:
    return _models(problem, outputs) @ data.X.T  # (trials, records): a.x


def _confidence(problem: Problem, outputs: np.ndarray, data: Dataset) -> np.ndarray:
    # the model's confidence in the true label, sigma(y a.x): the attack's score (line 263)
    z = _scores(problem, outputs, data) * data.y[None, :]
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@register_metric("test_accuracy")
def accuracy_on_test(problem: Problem, outputs: np.ndarray, params: Mapping[str, Any]
                  ) -> np.ndarray:
    """Accuracy of sign(a.x) (a.x = 0 counts as -1) on the balanced test set (Table 3)."""
    test = balanced_split(problem)
    pred = np.where(_scores(problem, outputs, test) > 0, 1.0, -1.0)
    return np.mean(pred == test.y[None, :], axis=1)


@register_metric("test_auc")
def auc_on_test(problem: Problem, outputs: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """ROC-AUC of a.x for the positive class on the balanced test set (Figure 2)."""
    test = balanced_split(problem)
    s = _scores(problem, outputs, test)
    return auc(s[:, test.y > 0], s[:, test.y < 0])


@register_metric("test_f1")
def f1_on_test(problem: Problem, outputs: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """F1 of the positive (minority in training) class on the balanced test set (Figure 3)."""
    test = balanced_split(problem)
    pred = _scores(problem, outputs, test) > 0
    truth = (test.y > 0)[None, :]
    tp = np.sum(pred & truth, axis=1)
    fp = np.sum(pred & ~truth, axis=1)
    fn = np.sum(~pred & truth, axis=1)
    return np.where(tp > 0, 2.0 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)


def _mia(problem: Problem, outputs: np.ndarray, nonmembers: Dataset) -> np.ndarray:
    members = _confidence(problem, outputs, problem.data)
    return auc(members, _confidence(problem, outputs, nonmembers))


@register_metric("mia_auc_testset")
def mia_auc_testset(problem: Problem, outputs: np.ndarray, params: Mapping[str, Any]
                    ) -> np.ndarray:
    """Table 2's attack: confidence of training records against the balanced test set."""
    return _mia(problem, outputs, balanced_split(problem))


@register_metric("mia_auc_samepool")
def mia_auc_samepool(problem: Problem, outputs: np.ndarray, params: Mapping[str, Any]
                     ) -> np.ndarray:
    """The same attack against a holdout drawn like the training set (the DP game's pool)."""
    return _mia(problem, outputs, holdout_set(problem))


def dp_auc_ceiling(epsilon: float) -> float:
    """e^eps / (1 + e^eps): the most AUC an (eps, 0)-DP mechanism allows a membership test.

    Examples
    --------
    >>> round(dp_auc_ceiling(1.0), 3)
    0.731
    """
    return 1.0 / (1.0 + math.exp(-float(epsilon)))
