"""What the sensitivity checker runs: a registered variant or a user's curator algorithm.

A user's algorithm is a function ``algo(cur, setting, params) -> output`` written against
the curator, named ``module:function`` (the module may be a ``.py`` path) or passed as a
Python callable. It is wrapped into a one-variant :class:`~dpverify.core.registry.Algorithm` so
that it runs through :func:`dpverify.execution.trials.run_target` like any registered variant.
Its data come from ``data`` (``module:function`` or a callable returning ``(X, y)`` or a
:class:`~dpverify.core.data.Dataset`, or the dataset itself), else from synthetic
classification data of ``n`` records in ``d`` dimensions (parameters ``n`` and ``d``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dpverify.core.claims import PrivacyClaim, check_relation
from dpverify.core.data import Dataset, as_dataset, synthetic_classification
from dpverify.core.errors import InputError
from dpverify.core.registry import (
    Algorithm,
    Problem,
    Target,
    Variant,
    is_registered_target,
    load_callable,
    resolve,
)

#: Parameters every user algorithm receives unless overridden: the size of the synthetic
#: data, the neighbouring relation its declared sensitivities assume, and a nominal claim.
USER_DEFAULTS: dict[str, Any] = {
    "n": 100, "d": 5, "relation": "add_remove", "epsilon": 1.0, "delta": 1e-5,
}

DataSpec = str | Callable[[], Any] | Dataset | tuple | None


def load_data(data: DataSpec) -> Dataset | None:
    """The dataset named by ``data``: ``module:function``, a callable, ``(X, y)`` or None.

    Examples
    --------
    >>> load_data((np.zeros((3, 2)), np.ones(3))).n
    3
    >>> load_data(None) is None
    True
    """
    if data is None:
        return None
    if isinstance(data, str):
        data = load_callable(data)
    if callable(data):
        data = data()
    try:
        return as_dataset(data)
    except (TypeError, ValueError) as e:
        if isinstance(e, InputError):
            raise
        raise InputError(
            f"data must be (X, y) or a Dataset, got {type(data).__name__}: {e}") from None


def _user_claim(p: Mapping[str, Any]) -> PrivacyClaim:
    return PrivacyClaim(epsilon=float(p["epsilon"]), delta=float(p["delta"]),
                        relation=check_relation(str(p["relation"])))


def user_target(fn: Callable[..., Any], name: str, params: Mapping[str, Any] | None = None,
                data: Dataset | None = None) -> Target:
    """Wrap ``fn(cur, setting, params)`` as a target with a one-variant algorithm.

    Every key of ``params`` becomes a default, so a user's own parameters are accepted.

    Examples
    --------
    >>> t = user_target(lambda cur, setting, p: None, "demo", {"clip": 2.0})
    >>> t.id, t.algorithm.params("user")["clip"]
    ('demo:user', 2.0)
    """

    def make_problem(p: Mapping[str, Any], rng: np.random.Generator) -> Problem:
        if data is not None:
            return Problem(data=data, info={"source": "user data"})
        n, d = int(p["n"]), int(p["d"])
        if n < 2 or d < 1:
            raise InputError(f"synthetic data need n >= 2 and d >= 1, got n={n}, d={d}")
        D, w = synthetic_classification(n, d, rng)
        return Problem(data=D, info={"source": "synthetic_classification", "w_true": w})

    variant = Variant("user", "sound", fn, _user_claim, f"user algorithm {name}")
    algo = Algorithm(
        name=name, source=name, description=f"user algorithm {name}",
        make_problem=make_problem, defaults={**USER_DEFAULTS, **dict(params or {})},
        variants={"user": variant},
    )
    return Target(algo, variant)


def resolve_target(target: str | Callable[..., Any] | Target,
                   params: Mapping[str, Any] | None = None,
                   data: Dataset | None = None) -> tuple[Target, bool]:
    """A registered ``name[:variant]``, a :class:`Target`, or a user's ``module:function``
    or callable.

    Returns the target and whether it is a user's algorithm (a :class:`Target` given
    directly counts as registered: it carries its own problem and parameters).

    Examples
    --------
    >>> resolve_target("noisy_gd:sound")[0].id
    'noisy_gd:sound'
    >>> resolve_target("math:hypot")[1]
    True
    """
    if isinstance(target, Target):
        return target, False
    if callable(target):
        name = f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', '?')}"
        return user_target(target, name, params, data), True
    spec = str(target)
    if is_registered_target(spec) or ":" not in spec:
        return resolve(spec), False
    return user_target(load_callable(spec), spec, params, data), True


def with_data(problem: Problem, data: Dataset | None) -> Problem:
    """``problem`` with its data replaced (a user's data for a registered algorithm)."""
    return problem if data is None else dataclasses.replace(problem, data=data)
