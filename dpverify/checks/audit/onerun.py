"""One-run audit (Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1) training run").

m canary records are each included in the training data independently with probability
1/2, the target runs once, and every canary gets a score (higher: more likely included).
The auditor guesses "in" for the k+ highest scores and "out" for the k- lowest, abstaining
on the rest; of its r = k+ + k- guesses, v are right. For an (eps, delta)-DP target the
number of correct guesses is stochastically dominated as in their Theorem 5.2, whose
p-value (their Appendix D, ported here to NumPy/SciPy) is

    P[Binom(r, e^eps / (1 + e^eps)) >= v]
      + 2 m delta max_{i in 1..v} (1/i) P[v - i <= Binom(r, e^eps / (1 + e^eps)) < v],

and the epsilon lower bound at confidence 1 - alpha is the largest eps whose p-value is
below alpha. Several numbers of guesses are tried, each at alpha / (their count)
(Bonferroni). One run is cheap and the bound is loose (17-23% of the true epsilon in the
idealized tests of jax_privacy, anchors/auditing.md section 4.6); it is a screening test
and a check that a run with planted bugs is caught without thousands of runs.

Canaries for a GLM-style target are random unit vectors x_i with random labels y_i; a run's
output theta scores them by y_i <theta, x_i> (black-box, the final model) or, with
``scores="releases"``, by -y_i sum_t <a_t, x_i> over the released gradient sums (white-box,
every iterate).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import stats as sstats

from dpverify.accounting.accountant import account_ledger
from dpverify.checks.audit.result import AuditResult
from dpverify.checks.audit.targets import (
    AUTO_NEIGHBOURS,
    SEED_PAIRS,
    SEED_SAMPLES,
    TargetOptions,
    call_user,
    check_trials,
    resolve_neighbours,
)
from dpverify.core.data import Dataset, synthetic_classification
from dpverify.core.errors import InputError
from dpverify.core.registry import is_registered_target, resolve
from dpverify.execution.trials import run_target, seed_streams
from dpverify.stats import betting
from dpverify.stats.power import (
    DETECT_PROBABILITY,
    Power,
    reference_for,
    smallest_detected,
)

DEFAULT_GUESS_FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """p-value of v correct guesses out of r under (epsilon, delta)-DP with m canaries.

    Steinke, Nasr, Jagielski 2023, Theorem 5.2 and Appendix D.

    Examples
    --------
    >>> round(one_run_p_value(1000, 100, 65, 0.0, 0.0), 5)  # a fair coin: P[Bin(100,.5)>=65]
    0.00176
    >>> one_run_p_value(1000, 100, 50, 1.0, 1e-5) > 0.99
    True
    """
    if not (0 <= v <= r <= m):
        raise InputError(f"one-run counts need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    q = 1.0 / (1.0 + math.exp(-epsilon))  # accuracy of eps-DP randomized response
    beta = float(sstats.binom.sf(v - 1, r, q))  # P[Binom(r, q) >= v]
    if v == 0 or delta == 0:
        return min(beta, 1.0)
    i = np.arange(1, v + 1)
    # (1/i) P[v - i <= Binom(r, q) < v], maximized over i
    alpha_term = float(np.max(np.cumsum(sstats.binom.pmf(v - i, r, q)) / i))
    return min(beta + alpha_term * delta * 2.0 * m, 1.0)


def epsilon_one_run(m: int, r: int, v: int, delta: float, alpha: float) -> float:
    """The largest epsilon that v correct out of r guesses refute at level ``alpha``.

    Examples
    --------
    >>> round(epsilon_one_run(1000, 100, 90, 1e-5, 0.05), 2)
    1.63
    >>> epsilon_one_run(1000, 100, 50, 1e-5, 0.05)
    0.0
    """
    if one_run_p_value(m, r, v, 0.0, delta) >= alpha:
        return 0.0
    lo, hi = 0.0, 1.0
    while one_run_p_value(m, r, v, hi, delta) < alpha:
        lo, hi = hi, 2.0 * hi
        if hi > 1e3:
            return lo
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if one_run_p_value(m, r, v, mid, delta) < alpha:
            lo = mid
        else:
            hi = mid
    return lo


def one_run_bound(
    scores: np.ndarray, included: np.ndarray, *, delta: float, alpha: float,
    guesses: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Best one-run bound over several numbers of guesses, Bonferroni-corrected.

    For r guesses, the r/2 highest scores are guessed "in" and the r/2 lowest "out".

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> inc = rng.random(2000) < 0.5
    >>> res = one_run_bound(rng.normal(3.0 * inc, 1.0), inc, delta=1e-5, alpha=0.05)
    >>> res["epsilon"] > 2.0
    True
    """
    s = np.asarray(scores, dtype=float)
    inc = np.asarray(included, dtype=bool)
    m = s.size
    if m < 2 or inc.shape != s.shape:
        raise InputError(f"one-run audit needs >= 2 scored canaries, got {m}")
    guesses = _guess_counts(m, guesses)
    if not guesses:
        raise InputError(f"no valid number of guesses for {m} canaries")
    order = np.argsort(-np.where(np.isnan(s), -np.inf, s), kind="stable")
    a = alpha / len(guesses)
    rows = []
    for r in guesses:
        k_in = r // 2
        k_out = r - k_in
        v = int(inc[order[:k_in]].sum() + (~inc[order[m - k_out:]]).sum())
        rows.append({"r": r, "v": v, "epsilon": epsilon_one_run(m, r, v, delta, a)})
    best = max(rows, key=lambda row: row["epsilon"])
    return {**best, "m": m, "alpha_each": a, "by_guesses": rows}


