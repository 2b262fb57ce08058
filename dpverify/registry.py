"""Algorithms, their variants and claims; discovery through the ``dpverify.algorithms`` entry point.

A package registers algorithms by exposing, under the entry-point group
``dpverify.algorithms``, a list of :class:`Algorithm` (or a function returning one).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.claims import Finding, PrivacyClaim, UtilityClaim
from dpverify.data import Dataset
from dpverify.errors import InputError, UnknownTargetError

VARIANT_KINDS = ("sound", "paper", "planted")


@dataclass(frozen=True)
class Problem:
    """A test problem: the data an algorithm runs on and the objective its utility is about.

    ``objective(theta) -> (trials,)`` and ``grad(theta) -> (trials, d)`` are non-private
    evaluations on the full data for metrics; ``optimum`` is a high-precision minimiser
    (or ``None``); ``info`` holds constants (Lipschitz, smoothness, radius).
    """

    data: Dataset
    loss: Any = None
    objective: Callable[[np.ndarray], np.ndarray] | None = None
    grad: Callable[[np.ndarray], np.ndarray] | None = None
    optimum: np.ndarray | None = None
    info: Mapping[str, Any] = field(default_factory=dict)


# run(curator, problem, params) -> output with a leading trial axis
RunFn = Callable[[Any, Problem, Mapping[str, Any]], Any]
ClaimFn = Callable[[Mapping[str, Any]], PrivacyClaim]


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
        ``run(curator, problem, params) -> array (trials, ...)``: all data access goes
        through the curator.
    claim
        ``claim(params) -> PrivacyClaim``: what the variant promises.
    utility
        The utility theorem it carries, if any.
    findings
        For ``paper`` and ``planted`` variants: the defects they carry.
    params
        Parameter overrides relative to the algorithm's defaults.
    """

    name: str
    kind: str
    run: RunFn
    claim: ClaimFn
    description: str = ""
    utility: UtilityClaim | None = None
    findings: tuple[Finding, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in VARIANT_KINDS:
            raise ValueError(f"variant kind must be one of {VARIANT_KINDS}, got {self.kind!r}")


@dataclass(frozen=True)
class Algorithm:
    """A reference algorithm with its variants, default parameters and test problem.

    ``make_problem(params, rng) -> Problem`` builds the data and objective for a run.
    """

    name: str
    source: str
    description: str
    make_problem: Callable[[Mapping[str, Any], np.random.Generator], Problem]
    defaults: Mapping[str, Any]
    variants: Mapping[str, Variant]
    quick: Mapping[str, Any] = field(default_factory=dict)
    thorough: Mapping[str, Any] = field(default_factory=dict)

    def params(self, variant: str, overrides: Mapping[str, Any] | None = None,
               scale: str = "quick") -> dict[str, Any]:
        """Defaults, then the scale's settings, the variant's own, and the overrides."""
        scale_params = {"quick": self.quick, "thorough": self.thorough}.get(scale, {})
        out = {**self.defaults, **scale_params, **self.variants[variant].params}
        for k, v in (overrides or {}).items():
            if k not in out:
                raise InputError(
                    f"unknown parameter {k!r} for {self.name}; known: {sorted(out)}"
                )
            out[k] = v
        return out


@dataclass(frozen=True)
class Target:
    """A resolved ``name:variant``."""

    algorithm: Algorithm
    variant: Variant

    @property
    def id(self) -> str:
        return f"{self.algorithm.name}:{self.variant.name}"


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
# sent to a cluster worker brought along (dpverify.shipping), used there before any file.
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
