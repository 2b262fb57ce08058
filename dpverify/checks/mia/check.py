"""The ``mia`` check kind: membership inference against a target's privacy claim.

A suite entry::

    [[check]]
    id = "dp_sgd.sound.mia"
    kind = "mia"
    target = "dp_sgd:sound"
    expected = "PASS"
    [check.params]
    n = 200
    [check.options]
    trials = 4000
    attack = "lira"            # lira | loss | auto
    design = "poisson"         # poisson | single
    pool = 16
    records = "data"           # data | outlier | clip_boundary | fresh_direction
    nonmembers = "pool"        # pool | module:function (held-out records: not the DP game)
    confidence = 0.95

FAIL when the attack's evidence exceeds what the claim allows at the stated confidence
(its bounded ROC point above the DP ceiling, or its AUC lower bound above the ceiling's
area); PASS otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from dpverify.checks.base import CheckKind, Options, Outcome, Result, doc, register_kind
from dpverify.checks.mia.core import (
    DEFAULT_TRIALS,
    MembershipOptions,
    MiaResult,
    membership_inference,
)
from dpverify.core.prose import Statement, fmt, order_sentence
from dpverify.execution.experiment import Experiment


@dataclass(frozen=True)
class MiaOptions(Options):
    """The fields of :class:`~dpverify.checks.mia.core.MembershipOptions` a suite may give;
    ``None`` leaves its default (the experiment sets the target's run)."""

    epsilon: float | None = None
    delta: float | None = None
    trials: int | None = None
    attack: str | None = None
    design: str | None = None
    pool: int | None = None
    records: str | None = None
    confidence: float | None = None
    splits: tuple[float, ...] | None = None
    statistic: str | None = None
    data: str | None = None
    nonmembers: str | None = None
    auc_test: bool | None = None
    relation: str | None = None
    block_size: int | str | None = None
    accountant: bool | None = None
    detect_probability: float | None = None


@dataclass(frozen=True)
class MiaMetrics(Result):
    """The ``mia`` check's numbers: a membership-inference attack's ROC against the
    ceilings the claim allows."""

    auc: float | None = doc("the attack's AUC")
    tpr_at_fpr_0_001: float | None = doc("TPR at FPR 0.001", key="tpr_at_fpr_0.001")
    tpr_at_fpr_0_01: float | None = doc("TPR at FPR 0.01", key="tpr_at_fpr_0.01")
    epsilon_lower: float | None = doc("ε lower bound from the attack's ROC at `confidence`")
    epsilon_claimed: float | None = doc("the variant's claimed ε at `delta`")
    epsilon_accountant: float | None = doc("ε of the run's ledger at `delta`")
    confidence: float | None = doc("confidence of the bounds")
    trials: int | None = doc("target runs")
    delta: float | None = doc("the claim's δ")
    auc_lower: float | None = doc("lower confidence limit of the AUC")
    auc_ceiling: float | None = doc("the largest AUC the claim allows")
    tpr_ceiling_at_fpr_0_001: float | None = doc("the claim's TPR ceiling at FPR 0.001",
                                                 key="tpr_ceiling_at_fpr_0.001")
    tpr_ceiling_at_fpr_0_01: float | None = doc("the claim's TPR ceiling at FPR 0.01",
                                                key="tpr_ceiling_at_fpr_0.01")
    advantage_ceiling: float | None = doc("the largest membership advantage the claim allows")
    attack: str | None = doc("the attack that decided (`loss`, `lira`...)")
    design: str | None = doc("`dp_game` (the DP game) or `heldout` (not the DP game)")
    epsilon_detectable: float | None = doc("the smallest ε the ROC test detects with "
                                           "`detect_probability`")
    detect_probability: float | None = doc("the detection probability of that ε")
    pool: int | None = doc("candidate records in the pool")
    records: str | None = doc("where the candidate records come from")
    nonmembers: str | None = doc("where the non-members come from")
    relation: str | None = doc("the neighbouring relation")
    split: list[Any] | None = doc("[shadow, select, test] runs")
    attacks: dict[str, Any] | None = doc("per attack: its AUC and TPRs on the selection split")
    target_calls: int | None = doc("calls of the target")
    epsilon_lower_attack: str | None = doc("the attack whose ROC gave epsilon_lower")


@register_kind
class MiaCheck(CheckKind):
    """Membership inference against the claim: FAIL when the evidence exceeds its ceiling."""

    name = "mia"
    Options = MiaOptions
    Result = MiaMetrics
    column = "privacy"
    figures = ("roc",)

    def run(self, exp: Experiment, options: MiaOptions) -> Outcome:
        return mia_of(exp, options).to_outcome().typed(MiaMetrics)

    def statement(self, check: Mapping[str, Any], claim: str,
                  info: Mapping[str, Any] | None) -> Statement:
        r = self.Result.of(check)
        measured = (f"A {r.attack or '?'} membership-inference attack ({r.design or ''}, "
                    f"{fmt(r.trials)} trials) reaches AUC {fmt(r.auc, 3)} (the claim "
                    f"allows at most {fmt(r.auc_ceiling, 3)}) and proves ε ≥ "
                    f"{fmt(r.epsilon_lower)}. {order_sentence(r)}")
        short = (f"AUC {fmt(r.auc, 3)} against the claim's ceiling "
                 f"{fmt(r.auc_ceiling, 3)}; ε ≥ {fmt(r.epsilon_lower)} at "
                 f"confidence {fmt(r.confidence)}")
        return Statement(f"The target claims {claim}.", measured,
                         f"Bounds hold with confidence {fmt(r.confidence)}.", short)


def mia_of(exp: Experiment, options: MiaOptions) -> MiaResult:
    """The membership-inference game of a check: ``options`` applied to the experiment.

    The run's ``--trials`` overrides the check's own trial count.

    Examples
    --------
    >>> r = mia_of(Experiment("noisy_gd:sound", {"T": 3, "n": 40}),
    ...            MiaOptions(attack="loss", trials=200, pool=4))
    >>> r.trials, r.verdict.value
    (200, 'PASS')
    """
    kw = {f.name: getattr(options, f.name) for f in fields(options)
          if getattr(options, f.name) is not None}
    kw["trials"] = exp.trial_count(options.trials, DEFAULT_TRIALS)
    kw.update(params=dict(exp.overrides), seed=exp.seed, scale=exp.scale.value,
              backend=exp.backend)
    if exp.execution is not None:
        kw["execution"] = exp.execution
    return membership_inference(exp.spec, MembershipOptions(**kw))