@dataclass(frozen=True)
class SteinkeOneRun:
    """The one-run statistic: correct guesses among the r most confident canaries.

    Steinke, Nasr, Jagielski 2023, Theorem 5.2 and Appendix D (:func:`one_run_bound`),
    Bonferroni over the numbers of ``guesses``. It is not a counts statistic of
    :mod:`dpverify.stats.score_audit`: its evidence is the joint ranking of all m canaries
    of one run, guessed "in" at the top and "out" at the bottom, not an event's rate in
    two worlds of independent runs.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> inc = rng.random(2000) < 0.5
    >>> SteinkeOneRun().bound(rng.normal(3.0 * inc, 1.0), inc, delta=1e-5,
    ...                       alpha=0.05)["epsilon"] > 2.0
    True
    """

    guesses: tuple[int, ...] | None = None
    name: ClassVar[str] = "steinke"
    citation: ClassVar[str] = "Steinke, Nasr, Jagielski 2023 (Theorem 5.2)"

    def bound(self, scores: np.ndarray, included: np.ndarray, *, delta: float,
              alpha: float) -> dict[str, Any]:
        return one_run_bound(scores, included, delta=delta, alpha=alpha,
                             guesses=self.guesses)


def _canaries(m: int, base: Dataset, rng: np.random.Generator, norm: float
              ) -> tuple[np.ndarray, np.ndarray]:
    """m canaries of norm ``norm`` with random labels: orthonormal directions, orthogonal
    to the data too where the dimension allows (d >= n + m), else near-orthogonal.

    Canaries that share a direction interfere: each one's score carries the others'
    signal as noise (Keinan, Shenfeld, Ligett 2025). Orthogonal ones do not.
    """
    d = base.d
    G = rng.standard_normal((d, m))
    if d >= m:
        if d >= base.n + m:  # project the data's span out first
            q, _ = np.linalg.qr(base.X.T)
            G -= q @ (q.T @ G)
        G, _ = np.linalg.qr(G)
    X = G.T * (norm / np.linalg.norm(G.T, axis=1, keepdims=True))
    y = rng.choice([-1.0, 1.0], size=m)
    return X, y


