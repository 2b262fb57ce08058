"""Parameter sweeps: run a target over a grid of one parameter, seeds on the trial axis.

Each grid point builds the target's problem with the point's parameters and runs every
seed in one batched call (seeds are trials). Seeding follows
:func:`dpverify.execution.trials.map_blocks`: the seeds of a point are cut into fixed-size
blocks, each with its own child of the sweep's trial stream, so results depend only on
the root seed, never on chunking.

By default a sweep uses *common random numbers*: every point draws its data and its noise
from the same streams, so seed ``j`` sees the same randomness at every point (for an
``n`` sweep the datasets are nested and the noise draws identical). The point-to-point
differences are then mostly the parameter's effect, which narrows the slope's interval;
the bootstrap resamples seed ``j`` as one cluster across all points, which keeps that
correlation honest.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.checks.rates.metrics import target_metric
from dpverify.core.errors import InputError, check_positive
from dpverify.core.registry import Target
from dpverify.execution.trials import (
    DEFAULT_BLOCK,
    BlockPlan,
    build_problem,
    map_blocks,
    run_target,
)

# Privacy parameters whose exponent is better read off the noise actually added (see
# ``gdp_mu``): value -> the exponent that turns GDP mu into the parameter's scale.
PRIVACY_AXES = {"epsilon": 1.0, "rho": 2.0}


@dataclass
class Sweep:
    """Utilities of one target over a grid of one parameter.

    ``utilities[i, j]`` is the metric of seed ``j`` at grid value ``values[i]``;
    ``params[i]`` holds every parameter of that point; ``mu[i]`` the GDP mu of the
    Gaussian releases its ledger shows (NaN when not a registered target or not Gaussian);
    ``trivial[i]`` the metric at the point's start (:func:`trivial_output`; NaN when not
    asked for).
    """

    target: str
    parameter: str
    values: list[Any]
    utilities: np.ndarray
    params: list[dict[str, Any]]
    metric: str
    seed: int
    mu: np.ndarray = field(default_factory=lambda: np.zeros(0))
    seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    trivial: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def seeds(self) -> int:
        return int(self.utilities.shape[1])


def trivial_output(problem: Any, width: int) -> np.ndarray:
    """The output of a run that made no progress: the problem's start, one row.

    The start is ``problem.info["x0"]`` (or ``"w0"``) where the problem declares one, else
    the origin, where the harness's other algorithms start. The metric there is the
    *trivial value* a saturated run stays near (benchmarking anchors, Part A, pitfall 1).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> trivial_output(SimpleNamespace(info={}), 3).tolist()
    [[0.0, 0.0, 0.0]]
    """
    info = getattr(problem, "info", None) or {}
    start = info.get("x0", info.get("w0"))
    if start is None:
        return np.zeros((1, int(width)))
    start = np.asarray(start, dtype=float).reshape(1, -1)
    if start.shape[1] != int(width):
        raise InputError(f"the problem's start has {start.shape[1]} coordinates, the "
                         f"outputs {width}: the trivial value is undefined")
    return start


def sweep_stream(seed: int, parameter: str, *key: int) -> np.random.SeedSequence:
    """A stream of the root seed named by the swept parameter (and sub-keys).

    Named rather than numbered children keep a sweep's randomness unchanged when other
    sweeps are added or reordered.

    Examples
    --------
    >>> a = sweep_stream(0, "n", 1).generate_state(1)[0]
    >>> bool(a == sweep_stream(0, "n", 1).generate_state(1)[0])
    True
    >>> bool(a == sweep_stream(0, "d", 1).generate_state(1)[0])
    False
    """
    return np.random.SeedSequence(int(seed), spawn_key=(zlib.crc32(parameter.encode()), *key))


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limit BLAS to one thread: the small products of batched trials run far faster so.

    OpenBLAS threads the (seeds, d) x (d, n) products of a grid point; on two cores that was
    measured up to 300 times slower than one thread (0.13 ms vs 44 ms at n=8000, d=5).
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn/scipy
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def gdp_mu(ledger: Any) -> float:
    """GDP mu of a ledger's Gaussian releases: sqrt(sum (1 / noise multiplier)^2).

    Composition of Gaussian mechanisms with multipliers sigma_t is mu-GDP with that mu
    (Dong, Roth and Su 2022, Corollary 3.3); epsilon at fixed delta grows about linearly in
    mu, so a sweep over epsilon can regress on mu and see the noise actually added.
    Sampling amplification is ignored: it scales mu by a factor the sweep holds fixed.
    NaN when a release is not Gaussian.

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> from dpverify.execution.trials import build_problem, run_target
    >>> t = resolve("noisy_gd:sound"); p = t.algorithm.params("sound", {"T": 4})
    >>> _, cur = run_target(t, p, build_problem(t, p, 0), trials=1, rng=0)
    >>> round(gdp_mu(cur.ledger), 3) > 0
    True
    """
    inv = []
    for r in ledger:
        if r.mechanism == "exact":
            return math.inf
        if r.mechanism != "gaussian":
            return math.nan
        nm = r.noise_multiplier
        inv.append(0.0 if not nm else 1.0 / nm**2)
    return math.sqrt(sum(inv)) if inv else math.nan


def coerce_value(default: Any, value: Any, name: str) -> Any:
    """Cast a grid value to the type of the parameter's default (ints stay ints).

    Examples
    --------
    >>> coerce_value(500, 1000.0, "n")
    1000
    """
    if isinstance(default, bool) or not isinstance(default, (int, float)):
        return value
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"grid value {value!r} of {name!r} is not a number") from None
    if isinstance(default, int):
        if v != round(v):
            raise InputError(f"{name!r} takes integers; grid value {value!r} is not one")
        return int(round(v))
    return v


def check_grid(parameter: str, values: Sequence[Any]) -> list[Any]:
    """A grid needs at least three distinct positive values (a slope needs a residual)."""
    vals = list(values)
    try:
        nums = [float(v) for v in vals]
    except (TypeError, ValueError):
        raise InputError(f"grid of {parameter!r} must be numbers, got {vals!r}") from None
    if len(set(nums)) < 3:
        raise InputError(f"grid of {parameter!r} needs at least 3 distinct values, got {vals!r}")
    if any(not (v > 0 and math.isfinite(v)) for v in nums):
        raise InputError(f"grid of {parameter!r} must be finite and > 0 (a log-log fit), "
                         f"got {vals!r}")
    return vals


def default_grid(base: Any, parameter: str, scale: str = "quick") -> list[Any]:
    """Log2-spaced values around ``base``: 5 over 16x (quick) or 7 over 64x (thorough).

    Examples
    --------
    >>> default_grid(500, "n")
    [125, 250, 500, 1000, 2000]
    """
    half = 3 if scale == "thorough" else 2
    vals = [coerce_value(base, float(base) * 2.0**j, parameter) if isinstance(base, float)
            else max(1, int(round(float(base) * 2.0**j))) for j in range(-half, half + 1)]
    return sorted(set(vals), key=float)


@dataclass(frozen=True)
class SweepPlan:
    """How a sweep runs: seeds per point, their root seed and streams, and progress.

    Parameters
    ----------
    seeds
        Independent runs per grid point (for a registered target: batched on the trial
        axis, in blocks of ``block_size``).
    seed
        Root seed; the sweep's streams are named children of it.
    common_random_numbers
        Every point draws data and noise from the same streams (default), or each point
        from its own.
    progress
        A function ``progress(label, fraction)`` told after every point, or ``None``.
    metric, scale, backend, block_size
        For a registered target: the utility metric (default: the quantity of the
        variant's utility claim), the scale of its parameters, the backend it runs on and
        the trials per block. A function's sweep has no use for them.

    Examples
    --------
    >>> SweepPlan(seeds=4, seed=1).common_random_numbers
    True
    """

    seeds: int = 20
    seed: int = 0
    common_random_numbers: bool = True
    progress: Callable[[str, float], None] | None = None
    metric: str | None = None
    scale: str = "quick"
    backend: str = "numpy"
    block_size: int = DEFAULT_BLOCK

    def streams(self, parameter: str, i: int) -> tuple[int, np.random.SeedSequence]:
        """The data seed and the trial stream of grid point ``i``."""
        key = () if self.common_random_numbers else (i,)
        data_seed = int(sweep_stream(self.seed, parameter, 0, *key).generate_state(1)[0])
        return data_seed, sweep_stream(self.seed, parameter, 1, *key)


def sweep_points(target: Target, parameter: str, values: Sequence[Any],
                 params: Mapping[str, Any] | None = None,
                 pinned: Mapping[str, Any] | None = None,
                 scale: str = "quick") -> tuple[list[Any], list[dict[str, Any]]]:
    """The grid's values as the algorithm takes them, and each point's overrides: the
    other parameters, the point's value, then ``pinned`` over both (:func:`run_sweep`).

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> values, points = sweep_points(resolve("noisy_gd:sound"), "n", [100, 200, 400.0],
    ...                               {"T": 20}, {"epsilon": 9})
    >>> values, points[2]
    ([100, 200, 400], {'T': 20, 'n': 400, 'epsilon': 9})
    """
    base = target.algorithm.params(target.variant.name, params, scale)
    if parameter not in base:
        raise InputError(f"{target.id} has no parameter {parameter!r}; known: {sorted(base)}")
    values = [coerce_value(base[parameter], v, parameter) for v in check_grid(parameter, values)]
    return values, [{**(params or {}), parameter: v, **(pinned or {})} for v in values]


def run_sweep(
    target: Target,
    parameter: str,
    values: Sequence[Any],
    *,
    params: Mapping[str, Any] | None = None,
    plan: SweepPlan | None = None,
    trivial: bool = False,
    pinned: Mapping[str, Any] | None = None,
) -> Sweep:
    """Run a registered target at every grid value of ``parameter``; seeds are trials.

    Parameters
    ----------
    target
        A resolved ``name:variant``.
    parameter, values
        The swept algorithm parameter and its grid.
    params
        Overrides of the other parameters (held fixed over the sweep).
    plan
        Seeds, root seed, streams, metric, scale and backend (:class:`SweepPlan`).
    trivial
        Also evaluate the metric at each point's start (:func:`trivial_output`), the value
        a run that made no progress would score.
    pinned
        Parameters held at these values at every point, over the grid's own value too (a
        non-private control of an epsilon sweep pins epsilon).

    Examples
    --------
    >>> from dpverify.core.registry import resolve
    >>> sw = run_sweep(resolve("noisy_gd:sound"), "n", [100, 200, 400], params={"T": 20},
    ...                plan=SweepPlan(seeds=4))
    >>> sw.utilities.shape, sw.metric
    ((3, 4), 'excess_risk')
    """
    plan = plan or SweepPlan()
    seeds = int(check_positive(plan.seeds, "seeds", integer=True))
    algo, variant = target.algorithm, target.variant
    metric, metric_fn = target_metric(target, plan.metric)
    values, points = sweep_points(target, parameter, values, params, pinned, plan.scale)

    Y = np.empty((len(values), seeds))
    mu = np.full(len(values), np.nan)
    triv = np.full(len(values), np.nan)
    secs = np.zeros(len(values))
    point_params: list[dict[str, Any]] = []
    with single_threaded_blas():
        for i, v in enumerate(values):
            p = algo.params(variant.name, points[i], plan.scale)
            point_params.append(p)
            data_seed, trial_ss = plan.streams(parameter, i)
            t0 = time.perf_counter()
            problem = build_problem(target, p, data_seed)
            point = _PointBlock(target, p, problem, metric, metric_fn, plan.backend)
            Y[i] = np.concatenate(map_blocks(point, seeds, seed=trial_ss,
                                             plan=BlockPlan(plan.block_size)))
            mu[i] = point.mus[0]
            if trivial:
                start = trivial_output(problem, point.widths[0])
                triv[i] = float(np.asarray(metric_fn(problem, start, p), dtype=float)[0])
            secs[i] = time.perf_counter() - t0
            if plan.progress is not None:
                plan.progress(f"{target.id} {parameter}={v}", (i + 1) / len(values))
    return Sweep(target=target.id, parameter=parameter, values=values, utilities=Y,
                 params=point_params, metric=metric, seed=int(plan.seed), mu=mu, seconds=secs,
                 trivial=triv)


@dataclass
class _PointBlock:
    """The block function of one grid point: the metric of each trial's output.

    It records each block's GDP mu and output width (blocks run in this process).
    """

    target: Target
    params: dict[str, Any]
    problem: Any
    metric: str
    metric_fn: Callable[..., Any]
    backend: str
    mus: list[float] = field(default_factory=list)
    widths: list[int] = field(default_factory=list)

    def __call__(self, ss: np.random.SeedSequence, k: int, _: int) -> np.ndarray:
        out, cur = run_target(self.target, self.params, self.problem, trials=k, rng=ss,
                              backend=self.backend)
        self.mus.append(gdp_mu(cur.ledger))
        outputs = cur.backend.to_numpy(out).reshape(k, -1)
        self.widths.append(outputs.shape[1])
        vals = np.asarray(self.metric_fn(self.problem, outputs, self.params),
                          dtype=float).reshape(-1)
        if vals.shape != (k,):
            raise InputError(f"metric {self.metric!r} returned shape {vals.shape}, "
                             f"expected ({k},)")
        return vals


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return name in sig.parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


#: The grid's values of the usual parameters when a function target's sweep names none
#: (the sizes match the audit's defaults for a user's callable).
FUNCTION_DEFAULTS: dict[str, Any] = {"n": 100, "d": 2, "epsilon": 1.0, "delta": 1e-5}


def function_arguments(fn: Callable[..., Any], grid: Mapping[str, Any],
                       given: set[str], name: str = "") -> dict[str, Any]:
    """The grid parameters ``fn`` is called with: every one its signature takes, by name.

    ``grid`` holds the point's parameters (defaults, fixed and varied); ``given`` names
    those the user set (fixed or varied), which ``fn`` must accept. A parameter ``fn``
    needs that the grid does not know is an error naming it, found before any call.

    Examples
    --------
    >>> def f(n, d, epsilon, seed):
    ...     return d / (n * epsilon)
    >>> function_arguments(f, {**FUNCTION_DEFAULTS, "n": 50}, {"n"})
    {'n': 50, 'd': 2, 'epsilon': 1.0}
    """
    label = name or getattr(fn, "__name__", "function")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return dict(grid)
    params = sig.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(grid)
    unknown = sorted(k for k in given if k not in params)
    if unknown:
        raise InputError(f"{label}{sig} takes no parameter {', '.join(map(repr, unknown))} "
                         f"(set by --vary/--fixed)")
    missing = [k for k, p in params.items() if k not in grid and k not in ("seed", "seeds")
               and p.default is p.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if missing:
        raise InputError(f"{label}{sig} needs {', '.join(map(repr, missing))}, which the grid "
                         f"does not know: give --fixed {missing[0]}=VALUE")
    return {k: v for k, v in grid.items() if k in params}


def run_function_sweep(
    fn: Callable[..., Any],
    parameter: str,
    values: Sequence[Any],
    *,
    fixed: Mapping[str, Any] | None = None,
    plan: SweepPlan | None = None,
    name: str = "",
) -> Sweep:
    """Sweep a user's utility function ``f(n, d, epsilon, ..., seed) -> float``.

    The grid knows :data:`FUNCTION_DEFAULTS` (n, d, epsilon, delta), the ``fixed``
    parameters and the swept one; ``f`` is called with every one of them its signature
    takes, by name (all of them through ``**kwargs``), plus an integer ``seed`` (seed ``j``
    is the same integer at every point under common random numbers). A function with a
    ``seeds`` parameter is called once per point with an integer array and must return
    one utility per seed. The sweep's point parameters hold the whole grid, so a
    theorem's log factors and regime can name any of them. ``plan`` gives the seeds, the
    root seed, the streams and progress (:class:`SweepPlan`).

    Examples
    --------
    >>> def f(n, d, seed):
    ...     return float(d * np.random.default_rng(seed).exponential() / n)
    >>> sw = run_function_sweep(f, "n", [10, 20, 40], plan=SweepPlan(seeds=3))
    >>> sw.utilities.shape, sw.params[0]["epsilon"]
    ((3, 3), 1.0)
    """
    plan = plan or SweepPlan()
    seeds = int(check_positive(plan.seeds, "seeds", integer=True))
    values = check_grid(parameter, values)
    given = {*(fixed or {}), parameter}
    Y = np.empty((len(values), seeds))
    secs = np.zeros(len(values))
    point_params = []
    for i, v in enumerate(values):
        p = {**FUNCTION_DEFAULTS, **(fixed or {}), parameter: v}
        point_params.append(p)
        kw = function_arguments(fn, p, given, name)
        ints = plan.streams(parameter, i)[1].generate_state(seeds).astype(np.int64)
        t0 = time.perf_counter()
        Y[i] = _call_function(fn, kw, ints, name)
        secs[i] = time.perf_counter() - t0
        if plan.progress is not None:
            plan.progress(f"{name} {parameter}={v}", (i + 1) / len(values))
    return Sweep(target=name or getattr(fn, "__name__", "function"), parameter=parameter,
                 values=list(values), utilities=Y, params=point_params, metric="function",
                 seed=int(plan.seed), mu=np.full(len(values), np.nan), seconds=secs)


def _call_function(fn: Callable[..., Any], kw: dict[str, Any], ints: np.ndarray,
                   name: str) -> np.ndarray:
    """A user's function at one grid point: one utility per seed in ``ints``."""
    vectorized = _accepts(fn, "seeds") and not _accepts(fn, "seed")
    try:
        if vectorized:
            vals = np.asarray(fn(**kw, seeds=ints), dtype=float).reshape(-1)
        else:
            vals = np.array([float(fn(**kw, seed=int(s))) for s in ints])
    except Exception as e:  # noqa: BLE001 - the user's code: its error, named, is bad input
        raise InputError(f"calling {name or fn!r} with {kw} and a seed failed: "
                         f"{type(e).__name__}: {e}") from None
    if vals.shape != (ints.size,):
        raise InputError(f"{name or fn!r} returned {vals.shape[0]} utilities for "
                         f"{ints.size} seeds")
    bad = np.flatnonzero(~np.isfinite(vals))
    if bad.size:
        raise InputError(f"{name or fn!r} returned {vals[bad[0]]} at {kw}, seed "
                         f"{int(ints[bad[0]])}: utilities must be finite numbers")
    return vals
