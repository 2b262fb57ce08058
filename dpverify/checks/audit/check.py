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
(:mod:`dpverify.checks.audit.sequential`) until it proves a violation (FAIL) or its detectable
epsilon falls to ``detect`` times the claim (PASS), within ``max_trials`` runs per world
(else INCONCLUSIVE, "underpowered"); a run's ``--trials`` makes it fixed-size again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from dpverify.checks.audit.blackbox import BlackBoxOptions, audit_blackbox
from dpverify.checks.audit.onerun import OneRunOptions, audit_onerun
from dpverify.checks.audit.result import MODES, AuditResult
from dpverify.checks.audit.sequential import Schedule, audit_sequential
from dpverify.checks.audit.whitebox import WhiteBoxOptions, audit_whitebox
from dpverify.checks.base import CheckKind, Options, Outcome, Result, doc, register_kind
from dpverify.core.errors import InputError
from dpverify.core.prose import Statement, check_options, fmt, order_sentence
from dpverify.execution.experiment import Experiment
from dpverify.execution.trials import executor_from_context

DEFAULT_TRIALS = {"blackbox": 20000, "whitebox": 1000}
_FUNCTIONS = {"blackbox": (audit_blackbox, BlackBoxOptions),
              "whitebox": (audit_whitebox, WhiteBoxOptions),
              "onerun": (audit_onerun, OneRunOptions)}
# Options each mode accepts: the fields of its options object.
_OPTIONS = {mode: {f.name for f in fields(kind)} for mode, (_, kind) in _FUNCTIONS.items()}
# Options of a sequential audit (blackbox and whitebox): they make its Schedule.
_SCHEDULE = {"detect": "detect", "max_trials": "max_trials", "first_round": "first",
             "detect_probability": "probability"}


def audit(target: str, *, mode: str = "blackbox", **options: Any) -> AuditResult:
    """Audit ``target`` in ``mode``; options are the fields of the mode's options object.

    See :func:`~dpverify.checks.audit.blackbox.audit_blackbox`,
    :func:`~dpverify.checks.audit.whitebox.audit_whitebox` and
    :func:`~dpverify.checks.audit.onerun.audit_onerun`.

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
    for k in ("detect", "max_trials", "first_round"):
        if options.get(k) is not None:
            raise InputError(f"option {k!r} is for a sequential audit (sequential = true)")
        options.pop(k, None)
    unknown = sorted(set(options) - _OPTIONS[mode])
    if unknown:
        raise InputError(f"unknown option(s) {unknown} for a {mode} audit; known: "
                         f"{sorted(_OPTIONS[mode])}")
    function, options_type = _FUNCTIONS[mode]
    return function(target, options_type(**options))


def _sequential(target: str, mode: str, options: dict[str, Any]) -> AuditResult:
    """A sequential audit: the schedule's options out of ``options``, the rest passed on."""
    if mode == "onerun":
        raise InputError("a one-run audit runs once: it has no sequential form")
    if options.get("trials") is not None:
        raise InputError("a sequential audit chooses its own number of trials: give "
                         "'trials' (fixed size) or 'sequential', not both")
    options.pop("trials", None)
    sched = {_SCHEDULE[k]: options.pop(k) for k in list(options) if k in _SCHEDULE}
    sched = {k: v for k, v in sched.items() if v is not None}
    return audit_sequential(target, mode=mode, schedule=Schedule.for_mode(mode, **sched),
                            **options)


