"""Empirical privacy auditing: epsilon lower bounds with a stated confidence.

Three auditors share one statistics layer (:mod:`dpverify.stats.audit_bounds`), one
auditor of scores (:class:`~dpverify.stats.score_audit.ScoreAudit`, its statistics and
selection strategies), one options object per mode and one record
(:class:`AuditResult`: epsilon_lower, epsilon_accountant, epsilon_claimed, confidence,
trials, tightness, and epsilon_detectable: what the test could have caught,
:mod:`dpverify.stats.power`):

* :func:`audit_blackbox`: distinguishing tests on the outputs of any target, registered
  or a user's ``module:function``, over neighbouring pairs;
* :func:`audit_whitebox`: the exact privacy loss of every transcript of a curator
  algorithm, from replay on neighbours;
* :func:`audit_onerun`: Steinke, Nasr and Jagielski's one-run audit with m canaries;
* :func:`audit_sequential`: black-box or white-box audits in rounds, until a violation is
  proven or the test could catch one of a given size (anytime-valid:
  :mod:`dpverify.stats.betting`).

Importing this package registers the ``audit`` check kind.

Examples
--------
>>> from dpverify.checks.audit import audit
>>> r = audit("gaussian_mechanism:sound", trials=20000, distinguisher="projection")
>>> sorted(k for k in r.metrics() if k.startswith("epsilon_"))[:4]
['epsilon_accountant', 'epsilon_claimed', 'epsilon_detectable', 'epsilon_lower']
"""

from dpverify.checks.audit.blackbox import BlackBoxOptions, audit_blackbox
from dpverify.checks.audit.check import AuditCheck, AuditOptions, audit, audit_experiment
from dpverify.checks.audit.distinguishers import DISTINGUISHERS, resolve_distinguishers
from dpverify.checks.audit.onerun import (
    OneRunOptions,
    SteinkeOneRun,
    audit_onerun,
    epsilon_one_run,
    one_run_bound,
    one_run_p_value,
)
from dpverify.checks.audit.result import AuditResult
from dpverify.checks.audit.sequential import Schedule, audit_sequential
from dpverify.checks.audit.targets import TargetOptions, declare_mechanism
from dpverify.checks.audit.whitebox import (
    WhiteBoxOptions,
    audit_whitebox,
    release_privacy_loss,
    transcript_privacy_loss,
)
from dpverify.stats.audit_bounds import (
    ThresholdBound,
    clopper_pearson,
    delta_from_gdp,
    epsilon_from_gdp,
    epsilon_from_rates,
    epsilon_lower_bound,
    epsilon_lower_bound_conditional,
    gdp_mu_from_rates,
    gdp_mu_lower_bound,
    gdp_mu_lower_bound_from_losses,
    gdp_mu_lower_bound_from_variance,
    odds_ratio_lower_bound,
    privacy_profile,
)
from dpverify.stats.power import Power, threshold_test_power
from dpverify.stats.score_audit import (
    Bonferroni,
    ClopperPearson,
    Conditional,
    GaussianDP,
    SampledGaussian,
    ScoreAudit,
    Split,
    epsilon_lower_of,
)

__all__ = [
    "DISTINGUISHERS",
    "AuditResult",
    "Power",
    "Schedule",
    "BlackBoxOptions",
    "Bonferroni",
    "ClopperPearson",
    "Conditional",
    "GaussianDP",
    "OneRunOptions",
    "SampledGaussian",
    "ScoreAudit",
    "Split",
    "SteinkeOneRun",
    "TargetOptions",
    "WhiteBoxOptions",
    "epsilon_lower_of",
    "ThresholdBound",
    "audit",
    "audit_blackbox",
    "AuditCheck",
    "AuditOptions",
    "audit_experiment",
    "audit_onerun",
    "audit_sequential",
    "audit_whitebox",
    "clopper_pearson",
    "declare_mechanism",
    "delta_from_gdp",
    "epsilon_from_gdp",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "epsilon_lower_bound_conditional",
    "epsilon_one_run",
    "gdp_mu_from_rates",
    "gdp_mu_lower_bound",
    "gdp_mu_lower_bound_from_losses",
    "gdp_mu_lower_bound_from_variance",
    "one_run_bound",
    "odds_ratio_lower_bound",
    "one_run_p_value",
    "privacy_profile",
    "release_privacy_loss",
    "threshold_test_power",
    "resolve_distinguishers",
    "transcript_privacy_loss",
]
