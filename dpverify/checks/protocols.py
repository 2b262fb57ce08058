"""Experiment protocols: a paper's table rerun as a check, the paper's numbers beside ours.

A ``protocol`` check runs the target and the other methods a table compares (each a
registered ``name:variant`` with its own parameters) on the same records, over seeded
trials, evaluates registered metrics at every output (computed without privacy, like the
papers' diagnostics), and reports for every method and metric the median and the 10% and
90% quantiles beside the number the paper prints (declared data, ``paper``), with what
differs from the paper's setting and why (``differences``).

Its verdict decides the table's comparative claims (``claims``: method A is better than
method B on a metric, lower by default, higher with ``higher = true``). Each claim is a
pair of one-sided Mann-Whitney tests on the two methods' trials (independent runs) at
level (1 - ``confidence``) / m, Bonferroni over the m claims: FAIL when some claim is
contradicted (B better than A, significantly), PASS when every claim is confirmed,
INCONCLUSIVE otherwise. The chance of a false FAIL is at most 1 - confidence. A protocol
without claims reproduces the table only: PASS when every metric is finite somewhere,
INCONCLUSIVE otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.stats

from dpverify.checks.base import CheckKind, Options, Outcome, Result, doc, register_kind
from dpverify.checks.rates.metrics import get_metric
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError, check_probability
from dpverify.execution.experiment import Experiment
from dpverify.execution.trials import seed_streams

__all__ = ["ProtocolCheck", "ProtocolOptions", "compare", "run_protocol"]

#: Trials per method when neither the options nor the run give a number.
DEFAULT_TRIALS = {"quick": 20, "thorough": 100}
_CLAIM_KEYS = {"better", "worse", "metric", "higher"}


@dataclass(frozen=True)
class ProtocolOptions(Options):
    """``label`` (the target's name in the table), ``methods`` (``{label: {target, params}}``:
    the other methods), ``metrics``, ``paper`` (``{label: {metric: value}}``, the paper's
    numbers), ``claims`` (``[{better, worse, metric, higher}]``), ``trials`` per method,
    ``confidence``, ``differences`` (what differs from the paper's setting, and why) and
    ``block_size``."""

    label: str
    metrics: tuple[str, ...]
    methods: dict[str, dict[str, Any]] | None = None
    paper: dict[str, dict[str, float]] | None = None
    claims: tuple[dict[str, Any], ...] = ()
    trials: int | None = None
    confidence: float = 0.95
    differences: str = ""
    block_size: int | str = "auto"

    def validate(self) -> None:
        check_probability(self.confidence, "confidence")
        for m in self.metrics:
            get_metric(m)
        labels = {self.label, *(self.methods or {})}
        for label, spec in (self.methods or {}).items():
            if set(spec) - {"target", "params"} or "target" not in spec:
                raise InputError(f"method {label!r} must be a table with 'target' and "
                                 f"optionally 'params', got keys {sorted(spec)}")
        for label in self.paper or {}:
            if label not in labels:
                raise InputError(f"paper numbers for {label!r}, which is no method: {labels}")
        for c in self.claims:
            if set(c) - _CLAIM_KEYS or not {"better", "worse", "metric"} <= set(c):
                raise InputError(f"a claim is a table with better, worse, metric and "
                                 f"optionally higher; got {dict(c)!r}")
            if {c["better"], c["worse"]} - labels or c["metric"] not in self.metrics:
                raise InputError(f"claim {dict(c)!r} names a method or metric the protocol "
                                 f"does not run: methods {sorted(labels)}, metrics "
                                 f"{list(self.metrics)}")


def compare(a: np.ndarray, b: np.ndarray, *, higher: bool, level: float) -> dict[str, Any]:
    """Is ``a`` better than ``b`` (lower, or higher with ``higher``)? One-sided tests.

    Returns the verdict (PASS: a better at ``level``; FAIL: b better at ``level``;
    INCONCLUSIVE) and both p-values of the Mann-Whitney U test. NaN values (an output a
    metric cannot score) count as the worst possible.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> compare(rng.normal(0, 1, 30), rng.normal(2, 1, 30), higher=False, level=0.01)["verdict"]
    'PASS'
    >>> compare(rng.normal(2, 1, 30), rng.normal(0, 1, 30), higher=False, level=0.01)["verdict"]
    'FAIL'
    """
    worst = -np.inf if higher else np.inf
    a = np.where(np.isnan(a), worst, a)
    b = np.where(np.isnan(b), worst, b)
    side = "greater" if higher else "less"
    other = "less" if higher else "greater"
    p_better = float(scipy.stats.mannwhitneyu(a, b, alternative=side).pvalue)
    p_worse = float(scipy.stats.mannwhitneyu(a, b, alternative=other).pvalue)
    verdict = "PASS" if p_better < level else "FAIL" if p_worse < level else "INCONCLUSIVE"
    return {"verdict": verdict, "p_better": p_better, "p_worse": p_worse}


def _summary(v: np.ndarray) -> dict[str, float]:
    ok = v[np.isfinite(v)]
    if ok.size == 0:
        return {"median": float("nan"), "q10": float("nan"), "q90": float("nan"),
                "finite": 0}
    q10, med, q90 = np.quantile(ok, [0.1, 0.5, 0.9])
    return {"median": float(med), "q10": float(q10), "q90": float(q90),
            "finite": int(ok.size)}


def _method_values(exp: Experiment, o: ProtocolOptions, trials: int, index: int
                   ) -> tuple[Any, dict[str, np.ndarray]]:
    stream = seed_streams(exp.seed, index + 2)[index + 1]
    problem = exp.problem
    out = exp.sample(problem.data, trials, stream, block_size=o.block_size)
    p = exp.params
    return problem, {m: np.asarray(get_metric(m)(problem, out, p), dtype=float).reshape(-1)
                     for m in o.metrics}


def _methods(o: ProtocolOptions) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each other method's target and parameters, by label (its own parameters only)."""
    return {label: (str(spec["target"]), dict(spec.get("params") or {}))
            for label, spec in (o.methods or {}).items()}


def run_protocol(exp: Experiment, o: ProtocolOptions) -> dict[str, Any]:
    """Run every method of the protocol and judge its claims (see the module docstring).

    Every method runs on the records of the target's problem (the same problem parameters
    and root seed: an error otherwise), each on its own seeded trial streams.

    Examples
    --------
    >>> exp = Experiment("noisy_gd:sound", {"T": 10, "n": 40, "epsilon": 0.05})
    >>> res = run_protocol(exp, ProtocolOptions(
    ...     label="eps 0.05", metrics=("excess_risk",), trials=8,
    ...     methods={"eps 50": {"target": "noisy_gd:sound",
    ...                         "params": {"T": 10, "n": 40, "epsilon": 50.0}}},
    ...     claims=({"better": "eps 50", "worse": "eps 0.05", "metric": "excess_risk"},)))
    >>> res["verdict"], sorted(res["results"])
    ('PASS', ['eps 0.05', 'eps 50'])
    """
    if not exp.registered:
        raise InputError(f"the protocol check runs registered targets, got {exp.spec!r}")
    trials = exp.trial_count(o.trials, DEFAULT_TRIALS.get(exp.scale.value, 20))
    if trials < 3:
        raise InputError(f"a protocol needs at least 3 trials a method, got {trials}")
    refused = ProtocolCheck().refused_arm(exp.name, exp.overrides, o, exp.scale.value)
    if refused is not None:  # before the first method runs
        label = next(k for k, m in _methods(o).items() if m == refused[:2])
        raise InputError(f"method {label!r} ({refused[0]}): {refused[3]}")
    runs = {o.label: exp}
    for label, (target, params) in _methods(o).items():
        runs[label] = exp.replace(target=target, params=params)
    base = exp.problem.data
    values: dict[str, dict[str, np.ndarray]] = {}
    for i, (label, e) in enumerate(runs.items()):
        data = e.problem.data
        if data.X.shape != base.X.shape or not np.array_equal(data.X, base.X):
            raise InputError(f"method {label!r} ({e.name}) runs on other records than "
                             f"{o.label!r}: give it the same problem parameters")
        values[label] = _method_values(e, o, trials, i)[1]
    level = (1.0 - o.confidence) / max(1, len(o.claims))
    judged = []
    for c in o.claims:
        higher = bool(c.get("higher", False))
        r = compare(values[c["better"]][c["metric"]], values[c["worse"]][c["metric"]],
                    higher=higher, level=level)
        judged.append({**dict(c), "higher": higher, **r})
    verdicts = {j["verdict"] for j in judged}
    if judged:
        verdict = ("FAIL" if "FAIL" in verdicts else
                   "PASS" if verdicts == {"PASS"} else "INCONCLUSIVE")
    else:
        finite = all(np.isfinite(v).any() for vs in values.values() for v in vs.values())
        verdict = "PASS" if finite else "INCONCLUSIVE"
    results = {label: {m: {**_summary(v), "paper": (o.paper or {}).get(label, {}).get(m)}
                       for m, v in vs.items()} for label, vs in values.items()}
    return {"verdict": verdict, "trials": trials, "level": level, "claims": judged,
            "results": results, "targets": {k: e.name for k, e in runs.items()},
            "differences": o.differences}


def protocol_outcome(res: dict[str, Any]) -> Outcome:
    """Verdict, metrics (per method and metric: ours and the paper's) and the sentence."""
    claims = res["claims"]
    if claims:
        parts = [f"{c['better']} {'>' if c['higher'] else '<'} {c['worse']} on {c['metric']}: "
                 f"{c['verdict']}" for c in claims]
        msg = (f"{len(claims)} claim(s) at level {res['level']:.3g} each, {res['trials']} "
               f"trials a method: " + "; ".join(parts))
    else:
        msg = f"the table reproduced over {res['trials']} trials a method (no claims judged)"
    metrics = {"trials": res["trials"], "results": res["results"],
               "claims": [{k: c[k] for k in ("better", "worse", "metric", "verdict",
                                             "p_better", "p_worse")} for c in claims]}
    evidence = {"targets": res["targets"], "differences": res["differences"]}
    return Outcome(Verdict.parse(res["verdict"]), metrics, evidence, msg)


@dataclass(frozen=True)
class ProtocolMetrics(Result):
    """The ``protocol`` check's numbers: a paper's table reproduced, and its claims."""

    trials: int | None = doc("runs per method")
    results: dict[str, Any] | None = doc("per method and metric: our summary and the paper's")
    claims: list[Any] | None = doc("per claimed ordering: better, worse, metric, verdict, "
                                   "p-values")


@register_kind
class ProtocolCheck(CheckKind):
    """A paper's experiment table rerun: its methods, metrics and comparative claims."""

    name = "protocol"
    Options = ProtocolOptions
    Result = ProtocolMetrics
    registered_only = True

    def arms(self, target: str, params: Mapping[str, Any], options: ProtocolOptions,
             scale: str = "quick") -> list[tuple[str, dict[str, Any], str]]:
        """The target and every other method, as :func:`run_protocol` sets them up.

        Examples
        --------
        >>> o = ProtocolOptions(label="a", metrics=("test_loss",),
        ...                     methods={"b": {"target": "noisy_gd:sound", "params": {"T": 3}}})
        >>> ProtocolCheck().arms("dp_sgd_dro:sound", {"n": 40}, o)[1]
        ('noisy_gd:sound', {'T': 3}, 'options.methods')
        """
        return [(target, dict(params), "params")] + [
            (t, p, "options.methods") for t, p in _methods(options).values()]

    def run(self, exp: Experiment, options: ProtocolOptions) -> Outcome:
        return protocol_outcome(run_protocol(exp, options)).typed(ProtocolMetrics)

