"""Check kinds: what a suite entry can ask for, their typed options, and every check's result.

A check kind is a class (:class:`CheckKind`) that owns its vertical: a frozen
:class:`Options` dataclass (the typed schema a suite's ``[check.options]`` table is
validated against when the suite is loaded, before anything runs) and ``run``, which turns
an :class:`~dpverify.execution.experiment.Experiment` and its options into an :class:`Outcome`.
Capabilities register their kind with :func:`register_kind` (``account`` in
:mod:`dpverify.checks.account`, ``audit`` in :mod:`dpverify.checks.audit`, ``sensitivity``,
``rate``, ``agree``...); the suite loader, the runner and the CLI loop over the registry
instead of branching on names.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import re
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Union

from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError
from dpverify.core.prose import Statement, inconclusive_reason, with_article
from dpverify.core.registry import is_registered_target, resolve
from dpverify.execution.experiment import Experiment


@dataclass(frozen=True)
class CheckSpec:
    """One entry of a suite: which check, on what, with what parameters and expectation.

    ``options`` are the check kind's own settings as written (validated against the
    kind's :class:`Options` when the suite is loaded); ``thorough`` overrides some of them
    at ``--scale thorough``.
    """

    id: str
    kind: str
    target: str
    expected: Verdict = Verdict.PASS
    params: Mapping[str, Any] = field(default_factory=dict)  # the algorithm's parameters
    options: Mapping[str, Any] = field(default_factory=dict)  # the check's own settings
    source: str = ""  # file:line, for error messages
    description: str = ""  # the suite entry's own words, shown beside its result
    thorough: Mapping[str, Any] = field(default_factory=dict)  # option overrides, thorough
    reason: str = ""  # why the expectation is what it is, where it is not the derived one
    # The expectation at --scale thorough where it differs: a statistical check whose
    # verdict depends on its sample size (INCONCLUSIVE on the quick grid, decided on the
    # thorough one).
    expected_thorough: Verdict | None = None
    # file:line of each value as written ("params.T", "options.trials", "thorough.trials").
    lines: Mapping[str, str] = field(default_factory=dict)

    def locate(self, message: str) -> str:
        """Where an error ``message`` raised while the check ran points in its suite.

        The line of the one parameter or option the message names ("parameter 'k'", else
        any quoted name), else of the one whose value it quotes after "got" (a parameter
        checked under another name) or as "name = value" (a rule over several), else the
        check's own line.

        Examples
        --------
        >>> s = CheckSpec("a", "account", "noisy_gd:sound", params={"T": -4, "n": 40},
        ...               source="s.toml:2", lines={"params.T": "s.toml:5",
        ...                                         "params.n": "s.toml:6"})
        >>> s.locate("steps must be a finite number > 0, got -4")
        's.toml:5'
        >>> s.locate("parameter 'n' is too small"), s.locate("no such file")
        ('s.toml:6', 's.toml:2')
        >>> s.locate("T must exceed n, got T = -4, n = 50")
        's.toml:5'
        """
        tables = {"params": self.params, "options": self.options, "thorough": self.thorough}
        # "parameter 'k'" first: a message may go on to list the known names, quoted.
        named = [k for k in self.lines if f"parameter {k.partition('.')[2]!r}" in message]
        if len(named) != 1:
            named = [k for k in self.lines if repr(k.partition(".")[2]) in message]
        if len(named) != 1:
            named = [k for k in self.lines if _quotes_value(
                message, tables.get(k.partition(".")[0], {}), k.partition(".")[2])]
        return self.lines[named[0]] if len(named) == 1 else (self.source or self.id)

    def options_at(self, scale: str) -> dict[str, Any]:
        """The options as they apply at ``scale`` (the thorough overrides merged in).

        Examples
        --------
        >>> s = CheckSpec("a", "account", "noisy_gd:sound", options={"rtol": 0.1},
        ...               thorough={"rtol": 0.01})
        >>> s.options_at("quick"), s.options_at("thorough")
        ({'rtol': 0.1}, {'rtol': 0.01})
        """
        return {**self.options, **(self.thorough if scale == "thorough" else {})}


# Options of any kind that count something (runs, trials, blocks...): 0 or less is bad
# input when the suite is loaded, not an error deep inside the check's run.
COUNT_OPTIONS = frozenset({
    "runs", "trials", "trajectory_trials", "top_k", "block_size", "canaries", "max_trials",
    "first_round", "seeds", "pool", "n_boot", "min_points", "max_examples"})


def _quotes_value(message: str, table: Mapping[str, Any], key: str) -> bool:
    if key not in table or isinstance(table[key], bool):
        return False
    said = rf"(?:got|{re.escape(key)} =) {re.escape(repr(table[key]))}"
    return re.search(rf"\b{said}(?![\w.])", message) is not None


# Typed options ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """Base of every check kind's options: a frozen dataclass whose annotations are the schema.

    :meth:`parse` checks a table's keys and value types against the fields (unknown keys
    and wrong types are :class:`~dpverify.core.errors.InputError`, naming the key, the type and
    the known keys); :meth:`validate` adds a kind's cross-field rules.
    """

    @classmethod
    def parse(cls, raw: Mapping[str, Any], where: str = "") -> Options:
        """Options from a table (a suite's ``[check.options]``, keyword arguments...).

        Examples
        --------
        >>> @dataclass(frozen=True)
        ... class Demo(Options):
        ...     trials: int = 10
        ...     rtol: float = 1e-3
        >>> Demo.parse({"trials": 5, "rtol": 1})
        Demo(trials=5, rtol=1.0)
        >>> Demo.parse({"trails": 5}, "s.toml:3")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dpverify.core.errors.InputError: s.toml:3: unknown option 'trails'; known: [...]
        """
        prefix = f"{where}: " if where else ""
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            if key not in fields:
                raise InputError(f"{prefix}unknown option {key!r}; known: {sorted(fields)}")
            tp = hints[key]
            if not conforms(value, tp):
                raise InputError(f"{prefix}option {key!r} must be {type_name(tp)}, "
                                 f"got {value!r}")
            if key in COUNT_OPTIONS and isinstance(value, int) and value < 1:
                raise InputError(f"{prefix}option {key!r} must be a positive integer, "
                                 f"got {value!r}")
            values[key] = _coerce(value, tp)
        missing = [k for k, f in fields.items() if k not in values
                   and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        if missing:
            raise InputError(f"{prefix}missing required option(s) {missing}")
        opts = cls(**values)
        try:
            opts.validate()
        except InputError as e:
            raise InputError(f"{prefix}{e}") from None
        return opts

    def validate(self) -> None:
        """Cross-field rules of a kind (raise :class:`InputError`); none by default."""

    def given(self) -> dict[str, Any]:
        """The fields that differ from their defaults (what a command line must repeat)."""
        out = {}
        for f in dataclasses.fields(self):
            default = (f.default if f.default is not dataclasses.MISSING
                       else f.default_factory() if f.default_factory is not dataclasses.MISSING
                       else dataclasses.MISSING)
            v = getattr(self, f.name)
            if default is dataclasses.MISSING or v != default:
                out[f.name] = v
        return out


def conforms(value: Any, tp: Any) -> bool:
    """Whether ``value`` (read from TOML or keyword arguments) fits the annotation ``tp``.

    Examples
    --------
    >>> conforms(3, float), conforms(True, int), conforms(["a"], tuple[str, ...])
    (True, False, True)
    >>> conforms("auto", int | Literal["auto"]), conforms({"n": [1, 2]}, dict[str, Any])
    (True, True)
    """
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if tp is type(None):
        return value is None
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if origin in (list, tuple, Sequence) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False
        item = args[0] if args else Any
        return all(conforms(v, item) for v in value)
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        if not isinstance(value, Mapping):
            return False
        vt = args[1] if len(args) == 2 else Any
        return all(isinstance(k, str) and conforms(v, vt) for k, v in value.items())
    return isinstance(value, tp) if isinstance(tp, type) else True


def type_name(tp: Any) -> str:
    """A reader's name for an annotation: ``a number``, ``one of 'cp', 'gdp'``...

    Examples
    --------
    >>> type_name(float | None), type_name(Literal["cp", "gdp"])
    ('a number or none', "one of 'cp', 'gdp'")
    """
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
             type(None): "none", Any: "a value"}
    if tp in names:
        return names[tp]
    if origin in (list, tuple, Sequence) or tp in (list, tuple):
        return f"a list of {type_name(args[0])}s" if args else "a list"
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        return "a table"
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any) -> Any:
    """Numbers where numbers are meant, tuples for lists (frozen options stay frozen)."""
    origin = typing.get_origin(tp)
    if tp is float and isinstance(value, int):
        return float(value)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if float in args and isinstance(value, int) and not isinstance(value, bool) \
                and int not in args:
            return float(value)
        return value
    if origin in (list, tuple, Sequence) and isinstance(value, list):
        return tuple(value)
    return value


# Typed results ----------------------------------------------------------------------------

_NUMBER_WORDS = ("inf", "-inf", "nan")


def doc(text: str, key: str | None = None) -> Any:
    """A result field that defaults to ``None``, described by ``text`` (the schema's words).

    ``key`` is its name in ``report.json`` where that is no Python name
    (``tpr_at_fpr_0.001``).
    """
    meta = {"doc": text, **({"key": key} if key else {})}
    return field(default=None, metadata=meta)


def _accepts_float(tp: Any) -> bool:
    return tp is float or float in typing.get_args(tp)


@dataclass(frozen=True)
class Result:
    """A check's typed result: its numbers under the names ``report.json`` gives them.

    Each kind declares its own frozen subclass (``CheckKind.Result``); this base is the
    result of a kind known only from its records, which keeps whatever they hold in
    :attr:`extra`. Every field is optional (``None``: not measured); ``report.json``
    writes the fields that are not ``None`` under ``metrics`` (:meth:`to_metrics`).

    Examples
    --------
    >>> @dataclass(frozen=True)
    ... class Demo(Result):
    ...     ratio: float | None = doc("measured over claimed")
    >>> Demo.from_metrics({"ratio": "inf"}).ratio
    inf
    >>> Demo.from_metrics({"ratio": 1.0}).to_metrics()
    {'ratio': 1.0}
    >>> Demo.from_metrics({"ratoi": 1.0})
    Traceback (most recent call last):
    ...
    ValueError: a Demo result has no field 'ratoi' (declared: ['error', 'ratio', 'warnings'])
    """

    #: The kind whose result this is (set by :func:`register_kind`).
    kind: ClassVar[str] = ""

    error: str | None = field(default=None, kw_only=True, metadata={
        "doc": "why the check did not complete (its verdict is then INCONCLUSIVE)"})
    warnings: int | None = field(default=None, kw_only=True, metadata={
        "doc": "how many warnings its libraries raised (where there were any)"})
    #: What a record held beyond the declared fields (old records, unknown kinds).
    extra: Mapping[str, Any] = field(default_factory=dict, kw_only=True, repr=False,
                                     metadata={"internal": True})

    @classmethod
    def schema_fields(cls) -> dict[str, dataclasses.Field[Any]]:
        """The fields by their ``report.json`` names."""
        return {f.metadata.get("key", f.name): f for f in dataclasses.fields(cls)
                if not f.metadata.get("internal")}

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any], *, strict: bool = True) -> Result:
        """The typed result of a metrics dictionary.

        ``strict`` (a kind's own run) refuses a key the class does not declare and a
        value of the wrong type, naming the kind and the key; otherwise (a saved record)
        undeclared keys are kept in :attr:`extra` and values as they were written. The
        words ``"inf"``, ``"-inf"``, ``"nan"`` of a number field are read as numbers.
        """
        if cls is Result:
            return cls(error=metrics.get("error"), warnings=metrics.get("warnings"),
                       extra={k: v for k, v in metrics.items() if k not in ("error",
                                                                               "warnings")})
        hints = typing.get_type_hints(cls)
        fields = cls.schema_fields()
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, raw in metrics.items():
            f = fields.get(key)
            if f is None:
                if strict:
                    raise ValueError(f"{with_article(cls._who())} result has no field {key!r} "
                                     f"(declared: {sorted(fields)})")
                extra[key] = raw
                continue
            values[f.name] = cls._value(key, jsonable(raw), hints[f.name], strict)
        return cls(**values, extra=extra)

    @classmethod
    def _value(cls, key: str, v: Any, tp: Any, strict: bool) -> Any:
        if v in _NUMBER_WORDS and _accepts_float(tp):
            return float(v)
        if strict and not conforms(v, tp):
            raise ValueError(f"{with_article(cls._who())} result's {key!r} must be "
                             f"{type_name(tp)}, got {v!r}")
        return v

    @classmethod
    def _who(cls) -> str:
        return f"{cls.kind!r} check" if cls.kind else cls.__name__

    @classmethod
    def of(cls, check: Mapping[str, Any]) -> Result:
        """The typed result of a ``report.json`` record (its ``metrics``), leniently."""
        return cls.from_metrics(check.get("metrics") or {}, strict=False)

    def to_metrics(self) -> dict[str, Any]:
        """The fields that are not ``None`` (and :attr:`extra`), as ``report.json`` writes
        them under ``metrics``."""
        out = {key: getattr(self, f.name) for key, f in self.schema_fields().items()
               if getattr(self, f.name) is not None}
        return {**out, **self.extra}

    def get(self, key: str, default: Any = None) -> Any:
        """A value by its ``report.json`` name (the field, else :attr:`extra`), for code
        that loops over several kinds' names (a headline, a baseline comparison)."""
        f = self.schema_fields().get(key)
        v = getattr(self, f.name) if f is not None else self.extra.get(key)
        return default if v is None else v

    def replace(self, **changes: Any) -> Result:
        """A copy with ``changes`` (fields by their Python names)."""
        return dataclasses.replace(self, **changes)


def result_of(check: Mapping[str, Any]) -> Result:
    """The typed result of a ``report.json`` record, by its kind (the generic
    :class:`Result` for a kind this installation lacks).

    Examples
    --------
    >>> r = result_of({"kind": "account", "metrics": {"epsilon_accountant": "inf"}})
    >>> type(r).__name__, r.epsilon_accountant
    ('AccountMetrics', inf)
    >>> result_of({"kind": "gone", "metrics": {"x": 1}}).extra
    {'x': 1}
    """
    _load_builtin_kinds()
    kind = CHECK_KINDS.get(str(check.get("kind")))
    return (kind.Result if kind is not None else Result).of(check)


# Check kinds ------------------------------------------------------------------------------


class CheckKind(abc.ABC):
    """A kind of check: its typed options and how it runs on an experiment.

    Subclasses set ``name`` and ``Options`` and implement :meth:`run`; :func:`register_kind`
    makes them known to suites, the runner and the CLI.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[Options]] = Options
    #: The kind's typed result (the generic :class:`Result` for a kind without one).
    Result: ClassVar[type[Result]] = Result
    #: Whether the kind runs a registered algorithm's variant (False: it also takes a
    #: user's ``module:function``, as audits and rate sweeps do).
    registered_only: ClassVar[bool] = False

    def options(self, raw: Mapping[str, Any], where: str = "") -> Options:
        """The kind's options, parsed and validated."""
        return self.Options.parse(raw, where)

    def arms(self, target: str, params: Mapping[str, Any], options: Any,
             scale: str = "quick") -> list[tuple[str, dict[str, Any], str]]:
        """Every run the check sets up at ``scale``: (target, its parameters, the option
        that sets them). A suite resolves each when it loads, at both scales, so a
        combination the algorithm refuses is an error at that option's line before any
        work. The check's own target alone, unless a kind runs others (a baseline, a grid
        of values).
        """
        return [(target, dict(params), "params")]

    def refused_arm(self, target: str, params: Mapping[str, Any], options: Any,
                    scale: str = "quick") -> tuple[str, dict[str, Any], str, InputError] | None:
        """The first run :meth:`arms` sets up that its algorithm refuses (a range or a
        rule of :meth:`~dpverify.core.registry.Algorithm.params`, at ``scale``): (target,
        its parameters, the option that sets them, the error), or ``None``. The check's
        own run is left out (resolved on its own), and so is a user's function.

        Examples
        --------
        >>> from dpverify.checks.compare import CompareCheck, CompareOptions
        >>> o = CompareOptions(baseline="noisy_gd:sound", baseline_params={"T": 0})
        >>> t, params, key, e = CompareCheck().refused_arm("noisy_gd:sound", {"T": 3}, o)
        >>> key, str(e)
        ('options.baseline_params', "parameter 'T' of noisy_gd takes an integer >= 1, got 0")
        """
        own = (target, dict(params))
        for t, p, key in self.arms(target, params, options, scale):
            if (t, p) == own or not (self.registered_only or is_registered_target(t)):
                continue
            try:
                ref = resolve(t)
                ref.algorithm.params(ref.variant.name, p, scale)
            except InputError as e:
                return t, p, key, e
        return None

    #: The figures the report draws for this kind's records, by name: ``roc`` (the test's
    #: ROC against the claim's trade-off curve), ``loss`` (the privacy-loss histogram of a
    #: white-box audit), ``rate`` (the log-log fit with its band).
    figures: ClassVar[tuple[str, ...]] = ()
    #: The summary column the kind's verdicts count in: ``privacy`` (checks of the privacy
    #: claim), ``rate`` (of the utility theorem), ``agreement`` (of the backends), ``other``.
    column: ClassVar[str] = "other"

    @abc.abstractmethod
    def run(self, exp: Experiment, options: Any) -> Outcome:
        """Run the check on ``exp`` with its parsed ``options``."""

    def statement(self, check: Mapping[str, Any], claim: str,
                  info: Mapping[str, Any] | None) -> Statement:
        """A record of this kind in plain words (``claim``: the variant's claim, worded).

        ``info`` holds what the registry declares about the target (its utility theorem).
        The default repeats the check's message.
        """
        return Statement("", str(check.get("message", "")), "")

    def command(self, check: Mapping[str, Any]) -> list[str] | None:
        """The subcommand that reproduces a record alone, without its ``--param``, seed and
        scale arguments; ``None`` where the check's options have no flags."""
        return None

    def verdict_words(self, check: Mapping[str, Any]) -> str:
        """The verdict in words a reviewer reads without a glossary ("INCONCLUSIVE: why")."""
        v = str(check.get("verdict"))
        why = inconclusive_reason(check)
        return f"{v}: {why}" if why else v


CHECK_KINDS: dict[str, CheckKind] = {}


def register_kind(cls: type[CheckKind]) -> type[CheckKind]:
    """Make a check kind known under ``cls.name``.

    Examples
    --------
    >>> "account" in available_check_kinds()
    True
    """
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.Result is not Result:
        cls.Result.kind = cls.name
    CHECK_KINDS[cls.name] = cls()
    return cls


def get_kind(name: str, where: str = "") -> CheckKind:
    """The registered check kind ``name``, or an :class:`InputError` listing the known ones."""
    _load_builtin_kinds()
    if name not in CHECK_KINDS:
        prefix = f"{where}: " if where else ""
        raise InputError(f"{prefix}unknown check kind {name!r}; known: {sorted(CHECK_KINDS)}")
    return CHECK_KINDS[name]


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
    """What a check kind returns: its verdict, its typed result, the evidence behind it,
    and a sentence.

    ``result`` may be given as a plain dictionary (code below the kinds builds one): it
    is then held as the generic :class:`Result` until :meth:`typed` declares its kind.

    Examples
    --------
    >>> from dpverify.checks.account import AccountMetrics
    >>> o = Outcome(Verdict.PASS, {"ratio": 0.5}).typed(AccountMetrics)
    >>> o.result.ratio, dict(o.metrics)
    (0.5, {'ratio': 0.5})
    """

    verdict: Verdict
    result: Result = field(default_factory=Result)
    evidence: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.result, Mapping):
            self.result = Result.from_metrics(self.result)

    @property
    def metrics(self) -> Mapping[str, Any]:
        """The result as ``report.json`` writes it (read-only)."""
        return types.MappingProxyType(self.result.to_metrics())

    def typed(self, cls: type[Result]) -> Outcome:
        """This outcome with its result read into ``cls``, strictly: a key ``cls`` does not
        declare is an error naming the kind and the key."""
        if type(self.result) is cls:
            return self
        return dataclasses.replace(self, result=cls.from_metrics(self.result.to_metrics()))


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
            "metrics": jsonable(self.outcome.result.to_metrics()),
            "evidence": jsonable(self.outcome.evidence),
            "message": self.outcome.message,
            "params": jsonable(dict(self.spec.params)),
            "options": jsonable(dict(self.spec.options)),
            "seconds": round(self.seconds, 3),
            # Only when the suite gave one: records without it stay as they were.
            **({"description": self.spec.description} if self.spec.description else {}),
            # Why the expectation differs from the one the variant's findings derive.
            **({"reason": self.spec.reason} if self.spec.reason else {}),
        }


def available_check_kinds() -> list[str]:
    _load_builtin_kinds()
    return sorted(CHECK_KINDS)


def _load_builtin_kinds() -> None:
    import dpverify.checks.kinds  # noqa: F401  (registers the built-in kinds)


def run_check(spec: CheckSpec, ctx: RunContext) -> CheckResult:
    """Run one check and time it.

    Examples
    --------
    >>> spec = CheckSpec("a", "account", "noisy_gd:sound", params={"T": 5})
    >>> run_check(spec, RunContext()).outcome.verdict
    <Verdict.PASS: 'PASS'>
    """
    where = spec.source or spec.id
    kind = get_kind(spec.kind, where)
    t0 = time.perf_counter()
    try:
        options = kind.options(spec.options_at(ctx.scale), where)
        exp = Experiment.from_context(spec.target, spec.params, ctx)
        outcome = kind.run(exp, options).typed(kind.Result)
    except InputError as e:
        if str(e).startswith(where):
            raise
        raise InputError(f"{spec.locate(str(e))}: {e}") from None
    except Exception as e:  # a crashing check is reported, not allowed to sink the run
        import traceback

        outcome = Outcome(
            Verdict.INCONCLUSIVE,
            kind.Result(error=f"{type(e).__name__}: {e}"),
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
