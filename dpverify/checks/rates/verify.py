"""Rate verification end to end: sweeps, fits against the theorem, verdicts, the check kind."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.checks.base import CheckKind, Options, Outcome, Result, doc, register_kind
from dpverify.checks.rates.grids import (
    PRIVACY_AXES,
    Sweep,
    SweepPlan,
    default_grid,
    run_function_sweep,
    run_sweep,
    sweep_points,
    sweep_stream,
)
from dpverify.checks.rates.metrics import get_metric
from dpverify.checks.rates.theory import Theory, evaluate
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError
from dpverify.core.prose import (
    Statement,
    fmt,
    inconclusive_reason,
    metrics_of,
    num,
    power_text,
    utility_text,
)
from dpverify.core.registry import is_registered_target, load_callable, resolve
from dpverify.execution.experiment import Experiment
from dpverify.stats.rate_fit import (
    FitSettings,
    GridPoints,
    RateFit,
    _small_sample_factor,
    fit_rate,
)

SCHEMA = "dpverify-rates/1"
AXES = ("auto", "param", "gdp")
DEFAULT_SEEDS = {"quick": 20, "thorough": 40}


def window_reasons(sweep: Sweep, settings: FitSettings, control: Sweep | None = None,
                   bound: np.ndarray | None = None) -> list[str]:
    """Why each grid point falls outside the fitting window (``""``: inside).

    Window validation (benchmarking anchors, Part A pitfall 1, design step 3): a point
    whose mean is above ``settings.saturation`` times its trivial value (the metric at the
    start, ``sweep.trivial``) has not left the pre-asymptotic plateau, *and* the theorem's
    ``bound`` there (its full rate, constants 1) is no lower, so the theorem promises no
    progress from the start; a point whose mean is below ``settings.control_ratio`` times a
    non-private ``control`` sweep's mean at the same point is not dominated by the private
    term. Neither says anything about the rate, so such points are left out and the reasons
    reported, instead of flattening the fit. A run stuck at its start where the bound does
    promise progress stays in the fit, where it can fail. Saturation needs the bound.

    Examples
    --------
    >>> import numpy as np
    >>> sw = Sweep("t", "n", [1, 2, 3], np.array([[0.9], [0.3], [0.1]]), [{}] * 3, "m", 0,
    ...            trivial=np.ones(3))
    >>> window_reasons(sw, FitSettings(saturation=0.5), bound=np.array([2.0, 1.0, 0.2]))
    ['saturated: mean 0.9 > 0.5 x the trivial value 1, the bound 2 no lower', '', '']
    >>> window_reasons(sw, FitSettings(saturation=0.5), bound=np.array([0.2, 0.2, 0.2]))
    ['', '', '']
    """
    m = sweep.utilities.mean(axis=1)
    why = [""] * len(sweep.values)
    if settings.saturation is not None:
        triv = sweep.trivial
        if triv.size != m.size or not np.all(np.isfinite(triv)):
            raise InputError("saturation needs the metric at the start of every grid point "
                             "(a sweep run with trivial=True)")
        if bound is None:
            raise InputError("saturation needs the theorem's full bound (option rate): a "
                             "point is left out only where the bound promises no progress")
        s = float(settings.saturation)
        for i in np.flatnonzero((m > s * triv) & (bound >= s * triv)):
            why[i] = (f"saturated: mean {m[i]:.3g} > {s:g} x the trivial value {triv[i]:.3g}, "
                      f"the bound {bound[i]:.3g} no lower")
    if control is not None:
        c = control.utilities.mean(axis=1)
        r = float(settings.control_ratio)
        for i in np.flatnonzero(~(m >= r * c)):
            why[i] = why[i] or (f"not private-dominated: mean {m[i]:.3g} < {r:g} x the "
                                f"control's {c[i]:.3g}")
    return why


def fit_sweep(sweep: Sweep, theory: Theory, settings: FitSettings | None = None, *,
              axis: str = "auto", control: Sweep | None = None,
              rate: str | None = None) -> RateFit:
    """Fit a sweep's exponent against ``theory`` (log factors divided, regime applied).

    ``axis``: ``param`` regresses on the swept values; ``gdp`` (for ``epsilon``/``rho``)
    on the ledger's GDP mu (epsilon ~ mu, rho = mu^2 / 2), i.e. on the noise actually
    added, since an exact accountant's sigma(epsilon) is not a power law (its local slope
    is -0.80 to -0.91 at delta = 1e-5; benchmarking anchors, Part A pitfall 6); ``auto``
    uses ``gdp`` for those parameters when every point's ledger is Gaussian. The fit on the
    raw values is kept as ``exponent_raw``. Points outside the window
    (:func:`window_reasons`; ``control`` is the non-private control sweep, if any) are not
    fitted.

    ``rate``: the theorem's full bound as an expression of the parameters (every term, e.g.
    ``"(sqrt(d)/n)**(1/3) + (d/(n*epsilon))**(1/2)"``). The utility is then regressed on
    ``1 / rate`` with theory exponent -1 where the bound falls along the grid (``rate``
    with exponent +1 where it rises): the multi-term model, each term with its own
    exponent and the theorem's relative weights, where a one-term fit would read a blend of
    the terms' slopes. An exponent above the theory's + tolerance means the utility
    improves slower (or worsens faster) than the bound. The bound must be monotone. The
    tolerance and interval width then apply to the exponent in the bound, a relative scale:
    0.1 is a tenth of the theorem's rate, whatever its exponent in the parameter.

    Examples
    --------
    >>> from dpverify.checks.rates.grids import run_function_sweep
    >>> sw = run_function_sweep(lambda n, seed: (1 + 0.1 * (seed % 7)) / n, "n",
    ...                         [100, 200, 400, 800], plan=SweepPlan(seeds=8))
    >>> fit_sweep(sw, Theory("function", {"n": -1.0})).verdict.value
    'PASS'
    """
    if axis not in AXES:
        raise InputError(f"axis must be one of {AXES}, got {axis!r}")
    settings = settings or FitSettings()
    values = np.array([float(v) for v in sweep.values])
    L = np.array([theory.log_factor(p) for p in sweep.params])
    regime = np.array([theory.in_regime(p) for p in sweep.params])
    use_gdp = _on_gdp(sweep, axis, rate, values.size)
    x = sweep.mu ** PRIVACY_AXES[sweep.parameter] if use_gdp else None
    th_exp = theory.exponent(sweep.parameter)
    bound = None
    if rate is not None:
        bound, sign = _rate_bound(rate, sweep, values)
        x, th_exp = bound**sign, sign
    points = GridPoints(x=x, log_factor=L, in_regime=regime,
                        excluded=window_reasons(sweep, settings, control, bound))
    kw = dict(theory=th_exp, parameter=sweep.parameter, sided=theory.sided, settings=settings)
    fit = fit_rate(values, sweep.utilities, points=points,
                   rng=sweep_stream(sweep.seed, sweep.parameter, 2), **kw)
    if use_gdp:
        fit.axis = "gdp"
    if use_gdp and np.isfinite(fit.exponent):  # (no exponent: too few points to fit)
        raw = fit_rate(values, sweep.utilities, points=dataclasses.replace(points, x=None),
                       rng=sweep_stream(sweep.seed, sweep.parameter, 2), **kw)
        fit.exponent_raw = raw.exponent
        fit.message += (f" [regressed on the ledger's GDP mu; on {sweep.parameter} itself the "
                        f"exponent is {raw.exponent:.3f}]")
    if rate is not None:
        fit.axis = "rate"
        on = "1/rate" if th_exp < 0 else "rate"
        fit.message += (f" [regressed on {on}, rate = {rate}: exponent {th_exp:g} is a "
                        f"utility proportional to the theorem's full bound]")
    elif sweep.parameter not in theory.exponents:
        fit.flags.append(f"the theorem does not depend on {sweep.parameter!r} (exponent 0)")
    if sweep.seeds < 10:
        fit.flags.append(f"{sweep.seeds} seeds: bootstrap intervals undercover below ~10 seeds")
    return fit


def _on_gdp(sweep: Sweep, axis: str, rate: str | None, points: int) -> bool:
    """Whether the fit regresses on the ledger's GDP mu (see :func:`fit_sweep`)."""
    use_gdp = sweep.parameter in PRIVACY_AXES and sweep.mu.size == points and bool(
        np.all(np.isfinite(sweep.mu) & (sweep.mu > 0)))
    if axis == "gdp" and not use_gdp:
        raise InputError(f"axis 'gdp' needs an epsilon or rho sweep of a target whose "
                         f"releases are all Gaussian (parameter {sweep.parameter!r})")
    if axis == "gdp" and rate is not None:
        raise InputError("a fit against the full bound (rate) has its own axis; axis 'gdp' "
                         "cannot be combined with it")
    return use_gdp and axis != "param" and rate is None


