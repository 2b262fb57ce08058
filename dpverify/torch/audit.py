"""Audit a recorded training loop: ledger, findings, replayed sensitivity, white-box.

:func:`whitebox` runs the user's ``train`` function many times on each world of a
:class:`~dpverify.torch.pair.CanaryPair`, each run replayed as it goes
(:mod:`dpverify.torch.replay`), and stacks the runs into one curator-format ledger per
world (trial axis first, as :meth:`dpverify.core.curator.Curator.replay` would have made them).
The privacy loss of every transcript then comes from
:func:`dpverify.checks.audit.whitebox.transcript_privacy_loss`, and the lower bound from the same
statistics as :func:`dpverify.checks.audit.whitebox.audit_whitebox`: Clopper-Pearson on the loss
as a threshold test (valid with no assumption), the GDP bound where every release is an
unsampled Gaussian, or, where every release is a Poisson-sampled Gaussian (DP-SGD), the
parametric bound in the family the accountant assumes
(:func:`dpverify.stats.sampled_gaussian.bound_runs`), which reads only the losses and so holds on
replay records reduced to the plane of the worlds' difference.

:func:`assert_private` puts everything in one line of a test, and raises an
``AssertionError`` whose message carries the verdict, the evidence and the epsilon the
test could detect.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from dpverify.accounting.accountant import account_events, ledger_events
from dpverify.checks.audit.result import AuditResult
from dpverify.checks.audit.whitebox import gdp_mu_lower_bound_whitebox, transcript_privacy_loss
from dpverify.checks.sensitivity.replay import LedgerExcess
from dpverify.core.claims import Verdict
from dpverify.core.curator import AMPLIFIED, Ledger, Release, ReplayRecord
from dpverify.core.errors import InputError, check_delta, check_epsilon, check_positive
from dpverify.stats import audit_bounds as stats
from dpverify.stats import sampled_gaussian as sampled
from dpverify.stats.score_audit import ClopperPearson, ScoreAudit, Split
from dpverify.torch.findings import LoopFinding
from dpverify.torch.pair import CanaryPair
from dpverify.torch.record import ReplaySpec, record
from dpverify.torch.run import REPLAY_TOLERANCE, Run

Train = Callable[..., Any]
BOUNDS = ("auto", "cp", "gdp", "parametric")


def call_train(train: Train, data: Any, seed: int) -> Any:
    """``train(data, seed=seed)`` when ``train`` takes a ``seed``; else ``train(data)`` with
    torch's global generator seeded for the call and restored after it.

    Examples
    --------
    >>> call_train(lambda data: float(torch.rand(1)), None, 3) == call_train(
    ...     lambda data: float(torch.rand(1)), None, 3)
    True
    """
    try:
        takes_seed = "seed" in inspect.signature(train).parameters
    except (TypeError, ValueError):
        takes_seed = False
    if takes_seed:
        return train(data, seed=seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return train(data)


def recorded_run(train: Train, pair: CanaryPair, world: int, seed: int,
                 criterion: Any = None, trace: bool = False) -> Run:
    """One run of ``train`` on ``pair.world(world)``, recorded and replayed on the pair.

    Examples
    --------
    >>> from torch.utils.data import TensorDataset
    >>> from dpverify.torch.record import Mechanism, record_noise
    >>> def train(data):  # one noisy sum of the records, each clipped to norm 1
    ...     q = lambda x: (x / x.norm(dim=1, keepdim=True).clamp(min=1.0)).sum(0)
    ...     v = q(data.tensors[0])
    ...     record_noise(v, v + torch.randn(2), Mechanism(1.0, 1.0, clip=1.0, sampling="full"),
    ...                  batch=torch.arange(len(v)), query=q)
    >>> pair = CanaryPair.add(TensorDataset(torch.zeros(3, 2)), (torch.tensor([3.0, 4.0]),))
    >>> run = recorded_run(train, pair, 0, seed=0)
    >>> round(float(run.ledger.records[0].true_difference[0]), 5)  # clipped from 5 to 1
    1.0
    """
    with record(ReplaySpec(pair, world, criterion, seed), trace=trace) as rec:
        call_train(train, pair.world(world), seed)
    return rec.run


def stack_ledgers(ledgers: Sequence[Ledger]) -> Ledger:
    """Replayed ledgers of the same releases as one ledger with a leading trial axis.

    Examples
    --------
    >>> r = Release(0, "g", "gaussian", 1.0, "l2", 1.0, "poisson", 0.5, None, 4, 0, (3,))
    >>> z = np.zeros((1, 2))
    >>> one = Ledger(dataset_size=4)
    >>> one.append(r, ReplayRecord(r, z, z, z, np.array([True]), z))
    >>> L = stack_ledgers([one, one])
    >>> L.trials, L.records[0].value_D.shape
    (2, (2, 2))
    """
    first = ledgers[0]
    sig = [_structure(r) for r in first]
    out = Ledger(dataset_size=first.dataset_size, trials=sum(led.trials for led in ledgers))
    for i, rel in enumerate(first):
        for k, led in enumerate(ledgers):
            if len(led) != len(first) or _structure(led.releases[i]) != sig[i]:
                raise InputError(
                    f"run {k} released {len(led)} values, run 0 {len(first)}, or release {i} "
                    "differs in its declaration: a white-box audit needs every run to make "
                    "the same releases")
            if led.records[i].value_D is None:
                raise InputError(f"release {i} of run {k} was not replayed")
        stacked = replace(rel, touched=None)
        cols = {f: np.concatenate([getattr(led.records[i], f) for led in ledgers])
                for f in ("value_D", "value_D_prime", "value_out", "included", "answer")}
        out.append(stacked, ReplayRecord(stacked, **cols))
    return out


def _structure(r: Release) -> tuple[Any, ...]:
    """What of a release must not depend on the data: the rate only where it is accounted
    (an amplified sample's); a shuffled batch's share of the records follows the dataset's
    size, and the number of batches it makes shows in the number of releases."""
    rate = r.rate if r.sampling in AMPLIFIED else None
    return (r.name, r.mechanism, r.sensitivity, r.noise, r.sampling, rate)


def signature_difference(a: Ledger, b: Ledger) -> str | None:
    """How two runs' release sequences differ (``None`` when they do not), as
    :func:`dpverify.checks.sensitivity.check_invariance` compares them: what must not depend on
    the data.

    Examples
    --------
    >>> r = Release(0, "g", "gaussian", 1.0, "l2", 1.0, "poisson", 0.5, None, 4, 0, (3,))
    >>> signature_difference(Ledger([r]), Ledger([r, r]))
    '1 releases against 2'
    >>> s = [Release(0, "g", "gaussian", 1.0, "l2", 1.0, "shuffle", 2 / n, 2, n, 0, (3,))
    ...      for n in (40, 41)]  # a fixed batch's share of D and of D'
    >>> signature_difference(Ledger(s[:1]), Ledger(s[1:])) is None
    True
    """
    if len(a) != len(b):
        return f"{len(a)} releases against {len(b)}"
    for i, (r, s) in enumerate(zip(a, b, strict=True)):
        if _structure(r) != _structure(s):
            return (f"release {i}: noise {r.noise:.6g}, rate {r.rate:.6g} against noise "
                    f"{s.noise:.6g}, rate {s.rate:.6g}")
    return None


@dataclass(frozen=True)
class WhiteboxPlan:
    """How many runs, at which confidence, with which root seed; ``simulate``: re-execute
    a recorded Opacus run over stacked trials (:mod:`dpverify.torch.simulate`) instead of
    calling ``train`` once per trial (``None``: where the run allows it)."""

    trials: int = 200
    confidence: float = 0.95
    seed: int = 0
    select_fraction: float = 0.3
    criterion: Any = None
    simulate: bool | None = None
    block: int = 64  # simulated trials at a time
    device: str = "cpu"  # where the simulation runs
    bound: str = "auto"  # auto, cp, gdp or parametric (see whitebox)


def _replayed_ledgers(train: Train, pair: CanaryPair, plan: WhiteboxPlan,
                     firsts: tuple[Run, Run]) -> tuple[Ledger, Ledger]:
    """``plan.trials`` replayed runs of ``train`` on D and on D', stacked (the first of each
    world already made)."""
    seeds = np.random.SeedSequence(plan.seed).generate_state(2 * plan.trials, np.uint32)
    runs = [[firsts[w]] + [recorded_run(train, pair, w, int(seeds[2 * k + w]), plan.criterion)
                           for k in range(1, plan.trials)] for w in (0, 1)]
    first = runs[0][0]
    if plan.trials > 1 and all(np.array_equal(r.ledger.records[-1].answer,
                                              first.ledger.records[-1].answer)
                               for r in runs[0][1:]):
        raise InputError("every run of train released the same values: its randomness "
                         "does not follow the seed (take a `seed` argument, or draw from "
                         "torch's global generator)")
    return stack_ledgers([r.ledger for r in runs[0]]), stack_ledgers([r.ledger for r in runs[1]])


def _simulated_ledgers(pair: CanaryPair, plan: WhiteboxPlan, firsts: tuple[Run, Run]
                      ) -> tuple[Ledger, Ledger, dict[str, Any]]:
    """``plan.trials`` simulated runs per world, after checking that the simulation
    reproduces each world's recorded run."""
    from dpverify.torch.simulate import check_fidelity, simulate

    gaps = {f"world {w}": check_fidelity(firsts[w], pair, w) for w in (0, 1)}
    seeds = np.random.SeedSequence(plan.seed).generate_state(2, np.uint32)
    return (simulate(firsts[0], pair, 0, plan.trials, int(seeds[0]), plan.block, plan.device),
            simulate(firsts[1], pair, 1, plan.trials, int(seeds[1]), plan.block, plan.device),
            gaps)


