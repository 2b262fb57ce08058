"""The baselines of Table 2 (paper 003, Section 5.1, lines 354-356; Appendix D, line 893).

The paper compares DP RGDA with three methods it gives no pseudocode for, under "the same
global privacy budget" (Appendix D, line 889). Each is implemented here in the standard form
of its own paper, with the details paper 003 leaves open marked [ours]; all three are
SPIDER-type estimators (a fresh noisy gradient every ``q`` steps, noisy gradient
DIFFERENCES between) and share DP RGDA's sound releases (:func:`~algorithms.paper003.rgda.
sound_refresh`, :func:`~algorithms.paper003.rgda.sound_increment`): per-sample clipping of
gradients at ``clip`` and of differences at ``Lclip ||w_t - w_{t-1}||``, one noise multiplier
for every release, calibrated by PLD on the exact schedule.

* ``sto_spider``: Stochastic SPIDER (Liu et al. 2023, "Private (stochastic) non-convex
  optimization revisited", cited at line 397) run "directly on the explicit value function
  Phi(U, V)" (line 354): a minimisation of Phi = (1/n) sum_i l_i with
  l_i(x) = max_{y_i} F(x, y_i; xi_i) = r_i(x)^2 / 2 (matrix sensing), plain steps
  x_{t+1} = x_t - eta v_t (eta_x = 0.005, line 893).
* ``ada_dp_spider``: Ada-DP-SPIDER (Tao et al. 2025, line 404) on the same Phi. Its
  estimator is refreshed when the drift since the last refresh, sum ||x_t - x_{t-1}||^2,
  reaches a threshold; [ours] with normalised steps of length eta (eta = 0.02, line 893) the
  drift after k steps is k eta^2, so the rule is the public period q = threshold/eta^2: a
  data-dependent refresh time would make the kind of each release differ between trials,
  which a batched curator release cannot express.
* ``private_diff``: PrivateDiff Minimax (Zhang et al. 2025, line 410), "a first-order DP
  method adapted to the minimax formulation" (line 354): variance-reduced DP-SGDA whose
  joint (x, y) estimate is restarted from a noisy gradient every q steps and otherwise moved
  by noisy gradient differences; x_{t+1} = x_t - eta_x v_t, y_{t+1} = P_Y(y_t + eta_y u_t)
  [ours: paper 003 gives no step sizes for it; DP RGDA's (0.2, 0.8)].

Only the matrix-sensing problem has a value function that is a sum over records (Phi_S of
the cosine problem is not the mean of per-record maxima), so the two minimisation baselines
refuse the cosine problem.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.baselines import project_rows
from algorithms.paper003.common import batch_spec, calibrate_common_multiplier
from algorithms.paper003.problems import MatrixSensingModel, MinimaxSetting, setting_of
from algorithms.paper003.rgda import SoundPlan, sound_increment, sound_refresh
from dpverify.core.curator import Curator
from dpverify.core.errors import InputError
from dpverify.core.registry import Setting

__all__ = ["PhiModel", "spider_plan", "spider"]


@dataclass(frozen=True)
class PhiModel:
    """Per-sample gradients of l_i(x) = max_{y_i} F(x, y_i; xi_i) for matrix sensing.

    F_i = y_i r_i(x) - y_i^2/2 is maximised at y_i = r_i, so l_i = r_i^2/2 and
    grad l_i = r_i grad_x <A_i, U V^T>: the base model's x-gradient at y = r. There is no
    y (``d2 = 0``), so the rest of DP RGDA's machinery runs unchanged on x alone.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> m = PhiModel(MatrixSensingModel(p=1, q=1, r=1))
    >>> gx, gy = m.per_sample(xp, np.array([[2.0, 1.0]]), np.ones((1, 2)), np.zeros((1, 0)))
    >>> gx.tolist(), gy.shape  # r = 2*1*1 - 1 = 1: grad = r (A V, A U) = (2, 2)
    ([[[2.0, 2.0]]], (1, 1, 0))
    """

    base: MatrixSensingModel
    y_per_record: bool = False

    @property
    def d1(self) -> int:
        return self.base.d1

    def d2(self, slots: int) -> int:
        return 0

    def per_sample(self, xp: Any, X: Any, x: Any, y: Any) -> tuple[Any, Any]:
        t, n = x.shape[0], X.shape[0]
        _, resid = self.base.per_sample(xp, X, x, xp.zeros((t, n), dtype=x.dtype))
        gx, _ = self.base.per_sample(xp, X, x, resid)
        return gx, xp.zeros((t, n, 0), dtype=x.dtype)


def phi_setting(setting: Setting) -> Setting:
    """The setting with the minimisation model on Phi (matrix sensing only)."""
    s = setting_of(setting)
    if not isinstance(s.model, MatrixSensingModel):
        raise InputError("the minimisation baselines run on the explicit value function, a sum "
                         "over records only for matrix sensing (problem = 'matrix_sensing')")
    return setting.with_constants(minimax_setting=dataclasses.replace(
        s, model=PhiModel(s.model), d2=0, y_radius=None))


def spider_plan(cur: Curator, p: Mapping[str, Any]) -> SoundPlan:
    """ceil(T/q) refreshes and T - ceil(T/q) increments, one multiplier for all (PLD).

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.zeros((100, 1)), np.zeros(100)))
    >>> spider_plan(cur, {"T": 10, "q": 5, "S1": None, "S2": 10, "epsilon": 1.0,
    ...                   "delta": 1e-5, "relation": "replace_one"}).counts
    {'refresh': 2, 'increment': 8}
    """
    T, q = int(p["T"]), int(p["q"])
    if T < 1 or q < 1:
        raise InputError(f"T and q must be >= 1, got T = {T}, q = {q}")
    refreshes = -(-T // q)
    counts = {"refresh": refreshes, "increment": T - refreshes}
    ref, inc = batch_spec(cur, p["S1"]), batch_spec(cur, p["S2"])
    groups: dict[tuple[Any, ...], int] = {}
    for spec, c in ((ref, counts["refresh"]), (inc, counts["increment"])):
        if c > 0:
            groups[spec] = groups.get(spec, 0) + c
    z = calibrate_common_multiplier(tuple(groups.items()), float(p["epsilon"]),
                                    float(p["delta"]), str(p["relation"]))
    return SoundPlan(ref, inc, z, counts)


def _step(cur: Curator, kind: str, s: MinimaxSetting, p: Mapping[str, Any],
          x: Any, y: Any, v: Any, u: Any) -> tuple[Any, Any]:
    xp = cur.xp
    if kind == "ada_dp_spider":  # normalised: drift k eta^2 after k steps
        nrm = np.asarray(cur.backend.to_numpy(xp.linalg.vector_norm(v, axis=1)), dtype=float)
        scale = np.where(nrm > 0, float(p["eta_x"]) / np.where(nrm > 0, nrm, 1.0), 0.0)
        x = x - v * xp.reshape(cur.backend.asarray(scale), (cur.trials, 1))
    else:
        x = x - float(p["eta_x"]) * v
    if kind == "private_diff":
        y = y + float(p["eta_y"]) * u
        if s.y_radius is not None:
            y = project_rows(xp, y, s.y_radius)
    return x, y


KINDS = ("sto_spider", "ada_dp_spider", "private_diff")


def spider(kind: str):
    """One of the Table 2 baselines as a ``run(cur, setting, params)``; returns x_T."""
    if kind not in KINDS:
        raise InputError(f"unknown baseline {kind!r}; known: {KINDS}")

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        if kind != "private_diff":
            setting = phi_setting(setting)
        s = setting_of(setting)
        plan = spider_plan(cur, p)
        x = cur.backend.asarray(np.repeat(np.asarray(s.x0, float)[None], cur.trials, axis=0))
        y = cur.backend.asarray(np.zeros((cur.trials, s.d2)))  # y0 = 0 (line 350)
        x_prev, y_prev, v, u = x, y, None, None
        for t in range(int(p["T"])):
            cur.step(t)
            if t % int(p["q"]) == 0:
                v, u = sound_refresh(cur, setting, p, plan, x, y)
            else:
                dv, du = sound_increment(cur, setting, p, plan, x, y, x_prev, y_prev)
                v, u = v + dv, u + du
            x_prev, y_prev = x, y
            x, y = _step(cur, kind, s, p, x, y, v, u)
        return x

    return run


def eta_defaults(kind: str) -> dict[str, float]:
    """Appendix D's step sizes (line 893): Sto-SPIDER 0.005, Ada-DP-SPIDER 0.02; PrivateDiff
    has none in the paper [ours: DP RGDA's (0.2, 0.8)].

    Examples
    --------
    >>> eta_defaults("sto_spider")["eta_x"]
    0.005
    """
    return {"sto_spider": {"eta_x": 0.005, "eta_y": 0.0},
            "ada_dp_spider": {"eta_x": 0.02, "eta_y": 0.0},
            "private_diff": {"eta_x": 0.2, "eta_y": 0.8}}[kind]