def _rate_bound(rate: str, sweep: Sweep, values: np.ndarray) -> tuple[np.ndarray, float]:
    """The theorem's full bound at each grid point, and the sign that makes it rise."""
    bound = np.array([float(evaluate(rate, p)) for p in sweep.params])
    if not np.all(np.isfinite(bound) & (bound > 0)):
        raise InputError(f"rate {rate!r} must be finite and > 0 at every grid point, got "
                         f"{bound.tolist()}")
    # The abscissa rises along the grid, so "a larger exponent is worse" holds as for
    # a plain sweep: 1/bound where the bound falls (n), the bound where it rises (d).
    step = np.diff(np.log(bound)) * np.sign(np.diff(values))
    if not (np.all(step < 0) or np.all(step > 0)):
        raise InputError(f"rate {rate!r} must change monotonically along the grid of "
                         f"{sweep.parameter!r}, got {bound.tolist()}")
    return bound, 1.0 if step[0] > 0 else -1.0


@dataclass
class RatesResult:
    """Every sweep and fit of one target, with the theory they were judged against."""

    target: str
    theory: Theory
    sweeps: list[Sweep]
    fits: list[RateFit]
    seed: int
    drift: list[dict[str, Any]] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        """FAIL if any fit fails, else INCONCLUSIVE if any is, else PASS."""
        return worst([f.verdict for f in self.fits])

    def to_dict(self) -> dict[str, Any]:
        """The JSON record ``dpverify rates --json`` writes (and ``--baseline`` reads)."""
        fits = []
        for f, sw in zip(self.fits, self.sweeps, strict=True):
            d = f.to_dict()
            d["metric"] = sw.metric
            d["seconds"] = float(np.sum(sw.seconds))
            fits.append(d)
        return {"schema": SCHEMA, "target": self.target, "seed": self.seed,
                "verdict": self.verdict.value, "theory": self.theory.to_dict(), "fits": fits,
                "drift": self.drift}


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    """The verdict that dominates: FAIL, then INCONCLUSIVE, then PASS.

    Examples
    --------
    >>> worst([Verdict.PASS, Verdict.INCONCLUSIVE]).value
    'INCONCLUSIVE'
    """
    for v in (Verdict.FAIL, Verdict.INCONCLUSIVE):
        if v in verdicts:
            return v
    return Verdict.PASS