def _onerun_params(target: str, canaries: int, params: Mapping[str, Any] | None,
                   scale: str) -> tuple[dict[str, Any], list[str]]:
    """A registered target's parameters for a one-run audit: room for the canaries.

    Where the target declares a dimension ``d`` the user left at its default, it becomes
    n + m, so the m canaries can be orthogonal to each other and to the n records.
    """
    params = dict(params or {})
    if not is_registered_target(target) or "d" in params:
        return params, []
    t = resolve(target)
    p = t.algorithm.params(t.variant.name, params, scale)
    if "d" not in p:
        return params, []
    d = int(p.get("n", 0)) + int(canaries)
    if d <= int(p["d"]):
        return params, []
    params["d"] = d
    return params, [f"audit instance: d = {d} (n + canaries) instead of {p['d']}, so the "
                    "canaries are orthogonal to each other and to the data"]


def one_run_power(m: int, guesses: Sequence[int] | None, *, alpha: float, delta: float,
                  epsilon: float, probability: float = DETECT_PROBABILITY,
                  replicates: int = 400) -> Power:
    """Detectable epsilon of the one-run audit with m canaries (Monte Carlo, fixed seed).

    The reference canary is the Gaussian family's: its score is N(mu, 1) when included
    and N(0, 1) when not (a mu-GDP mechanism seen through one canary, the idealized
    setting of jax_privacy's one-run tests), or Laplace with scale 1/eps when delta = 0.
    The audit fails the claim when, for some number r of guesses, the correct ones reach
    the smallest count whose p-value at the claim is below alpha / (number of r).

    Examples
    --------
    >>> p = one_run_power(1000, None, alpha=0.05, delta=1e-5, epsilon=1.0)
    >>> p.method, p.epsilon > 2.0
    ('steinke', True)
    """
    return _one_run_power(int(m), None if guesses is None else tuple(int(g) for g in guesses),
                          float(alpha), float(delta), float(epsilon), float(probability),
                          int(replicates))


@functools.lru_cache(maxsize=64)
def _one_run_power(m: int, guesses: tuple[int, ...] | None, alpha: float, delta: float,
                   epsilon: float, probability: float, replicates: int) -> Power:
    rs = _guess_counts(m, guesses)
    a = alpha / len(rs)
    need = np.array([_correct_needed(m, r, epsilon, delta, a) for r in rs])
    rng0 = np.random.default_rng(betting.POWER_SEED)
    inc = rng0.random((replicates, m)) < 0.5
    noise = (rng0.standard_normal((replicates, m)) if delta > 0
             else rng0.laplace(size=(replicates, m)))
    ref = reference_for(delta)

    def power(theta: float) -> float:
        # Laplace of scale 1/eps shifted by 1 is the shift eps of a unit Laplace.
        order = np.argsort(-(noise + theta * inc), axis=1, kind="stable")
        hits = np.take_along_axis(inc, order, axis=1)
        caught = np.zeros(replicates, dtype=bool)
        for r, v in zip(rs, need, strict=True):
            k_in = r // 2
            v_r = hits[:, :k_in].sum(1) + (~hits[:, m - (r - k_in):]).sum(1)
            caught |= v_r >= v
        return float(caught.mean())

    theta = smallest_detected(power, probability, 0.5, 30.0)
    eps = ref.epsilon(theta, delta) if math.isfinite(theta) else math.inf
    return Power(float(eps), probability, ref.name, theta, "steinke",
                 f"{m} canaries, Monte Carlo ({replicates} runs)")


def _guess_counts(m: int, guesses: Sequence[int] | None) -> list[int]:
    if guesses is None:
        guesses = sorted({max(2, int(round(f * m))) for f in DEFAULT_GUESS_FRACTIONS})
    return [int(g) for g in guesses if 2 <= int(g) <= m]


