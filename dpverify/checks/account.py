"""The ``account`` check: does the noise the ledger shows buy the epsilon the variant claims?"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpverify.accounting.accountant import account_ledger, claimed_epsilon, zcdp_of_ledger
from dpverify.checks.base import CheckKind, Options, Outcome, Result, doc, register_kind
from dpverify.core.claims import PrivacyClaim, Verdict
from dpverify.core.errors import InputError, check_delta, check_positive
from dpverify.core.prose import Statement, check_options, fmt, num
from dpverify.execution.executors import single_threaded_blas
from dpverify.execution.experiment import Experiment
from dpverify.execution.trials import seed_streams
from dpverify.mechanisms import filters


def account_target(
    target: str, params: Mapping[str, Any] | None = None, *, seed: int = 0,
    scale: str = "quick", delta: float | None = None,
) -> tuple[Any, PrivacyClaim, Any]:
    """Run ``target`` once and account its ledger at the claim's delta.

    Returns the :class:`~dpverify.accounting.accountant.AccountingResult`, the claim and the ledger.

    Examples
    --------
    >>> res, claim, ledger = account_target("noisy_gd:sound", {"T": 5})
    >>> abs(res.epsilon - claim.epsilon) < 1e-3
    True
    """
    return account_experiment(Experiment(target, params, seed=seed, scale=scale), delta)


def account_experiment(exp: Experiment, delta: float | None = None) -> tuple[Any, Any, Any]:
    """Run the experiment once and account its ledger (see :func:`account_target`)."""
    claim = exp.claim
    _, cur = exp.run(trials=1, rng=seed_streams(exp.seed, 2)[1])
    d = delta if delta is not None else (claim.delta if claim.delta is not None else 1e-6)
    return account_ledger(cur.ledger, d, claim.relation), claim, cur.ledger


def exceeds_claim(res: Any, claim: PrivacyClaim, eps_claimed: float, rtol: float = 1e-3) -> bool:
    """Whether the accounted ledger ``res`` breaks ``claim`` (beyond relative slack ``rtol``).

    A zCDP claim is compared in rho when the ledger has one (only unsampled Gaussians do),
    else in epsilon at the accounting delta.

    Examples
    --------
    >>> from dpverify.accounting.accountant import AccountingResult
    >>> res = AccountingResult(epsilon=0.9, delta=1e-6, relation="add_remove", rho=0.6)
    >>> exceeds_claim(res, PrivacyClaim(rho=0.5), eps_claimed=5.0)
    True
    """
    if claim.rho is not None and res.rho is not None:
        return bool(res.rho > claim.rho * (1.0 + rtol))
    return bool(res.epsilon > eps_claimed * (1.0 + rtol))


@dataclass(frozen=True)
class AccountOptions(Options):
    """``rtol``: relative slack on the claim; ``delta``: the delta to account at (default
    the claim's); ``runs``: how many runs of an adaptive (filtered) algorithm to account."""

    rtol: float = 1e-3
    delta: float | None = None
    runs: int = 1

    def validate(self) -> None:
        if not self.rtol >= 0:
            raise InputError(f"rtol must be >= 0, got {self.rtol!r}")
        if self.delta is not None:
            check_delta(self.delta)
        check_positive(self.runs, "runs", integer=True)


@dataclass(frozen=True)
class AccountMetrics(Result):
    """The ``account`` check's numbers: the ledger composed by dp_accounting, against the
    claim."""

    epsilon_accountant: float | None = doc("ε of the run's ledger at `delta` (PLD where it "
                                           "supports the events, else RDP)")
    epsilon_claimed: float | None = doc("the variant's claimed ε at `delta`")
    delta: float | None = doc("the δ the ledger is accounted at")
    relation: str | None = doc("the neighbouring relation (`add_remove`, `replace_one`)")
    ratio: float | None = doc("epsilon_accountant / epsilon_claimed")
    epsilon_pld: float | None = doc("ε by the PLD accountant (nan where it does not apply)")
    epsilon_rdp: float | None = doc("ε by the RDP accountant")
    rho_accountant: float | None = doc("zCDP ρ of the ledger (unsampled Gaussians only)")
    rho_claimed: float | None = doc("the claimed zCDP ρ, for a zCDP claim")
    releases: int | None = doc("noisy releases in the ledger")
    gradient_evaluations: int | None = doc("records the run touched")
    filter_budget: float | None = doc("the privacy filter's ρ budget (adaptive runs)")
    filter_spent_max: float | None = doc("the largest ρ the filter let a run spend")
    rho_accountant_max_over_runs: float | None = doc("the largest ρ over `runs` runs")
    runs: int | None = doc("runs accounted (option `runs` > 1)")


@register_kind
class AccountCheck(CheckKind):
    """epsilon_accountant <= epsilon_claimed (1 + rtol), else FAIL with both numbers."""

    name = "account"
    Options = AccountOptions
    Result = AccountMetrics
    column = "privacy"
    registered_only = True

    def run(self, exp: Experiment, options: AccountOptions) -> Outcome:
        return account_check(exp, options).typed(AccountMetrics)

    def statement(self, check: Mapping[str, Any], claim: str,
                  info: Mapping[str, Any] | None) -> Statement:
        r = self.Result.of(check)
        eps, claimed = num(r.epsilon_accountant), num(r.epsilon_claimed)
        pld = num(r.epsilon_pld)
        # The check reports PLD where it supports the events, else RDP.
        acc = "PLD" if pld is not None and not math.isnan(pld) else "RDP"
        if eps is not None and math.isinf(eps):
            spent = ("spends ε = ∞: some release leaves without noise (an exact answer, or "
                     "noise of scale 0)")
        else:
            ratio = num(r.ratio)
            spent = (f"spends ε = {fmt(eps)} at δ = {fmt(r.delta)}"
                     + (f" against the claimed ε = {fmt(claimed)} (ratio {fmt(ratio)})"
                        if ratio is not None else ""))
        measured = (f"The ledger of one run ({fmt(r.releases)} noisy releases), composed "
                    f"by dp_accounting's {acc} accountant, {spent}.")
        if r.rho_claimed is not None and r.rho_accountant is not None:
            measured += (f" In zCDP it spends ρ = {fmt(r.rho_accountant)} against the "
                         f"claimed ρ = {fmt(r.rho_claimed)}.")
        if r.rho_accountant_max_over_runs is not None:
            measured += (f" Over {fmt(r.runs)} runs the largest ρ spent is "
                         f"{fmt(r.rho_accountant_max_over_runs)}.")
        if r.filter_budget is not None:
            measured += f" Its privacy filter's budget is ρ = {fmt(r.filter_budget)}."
        conf = ("No sampling error: this is numerical accounting of the noise the run actually "
                "added, rounded pessimistically (an upper bound on what that noise costs).")
        short = (f"the ledger spends ε = {fmt(eps)} at δ = {fmt(r.delta)} against the "
                 f"claimed {fmt(claimed)} (exact accounting, no sampling error)")
        return Statement(f"The variant claims {claim}.", measured, conf, short)

    def command(self, check: Mapping[str, Any]) -> list[str] | None:
        opts = check_options(check)
        if set(opts) - {"delta"}:
            return None
        extra = ["--delta", repr(opts["delta"])] if "delta" in opts else []
        return ["dpverify", "account", str(check.get("target")), *extra]


def account_check(exp: Experiment, options: AccountOptions) -> Outcome:
    """The ``account`` check: the ledger's epsilon against the claim, filters included.

    Examples
    --------
    >>> account_check(Experiment("noisy_gd:sound", {"T": 5}), AccountOptions()).verdict
    <Verdict.PASS: 'PASS'>
    """
    rtol = options.rtol
    res, claim, ledger = account_experiment(exp, options.delta)
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

    if claim.rho is not None:
        for f in filters.filters_of(ledger):
            g = filters.filter_guarantee(ledger, claim, f, rtol)
            metrics.update({k: g[k] for k in ("filter_budget", "filter_spent_max") if k in g})
            if g["violated"]:
                violated = True
                msg += f"; filter budget {g.get('filter_budget'):.4g} exceeds the claim"
        runs = options.runs
        if runs > 1:
            over = rho_over_runs(exp, runs)
            worst = over.get("max")
            metrics["rho_accountant_max_over_runs"] = worst
            metrics["runs"] = runs
            evidence["rho_over_runs"] = over
            if worst is not None and worst > claim.rho * (1.0 + rtol):
                violated = True
                msg += f"; worst of {runs} runs spent rho {worst:.4g} > claimed {claim.rho:.4g}"
    verdict = Verdict.FAIL if violated else Verdict.PASS
    return Outcome(verdict, metrics, evidence, msg)


def rho_over_runs(exp: Experiment, runs: int = 20) -> dict[str, Any]:
    """The realised ledger rho of ``runs`` independent one-trial runs of the experiment.

    An adaptive algorithm's ledger differs from run to run; one run that spends more than
    its claim is a counterexample, while runs within it are only evidence. The data are
    drawn once from the seed; each run gets its own child stream. Runs are one trial each
    because a batched release charges every trial the largest per-trial cost
    (:func:`dpverify.mechanisms.filters.gaussian_per_trial`).

    Examples
    --------
    >>> out = rho_over_runs(Experiment("noisy_gd_004:sound"), runs=2)
    >>> out["exceeding"], round(out["max"], 6) <= out["rho_claimed"]
    (0, True)
    """
    runs = int(check_positive(runs, "runs", integer=True))
    claim = exp.claim
    if claim.rho is None:
        raise InputError(f"{exp.name} makes no zCDP claim")
    rhos, spent = [], []
    # One-trial runs make tiny matrix products, which a multi-threaded BLAS slows down by an
    # order of magnitude on a busy machine; one thread, as the block executors use.
    with single_threaded_blas():
        for ss in seed_streams(exp.seed, runs + 1)[1:]:
            _, cur = exp.run(trials=1, rng=ss)
            r = zcdp_of_ledger(cur.ledger)
            rhos.append(math.nan if r is None else float(r))
            filts = filters.filters_of(cur.ledger)
            spent.append(float(max(np.max(f.spent) for f in filts)) if filts else math.nan)
    arr = np.asarray(rhos)
    limit = claim.rho * (1.0 + 1e-3)
    return {"rho_claimed": claim.rho, "rho": arr.tolist(), "max": float(np.nanmax(arr)),
            "exceeding": int(np.sum(arr > limit)), "filter_spent": spent, "runs": runs}
