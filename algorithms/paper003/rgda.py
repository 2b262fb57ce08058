"""DP RGDA (paper 003, Algorithm 2, lines 160-184) with its inner updater (Algorithm 3,
lines 196-217).

Algorithm 2 takes normalised descent steps on x while the tracked gradient v_t is large,
and otherwise perturbs x uniformly in a ball and watches the movement of unnormalised
steps: enough movement means a saddle was escaped, t_thres quiet steps certify the anchor.
Algorithm 3, called at every outer step, runs K projected ascent steps on y and keeps
SPIDER estimates v ~ grad_x f, u ~ grad_y f: refreshed from a large batch every q outer
steps, otherwise updated with noisy gradient differences on small batches.

The variants differ only in their :class:`Policy` (:data:`SOUND_POLICY`,
:data:`PAPER_POLICY`, :data:`PAPER_ERM_POLICY`): Algorithm 2's escape schedule, the default
ascent step and the noise rule, prepared before the run (:class:`SoundPlan` or
:class:`PaperRule`), which supplies the warm start's steps and Algorithm 3. The outer loop
is the same for all. The two updaters stay two functions because the printed Algorithm 3
differs from the corrected one in structure (separate v and u releases, the k = 0
increment after a refresh, the range of the argmin), not only in its noise.

``paper`` (:func:`paper_updater`): Algorithm 3 as printed. The batch MEAN is clipped (lines
7-8, 14-15); v and u are two releases with independent noise on one batch; the k = 0
increment differences gradients across the x-step, from (x_{t-1}, y_t) to (x_t, y_t)
(line 3), also right after a refresh; s_t = argmin over k in {0..K-1} (line 18). Noise
and declared sensitivities follow either the proof of Lemma 8 (``noise="proof"``: eqs. 30-31
and line 636, noise proportional to ||y_{t,k} - y_{t,k-1}||, hence ZERO at k = 0) or
Algorithm 3's lines 1-2 with Lemma 5's sensitivities (``noise="alg3"``, line 506). A warm
start y0 (Lemma 8, line 625; "PiSARAH", line 774) is computed without noise (``exact``).

``sound`` (:func:`sound_updater`): per-sample clipping of each joint gradient (x and y
blocks together) at ``clip`` and of each per-sample gradient DIFFERENCE at
Lclip ||w_{t,k} - w_{t,k-1}||, the threshold its noise is scaled to; one joint release of
(v, u); no k = 0 increment after a refresh; s_t over k in {1..K}; every release, the
private warm start included, carries one noise multiplier calibrated by the accountant on
the exact events of the run (notes, "fixed" updater).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.baselines import project_rows
from algorithms.paper003.common import (
    SinglePass,
    batch_spec,
    calibrate_common_multiplier,
    draw,
    eps_bar,
    nominal,
    population_schedule,
    restrict,
    sum_sensitivity,
    theorem1_schedule,
    to_numpy,
)
from algorithms.paper003.problems import MinimaxSetting, joint_diff_sum, joint_sum, setting_of
from dpverify.core.curator import Curator
from dpverify.core.errors import InputError
from dpverify.core.registry import Setting

# The names its rules take: "given" schedules, or Theorem 1's / 2's ("auto": by phi);
# batches from the pool of n records or fresh disjoint blocks; Lemma 8's or Algorithm 3's
# printed noise.
SCHEDULES = ("given", "auto", "theorem1", "population")
SAMPLINGS = ("pool", "single_pass")
NOISES = ("proof", "alg3")

# Parameters ------------------------------------------------------------------------------


def resolved(p: Mapping[str, Any], s: MinimaxSetting, n: int) -> dict[str, Any]:
    """The run's parameters with ``schedule = "theorem1" | "population"`` applied.

    Examples
    --------
    >>> from algorithms.paper003.problems import MinimaxSetting
    >>> s = MinimaxSetting(None, 3, 3, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, None, np.zeros(3))
    >>> base = {"schedule": "given", "T": 7, "epsilon": 1.0, "delta": 1e-5, "T_max": 50,
    ...         "c_alpha": 1.0}
    >>> resolved(base, s, 100)["T"], resolved({**base, "schedule": "theorem1"}, s, 100)["T"]
    (7, 50)
    """
    q = dict(p)
    sched = str(q.get("schedule", "given"))
    if sched == "given":
        return q
    if sched == "auto":  # Theorem 1 for Phi_S, Theorem 2 for the population Phi
        sched = "theorem1" if str(q.get("phi", "empirical")) == "empirical" else "population"
    d = max(s.d1, s.d2)
    fn = {"theorem1": theorem1_schedule, "population": population_schedule}.get(sched)
    if fn is None:
        raise InputError(f"schedule must be one of {SCHEDULES}, got {sched!r}")
    q.update(fn(n, d, float(q["epsilon"]), float(q["delta"]), s,
                c_alpha=float(q.get("c_alpha", 1.0))))
    q["T"] = min(int(q["T"]), int(q["T_max"]))  # the theorem's T can be far beyond a run
    q["q"] = min(int(q["q"]), int(q["T"]))
    return q


@dataclass(frozen=True)
class EscapeSchedule:
    """Algorithm 2's inputs: descent threshold and step, escape step, radius, test."""

    alpha: float
    entry: float  # enter the escape phase when ||v_t|| < entry (line 5)
    eta: float
    eta_H: float
    r: float
    t_thres: int
    D_bar: float


