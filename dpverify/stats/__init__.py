"""Statistics alone, free of sampling and of targets: bounds that turn counts or scores into
epsilon (:mod:`~dpverify.stats.audit_bounds`, :mod:`~dpverify.stats.membership_bounds`,
:mod:`~dpverify.stats.sampled_gaussian`), the power of a test (:mod:`~dpverify.stats.power`),
selection on a split (:mod:`~dpverify.stats.selection`), anytime-valid betting
(:mod:`~dpverify.stats.betting`) and exponent fits (:mod:`~dpverify.stats.rate_fit`).
"""
