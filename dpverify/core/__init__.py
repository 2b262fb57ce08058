"""The core: private data behind a curator, its ledger, claims, datasets and the registry.

Everything else in dpverify builds on these modules and none of them imports from above:
``errors`` (input validation), ``claims`` (what a target promises), ``data`` (datasets and
neighbouring pairs), ``registry`` (algorithms, variants, problems, the public setting),
``curator`` (the door to private data and its ledger) and ``backends`` (NumPy and torch).
"""