def escape_schedule(p: Mapping[str, Any], s: MinimaxSetting, n: int, *,
                    style: str) -> EscapeSchedule:
    """Alg. 2's parameters: explicit values in ``p`` win, the rest follow ``style``.

    ``sound``: the notes' safe defaults (Jin et al. style): eta = alpha/(2 L_Phi),
    eta_H = 1/(2 L_Phi), alpha_H = sqrt(rho_Phi alpha), chi = max(4, log(d1 L_Phi F0 /
    (rho_Phi alpha delta2))), t_thres = ceil(chi/(eta_H alpha_H)), R = alpha_H/(rho_Phi chi),
    r = min(R/4, alpha/(4 L_Phi)), D_bar = R^2/t_thres^2, entry at alpha/2 (notes A2-3).
    ``paper_erm``: eta = 1/(2L) (Lemma 5, line 501), entry at alpha. ``paper``: Lemma 8
    (line 625): eta = eps_bar^(1/2)/(L log(4/delta1) C1), r = eps_bar^(1/2)/(L log(4/delta1)),
    D_bar = eps_bar/(L^2 log^2(4/delta1) C1^2), entry at alpha. The paper's eta_H and
    t_thres (Lemmas 6-7, 10) are mutually inconsistent; both paper styles take ours.

    Examples
    --------
    >>> from algorithms.paper003.problems import MinimaxSetting
    >>> s = MinimaxSetting(None, 3, 3, 2.0, 1.0, 1.0, 1.25, 1.0, 1.0, None, np.zeros(3))
    >>> e = escape_schedule({"alpha": 0.3, "delta2": 0.1}, s, 100, style="sound")
    >>> round(e.eta, 4), e.entry, e.t_thres
    (0.12, 0.15, 23)
    """
    alpha = float(p["alpha"])
    L_phi, rho = s.L_phi, s.rho_phi
    eta_H = 1.0 / (2.0 * L_phi)
    alpha_H = math.sqrt(rho * alpha)
    chi = max(4.0, math.log(s.d1 * L_phi * s.F0 / (rho * alpha * float(p.get("delta2", 0.1)))))
    t_thres = int(math.ceil(chi / (eta_H * alpha_H)))
    R = alpha_H / (rho * chi)
    eta = alpha / (2.0 * L_phi)
    r = min(R / 4.0, alpha / (4.0 * L_phi))
    D_bar = R * R / t_thres**2
    entry = 0.5 * alpha
    if style == "paper_erm":
        eta, entry = 1.0 / (2.0 * s.L), alpha
    elif style == "paper":
        eb = eps_bar(n, max(s.d1, s.d2), float(p["epsilon"]), float(p["delta"]))
        lg = math.log(4.0 / float(p.get("delta1", 0.1)))
        c1 = float(p["c1"])
        eta = math.sqrt(eb) / (s.L * lg * c1)
        r = math.sqrt(eb) / (s.L * lg)
        D_bar = eb / (s.L**2 * lg**2 * c1**2)
        entry = alpha
    elif style != "sound":
        raise InputError(f"unknown escape style {style!r}")

    def pick(key: str, default: float) -> float:
        v = p.get(key)
        return default if v is None else float(v)

    return EscapeSchedule(alpha=alpha, entry=pick("entry", entry), eta=pick("eta", eta),
                          eta_H=pick("eta_H", eta_H), r=pick("r", r),
                          t_thres=int(pick("t_thres", t_thres)), D_bar=pick("D_bar", D_bar))


# The inner updater (Algorithm 3) ---------------------------------------------------------


@dataclass
class UpdaterState:
    """What Algorithm 3 carries between outer steps (its inputs, line 0)."""

    x: Any
    x_prev: Any
    y: Any
    v: Any
    u: Any


def _norm_np(cur: Curator, a: Any) -> np.ndarray:
    return to_numpy(cur, cur.xp.linalg.vector_norm(a, axis=1))


def _per_trial(cur: Curator, values: np.ndarray) -> Any:
    return cur.xp.reshape(cur.backend.asarray(values), (cur.trials, 1))


def _project(cur: Curator, s: MinimaxSetting, y: Any) -> Any:
    return y if s.y_radius is None else project_rows(cur.xp, y, s.y_radius)


def _mapping_norms(cur: Curator, s: MinimaxSetting, ys: list, us: list, lam: float) -> Any:
    """||G~_lambda(y_k)|| = ||(y_k - P_Y(y_k + lam u_k)) / lam|| (Alg. 3 line 18, B.2)."""
    return np.stack([_norm_np(cur, (y - _project(cur, s, y + lam * u)) / lam)
                     for y, u in zip(ys, us, strict=True)], axis=1)


def _select(cur: Curator, idx: np.ndarray, stack: list) -> Any:
    """Per trial, the element ``idx[trial]`` of a list of (trials, dim) arrays."""
    out = stack[0] * _per_trial(cur, (idx == 0).astype(float))
    for k in range(1, len(stack)):
        out = out + stack[k] * _per_trial(cur, (idx == k).astype(float))
    return out


