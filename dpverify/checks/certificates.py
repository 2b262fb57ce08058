"""Certificate soundness: when an algorithm declares its output good, is it?

Some algorithms certify their own output. DP RGDA (paper 003, Algorithm 2, line 19)
returns its anchor as an alpha-SOSP when t_thres perturbed steps did not move it; Lemmas
6/9 promise that such a certificate is wrong with probability at most delta1 + delta2
(more precisely 4 delta1 + delta2 for the population Lemma 9). The ``certificate`` check
measures that promise: it runs the target over seeded trials, reads each trial's
certificate flag, evaluates the property the certificate asserts with a registered metric
computed without privacy (e.g. :func:`dpverify.checks.rates.sosp.sosp_alpha` with the exact
grad Phi and lambda_min of the Schur-complement Hessian), and bounds the rate of
"certified and false" with Clopper-Pearson.

Contract of a certifying target: run with ``params[flag] = True`` (``flag`` defaults to
``"certificate"``), it returns an array (trials, m + 1) whose last column is 1 where the
output was certified and 0 where not; the first m columns are its usual output, which the
metric reads. The property holds where ``metric(output) <= threshold``.

Verdicts: FAIL when the one-sided lower confidence bound of P(certified and false) exceeds
the claimed rate ``max_false_rate``; INCONCLUSIVE when no trial certified; PASS otherwise
("no evidence that certificates are false more often than claimed").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.checks.base import CheckKind, Options, Outcome, Result, doc, register_kind
from dpverify.checks.rates.metrics import get_metric, target_metric
from dpverify.checks.rates.theory import evaluate
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError
from dpverify.execution.experiment import Experiment
from dpverify.execution.trials import seed_streams
from dpverify.stats.audit_bounds import clopper_pearson

__all__ = ["CertificateCheck", "CertificateOptions", "CertificateResult", "DEFAULT_TRIALS",
           "judge_certificates", "verify_certificates"]

#: Trials when neither the options nor the run give a number.
DEFAULT_TRIALS = {"quick": 200, "thorough": 1000}
#: Where the trial streams come from: root-seed child 0 is the problem's data.
SEED_TRIALS = 1


@dataclass
class CertificateResult:
    """Counts, bounds and verdict of a certificate-soundness test."""

    trials: int
    certified: int
    false: int  # certified and the property does not hold (or cannot be evaluated)
    undefined: int  # certified outputs where the metric is NaN (counted as false)
    max_false_rate: float
    confidence: float
    threshold: float
    metric: str
    verdict: Verdict
    summaries: dict[str, Any] = field(default_factory=dict)

    @property
    def false_rate(self) -> float:
        """P(certified and false), estimated."""
        return self.false / self.trials

    def bounds(self) -> tuple[float, float]:
        """One-sided Clopper-Pearson bounds on P(certified and false), each at ``confidence``."""
        a = 1.0 - self.confidence
        return (float(clopper_pearson(self.false, self.trials, a, "lower")),
                float(clopper_pearson(self.false, self.trials, a, "upper")))

    def metrics(self) -> dict[str, Any]:
        """The numbers behind the verdict, JSON-friendly."""
        lo, hi = self.bounds()
        a = 1.0 - self.confidence
        out: dict[str, Any] = {
            "trials": self.trials, "certified": self.certified, "false_certificates": self.false,
            "undefined": self.undefined,
            "certified_fraction": self.certified / self.trials,
            "true_among_certified": (1.0 - self.false / self.certified) if self.certified
            else float("nan"),
            "false_rate": self.false_rate, "false_rate_lower": lo, "false_rate_upper": hi,
            "max_false_rate": self.max_false_rate, "confidence": self.confidence,
            "metric": self.metric, "threshold": self.threshold,
        }
        if self.certified:  # the conditional rate the notes' C-U5 phrases, for reference
            out["false_given_certified_upper"] = float(
                clopper_pearson(self.false, self.certified, a, "upper"))
        return out


def judge_certificates(certified: np.ndarray, values: np.ndarray, *, threshold: float,
                       max_false_rate: float, confidence: float = 0.95,
                       metric: str = "metric") -> CertificateResult:
    """Verdict on per-trial certificate flags and the metric of each output.

    A certified trial is false when ``values > threshold`` or the value is NaN (the
    property could not be established). FAIL when the one-sided Clopper-Pearson lower
    bound (Clopper and Pearson 1934) of P(certified and false) at ``confidence`` exceeds
    ``max_false_rate``: when the true rate is at most the claim, this happens with
    probability at most ``1 - confidence``.

    Examples
    --------
    >>> cert = np.array([1, 1, 1, 0] * 25, bool)
    >>> vals = np.array([0.1, 0.9, 0.9, 0.9] * 25)  # half of the certified are false
    >>> judge_certificates(cert, vals, threshold=0.5, max_false_rate=0.2).verdict.value
    'FAIL'
    >>> judge_certificates(cert, vals * 0, threshold=0.5, max_false_rate=0.2).verdict.value
    'PASS'
    >>> judge_certificates(cert * False, vals, threshold=0.5, max_false_rate=0.2).verdict.value
    'INCONCLUSIVE'
    """
    certified = np.asarray(certified, bool).reshape(-1)
    values = np.asarray(values, float).reshape(-1)
    if certified.shape != values.shape or certified.size == 0:
        raise InputError(f"need one flag and one value per trial, got {certified.shape} and "
                         f"{values.shape}")
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be in (0, 1), got {confidence}")
    if not 0.0 <= max_false_rate <= 1.0:
        raise InputError(f"max_false_rate must be in [0, 1], got {max_false_rate}")
    undefined = certified & ~np.isfinite(values)
    false = certified & ~(values <= threshold)  # NaN compares False: counted as false
    res = CertificateResult(int(values.size), int(certified.sum()), int(false.sum()),
                            int(undefined.sum()), float(max_false_rate), float(confidence),
                            float(threshold), metric, Verdict.PASS)
    lo, _ = res.bounds()
    if lo > max_false_rate:
        res.verdict = Verdict.FAIL
    elif res.certified == 0:
        res.verdict = Verdict.INCONCLUSIVE
    return res


def _number(value: Any, params: Mapping[str, Any], name: str) -> float:
    """A number, or an expression in the run's parameters (``"delta1 + delta2"``)."""
    if value is None:
        raise InputError(f"the certificate check needs the option {name!r} (a number or an "
                         f"expression in the parameters, e.g. 'alpha')")
    if isinstance(value, bool):
        raise InputError(f"option {name!r} must be a number or an expression, got {value!r}")
    out = value if isinstance(value, (int, float)) else evaluate(str(value), params)
    try:
        return float(out)
    except (TypeError, ValueError):
        raise InputError(f"option {name!r} = {value!r} is not a number ({out!r})") from None