def resolve_theory(target: str, *, metric: str | None = None,
                   theory: Mapping[str, float] | None = None,
                   log_factors: Sequence[str] | None = None,
                   regime: Sequence[str] | None = None,
                   sided: str | None = None) -> Theory:
    """The theorem to test: the variant's declared utility claim, with user overrides.

    A ``module:function`` target has no claim: ``theory`` (exponents) is then required.

    Examples
    --------
    >>> resolve_theory("noisy_gd:sound").exponents["d"]
    1.0
    >>> resolve_theory("noisy_gd:sound", theory={"n": -1}).exponents
    {'n': -1.0}
    """
    base: Theory | None = None
    if is_registered_target(target):
        claim = resolve(target).variant.utility
        if claim is not None:
            base = Theory.from_claim(claim)
    if base is not None and metric is not None and metric != base.quantity and not theory:
        if get_metric(metric) is not get_metric(base.quantity):
            raise InputError(f"{target}'s theorem bounds {base.quantity!r}, not {metric!r}: "
                             f"give the exponents of {metric!r} (--theory k=v)")
    if base is None and not theory:
        raise InputError(f"{target} declares no utility theorem: give its exponents "
                         f"(--theory n=-1 or the check option theory = {{n = -1}})")
    exps = ({str(k): float(v) for k, v in theory.items()} if theory
            else dict(base.exponents))  # type: ignore[union-attr]
    return Theory(
        quantity=metric or (base.quantity if base else "function"),
        exponents=exps,
        log_factors=tuple(log_factors) if log_factors is not None else (
            base.log_factors if base else ()),
        sided=sided or (base.sided if base else "upper"),
        regime=tuple(regime) if regime is not None else (base.regime if base else ()),
        source=base.source if base and not theory else "user",
    )