def _correct_needed(m: int, r: int, epsilon: float, delta: float, alpha: float) -> int:
    """The fewest correct guesses out of r whose p-value at ``epsilon`` is below alpha."""
    if one_run_p_value(m, r, r, epsilon, delta) >= alpha:
        return r + 1  # even r correct out of r does not refute the claim
    lo, hi = 0, r
    while lo < hi:
        mid = (lo + hi) // 2
        if one_run_p_value(m, r, mid, epsilon, delta) < alpha:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class OneRunOptions(TargetOptions):
    """The options of a one-run audit (those of :class:`~dpverify.checks.audit.targets.
    TargetOptions` and these).

    canaries
        Number m of canary records. Where a registered target declares ``d`` and it is
        not given, d becomes n + m so the canaries are orthogonal to each other and to
        the data; where it declares a clip on per-sample gradients of a loss, the audit
        instance takes the linear loss (as for the worst-case canary of
        :func:`~dpverify.checks.audit.targets.resolve_neighbours`), so every included canary
        moves every release by the clip.
    guesses
        Numbers of guesses tried (Bonferroni over them; default: fractions of m).
    scores
        ``"output"`` (the final output), ``"releases"`` (every released answer, for a
        registered target; each must have d entries) or ``"auto"`` (releases for a
        registered target, else the output).
    canary_norm
        Norm of the canaries (default: the declared clip, at most 1, else 1).

    Examples
    --------
    >>> OneRunOptions(scores="weights")
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: scores must be 'output', 'releases' or 'auto', got 'weights'
    """

    canaries: int = 1000
    guesses: Sequence[int] | None = None
    scores: str = "auto"
    canary_norm: float | None = None

    def __post_init__(self) -> None:
        check_trials(self, "canaries")
        super().__post_init__()
        if self.scores not in ("output", "releases", "auto"):
            raise InputError(f"scores must be 'output', 'releases' or 'auto', got "
                             f"{self.scores!r}")


def audit_onerun(target: str, options: OneRunOptions | None = None) -> AuditResult:
    """One-run epsilon lower bound with ``options.canaries`` records each included w.p. 1/2.

    ``target`` is a registered GLM-style algorithm (its output is a parameter vector in
    R^d) or a callable ``f(data, rng, trials)`` returning an array of shape (trials, d).

    Examples
    --------
    >>> r = audit_onerun("noisy_gd:planted_mean_noise_on_sum", OneRunOptions(
    ...     canaries=500, params={"n": 100, "T": 5}))
    >>> r.verdict.value, r.details["scores"], r.details["dimension"]
    ('FAIL', 'releases', 600)
    """
    o = options or OneRunOptions()
    m = o.canaries
    params, notes = _onerun_params(str(target).strip(), m, o.params, o.scale)
    setup = o.prepare(target, params)
    resolve_neighbours(setup, AUTO_NEIGHBOURS)  # the worst-case instance (linear loss)
    setup.notes[:0] = notes
    scores = o.scores
    if scores == "auto":
        scores = "releases" if setup.registered else "output"
    base, (Xc, yc), included, norm = _canary_game(setup, m, o.canary_norm, o.seed)
    data = Dataset(np.vstack([base.X, Xc[included]]), np.concatenate([base.y, yc[included]]))
    sc, eps_acc, acc_note, scores = _scores(setup, data, (Xc, yc), scores, o.seed,
                                            o.scores == "releases")
    statistic = SteinkeOneRun(None if o.guesses is None else tuple(o.guesses))
    res = statistic.bound(sc, included, delta=setup.delta, alpha=o.alpha)
    details = {
        "canaries": m, "included": int(included.sum()), "guesses": res["r"],
        "correct": res["v"], "scores": scores, "dimension": base.d, "canary_norm": norm,
        "runs_total": 1, "relation": setup.relation, "instance": list(setup.notes),
    }
    evidence = {"by_guesses": res["by_guesses"], "alpha_each": res["alpha_each"],
                "accountant": acc_note}
    if base.d < m:
        evidence["note"] = f"canaries overlap (d={base.d} < m={m}): still valid, but weaker"
    out = AuditResult(setup.name, "onerun", float(res["epsilon"]), setup.epsilon_claimed,
                      eps_acc, setup.delta, o.confidence, 1, statistic.name, details, evidence)
    if o.detect_probability is None:
        return out
    return out.with_power(one_run_power(m, o.guesses, alpha=o.alpha, delta=setup.delta,
                                        epsilon=setup.epsilon_claimed,
                                        probability=o.detect_probability))


