"""Privacy accounting: a ledger read as ``dp_accounting`` events, epsilon, noise calibration.

See :mod:`dpverify.accounting.accountant`.
"""
