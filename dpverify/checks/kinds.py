"""The built-in check kinds, imported once so each registers itself."""

from __future__ import annotations

import contextlib
import importlib

import dpverify.checks.account  # noqa: F401

# Kinds that live with their capability register themselves when importable.
for _mod in ("dpverify.checks.audit", "dpverify.checks.sensitivity", "dpverify.checks.rates",
             "dpverify.checks.agreement", "dpverify.checks.mia", "dpverify.checks.certificates",
             "dpverify.checks.lower_bounds", "dpverify.checks.compare",
             "dpverify.checks.protocols", "dpverify.checks.conformance"):
    with contextlib.suppress(ModuleNotFoundError):
        importlib.import_module(_mod)
