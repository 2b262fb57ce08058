"""Algorithms, their variants and claims; discovery through the ``dpverify.algorithms`` entry point.

A package registers algorithms by exposing, under the entry-point group
``dpverify.algorithms``, a list of :class:`Algorithm` (or a function returning one).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import math
import numbers
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.core.claims import Finding, PrivacyClaim, UtilityClaim
from dpverify.core.data import Dataset
from dpverify.core.errors import InputError, UnknownTargetError
from dpverify.core.ranges import CONVENTIONS, Range

VARIANT_KINDS = ("sound", "paper", "planted")


class MissingConstant(InputError, KeyError):
    """An algorithm asked its setting for a constant the problem does not declare public."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


@dataclass(frozen=True)
class Setting:
    """What an algorithm may know without the data: sizes, the public loss, declared constants.

    An algorithm receives this and the curator, never the dataset: ``n`` is the declared
    (public) number of records, ``d`` their dimension, ``loss`` the public per-record loss
    and ``constants`` the bounds and public draws the problem declares (a Lipschitz
    constant, a radius, the start x0). Anything else an algorithm needs about the data it
    must ask the curator for, and so pay for in the ledger.

    Examples
    --------
    >>> s = Setting(n=100, d=3, constants={"lipschitz": 1.0})
    >>> s["lipschitz"], s.get("radius", 10.0)
    (1.0, 10.0)
    >>> s.differences(s.with_constants(lipschitz=2.0))
    ['constants.lipschitz']
    """

    n: int
    d: int
    loss: Any = None
    constants: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        try:
            return self.constants[key]
        except KeyError:
            raise MissingConstant(
                f"the public setting declares no constant {key!r}; declared: "
                f"{sorted(self.constants)}") from None

    def __contains__(self, key: object) -> bool:
        return key in self.constants

    def get(self, key: str, default: Any = None) -> Any:
        """A declared constant, or ``default`` when the problem declares none."""
        return self.constants.get(key, default)

    def with_constants(self, **constants: Any) -> Setting:
        """The same setting with some constants added or replaced."""
        return dataclasses.replace(self, constants={**self.constants, **constants})

    def differences(self, other: Setting) -> list[str]:
        """The fields on which two settings differ, as dotted paths to the values.

        Arrays compare by value, floats exactly: a public setting built from D and from D'
        must be the same in every bit, or it carries information about the data.

        Examples
        --------
        >>> a = Setting(10, 2, constants={"c": {"F0": 1.0, "L": 2.0}})
        >>> a.differences(a.with_constants(c={"F0": 1.5, "L": 2.0}))
        ['constants.c.F0']
        """
        out = [f for f in ("n", "d") if getattr(self, f) != getattr(other, f)]
        out += value_differences(self.loss, other.loss, "loss")
        out += value_differences(dict(self.constants), dict(other.constants), "constants")
        return out


def value_differences(a: Any, b: Any, path: str) -> list[str]:
    """Dotted paths below ``path`` at which ``a`` and ``b`` differ (see :func:`same_value`).

    Examples
    --------
    >>> value_differences({"x": 1, "y": [1, 2]}, {"x": 1, "y": [1, 3], "z": 0}, "c")
    ['c.y', 'c.z']
    """
    if same_value(a, b):
        return []
    if type(a) is type(b) and isinstance(a, Mapping):
        return [p for k in sorted(set(a) | set(b), key=str)
                for p in (value_differences(a[k], b[k], f"{path}.{k}")
                          if k in a and k in b else [f"{path}.{k}"])]
    if type(a) is type(b) and dataclasses.is_dataclass(a) and not isinstance(a, type):
        return [p for f in dataclasses.fields(a)
                for p in value_differences(getattr(a, f.name), getattr(b, f.name),
                                           f"{path}.{f.name}")]
    return [path]


