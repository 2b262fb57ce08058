"""Membership inference: loss-threshold and LiRA attacks judged against a privacy claim.

Any (epsilon, delta)-DP training keeps every membership attack's ROC curve under the
ceiling min(1, e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR)) and its AUC at most
(1 - delta)(e^eps + delta)/(e^eps + 1) + delta
(:mod:`dpverify.stats.membership_bounds`). This package
plays the membership game on a target (:mod:`dpverify.checks.mia.game`: a registered algorithm
in one batched run with a dataset per trial, or a user's ``f(data, rng, trials)``, handed
each trial's records in the form its user gave them, as the audit is), attacks
it (:mod:`dpverify.checks.mia.attacks`), and reports AUC, TPR at FPR 0.1% and 1%, and the epsilon
lower bound the ROC implies with Clopper-Pearson intervals and thresholds chosen on a
separate split (:mod:`dpverify.stats.audit_bounds`), next to what the claim allows
(:mod:`dpverify.checks.mia.core`).

Importing it registers the ``mia`` check kind; ``dpverify mia`` is its command.

Examples
--------
>>> from dpverify.checks.mia import MembershipOptions, membership_inference
>>> r = membership_inference("dp_sgd:sound", MembershipOptions(trials=800, attack="loss",
...                          params={"n": 100, "T": 5, "q": 1.0}, accountant=False))
>>> r.verdict.value, r.auc <= r.metrics()["auc_ceiling"]
('PASS', True)
"""

from dpverify.checks.mia.attacks import ATTACKS, LiraFit, fit_lira, resolve_attacks, scores
from dpverify.checks.mia.check import MiaCheck, MiaOptions, mia_of
from dpverify.checks.mia.core import MembershipOptions, MiaResult, membership_inference
from dpverify.checks.mia.game import (
    DESIGNS,
    Observations,
    Pool,
    draw_membership,
    heldout_pool,
    make_pool,
    pool_membership,
)
from dpverify.stats.membership_bounds import (
    advantage_ceiling,
    auc_ceiling,
    auc_lower_bound,
    roc_auc,
    tpr_at_fpr,
    tpr_ceiling,
)

__all__ = [
    "ATTACKS",
    "DESIGNS",
    "LiraFit",
    "MiaResult",
    "Observations",
    "Pool",
    "advantage_ceiling",
    "auc_ceiling",
    "auc_lower_bound",
    "draw_membership",
    "fit_lira",
    "heldout_pool",
    "make_pool",
    "MembershipOptions",
    "membership_inference",
    "MiaCheck",
    "MiaOptions",
    "mia_of",
    "pool_membership",
    "resolve_attacks",
    "roc_auc",
    "scores",
    "tpr_at_fpr",
    "tpr_ceiling",
]
