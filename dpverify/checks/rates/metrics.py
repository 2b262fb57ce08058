"""Utility metrics: what a rate check measures on each seed's output.

A metric is ``metric(problem, outputs, params) -> array (seeds,)``: the problem the
algorithm ran on (its non-private ``objective``, ``grad`` and high-precision ``optimum``),
the outputs with a leading seed axis, and the grid point's parameters. Papers register
their own (Goldstein stationarity, second-order stationarity) with
:func:`register_metric`; a variant's :class:`~dpverify.core.claims.UtilityClaim` names the one
its theorem bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dpverify.core.errors import InputError
from dpverify.core.registry import Problem, all_algorithms

MetricFn = Callable[[Problem, np.ndarray, Mapping[str, Any]], np.ndarray]
METRICS: dict[str, MetricFn] = {}
_ALIASES: dict[str, str] = {}


def register_metric(name: str, *aliases: str) -> Callable[[MetricFn], MetricFn]:
    """Register a utility metric under ``name`` (and optional aliases).

    Examples
    --------
    >>> @register_metric("first_coordinate")
    ... def first_coordinate(problem, outputs, params):
    ...     return np.abs(outputs[:, 0])
    >>> "first_coordinate" in available_metrics()
    True
    """

    def deco(fn: MetricFn) -> MetricFn:
        METRICS[name] = fn
        for a in aliases:
            _ALIASES[a] = name
        return fn

    return deco


def available_metrics() -> list[str]:
    """Names of the registered metrics."""
    return sorted(METRICS)


def get_metric(name: str) -> MetricFn:
    """The metric registered as ``name`` (or one of its aliases).

    Examples
    --------
    >>> get_metric("excess_empirical_risk") is get_metric("excess_risk")
    True
    """
    key = _ALIASES.get(name, name)
    if key not in METRICS:
        # Algorithm packages register their own metrics when they load: a fresh worker
        # process may meet a metric's name before anything asked for an algorithm.
        all_algorithms()
    if key not in METRICS:
        raise InputError(f"unknown utility metric {name!r}; registered: {available_metrics()} "
                         f"(register one with dpverify.checks.rates.register_metric)")
    return METRICS[key]


def target_metric(target: Any, metric: str | None = None) -> tuple[str, MetricFn]:
    """The metric a check of ``target`` reads: ``metric``, else its utility claim's quantity.

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> target_metric(resolve("noisy_gd:sound"))[0]
    'excess_risk'
    """
    if metric is None:
        if target.variant.utility is None:
            raise InputError(f"{target.id} declares no utility claim: name the metric")
        metric = target.variant.utility.quantity
    return metric, get_metric(metric)


def _need(problem: Problem, attr: str, metric: str) -> Any:
    value = getattr(problem, attr, None)
    if value is None:
        raise InputError(f"metric {metric!r} needs the problem's {attr!r}, which this "
                         f"problem does not provide")
    return value


def _as_outputs(outputs: Any) -> np.ndarray:
    out = np.asarray(outputs, dtype=float)
    return out.reshape(out.shape[0], -1)


@register_metric("excess_risk", "excess_empirical_risk")
def excess_risk(problem: Problem, outputs: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """F(theta) - F(theta*) against the problem's high-precision optimum.

    Examples
    --------
    >>> from algorithms.problems import make_glm_problem
    >>> prob = make_glm_problem({"n": 50, "d": 3, "lam": 0.1}, np.random.default_rng(0))
    >>> bool(abs(excess_risk(prob, prob.optimum[None], {})[0]) < 1e-12)
    True
    """
    objective = _need(problem, "objective", "excess_risk")
    optimum = _need(problem, "optimum", "excess_risk")
    theta = _as_outputs(outputs)
    f_star = float(np.asarray(objective(np.asarray(optimum, dtype=float)[None]))[0])
    # A non-finite output scores NaN: a loss's branches can map NaN to a finite value.
    ok = np.all(np.isfinite(theta), axis=1)
    value = np.asarray(objective(np.where(ok[:, None], theta, 0.0)), dtype=float) - f_star
    return np.where(ok, value, np.nan)


@register_metric("grad_norm", "gradient_norm")
def grad_norm(problem: Problem, outputs: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """Euclidean norm of the objective's gradient at each output.

    Examples
    --------
    >>> from algorithms.problems import make_glm_problem
    >>> prob = make_glm_problem({"n": 50, "d": 3, "lam": 0.1}, np.random.default_rng(0))
    >>> grad_norm(prob, np.zeros((2, 3)), {}).shape
    (2,)
    """
    grad = _need(problem, "grad", "grad_norm")
    return np.linalg.norm(np.asarray(grad(_as_outputs(outputs)), dtype=float), axis=1)


@register_metric("distance", "distance_to_optimum")
def distance(problem: Problem, outputs: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """||theta - theta*|| to the problem's optimum.

    Examples
    --------
    >>> from algorithms.problems import make_glm_problem
    >>> prob = make_glm_problem({"n": 50, "d": 3, "lam": 0.1}, np.random.default_rng(0))
    >>> float(distance(prob, prob.optimum[None], {})[0])
    0.0
    """
    optimum = np.asarray(_need(problem, "optimum", "distance"), dtype=float).reshape(1, -1)
    return np.linalg.norm(_as_outputs(outputs) - optimum, axis=1)


# Stationarity metrics of the nonsmooth and minimax theorems live beside their solvers;
# they are registered here, imported on first use, so every rate check can name them.
def _deferred(module: str, attr: str, name: str, *aliases: str) -> None:
    def metric(problem: Problem, outputs: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
        import importlib

        return getattr(importlib.import_module(module), attr)(problem, outputs, params)

    metric.__name__ = attr
    metric.__doc__ = f"``{module}.{attr}``, imported on first use."
    register_metric(name, *aliases)(metric)


_deferred("dpverify.checks.rates.goldstein", "goldstein", "goldstein", "goldstein_stationarity")
for _name in ("grad_norm_phi", "min_eig_phi", "sosp_alpha", "phi_value"):
    _deferred("dpverify.checks.rates.sosp", _name, _name)
