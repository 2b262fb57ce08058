"""The ``mia`` check kind: membership inference against a target's privacy claim.

A suite entry::

    [[check]]
    id = "dp_sgd.sound.mia"
    kind = "mia"
    target = "dp_sgd:sound"
    expected = "PASS"
    [check.params]
    n = 200
    [check.options]
    trials = 4000
    attack = "lira"            # lira | loss | auto
    design = "poisson"         # poisson | single
    pool = 16
    records = "data"           # data | outlier | clip_boundary | fresh_direction
    nonmembers = "pool"        # pool | module:function (held-out records: not the DP game)
    confidence = 0.95

FAIL when the attack's evidence exceeds what the claim allows at the stated confidence
(its bounded ROC point above the DP ceiling, or its AUC lower bound above the ceiling's
area); PASS otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpverify.checks import CheckSpec, Outcome, RunContext, check_kind
from dpverify.errors import InputError
from dpverify.mia.core import DEFAULT_TRIALS, membership_inference

OPTIONS = {"epsilon", "delta", "trials", "attack", "design", "pool", "records", "confidence",
           "splits", "statistic", "data", "nonmembers", "auc_test", "relation", "block_size",
           "accountant", "detect_probability"}


def options_for(spec_options: Mapping[str, Any], ctx: RunContext,
                params: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword options of :func:`membership_inference` from a check and its run context.

    ``ctx.trials`` overrides the check's own trial count.

    Examples
    --------
    >>> opts = options_for({"attack": "loss"}, RunContext(seed=2), {"T": 5})
    >>> opts["attack"], opts["trials"], opts["seed"], opts["params"]
    ('loss', 4000, 2, {'T': 5})
    """
    opts = {k: v for k, v in spec_options.items() if not str(k).startswith("_")}
    unknown = sorted(set(opts) - OPTIONS)
    if unknown:
        raise InputError(f"unknown option(s) {unknown} for an mia check; known: "
                         f"{sorted(OPTIONS)}")
    opts["trials"] = int(ctx.trials if ctx.trials is not None
                         else opts.get("trials", DEFAULT_TRIALS))
    opts.update(params=dict(params), seed=int(ctx.seed), scale=ctx.scale, backend=ctx.backend)
    from dpverify.audit.check import execution_from_context

    execution = execution_from_context(ctx)
    if execution is not None:
        opts["execution"] = execution
    return opts


@check_kind("mia")
def mia_check(spec: CheckSpec, ctx: RunContext) -> Outcome:
    """Membership inference against the claim: FAIL when the evidence exceeds its ceiling."""
    try:
        return membership_inference(spec.target,
                                    **options_for(spec.options, ctx, spec.params)).to_outcome()
    except InputError as e:
        raise InputError(f"{spec.source or spec.id}: {e}") from None
