"""Pieces the algorithms of paper 002 share: claims, queries, public constants."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from algorithms.paper002.calibration import RELATION
from dpverify.core.claims import PrivacyClaim
from dpverify.core.curator import Curator, Query
from dpverify.core.registry import Setting

SOURCE = "Wang, Ye, Xu 2017, DP-ERM revisited (paper 002)"


def claim(p: Mapping[str, Any]) -> PrivacyClaim:
    """(epsilon, delta)-DP under replace-one neighbours, as every theorem of the paper states.

    Neighbours "differ by only one entry" (line 87) and the proofs replace "the n-th data"
    (line 437), so n is public.

    Examples
    --------
    >>> claim({"epsilon": 1.0, "delta": 1e-3}).relation
    'replace_one'
    """
    return PrivacyClaim(epsilon=float(p["epsilon"]), delta=float(p["delta"]), relation=RELATION)


def lipschitz(setting: Setting) -> float:
    """G, the public per-record gradient bound of the problem's loss (rows have norm <= 1).

    Examples
    --------
    >>> from algorithms.paper002.problems import make_problem
    >>> prob = make_problem({"n": 20, "d": 2, "loss": "sigmoid"}, np.random.default_rng(0))
    >>> lipschitz(prob.setting())
    0.25
    """
    return float(setting["lipschitz"])


def clip_of(p: Mapping[str, Any], setting: Setting) -> float:
    """The clipping norm of a sound variant: ``clip``, or G when it is ``None``.

    Examples
    --------
    >>> from algorithms.paper002.problems import make_problem
    >>> prob = make_problem({"n": 20, "d": 2, "loss": "sigmoid"}, np.random.default_rng(0))
    >>> clip_of({"clip": None}, prob.setting()), clip_of({"clip": 2.0}, prob.setting())
    (0.25, 2.0)
    """
    c = p.get("clip")
    return lipschitz(setting) if c is None else float(c)


def public_gap(setting: Setting) -> float:
    """A data-independent bound on F^r(0) - F^r(x*): the loss at margin 0 (r(0) = 0, F >= 0).

    For the logistic loss it is ln 2 whatever the data; T may depend on it (Thm 4.2).

    Examples
    --------
    >>> from algorithms.paper002.problems import make_problem
    >>> prob = make_problem({"n": 20, "d": 2, "loss": "logistic"}, np.random.default_rng(0))
    >>> round(public_gap(prob.setting()), 6)
    0.693147
    """
    import array_api_compat.numpy as xp

    return float(setting.loss.value(np.asarray(0.0), np.asarray(1.0), xp))


def zeros(cur: Curator) -> Any:
    """The public starting point x_0 = 0 for every trial, on the curator's backend.

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> zeros(Curator(Dataset(np.ones((3, 2)), np.ones(3)), trials=4)).shape
    (4, 2)
    """
    return cur.backend.asarray(np.zeros((cur.trials, cur.d)))


def _guard(xp: Any, X: Any, y: Any, w: Any) -> tuple[Any, Any, Any]:
    # A non-finite record gets weight 0, so it cannot slip through clipping.
    ok = xp.all(xp.isfinite(X), axis=1) & xp.isfinite(y)
    X = xp.where(ok[:, None], X, xp.zeros_like(X))
    y = xp.where(ok, y, xp.zeros_like(y))
    return X, y, w * xp.astype(ok, w.dtype)


def grad_diff_sum(cur: Curator, loss: Any, theta: Any, anchor: Any,
                  clip: float | None) -> Query:
    """The query sum_i w_i clip_C(grad f(theta, z_i) - grad f(anchor, z_i)), every trial.

    The variance-reduced term of SVRG (Alg. 1 line 7, Alg. 2). For a GLM the per-sample
    difference is (phi'(x_i . theta) - phi'(x_i . anchor)) x_i, so clipping the DIFFERENCE
    (what a sound variant must bound, not each gradient) costs one product per call.

    Examples
    --------
    >>> from algorithms.losses import get_loss
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.array([[1.0, 0.0]]), np.array([1.0])), rng=0)
    >>> q = grad_diff_sum(cur, get_loss("logistic"), np.ones((1, 2)), np.zeros((1, 2)), None)
    >>> cur.gaussian("diff", q, sensitivity=2.0, noise_std=0.0).round(4).tolist()
    [[0.2311, 0.0]]
    """
    xp, backend = cur.xp, cur.backend

    def query(X: Any, y: Any, w: Any) -> Any:
        X, y, w = _guard(xp, X, y, w)
        coef = (backend.glm_coefficients(loss, theta @ X.T, y)
                - backend.glm_coefficients(loss, anchor @ X.T, y))
        if clip is not None:
            norms = xp.abs(coef) * xp.linalg.vector_norm(X, axis=1)
            coef = coef * xp.where(norms > clip, clip / xp.where(norms > clip, norms, 1.0), 1.0)
        return (w * coef) @ X

    return query