def _trial_ledgers(train: Train, pair: CanaryPair, plan: WhiteboxPlan
                  ) -> tuple[Ledger, Ledger, Run, dict[str, Any]]:
    """The replayed ledgers of both worlds, simulated where allowed, else by runs."""
    firsts = tuple(recorded_run(train, pair, w, plan.seed + w, plan.criterion, trace=True)
                   for w in (0, 1))
    differs = signature_difference(firsts[0].ledger, firsts[1].ledger)
    if differs:
        raise InputError(f"the runs on D and on D' release different sequences ({differs}): "
                         "the transcript alone tells the datasets apart, and a white-box "
                         "audit compares like with like")
    how: dict[str, Any] = {"trials_by": "runs"}
    if plan.simulate is not False and all(r.model is not None for r in firsts):
        try:
            led_D, led_Dp, gaps = _simulated_ledgers(pair, plan, firsts)
            return led_D, led_Dp, firsts[0], {"trials_by": "simulation", "fidelity": gaps}
        except InputError as e:
            if plan.simulate:
                raise
            how["simulation_refused"] = str(e)
    elif plan.simulate:
        raise InputError("simulate=True needs a run recorded through Opacus's make_private")
    led_D, led_Dp = _replayed_ledgers(train, pair, plan, firsts)
    return led_D, led_Dp, firsts[0], how


