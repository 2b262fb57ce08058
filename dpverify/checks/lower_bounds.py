"""Utility too good to be private: a run against a theorem's lower bound on private accuracy.

A minimax lower bound says that every algorithm with a given privacy guarantee has, on some
dataset of a hard pair, an expected error at least B. A target that claims the guarantee
and does better than B on average over the pair is not private as claimed, whatever its
ledger says; this is an audit through utility, independent of the privacy auditors (it
never looks at the distribution of the outputs, only at their error). It also checks the
harness: a metric or problem that lets a private algorithm beat a proven bound is broken.

The ``lower_bound`` check runs the target on each dataset of the pair (a parameter that
selects it, e.g. ``lb_side = [1, -1]`` for paper 004's Theorem 8 instance), averages the
metric over trials and over the pair, and compares a one-sided upper confidence bound of
that average with the bound, an expression of the parameters and of the claim (``rho``,
``epsilon``, ``delta`` are the claim's, which the options may override to test a stricter
one). The theorem's conditions, expressions too, must hold or the check refuses to run.

Verdicts: FAIL when the upper confidence bound of the pair-average error is below the
bound; PASS otherwise. The upper bound is a bootstrap-t one (each dataset's trials
resampled on their own, the pair average studentised; Efron and Tibshirani 1993, Ch. 12):
errors are nonnegative and right-skewed, where a plain Student t bound is too low when a
sample mean comes out low. Measured false-FAIL rates at nominal 1%, 200 trials a dataset
(``tests/test_lower_bounds.py``): about 1.5% for exponential errors; the suite's checks are
decided by orders of magnitude. A run whose outputs the metric cannot score (non-finite) is
counted as an infinite error: it cannot show the bound beaten.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dpverify.checks.base import CheckKind, Options, Outcome, Result, doc, register_kind
from dpverify.checks.rates.metrics import target_metric
from dpverify.checks.rates.theory import evaluate
from dpverify.core.claims import PrivacyClaim, Verdict
from dpverify.core.errors import InputError
from dpverify.execution.experiment import Experiment
from dpverify.execution.trials import seed_streams

__all__ = ["DEFAULT_TRIALS", "LowerBoundCheck", "LowerBoundOptions", "LowerBoundResult",
           "judge_lower_bound", "verify_lower_bound"]

#: Trials per dataset of the pair when neither the options nor the run give a number.
DEFAULT_TRIALS = {"quick": 200, "thorough": 1000}


@dataclass
class LowerBoundResult:
    """Per-dataset mean errors, their pair average and its upper bound, the verdict."""

    means: list[float]
    mean: float
    upper: float
    bound: float
    trials: int
    confidence: float
    metric: str
    claim: dict[str, Any]
    verdict: Verdict
    non_finite: int = 0  # errors the metric could not score, counted as infinite

    def metrics(self) -> dict[str, Any]:
        """The numbers behind the verdict, JSON-friendly (None for an infinite value)."""
        def finite(x: Any) -> Any:
            return None if isinstance(x, float) and not math.isfinite(x) else x

        d = asdict(self)
        d["verdict"] = self.verdict.value
        d["ratio"] = self.mean / self.bound if self.bound > 0 else math.inf
        d["means"] = [finite(x) for x in self.means]
        return {k: finite(v) for k, v in d.items()}


def judge_lower_bound(errors: Sequence[np.ndarray], bound: float, *,
                      confidence: float = 0.99, metric: str = "metric",
                      claim: Mapping[str, Any] | None = None, n_boot: int = 2000,
                      rng: int | np.random.Generator = 0) -> LowerBoundResult:
    """Verdict on the per-trial errors of each dataset of the pair against ``bound``.

    The pair average is the mean of the datasets' means, its standard error combines
    theirs, and its upper confidence bound is bootstrap-t: ``mean - q SE`` with ``q`` the
    ``1 - confidence`` quantile of the studentised resampled averages. FAIL when that bound
    is below ``bound``. Non-finite errors count as infinite (no FAIL).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> errs = [rng.exponential(1e-3, 500), rng.exponential(1e-3, 500)]
    >>> judge_lower_bound(errs, 1e-4).verdict.value
    'PASS'
    >>> judge_lower_bound(errs, 1e-2).verdict.value  # better than any private run can be
    'FAIL'
    """
    if not 0.5 < confidence < 1.0:
        raise InputError(f"confidence must be in (0.5, 1), got {confidence}")
    if not (math.isfinite(bound) and bound >= 0):
        raise InputError(f"the lower bound must be a finite number >= 0, got {bound}")
    errs = [np.asarray(e, dtype=float).reshape(-1) for e in errors]
    if len(errs) < 2 or min(e.size for e in errs) < 2:
        raise InputError("a lower-bound check needs at least two datasets and two trials each")
    claim = dict(claim or {})
    trials = int(min(e.size for e in errs))
    bad = int(sum(np.sum(~np.isfinite(e)) for e in errs))
    if bad:
        means = [float(e.mean()) if np.all(np.isfinite(e)) else math.inf for e in errs]
        return LowerBoundResult(means, math.inf, math.inf, float(bound), trials,
                                float(confidence), metric, claim, Verdict.PASS, bad)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)

    def stats(samples: list[np.ndarray]) -> tuple[Any, Any]:
        k = len(samples)
        mean = sum(x.mean(axis=-1) for x in samples) / k
        se = np.sqrt(sum(x.var(axis=-1, ddof=1) / x.shape[-1] for x in samples)) / k
        return mean, se

    mean, se = stats(errs)
    boot = [e[gen.integers(0, e.size, size=(int(n_boot), e.size))] for e in errs]
    bmean, bse = stats(boot)
    with np.errstate(divide="ignore", invalid="ignore"):
        tstar = np.where(bse > 0, (bmean - mean) / bse, 0.0)
    q = float(np.quantile(tstar, 1.0 - confidence))
    upper = float(mean - q * se)
    verdict = Verdict.FAIL if upper < bound else Verdict.PASS
    return LowerBoundResult([float(e.mean()) for e in errs], float(mean), upper, float(bound),
                            trials, float(confidence), metric, claim, verdict, 0)


def _claim_fields(claim: PrivacyClaim) -> dict[str, Any]:
    return {k: v for k, v in claim.to_dict().items() if v is not None}


@dataclass(frozen=True)
class LowerBoundOptions(Options):
    """``pair`` (one parameter and its values: the datasets of the hard pair), ``bound``
    (expression or number; required), ``conditions`` (expressions that must hold),
    ``claim`` (overrides of the claim judged), ``metric`` (default: the variant's utility
    quantity), ``trials`` per dataset (the run's ``--trials`` wins, else the option, else
    200, 1000 at the thorough scale), ``confidence`` and ``block_size``."""

    pair: dict[str, tuple[Any, ...]]
    bound: float | str
    conditions: str | tuple[str, ...] = ()
    claim: dict[str, Any] | None = None
    metric: str | None = None
    trials: int | None = None
    confidence: float = 0.99
    block_size: int | str = "auto"

    def validate(self) -> None:
        if len(self.pair) != 1:
            raise InputError(f"pair must name one parameter and its values, e.g. "
                             f"{{lb_side = [1, -1]}}, got {self.pair!r}")
        (key, values), = self.pair.items()
        if len(values) < 2:
            raise InputError(f"pair {key!r} needs at least two values, got {list(values)!r}")
        unknown = set(self.claim or {}) - {"epsilon", "delta", "rho", "relation"}
        if unknown:
            raise InputError(f"claim overrides are epsilon, delta, rho and relation; got "
                             f"{sorted(unknown)}")


def verify_lower_bound(exp: Experiment, o: LowerBoundOptions) -> LowerBoundResult:
    """Run the experiment on each dataset of the hard pair and judge its error.

    ``o.pair``, ``{parameter: [value_1, value_2, ...]}``: the parameter that selects the
    dataset of the hard pair, and its values. ``o.bound`` and ``o.conditions``: the lower
    bound on the pair-average error and the theorem's conditions, as expressions of the
    run's parameters with the claim's ``epsilon``, ``delta`` and ``rho`` in place of the
    run's (see :func:`dpverify.checks.rates.theory.evaluate`). ``o.claim``: overrides of the
    target's claim (e.g. ``{"rho": 0.02}``), to judge the run against a guarantee other
    than its own.

    Examples
    --------
    >>> exp = Experiment("noisy_gd_004:sound",
    ...                  {"problem": "theorem8", "kappa": 3.0, "d": 1, "n": 100, "rho": 1e4})
    >>> res = verify_lower_bound(exp, LowerBoundOptions(
    ...     pair={"lb_side": (1, -1)}, bound="0.25 * (1 / (n * lb_epsilon))**kappa",
    ...     claim={"rho": 0.02}, trials=50))
    >>> res.verdict.value  # rho = 1e4 of noise, judged as 0.02-zCDP: too accurate
    'FAIL'
    """
    if not exp.registered:
        raise InputError(f"the lower-bound check runs registered targets (name:variant), "
                         f"got {exp.spec!r}")
    (key, values), = o.pair.items()
    values = list(values)
    t, base = exp.target, exp.params
    if key not in base:
        raise InputError(f"{t.id} has no parameter {key!r} to select the dataset of the pair")
    own = _claim_fields(t.variant.claim(base))
    claim = dict(o.claim or {})
    if "rho" in claim:  # an override of one kind replaces the other
        own = {k: v for k, v in own.items() if k not in ("epsilon", "delta")}
    if "epsilon" in claim or "delta" in claim:
        own.pop("rho", None)
    judged = PrivacyClaim(**{**own, **claim})
    names = {**base, **_claim_fields(judged)}
    conditions = [o.conditions] if isinstance(o.conditions, str) else list(o.conditions)
    for cond in conditions:
        if not bool(evaluate(cond, names)):
            raise InputError(f"the lower bound does not apply: condition {cond!r} fails for "
                             f"the claim {_claim_fields(judged)}")
    bound = o.bound
    b = float(bound) if isinstance(bound, (int, float)) else float(evaluate(str(bound), names))
    metric, metric_fn = target_metric(t, o.metric)
    trials = exp.trial_count(o.trials, DEFAULT_TRIALS.get(exp.scale.value, 200))
    if trials < 2:
        raise InputError(f"trials must be an integer >= 2, got {trials}")
    streams = seed_streams(exp.seed, len(values) + 1)
    errors = []
    for i, v in enumerate(values):
        side = exp.with_params(**{key: v})
        out = side.sample(side.problem.data, trials, streams[i + 1], block_size=o.block_size)
        errors.append(np.asarray(metric_fn(side.problem, out, side.params),
                                 dtype=float).reshape(-1))
    return judge_lower_bound(errors, b, confidence=o.confidence, metric=metric,
                             rng=np.random.default_rng(streams[0]),
                             claim=_claim_fields(judged))


@dataclass(frozen=True)
class LowerBoundMetrics(Result):
    """The ``lower_bound`` check's numbers: the mean error against a proven lower bound."""

    means: list[Any] | None = doc("mean error per dataset of the pair (null: infinite)")
    mean: float | None = doc("their average")
    upper: float | None = doc("its upper confidence limit")
    bound: float | None = doc("the lower bound no private algorithm beats")
    trials: int | None = doc("runs per dataset")
    confidence: float | None = doc("confidence of `upper`")
    metric: str | None = doc("the utility metric")
    claim: dict[str, Any] | None = doc("the privacy level the bound is stated at")
    verdict: str | None = doc("the verdict, as the bound's test gave it")
    non_finite: int | None = doc("errors the metric could not score (counted infinite)")
    ratio: float | None = doc("mean / bound")


@register_kind
class LowerBoundCheck(CheckKind):
    """Does a target beat a theorem's lower bound on the error of any private algorithm?"""

    name = "lower_bound"
    Options = LowerBoundOptions
    Result = LowerBoundMetrics
    registered_only = True

    def run(self, exp: Experiment, options: LowerBoundOptions) -> Outcome:
        return lower_bound_outcome(verify_lower_bound(exp, options)).typed(LowerBoundMetrics)


def lower_bound_outcome(res: LowerBoundResult) -> Outcome:
    """The check's verdict, metrics and sentence from a lower-bound result."""
    word = ("below the bound: more accurate than any algorithm private as claimed"
            if res.verdict == Verdict.FAIL else "not below the bound")
    if res.non_finite:
        word += f" ({res.non_finite} runs the metric could not score count as infinite)"
    msg = (f"pair-average {res.metric} {res.mean:.3g} (upper {res.confidence:.0%} bound "
           f"{res.upper:.3g}; per dataset {', '.join(f'{m:.3g}' for m in res.means)}) vs "
           f"the lower bound {res.bound:.3g} for {res.claim}: {word}")
    return Outcome(res.verdict, res.metrics(), {}, msg)