def _summary(v: np.ndarray) -> dict[str, Any]:
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"count": 0}
    q = np.quantile(v, [0.0, 0.1, 0.5, 0.9, 1.0])
    return {"count": int(v.size), "min": q[0], "q10": q[1], "median": q[2], "q90": q[3],
            "max": q[4]}


@dataclass(frozen=True)
class CertificateOptions(Options):
    """``threshold`` and ``max_false_rate`` (numbers or expressions in the parameters;
    required), ``metric`` (default: the variant's utility quantity), ``trials`` (else the
    run's ``--trials``, else 200, 1000 at the thorough scale), ``flag``, ``confidence``,
    ``report`` (more metrics to summarise) and ``block_size``."""

    threshold: float | str
    max_false_rate: float | str
    metric: str | None = None
    trials: int | None = None
    flag: str = "certificate"
    confidence: float = 0.95
    report: str | tuple[str, ...] = ()
    block_size: int | str = "auto"


def verify_certificates(exp: Experiment, o: CertificateOptions) -> CertificateResult:
    """Run a certifying target and test how often its certificates are false.

    ``o.threshold``: the property holds where ``metric(output) <= threshold`` (a number or
    an expression in the run's parameters, e.g. ``"alpha"`` for an alpha-SOSP with
    ``sosp_alpha``); ``o.max_false_rate``: the claimed bound on P(certified and false), e.g.
    ``"delta1 + delta2"`` (paper 003, Lemma 6); ``o.metric``: a registered utility metric.
    Trials run in seeded blocks (:meth:`Experiment.sample`, child 1 of the seed; the
    problem's data come from child 0), each block at once on the trial axis; the bounds
    hold at ``o.confidence`` each. ``o.report``: further metrics to summarise (quantiles
    over all and over certified outputs), e.g. ``["min_eig_phi"]``.

    Examples
    --------
    >>> exp = Experiment("dp_rgda:sound", {"s_A": 0.0, "s_b": 0.0, "S1": None, "S2": None,
    ...                  "exact_gradients": True, "n": 20, "T": 40, "r": 0.0})
    >>> res = verify_certificates(exp, CertificateOptions(
    ...     threshold="alpha", max_false_rate="delta1 + delta2", metric="sosp_alpha", trials=4))
    >>> res.verdict.value, res.certified, res.false  # r = 0 at the saddle: all false
    ('FAIL', 4, 4)
    """
    if not exp.registered:
        raise InputError(f"the certificate check runs registered targets (name:variant), "
                         f"got {exp.spec!r}")
    t, flag = exp.target, o.flag
    if flag not in exp.params:
        raise InputError(f"{t.id} has no parameter {flag!r}: it does not certify its outputs "
                         f"(a certifying target returns its flag when run with {flag} = true)")
    exp = exp.with_params(**{flag: True})
    p = exp.params
    metric, metric_fn = target_metric(t, o.metric)
    thr = _number(o.threshold, p, "threshold")
    claimed = _number(o.max_false_rate, p, "max_false_rate")
    trials = exp.trial_count(o.trials, DEFAULT_TRIALS.get(exp.scale.value, 200))
    problem = exp.problem
    out = exp.sample(problem.data, trials, seed_streams(exp.seed, SEED_TRIALS + 1)[SEED_TRIALS],
                     block_size=o.block_size)
    if out.ndim != 2 or out.shape[1] < 2:
        raise InputError(f"{t.id} returned outputs of shape {out.shape}: a certifying target "
                         f"returns (trials, m + 1), its certificate flag last")
    x, flags = out[:, :-1], out[:, -1]
    if not np.all(np.isin(flags, (0.0, 1.0))):
        raise InputError(f"{t.id}: the last output column must be a 0/1 certificate flag")
    values = np.asarray(metric_fn(problem, x, p), dtype=float).reshape(-1)
    res = judge_certificates(flags > 0.5, values, threshold=thr, max_false_rate=claimed,
                             confidence=o.confidence, metric=metric)
    cert = flags > 0.5
    report = [o.report] if isinstance(o.report, str) else list(o.report)
    for name in dict.fromkeys([metric, *report]):
        v = values if name == metric else np.asarray(
            get_metric(name)(problem, x, p), dtype=float).reshape(-1)
        res.summaries[name] = {"all": _summary(v), "certified": _summary(v[cert])}
    return res