def verify_rates(exp: Experiment, options: RateOptions | None = None) -> RatesResult:
    """Sweep each varied parameter of a target and judge its exponent against the theorem.

    Parameters
    ----------
    exp
        The target, its fixed parameters (the experiment's overrides, held fixed over the
        sweeps), root seed, scale, backend and progress. The target is ``name:variant`` of
        a registered algorithm, ``module:function`` or a Python function
        ``f(**params, seed) -> utility`` (a user's own experiment, no curator).
    options
        What to sweep and how to judge it (:class:`RateOptions`): ``vary`` (``{parameter:
        grid values}``, or parameter names for log2 grids around their current values;
        default: every parameter the theorem has an exponent for, registered targets
        only; each parameter is swept one at a time, the others held fixed), ``seeds``
        (runs per grid point; default the experiment's ``trials``, else 20, 40 at the
        thorough scale), ``theory``, ``log_factors``, ``regime`` and ``sided`` (override
        or, for functions, supply the theorem), ``axis`` (see :func:`fit_sweep`),
        ``control`` (parameter overrides of a non-private control, run at every grid
        point with the same streams, the overrides winning over the grid's own value;
        points where the target is not ``control_ratio`` times worse than the control are
        left out, :func:`window_reasons`; registered targets only, as is
        ``saturation``), ``rate`` (the theorem's full bound, every term, see
        :func:`fit_sweep`) and the :class:`~dpverify.stats.rate_fit.FitSettings` fields.

    Examples
    --------
    >>> res = verify_rates(Experiment("noisy_gd:planted_noise_grows_sqrt_n", {"T": 30}),
    ...                    RateOptions(vary={"n": [200, 400, 800]}, seeds=10))
    >>> res.fits[0].verdict.value, round(res.fits[0].exponent, 1)
    ('FAIL', -1.0)
    """
    o = options or RateOptions()
    o.validate()
    scale = exp.scale.value
    plan = SweepPlan(seeds=int(o.seeds or exp.trials or DEFAULT_SEEDS.get(scale, 20)),
                     seed=int(exp.seed), common_random_numbers=o.common_random_numbers,
                     progress=exp.progress, scale=scale, backend=exp.backend)
    fn, name = _rate_target(exp.spec)
    params = dict(exp.overrides) or None
    th, grids = _theory_and_grids(fn, name, o, params, scale)
    check_theory_varied(o.theory, list(grids))
    if o.saturation is not None and o.rate is None:
        raise InputError("saturation needs the theorem's full bound (option rate, --rate): a "
                         "point is left out only where the bound promises no progress")
    if fn is not None and (o.control or o.saturation is not None):
        raise InputError("window validation (saturation, control) needs a registered target: "
                         "a function has no start or privacy parameters to read")
    if fn is None:  # every point resolved before the first runs
        resolve_points(name, params or {}, o, scale)
    settings = o.fit_settings()
    sweeps, fits = [], []
    for k, values in grids.items():
        ctl = None
        if fn is None:
            t, plan = resolve(name), dataclasses.replace(plan, metric=o.metric or th.quantity)
            sw = run_sweep(t, k, values, params=params, plan=plan,
                           trivial=settings.saturation is not None)
            if o.control:
                ctl = run_sweep(t, k, values, params=params, plan=plan, pinned=dict(o.control))
        else:
            sw = run_function_sweep(fn, k, values, fixed=params, plan=plan, name=name)
        sweeps.append(sw)
        fits.append(fit_sweep(sw, th, settings, axis=o.axis, control=ctl, rate=o.rate))
    return RatesResult(target=name, theory=th, sweeps=sweeps, fits=fits, seed=int(exp.seed))


# What sets each kind of point of a rate check, in words (keys of :meth:`RateCheck.arms`).
_POINT_SOURCE = {"options.values": "a grid point", "options.vary": "a grid point",
                 "options.control": "a point of the control's sweep"}


def resolve_points(target: str, params: Mapping[str, Any], o: RateOptions,
                   scale: str) -> None:
    """Resolve every point the sweeps of a registered ``target`` will run (its grids and
    its control's) against the algorithm's ranges and rules; an
    :class:`~dpverify.core.errors.InputError` names the first refused point.

    Examples
    --------
    >>> try:
    ...     resolve_points("o2nc_zo:paper", {"T": 150}, RateOptions(vary="n",
    ...                    values=(100, 400, 800)), "quick")
    ... except InputError as e:
    ...     print(str(e)[:71])
    a grid point of o2nc_zo:paper, n = 100: parameters of o2nc_zo: a single
    """
    refused = RateCheck().refused_arm(target, params, o, scale)
    if refused is not None:
        t, point, key, e = refused
        varied = ", ".join(f"{k} = {v!r}" for k, v in point.items()
                           if k not in params or params[k] != v)
        raise InputError(f"{_POINT_SOURCE.get(key, key)} of {t}, {varied}: {e}")


def _opt(value: Any, kind: Callable[[Any], Any]) -> Any:
    """``kind(value)``, or ``None`` when ``value`` is (for dict options, also when empty)."""
    if value is None or (kind is dict and not value):
        return None
    return kind(value)


def _rate_target(spec: Any) -> tuple[Callable[..., Any] | None, str]:
    """A user's function and its name, or ``None`` and a registered target's id."""
    if callable(spec):
        return spec, getattr(spec, "__name__", "function")
    if is_registered_target(spec):
        return None, resolve(spec).id
    return load_callable(spec), str(spec)


def _theory_and_grids(fn: Callable[..., Any] | None, name: str, o: RateOptions,
                      params: Mapping[str, Any] | None,
                      scale: str) -> tuple[Theory, dict[str, list[Any]]]:
    """The theorem the sweeps are fitted against, and every swept parameter's grid."""
    th = (resolve_theory(name, metric=o.metric, theory=_opt(o.theory, dict),
                         log_factors=_opt(o.log_factors, list), regime=_opt(o.regime, list),
                         sided=o.sided)
          if fn is None else _function_theory(name, o))
    return th, _sweep_grids(fn, name, _check_vary(o), params, th, scale)


def _sweep_grids(fn: Callable[..., Any] | None, name: str, vary: Any,
                 params: Mapping[str, Any] | None, th: Theory,
                 scale: str) -> dict[str, list[Any]]:
    """The grid of every swept parameter (default grids around the current values)."""
    if fn is not None:
        if not vary or not isinstance(vary, Mapping):
            raise InputError("a function target needs grid values: --vary n=100,200,400")
        return {k: list(v) for k, v in vary.items()}
    t = resolve(name)
    base = t.algorithm.params(t.variant.name, params, scale)
    if vary is None:
        vary = [k for k in th.exponents if k in base]
        if not vary:
            raise InputError(f"the theorem of {name} has no exponent for any of its "
                             f"parameters; name one with --vary")
    return _grids(vary, lambda k: base.get(k), scale)


