"""Test problems of paper 000: DRO of a nonconvex GLM on synthetic imbalanced groups.

The paper trains ResNet20 on CIFAR10-ST, MNIST-ST, CelebA and Fashion-MNIST (Sec. 5,
lines 253-259), none of which fits on two cores. :func:`imbalanced_groups` draws the
structure those datasets share: a majority group and a small minority group whose labels
follow a different direction, so ERM fits the majority and DRO must up-weight the
minority. The loss is the sigmoid loss l(x; (a, y)) = 1 / (1 + exp(y a.x)) with ||a|| <= 1:
nonconvex, l in [0, 1], G = 1/4-Lipschitz and 1/(6 sqrt 3)-smooth (Assumption 1, line 112),
which are the public constants the algorithms use.

Two objectives, both evaluated here non-privately for the gradient-norm metric:

* the psi-divergence dual (3) (line 128): Psi(x) = min_eta (lambda/n) sum psi*((l_i - eta) /
  lambda) + eta; by Danskin grad Psi(x) = (1/n) sum (psi*)'(a_i*) grad l_i at the optimal eta
  (found by bisection on the monotone optimality condition mean (psi*)'(a) = 1); for KL,
  eta* = lambda log mean e^(l/lambda) in closed form. Psi equals F of (2) by strong duality,
  so ||grad Psi|| is the quantity of Theorems 2 and 7 (lines 175, 482).
* the KL-constrained compositional form (5) (line 192): Psi(x, lambda) = lambda log mean
  e^(l/lambda) + lambda rho over lambda >= lambda_0, whose stationarity measure is the
  projected gradient (Theorems 4 and 8, lines 225, 653).

All exponentials go through log-sum-exp, so lambda = 1e-3 (line 259) does not overflow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.special

from algorithms.losses import get_loss
from algorithms.paper000.divergences import get_divergence
from dpverify.core.data import Dataset
from dpverify.core.errors import InputError
from dpverify.core.registry import Problem


def _np_xp() -> Any:
    import array_api_compat.numpy as xp

    return xp


def imbalanced_groups(n: int, d: int, rng: np.random.Generator, *,
                      minority: float = 0.1) -> tuple[Dataset, dict[str, Any]]:
    """Two groups with different label directions; features in the unit ball.

    A fraction ``minority`` of the records (at least one) forms the minority group, whose
    features are shifted along a direction of their own and whose labels follow a direction
    orthogonal to the majority's. Labels are y = sign(4 a.w_g + noise/2) in {-1, +1}.

    Examples
    --------
    >>> D, info = imbalanced_groups(50, 3, np.random.default_rng(0))
    >>> D.X.shape, int(info["group"].sum()), bool(np.all(np.linalg.norm(D.X, axis=1) <= 1))
    ((50, 3), 5, True)
    """
    n_min = max(1, int(round(minority * n)))
    group = np.zeros(n, dtype=int)
    group[rng.choice(n, size=n_min, replace=False)] = 1
    w_maj = rng.standard_normal(d)
    w_maj /= np.linalg.norm(w_maj)
    other = rng.standard_normal(d)
    if d > 1:
        other -= (other @ w_maj) * w_maj
        w_min = other / np.linalg.norm(other)
    else:
        w_min = -w_maj
    data = _group_records(group, w_maj, w_min, rng)
    return data, {"group": group, "w_majority": w_maj, "w_minority": w_min}


def _group_records(group: np.ndarray, w_maj: np.ndarray, w_min: np.ndarray,
                   rng: np.random.Generator) -> Dataset:
    n, d = group.size, w_maj.size
    A = rng.standard_normal((n, d)) / math.sqrt(d)
    A[group == 1] += 0.5 * w_min
    nrm = np.linalg.norm(A, axis=1, keepdims=True)
    A *= np.where(nrm > 1.0, (1.0 - 1e-15) / nrm, 1.0)  # ||a|| <= 1 exactly, after rounding
    w = np.where(group[:, None] == 1, w_min[None, :], w_maj[None, :])
    logits = 4.0 * np.sum(A * w, axis=1) + 0.5 * rng.standard_normal(n)
    return Dataset(A, np.where(logits >= 0, 1.0, -1.0))


def balanced_test_set(problem: Problem, rng: np.random.Generator) -> Dataset:
    """A held-out test set of the problem's two groups, balanced as the paper's test splits.

    Same group directions as the training records (``problem.info``), but half the records
    in the minority group, as MNIST-ST's balanced test split (imratio 0.5, Sec. 5) against
    its imbalanced training set; n records. The ``nonmembers`` source of the membership
    check that reproduces Table 2's protocol (non-members from the test set).

    Examples
    --------
    >>> p = make_dual_problem({"n": 40, "d": 2, "divergence": "kl", "dro_lambda": 0.5},
    ...                       np.random.default_rng(0))
    >>> T = balanced_test_set(p, np.random.default_rng(1))
    >>> T.n, T.d
    (40, 2)
    """
    info = problem.info
    n = problem.data.n
    group = np.zeros(n, dtype=int)
    group[rng.choice(n, size=n // 2, replace=False)] = 1
    return _group_records(group, np.asarray(info["w_majority"]),
                          np.asarray(info["w_minority"]), rng)


def _losses(loss: Any, data: Dataset, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    xp = _np_xp()
    Z = np.atleast_2d(theta) @ data.X.T
    return loss.value(Z, data.y, xp), loss.dvalue(Z, data.y, xp)


def optimal_eta(div: Any, losses: np.ndarray, lam: float, iters: int = 200) -> np.ndarray:
    """eta*(x) of the dual (3) for each row of ``losses`` (trials, n), unscaled (G = 1).

    Solves mean_i (psi*)'((l_i - eta) / lam) = 1, nonincreasing in eta, by bisection on
    [min l, max l]: (psi*)'(0) = 1 (psi'(1) = 0) puts the root there. The condition is taken
    in log form (log-mean-exp of log (psi*)'), so KL at small lam cannot overflow; KL itself
    has the closed form eta* = lam log mean e^(l/lam).

    Examples
    --------
    >>> l = np.array([[0.1, 0.5, 0.9]])
    >>> kl = optimal_eta(get_divergence("kl"), l, 0.5)
    >>> bool(np.allclose(kl, 0.5 * np.log(np.mean(np.exp(l / 0.5)))))
    True
    """
    losses = np.atleast_2d(np.asarray(losses, dtype=float))
    xp = _np_xp()
    if div.name == "kl" and not div.printed:
        return lam * (scipy.special.logsumexp(losses / lam, axis=1) - math.log(losses.shape[1]))
    lo = losses.min(axis=1)
    hi = losses.max(axis=1)
    logn = math.log(losses.shape[1])
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        la, _sign = div.log_dconj((losses - mid[:, None]) / lam, xp)
        above = scipy.special.logsumexp(la, axis=1) - logn > 0  # mean weight > 1: eta too low
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    return 0.5 * (lo + hi)


def dual_value_and_grad(div: Any, loss: Any, data: Dataset, lam: float,
                        theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Psi(x) = min_eta L^(x, eta) of (3) and its gradient (Danskin), per row of ``theta``.

    Examples
    --------
    >>> D, _ = imbalanced_groups(40, 2, np.random.default_rng(1))
    >>> v, g = dual_value_and_grad(get_divergence("chi2"), get_loss("sigmoid"), D, 1.0,
    ...                            np.zeros((3, 2)))
    >>> v.shape, g.shape, bool(np.allclose(v, 0.5))  # every loss is 1/2 at x = 0
    ((3,), (3, 2), True)
    """
    xp = _np_xp()
    l, dl = _losses(loss, data, theta)
    eta = optimal_eta(div, l, lam)
    a = (l - eta[:, None]) / lam
    la, sign = div.log_dconj(a, xp)
    weights = sign * np.exp(la)  # n p_i of the worst-case distribution; mean 1
    value = lam * np.mean(div.conj(a, xp), axis=1) + eta
    grad = (weights * dl) @ data.X / data.n
    return value, grad


def compositional_value_and_grad(loss: Any, data: Dataset, rho: float, lam0: float,
                                 w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Psi(x, lambda) of (5) and its projected gradient on lambda >= lam0, per row of ``w``.

    ``w`` holds (x, lambda) with lambda last. grad_x Psi = sum_i p_i grad l_i and
    d Psi / d lambda = log mean e^(l/lambda) + rho - sum_i p_i l_i / lambda with
    p = softmax(l / lambda) (line 196); at lambda = lam0 a positive d/d lambda points out of
    the feasible set and is dropped (the projected gradient).

    Examples
    --------
    >>> D, _ = imbalanced_groups(40, 2, np.random.default_rng(1))
    >>> v, g = compositional_value_and_grad(get_loss("sigmoid"), D, 0.5, 1e-3,
    ...                                     np.array([[0.0, 0.0, 1e-3]]))
    >>> bool(np.isfinite(v).all() and np.isfinite(g).all()), g.shape
    (True, (1, 3))
    """
    w = np.atleast_2d(np.asarray(w, dtype=float))
    x, lam = w[:, :-1], np.maximum(w[:, -1], lam0)
    l, dl = _losses(loss, data, x)
    s = l / lam[:, None]
    lme = scipy.special.logsumexp(s, axis=1) - math.log(data.n)
    p = scipy.special.softmax(s, axis=1)
    value = lam * (lme + rho)
    gx = (p * dl) @ data.X
    glam = lme + rho - np.sum(p * l, axis=1) / lam
    at_bound = w[:, -1] <= lam0 * (1.0 + 1e-12)
    glam = np.where(at_bound, np.minimum(glam, 0.0), glam)
    return value, np.concatenate([gx, glam[:, None]], axis=1)


def check_dataset(params: Mapping[str, Any]) -> None:
    """Refuse records the datasets cannot give: an unknown ``dataset``, or a Digits-ST draw
    of ``n`` records at ``minority`` its images cannot hold.

    Examples
    --------
    >>> check_dataset({"dataset": "digits_st", "n": 500, "minority": 0.1})
    >>> try:
    ...     check_dataset({"dataset": "digits_st", "n": 500, "minority": 0.7})
    ... except InputError as e:
    ...     print(e)
    imratio must be in (0, 0.5], got 0.7
    """
    from algorithms.paper000.experiments import DATASETS, check_digits_st

    name = str(params.get("dataset", "groups"))
    if name not in DATASETS:
        raise InputError(f"dataset must be one of {DATASETS}, got {name!r}")
    if name == "digits_st":
        check_digits_st(int(params["n"]), float(params.get("minority", 0.1)))


def _common(params: Mapping[str, Any], rng: np.random.Generator) -> tuple[Any, Dataset, dict]:
    """The records (``dataset``: ``groups``, or ``digits_st`` whose d is 17 whatever ``d``
    says), the loss's public constants, and the harness's test set and holdout."""
    from algorithms.paper000.experiments import HOLDOUT, TEST_PER_CLASS, digits_st

    check_dataset(params)
    loss = get_loss("sigmoid")
    n, minority = int(params["n"]), float(params.get("minority", 0.1))
    name = str(params.get("dataset", "groups"))
    if name == "digits_st":
        data, test, hold = digits_st(n, rng, imratio=minority)
        info: dict[str, Any] = {"group": (data.y > 0).astype(int)}
    else:
        data, info = imbalanced_groups(n, int(params["d"]), rng, minority=minority)
        w = (info["w_majority"], info["w_minority"])
        n_test = min(n, 2 * TEST_PER_CLASS)
        test = _group_records(_groups(n_test, 0.5, rng), *w, rng)
        hold = _group_records(_groups(HOLDOUT, minority, rng), *w, rng)
    info = {**info, "lipschitz": float(loss.lipschitz), "smoothness": float(loss.smoothness),
            "loss_bound": 1.0, "test_set": test, "holdout_set": hold}
    return loss, data, info


def _groups(n: int, minority: float, rng: np.random.Generator) -> np.ndarray:
    group = np.zeros(n, dtype=int)
    group[rng.choice(n, size=max(1, int(round(minority * n))), replace=False)] = 1
    return group


def make_dual_problem(params: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    """The psi-divergence DRO dual (3) on imbalanced groups; the iterate is x (d numbers).

    Parameters used: ``n``, ``d``, ``minority``, ``divergence``, ``alpha`` (CVaR), ``k``
    (Cressie-Read), ``dro_lambda`` (the lambda = lambda_0 of (2)-(3)). The objective uses the
    correct conjugate whatever table a variant runs with: it is the problem the paper
    claims to solve.

    Examples
    --------
    >>> p = make_dual_problem({"n": 30, "d": 2, "divergence": "kl", "dro_lambda": 0.5},
    ...                       np.random.default_rng(0))
    >>> p.grad(np.zeros((2, 2))).shape, p.info["divergence"]
    ((2, 2), 'kl')
    """
    loss, data, info = _common(params, rng)
    div = get_divergence(str(params.get("divergence", "chi2")),
                         alpha=float(params.get("alpha", 0.5)), k=float(params.get("k", 2.0)))
    lam = float(params["dro_lambda"])

    def objective(theta: np.ndarray) -> np.ndarray:
        return dual_value_and_grad(div, loss, data, lam, theta)[0]

    def grad(theta: np.ndarray) -> np.ndarray:
        return dual_value_and_grad(div, loss, data, lam, theta)[1]

    info.update({"divergence": div.name, "dro_lambda": lam})
    return Problem(data=data, loss=loss, objective=objective, grad=grad, optimum=None,
                   info=info, public=_public(info))


def make_compositional_problem(params: Mapping[str, Any],
                               rng: np.random.Generator) -> Problem:
    """The KL-constrained compositional problem (5); the iterate is w = (x, lambda).

    Parameters used: ``n``, ``d``, ``minority``, ``rho``, ``lam0``. ``info["psi0_bound"]``
    is a public bound on Psi(w_0) - min Psi (Psi >= 0 for l >= 0, Psi(x, lam) <= B + lam rho),
    the Psi_0 Theorem 8 needs (line 651) without looking at the data.

    Examples
    --------
    >>> p = make_compositional_problem({"n": 30, "d": 2, "rho": 0.5, "lam0": 1e-3,
    ...                                 "lam_init": 1.0}, np.random.default_rng(0))
    >>> p.grad(np.array([[0.0, 0.0, 1.0]])).shape, p.info["psi0_bound"]
    ((1, 3), 1.5)
    """
    loss, data, info = _common(params, rng)
    rho, lam0 = float(params["rho"]), float(params["lam0"])

    def objective(theta: np.ndarray) -> np.ndarray:
        return compositional_value_and_grad(loss, data, rho, lam0, theta)[0]

    def grad(theta: np.ndarray) -> np.ndarray:
        return compositional_value_and_grad(loss, data, rho, lam0, theta)[1]

    lam_init = float(params.get("lam_init", 1.0))
    info.update({"rho": rho, "lam0": lam0,
                 "psi0_bound": info["loss_bound"] + max(lam_init, lam0) * rho})
    return Problem(data=data, loss=loss, objective=objective, grad=grad, optimum=None,
                   info=info, public=_public(info))


# What the generator drew to make the records (the group directions) and the held-out
# records stay private: the test-set builder and the metrics use them, no algorithm may.
_PRIVATE = ("w_majority", "w_minority", "test_set", "holdout_set")


def _public(info: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if k not in _PRIVATE}
