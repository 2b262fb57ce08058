"""Convergence-rate verification: does measured utility scale as the theorem says?

A rate check sweeps one parameter (n, d, epsilon, ...) of a target over a grid, runs the
seeds of each point as one batched run (seeds are trials), measures the utility the
variant's :class:`~dpverify.core.claims.UtilityClaim` bounds (excess risk, gradient norm, or a
metric a paper registers), divides out the theorem's log factors, keeps the points inside
its regime, and fits the exponent with a seed-clustered bootstrap interval, cross-checked
by a model with a floor. An upper-bound theorem fails only when the measured rate is
provably worse.

Importing this package registers the ``rate`` check kind; the ``dpverify rates``
subcommand is :mod:`dpverify.cli.rates`.

Examples
--------
>>> from dpverify.checks.rates import RateOptions, verify_rates
>>> from dpverify.execution.experiment import Experiment
>>> res = verify_rates(Experiment("noisy_gd:sound", {"T": 60}),
...                    RateOptions(vary={"n": [250, 500, 1000, 2000]}, seeds=10))
>>> res.fits[0].verdict.value
'PASS'
"""

from dpverify.checks.rates.baseline import compare, load_baseline
from dpverify.checks.rates.grids import (
    Sweep,
    SweepPlan,
    default_grid,
    gdp_mu,
    run_function_sweep,
    run_sweep,
)
from dpverify.checks.rates.metrics import (
    METRICS,
    available_metrics,
    excess_risk,
    get_metric,
    grad_norm,
    register_metric,
)
from dpverify.checks.rates.plots import plot_fits
from dpverify.checks.rates.theory import Theory, evaluate
from dpverify.checks.rates.verify import (
    RateCheck,
    RateOptions,
    RatesResult,
    fit_sweep,
    outcome_of,
    rates_of,
    resolve_theory,
    verify_rates,
)
from dpverify.stats.rate_fit import (
    FitSettings,
    GridPoints,
    RateFit,
    fit_rate,
    offset_fits,
    power_slopes,
)

__all__ = [
    "METRICS",
    "FitSettings",
    "GridPoints",
    "RateFit",
    "RatesResult",
    "Sweep",
    "SweepPlan",
    "Theory",
    "available_metrics",
    "compare",
    "default_grid",
    "evaluate",
    "excess_risk",
    "fit_rate",
    "fit_sweep",
    "gdp_mu",
    "get_metric",
    "grad_norm",
    "load_baseline",
    "offset_fits",
    "outcome_of",
    "plot_fits",
    "power_slopes",
    "RateCheck",
    "RateOptions",
    "rates_of",
    "register_metric",
    "resolve_theory",
    "run_function_sweep",
    "run_sweep",
    "verify_rates",
]
