"""``audit``: one entry point for the three auditors, and the ``audit`` check kind.

A suite entry::

    [[check]]
    id = "gaussian.planted_half_noise.audit"
    kind = "audit"
    target = "gaussian_mechanism:planted_half_noise"
    expected = "FAIL"
    [check.options]
    mode = "blackbox"          # blackbox | whitebox | onerun
    trials = 20000             # runs per neighbouring dataset
    neighbours = "fresh_direction"
    confidence = 0.95
    distinguisher = "auto"
    bound = "cp"               # cp | gdp | auto (| parametric, white-box)
    detect_probability = 0.9   # epsilon_detectable is caught with this probability

The verdict is FAIL exactly when epsilon_lower exceeds the claimed epsilon. With
``sequential = true`` (and no ``trials``) the audit samples in rounds
(:mod:`dpverify.audit.sequential`) until it proves a violation (FAIL) or its detectable
epsilon falls to ``detect`` times the claim (PASS), within ``max_trials`` runs per world
(else INCONCLUSIVE, "underpowered").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpverify.audit.blackbox import audit_blackbox
from dpverify.audit.onerun import audit_onerun
from dpverify.audit.result import MODES, AuditResult
from dpverify.audit.sequential import Schedule, audit_sequential
from dpverify.audit.whitebox import audit_whitebox
from dpverify.checks import CheckSpec, Outcome, RunContext, check_kind
from dpverify.errors import InputError

DEFAULT_TRIALS = {"blackbox": 20000, "whitebox": 1000}
# Options each mode accepts (besides those every mode takes).
_COMMON = {"epsilon", "delta", "confidence", "relation", "params", "seed", "scale", "backend"}
_REPEATED = {"block_size", "execution", "accountant", "detect_probability"}
_OPTIONS = {
    "blackbox": _COMMON | _REPEATED | {"neighbours", "trials", "distinguisher", "bound",
                                       "splits", "top_k"},
    "whitebox": _COMMON | _REPEATED | {"neighbours", "trials", "bound", "select_fraction"},
    "onerun": _COMMON | {"canaries", "guesses", "scores", "canary_norm", "detect_probability"},
}
# Options of a sequential audit (blackbox and whitebox): they make its Schedule.
_SCHEDULE = {"detect": "detect", "max_trials": "max_trials", "first_round": "first",
             "detect_probability": "probability"}
_FUNCTIONS = {"blackbox": audit_blackbox, "whitebox": audit_whitebox, "onerun": audit_onerun}


def audit(target: str, *, mode: str = "blackbox", **options: Any) -> AuditResult:
    """Audit ``target`` in ``mode``; options are those of the mode's function.

    See :func:`~dpverify.audit.blackbox.audit_blackbox`,
    :func:`~dpverify.audit.whitebox.audit_whitebox` and
    :func:`~dpverify.audit.onerun.audit_onerun`.

    Examples
    --------
    >>> r = audit("gaussian_mechanism:planted_half_noise", trials=20000,
    ...           distinguisher="projection")
    >>> r.verdict.value, r.epsilon_lower > r.epsilon_claimed
    ('FAIL', True)
    """
    if mode not in MODES:
        raise InputError(f"audit mode must be one of {MODES}, got {mode!r}")
    if options.pop("sequential", False):
        return _sequential(target, mode, options)
    unknown = sorted(set(options) - _OPTIONS[mode])
    if unknown:
        raise InputError(f"unknown option(s) {unknown} for a {mode} audit; known: "
                         f"{sorted(_OPTIONS[mode])}")
    return _FUNCTIONS[mode](target, **options)


def _sequential(target: str, mode: str, options: dict[str, Any]) -> AuditResult:
    """A sequential audit: the schedule's options out of ``options``, the rest passed on."""
    if mode == "onerun":
        raise InputError("a one-run audit runs once: it has no sequential form")
    if options.get("trials") is not None:
        raise InputError("a sequential audit chooses its own number of trials: give "
                         "'trials' (fixed size) or 'sequential', not both")
    options.pop("trials", None)
    sched = {_SCHEDULE[k]: options.pop(k) for k in list(options) if k in _SCHEDULE
             and options[k] is not None}
    for k in [k for k in options if k in _SCHEDULE]:
        options.pop(k)
    return audit_sequential(target, mode=mode, schedule=Schedule.for_mode(mode, **sched),
                            **options)


def options_for(spec_options: Mapping[str, Any], ctx: RunContext,
                params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The mode and keyword options of a check, with the run context applied.

    ``ctx.trials`` overrides a check's own trial count (a suite's ``[check.thorough]``
    table is the place for larger counts at the thorough scale).

    Examples
    --------
    >>> mode, opts = options_for({"mode": "whitebox"}, RunContext(seed=3), {"T": 5})
    >>> mode, opts["trials"], opts["seed"], opts["params"]
    ('whitebox', 1000, 3, {'T': 5})
    """
    opts = {k: v for k, v in spec_options.items() if not str(k).startswith("_")}
    mode = str(opts.pop("mode", "blackbox"))
    if mode not in MODES:
        raise InputError(f"audit mode must be one of {MODES}, got {mode!r}")
    sequential = bool(opts.get("sequential"))
    if sequential and "trials" in opts:
        raise InputError("a sequential audit chooses its own number of trials: give "
                         "'trials' (fixed size) or 'sequential', not both")
    if sequential and ctx.trials is None:
        pass  # the rounds choose the number of trials (a run's --trials fixes it)
    elif mode in DEFAULT_TRIALS:
        opts.pop("sequential", None)
        opts["trials"] = int(ctx.trials if ctx.trials is not None
                             else opts.get("trials", DEFAULT_TRIALS[mode]))
    elif "trials" in opts:
        raise InputError("a one-run audit runs once: give 'canaries', not 'trials'")
    opts.update(params=dict(params), seed=int(ctx.seed), scale=ctx.scale,
                backend=ctx.backend)
    if mode != "onerun":
        execution = execution_from_context(ctx)
        if execution is not None:
            opts["execution"] = execution
    return mode, opts


def execution_from_context(ctx: Any) -> Any:
    """Where a check's blocks run, from the run context (None: serial, in this process)."""
    try:
        from dpverify.execution import executor_from_context
    except ImportError:  # a build without executors runs blocks serially
        return None
    return executor_from_context(ctx)


@check_kind("audit")
def audit_check(spec: CheckSpec, ctx: RunContext) -> Outcome:
    """Empirical epsilon lower bound against the claim: FAIL when the bound exceeds it."""
    try:
        mode, opts = options_for(spec.options, ctx, spec.params)
        return audit(spec.target, mode=mode, **opts).to_outcome()
    except InputError as e:
        where = spec.source or spec.id
        raise InputError(f"{where}: {e}") from None
