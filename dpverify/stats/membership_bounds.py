"""What (epsilon, delta)-DP allows a membership-inference attack, and what an attack showed.

An attack on one target record is a test of "the model was trained with the record" (a
member) against "without it". Every (epsilon, delta)-DP mechanism keeps every such test in
the hypothesis-testing region (Kairouz, Oh, Viswanath 2015, Theorem 2.1)::

    FPR + e^eps FNR >= 1 - delta   and   FNR + e^eps FPR >= 1 - delta,

so with TPR = 1 - FNR the ROC curve of any attack lies under the ceiling

    f(x) = min(1, e^eps x + delta, 1 - e^-eps (1 - delta - x))           (x = FPR)

(the second term is the first inequality, the third the second). f is concave, so the
ceiling also holds for an attack on a record drawn at random from a pool: its ROC is an
average of per-record ROCs, each under f, and by Jensen's inequality the average lies under
f too.

Integrating f gives the largest area under the ROC curve (derived here, not quoted). The
two slanted pieces meet at x* = (1 - delta) / (e^eps + 1) and the third reaches 1 at
x = 1 - delta, so

    AUC <= int_0^x* (e^eps x + delta) dx + int_x*^(1-delta) (1 - e^-eps (1 - delta - x)) dx
           + delta
         = (1 - delta) (e^eps + delta) / (e^eps + 1) + delta,

which is e^eps / (1 + e^eps) at delta = 0. The largest advantage TPR - FPR (Yeom et al.
2018's membership advantage, for the balanced game: accuracy = (1 + advantage) / 2) is
f(x*) - x* = (1 - delta) tanh(eps / 2) + delta.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special, stats

from dpverify.core.errors import InputError


def tpr_ceiling(fpr: Any, epsilon: float, delta: float) -> np.ndarray:
    """The largest TPR an (epsilon, delta)-DP mechanism allows at false-positive rate ``fpr``.

    Kairouz, Oh, Viswanath 2015, Theorem 2.1, both inequalities of the region.

    Examples
    --------
    >>> float(np.round(tpr_ceiling(0.01, 1.0, 1e-5), 5))  # e * 0.01 + 1e-5
    0.02719
    >>> float(tpr_ceiling(0.5, 0.0, 0.0))  # no leak: the diagonal
    0.5
    """
    x = np.clip(np.asarray(fpr, dtype=float), 0.0, 1.0)
    with np.errstate(over="ignore"):
        a = math.exp(epsilon) if epsilon < 700 else math.inf
        lin = a * x + delta
        # 1 - e^-eps (1 - delta - x), which is >= 1 once x >= 1 - delta
        upper = 1.0 - math.exp(-epsilon) * (1.0 - delta - x)
    return np.minimum(1.0, np.minimum(lin, upper))


def auc_ceiling(epsilon: float, delta: float) -> float:
    """The largest area under the ROC curve of an attack on an (epsilon, delta)-DP mechanism.

    ``(1 - delta) (e^eps + delta) / (e^eps + 1) + delta``, the integral of
    :func:`tpr_ceiling` over [0, 1] (module docstring), written with the logistic
    function so that it does not overflow.

    Examples
    --------
    >>> round(auc_ceiling(1.0, 0.0), 6)  # e / (1 + e)
    0.731059
    >>> auc_ceiling(50.0, 1e-5) <= 1.0
    True
    """
    if epsilon < 0 or not (0.0 <= delta <= 1.0):
        raise InputError(f"need epsilon >= 0 and delta in [0, 1], got {epsilon}, {delta}")
    return float((1.0 - delta) * (special.expit(epsilon) + delta * special.expit(-epsilon))
                 + delta)


def advantage_ceiling(epsilon: float, delta: float) -> float:
    """The largest TPR - FPR (membership advantage) under (epsilon, delta)-DP.

    ``(1 - delta) tanh(eps / 2) + delta``: the ceiling's height above the diagonal where
    its two slanted pieces meet (module docstring). Balanced-game accuracy is at most
    ``(1 + advantage) / 2``.

    Examples
    --------
    >>> round(advantage_ceiling(1.0, 0.0), 6)  # (e - 1) / (e + 1)
    0.462117
    """
    return float((1.0 - delta) * math.tanh(epsilon / 2.0) + delta)


def roc_auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of a member > score of a non-member), ties counted half (Mann-Whitney U).

    Examples
    --------
    >>> roc_auc(np.array([2.0, 3.0]), np.array([1.0, 2.0]))
    0.875
    """
    pos = np.asarray(pos, dtype=float).ravel()
    neg = np.asarray(neg, dtype=float).ravel()
    if pos.size == 0 or neg.size == 0:
        return math.nan
    u = stats.mannwhitneyu(pos, neg, alternative="two-sided", method="asymptotic").statistic
    return float(u) / (pos.size * neg.size)


def tpr_at_fpr(pos: np.ndarray, neg: np.ndarray, fpr: float) -> float:
    """Empirical TPR of the best threshold whose empirical FPR is at most ``fpr``.

    The threshold is the (k+1)-th largest non-member score, k = floor(fpr * n_neg), and
    "member" means a score strictly above it, so at most k non-members are flagged.

    Examples
    --------
    >>> tpr_at_fpr(np.array([5.0, 4.0, 0.5]), np.arange(10.0) / 10, 0.1)  # 0.9 may be hit
    0.6666666666666666
    """
    pos = np.asarray(pos, dtype=float).ravel()
    neg = np.sort(np.asarray(neg, dtype=float).ravel())[::-1]
    if pos.size == 0 or neg.size == 0:
        return math.nan
    k = int(math.floor(fpr * neg.size + 1e-9))
    if k >= neg.size:
        return 1.0
    return float(np.mean(pos > neg[k]))


def auc_lower_bound(pos: np.ndarray, neg: np.ndarray, alpha: float) -> float:
    """A lower confidence bound on the AUC at level ``1 - alpha`` from iid scores.

    The AUC estimate is a two-sample U-statistic with a kernel in [0, 1], so
    P(AUC_hat - AUC >= t) <= exp(-2 min(m, n) t^2) (Hoeffding 1963, Section 5(b)); the
    bound is AUC_hat - sqrt(log(1 / alpha) / (2 min(m, n))), exact in finite samples.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> lo = auc_lower_bound(rng.normal(1, 1, 4000), rng.normal(0, 1, 4000), 0.05)
    >>> 0.71 < lo < 0.76   # the AUC of a unit shift is Phi(1 / sqrt 2) = 0.760
    True
    """
    pos = np.asarray(pos, dtype=float).ravel()
    neg = np.asarray(neg, dtype=float).ravel()
    k = min(pos.size, neg.size)
    if k == 0:
        return 0.0
    return max(0.0, roc_auc(pos, neg) - math.sqrt(math.log(1.0 / alpha) / (2.0 * k)))