def same_value(a: Any, b: Any) -> bool:
    """Whether two public values are equal in every bit: arrays by value, dataclasses and
    containers field by field, other objects by ``==`` (or identity when that fails).

    Examples
    --------
    >>> same_value({"x0": np.zeros(2)}, {"x0": np.zeros(2)})
    True
    >>> same_value(np.array([0.0]), np.array([1e-300]))
    False
    """
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(same_value(getattr(a, f.name), getattr(b, f.name))
                   for f in dataclasses.fields(a))
    if isinstance(a, Mapping):
        return set(a) == set(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same_value, a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    try:
        return bool(a == b)
    except Exception:  # an object whose == is not a truth value
        return False


@dataclass(frozen=True)
class Problem:
    """A test problem: the private data, the objective its utility is about, and what is public.

    ``data``, ``objective(theta) -> (trials,)``, ``grad(theta) -> (trials, d)``,
    ``optimum`` (a high-precision minimiser or ``None``) and ``info`` are for the harness's
    metrics and checks only: no algorithm ever sees them. ``public`` holds the constants the
    problem declares public (bounds stated in the claim's assumptions, public draws such as
    a start point), computed from the parameters and the generator, never from the records;
    :meth:`setting` is what an algorithm receives.
    """

    data: Dataset
    loss: Any = None
    objective: Callable[[np.ndarray], np.ndarray] | None = None
    grad: Callable[[np.ndarray], np.ndarray] | None = None
    optimum: np.ndarray | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    public: Mapping[str, Any] = field(default_factory=dict)

    def setting(self) -> Setting:
        """The public setting: D's declared size, the dimension, the loss, the constants."""
        return Setting(n=self.data.n, d=self.data.d, loss=self.loss, constants=self.public)


# run(curator, setting, params) -> output with a leading trial axis
RunFn = Callable[[Any, Setting, Mapping[str, Any]], Any]
ClaimFn = Callable[[Mapping[str, Any]], PrivacyClaim]
# derive_setting(setting, data, params) -> setting: public values a variant computes before
# it runs (a sample rate, a schedule); checked to come out the same on every neighbour.
DeriveFn = Callable[[Setting, Dataset, Mapping[str, Any]], Setting]


@dataclass(frozen=True)
class CheckConfig:
    """How one check of the conformance battery runs on a variant (or an algorithm).

    Parameters
    ----------
    params, options, thorough
        Algorithm parameters for this check, the check kind's options, and the option
        overrides at ``--scale thorough``.
    expected, reason
        An override of the derived expectation ("FAIL exactly where a declared finding
        names the check") and why: the reason is required.
    skip
        Why the check does not apply to this variant (it is then not generated).
    suffix
        Names a further configuration of the same check (``...account.n1000``).
    description
        What the check shows here, in the report.

    Examples
    --------
    >>> CheckConfig(params={"n": 1000}, suffix="n1000").suffix
    'n1000'
    """

    params: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    thorough: Mapping[str, Any] = field(default_factory=dict)
    expected: str | None = None
    reason: str = ""
    skip: str = ""
    suffix: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        if self.expected is not None and not self.reason:
            raise ValueError(f"an expected verdict override ({self.expected}) needs a reason")
        if self.expected is not None and self.expected not in ("PASS", "FAIL", "INCONCLUSIVE"):
            raise ValueError(f"expected must be PASS, FAIL or INCONCLUSIVE, got {self.expected!r}")

    def over(self, base: CheckConfig) -> CheckConfig:
        """This configuration on top of ``base`` (tables merged, the rest replaced)."""
        return CheckConfig(
            {**base.params, **self.params}, {**base.options, **self.options},
            {**base.thorough, **self.thorough},
            self.expected if self.expected is not None else base.expected,
            self.reason or base.reason, self.skip or base.skip, self.suffix or base.suffix,
            self.description or base.description)


#: A check's configurations: one, or several (each with its own ``suffix``).
CheckConfigs = CheckConfig | tuple[CheckConfig, ...]


@dataclass(frozen=True)
class Battery:
    """A variant's (or algorithm's) declarations for the conformance battery.

    ``params`` are the small test sizes every check of the battery runs at (like
    scikit-learn's per-estimator test parameters); ``checks`` configure single checks by
    name (``account``, ``sensitivity``, ``audit.whitebox``, ...). A variant's battery is
    laid over its algorithm's: tables merge, a tuple of configurations replaces.

    Examples
    --------
    >>> b = Battery({"n": 50}).over(Battery({"n": 100, "T": 5}))
    >>> b.params
    {'n': 50, 'T': 5}
    """

    params: Mapping[str, Any] = field(default_factory=dict)
    checks: Mapping[str, CheckConfigs] = field(default_factory=dict)

    def over(self, base: Battery) -> Battery:
        """This battery on top of ``base``."""
        checks: dict[str, CheckConfigs] = dict(base.checks)
        for name, cfg in self.checks.items():
            old = checks.get(name)
            checks[name] = (cfg.over(old) if isinstance(cfg, CheckConfig)
                            and isinstance(old, CheckConfig) else cfg)
        return Battery({**base.params, **self.params}, checks)

    def configs(self, name: str) -> tuple[CheckConfig, ...]:
        """The configurations of check ``name`` (one default when none is declared)."""
        cfg = self.checks.get(name, CheckConfig())
        return cfg if isinstance(cfg, tuple) else (cfg,)


@dataclass(frozen=True)
class Variant:
    """One version of an algorithm: ``sound``, ``paper`` (as printed) or ``planted`` (a bug).

    Parameters
    ----------
    name
        Short identifier, e.g. ``"sound"`` or ``"planted_no_clip"``.
    kind
        One of ``sound``, ``paper``, ``planted``.
    run
        ``run(curator, setting, params) -> array (trials, ...)``: the algorithm sees the
        curator and the public :class:`Setting`; all data access goes through the curator.
    claim
        ``claim(params) -> PrivacyClaim``: what the variant promises.
    utility
        The utility theorem it carries, if any.
    findings
        For ``paper`` and ``planted`` variants: the defects they carry.
    params
        Parameter overrides relative to the algorithm's defaults.
    derive_setting
        ``derive_setting(setting, data, params) -> Setting``: public values the variant
        computes before it runs, outside the curator (a sample rate, a schedule). Every
        neighbouring-pair check evaluates it on D and on D' independently, and a field
        that differs is a finding: it is data the variant used without a release.
    battery
        Its test sizes and per-check settings for the conformance battery
        (:mod:`dpverify.checks.conformance`), laid over the algorithm's.
    """

    name: str
    kind: str
    run: RunFn
    claim: ClaimFn
    description: str = ""
    utility: UtilityClaim | None = None
    findings: tuple[Finding, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    derive_setting: DeriveFn | None = None
    battery: Battery = field(default_factory=Battery)

    def __post_init__(self) -> None:
        if self.kind not in VARIANT_KINDS:
            raise ValueError(f"variant kind must be one of {VARIANT_KINDS}, got {self.kind!r}")


@dataclass(frozen=True)
class Algorithm:
    """A reference algorithm with its variants, default parameters and test problem.

    ``make_problem(params, rng) -> Problem`` builds the data and objective for a run;
    ``battery`` holds the conformance battery's test sizes and settings for every variant;
    ``ranges`` the values each numeric parameter takes (:mod:`dpverify.core.ranges`; the
    names of :data:`~dpverify.core.ranges.CONVENTIONS` need none); ``requires`` the rules
    over several parameters at once (a problem's own constraints, a setting that needs a
    positive constant): functions of the resolved parameters that raise
    :class:`~dpverify.core.errors.InputError` on a combination the algorithm refuses. They
    are the algorithm's own run-time checks, run where parameters are resolved
    (:meth:`params`), so a suite or ``--param`` that breaks one is refused before any work.
    """

    name: str
    source: str
    description: str
    make_problem: Callable[[Mapping[str, Any], np.random.Generator], Problem]
    defaults: Mapping[str, Any]
    variants: Mapping[str, Variant]
    quick: Mapping[str, Any] = field(default_factory=dict)
    thorough: Mapping[str, Any] = field(default_factory=dict)
    battery: Battery = field(default_factory=Battery)
    ranges: Mapping[str, Range] = field(default_factory=dict)
    requires: tuple[Callable[[Mapping[str, Any]], Any], ...] = ()

    def params(self, variant: str, overrides: Mapping[str, Any] | None = None,
               scale: str = "quick") -> dict[str, Any]:
        """Defaults, then the scale's settings, the variant's own, and the overrides;
        each override checked against its range, the whole against :attr:`requires`.

        Examples
        --------
        >>> algo = get_algorithm("dp_gd_002")
        >>> algo.params("paper", {"lam": 0.5})["lam"]
        0.5
        >>> try:
        ...     algo.params("paper", {"setting": "pl", "lam": 0.0})
        ... except InputError as e:
        ...     print(str(e)[:62])
        parameters of dp_gd_002: the PL schedule needs lam > 0 (mu = l
        """
        scale_params = {"quick": self.quick, "thorough": self.thorough}.get(scale, {})
        out = {**self.defaults, **scale_params, **self.variants[variant].params}
        for k, v in (overrides or {}).items():
            self.check_override(k, v, known=out)
            out[k] = v
        for rule in self.requires:
            try:
                rule(out)
            except InputError as e:
                raise InputError(f"parameters of {self.name}: {e}") from None
        return out

    def check_override(self, key: str, value: Any,
                       known: Mapping[str, Any] | None = None) -> None:
        """Refuse an override of a parameter the algorithm lacks, or a bad value of one,
        alone: the rules over several parameters (:attr:`requires`) need them all
        (:meth:`params`). ``known``: the resolved parameters (every declared one if not
        given).

        Examples
        --------
        >>> try:
        ...     get_algorithm("noisy_gd").check_override("steps", 5)
        ... except InputError as e:
        ...     print(str(e)[:44])
        unknown parameter 'steps' for noisy_gd; know
        """
        if known is None:
            known = {**self.defaults, **self.quick, **self.thorough,
                     **{k: v for var in self.variants.values() for k, v in var.params.items()}}
        if key not in known:
            raise InputError(f"unknown parameter {key!r} for {self.name}; known: {sorted(known)}")
        self.check_value(key, value)

    def check_value(self, key: str, value: Any) -> None:
        """Refuse a value of the wrong kind or out of range for ``key``.

        A parameter with a declared range (:meth:`range_of`) takes a number in it, or one
        of the names it lists (a misspelt rule is refused, not run as the default). One
        without, whose default is a number, and every value declared for it (scales,
        variants) too, takes a finite number (an integer where every declared one is); one
        declared with booleans only takes true or false. ``None`` (the algorithm's own
        choice) passes, and so does anything for an unranged parameter whose default is
        ``None`` (it may take words, such as ``beta = "balanced"``): that is the
        algorithm's to judge.

        Examples
        --------
        >>> algo = get_algorithm("noisy_gd")
        >>> algo.check_value("T", 20)
        >>> for bad in ("abc", -4):
        ...     try:
        ...         algo.check_value("T", bad)
        ...     except InputError as e:
        ...         print(e)
        parameter 'T' of noisy_gd takes an integer >= 1, got 'abc'
        parameter 'T' of noisy_gd takes an integer >= 1, got -4
        """
        if value is None:
            return
        span = self.range_of(key)
        wanted = span.describe() if span is not None else self._value_kind(key)
        if wanted is None:
            return
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if span is not None:
            ok = span.contains(value)
        elif wanted == "true or false":
            ok = isinstance(value, bool)
        else:
            ok = number and (math.isfinite(value) or self._declares_infinite(key)) and (
                wanted != "an integer" or not math.isfinite(value)
                or float(value).is_integer())
        if not ok:
            raise InputError(f"parameter {key!r} of {self.name} takes {wanted}, got {value!r}")

    def range_of(self, key: str) -> Range | None:
        """The values parameter ``key`` takes: its declared range, else the convention's.

        Examples
        --------
        >>> get_algorithm("noisy_gd").range_of("delta").describe()
        'a number in [0, 1)'
        """
        return self.ranges.get(key, CONVENTIONS.get(key))

    def _declared(self, key: str) -> list[Any]:
        """Every value declared for ``key``: default, scales, variants."""
        declared = [t.get(key) for t in (self.defaults, self.quick, self.thorough,
                                         *(v.params for v in self.variants.values()))]
        return [v for v in declared if v is not None]

    def _declares_infinite(self, key: str) -> bool:
        return any(isinstance(v, numbers.Real) and math.isinf(v) for v in self._declared(key))

    def _value_kind(self, key: str) -> str | None:
        if self.defaults.get(key) is None:
            return None
        declared = self._declared(key)
        if all(isinstance(v, bool) for v in declared):
            return "true or false"
        if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in declared):
            return None  # words, tables, or a mix: the algorithm's to judge
        return ("an integer" if all(isinstance(v, numbers.Integral) for v in declared)
                else "a finite number")


@dataclass(frozen=True)
class Target:
    """A resolved ``name:variant``."""

    algorithm: Algorithm
    variant: Variant

    @property
    def id(self) -> str:
        return f"{self.algorithm.name}:{self.variant.name}"

    def setting(self, problem: Problem, params: Mapping[str, Any],
                data: Dataset | None = None) -> Setting:
        """The public setting the variant runs with on ``data`` (default: the problem's).

        Built for each world on its own: the problem's declared setting, then the
        variant's :attr:`Variant.derive_setting` evaluated on that world's records.

        Examples
        --------
        >>> from dpverify.execution.trials import build_problem
        >>> t = resolve("noisy_gd:sound")
        >>> p = t.algorithm.params("sound", {"n": 20})
        >>> t.setting(build_problem(t, p, 0), p).n
        20
        """
        base = problem.setting()
        derive = self.variant.derive_setting
        if derive is None:
            return base
        return derive(base, problem.data if data is None else data, params)


_REGISTRY: dict[str, Algorithm] = {}
_DISCOVERED = False


def register(algorithm: Algorithm) -> Algorithm:
    """Add an algorithm to the registry (also used by entry points).

    Examples
    --------
    >>> "noisy_gd" in {a.name for a in all_algorithms()}
    True
    """
    _REGISTRY[algorithm.name] = algorithm
    return algorithm


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    for ep in importlib.metadata.entry_points(group="dpverify.algorithms"):
        try:
            obj = ep.load()
            algos = obj() if callable(obj) else obj
        except Exception as e:  # one broken plugin must not hide every other algorithm
            warnings.warn(f"dpverify: algorithms entry point {ep.name!r} failed to load: {e}",
                          stacklevel=2)
            continue
        for a in algos:
            register(a)


def all_algorithms() -> list[Algorithm]:
    """Every registered algorithm, discovered through entry points."""
    _discover()
    return sorted(_REGISTRY.values(), key=lambda a: a.name)


def get_algorithm(name: str) -> Algorithm:
    _discover()
    if name not in _REGISTRY:
        raise UnknownTargetError(
            f"unknown algorithm {name!r}; registered: {sorted(_REGISTRY)}"
        )
    return _REGISTRY[name]


def resolve(target: str) -> Target:
    """Resolve ``name`` (its ``sound`` variant) or ``name:variant``.

    Examples
    --------
    >>> resolve("noisy_gd:sound").id
    'noisy_gd:sound'
    """
    name, _, variant = str(target).partition(":")
    algo = get_algorithm(name)
    variant = variant or "sound"
    if variant not in algo.variants:
        raise UnknownTargetError(
            f"unknown variant {variant!r} of {name}; variants: {sorted(algo.variants)}"
        )
    return Target(algo, algo.variants[variant])


def is_registered_target(target: str) -> bool:
    """Whether ``target`` names a registered algorithm (rather than ``module:function``)."""
    _discover()
    return str(target).partition(":")[0] in _REGISTRY


# Modules of ``.py`` files by the path as given: the last loaded here, and those a check
# sent to a cluster worker brought along (dpverify.execution.shipping), used there before any file.
FILE_MODULES: dict[str, Any] = {}
SHIPPED_FILES: dict[str, Any] = {}


def load_callable(spec: str) -> Callable[..., Any]:
    """Import ``module:function`` (the module may be a file path ending in ``.py``).

    Examples
    --------
    >>> load_callable("math:sqrt")(4.0)
    2.0
    """
    mod_name, sep, attr = str(spec).partition(":")
    if not sep or not attr:
        raise InputError(f"expected module:function, got {spec!r}")
    try:
        if mod_name.endswith(".py"):
            import pathlib

            path = pathlib.Path(mod_name)
            if mod_name in SHIPPED_FILES:
                module = SHIPPED_FILES[mod_name]
            elif not path.exists():
                raise InputError(f"no file {mod_name!r} for {spec!r}")
            else:
                mspec = importlib.util.spec_from_file_location(path.stem, path)
                module = importlib.util.module_from_spec(mspec)  # type: ignore[arg-type]
                mspec.loader.exec_module(module)  # type: ignore[union-attr]
                FILE_MODULES[mod_name] = module
        else:
            import sys

            if "" not in sys.path and "." not in sys.path:
                sys.path.insert(0, "")  # a user's module in the working directory
            module = importlib.import_module(mod_name)
    except ImportError as e:
        raise InputError(f"cannot import {mod_name!r} for {spec!r}: {e}") from None
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        raise InputError(f"{mod_name!r} has no callable {attr!r}")
    return fn