@dataclass(frozen=True)
class AuditOptions(Options):
    """The options of an ``audit`` check; ``None`` leaves the mode's own default.

    Which keys a mode takes: see ``_OPTIONS`` (a key another mode uses is refused).
    """

    mode: Literal["blackbox", "whitebox", "onerun"] = "blackbox"
    trials: int | None = None
    epsilon: float | None = None
    delta: float | None = None
    confidence: float | None = None
    relation: str | None = None
    neighbours: str | tuple[str, ...] | None = None
    distinguisher: str | tuple[str, ...] | None = None
    bound: str | None = None
    splits: tuple[float, ...] | None = None
    top_k: int | None = None
    select_fraction: float | None = None
    block_size: int | None = None
    accountant: bool | None = None
    canaries: int | None = None
    guesses: tuple[int, ...] | None = None
    scores: str | None = None
    canary_norm: float | None = None
    detect_probability: float | None = None
    sequential: bool | None = None
    detect: float | None = None
    max_trials: int | None = None
    first_round: int | None = None

    def validate(self) -> None:
        given = set(self.keywords())
        if self.mode == "onerun" and self.trials is not None:
            raise InputError("a one-run audit runs once: give 'canaries', not 'trials'")
        if self.sequential and self.trials is not None:
            raise InputError("a sequential audit chooses its own number of trials: give "
                             "'trials' (fixed size) or 'sequential', not both")
        allowed = _OPTIONS[self.mode] | ({"sequential", *_SCHEDULE} if self.sequential
                                         else set())
        wrong = sorted(given - allowed - {"trials"})
        if wrong:
            raise InputError(f"option(s) {wrong} do not apply to a {self.mode} audit; "
                             f"known: {sorted(_OPTIONS[self.mode] - _COMMON_RUN)}")

    def keywords(self) -> dict[str, Any]:
        """The options given (not ``None``), as keywords of the mode's function."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "mode" and getattr(self, f.name) is not None}


# Options with a flag of `dpverify audit` (the command that reproduces a check alone).
_FLAGS = {"epsilon", "delta", "confidence", "relation", "neighbours", "trials", "distinguisher",
          "bound", "canaries", "scores", "block_size", "detect", "max_trials",
          "detect_probability"}

# Set by the experiment, never by a suite.
_COMMON_RUN = {"params", "seed", "scale", "backend", "execution"}


@dataclass(frozen=True)
class AuditMetrics(Result):
    """The ``audit`` check's numbers: an ε lower bound from a distinguishing test, against
    the accountant and the claim."""

    epsilon_lower: float | None = doc("ε lower bound at `confidence` (the chosen `bound`)")
    epsilon_accountant: float | None = doc("ε of the run's ledger at `delta`")
    epsilon_claimed: float | None = doc("the variant's claimed ε at `delta`")
    confidence: float | None = doc("confidence of the lower bound")
    trials: int | None = doc("runs per dataset of the held-out test")
    delta: float | None = doc("the δ of the bound")
    tightness: float | None = doc("epsilon_lower / epsilon_accountant")
    mode: str | None = doc("`blackbox`, `whitebox`, `sequential` or `onerun`")
    bound: str | None = doc("the bound that decided (`cp`, `gdp`, `parametric`...)")
    epsilon_detectable: float | None = doc("the smallest ε the test detects with "
                                           "`detect_probability` (a PASS's power)")
    detect_probability: float | None = doc("the detection probability of that ε")
    epsilon_lower_ci: list[Any] | None = doc("[low, high] interval of epsilon_lower, "
                                             "where the auditor states one")
    epsilon_lower_cp: float | None = doc("the Clopper-Pearson bound")
    epsilon_lower_gdp: float | None = doc("the GDP (μ) bound")
    mu_lower: float | None = doc("GDP μ lower bound")
    gdp_valid: bool | None = doc("whether the GDP bound's premise held (white-box)")
    gdp_method: str | None = doc("how the GDP bound was formed (white-box)")
    epsilon_lower_parametric: float | None = doc("the parametric bound (white-box)")
    kappa_lower: float | None = doc("the parametric family's lower κ (white-box)")
    parametric: str | None = doc("the parametric bound's statistic, or why none")
    epsilon_estimate: float | None = doc("point estimate of ε from the privacy-loss "
                                         "profile (white-box)")
    kl_estimate: float | None = doc("mean privacy loss (white-box)")
    mu_replay_min: float | None = doc("smallest replayed GDP μ (white-box)")
    mu_replay_max: float | None = doc("largest replayed GDP μ (white-box)")
    epsilon_true: float | None = doc("the mechanism's exact ε, where known")
    runs_total: int | None = doc("runs of the target in all")
    search_runs: dict[str, Any] | None = doc("runs spent searching, per pair")
    split: list[Any] | None = doc("[fit, select, test] runs per dataset")
    pairs: list[Any] | None = doc("the neighbouring pairs tried")
    distinguishers: list[Any] | None = doc("the distinguishers tried")
    pair: str | None = doc("the pair that decided")
    distinguisher: str | None = doc("the distinguisher that decided")
    low_bits_vary: bool | None = doc("whether the low-bits test's outputs used their last "
                                     "bits (false: on a grid, read by magnitude)")
    statistic: str | None = doc("the test statistic that decided")
    relation: str | None = doc("the neighbouring relation")
    instance: list[Any] | None = doc("notes on the audited instance")
    releases: int | None = doc("releases in a run (white-box)")
    stop: str | None = doc("why a sequential audit stopped")
    rounds: int | None = doc("rounds of a sequential audit")
    e_value: float | None = doc("the betting e-value against the claim (sequential)")
    detect: float | None = doc("the ε a sequential audit is sized to detect")
    max_trials: int | None = doc("the sequential audit's trial budget")
    looks: int | None = doc("interim looks of a group-sequential audit")
    alpha_per_look: float | None = doc("the level spent at each look")
    canaries: int | None = doc("canaries inserted (one-run)")
    included: int | None = doc("canaries included in the run (one-run)")
    guesses: int | None = doc("guesses made (one-run)")
    correct: int | None = doc("correct guesses (one-run)")
    scores: str | None = doc("how canaries were scored (one-run)")
    dimension: int | None = doc("the model's dimension (one-run)")
    canary_norm: float | None = doc("the canaries' norm (one-run)")


@register_kind
class AuditCheck(CheckKind):
    """Empirical epsilon lower bound against the claim: FAIL when the bound exceeds it."""

    name = "audit"
    Options = AuditOptions
    Result = AuditMetrics
    column = "privacy"
    figures = ("roc", "loss")

    def run(self, exp: Experiment, options: AuditOptions) -> Outcome:
        return audit_experiment(exp, options).to_outcome().typed(AuditMetrics)

    def statement(self, check: Mapping[str, Any], claim: str,
                  info: Mapping[str, Any] | None) -> Statement:
        r, ev = self.Result.of(check), check.get("evidence") or {}
        how = []
        if r.distinguisher:
            how.append(f"distinguisher {r.distinguisher}")
        elif r.mode == "whitebox":
            how.append("the exact privacy loss of every release, by replay")
        if r.pair:
            how.append(f"neighbours {r.pair}")
        trials = (f"{fmt(r.trials)} runs on each dataset" if r.mode != "onerun"
                  else f"one run with {fmt(r.canaries)} canaries")
        measured = (f"A {r.mode or '?'} audit ({', '.join(how + [trials])}) proves "
                    f"ε ≥ {fmt(r.epsilon_lower)} ({r.bound or '?'} bound) at "
                    f"δ = {fmt(r.delta)}; the accountant gives "
                    f"{fmt(r.epsilon_accountant)}. {order_sentence(r)}")
        if r.epsilon_detectable is not None:
            measured += (f" A violation up to ε = {fmt(r.epsilon_detectable)} would have "
                         f"been caught with probability {fmt(r.detect_probability)}.")
        conf = f"The lower bound holds with confidence {fmt(r.confidence)}"
        if r.bound == "betting":
            conf += (", at whichever round the audit stopped (an e-process whose tests are "
                     "chosen on earlier rounds).")
        else:
            conf += (", with the test chosen on one split of the runs and bounded on another."
                     if r.mode != "onerun" else " (Steinke, Nasr, Jagielski 2023).")
        for a in ev.get("assumptions") or []:
            conf += f" Assumes: {a}."
        short = (f"a {r.mode or '?'} audit proves ε ≥ {fmt(r.epsilon_lower)} at "
                 f"confidence {fmt(r.confidence)} ({r.bound or '?'} bound) against the "
                 f"claimed {fmt(r.epsilon_claimed)}; the accountant gives "
                 f"{fmt(r.epsilon_accountant)}")
        return Statement(f"The variant claims {claim}.", measured, conf, short)

    def command(self, check: Mapping[str, Any]) -> list[str] | None:
        opts = check_options(check)
        mode = opts.pop("mode", "blackbox")
        opts.pop("sequential", None)  # no --trials: the command line's audit is sequential
        if set(opts) - _FLAGS:
            return None
        args = ["dpverify", "audit", str(check.get("target")), "--mode", str(mode)]
        for k, v in opts.items():
            if isinstance(v, (list, tuple)):
                v = ",".join(map(str, v))
            args += [f"--{k.replace('_', '-')}", str(v)]
        return args


def audit_experiment(exp: Experiment, options: AuditOptions) -> AuditResult:
    """The audit an ``audit`` check runs: ``options`` applied to the experiment.

    The run's ``--trials`` overrides the check's own count (a suite's ``[check.thorough]``
    table is the place for larger counts at the thorough scale).

    Examples
    --------
    >>> r = audit_experiment(Experiment("noisy_gd:sound", {"T": 5, "n": 50}),
    ...                      AuditOptions(mode="whitebox", trials=200))
    >>> r.mode, r.trials, r.verdict.value
    ('whitebox', 200, 'PASS')
    """
    mode = options.mode
    kw = options.keywords()
    if options.sequential and exp.trials is None:
        pass  # the rounds choose the number of trials
    elif mode in DEFAULT_TRIALS:
        for k in ("sequential", "detect", "max_trials", "first_round"):
            kw.pop(k, None)
        kw["trials"] = exp.trial_count(options.trials, DEFAULT_TRIALS[mode])
    kw.update(params=dict(exp.overrides), seed=exp.seed, scale=exp.scale.value,
              backend=exp.backend)
    if mode != "onerun" and exp.execution is not None:
        kw["execution"] = exp.execution
    return audit(exp.spec, mode=mode, **kw)


def execution_from_context(ctx: Any) -> Any:
    """Where a check's blocks run, from the run context (None: serial, in this process)."""
    return executor_from_context(ctx)