def whitebox(train: Train, pair: CanaryPair, claim: tuple[float, float],
             plan: WhiteboxPlan = WhiteboxPlan()) -> AuditResult:
    """White-box epsilon lower bound of ``train`` on ``pair`` from ``plan.trials`` runs per
    world.

    ``epsilon_accountant`` is the executed ledger's epsilon (PLD) of the first run;
    ``details["epsilon_replayed"]`` the same ledger accounted with every release's
    declared sensitivity replaced by the largest true difference replayed on the pair:
    what a bound that reads the replayed sensitivities into the accountant's model (a
    parametric bound) approaches with many trials.

    Examples
    --------
    Three unsampled Gaussian sums, whose trade-off curve the GDP bound takes:

    >>> from torch.utils.data import TensorDataset
    >>> from dpverify.torch.record import Mechanism, record_noise
    >>> def train(data):
    ...     q = lambda x: (x / x.norm(dim=1, keepdim=True).clamp(min=1.0)).sum(0)
    ...     m = Mechanism(noise_std=3.0, sensitivity=1.0, clip=1.0, sampling="full")
    ...     for t in range(3):
    ...         v = q(data.tensors[0])
    ...         record_noise(v, v + 3.0 * torch.randn(2), m, batch=torch.arange(len(v)),
    ...                      query=q)
    >>> pair = CanaryPair.add(TensorDataset(torch.zeros(3, 2)), (torch.tensor([3.0, 4.0]),))
    >>> res = whitebox(train, pair, (2.0, 1e-5), WhiteboxPlan(trials=100))
    >>> res.bound, res.details["trials_by"], 0.5 < res.epsilon_lower / res.epsilon_accountant <= 1
    ('gdp', 'runs', True)
    """
    eps, delta = check_epsilon(claim[0]), check_delta(claim[1])
    plan = replace(plan, trials=int(check_positive(plan.trials, "trials", integer=True)))
    if plan.trials < 2:
        raise InputError(f"a white-box audit needs at least 2 runs per world, got {plan.trials}")
    led_D, led_Dp, first, how = _trial_ledgers(train, pair, plan)
    LD, VD, gD = transcript_privacy_loss(led_D)
    LP, VP, gP = transcript_privacy_loss(led_Dp)
    losses = {"loss_D": LD, "loss_D_prime": -LP, "label": pair.label or "canary",
              "canary_in_D": len(pair.D) > len(pair.D_prime),
              "V": np.concatenate([VD, VP]) if (gD and gP) else None}
    alpha = 1.0 - plan.confidence
    split = Split(plan.select_fraction)
    n_sel = split.sizes(plan.trials)[0]
    cp = split.bound([ScoreAudit(LD, -LP, losses["label"])], (ClopperPearson(),),
                     delta=delta, alpha=alpha)
    chosen, par = _choose_bound(plan.bound, gD and gP, first, losses, (alpha, delta))
    mu, method = gdp_mu(losses, alpha) if chosen == "gdp" else (None, None)
    lower = {"gdp": lambda: stats.epsilon_from_gdp(mu, delta), "cp": lambda: cp.epsilon,
             "parametric": lambda: par["epsilon"]}[chosen]()
    n_test = plan.trials - n_sel
    details = {
        "epsilon_lower_cp": cp.epsilon, "mu_lower": mu, "gdp_method": method,
        "epsilon_lower_parametric": par["epsilon"] if isinstance(par, dict) else None,
        "kappa_lower": par["kappa_lower"] if isinstance(par, dict) else None,
        "parametric": (f"{par['statistic']} statistic, {par['family'].steps} releases"
                       if isinstance(par, dict) else par),
        "epsilon_replayed": _replayed_epsilon(led_D, led_Dp, delta, first.relation),
        "detectable": float(stats.epsilon_lower_bound(0, n_test, 0, n_test, delta, alpha)),
        "releases": len(led_D), "runs_total": 2 * plan.trials, "pair": pair.label,
        "relation": first.relation, **how,
    }
    evidence = {"cp_test": cp.to_dict(),
                "loss_quantiles_D": np.quantile(LD, [0.01, 0.5, 0.99]).tolist(),
                "loss_quantiles_D_prime": np.quantile(-LP, [0.01, 0.5, 0.99]).tolist()}
    assumptions = {"gdp": ["GDP bound: every release an unsampled Gaussian"],
                   "parametric": [sampled.ASSUMPTION]}.get(chosen, [])
    res = AuditResult(getattr(train, "__name__", "train"), "whitebox", float(lower), eps,
                      pld_epsilon(first.ledger, delta, first.relation), delta,
                      plan.confidence, plan.trials, chosen, details, evidence, assumptions)
    if isinstance(par, dict) and chosen == "parametric":
        res.with_power(sampled.parametric_power(par["family"], plan.trials, alpha=alpha,
                                                delta=delta, epsilon=eps))
        details["detectable"] = res.epsilon_detectable
    return res


