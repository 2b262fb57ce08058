"""Comparative experiments: does a method beat a baseline as a paper's figure claims?

A paper's experiment often claims an ordering ("our method outperforms [34] for every
epsilon") on a grid of one parameter. The ``compare`` check runs the subject (the check's
target) and a baseline on the same data at each grid value, ``seeds`` runs each, measures
a utility metric, and tests the claimed ordering of the means with Welch's t-test, Holm's
correction across grid values:

* PASS when the claimed ordering holds at every value at level ``1 - confidence``;
* FAIL when the opposite ordering holds at some value at that level (a false FAIL when the
  claim is true everywhere has probability at most ``1 - confidence``);
* INCONCLUSIVE otherwise.

Both arms' ledgers are accounted at the subject's claimed delta, so the report shows what
each arm spent beside what it claims. ``paper`` holds the figure's own data (settings,
numbers, the claim in its words, what the reproduction changes and why): it is carried
into the evidence untouched, to stand beside the measured values in the report.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

from dpverify.accounting.accountant import account_ledger
from dpverify.checks.base import (
    CheckKind,
    Options,
    Outcome,
    Result,
    doc,
    jsonable,
    register_kind,
)
from dpverify.checks.rates.metrics import target_metric
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError, check_positive, check_probability
from dpverify.execution.experiment import Experiment
from dpverify.execution.trials import seed_streams

__all__ = ["CompareCheck", "CompareOptions", "compare_arms", "holm"]


@dataclass(frozen=True)
class CompareOptions(Options):
    """The options of a ``compare`` check.

    ``baseline`` (``name:variant``) and its own parameters ``baseline_params``;
    ``subject_params``, the subject's own (the check's ``params`` go to both arms: the
    problem's shape, which must give both the same data); ``vary`` and ``values``, the
    grid; ``seeds`` runs per arm and value; ``metric`` (default: the subject's utility
    claim's quantity); ``claim``: ``less`` (the subject's metric is below the
    baseline's) or ``greater``; ``confidence``; ``account``: whether to account each
    arm's ledger; ``paper``: the figure's declared data, reported as given.
    """

    baseline: str
    baseline_params: dict[str, Any] | None = None
    subject_params: dict[str, Any] | None = None
    vary: str | None = None
    values: tuple[Any, ...] | None = None
    seeds: int = 10
    metric: str | None = None
    claim: Literal["less", "greater"] = "less"
    confidence: float = 0.95
    account: bool = True
    paper: dict[str, Any] | None = None

    def validate(self) -> None:
        check_positive(self.seeds, "seeds", integer=True)
        check_probability(self.confidence, "confidence")
        if self.seeds < 2:
            raise InputError(f"seeds must be at least 2 for a t-test, got {self.seeds}")
        if (self.vary is None) != (self.values is None):
            raise InputError("give vary and values together (or neither, for one point)")
        if self.values is not None and not self.values:
            raise InputError("values must not be empty")


def holm(pvalues: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control).

    Examples
    --------
    >>> holm(np.array([0.01, 0.04, 0.03])).round(3).tolist()
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(pvalues, dtype=float)
    order = np.argsort(p)
    m = p.size
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return out


def _welch(a: list[float], b: list[float], side: str) -> float:
    """One-sided Welch p-value; 1 where it is undefined (no spread, a non-finite value).

    Examples
    --------
    >>> _welch([1.0, 1.1, 0.9], [5.0, 5.2, 4.9], "less") < 0.01, _welch([1.0, 1.0], [1.0, 1.0],
    ...                                                                   "less")
    (True, 1.0)
    """
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # no spread: the p-value is NaN
        p = float(stats.ttest_ind(a, b, equal_var=False, alternative=side).pvalue)
    return p if math.isfinite(p) else 1.0


def _data_key(problem: Any) -> str:
    h = hashlib.sha1(np.ascontiguousarray(problem.data.X).tobytes())
    h.update(np.ascontiguousarray(problem.data.y).tobytes())
    return h.hexdigest()


def _arm(exp: Experiment, seeds: int, metric_fn: Any, problem: Any, account: bool,
         delta: float | None, stream: int) -> dict[str, Any]:
    """One arm at one grid value: metric per run, mean, sd, and the ledger's epsilon.

    The arms draw from different children of the root seed (``stream``): their runs are
    independent, as Welch's test assumes."""
    with np.errstate(all="ignore"):
        out, cur = exp.run(trials=seeds, rng=seed_streams(exp.seed, 3)[stream])
    values = np.asarray(metric_fn(problem, np.asarray(cur.backend.to_numpy(out), dtype=float),
                                  exp.params), dtype=float).reshape(-1)
    row: dict[str, Any] = {"mean": float(np.mean(values)),
                           "sd": float(np.std(values, ddof=1)), "values": values.tolist()}
    if account:
        claim = exp.claim
        res = account_ledger(cur.ledger, delta if delta is not None else claim.delta,
                             claim.relation)
        row["epsilon_accountant"] = float(res.epsilon)
        row["epsilon_claimed"] = float(claim.epsilon) if claim.epsilon is not None else None
    return row


def _arm_params(params: Mapping[str, Any], o: CompareOptions
                ) -> list[tuple[Any, tuple[dict[str, Any], dict[str, Any]]]]:
    """Per grid value (``None`` without a grid), the subject's and the baseline's
    parameters: the check's ``params`` go to both, each arm's own over them."""
    out = []
    for v in ([None] if o.values is None else list(o.values)):
        at = {} if v is None else {o.vary: v}
        out.append((v, ({**params, **(o.subject_params or {}), **at},
                        {**params, **(o.baseline_params or {}), **at})))
    return out


def compare_arms(exp: Experiment, o: CompareOptions) -> dict[str, Any]:
    """Run both arms over the grid; per value their summaries and the two one-sided tests.

    Examples
    --------
    >>> exp = Experiment("noisy_gd:sound", {"n": 50, "T": 5})
    >>> r = compare_arms(exp, CompareOptions(baseline="noisy_gd:sound",
    ...                  baseline_params={"T": 1}, seeds=5, account=False))
    >>> len(r["points"]), sorted(r["points"][0])[:3]
    (1, ['baseline', 'p_greater', 'p_less'])
    """
    metric, metric_fn = target_metric(exp.target, o.metric)
    refused = CompareCheck().refused_arm(exp.name, exp.overrides, o, exp.scale.value)
    if refused is not None:  # before the first arm runs
        t, params, _, e = refused
        at = f" at {o.vary} = {params[o.vary]!r}" if o.vary in params else ""
        raise InputError(f"{t}{at}: {e}")
    points = []
    for v, (s_params, b_params) in _arm_params(exp.overrides, o):
        subj = exp.replace(params=s_params)
        base = Experiment(o.baseline, b_params, seed=exp.seed, scale=exp.scale,
                          backend=exp.backend)
        if _data_key(subj.problem) != _data_key(base.problem):
            raise InputError(f"{exp.name} and {o.baseline} see different data at "
                             f"{o.vary}={v}: give the problem's parameters to both (the "
                             "check's params)")
        delta = subj.claim.delta
        s = _arm(subj, o.seeds, metric_fn, subj.problem, o.account, delta, 1)
        b = _arm(base, o.seeds, metric_fn, subj.problem, o.account, delta, 2)
        p_less, p_greater = (_welch(s["values"], b["values"], side)
                             for side in ("less", "greater"))
        points.append({"value": v, "subject": s, "baseline": b,
                       "p_less": p_less, "p_greater": p_greater,
                       "ratio": s["mean"] / b["mean"] if b["mean"] else math.inf})
    return {"metric": metric, "points": points}


def _judge(res: dict[str, Any], o: CompareOptions) -> tuple[Verdict, list[bool], list[bool]]:
    alpha = 1.0 - o.confidence
    pts = res["points"]
    claim_p = np.array([p["p_less" if o.claim == "less" else "p_greater"] for p in pts])
    other_p = np.array([p["p_greater" if o.claim == "less" else "p_less"] for p in pts])
    confirmed = (holm(claim_p) <= alpha).tolist()
    refuted = (holm(other_p) <= alpha).tolist()
    if any(refuted):
        return Verdict.FAIL, confirmed, refuted
    if all(confirmed):
        return Verdict.PASS, confirmed, refuted
    return Verdict.INCONCLUSIVE, confirmed, refuted


def _table(rows: list[dict[str, Any]], o: CompareOptions) -> str:
    """Each point's means, their ratio and the epsilons the ledgers spent; then the paper's.

    Examples
    --------
    >>> _table([{"value": 1.0, "subject_mean": 0.5, "baseline_mean": 2.0, "ratio": 0.25,
    ...          "subject_epsilon": 9.0, "baseline_epsilon": 1.0}],
    ...        CompareOptions(baseline="b", vary="epsilon", values=(1.0,),
    ...                       paper={"claim": "a beats b", "numbers": "none printed"}))
    'Measured, subject vs baseline: epsilon=1: 0.5 vs 2 (ratio 0.25; ledger epsilon 9 vs 1). \
The paper: a beats b; numbers: none printed.'
    """
    parts = []
    for r in rows:
        where = f"{o.vary}={r['value']:g}: " if o.vary else ""
        spent = ("" if r["subject_epsilon"] is None else
                 f"; ledger epsilon {r['subject_epsilon']:.3g} vs {r['baseline_epsilon']:.3g}")
        parts.append(f"{where}{r['subject_mean']:.4g} vs {r['baseline_mean']:.4g} "
                     f"(ratio {r['ratio']:.3g}{spent})")
    text = "Measured, subject vs baseline: " + "; ".join(parts) + "."
    paper = o.paper or {}
    if paper:
        text += " The paper: " + "; ".join(
            f"{v}" if k == "claim" else f"{k}: {v}" for k, v in paper.items()
            if k in ("claim", "numbers")) + "."
    return text


@dataclass(frozen=True)
class CompareMetrics(Result):
    """The ``compare`` check's numbers: a subject against a baseline, point by point."""

    metric: str | None = doc("the utility metric compared")
    claim: str | None = doc("the ordering claimed (`better`, `worse`...)")
    seeds: int | None = doc("runs per arm and point")
    confidence: float | None = doc("1 - the Holm-corrected level")
    baseline: str | None = doc("the baseline target")
    vary: str | None = doc("the parameter swept (none: one point)")
    points: list[Any] | None = doc("per point: value, p-values, ratio, both means and "
                                   "epsilons, confirmed, refuted")


@register_kind
class CompareCheck(CheckKind):
    """Does the subject beat the baseline at every grid value, as the paper claims?"""

    name = "compare"
    Options = CompareOptions
    Result = CompareMetrics
    registered_only = True

    def arms(self, target: str, params: Mapping[str, Any], options: CompareOptions,
             scale: str = "quick") -> list[tuple[str, dict[str, Any], str]]:
        """Both arms at every grid value, as :func:`compare_arms` sets them up.

        Examples
        --------
        >>> o = CompareOptions(baseline="b:v", baseline_params={"T": 1}, vary="n",
        ...                    values=(10, 20))
        >>> [(t, p["n"], key) for t, p, key in CompareCheck().arms("s:v", {"d": 2}, o)]
        ... # doctest: +NORMALIZE_WHITESPACE
        [('s:v', 10, 'options.values'), ('b:v', 10, 'options.baseline_params'),
         ('s:v', 20, 'options.values'), ('b:v', 20, 'options.baseline_params')]
        """
        o = options
        # The check's own params alone were resolved: what else fails is the arm's.
        s_key = "options.subject_params" if o.subject_params else "options.values"
        b_key = "options.baseline_params" if o.baseline_params else "options.baseline"
        return [arm for _, (s_params, b_params) in _arm_params(params, o)
                for arm in ((target, s_params, s_key), (o.baseline, b_params, b_key))]

    def run(self, exp: Experiment, options: CompareOptions) -> Outcome:
        res = compare_arms(exp, options)
        verdict, confirmed, refuted = _judge(res, options)
        word = "below" if options.claim == "less" else "above"
        rows = []
        for p, c, r in zip(res["points"], confirmed, refuted, strict=True):
            rows.append({k: p[k] for k in ("value", "p_less", "p_greater", "ratio")}
                        | {"subject_mean": p["subject"]["mean"],
                           "baseline_mean": p["baseline"]["mean"],
                           "subject_epsilon": p["subject"].get("epsilon_accountant"),
                           "baseline_epsilon": p["baseline"].get("epsilon_accountant"),
                           "confirmed": c, "refuted": r})
        metrics = CompareMetrics(metric=res["metric"], claim=options.claim,
                                 seeds=options.seeds, confidence=options.confidence,
                                 baseline=options.baseline, vary=options.vary,
                                 points=jsonable(rows))
        where = ", ".join(f"{options.vary}={r['value']}" if options.vary else "the point"
                          for r, bad in zip(rows, refuted, strict=True) if bad)
        if verdict == Verdict.FAIL:
            msg = (f"the claim is refuted: {exp.name}'s mean {res['metric']} is not {word} "
                   f"{options.baseline}'s at {where}")
        elif verdict == Verdict.PASS:
            msg = (f"{exp.name}'s mean {res['metric']} is {word} {options.baseline}'s at "
                   f"every point")
        else:
            msg = (f"neither ordering is established at every point ({sum(confirmed)} of "
                   f"{len(rows)} confirm the claim)")
        msg += (f" (Welch t-tests, Holm-corrected, level {1 - options.confidence:g}, "
                f"{options.seeds} runs per arm and point). " + _table(rows, options))
        evidence = {"points": res["points"], "paper": dict(options.paper or {})}
        return Outcome(verdict, metrics, evidence, msg)

