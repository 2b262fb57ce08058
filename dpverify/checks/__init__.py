"""The checks: the check-kind framework (:mod:`~dpverify.checks.base`), running many checks
(:mod:`~dpverify.checks.runner`) and one module or package per kind: ``account``, ``audit``,
``sensitivity``, ``rates``, ``agreement``, ``mia``, ``certificates``, ``lower_bounds``,
``compare``, ``protocols`` and the ``conformance`` battery.
"""