def _function_theory(name: str, o: RateOptions) -> Theory:
    if not o.theory:
        raise InputError(f"{name} declares no utility theorem: give its exponents "
                         f"(--theory n=-1 or the check option theory = {{n = -1}})")
    return Theory(quantity=o.metric or "function",
                  exponents={str(k): float(v) for k, v in o.theory.items()},
                  log_factors=tuple(o.log_factors or ()), regime=tuple(o.regime or ()),
                  sided=o.sided or "upper", source="user")


def _grids(vary: Mapping[str, Sequence[Any]] | Sequence[str], base: Callable[[str], Any],
           scale: str) -> dict[str, list[Any]]:
    if isinstance(vary, str):
        vary = [vary]
    if isinstance(vary, Mapping):
        return {str(k): list(v) for k, v in vary.items()}
    out = {}
    for k in vary:
        b = base(k)
        if b is None:
            raise InputError(f"no current value of {k!r} to build a default grid around; "
                             f"give values")
        out[str(k)] = default_grid(b, k, scale)
    return out


# The check kind ---------------------------------------------------------------------------

@dataclass(frozen=True)
class RateOptions(Options, FitSettings):
    """The options of a ``rate`` check.

    ``vary`` (a parameter name, a list of names or a table of grids), ``values`` (the grid
    of ``vary``), ``seeds``, ``metric``, ``theory`` (exponents, to override or to supply for
    ``module:function`` targets), ``log_factors``, ``regime``, ``sided``, ``axis``,
    ``common_random_numbers``, ``control`` (parameter overrides for a non-private control
    sweep), ``rate`` (the theorem's full multi-term bound), ``claimed_by`` (whose rate
    ``theory`` is, e.g. another paper's bound, so that a FAIL says whose claim the
    measurements refute) and, inherited, the :class:`FitSettings` fields (``saturation``
    and ``control_ratio`` validate the window). Seeds come from the options, else the
    run's ``--trials``, else 20 (40 at the thorough scale).

    Examples
    --------
    >>> o = RateOptions.parse({"vary": "n", "values": [100, 200, 400], "confidence": 0.9})
    >>> o.fit_settings().confidence, o.tolerance
    (0.9, 0.1)
    """

    vary: str | tuple[str, ...] | dict[str, Any] | None = None
    values: tuple[Any, ...] | dict[str, Any] | None = None
    seeds: int | None = None
    metric: str | None = None
    theory: dict[str, float] | None = None
    log_factors: tuple[str, ...] | None = None
    regime: tuple[str, ...] | None = None
    sided: str | None = None
    axis: str = "auto"
    common_random_numbers: bool = True
    control: dict[str, Any] | None = None
    rate: str | None = None
    claimed_by: str | None = None

    def __post_init__(self) -> None:
        """Nothing here: :meth:`validate` checks the fit settings with the other options."""

    def validate(self) -> None:
        self.fit_settings()
        vary = _check_vary(self)
        if vary is not None:  # (default grids: checked once the theorem names them)
            check_theory_varied(self.theory, [vary] if isinstance(vary, str) else list(vary))
        if self.claimed_by is not None and not self.claimed_by.strip():
            raise InputError("claimed_by must name whose rate the theory is, got an empty "
                             "string")

    def fit_settings(self) -> FitSettings:
        """The :class:`FitSettings` part of the options (checked)."""
        return FitSettings(**{f.name: getattr(self, f.name)
                              for f in dataclasses.fields(FitSettings)})


def check_theory_varied(theory: Mapping[str, Any] | None, varied: Sequence[str]) -> None:
    """Refuse exponents of parameters the grid holds fixed: they would never be tested.

    A fit judges only the exponent of the parameter it sweeps, so ``theory`` naming
    another would pass silently, whatever its value.

    Examples
    --------
    >>> check_theory_varied({"n": -1}, ["n"])
    >>> check_theory_varied({"T": -1}, ["n"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: theory (--theory, ...) gives an exponent of 'T', ...
    """
    fixed = [str(k) for k in (theory or {}) if str(k) not in varied]
    if fixed:
        names = ", ".join(repr(k) for k in fixed)
        raise InputError(f"theory (--theory, or the check option theory) gives an exponent "
                         f"of {names}, which the grid does not vary (it varies "
                         f"{', '.join(repr(str(v)) for v in varied) or 'nothing'}): an "
                         f"exponent of a parameter held fixed is never tested; vary it "
                         f"(--vary {fixed[0]}=...) or leave it out")


