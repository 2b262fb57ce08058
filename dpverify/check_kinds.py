"""The built-in check kinds, imported once so each registers itself."""

from __future__ import annotations

import contextlib
import importlib

import dpverify.account_check  # noqa: F401

# Kinds that live with their capability register themselves when importable.
for _mod in ("dpverify.audit", "dpverify.sensitivity", "dpverify.rates", "dpverify.agreement",
             "dpverify.mia", "dpverify.certificates", "dpverify.lower_bounds", "dpverify.compare",
             "dpverify.protocols", "dpverify.conformance"):
    with contextlib.suppress(ModuleNotFoundError):
        importlib.import_module(_mod)
