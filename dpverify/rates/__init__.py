"""Convergence-rate verification: does measured utility scale as the theorem says?

A rate check sweeps one parameter (n, d, epsilon, ...) of a target over a grid, runs the
seeds of each point as one batched run (seeds are trials), measures the utility the
variant's :class:`~dpverify.claims.UtilityClaim` bounds (excess risk, gradient norm, or a
metric a paper registers), divides out the theorem's log factors, keeps the points inside
its regime, and fits the exponent with a seed-clustered bootstrap interval, cross-checked
by a model with a floor. An upper-bound theorem fails only when the measured rate is
provably worse.

Importing this package registers the ``rate`` check kind and the ``dpverify rates``
subcommand (:func:`configure_parser`, :func:`run_command`).

Examples
--------
>>> from dpverify.rates import verify_rates
>>> res = verify_rates("noisy_gd:sound", {"n": [250, 500, 1000, 2000]},
...                    params={"T": 60}, seeds=10)
>>> res.fits[0].verdict.value
'PASS'
"""

from dpverify.rates.baseline import compare, load_baseline
from dpverify.rates.cli import configure_parser, run_command
from dpverify.rates.fit import FitSettings, RateFit, fit_rate, offset_fits, power_slopes
from dpverify.rates.grids import (
    Sweep,
    default_grid,
    gdp_mu,
    run_function_sweep,
    run_sweep,
)
from dpverify.rates.metrics import (
    METRICS,
    available_metrics,
    excess_risk,
    get_metric,
    grad_norm,
    register_metric,
)
from dpverify.rates.plots import plot_fits
from dpverify.rates.theory import Theory, evaluate
from dpverify.rates.verify import (
    RateCheck,
    RateOptions,
    RatesResult,
    fit_sweep,
    outcome_of,
    rates_of,
    resolve_theory,
    verify_rates,
)

__all__ = [
    "METRICS",
    "FitSettings",
    "RateFit",
    "RatesResult",
    "Sweep",
    "Theory",
    "available_metrics",
    "compare",
    "configure_parser",
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
    "run_command",
    "run_function_sweep",
    "run_sweep",
    "verify_rates",
]