def _choose_bound(bound: str, gaussian: bool, first: Run, losses: dict[str, Any],
                  level: tuple[float, float]) -> tuple[str, dict[str, Any] | str]:
    """Which bound to report (``plan.bound``; ``auto``: GDP where every release is an
    unsampled Gaussian, else the Poisson-sampled Gaussian family where the ledger is one,
    else CP), and the family's bound or why it does not apply."""
    alpha, delta = level
    if bound not in BOUNDS:
        raise InputError(f"bound must be one of {BOUNDS}, got {bound!r}")
    par: dict[str, Any] | str = "not asked for"
    if bound in ("auto", "parametric") and not (gaussian and bound == "auto"):
        par = sampled.bound_runs(sampled.family_of(first.ledger, first.relation), [losses],
                                 alpha=alpha, delta=delta)
    if bound == "parametric" and isinstance(par, str):
        raise InputError(f"the parametric bound does not apply: {par}")
    if bound == "gdp" and not gaussian:
        raise InputError("the GDP bound needs every release to be an unsampled Gaussian")
    if bound != "auto":
        return bound, par
    if gaussian and delta > 0:
        return "gdp", par
    return ("cp" if isinstance(par, str) else "parametric"), par


#: Relative spread of the replayed squared sensitivities that float32 arithmetic leaves
#: between trials of a canary clipped to the same bound.
V_SPREAD = 1e-4