def _check_vary(options: RateOptions) -> Any:
    vary, values = options.vary, options.values
    if isinstance(vary, Mapping):
        if values is not None:
            raise InputError("give vary as a table of grids, or vary (a name) with values")
        return {str(k): list(v) for k, v in vary.items()}
    if values is not None:
        if isinstance(values, Mapping):
            return {str(k): list(v) for k, v in values.items()}
        if not isinstance(vary, str):
            raise InputError("values needs vary to name the one parameter they belong to")
        return {vary: list(values)}
    return list(vary) if isinstance(vary, tuple) else vary  # a name, names, or None


@dataclass(frozen=True)
class RateMetrics(Result):
    """The ``rate`` check's numbers: the deciding fit of a measured rate against the
    theorem's exponent."""

    parameter: str | None = doc("the swept parameter of the deciding fit")
    exponent: float | None = doc("the fitted exponent")
    ci_low: float | None = doc("lower end of its bootstrap interval")
    ci_high: float | None = doc("upper end of its bootstrap interval")
    theory: float | None = doc("the theorem's exponent")
    rule: str | None = doc("the decision rule applied")
    confidence: float | None = doc("confidence of the interval")
    tolerance: float | None = doc("slack on the exponent")
    sided: str | None = doc("`upper` (a bound) or `tight` (a rate)")
    model: str | None = doc("the fitted model (`power` or `offset`)")
    exponent_power: float | None = doc("the exponent of the pure power fit")
    exponent_offset: float | None = doc("the exponent of the fit with a floor")
    floor_share: float | None = doc("the floor's share of the smallest mean")
    lack_of_fit_p: float | None = doc("p-value of the fitted model's lack-of-fit test "
                                      "against the seeds' noise; below 1 - confidence the "
                                      "model is rejected, and the verdict is INCONCLUSIVE "
                                      "unless every segment's slope decides alike")
    axis: str | None = doc("the sweep's axis")
    exponent_raw: float | None = doc("the exponent before the log factors are divided out")
    seeds: int | None = doc("runs per grid point")
    values: list[Any] | None = doc("the grid")
    medians: list[Any] | None = doc("median metric per grid point")
    means: list[Any] | None = doc("mean metric per grid point")
    quantity: str | None = doc("the utility quantity measured")
    fits: list[Any] | None = doc("per swept parameter: parameter, exponent, ci_low, "
                                 "ci_high, theory, lack_of_fit_p, verdict")


@register_kind
class RateCheck(CheckKind):
    """Sweep a parameter and test its fitted exponent against the declared utility theorem."""

    name = "rate"
    Options = RateOptions
    Result = RateMetrics
    column = "rate"
    figures = ("rate",)

    def arms(self, target: str, params: Mapping[str, Any], options: RateOptions,
             scale: str = "quick") -> list[tuple[str, dict[str, Any], str]]:
        """Every point of every grid, and of the control's sweep, as :func:`verify_rates`
        sets them up (a user's function: its own parameters alone).

        Examples
        --------
        >>> o = RateOptions(vary="n", values=(100, 200, 400), control={"epsilon": 100.0})
        >>> [(p["n"], key) for _, p, key in RateCheck().arms("noisy_gd:sound", {"T": 5}, o)]
        ... # doctest: +NORMALIZE_WHITESPACE
        [(100, 'options.values'), (200, 'options.values'), (400, 'options.values'),
         (100, 'options.control'), (200, 'options.control'), (400, 'options.control')]
        """
        if not is_registered_target(target):
            return super().arms(target, params, options, scale)
        t, given = resolve(target), dict(params) or None
        _, grids = _theory_and_grids(None, t.id, options, given, scale)
        key = "options.values" if options.values is not None else "options.vary"
        sweeps = [(None, key)] + ([(dict(options.control), "options.control")]
                                  if options.control else [])
        return [(target, point, at) for k, values in grids.items() for pinned, at in sweeps
                for point in sweep_points(t, k, values, given, pinned, scale)[1]]

    def run(self, exp: Experiment, options: RateOptions) -> Outcome:
        res = rates_of(exp, options)
        if options.claimed_by:
            res.theory = dataclasses.replace(res.theory, source=options.claimed_by.strip())
        return outcome_of(res).typed(RateMetrics)

    def statement(self, check: Mapping[str, Any], claim: str,
                  info: Mapping[str, Any] | None) -> Statement:
        r, ev = self.Result.of(check), check.get("evidence") or {}
        th = ev.get("theory") or (info or {}).get("utility") or {}
        src = th.get("source") or "the declared theorem"
        fits = r.fits or [r.to_metrics()]
        parts = []
        for f in fits:
            if not math.isfinite(num(f.get("exponent")) or math.nan):
                parts.append(f"in {f.get('parameter')}: no exponent, too few grid points in the "
                             f"window" + (f" ({f['verdict']})" if f.get("verdict") else ""))
                continue
            parts.append(f"in {f.get('parameter')}: exponent {fmt(f.get('exponent'), 3)}, "
                         f"interval [{fmt(f.get('ci_low'), 3)}, {fmt(f.get('ci_high'), 3)}] "
                         f"against the theorem's {fmt(f.get('theory'), 3)}"
                         + (f" ({f['verdict']})" if f.get("verdict") else ""))
        values = r.values or []
        grid = (f"{len(values)} values of {r.parameter} from {fmt(min(values))} to "
                f"{fmt(max(values))}" if values else "the grid")
        axis = {"gdp": "the ledger GDP mu",
                "rate": "the theorem's full bound, so an exponent of -1 (or +1 for a bound "
                        "that grows) is a utility proportional to it"}.get(r.axis,
                                                                          "the parameter")
        measured = (f"Measured {r.quantity or th.get('quantity', 'utility')} over {grid}, "
                    f"{fmt(r.seeds)} seeds each ({r.model or '?'} model, regressed on "
                    f"{axis}): " + "; ".join(parts) + "." + left_out(ev))
        conf = (f"{fmt(r.confidence)} seed-clustered bootstrap interval. Rule: "
                f"{r.rule or 'n/a'}.")
        claimed = (f"{src} bounds {th.get('quantity', 'the utility')} by "
                   f"{utility_text(th) if th else 'a rate'}.")
        short = ("; ".join(parts) + f" ({fmt(r.confidence)} bootstrap intervals, "
                 f"{fmt(r.seeds)} seeds)")
        if check.get("verdict") == "FAIL":
            refutes = (f" The measurement refutes {rate_claim(check)} (a finding about the "
                       f"theorem as stated, not about the variant's privacy).")
            measured += refutes
            short += f"; it refutes {rate_claim(check)}"
        elif check.get("verdict") == "INCONCLUSIVE":
            measured += f" INCONCLUSIVE: {inconclusive_reason(check)}."
        return Statement(claimed, measured, conf, short)

    def verdict_words(self, check: Mapping[str, Any]) -> str:
        """A FAIL refutes a stated rate, and says whose: it judges a utility theorem, not
        the variant's privacy."""
        if check.get("verdict") == "FAIL":
            return f"FAIL: refutes {rate_claim(check)}"
        return super().verdict_words(check)


