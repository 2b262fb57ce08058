"""Check kinds: what a suite entry can ask for, and the result every check returns.

Each capability registers its check kind here (``account`` in :mod:`dpverify.accounting`'s
companion below, ``audit`` in :mod:`dpverify.audit`, ``sensitivity``, ``rate``, ``agree``...).
A check kind is a function ``fn(spec, ctx) -> Outcome``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dpverify.claims import Verdict
from dpverify.errors import InputError


@dataclass(frozen=True)
class CheckSpec:
    """One entry of a suite: which check, on what, with what parameters and expectation."""

    id: str
    kind: str
    target: str
    expected: Verdict = Verdict.PASS
    params: Mapping[str, Any] = field(default_factory=dict)  # the algorithm's parameters
    options: Mapping[str, Any] = field(default_factory=dict)  # the check's own settings
    source: str = ""  # file:line, for error messages
    description: str = ""  # the suite entry's own words, shown beside its result


@dataclass
class RunContext:
    """Settings shared by every check of a run."""

    seed: int = 0
    scale: str = "quick"
    trials: int | None = None  # overrides a check's own trial count when set
    workers: int = 1
    executor: str = "local"
    scheduler: str | None = None
    backend: str = "numpy"
    progress: Callable[[str, float], None] | None = None
    report_dir: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: Any, **overrides: Any) -> RunContext:
        """The context of a command line: the shared options every subcommand takes.

        Examples
        --------
        >>> import argparse
        >>> RunContext.from_args(argparse.Namespace(seed=3, workers=2, quiet=True)).extras
        {'quiet': True, 'checkpoint': None}
        """
        seed = getattr(args, "seed", None)
        kw: dict[str, Any] = {
            "seed": 0 if seed is None else seed,
            "scale": getattr(args, "scale", "quick"),
            "trials": getattr(args, "trials", None),
            "workers": getattr(args, "workers", 1) or 1,
            "executor": getattr(args, "executor", "local"),
            "scheduler": getattr(args, "scheduler", None),
            "backend": getattr(args, "backend", "numpy"),
            "report_dir": getattr(args, "report_dir", None),
            "extras": {"quiet": bool(getattr(args, "quiet", False)),
                       "checkpoint": getattr(args, "checkpoint", None)},
        }
        extras = overrides.pop("extras", {})
        kw.update(overrides)
        kw["extras"].update(extras)
        return cls(**kw)


@dataclass
class Outcome:
    """What a check kind returns: its verdict, the numbers behind it, and a sentence."""

    verdict: Verdict
    metrics: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    message: str = ""


@dataclass
class CheckResult:
    """A finished check, as written to ``report.json``."""

    spec: CheckSpec
    outcome: Outcome
    seconds: float

    @property
    def met(self) -> bool:
        return self.outcome.verdict == self.spec.expected

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.spec.id,
            "kind": self.spec.kind,
            "target": self.spec.target,
            "expected": self.spec.expected.value,
            "verdict": self.outcome.verdict.value,
            "met": self.met,
            "metrics": jsonable(self.outcome.metrics),
            "evidence": jsonable(self.outcome.evidence),
            "message": self.outcome.message,
            "params": jsonable(dict(self.spec.params)),
            "options": jsonable(dict(self.spec.options)),
            "seconds": round(self.seconds, 3),
            # Only when the suite gave one: records without it stay as they were.
            **({"description": self.spec.description} if self.spec.description else {}),
        }


CheckFn = Callable[[CheckSpec, RunContext], Outcome]
CHECK_KINDS: dict[str, CheckFn] = {}


def check_kind(name: str) -> Callable[[CheckFn], CheckFn]:
    """Register a check kind under ``name``.

    Examples
    --------
    >>> "account" in available_check_kinds()
    True
    """

    def deco(fn: CheckFn) -> CheckFn:
        CHECK_KINDS[name] = fn
        return fn

    return deco


def available_check_kinds() -> list[str]:
    _load_builtin_kinds()
    return sorted(CHECK_KINDS)


def _load_builtin_kinds() -> None:
    import dpverify.check_kinds  # noqa: F401  (registers the built-in kinds)


def run_check(spec: CheckSpec, ctx: RunContext) -> CheckResult:
    """Run one check and time it.

    Examples
    --------
    >>> spec = CheckSpec("a", "account", "noisy_gd:sound", params={"T": 5})
    >>> run_check(spec, RunContext()).outcome.verdict
    <Verdict.PASS: 'PASS'>
    """
    _load_builtin_kinds()
    if spec.kind not in CHECK_KINDS:
        raise InputError(
            f"{spec.source or spec.id}: unknown check kind {spec.kind!r}; "
            f"known: {sorted(CHECK_KINDS)}"
        )
    t0 = time.perf_counter()
    try:
        outcome = CHECK_KINDS[spec.kind](spec, ctx)
    except InputError:
        raise
    except Exception as e:  # a crashing check is reported, not allowed to sink the run
        import traceback

        outcome = Outcome(
            Verdict.INCONCLUSIVE,
            {"error": f"{type(e).__name__}: {e}"},
            {"traceback": traceback.format_exc(limit=8)},
            f"the check raised {type(e).__name__}: {e}",
        )
    return CheckResult(spec, outcome, time.perf_counter() - t0)


def jsonable(obj: Any) -> Any:
    """Plain JSON types: numpy scalars and arrays become numbers and lists, inf a string."""
    import numpy as np

    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(obj, Verdict):
        return obj.value
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    return str(obj)
