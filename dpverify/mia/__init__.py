"""Membership inference: loss-threshold and LiRA attacks judged against a privacy claim.

Any (epsilon, delta)-DP training keeps every membership attack's ROC curve under the
ceiling min(1, e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR)) and its AUC at most
(1 - delta)(e^eps + delta)/(e^eps + 1) + delta (:mod:`dpverify.mia.bounds`). This package
plays the membership game on a target (:mod:`dpverify.mia.game`: a registered algorithm
in one batched run with a dataset per trial, or a user's ``f(data, rng, trials)``), attacks
it (:mod:`dpverify.mia.attacks`), and reports AUC, TPR at FPR 0.1% and 1%, and the epsilon
lower bound the ROC implies with Clopper-Pearson intervals and thresholds chosen on a
separate split (:mod:`dpverify.audit.stats`), next to what the claim allows
(:mod:`dpverify.mia.core`).

Importing it registers the ``mia`` check kind; ``dpverify mia`` is its command.

Examples
--------
>>> from dpverify.mia import membership_inference
>>> r = membership_inference("dp_sgd:sound", trials=800, attack="loss",
...                          params={"n": 100, "T": 5, "q": 1.0}, accountant=False)
>>> r.verdict.value, r.auc <= r.metrics()["auc_ceiling"]
('PASS', True)
"""

from dpverify.mia.attacks import ATTACKS, LiraFit, fit_lira, resolve_attacks, scores
from dpverify.mia.bounds import (
    advantage_ceiling,
    auc_ceiling,
    auc_lower_bound,
    roc_auc,
    tpr_at_fpr,
    tpr_ceiling,
)
from dpverify.mia.check import MiaCheck, MiaOptions, mia_of
from dpverify.mia.cli import configure_parser, run_command
from dpverify.mia.core import MiaResult, membership_inference
from dpverify.mia.game import (
    DESIGNS,
    Observations,
    Pool,
    draw_membership,
    heldout_pool,
    make_pool,
    pool_membership,
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
    "configure_parser",
    "draw_membership",
    "fit_lira",
    "heldout_pool",
    "make_pool",
    "membership_inference",
    "MiaCheck",
    "MiaOptions",
    "mia_of",
    "pool_membership",
    "resolve_attacks",
    "roc_auc",
    "run_command",
    "scores",
    "tpr_at_fpr",
    "tpr_ceiling",
]