def left_out(ev: Mapping[str, Any]) -> str:
    """Which grid points the fits left out and why (window validation), as a sentence.

    Examples
    --------
    >>> left_out({"points": [{"parameter": "n", "excluded": ["saturated: mean 0.2", ""]}]})
    ' Left out of the fit in n: 1 of 2 points saturated (e.g. mean 0.2).'
    """
    out = []
    for pt in ev.get("points") or []:
        why = [w for w in pt.get("excluded") or [] if w and w != "outside the regime"]
        if not why:
            continue
        kinds = sorted({w.split(":")[0] for w in why})
        first = why[0].split(":", 1)[-1].strip()
        out.append(f" Left out of the fit in {pt.get('parameter')}: {len(why)} of "
                   f"{len(pt.get('excluded'))} points {' or '.join(kinds)} (e.g. {first}).")
    return "".join(out)


def rate_claim(check: Mapping[str, Any]) -> str:
    """Whose rate a rate check judged, and which: "paper 001, Theorem 3.1's d^(1/2)".

    The owner is the theorem's source (a suite names another paper's bound with the check
    option ``claimed_by``); the rate is the exponent of each parameter whose fit failed
    (all of them when none did), or the full bound for a fit against it.

    Examples
    --------
    >>> rate_claim({"metrics": {"parameter": "d", "theory": 0.75, "axis": "param"},
    ...             "evidence": {"theory": {"source": "Zhang et al. (2024)"}}})
    "Zhang et al. (2024)'s d^(3/4)"
    >>> rate_claim({"metrics": {"parameter": "n", "theory": -1}, "evidence": {}})
    'the stated n^-1'
    """
    m, ev = metrics_of(check), check.get("evidence") or {}
    src = str((ev.get("theory") or {}).get("source") or "")
    owner = f"{src}'s" if src and src != "user" else "the stated"
    if m.get("axis") == "rate":
        return f"{owner} full bound"
    fits = m.get("fits") or [m]
    failed = [f for f in fits if f.get("verdict") == "FAIL"] or fits
    terms = " · ".join(power_text(str(f.get("parameter")), f.get("theory")) for f in failed)
    return f"{owner} {terms}"


def rates_of(exp: Experiment, o: RateOptions) -> RatesResult:
    """The sweep and fits of a ``rate`` check: ``o`` applied to the experiment."""
    return verify_rates(exp, o)