def _canary_game(setup: Any, m: int, canary_norm: float | None, seed: int
                 ) -> tuple[Dataset, tuple[np.ndarray, np.ndarray], np.ndarray, float]:
    """The data without canaries, the m canaries, which are included, and their norm."""
    canary_rng = np.random.default_rng(seed_streams(seed, SEED_PAIRS + 1)[SEED_PAIRS])
    if setup.registered:
        assert setup.problem is not None
        base = setup.problem.data
    else:
        base, _ = synthetic_classification(int(setup.params.get("n", 100)),
                                           int(setup.params.get("d", 100)), canary_rng)
    clip = setup.params.get("clip") if setup.registered else None
    norm = float(canary_norm) if canary_norm is not None else min(float(clip or 1.0), 1.0)
    canaries = _canaries(m, base, canary_rng, norm)
    return base, canaries, canary_rng.random(m) < 0.5, norm


def _scores(setup: Any, data: Dataset, canaries: tuple[np.ndarray, np.ndarray], scores: str,
            seed: int, strict: bool = True) -> tuple[np.ndarray, float | None, str, str]:
    """Each canary's score from one run on ``data``, the run's accountant epsilon, and
    what was scored (releases that do not all have d entries give way to the output,
    unless they were asked for)."""
    Xc, yc = canaries
    d = data.d
    run_seed = seed_streams(seed, SEED_SAMPLES + 1)[SEED_SAMPLES]
    eps_acc: float | None = None
    acc_note = "a callable has no ledger"
    if setup.registered:
        assert setup.target is not None and setup.problem is not None
        out, cur = run_target(setup.target, setup.params, setup.problem, trials=1,
                              rng=run_seed, backend=setup.backend, data=data,
                              keep_answers=scores == "releases")
        out = np.asarray(cur.backend.to_numpy(out), dtype=float).reshape(1, -1)
        try:
            eps_acc = float(account_ledger(cur.ledger, setup.delta, setup.relation).epsilon)
            acc_note = "ledger of the audited run"
        except InputError as e:
            acc_note = str(e)
        if scores == "releases":
            answers = [r.answer for r in cur.ledger.records if r.answer is not None]
            if answers and all(a.shape[1] == d for a in answers):
                total = np.sum([a[0] for a in answers], axis=0)
                # A released gradient sum moves against each included record's direction.
                return -yc * (Xc @ total), eps_acc, acc_note, "releases"
            if strict:
                raise InputError(f"scores='releases' needs answers with d={d} entries; "
                                 f"{setup.name} released shapes "
                                 f"{sorted({tuple(r.shape) for r in cur.ledger})}")
    else:
        assert setup.fn is not None
        out = np.asarray(call_user(setup.fn, setup.name, data,
                                   np.random.default_rng(run_seed), 1), dtype=float)
        if out.ndim == 0 or out.shape[0] != 1:
            raise InputError(f"target {setup.name} returned shape {tuple(out.shape)} when "
                             f"asked for trials=1; expected (1, {d})")
        out = out.reshape(1, -1)
        if scores == "releases":
            raise InputError("scores='releases' needs a registered curator algorithm")
    if out.shape[1] != d:
        where = ("the problem's" if setup.registered else
                 "the audit's data for a callable: --param d=D sets it")
        raise InputError(f"a one-run audit scores canaries by <output, x_i>: the output "
                         f"must have the data dimension d={d} ({where}), got "
                         f"{out.shape[1]} entries; it suits a target that releases a model "
                         "or a sum of its records")
    return yc * (Xc @ out[0]), eps_acc, acc_note, "output"
