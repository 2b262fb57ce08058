"""An experiment: one target, its parameters and everything about how a check runs it.

Every check kind receives one :class:`Experiment` instead of a tail of keywords: the target
(a registered ``name:variant``, or a user's ``module:function`` for the kinds that take one),
the parameter overrides, the root seed, the scale, the backend and where trial blocks run.
It resolves the target, its parameters, its test problem and its public setting once, and
runs the variant through the curator (:meth:`Experiment.run`, :meth:`Experiment.sample`), so
no check rebuilds that chain itself.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from dpverify.core.claims import PrivacyClaim
from dpverify.core.data import Dataset, NeighbourPair
from dpverify.core.errors import InputError
from dpverify.core.registry import Problem, Setting, Target, is_registered_target, resolve
from dpverify.execution.executors import Execution, resolve_execution
from dpverify.execution.trials import (
    BlockPlan,
    OutputBlock,
    build_problem,
    executor_from_context,
    run_target,
    sample_outputs,
)


class Scale(str, enum.Enum):
    """How large a check runs: ``quick`` (CI, the main job) or ``thorough`` (the report)."""

    QUICK = "quick"
    THOROUGH = "thorough"

    @classmethod
    def parse(cls, value: str | Scale) -> Scale:
        """A scale from its name.

        Examples
        --------
        >>> Scale.parse("thorough").value
        'thorough'
        """
        try:
            return cls(str(getattr(value, "value", value)))
        except ValueError:
            raise InputError(f"scale must be 'quick' or 'thorough', got {value!r}") from None


@dataclass(frozen=True, eq=False)
class Experiment:
    """A target with its parameters, seed, scale, backend and execution.

    Parameters
    ----------
    target
        ``name``, ``name:variant``, a resolved :class:`~dpverify.core.registry.Target`, or a
        user's ``module:function`` / callable (kinds that take one read :attr:`spec`).
    params
        Parameter overrides (resolved against the variant's defaults at this scale).
    seed
        The root seed: the problem's data, then every trial stream, derive from it.
    scale, backend
        The run's scale and the backend trials run on.
    execution
        Where trial blocks run (``None``: serially, in this process).
    trials
        The run's ``--trials``: when set it overrides a check's own trial count.
    progress
        Where progress goes (see :mod:`dpverify.execution.progress`), or ``None``.

    Examples
    --------
    >>> exp = Experiment("noisy_gd:sound", {"T": 3, "n": 40})
    >>> exp.target.id, exp.params["T"], exp.setting().n
    ('noisy_gd:sound', 3, 40)
    >>> out, cur = exp.run(trials=2, rng=1)
    >>> out.shape, len(cur.ledger)
    ((2, 5), 3)
    """

    spec: str | Target | Callable[..., Any]
    overrides: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    scale: Scale = Scale.QUICK
    backend: str = "numpy"
    execution: Execution | None = None
    trials: int | None = None
    progress: Callable[[str, float], None] | None = None

    def __init__(self, target: str | Target | Callable[..., Any],
                 params: Mapping[str, Any] | None = None, **settings: Any) -> None:
        object.__setattr__(self, "spec", target)
        object.__setattr__(self, "overrides", dict(params or {}))
        for f in dataclasses.fields(self)[2:]:
            value = settings.pop(f.name, f.default)
            if f.name == "scale":
                value = Scale.parse(value)
            object.__setattr__(self, f.name, value)
        if settings:
            raise TypeError(f"unknown experiment settings {sorted(settings)}")

    @classmethod
    def from_context(cls, target: str | Target | Callable[..., Any],
                     params: Mapping[str, Any] | None, ctx: Any) -> Experiment:
        """The experiment a check runs in the context of a command or suite run.

        Examples
        --------
        >>> from dpverify.checks.base import RunContext
        >>> Experiment.from_context("noisy_gd", {}, RunContext(seed=3, workers=2)).seed
        3
        """
        return cls(target, params, seed=int(ctx.seed), scale=ctx.scale, backend=ctx.backend,
                   execution=executor_from_context(ctx), trials=ctx.trials,
                   progress=ctx.progress)

    def replace(self, **changes: Any) -> Experiment:
        """The same experiment with some settings (or ``params``, as overrides) changed."""
        params = changes.pop("params", self.overrides)
        settings = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)[2:]}
        return Experiment(changes.pop("target", self.spec), params, **{**settings, **changes})

    def with_params(self, **overrides: Any) -> Experiment:
        """The same experiment with more parameter overrides."""
        return self.replace(params={**self.overrides, **overrides})

    # What is run ----------------------------------------------------------------------
    @property
    def registered(self) -> bool:
        """Whether the target is a registered algorithm (not a user's callable)."""
        t = self.spec
        return isinstance(t, Target) or (isinstance(t, str) and is_registered_target(t))

    @cached_property
    def target(self) -> Target:
        """The resolved registered target (an error for a user's ``module:function``)."""
        if isinstance(self.spec, Target):
            return self.spec
        if isinstance(self.spec, str) and (":" not in self.spec or self.registered):
            return resolve(self.spec)  # an unknown name: the error lists the registered ones
        raise InputError(f"{self.name!r} is a user's function; this check runs registered "
                         f"algorithms (name:variant)")

    @property
    def name(self) -> str:
        """How the target is named in messages and reports."""
        if self.registered:
            return self.target.id
        return str(getattr(self.spec, "__qualname__", self.spec))

    @cached_property
    def params(self) -> dict[str, Any]:
        """Defaults, then the scale's settings, the variant's own and the overrides."""
        t = self.target
        return t.algorithm.params(t.variant.name, self.overrides, self.scale.value)

    @cached_property
    def claim(self) -> PrivacyClaim:
        """What the variant promises at these parameters."""
        return self.target.variant.claim(self.params)

    @cached_property
    def problem(self) -> Problem:
        """The test problem, its data drawn from the root seed's first child."""
        return build_problem(self.target, self.params, self.seed)

    def setting(self, data: Dataset | None = None) -> Setting:
        """The public setting the variant runs with on ``data`` (default: the problem's)."""
        return self.target.setting(self.problem, self.params, data)

    # Running ----------------------------------------------------------------------------
    def run(self, trials: int, rng: int | np.random.Generator | np.random.SeedSequence, *,
            pair: NeighbourPair | None = None, data: Dataset | None = None,
            keep_answers: bool = False) -> tuple[Any, Any]:
        """Run the variant for ``trials`` trials (replaying ``pair`` when given).

        Returns the output (trials, ...) and the curator holding the ledger.
        """
        return run_target(self.target, self.params, self.problem, trials=trials, rng=rng,
                          data=pair if pair is not None else data, backend=self.backend,
                          keep_answers=keep_answers)

    def sample(self, data: Dataset, trials: int, seed: np.random.SeedSequence, *,
               block_size: int | str = "auto", dtype: str | None = None) -> np.ndarray:
        """Outputs of ``trials`` independent runs on ``data``, in seeded blocks, (trials, -1).

        The blocks run where :attr:`execution` says; results depend only on the seed and
        the block size.
        """
        block = OutputBlock(self.target, self.params, self.problem, data, self.backend, dtype)
        execution = resolve_execution(self.execution, progress=self.progress)
        return sample_outputs(block, trials=trials, seed=seed,
                              plan=BlockPlan(block_size, execution))

    def trial_count(self, own: int | None, default: int) -> int:
        """How many trials a check runs: the run's ``--trials``, else its own, else default."""
        n = self.trials if self.trials is not None else (own if own is not None else default)
        if isinstance(n, bool) or int(n) != n or int(n) < 1:
            raise InputError(f"trials must be a positive integer, got {n!r}")
        return int(n)