def curve_band(fit: RateFit) -> dict[str, list[float]]:
    """The fitted curve at each grid point, its bootstrap band, and the log factor.

    Returns lists aligned with the grid (one entry per point, NaN where its abscissa or
    log factor is not positive and finite, or the fit did not run; points left out of the
    fit, outside the regime or the window, get the fitted curve extrapolated): ``fit``
    (the selected model, log factor included: ``exp(a) L x^p`` or ``A L x^p + c``),
    ``band_low``/``band_high`` (the pointwise
    percentile band of the curves refitted on the fit's own seed-clustered bootstrap
    resamples, model choice included, at the fit's confidence and widened for few seeds
    like its exponent interval) and ``log_factor`` (the theorem's L, divided out before
    the fit). The resamples themselves are not kept: the evidence stays one row per point.

    Examples
    --------
    >>> from dpverify.stats.rate_fit import fit_rate
    >>> rng = np.random.default_rng(0)
    >>> n = 2.0 ** np.arange(7, 12)
    >>> Y = n[:, None] ** -1.0 * np.exp(0.2 * rng.standard_normal((5, 12)))
    >>> fit = fit_rate(n, Y, theory=-1.0, parameter="n", settings=FitSettings(n_boot=300),
    ...                rng=1)
    >>> b = curve_band(fit)
    >>> lo, f, hi = (np.array(b[k]) for k in ("band_low", "fit", "band_high"))
    >>> bool(np.all((lo < f) & (f < hi))), b["log_factor"] == [1.0] * 5
    (True, True)
    """
    x, L = np.asarray(fit.x, float), np.asarray(fit.log_factor, float)
    nan = np.full(x.size, np.nan)
    out = {"fit": nan, "band_low": nan, "band_high": nan}
    ok = (x > 0) & np.isfinite(x) & (L > 0) & np.isfinite(L)
    boot = fit.boot
    if boot and ok.any() and np.isfinite(fit.exponent):
        lx, lL = np.log(np.where(ok, x, 1.0)), np.log(np.where(ok, L, 1.0))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            # The power model fits log(mean / L) = a + p log x; the offset model
            # mean = A L x^p + c (see dpverify.stats.rate_fit).
            if fit.model == "offset":
                point = fit.amplitude * np.exp(lL + fit.exponent * lx) + fit.floor
            else:
                point = np.exp(fit.intercept + fit.exponent_power * lx + lL)
            power = np.exp(boot["a_power"][:, None] + boot["p_power"][:, None] * lx + lL)
            offset = (boot["A_offset"][:, None] * np.exp(lL + boot["p_offset"][:, None] * lx)
                      + boot["c_offset"][:, None])
            curves = np.log(np.where(boot["use_offset"][:, None], offset, power))
        curves = np.where(np.isfinite(curves), curves, np.nan)
        if np.isfinite(curves).all(axis=1).sum() >= 10:  # as for the exponent interval
            a = (1.0 - fit.settings.confidence) / 2.0
            qlo, qhi = np.nanquantile(curves, [a, 1.0 - a], axis=0)
            # Widened in log space around the point curve, as the exponent's interval is.
            f = _small_sample_factor(fit.seeds, fit.settings.confidence)
            lp = np.log(point)
            out["band_low"] = np.where(ok, np.exp(lp - np.maximum(lp - qlo, 0.0) * f), np.nan)
            out["band_high"] = np.where(ok, np.exp(lp + np.maximum(qhi - lp, 0.0) * f), np.nan)
        out["fit"] = np.where(ok, point, np.nan)
    return {k: v.tolist() for k, v in out.items()} | {"log_factor": L.tolist()}


def outcome_of(res: RatesResult) -> Outcome:
    """An :class:`Outcome` from a rates result: the deciding fit's numbers as metrics.

    ``evidence["points"]`` holds, per swept parameter, one entry per grid point in each
    of its lists: the values, means and medians, and the fitted curve with its bootstrap
    band and the log factor divided out (:func:`curve_band`), which the report draws.
    """
    verdict = res.verdict
    decisive = next((f for f in res.fits if f.verdict == verdict), res.fits[0])
    d = decisive.to_dict()
    metrics = {k: d[k] for k in ("parameter", "exponent", "ci_low", "ci_high", "theory",
                                 "rule", "confidence", "tolerance", "sided", "model",
                                 "exponent_power", "exponent_offset", "floor_share",
                                 "lack_of_fit_p", "axis", "exponent_raw", "seeds", "values",
                                 "medians", "means")}
    metrics["quantity"] = res.theory.quantity
    if len(res.fits) > 1:
        metrics["fits"] = [
            {k: f.to_dict()[k] for k in ("parameter", "exponent", "ci_low", "ci_high",
                                         "theory", "lack_of_fit_p", "verdict")}
            for f in res.fits]
    evidence = {"points": [
        {"parameter": f.parameter, "values": f.values.tolist(), "x": f.x.tolist(),
         "in_regime": f.in_regime.tolist(), "excluded": list(f.excluded), "axis": f.axis,
         "model": f.model, "lack_of_fit_p": f.lack_of_fit_p,
         "medians": f.medians.tolist(),
         "means": f.means.tolist(), "local_slopes": f.local_slopes.tolist(), "flags": f.flags,
         **curve_band(f)}
        for f in res.fits], "theory": res.theory.to_dict()}
    message = "; ".join(f.message for f in res.fits)
    return Outcome(verdict, metrics, evidence, message)