def gdp_mu(losses: dict[str, Any], alpha: float) -> tuple[float, str]:
    """mu lower bound of unsampled Gaussian transcripts, and the method used.

    Where the replayed squared sensitivities V agree across trials up to float32 rounding
    (:data:`V_SPREAD`), the spread of the losses bounds sqrt(mean V) (Cochran,
    :func:`~dpverify.stats.audit_bounds.gdp_mu_lower_bound_from_variance`), scaled by
    sqrt(min V / max V) so that it bounds every trial's mu; otherwise
    :func:`~dpverify.checks.audit.whitebox.gdp_mu_lower_bound_whitebox` decides.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> V = 0.09 * (1 + 1e-7 * rng.random(8000))
    >>> run = {"loss_D": rng.normal(0.045, 0.3, 4000), "loss_D_prime": rng.normal(-0.045, 0.3,
    ...        4000), "V": V}
    >>> mu, method = gdp_mu(run, 0.05)
    >>> method, 0.28 < mu < 0.3
    ('variance', True)
    """
    V = losses["V"]
    if V is not None and V.size and np.isfinite(V).all() and V.min() > 0 \
            and V.max() - V.min() <= V_SPREAD * V.max():
        mu = stats.gdp_mu_lower_bound_from_variance(losses["loss_D"], losses["loss_D_prime"],
                                                    alpha)
        return mu * math.sqrt(V.min() / V.max()), "variance"
    return gdp_mu_lower_bound_whitebox(losses, alpha)


def pld_epsilon(ledger: Ledger, delta: float, relation: str) -> float:
    """The ledger's epsilon by PLD alone (the RDP of sampled releases at large rates is
    slow, and the white-box report compares with PLD).

    Examples
    --------
    >>> r = Release(0, "g", "gaussian", 1.0, "l2", 1.0, "full", 1.0, 4, 4, 0, (3,))
    >>> round(pld_epsilon(Ledger([r], 4), 1e-5, "add_remove"), 3)
    4.377
    """
    events = tuple(ledger_events(ledger, relation, "pld"))
    try:
        hash(events)
    except TypeError:  # a composition of several events holds them in a list
        return account_events({"pld": list(events)}, delta, relation).epsilon
    return _pld_of_events(events, delta, relation)


@functools.lru_cache(maxsize=64)
def _pld_of_events(events: tuple[Any, ...], delta: float, relation: str) -> float:
    # Runs of one loop make the same events: each PLD is built once per process.
    return account_events({"pld": list(events)}, delta, relation).epsilon


def _ceil_digits(x: float, digits: int = 6) -> float:
    """``x`` rounded up to ``digits`` significant digits: replayed sensitivities that differ
    in float rounding only become one event for the accountant (one PLD, not one per step).

    Examples
    --------
    >>> _ceil_digits(0.99999987), _ceil_digits(0.5), _ceil_digits(0.0)
    (1.0, 0.5, 0.0)
    """
    if not (x > 0 and math.isfinite(x)):
        return x
    unit = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    return math.ceil(x / unit - 1e-9) * unit


def _replayed_epsilon(led_D: Ledger, led_Dp: Ledger, delta: float, relation: str) -> float:
    """The ledger's epsilon (PLD) with each release's sensitivity set to the largest true
    difference replayed in either world (its noise kept)."""
    rels = []
    for a, b in zip(led_D.records, led_Dp.records, strict=True):
        td = float(np.max(np.concatenate([a.true_difference, b.true_difference])))
        rels.append(replace(a.release, sensitivity=_ceil_digits(td), touched=None))
    return pld_epsilon(Ledger(rels, led_D.dataset_size), delta, relation)