@dataclass(frozen=True)
class SoundPlan:
    """The data-independent release schedule of a sound run and its noise multiplier."""

    refresh: tuple[Any, ...]
    increment: tuple[Any, ...]
    z: float
    counts: dict[str, int]
    stream: SinglePass | None = None

    def warm(self, cur: Curator, setting: Setting, p: Mapping[str, Any], x0: Any,
             y: Any) -> Any:
        """One warm-start step's u: a refresh-type release, counted by the plan."""
        return sound_refresh(cur, setting, p, self, x0, y, name="warm_start")[1]

    def update(self, cur: Curator, setting: Setting, p: Mapping[str, Any], t: int,
               st: UpdaterState) -> UpdaterState:
        """Algorithm 3, corrected (:func:`sound_updater`)."""
        return sound_updater(cur, setting, p, self, t, st)


def single_pass(p: Mapping[str, Any]) -> bool:
    """Whether the run draws fresh disjoint batches (``sampling = "single_pass"``)."""
    mode = str(p.get("sampling", "pool"))
    if mode not in SAMPLINGS:
        raise InputError(f"sampling must be one of {SAMPLINGS}, got {mode!r}")
    return mode == "single_pass"


def new_pass(cur: Curator, p: Mapping[str, Any]) -> SinglePass:
    """The run's single pass, starting at the public slot ``pass_offset`` (default 0)."""
    return SinglePass(cur, int(p.get("pass_offset", 0)))


