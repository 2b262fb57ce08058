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

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats as sstats

from dpverify.accounting import account_ledger
from dpverify.audit.result import AuditResult
from dpverify.audit.targets import SEED_PAIRS, SEED_SAMPLES, call_user, prepare
from dpverify.data import Dataset, synthetic_classification
from dpverify.errors import InputError, check_positive, check_probability
from dpverify.execution import run_target, seed_streams

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
    if guesses is None:
        guesses = sorted({max(2, int(round(f * m))) for f in DEFAULT_GUESS_FRACTIONS})
    guesses = [int(g) for g in guesses if 2 <= int(g) <= m]
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


def _canaries(m: int, d: int, rng: np.random.Generator, norm: float) -> tuple[np.ndarray, ...]:
    X = rng.standard_normal((m, d))
    X *= norm / np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.choice([-1.0, 1.0], size=m)
    return X, y


def audit_onerun(
    target: str,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    canaries: int = 1000,
    confidence: float = 0.95,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    scale: str = "quick",
    relation: str | None = None,
    guesses: Sequence[int] | None = None,
    scores: str = "output",
    canary_norm: float = 1.0,
    backend: str = "numpy",
) -> AuditResult:
    """One-run epsilon lower bound with ``canaries`` records each included w.p. 1/2.

    Parameters
    ----------
    target
        A registered GLM-style algorithm (its output is a parameter vector in R^d) or a
        callable ``f(data, rng, trials)`` returning an array of shape (trials, d).
    canaries
        Number m of canary records; their data dimension d comes from the problem
        (``--param d=...``); canaries are near-orthogonal when d >= m.
    scores
        ``"output"`` (the final output) or ``"releases"`` (the released answers, for a
        registered target; every answer must have d entries).

    Examples
    --------
    >>> r = audit_onerun("noisy_gd:planted_mean_noise_on_sum", canaries=500,
    ...                  params={"d": 500, "n": 100, "T": 5, "loss": "linear"})
    >>> r.verdict.value
    'FAIL'
    """
    m = int(check_positive(canaries, "canaries", integer=True))
    confidence = check_probability(confidence, "confidence")
    if scores not in ("output", "releases"):
        raise InputError(f"scores must be 'output' or 'releases', got {scores!r}")
    alpha = 1.0 - confidence
    setup = prepare(target, epsilon=epsilon, delta=delta, params=params, seed=seed,
                    scale=scale, relation=relation, backend=backend)
    canary_rng = np.random.default_rng(seed_streams(seed, SEED_PAIRS + 1)[SEED_PAIRS])
    run_seed = seed_streams(seed, SEED_SAMPLES + 1)[SEED_SAMPLES]
    if setup.registered:
        assert setup.problem is not None
        base = setup.problem.data
    else:
        base, _ = synthetic_classification(int(setup.params.get("n", 100)),
                                           int(setup.params.get("d", 100)), canary_rng)
    d = base.d
    Xc, yc = _canaries(m, d, canary_rng, float(canary_norm))
    included = canary_rng.random(m) < 0.5
    data = Dataset(np.vstack([base.X, Xc[included]]), np.concatenate([base.y, yc[included]]))

    eps_acc: float | None = None
    acc_note = "a callable has no ledger"
    if setup.registered:
        assert setup.target is not None and setup.problem is not None
        out, cur = run_target(setup.target, setup.params, setup.problem, trials=1,
                              rng=run_seed, backend=backend, data_override=data,
                              keep_answers=scores == "releases")
        out = np.asarray(cur.backend.to_numpy(out), dtype=float).reshape(1, -1)
        try:
            eps_acc = float(account_ledger(cur.ledger, setup.delta, setup.relation).epsilon)
            acc_note = "ledger of the audited run"
        except InputError as e:
            acc_note = str(e)
        if scores == "releases":
            answers = [r.answer for r in cur.ledger.records if r.answer is not None]
            if not answers or any(a.shape[1] != d for a in answers):
                raise InputError(f"scores='releases' needs answers with d={d} entries; "
                                 f"{setup.name} released shapes "
                                 f"{sorted({tuple(r.shape) for r in cur.ledger})}")
            total = np.sum([a[0] for a in answers], axis=0)
            # A released gradient sum moves against each included record's direction y x.
            sc = -yc * (Xc @ total)
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
    if scores == "output":
        if out.shape[1] != d:
            raise InputError(f"a one-run audit scores canaries by <output, x_i>: the output "
                             f"must have the data dimension d={d}, got {out.shape[1]} entries")
        sc = yc * (Xc @ out[0])
    res = one_run_bound(sc, included, delta=setup.delta, alpha=alpha, guesses=guesses)
    details = {
        "canaries": m,
        "included": int(included.sum()),
        "guesses": res["r"],
        "correct": res["v"],
        "scores": scores,
        "dimension": d,
        "runs_total": 1,
        "relation": setup.relation,
    }
    evidence = {"by_guesses": res["by_guesses"], "alpha_each": res["alpha_each"],
                "accountant": acc_note}
    if d < m:
        evidence["note"] = f"canaries overlap (d={d} < m={m}): still valid, but weaker"
    return AuditResult(setup.name, "onerun", float(res["epsilon"]), setup.epsilon_claimed,
                       eps_acc, setup.delta, confidence, 1, "steinke", details, evidence)
