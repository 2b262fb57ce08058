"""Neighbouring pairs for the audits of paper 004's battery (``battery.py`` beside this).

An audit takes a user's pair as ``module:function`` called with no argument, so each size
the battery audits at has its own function here. Each returns the replace-one worst case of
a mean of L0-Lipschitz gradients (:func:`algorithms.kl_problems.opposed_pair`): the pair
on which the paper's declared ``L0/n`` (Lemma 8, line 406; Appendix D.2, line 658) is
exceeded by a factor of 2.
"""

from __future__ import annotations

from algorithms.kl_problems import opposed_pair
from dpverify.core.data import Dataset

__all__ = ["opposed_n100_d2", "opposed_n100_d5", "opposed_n1000_d1"]


def opposed_n100_d5() -> tuple[Dataset, Dataset]:
    """The opposed pair at the default dimension, n = 100.

    Examples
    --------
    >>> D, Dp = opposed_n100_d5()
    >>> D.n, D.d, float(D.X[0, -1]), float(Dp.X[0, -1])
    (100, 5, 100.0, -100.0)
    """
    return opposed_pair(100, 5)


def opposed_n100_d2() -> tuple[Dataset, Dataset]:
    """The opposed pair for the kappa < 2 KL Spider runs, n = 100, d = 2.

    Examples
    --------
    >>> opposed_n100_d2()[0].X.shape
    (100, 2)
    """
    return opposed_pair(100, 2)


def opposed_n1000_d1() -> tuple[Dataset, Dataset]:
    """The opposed pair for Algorithm 3 started at the data centre, n = 1000, d = 1.

    Examples
    --------
    >>> opposed_n1000_d1()[1].X.shape
    (1000, 1)
    """
    return opposed_pair(1000, 1)