def printed_counts(p: Mapping[str, Any]) -> dict[str, int]:
    """How many refreshes and increments the printed Algorithm 3 makes (lines 4-17):
    ceil(T/q) refreshes and T K increments; its warm start reads the data exactly, outside
    any pass.

    Examples
    --------
    >>> printed_counts({"T": 10, "q": 5, "K": 2, "warm_start": 1})
    {'refresh': 2, 'increment': 20}
    """
    T, q, K = int(p["T"]), int(p["q"]), int(p["K"])
    return {"refresh": -(-T // q), "increment": T * K}


def sound_counts(p: Mapping[str, Any]) -> dict[str, int]:
    """How many refreshes (warm start included) and increments a sound run can make.

    ceil(T/q) refreshes plus ``warm_start``; K increments after a refresh, K + 1 at other
    steps (the k = 0 step across the x-move; notes, UPDATER_FIXED).

    Examples
    --------
    >>> sound_counts({"T": 10, "q": 5, "K": 2, "warm_start": 1})
    {'refresh': 3, 'increment': 28}
    """
    T, q, K = int(p["T"]), int(p["q"]), int(p["K"])
    refreshes = -(-T // q)
    return {"refresh": refreshes + int(p["warm_start"]),
            "increment": refreshes * K + (T - refreshes) * (K + 1)}


def check_sample_budget(cur: Curator, p: Mapping[str, Any], c: Mapping[str, int]) -> int:
    """Records a single-pass run of ``c`` releases needs, (T/q) S1 + T K S2 (line 762) for
    the schedule actually run; an InputError when it exceeds n (before anything is
    released)."""
    need = c["refresh"] * int(p["S1"] or cur.n) + c["increment"] * int(p["S2"])
    if need > cur.n:
        raise InputError(f"single pass: the schedule needs {need} fresh records "
                         f"({c['refresh']} refreshes of S1 = {p['S1']}, {c['increment']} "
                         f"increments of S2 = {p['S2']}) but n = {cur.n} (line 762)")
    return need


def sound_plan(cur: Curator, p: Mapping[str, Any]) -> SoundPlan:
    """Count every release a sound run can make and calibrate one multiplier for them all.

    Refreshes: ceil(T/q), plus ``warm_start`` releases of the same form. Increments: K after
    each refresh, K + 1 at other steps. An early return (Alg. 2 line 19) only makes fewer.
    With ``sampling = "single_pass"`` every release reads fresh records, so each record
    meets ONE release (parallel composition): the multiplier is that of a single unsampled
    Gaussian at (epsilon, delta), and the per-record ledger accounting gives back exactly
    that epsilon.

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.zeros((100, 1)), np.zeros(100)))
    >>> plan = sound_plan(cur, {"T": 10, "q": 5, "K": 2, "S1": None, "S2": 10,
    ...                         "warm_start": 1, "epsilon": 1.0, "delta": 1e-5,
    ...                         "relation": "replace_one"})
    >>> plan.counts
    {'refresh': 3, 'increment': 28}
    """
    counts = sound_counts(p)
    if exact_gradients(p):  # no noise to calibrate: every release is exact
        return SoundPlan(batch_spec(cur, p["S1"], single_pass=single_pass(p)),
                         batch_spec(cur, p["S2"], single_pass=single_pass(p)), 0.0, counts,
                         new_pass(cur, p) if single_pass(p) else None)
    if single_pass(p):
        check_sample_budget(cur, p, counts)
        one = ((("full", 1.0, cur.n, cur.n), 1),)
        z = calibrate_common_multiplier(one, float(p["epsilon"]), float(p["delta"]),
                                        str(p["relation"]))
        return SoundPlan(batch_spec(cur, p["S1"], single_pass=True),
                         batch_spec(cur, p["S2"], single_pass=True), z, counts, new_pass(cur, p))
    ref = batch_spec(cur, p["S1"])
    inc = batch_spec(cur, p["S2"])
    groups: dict[tuple[Any, ...], int] = {}
    for spec, c in ((ref, counts["refresh"]), (inc, counts["increment"])):
        if c > 0:
            groups[spec] = groups.get(spec, 0) + c
    z = calibrate_common_multiplier(tuple(groups.items()), float(p["epsilon"]),
                                    float(p["delta"]), str(p["relation"]))
    return SoundPlan(ref, inc, z, counts)


def exact_gradients(p: Mapping[str, Any]) -> bool:
    """Whether the run reads noise-free gradients (``exact_gradients``, default False).

    Only for demonstrating Algorithm 2's escape mechanism in isolation (notes C-U4: "with
    epsilon = inf"): every query goes through ``cur.exact``, so the ledger marks the run
    non-private and the accountant reports epsilon = inf. A huge epsilon is no substitute:
    the calibrated noise shrinks far too slowly (z = 0.14 at epsilon = 1000 for 30 steps).

    Examples
    --------
    >>> exact_gradients({}), exact_gradients({"exact_gradients": True})
    (False, True)
    """
    return bool(p.get("exact_gradients", False))


def _split(g: Any, d1: int) -> tuple[Any, Any]:
    return g[:, :d1], g[:, d1:]


def sound_refresh(cur: Curator, setting: Setting, p: Mapping[str, Any], plan: SoundPlan,
                  x: Any, y: Any, *, name: str = "refresh") -> tuple[Any, Any]:
    """(v, u) = mean of per-sample clipped joint gradients + N(0, (z Delta)^2 I), one release."""
    s = setting_of(setting)
    clip = float(p["clip"]) if p.get("clip") is not None else s.M
    m = nominal(plan.refresh, cur.n)
    sens = sum_sensitivity(clip, str(p["relation"])) / m
    model, xp = s.model, cur.xp
    batch, slots = draw(cur, plan.refresh, plan.stream)
    query = restrict(lambda X, yl, w: joint_sum(model, xp, X, w, x, y, clip) / m, slots)
    if exact_gradients(p):
        return _split(cur.exact(name, query, batch=batch), s.d1)
    g = cur.gaussian(name, query, sensitivity=sens, noise_std=plan.z * sens, batch=batch)
    return _split(g, s.d1)


def sound_increment(cur: Curator, setting: Setting, p: Mapping[str, Any], plan: SoundPlan,
                    x1: Any, y1: Any, x0: Any, y0: Any) -> tuple[Any, Any]:
    """The noisy difference of mean clipped per-sample gradients from w0 to w1.

    Each per-sample difference is clipped at C = Lclip ||w1 - w0|| (data-independent: w
    comes from earlier releases), or at the constant ``inc_clip`` when one is given. The
    query is released divided by C, trial by trial, so
    its sensitivity 2/S2 and noise z 2/S2 are the same in every trial, then multiplied back
    (post-processing): each trial receives its difference plus N(0, (z 2 C/S2)^2 I), the
    movement-scaled noise of the paper with the bound enforced for any record (notes P-4).
    """
    s = setting_of(setting)
    xp = cur.xp
    if p.get("inc_clip") is not None:
        # Appendix D (line 889): every access clipped at one C, noise at 2C/B, whatever the
        # move (no variance reduction in the noise, and no feedback from noisy moves to it).
        C = np.full(cur.trials, float(p["inc_clip"]))
    else:
        Lclip = float(p["Lclip"]) if p.get("Lclip") is not None else s.L
        C = Lclip * np.sqrt(_norm_np(cur, x1 - x0) ** 2 + _norm_np(cur, y1 - y0) ** 2)
    safe = np.where(C > 0, C, 1.0)
    inv = _per_trial(cur, np.where(C > 0, 1.0 / safe, 0.0))
    C_b = _per_trial(cur, C)
    m = nominal(plan.increment, cur.n)
    sens = sum_sensitivity(1.0, str(p["relation"])) / m
    model = s.model

    def query(X: Any, yl: Any, w: Any) -> Any:
        return joint_diff_sum(model, xp, X, w, x1, y1, x0, y0, C_b) * inv / m

    batch, slots = draw(cur, plan.increment, plan.stream)
    if exact_gradients(p):
        g = cur.exact("increment", restrict(query, slots), batch=batch)
    else:
        g = cur.gaussian("increment", restrict(query, slots), sensitivity=sens,
                         noise_std=plan.z * sens, batch=batch)
    return _split(g * C_b, s.d1)


def sound_updater(cur: Curator, setting: Setting, p: Mapping[str, Any], plan: SoundPlan,
                  t: int, st: UpdaterState) -> UpdaterState:
    """One call of Algorithm 3, corrected (notes, UPDATER_FIXED): returns y_{t+1}, v_t, u_t."""
    s = setting_of(setting)
    K, lam = int(p["K"]), float(p["lam"])
    x = st.x
    if t % int(p["q"]) == 0:
        # A fresh estimate at (x_t, y_t) needs no increment across the x-step (notes A3-2).
        v, u = sound_refresh(cur, setting, p, plan, x, st.y)
        k0, x_last, y_last = 1, x, st.y
    else:
        v, u = st.v, st.u
        k0, x_last, y_last = 0, st.x_prev, st.y
    y_k = st.y
    ys, vs, us = [], [], []
    for k in range(k0, K + 1):
        if k >= 1:
            y_k = _project(cur, s, y_k + lam * u)  # line 16
        dv, du = sound_increment(cur, setting, p, plan, x, y_k, x_last, y_last)
        v, u = v + dv, u + du
        x_last, y_last = x, y_k
        if k >= 1:
            ys.append(y_k)
            vs.append(v)
            us.append(u)
    # line 18 over k in {1..K}: with {0..K-1}, K = 1 would freeze y (notes A3-3)
    sel = np.argmin(_mapping_norms(cur, s, ys, us, lam), axis=1)
    return UpdaterState(x, st.x_prev, _select(cur, sel, ys), _select(cur, sel, vs),
                        _select(cur, sel, us))


# Paper variant ------------------------------------------------------------------------------


def _clip_rows(xp: Any, g: Any, C: float) -> Any:
    """Algorithm 1 (line 95) on each trial's vector: min(C/||g||, 1) g."""
    return project_rows(xp, g, C)


@dataclass(frozen=True)
class PaperNoise:
    """Declared sensitivities and noise of the printed algorithm, per unit where scaled."""

    refresh_sens: float  # eq. 30 (line 631): 2M/S1
    refresh_std: float
    inc_sens_per_move: float  # per unit ||y_{t,k} - y_{t,k-1}|| (eq. 31 / line 506)
    inc_std: float  # per unit move ("proof") or absolute ("alg3")
    inc_scaled: bool  # noise proportional to the move (line 636)
    C_u: float

    def increment(self, move: np.ndarray) -> tuple[np.ndarray, float, float]:
        """Per trial scale, and sensitivity and noise of the scaled increment, given each
        trial's y-move ||y_{t,k} - y_{t,k-1}||.

        Examples
        --------
        >>> pn = PaperNoise(1.0, 1.0, 2.0, 3.0, False, 1.0)
        >>> pn.increment(np.array([0.5, 2.0]))
        (array([1., 1.]), 4.0, 3.0)
        """
        if self.inc_scaled:
            # Line 636: noise and eq. 31's sensitivity both scale with the y-move; released
            # per unit move (one multiplier for every trial), then scaled back. Where the
            # y-move is 0 (always at k = 0), both are 0: the answer goes out without noise.
            return move, self.inc_sens_per_move, self.inc_std
        # Lines 1-2: one absolute noise scale; Lemma 5's sensitivity 2 L ||dy||/S2 at its
        # largest over the trials (exact for a single trial).
        return np.ones_like(move), self.inc_sens_per_move * float(np.max(move)), self.inc_std


def paper_noise(p: Mapping[str, Any], s: MinimaxSetting, n: int, esc: EscapeSchedule
                ) -> PaperNoise:
    """The printed noise: Lemma 8's proof (``proof``) or Algorithm 3 lines 1-2 (``alg3``).

    ``proof`` (line 636): sigma_omega = C1 M sqrt(log(1.25/delta))/(S1 eps) and
    sigma_zeta = 2 C2 L sqrt(log(1.25/delta))/(n eps) ||y_{t,k} - y_{t,k-1}||, with
    sensitivities 2M/S1 (eq. 30) and 2 sqrt(2) L ||y_k - y_{k-1}||/S2 (eq. 31). C1 and C2 are
    "O(1), to be decided later" and never decided; the defaults C1 = 4, C2 = 2 sqrt(2)
    make line 636's per-query claim hold by Definition 3 ((eps/2)-DP with eq. 30's
    sensitivity; (eps/(2 q_t)) before the linear amplification q_t = S2/n it invokes).

    ``alg3`` (lines 199-200): sigma = C_v sqrt(log(1/delta))/eps max{1/S1, sqrt(T)/(sqrt(q) n)}
    and C_u sqrt(log(1/delta))/eps max{1/S2, sqrt(T)/n}, C_v = c M; sensitivities from
    Lemma 5's privacy proof (line 506): 2M/S1 and 2 L ||y_t - y_{t-1}||/S2.

    Examples
    --------
    >>> from algorithms.paper003.problems import MinimaxSetting
    >>> s = MinimaxSetting(None, 3, 3, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, None, np.zeros(3))
    >>> e = EscapeSchedule(0.3, 0.3, 0.25, 0.5, 0.01, 10, 1e-4)
    >>> pn = paper_noise({"noise": "proof", "epsilon": 1.0, "delta": 1e-5, "S1": None,
    ...                   "S2": 20, "c1": 4.0, "c2": 2 * 2 ** 0.5}, s, 100, e)
    >>> round(pn.refresh_std / pn.refresh_sens, 3)  # Def. 3 at eps/2: 2 sqrt(log(1.25e5))
    6.852
    """
    eps, delta = float(p["epsilon"]), float(p["delta"])
    S1 = n if p["S1"] is None or p["S1"] >= n else float(p["S1"])
    S2 = min(float(p["S2"]), float(n))
    M = float(p["clip"]) if p.get("clip") is not None else s.M
    if str(p["noise"]) == "proof":
        lg = math.sqrt(math.log(1.25 / delta))
        return PaperNoise(
            refresh_sens=2.0 * M / S1,
            refresh_std=float(p["c1"]) * M * lg / (S1 * eps),
            inc_sens_per_move=2.0 * math.sqrt(2.0) * s.L / S2,
            inc_std=2.0 * float(p["c2"]) * s.L * lg / (n * eps),
            inc_scaled=True, C_u=math.inf,
        )
    if str(p["noise"]) == "alg3":
        T, q = float(p["T"]), float(p["q"])
        lg = math.sqrt(math.log(1.0 / delta))
        C_v = float(p["c_noise"]) * M
        C_u = float(p["C_u"]) if p.get("C_u") is not None else s.L * esc.eta
        return PaperNoise(
            refresh_sens=2.0 * M / S1,
            refresh_std=C_v * lg / eps * max(1.0 / S1, math.sqrt(T) / (math.sqrt(q) * n)),
            inc_sens_per_move=2.0 * s.L / S2,
            inc_std=C_u * lg / eps * max(1.0 / S2, math.sqrt(T) / n),
            inc_scaled=False, C_u=C_u,
        )
    raise InputError(f"paper noise must be one of {NOISES}, got {p['noise']!r}")


def _paper_batches(cur: Curator, p: Mapping[str, Any]) -> tuple[Any, Any]:
    sp = single_pass(p)
    return (batch_spec(cur, p["S1"], single_pass=sp), batch_spec(cur, p["S2"], single_pass=sp))


def paper_updater(cur: Curator, setting: Setting, p: Mapping[str, Any], pn: PaperNoise,
                  t: int, st: UpdaterState, stream: SinglePass | None = None) -> UpdaterState:
    """One call of Algorithm 3 as printed (lines 196-217); ``stream``: the run's single
    pass (the population setting's fresh batches, line 762)."""
    s = setting_of(setting)
    xp, model, d1 = cur.xp, s.model, s.d1
    K, lam = int(p["K"]), float(p["lam"])
    ref, inc = _paper_batches(cur, p)
    M = float(p["clip"]) if p.get("clip") is not None else s.M
    x = st.x
    if t % int(p["q"]) == 0:  # lines 4-8
        m1 = nominal(ref, cur.n)
        b, sl = draw(cur, ref, stream)

        def mean_grad(block: slice):
            return lambda X, yl, w: _clip_rows(  # Clip of the batch mean (lines 7-8)
                xp, joint_sum(model, xp, X, w, x, st.y, None, guard=False)[:, block] / m1, M)

        v = cur.gaussian("refresh_v", restrict(mean_grad(slice(0, d1)), sl),
                         sensitivity=pn.refresh_sens, noise_std=pn.refresh_std, batch=b)
        u = cur.gaussian("refresh_u", restrict(mean_grad(slice(d1, None)), sl),
                         sensitivity=pn.refresh_sens, noise_std=pn.refresh_std, batch=b)
    else:  # line 10
        v, u = st.v, st.u
    # line 3: x_{t,-1} = x_{t-1}, x_{t,k} = x_t, y_{t,-1} = y_{t,0} = y_t
    x_last, y_last, y_k = st.x_prev, st.y, st.y
    ys, vs, us, nxt = [], [], [], []
    m2 = nominal(inc, cur.n)
    for _k in range(K):  # lines 12-17
        b, sl = draw(cur, inc, stream)  # line 13: one batch for both queries
        move = _norm_np(cur, y_k - y_last)  # the ||y_{t,k} - y_{t,k-1}|| of eq. 31
        x0, y0 = x_last, y_last
        scale, sens_unit, std_unit = pn.increment(move)
        zero = not np.any(scale > 0)
        inv = _per_trial(cur, np.where(scale > 0, 1.0 / np.where(scale > 0, scale, 1.0),
                                       1.0 if zero else 0.0))
        back = _per_trial(cur, scale if not zero else np.ones_like(scale))

        def mean_diff(block: slice, x0=x0, y0=y0, y_k=y_k, inv=inv):
            return lambda X, yl, w: _clip_rows(  # Clip of the batch mean (lines 14-15)
                xp, joint_diff_sum(model, xp, X, w, x, y_k, x0, y0, None, guard=False)[:, block]
                / m2, pn.C_u) * inv

        sens = 0.0 if zero else sens_unit
        std = 0.0 if zero else std_unit
        dv = cur.gaussian("increment_v", restrict(mean_diff(slice(0, d1)), sl),
                          sensitivity=sens, noise_std=std, batch=b)
        du = cur.gaussian("increment_u", restrict(mean_diff(slice(d1, None)), sl),
                          sensitivity=sens, noise_std=std, batch=b)
        v, u = v + dv * back, u + du * back
        y_next = _project(cur, s, y_k + lam * u)  # line 16
        ys.append(y_k)
        vs.append(v)
        us.append(u)
        nxt.append(y_next)
        x_last, y_last, y_k = x, y_k, y_next
    # line 18: G~(y_{t,k}) = (y_{t,k} - y_{t,k+1})/lambda over k in {0..K-1}
    G = np.stack([_norm_np(cur, (a - b_) / lam) for a, b_ in zip(ys, nxt, strict=True)], axis=1)
    sel = np.argmin(G, axis=1)
    return UpdaterState(x, st.x_prev, _select(cur, sel, ys), _select(cur, sel, vs),
                        _select(cur, sel, us))


# The printed rule, the warm start and the variants' policies ------------------------------


@dataclass(frozen=True)
class PaperRule:
    """The printed noise of a run (:func:`paper_noise`) and its single pass, if any."""

    noise: PaperNoise
    stream: SinglePass | None = None

    def warm(self, cur: Curator, setting: Setting, p: Mapping[str, Any], x0: Any,
             y: Any) -> Any:
        """One warm-start step's u. The paper never says how y0 is found nor charges it;
        the step reads the exact mean gradient through ``cur.exact``, so the accountant
        reports what an uncharged data-dependent start costs."""
        s = setting_of(setting)
        xp, model, n = cur.xp, s.model, float(cur.n)
        g = cur.exact("warm_start", lambda X, yl, w: joint_sum(
            model, xp, X, w, x0, y, None, guard=False) / n)
        return g[:, s.d1:]

    def update(self, cur: Curator, setting: Setting, p: Mapping[str, Any], t: int,
               st: UpdaterState) -> UpdaterState:
        """Algorithm 3 as printed (:func:`paper_updater`)."""
        return paper_updater(cur, setting, p, self.noise, t, st, self.stream)


def _paper_rule(cur: Curator, p: Mapping[str, Any], s: MinimaxSetting,
                esc: EscapeSchedule) -> PaperRule:
    """The printed noise, on the single pass when ``sampling = "single_pass"``, its sample
    budget checked first (line 762)."""
    if exact_gradients(p):
        raise InputError("exact_gradients is a switch of the sound variants only (the "
                         "escape demonstration); the printed noise has its own findings")
    pn = paper_noise(p, s, cur.n, esc)
    if not single_pass(p):
        return PaperRule(pn)
    check_sample_budget(cur, p, printed_counts(p))
    return PaperRule(pn, new_pass(cur, p))


def _sound_rule(cur: Curator, p: Mapping[str, Any], s: MinimaxSetting,
                esc: EscapeSchedule) -> SoundPlan:
    """The sound plan (:func:`sound_plan`); the escape schedule does not enter it."""
    return sound_plan(cur, p)


def warm_start(cur: Curator, setting: Setting, p: Mapping[str, Any], x0: Any, y0: Any,
               rule: SoundPlan | PaperRule) -> Any:
    """``warm_start`` projected ascent steps on y at x0 (Lemma 8, line 625, needs
    ||G_lambda(x0, y0)|| <= eps_bar^(1/2)/kappa; line 774 calls it a PiSARAH initialisation),
    each step's gradient read as ``rule`` reads it.
    """
    s = setting_of(setting)
    lam, W = float(p["lam"]), int(p["warm_start"])
    y = y0
    for _ in range(W):
        y = _project(cur, s, y + lam * rule.warm(cur, setting, p, x0, y))
    return y


@dataclass(frozen=True)
class Policy:
    """What the variants of Algorithms 2-3 differ in; everything else is one loop.

    ``escape``: the style of :func:`escape_schedule`; ``lam_scale``: the ascent step
    lambda = 1/(lam_scale L) unless ``lam`` is given; ``rule(cur, p, s, esc)``: the run's
    noise rule, prepared before any release, whose ``warm`` and ``update`` are a warm-start
    step and Algorithm 3.
    """

    name: str
    escape: str
    lam_scale: float
    rule: Callable[[Curator, Mapping[str, Any], MinimaxSetting, EscapeSchedule],
                   SoundPlan | PaperRule]


# Notes 3.4's safe defaults (lambda = 1/(2L), Jin et al. escape) and the corrected updater.
SOUND_POLICY = Policy("sound", "sound", 2.0, _sound_rule)
# Theorem 2 as printed: Lemma 8's schedule and lambda = 1/(6L) (line 625), Lemma 8's noise.
PAPER_POLICY = Policy("paper", "paper", 6.0, _paper_rule)
# Theorem 1 as printed: eta = 1/(2L) (Lemma 5, line 501), Lemma 8's lambda = 1/(6L) (line 625).
PAPER_ERM_POLICY = Policy("paper_erm", "paper_erm", 6.0, _paper_rule)


# The outer loop (Algorithm 2) ---------------------------------------------------------------


def _ball(rng: np.random.Generator, trials: int, d: int, r: float) -> np.ndarray:
    """Uniform draws from the ball of radius r in R^d: r U^(1/d) g/||g|| (notes A2-4)."""
    g = rng.standard_normal((trials, d))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    return r * rng.random((trials, 1)) ** (1.0 / d) * g


def _start(cur: Curator, s: MinimaxSetting) -> tuple[Any, Any]:
    x0 = cur.backend.asarray(np.repeat(np.asarray(s.x0, float)[None], cur.trials, axis=0))
    y0 = cur.backend.asarray(np.zeros((cur.trials, s.d2)))  # y0 = 0, as in Section 5.1
    return x0, y0


def outer_loop(cur: Curator, d1: int, esc: EscapeSchedule, T: int,
               update: Callable[[int, UpdaterState], UpdaterState], st: UpdaterState,
               pert_rng: np.random.Generator, *, with_certificate: bool = False) -> Any:
    """Algorithm 2 (lines 1-22) for every trial at once, branch by branch under masks.

    ``update(t, state)`` is line 3 (Algorithm 3); everything else reads only its v_t and
    public randomness (post-processing, notes A2-5). Returns x_out (trials, d1): x_{m_s}
    when a trial certifies (line 19) or at the end (line 22) if it ever anchored, else x_T
    (notes A2-2). ``with_certificate``: also return, per trial, whether line 19 certified
    the anchor (True) or the budget ran out (False).

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> cur = Curator(Dataset(np.zeros((1, 1)), np.zeros(1)), trials=1)
    >>> e = EscapeSchedule(0.1, 0.1, 0.5, 0.5, 0.0, 3, 1e-6)
    >>> grad = lambda t, st: UpdaterState(st.x, st.x_prev, st.y, 2.0 * st.x, st.u)
    >>> st = UpdaterState(np.ones((1, 1)), np.ones((1, 1)), None, None, None)
    >>> outer_loop(cur, 1, e, 50, grad, st, np.random.default_rng(0)).tolist()
    [[0.0]]
    """
    xp = cur.xp
    K = cur.trials
    escape = np.zeros(K, bool)
    done = np.zeros(K, bool)
    anchored = np.zeros(K, bool)
    m_s = np.zeros(K, int)
    count = np.zeros(K, int)
    D = np.zeros(K)
    vsq = np.zeros(K)
    anchor = st.x
    x_out = st.x
    for t in range(T):
        cur.step(t)
        st = update(t, st)  # line 3
        v = st.v
        vn = _norm_np(cur, v)
        act = ~done
        descend = act & ~escape & (vn >= esc.entry)  # lines 5-6
        enter = act & ~escape & ~descend  # lines 7-9
        in_esc = act & escape
        # lines 12-13: D = sum_{j=m_s+1}^t eta_H^2 ||v_j||^2 against (t - m_s) D_bar
        D = np.where(in_esc, D + esc.eta_H**2 * vn**2, D)
        vsq = np.where(in_esc, vsq + vn**2, vsq)
        brk = in_esc & (D > (t - m_s) * esc.D_bar)
        stay = in_esc & ~brk
        # line 14 (notes A2-1, "scalar"): sum_j eta_t^2 ||v_j||^2 = (t - m_s) D_bar
        eta_t = np.sqrt((t - m_s) * esc.D_bar / np.where(vsq > 0, vsq, 1.0))
        safe = np.where(vn > 0, vn, 1.0)
        step = descend * esc.eta / safe + brk * eta_t + stay * esc.eta_H
        pert = _ball(pert_rng, K, d1, esc.r) * enter[:, None]
        x_new = st.x - v * _per_trial(cur, step) + cur.backend.asarray(pert)
        # bookkeeping of the escape phase (lines 8, 15, 18-19)
        anchor = xp.where(_per_trial(cur, enter.astype(float)) > 0, st.x, anchor)
        m_s = np.where(enter, t, m_s)
        anchored |= enter
        D = np.where(enter, 0.0, D)
        vsq = np.where(enter, 0.0, vsq)
        count = np.where(enter, 0, np.where(stay, count + 1, count))
        escape = (escape | enter) & ~brk
        finish = stay & (count == esc.t_thres)
        x_out = xp.where(_per_trial(cur, finish.astype(float)) > 0, anchor, x_out)
        done |= finish
        x_new = xp.where(_per_trial(cur, done.astype(float)) > 0, st.x, x_new)
        st = UpdaterState(x_new, st.x, st.y, st.v, st.u)
        if done.all():
            break
    last = xp.where(_per_trial(cur, anchored.astype(float)) > 0, anchor, st.x)  # line 22
    out = xp.where(_per_trial(cur, (~done).astype(float)) > 0, last, x_out)
    return (out, done) if with_certificate else out


def dp_rgda(policy: Policy):
    """Algorithm 2 with Algorithm 3 under ``policy`` as a ``run(cur, setting, params)``
    function.

    The run returns x_out (trials, d1); with ``params["certificate"]`` true, (trials,
    d1 + 1) whose last column is 1 where Algorithm 2 certified x_out (line 19) and 0 where
    its budget ran out (line 22).

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> from dpverify.execution.trials import build_problem
    >>> t = resolve("dp_rgda:paper_erm")
    >>> p = t.algorithm.params("paper_erm", {"T": 4, "n": 50, "schedule": "given"})
    >>> prob = build_problem(t, p, 0)
    >>> cur = Curator(prob.data, trials=2, rng=0)
    >>> dp_rgda(PAPER_ERM_POLICY)(cur, prob.setting(), p).shape  # v and u released apart
    (2, 3)
    >>> sorted({r.name for r in cur.ledger})
    ['increment_u', 'increment_v', 'refresh_u', 'refresh_v']
    """

    def run(cur: Curator, setting: Setting, params: Mapping[str, Any]) -> Any:
        s = setting_of(setting)
        p = resolved(params, s, cur.n)
        if p.get("lam") is None:
            p["lam"] = 1.0 / (policy.lam_scale * s.L)
        if int(p["K"]) < 1:
            raise InputError(f"K must be >= 1, got {p['K']}")
        esc = escape_schedule(p, s, cur.n, style=policy.escape)
        x, y = _start(cur, s)
        rule = policy.rule(cur, p, s, esc)
        y = warm_start(cur, setting, p, x, y, rule)
        pert_rng = np.random.default_rng(cur.rng.integers(2**63))  # public randomness
        st = UpdaterState(x, x, y, cur.backend.asarray(np.zeros((cur.trials, s.d1))),
                          cur.backend.asarray(np.zeros((cur.trials, s.d2))))

        def update(t: int, state: UpdaterState) -> UpdaterState:
            return rule.update(cur, setting, p, t, state)

        if not p.get("certificate"):
            return outer_loop(cur, s.d1, esc, int(p["T"]), update, st, pert_rng)
        # The certificate is part of the output (post-processing of v, notes A2-5): x_out
        # with one more column, 1 where line 19 certified x_out as an alpha-SOSP
        # (dpverify.checks.certificates reads this layout).
        x_out, done = outer_loop(cur, s.d1, esc, int(p["T"]), update, st, pert_rng,
                                 with_certificate=True)
        flag = cur.xp.reshape(cur.backend.asarray(done.astype(float)), (cur.trials, 1))
        return cur.xp.concat([x_out, flag], axis=1)

    return run