@dataclass(frozen=True)
class CertificateMetrics(Result):
    """The ``certificate`` check's numbers: how often the algorithm's own stationarity
    certificate is false."""

    trials: int | None = doc("runs")
    certified: int | None = doc("runs whose certificate claims stationarity")
    false_certificates: int | None = doc("certified runs whose output is not stationary")
    undefined: int | None = doc("runs the metric could not score")
    certified_fraction: float | None = doc("certified / trials")
    true_among_certified: float | None = doc("the share of certificates that hold")
    false_rate: float | None = doc("false certificates / trials")
    false_rate_lower: float | None = doc("Clopper-Pearson lower end of the false rate")
    false_rate_upper: float | None = doc("Clopper-Pearson upper end of the false rate")
    false_given_certified_upper: float | None = doc(
        "upper end of the false rate among certified runs")
    max_false_rate: float | None = doc("the largest false rate the check allows")
    confidence: float | None = doc("confidence of the intervals")
    metric: str | None = doc("the stationarity metric")
    threshold: float | None = doc("the metric's stationarity threshold")


@register_kind
class CertificateCheck(CheckKind):
    """Is an algorithm's self-certificate false more often than its theorem allows?"""

    name = "certificate"
    Options = CertificateOptions
    Result = CertificateMetrics
    registered_only = True

    def run(self, exp: Experiment, options: CertificateOptions) -> Outcome:
        return certificate_outcome(verify_certificates(exp, options)).typed(CertificateMetrics)


def certificate_outcome(res: CertificateResult) -> Outcome:
    """The check's verdict, metrics and sentence from a certificate result."""
    m = res.metrics()
    lo, hi = m["false_rate_lower"], m["false_rate_upper"]
    if res.verdict == Verdict.INCONCLUSIVE:
        msg = f"no trial certified its output in {res.trials}: nothing to judge"
    else:
        msg = (f"{res.certified}/{res.trials} certified, {res.false} of them false "
               f"({res.metric} > {res.threshold:.4g}); P(certified and false) in "
               f"[{lo:.3g}, {hi:.3g}] at {res.confidence:.0%} each side, claimed <= "
               f"{res.max_false_rate:.3g}")
    return Outcome(res.verdict, m, {"summaries": res.summaries}, msg)