# The test helper ---------------------------------------------------------------------------


@dataclass
class LoopAudit:
    """The verdict on a training loop against a claim, with the evidence behind it."""

    target: str
    claim: tuple[float, float]
    run: Run
    epsilon: float  # of the executed ledger (PLD)
    opacus: list[dict[str, Any]]
    findings: list[LoopFinding]
    sensitivity: LedgerExcess | None
    whitebox: AuditResult | None = None
    reasons: list[str] = field(default_factory=list)
    other: Run | None = None  # the run on D'

    def replay_error(self) -> float:
        """The largest relative gap between a replayed query and the value released."""
        errs = [r.replay_error() for r in (self.run, self.other) if r is not None]
        return max((e for e in errs if e is not None), default=0.0)

    @property
    def verdict(self) -> Verdict:
        if self.reasons:
            return Verdict.FAIL
        if not len(self.run.ledger) or self.replay_error() > REPLAY_TOLERANCE:
            return Verdict.INCONCLUSIVE
        return Verdict.PASS

    def message(self) -> str:
        eps, delta = self.claim
        lines = [f"{self.verdict.value}: ({eps:g}, {delta:g})-DP claimed for {self.target}"]
        lines.extend(f"  FAIL because {r}" for r in self.reasons)
        if self.verdict == Verdict.INCONCLUSIVE:
            lines.append("  INCONCLUSIVE: " + ("no noisy release was recorded" if not
                         len(self.run.ledger) else f"the replayed query differs from the "
                         f"released value by {self.replay_error():.3g} (relative)"))
        lines.append(f"  ledger: {len(self.run.ledger)} releases, epsilon {self.epsilon:.4g} "
                     f"(PLD) at delta {delta:g}" + "".join(
                         f"; Opacus's {c['opacus']} accountant {c['opacus_epsilon']:.4g} "
                         f"against the ledger's {c['ledger'].upper()} "
                         f"{c['ledger_epsilon']:.4g}"
                         for c in self.opacus))
        lines.extend(f"  {f}" for f in self.findings)
        s = self.sensitivity
        if s is not None:
            lines.append(f"  replayed sensitivity: worst {s.true_difference:.4g} / declared "
                         f"{s.declared} = {s.worst_ratio:.4g} at step {s.step}")
        w = self.whitebox
        if w is None:
            lines.append("  white-box: not run (trials=0): no empirical lower bound")
        else:
            d = w.details
            lines.append(f"  white-box: epsilon_lower {w.epsilon_lower:.4g} ({w.bound}, "
                         f"{w.trials} runs per world, confidence {w.confidence:g}); "
                         f"detectable up to {d['detectable']:.3g} with these runs; "
                         f"replayed-sensitivity epsilon {d['epsilon_replayed']:.4g}")
        if self.verdict == Verdict.PASS:
            lines.append("  PASS = no evidence of violation above what these checks detect")
        return "\n".join(lines)


def _worst(a: LedgerExcess | None, b: LedgerExcess | None) -> LedgerExcess | None:
    if a is None or b is None:
        return a or b
    return max((a, b), key=lambda e: (e.violations > 0, e.worst_ratio))


