"""The ``account`` check: does the noise the ledger shows buy the epsilon the variant claims?"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dpverify.accounting import account_ledger, claimed_epsilon
from dpverify.checks import CheckSpec, Outcome, RunContext, check_kind
from dpverify.claims import PrivacyClaim, Verdict
from dpverify.execution import build_problem, run_target, seed_streams
from dpverify.registry import resolve


def account_target(
    target: str, params: Mapping[str, Any] | None = None, *, seed: int = 0,
    scale: str = "quick", delta: float | None = None,
) -> tuple[Any, PrivacyClaim, Any]:
    """Run ``target`` once and account its ledger at the claim's delta.

    Returns the :class:`~dpverify.accounting.AccountingResult`, the claim and the ledger.

    Examples
    --------
    >>> res, claim, ledger = account_target("noisy_gd:sound", {"T": 5})
    >>> abs(res.epsilon - claim.epsilon) < 1e-3
    True
    """
    t = resolve(target)
    p = t.algorithm.params(t.variant.name, params, scale)
    claim = t.variant.claim(p)
    problem = build_problem(t, p, seed)
    _, cur = run_target(t, p, problem, trials=1, rng=seed_streams(seed, 2)[1])
    d = delta if delta is not None else (claim.delta if claim.delta is not None else 1e-6)
    return account_ledger(cur.ledger, d, claim.relation), claim, cur.ledger


def exceeds_claim(res: Any, claim: PrivacyClaim, eps_claimed: float, rtol: float = 1e-3) -> bool:
    """Whether the accounted ledger ``res`` breaks ``claim`` (beyond relative slack ``rtol``).

    A zCDP claim is compared in rho when the ledger has one (only unsampled Gaussians do),
    else in epsilon at the accounting delta.

    Examples
    --------
    >>> from dpverify.accounting import AccountingResult
    >>> res = AccountingResult(epsilon=0.9, delta=1e-6, relation="add_remove", rho=0.6)
    >>> exceeds_claim(res, PrivacyClaim(rho=0.5), eps_claimed=5.0)
    True
    """
    if claim.rho is not None and res.rho is not None:
        return bool(res.rho > claim.rho * (1.0 + rtol))
    return bool(res.epsilon > eps_claimed * (1.0 + rtol))


@check_kind("account")
def account_check(spec: CheckSpec, ctx: RunContext) -> Outcome:
    """epsilon_accountant <= epsilon_claimed (1 + rtol), else FAIL with both numbers."""
    rtol = float(spec.options.get("rtol", 1e-3))
    res, claim, ledger = account_target(spec.target, spec.params, seed=ctx.seed,
                                        scale=ctx.scale, delta=spec.options.get("delta"))
    eps_claimed = claimed_epsilon(claim, res.delta)
    eps_acc = res.epsilon
    violated = exceeds_claim(res, claim, eps_claimed, rtol)
    verdict = Verdict.FAIL if violated else Verdict.PASS
    ratio = eps_acc / eps_claimed if math.isfinite(eps_acc) else math.inf
    metrics = {
        "epsilon_accountant": eps_acc,
        "epsilon_claimed": eps_claimed,
        "delta": res.delta,
        "relation": res.relation,
        "ratio": ratio,
        "epsilon_pld": res.by_accountant.get("pld"),
        "epsilon_rdp": res.by_accountant.get("rdp"),
        "rho_accountant": res.rho,
        "rho_claimed": claim.rho,
        "releases": len(ledger),
        "gradient_evaluations": ledger.records_touched,
    }
    word = "exceeds" if violated else "is within"
    msg = (f"ledger epsilon {eps_acc:.4g} {word} the claimed {eps_claimed:.4g} "
           f"at delta={res.delta:g} ({len(ledger)} releases)")
    evidence: dict[str, Any] = {"events": [str(e) for e in res.events][:4]}

    # An adaptive run is guaranteed by its privacy filter, and its ledger is one sample of
    # what it may spend: the filter's budget must fit the claim, and so must every run.
    from dpverify import filters

    if claim.rho is not None:
        for f in filters.filters_of(ledger):
            g = filters.filter_guarantee(ledger, claim, f, rtol)
            metrics.update({k: g[k] for k in ("filter_budget", "filter_spent_max") if k in g})
            if g["violated"]:
                violated = True
                msg += f"; filter budget {g.get('filter_budget'):.4g} exceeds the claim"
        runs = int(spec.options.get("runs", 1))
        if runs > 1:
            over = filters.ledger_rho_over_runs(spec.target, dict(spec.params), runs=runs,
                                                seed=ctx.seed, scale=ctx.scale)
            worst = over.get("max")
            metrics["rho_accountant_max_over_runs"] = worst
            metrics["runs"] = runs
            evidence["rho_over_runs"] = over
            if worst is not None and worst > claim.rho * (1.0 + rtol):
                violated = True
                msg += f"; worst of {runs} runs spent rho {worst:.4g} > claimed {claim.rho:.4g}"
    verdict = Verdict.FAIL if violated else Verdict.PASS
    return Outcome(verdict, metrics, evidence, msg)
