"""What paper 004's algorithms share: parameters, claims, and the gradient queries.

Every query is a full-batch mean over the public record count ``n`` (the paper never
samples), evaluated for all trials at once and masked per trial: a trial that has stopped
contributes a zero query, so the release it still receives is pure noise it ignores.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from algorithms.baselines import l2_sensitivity_of_sum
from algorithms.kl_problems import PROBLEM_KINDS, TAILS, finite_records
from dpverify.core.claims import PrivacyClaim, UtilityClaim
from dpverify.core.curator import Curator
from dpverify.core.errors import InputError
from dpverify.core.ranges import NONNEGATIVE, OPEN_UNIT, POSITIVE, SIGN, Range, one_of
from dpverify.core.registry import Setting

PAPER = "paper 004 (Menart, Ullah, Arora, Bassily, Guzman: DP non-convex optimization under KL)"

# Parameters every algorithm of the paper takes: the test problem's, and the privacy ones.
# The paper's neighbouring relation is replace-one ("S, S' differing in one data point",
# Definition 2, line 64).
PROBLEM_DEFAULTS: dict[str, Any] = {
    "problem": "auto", "kappa": 2.0, "n": 500, "d": 5, "a": 1.0, "spread": 0.25,
    "radius": 2.0, "huber_delta": 0.25, "tail": "linear", "w0_distance": 1.0,
    "lb_epsilon": math.log(2.0),
    "lb_side": 1,
    "rho": 1.0, "beta": 0.1, "relation": "replace_one",
}
PROBLEM_RANGES = {
    "problem": one_of(*PROBLEM_KINDS), "tail": one_of(*TAILS),
    # kappa >= 1 (the KL exponent; the Huber problem's is 1); n >= 2 (a pair differs in one)
    "kappa": Range(1), "n": Range(2, integer=True), "a": POSITIVE, "spread": NONNEGATIVE,
    "radius": POSITIVE, "huber_delta": POSITIVE, "w0_distance": NONNEGATIVE,
    "lb_epsilon": POSITIVE, "lb_side": SIGN, "rho": POSITIVE, "beta": OPEN_UNIT,
}


def zcdp_claim(p: Mapping[str, Any]) -> PrivacyClaim:
    """rho-zCDP under the run's relation (the paper's is replace-one, line 64)."""
    return PrivacyClaim(rho=float(p["rho"]), relation=str(p["relation"]))


def mean_sensitivity(bound: float, relation: str, n: int) -> float:
    """L2 sensitivity of a mean over ``n`` of vectors of norm <= ``bound``.

    Examples
    --------
    >>> mean_sensitivity(1.0, "replace_one", 10), mean_sensitivity(1.0, "add_remove", 10)
    (0.2, 0.1)
    """
    return l2_sensitivity_of_sum(bound, relation) / n


def constants(setting: Setting, *, smooth: bool = False) -> dict[str, float]:
    """The public constants an algorithm of the paper takes as input (Algs 1-4, inputs).

    ``smooth=True``: the algorithm's step or sensitivity uses L1 (Algs 1 and 3), so a
    problem without one (``theorem8``'s kinked losses) is refused by name.
    """
    info = setting.constants
    if smooth and info.get("smoothness") is None:
        raise InputError(f"this algorithm needs an L1-smooth problem; "
                         f"{info.get('problem', 'this problem')!r} has no smoothness "
                         f"constant (its losses have kinks)")
    return {
        "gamma": float(info["gamma"]), "kappa": float(info["kappa"]),
        "L0": float(info["lipschitz"]),
        "L1": float(info["smoothness"]) if info.get("smoothness") is not None else math.nan,
        "F0": float(info["F0"]),
    }


def start(cur: Curator, setting: Setting) -> Any:
    """The public initial point w0, repeated over trials, as a backend array."""
    w0 = np.asarray(setting["w0"], dtype=float)
    return cur.backend.asarray(np.repeat(w0[None, :], cur.trials, axis=0))


def _mask(cur: Curator, active: np.ndarray | None) -> Any:
    if active is None:
        return None
    return cur.xp.reshape(cur.backend.asarray(active.astype(float)), (cur.trials, 1))


def grad_query(cur: Curator, setting: Setting, W: Any, *, clip: float | None,
               guard: bool, active: np.ndarray | None = None):
    """The query ``(1/n) sum_i clip(grad f(W; x_i))`` for every trial, masked by ``active``.

    ``clip=None`` and ``guard=False`` give the paper's unclipped mean; the sound variants
    clip each per-sample gradient to L0 and drop non-finite records.
    """
    xp, loss, n = cur.xp, setting.loss, float(cur.n)
    m = _mask(cur, active)

    def query(X: Any, y: Any, w: Any) -> Any:
        if guard:
            X, y, w = finite_records(xp, X, y, w)
        g = loss.grad_sum(W, X, y, w, xp, clip) / n
        return g if m is None else g * m

    return query


def grad_norm_query(cur: Curator, setting: Setting, W: Any, *, clip: float | None,
                    guard: bool, active: np.ndarray | None = None):
    """The scalar query ``||(1/n) sum_i clip(grad f(W; x_i))||``, shape (trials, 1)."""
    xp = cur.xp
    inner = grad_query(cur, setting, W, clip=clip, guard=guard, active=active)

    def query(X: Any, y: Any, w: Any) -> Any:
        return xp.linalg.vector_norm(inner(X, y, w), axis=1, keepdims=True)

    return query


def diff_query(cur: Curator, setting: Setting, W1: Any, W0: Any, *, clip: float | None,
               diff_clip: float | None, guard: bool, active: np.ndarray | None = None):
    """``(1/n) sum_i [g(W1; x_i) - g(W0; x_i)]``, each difference clipped to ``diff_clip``."""
    xp, loss, n = cur.xp, setting.loss, float(cur.n)
    m = _mask(cur, active)

    def query(X: Any, y: Any, w: Any) -> Any:
        if guard:
            X, y, w = finite_records(xp, X, y, w)
        g = loss.diff_sum(W1, W0, X, y, w, xp, clip, diff_clip) / n
        return g if m is None else g * m

    return query


def rate_claim(kappa: float, source: str, *, exponent: float | None = None,
               log_power: float | None = None, regime: tuple[str, ...] = ()) -> UtilityClaim:
    """``excess_risk <= C (sqrt(d) / (n sqrt(rho)))^e`` up to logs, e = kappa by default.

    Examples
    --------
    >>> rate_claim(2.0, "paper 004, Theorem 1").exponents
    {'n': -2.0, 'd': 1.0, 'rho': -1.0}
    """
    e = float(kappa if exponent is None else exponent)
    lp = e if log_power is None else log_power
    return UtilityClaim(
        quantity="excess_risk",
        exponents={"n": -e, "d": e / 2.0, "rho": -e / 2.0},
        log_factors=(f"log(n*sqrt(rho))**{lp:g}",),
        sided="upper",
        regime=regime or ("n*sqrt(rho) >= sqrt(d)",),
        source=source,
    )


def to_numpy(cur: Curator, a: Any) -> np.ndarray:
    return np.asarray(cur.backend.to_numpy(a), dtype=float)