def audit_loop(train: Train, claim: tuple[float, float], pair: CanaryPair,
               plan: WhiteboxPlan = WhiteboxPlan(trials=0)) -> LoopAudit:
    """Record ``train`` on ``pair.D`` (replayed on the pair), read the ledger, and with
    ``plan.trials > 0`` run a white-box audit too."""
    eps, delta = check_epsilon(claim[0]), check_delta(claim[1])
    run = recorded_run(train, pair, 0, plan.seed, plan.criterion)
    other = recorded_run(train, pair, 1, plan.seed, plan.criterion)
    acc = run.epsilon(delta) if len(run.ledger) else None
    out = LoopAudit(getattr(train, "__name__", "train"), (eps, delta), run,
                    acc.epsilon if acc else math.nan,
                    run.compare_epsilon(delta) if acc else [], run.findings(),
                    _worst(run.sensitivity(), other.sensitivity()), other=other)
    out.reasons.extend(str(f) for f in out.findings if f.violation)
    differs = signature_difference(run.ledger, other.ledger)
    if differs:
        out.reasons.append(f"the run on D' releases a different sequence ({differs}): the "
                           "transcript's shape depends on the data")
    if acc is not None and acc.epsilon > eps * (1 + 1e-9):
        out.reasons.append(f"the executed ledger spends epsilon {acc.epsilon:.4g} > {eps:g}")
    s = out.sensitivity
    if s is not None and s.violations:
        out.reasons.append(f"a release moved {s.worst_ratio:.4g} x its declared sensitivity "
                           f"on the pair (step {s.step})")
    if plan.trials > 0 and not differs:
        out.whitebox = whitebox(train, pair, (eps, delta), plan)
        if out.whitebox.epsilon_lower > eps:
            out.reasons.append(f"the white-box lower bound {out.whitebox.epsilon_lower:.4g} "
                               f"exceeds the claim")
    return out


def assert_private(train: Train, claim: tuple[float, float],
                   pair: CanaryPair | Callable[[], CanaryPair], *, trials: int = 20,
                   seed: int = 0) -> LoopAudit:
    """Assert that ``train`` is private as claimed; the assertion message is the audit.

    ``train(data)`` (or ``train(data, seed=...)``) trains on a ``TensorDataset``;
    ``claim`` is ``(epsilon, delta)``; ``pair`` a :class:`CanaryPair` or a function
    returning one. The run on ``pair.D`` is recorded and replayed on the pair, and a
    white-box audit replays ``trials`` runs per world (0: none; the message says up to
    which epsilon that many runs can detect anything). Fails on a ledger finding, a ledger
    epsilon above the claim, a release that moves more than it declares, or a white-box
    lower bound above the claim.

    Examples
    --------
    >>> from torch.utils.data import TensorDataset
    >>> from dpverify.torch.record import Mechanism, record_noise
    >>> def clipped_sum(xb):  # each record clipped to norm 1
    ...     return (xb / xb.norm(dim=1, keepdim=True).clamp(min=1.0)).sum(0)
    >>> def train(data, query=clipped_sum):  # three noisy sums of the whole dataset
    ...     x = data.tensors[0]
    ...     m = Mechanism(noise_std=20.0, sensitivity=1.0, clip=1.0, sampling="full")
    ...     for t in range(3):
    ...         v = query(x)
    ...         record_noise(v, v + 20.0 * torch.randn(v.shape), m,
    ...                      batch=torch.arange(len(x)), query=query)
    >>> pair = CanaryPair.add(TensorDataset(torch.zeros(5, 3)), (torch.full((3,), 5.0),))
    >>> print(assert_private(train, claim=(1.0, 1e-5), pair=pair).message())
    ... # doctest: +ELLIPSIS
    PASS: (1, 1e-05)-DP claimed for train
      ledger: 3 releases, epsilon 0.29... (PLD) at delta 1e-05
      replayed sensitivity: worst 1 / declared 1.0 = 1 at step ...
      white-box: epsilon_lower ... (gdp, 20 runs per world, confidence 0.95); detectable ...
      PASS = no evidence of violation above what these checks detect
    >>> def coordinate_clip(xb):  # clipping each coordinate is not clipping the norm
    ...     return xb.clamp(-1.0, 1.0).sum(0)
    >>> assert_private(lambda data: train(data, coordinate_clip), (1.0, 1e-5), pair)
    Traceback (most recent call last):
    ...
    AssertionError: FAIL: (1, 1e-05)-DP claimed for <lambda>
      FAIL because a release moved 1.732 x its declared sensitivity on the pair (step 0)
    ...
    """
    if not isinstance(pair, CanaryPair):
        pair = pair()
    if not isinstance(pair, CanaryPair):
        raise InputError(f"pair must be a CanaryPair or return one, got {type(pair).__name__}")
    audit = audit_loop(train, claim, pair, WhiteboxPlan(trials=int(trials), seed=seed))
    if audit.verdict != Verdict.PASS:
        raise AssertionError(audit.message())
    return audit
