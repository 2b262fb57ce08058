"""The conformance battery's settings for paper 000's algorithms.

Every check of :mod:`dpverify.checks.conformance` runs on each variant at these sizes. Privacy
checks run at small n (every n must be private; the findings do not depend on it), the
account checks at n = 500 (a ledger costs nothing to account). The audits use small clip
thresholds and full batches where the sound variant is a control: the canary then reaches
its clip at every step, so the replayed sensitivity is (nearly) the declared one and a sound
PASS means something (epsilon_lower well above 0), while the same test, with the same
power, flags the printed noise. Full batches make every release an unsampled Gaussian, so
the white-box GDP bound is exact in distribution; where a release is sampled (or the loss is
infinite on some transcripts) the Clopper-Pearson bound is used, which assumes nothing
about the trade-off curve and is capped by the trial count (about log(trials / 4.6) at
confidence 0.99).
"""

from __future__ import annotations

from typing import Any

from dpverify.core.registry import CheckConfig

# The canaries of the sensitivity replay (fresh direction, clip boundary, outlier,
# non-finite, random, opposed) suffice for the findings; the hypothesis search runs at the
# thorough scale on the sound variants (each replay is seconds at n = 100).
CANARIES = {"search": "canaries"}
SEARCH_ALL = {"search": "all", "max_examples": 20}

#: The account checks' size: the ledger of a run at n = 500, as Theorem 6's example.
ACCOUNT_N = 500


def sensitivity(*, search: bool = False, **kw: Any) -> CheckConfig:
    """Replay on the canaries; ``search`` adds the hypothesis search at thorough scale."""
    return CheckConfig(options=CANARIES, thorough=SEARCH_ALL if search else {}, **kw)


def whitebox(neighbours: str, trials: int = 1000, *, thorough: int = 5000,
             bound: str | None = None, **kw: Any) -> CheckConfig:
    """The exact privacy loss of every replayed release on ``neighbours``, confidence 0.99."""
    options: dict[str, Any] = {"mode": "whitebox", "trials": trials, "neighbours": neighbours,
                               "confidence": 0.99}
    if bound:
        options["bound"] = bound
    return CheckConfig(options=options, thorough={"trials": thorough}, **kw)


def blackbox(neighbours: str, trials: int = 1000, *, thorough: int = 5000,
             **kw: Any) -> CheckConfig:
    """Distinguishing tests on the returned iterate of ``neighbours``, confidence 0.99."""
    return CheckConfig(options={"mode": "blackbox", "trials": trials,
                                "neighbours": neighbours, "confidence": 0.99},
                       thorough={"trials": thorough}, **kw)


def agree(**kw: Any) -> CheckConfig:
    """NumPy and torch on one noise stream (trajectory); both laws at thorough scale."""
    return CheckConfig(options={"mode": "trajectory"},
                       thorough={"mode": "both", "trials": 300}, **kw)


def account(**kw: Any) -> CheckConfig:
    """The executed ledger of a run at n = 500, accounted against the claim."""
    params = {"n": ACCOUNT_N, **kw.pop("params", {})}
    return CheckConfig(params=params, **kw)
