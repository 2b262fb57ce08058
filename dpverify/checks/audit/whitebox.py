"""White-box audit: the exact privacy loss of every transcript, from replay on neighbours.

Threat model (the strongest the accountants consider): the adversary sees every noisy
release and all sampling randomness except the target record's own inclusion. A
registered curator algorithm is replayed on the pair (D, D') (:meth:`Curator.replay`):
the algorithm receives D's noisy answers, and every query is evaluated on both worlds at
the same released history. Each release r then has a known density under each world:

* unsampled Gaussian: a ~ N(q_r(D), sigma_r^2 I), so its loss is
  (||a - q(D')||^2 - ||a - q(D)||^2) / (2 sigma^2);
* unsampled Laplace: (||a - q(D')||_1 - ||a - q(D)||_1) / b;
* amplified sampling (Poisson, uniform): the target record is in the batch with
  probability q given the other records' draw, so the release is the mixture
  (1 - q) p(a; q_out) + q p(a; q_in) in each world (q_in with the record forced in,
  q_out with it left out; under add/remove the world without the record has
  q_in = q_out). This is exact for Poisson sampling and the usual approximation for the
  uniform schemes;
* exponential selection of index j with probability proportional to exp(c u_j),
  c = eps / (2 Delta) (McSherry and Talwar 2007): its loss is
  c (u_D(j) - u_D'(j)) - logsumexp(c u_D) + logsumexp(c u_D'), scores the curator never
  selects (-inf, NaN) left out of both normalisers as they are of the selection;
* ``exact`` releases, and any release whose values are not finite: loss 0 where both
  worlds agree, +inf where they differ (one answer separates them).

The transcript's loss L = log p_D(a_1..a_T) / p_D'(a_1..a_T) is the sum over releases:
the chain rule holds under adaptive composition because a later query depends on the
data only through earlier released answers, which replay keeps common to both worlds.

Samples of L under D come from replaying (D, D'). Samples under D' cannot be had by
shifting D's answers (later queries would have seen the wrong history), so a second
replay runs on the swapped pair (D', D), whose curator releases D''s answers; its loss
log p_D' / p_D is negated. With L under both worlds:

* the ``cp`` bound uses L as the (Neyman-Pearson optimal) score of a threshold test,
  thresholds chosen on a selection split, Clopper-Pearson on the rest: valid with no
  assumption at all, even if L were not the exact loss;
* the ``gdp`` bound reads mu off the loss samples, valid when the trade-off curve is
  Gaussian: every release an unsampled Gaussian (Nasr et al. 2023, "Tight auditing of DP
  ML", Section 4). When the canary's replayed sensitivity is the same in every trial (a
  linear-loss canary), L is exactly N(+-mu^2/2, mu^2) and the spread of L bounds mu
  (:func:`~dpverify.stats.audit_bounds.gdp_mu_lower_bound_from_variance`); otherwise the means
  do, conservatively. ``auto`` uses GDP exactly when every release is an unsampled
  Gaussian;
* the ``parametric`` bound (:mod:`dpverify.stats.sampled_gaussian`) fits the family the accountant
  assumes for Poisson-sampled Gaussian releases (DP-SGD) to the loss samples, and states
  that assumption; ``auto`` uses it where every release is a Poisson-sampled or
  full-batch Gaussian under add/remove, and ``cp`` elsewhere;
* the empirical privacy profile delta(eps) = E_D[(1 - e^(eps - L))_+] is reported as a
  point estimate.

Shuffled (partition) batches are replayed with the batch assignment fixed, i.e. visible
to the adversary: the analysis an accountant applies to partitions (no amplification).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.special

from dpverify.checks.audit.result import AuditResult
from dpverify.checks.audit.targets import (
    AUTO_NEIGHBOURS,
    SEED_SAMPLES,
    RunOptions,
    accountant_epsilon,
    make_pairs,
    plain_ledger,
    resolve_neighbours,
)
from dpverify.core.curator import AMPLIFIED, Ledger, ReplayRecord
from dpverify.core.data import NeighbourPair
from dpverify.core.errors import InputError
from dpverify.execution.trials import (
    DEFAULT_BLOCK,
    BlockPlan,
    map_blocks,
    run_target,
    seed_streams,
)
from dpverify.stats import audit_bounds as stats
from dpverify.stats import sampled_gaussian as sampled
from dpverify.stats.power import (
    DETECT_PROBABILITY,
    Power,
    detectable_gdp_mean,
    detectable_gdp_variance,
    threshold_test_power,
)
from dpverify.stats.score_audit import (
    ClopperPearson,
    SampledGaussian,
    ScoreAudit,
    Split,
    statistics_of,
)

if TYPE_CHECKING:
    from dpverify.execution.executors import Execution

BOUNDS = ("auto", "cp", "gdp", "parametric")
GDP_ASSUMPTION = ("GDP bound: assumes the transcript's trade-off curve is Gaussian (every "
                  "release an unsampled Gaussian and the canary's sensitivity the same in "
                  "every trial)")


def _sqnorm(a: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, a)


def release_privacy_loss(rec: ReplayRecord) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """Per-trial privacy loss log p_D(a) / p_D'(a) of one replayed release.

    Returns the loss, the squared Gaussian sensitivity ||q(D) - q(D')||^2 / sigma^2 of an
    unsampled Gaussian release (else ``None``), and whether the release is an unsampled
    Gaussian (or leaves the pair indistinguishable).

    Examples
    --------
    >>> from dpverify.core.curator import Curator
    >>> from dpverify.core.data import Dataset, NeighbourPair
    >>> D = Dataset(np.eye(2), np.zeros(2))
    >>> cur = Curator.replay(NeighbourPair.add_remove(D, 0), trials=3, rng=0, keep_answers=True)
    >>> _ = cur.gaussian("s", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=2.0)
    >>> loss, m2, gaussian = release_privacy_loss(cur.ledger.records[0])
    >>> loss.shape, m2.tolist(), gaussian
    ((3,), [0.25, 0.25, 0.25], True)
    """
    rel = rec.release
    if rec.value_D is None or rec.value_D_prime is None:
        raise InputError(f"release {rel.name!r} was not replayed on a neighbouring pair")
    if rec.answer is None:
        raise InputError(f"release {rel.name!r} kept no answer: replay with keep_answers=True")
    a = np.asarray(rec.answer, dtype=float)
    vD = np.asarray(rec.value_D, dtype=float)
    vDp = np.asarray(rec.value_D_prime, dtype=float)
    K = a.shape[0]
    same = np.all((vD == vDp) | (np.isnan(vD) & np.isnan(vDp)), axis=1)
    # A record drawn with probability 1 is simply in the batch: no mixture.
    amplified = rel.sampling in AMPLIFIED and rec.value_out is not None and rel.rate < 1
    vout = np.asarray(rec.value_out, dtype=float) if amplified else None
    finite = np.isfinite(vD).all(axis=1) & np.isfinite(vDp).all(axis=1) & np.isfinite(a).all(1)
    if vout is not None:
        finite &= np.isfinite(vout).all(axis=1)
    loss = np.where(same, 0.0, np.inf)  # exact answers, non-finite values
    if rel.mechanism == "exponential":
        return np.where(same, 0.0, exponential_privacy_loss(rec)), None, bool(np.all(same))
    noisy = rel.mechanism in ("gaussian", "laplace") and rel.noise > 0
    gaussian_ok = bool(np.all(same)) or (rel.mechanism == "gaussian" and noisy
                                          and not amplified and bool(np.all(finite)))
    m2: np.ndarray | None = None
    if not noisy:
        return loss, None, gaussian_ok
    ok = finite & ~same
    s = rel.noise
    if rel.mechanism == "gaussian":
        def logp(v: np.ndarray) -> np.ndarray:
            return -_sqnorm(a - v) / (2.0 * s * s)
    else:
        def logp(v: np.ndarray) -> np.ndarray:
            return -np.sum(np.abs(a - v), axis=1) / s

    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if amplified:
            q = float(rel.rate)
            lq, l1q = math.log(q) if q > 0 else -math.inf, math.log1p(-q) if q < 1 else -math.inf
            lo = logp(vout)
            val = np.logaddexp(l1q + lo, lq + logp(vD)) - np.logaddexp(l1q + lo, lq + logp(vDp))
        elif rel.mechanism == "gaussian":
            # ||a - q(D')||^2 - ||a - q(D)||^2 = 2 <a - q(D), Delta> + ||Delta||^2, stably
            delta_v = vD - vDp
            val = (2.0 * np.einsum("ij,ij->i", a - vD, delta_v) + _sqnorm(delta_v)) / (2 * s * s)
            m2 = np.where(finite, _sqnorm(delta_v) / (s * s), np.inf)
        else:
            val = (np.sum(np.abs(a - vDp), axis=1) - np.sum(np.abs(a - vD), axis=1)) / s
    loss = np.where(ok, val, loss)
    if m2 is None and rel.mechanism == "gaussian" and not amplified:
        m2 = np.zeros(K)
    if m2 is not None:
        m2 = np.where(same, 0.0, m2)
    return loss, m2, gaussian_ok


def exponential_privacy_loss(rec: ReplayRecord) -> np.ndarray:
    """Per-trial loss log P_D(j) / P_D'(j) of a replayed exponential selection j.

    Examples
    --------
    >>> from dpverify.core.curator import Curator
    >>> from dpverify.core.data import Dataset, NeighbourPair
    >>> D = Dataset(np.zeros((2, 1)), np.zeros(2))
    >>> pair = NeighbourPair.replace_one(D, 0, np.ones(1), 0.0)
    >>> cur = Curator.replay(pair, trials=2, rng=0, keep_answers=True)
    >>> j = cur.exponential("pick", lambda X, y, w: np.concatenate([w @ X, 0 * (w @ X)], 1),
    ...                     sensitivity=1.0, epsilon=2.0)
    >>> loss = exponential_privacy_loss(cur.ledger.records[0])
    >>> bool(np.allclose(loss, np.where(j == 0, -1.0, 0.0) + np.log((1 + np.e) / 2)))
    True
    """
    c = 1.0 / rec.release.noise  # the Gumbel scale is 2 Delta / eps
    j = np.asarray(rec.answer, dtype=float)[:, 0].astype(np.int64)
    with np.errstate(invalid="ignore"):
        uD = np.where(np.isnan(rec.value_D), -np.inf, c * np.asarray(rec.value_D, float))
        uDp = np.where(np.isnan(rec.value_D_prime), -np.inf,
                       c * np.asarray(rec.value_D_prime, float))
        rows = np.arange(j.shape[0])
        # exp(c u(j)) / sum_k exp(c u_k) in each world; logsumexp keeps large c finite.
        logp_D = uD[rows, j] - scipy.special.logsumexp(uD, axis=1)
        logp_Dp = uDp[rows, j] - scipy.special.logsumexp(uDp, axis=1)
        loss = logp_D - logp_Dp
    return np.where(np.isnan(loss), np.inf, loss)


def transcript_privacy_loss(ledger: Ledger) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """Per-trial privacy loss of a whole replayed transcript: the sum over its releases.

    Returns the loss, the summed squared Gaussian sensitivities (``None`` when some
    release is not an unsampled Gaussian) and whether every release is an unsampled
    Gaussian (the condition under which the GDP bound is exact).

    Examples
    --------
    >>> from dpverify.core.curator import Curator
    >>> from dpverify.core.data import Dataset, NeighbourPair
    >>> D = Dataset(np.eye(2), np.zeros(2))
    >>> cur = Curator.replay(NeighbourPair.add_remove(D, 0), trials=2, rng=0, keep_answers=True)
    >>> for _ in range(4):
    ...     _ = cur.gaussian("s", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=2.0)
    >>> L, V, gaussian = transcript_privacy_loss(cur.ledger)
    >>> V.tolist(), gaussian
    ([1.0, 1.0], True)
    """
    total: np.ndarray | None = None
    V: np.ndarray | None = None
    all_gaussian = True
    for rec in ledger.records:
        loss, m2, g = release_privacy_loss(rec)
        total = loss if total is None else total + loss
        all_gaussian &= g
        if m2 is not None and all_gaussian:
            V = m2 if V is None else V + m2
    if total is None:
        return np.zeros(ledger.trials), np.zeros(ledger.trials), True
    if not all_gaussian:
        V = None
    elif V is None:
        V = np.zeros_like(total)
    return total, V, all_gaussian


def swapped(pair: NeighbourPair) -> NeighbourPair:
    """The pair with its two worlds exchanged (same relation and index).

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> p = swapped(NeighbourPair.add_remove(Dataset(np.eye(3), np.zeros(3)), 1))
    >>> p.D.n, p.D_prime.n, p.index
    (2, 3, 1)
    """
    return NeighbourPair(pair.D_prime, pair.D, pair.relation, pair.index, pair.label)


def replay_losses(
    setup: Any, pair: NeighbourPair, trials: int, seed: np.random.SeedSequence,
    block_size: int | None = None, execution: Execution | None = None,
) -> dict[str, Any]:
    """Privacy-loss samples of ``trials`` transcripts under D and under D' (seeded blocks).

    Returns ``loss_D`` (log p_D / p_D' of runs on D), ``loss_D_prime`` (the same ratio on
    runs on D', from the swapped replay), ``V`` (replayed squared Gaussian sensitivities,
    or ``None``), ``gaussian`` (every release an unsampled Gaussian) and ``releases``.

    Examples
    --------
    >>> from dpverify.checks.audit.targets import make_pairs, prepare
    >>> s = prepare("noisy_gd:sound", params={"T": 2, "n": 20})
    >>> res = replay_losses(s, make_pairs(s, "fresh_direction")[0].pair, 8,
    ...                     np.random.SeedSequence(0))
    >>> res["loss_D"].shape, res["gaussian"], res["releases"]
    ((8,), True, 2)
    """
    t, p, problem = setup.target, setup.params, setup.problem
    other = swapped(pair)

    def block(ss: np.random.SeedSequence, k: int, _: int) -> tuple[Any, ...]:
        sD, sDp = ss.spawn(2)
        _, cur = run_target(t, p, problem, trials=k, rng=sD, data=pair,
                            backend=setup.backend, keep_answers=True)
        LD, VD, gD = transcript_privacy_loss(cur.ledger)
        _, cur2 = run_target(t, p, problem, trials=k, rng=sDp, data=other,
                             backend=setup.backend, keep_answers=True)
        LP, VP, gP = transcript_privacy_loss(cur2.ledger)
        return LD, -LP, VD, VP, gD and gP, len(cur.ledger)

    parts = map_blocks(block, trials, seed=seed,
                       plan=BlockPlan(int(block_size or DEFAULT_BLOCK), execution))
    gaussian = all(b[4] for b in parts)
    V = (np.concatenate([np.concatenate([b[2], b[3]]) for b in parts]) if gaussian else None)
    return {
        "loss_D": np.concatenate([b[0] for b in parts]),
        "loss_D_prime": np.concatenate([b[1] for b in parts]),
        "V": V,
        "gaussian": gaussian,
        "releases": parts[0][5],
    }


def gdp_mu_lower_bound_whitebox(run: Mapping[str, Any], alpha: float) -> tuple[float, str]:
    """mu lower bound from one pair's loss samples, and the method used.

    By their spread when every trial's replayed sensitivity is the same (the loss is then
    exactly Gaussian with variance mu^2), else by their means with a variance-robust
    standard error (conservative when the sensitivity varies from trial to trial).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> run = {"loss_D": rng.normal(0.5, 1, 4000), "loss_D_prime": rng.normal(-0.5, 1, 4000),
    ...        "V": np.ones(8000)}
    >>> mu, method = gdp_mu_lower_bound_whitebox(run, 0.05)
    >>> method, 0.95 < mu < 1.0
    ('variance', True)
    """
    LD, LDp, V = run["loss_D"], run["loss_D_prime"], run["V"]
    if V is not None and V.size and np.isfinite(V).all() and V.max() > 0 \
            and V.max() - V.min() <= 1e-9 * V.max():
        return stats.gdp_mu_lower_bound_from_variance(LD, LDp, alpha), "variance"
    return stats.gdp_mu_lower_bound_from_losses(LD, LDp, alpha), "mean"


@dataclass(frozen=True)
class WhiteboxBound:
    """How a white-box audit bounds epsilon from its loss samples.

    ``alpha`` the error level, ``bound`` ``auto``/``cp``/``gdp``/``parametric``,
    ``select_fraction`` the share of transcripts choosing the CP threshold,
    ``probability`` the detection probability of ``epsilon_detectable`` (``None``: not
    computed, for repeated self-tests).

    Examples
    --------
    >>> WhiteboxBound(0.05, "parametric").bound
    'parametric'
    """

    alpha: float
    bound: Any = "auto"
    select_fraction: float = 0.3
    probability: float | None = DETECT_PROBABILITY

    def __post_init__(self) -> None:
        if not isinstance(self.bound, str):
            statistics_of(self.bound)
        elif self.bound not in BOUNDS:
            raise InputError(f"bound must be one of {BOUNDS}, got {self.bound!r}")
        if not 0.0 < float(self.select_fraction) < 1.0:
            raise InputError(f"select_fraction must be in (0, 1), got {self.select_fraction!r}")


def whitebox_pairs(setup: Any, neighbours: str | Sequence[str]) -> list[Any]:
    """The audit's neighbouring pairs, each a NeighbourPair of Datasets.

    Examples
    --------
    >>> from dpverify.checks.audit.targets import prepare
    >>> s = prepare("noisy_gd:sound", params={"T": 2, "n": 20})
    >>> [p.label for p in whitebox_pairs(s, "worst_case,outlier")]
    ['worst_case', 'outlier']
    """
    if not setup.registered:
        raise InputError(f"a white-box audit replays a registered curator algorithm; "
                         f"{setup.name!r} is a callable (use mode blackbox or onerun)")
    pairs = make_pairs(setup, resolve_neighbours(setup, neighbours))
    for pr in pairs:
        if pr.pair is None:
            raise InputError(f"neighbours {pr.label!r} did not give two datasets; a white-box "
                             "audit needs a NeighbourPair of Datasets")
    return pairs


def collect_runs(setup: Any, pairs: list[Any], trials: int, seeds: Sequence[Any],
                 block_size: int | None = None, execution: Execution | None = None
                 ) -> list[dict[str, Any]]:
    """Replayed losses of ``trials`` transcripts per world for each pair (see replay_losses).

    Examples
    --------
    >>> from dpverify.checks.audit.targets import prepare
    >>> s = prepare("noisy_gd:sound", params={"T": 2, "n": 20})
    >>> runs = collect_runs(s, whitebox_pairs(s, "worst_case"), 4, [np.random.SeedSequence(0)])
    >>> runs[0]["loss_D"].shape, runs[0]["canary_in_D"]
    ((4,), True)
    """
    runs = []
    for pr, ss in zip(pairs, seeds, strict=True):
        res = replay_losses(setup, pr.pair, trials, ss, block_size, execution)
        res["label"] = pr.label
        res["canary_in_D"] = pr.pair.D.n > pr.pair.D_prime.n
        runs.append(res)
    return runs


def merge_runs(old: list[dict[str, Any]] | None, new: list[dict[str, Any]]
               ) -> list[dict[str, Any]]:
    """Each pair's runs so far followed by its new ones.

    Examples
    --------
    >>> a = [{"loss_D": np.zeros(2), "loss_D_prime": np.zeros(2), "V": None,
    ...       "gaussian": False, "releases": 3, "label": "p", "canary_in_D": True}]
    >>> merge_runs(a, a)[0]["loss_D"].shape
    (4,)
    """
    if old is None:
        return new
    out = []
    for a, b in zip(old, new, strict=True):
        m = dict(a)
        m["loss_D"] = np.concatenate([a["loss_D"], b["loss_D"]])
        m["loss_D_prime"] = np.concatenate([a["loss_D_prime"], b["loss_D_prime"]])
        m["gaussian"] = a["gaussian"] and b["gaussian"]
        m["V"] = (np.concatenate([a["V"], b["V"]])
                  if m["gaussian"] and a["V"] is not None and b["V"] is not None else None)
        out.append(m)
    return out


@dataclass(frozen=True)
class WhiteBoxOptions(RunOptions):
    """The options of a white-box audit (those of :class:`~dpverify.checks.audit.targets.
    RunOptions` and these).

    neighbours
        As for :class:`~dpverify.checks.audit.blackbox.BlackBoxOptions`.
    trials
        Transcripts replayed under each world of each pair (2 x trials runs per pair).
    bound
        ``"auto"`` (GDP where every release is an unsampled Gaussian, the parametric
        sampled-Gaussian bound where every release is a Poisson-sampled or full-batch
        Gaussian under add/remove, else CP), ``"cp"``, ``"gdp"`` or ``"parametric"``
        (forced; the report carries the assumption), or a counts statistic of
        :mod:`dpverify.stats.score_audit` bounding the loss's threshold test in place of
        Clopper-Pearson.
    select_fraction
        Share of the transcripts used to choose the threshold.

    Examples
    --------
    >>> WhiteBoxOptions(bound="exact")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: bound must be one of (...), got 'exact'
    """

    trials: int = 5000
    neighbours: str | Sequence[str] = AUTO_NEIGHBOURS
    bound: Any = "auto"
    select_fraction: float = 0.3

    def __post_init__(self) -> None:
        super().__post_init__()
        self.how()  # checks bound and select_fraction

    def how(self, alpha: float | None = None) -> WhiteboxBound:
        """How the losses are bounded, at ``alpha`` (default: 1 - confidence)."""
        return WhiteboxBound(self.alpha if alpha is None else alpha, self.bound,
                             self.select_fraction, self.detect_probability)


def audit_whitebox(target: str, options: WhiteBoxOptions | None = None) -> AuditResult:
    """White-box epsilon lower bound of a registered curator algorithm ``target``
    (``name`` or ``name:variant``; it must run through the curator).

    Examples
    --------
    >>> r = audit_whitebox("noisy_gd:sound", WhiteBoxOptions(
    ...     params={"T": 5, "n": 50, "loss": "linear"}, trials=1000))
    >>> r.bound, r.verdict.value, 0.8 < r.tightness <= 1.0, r.epsilon_detectable < 1.2
    ('gdp', 'PASS', True, True)
    """
    o = options or WhiteBoxOptions()
    setup = o.prepare(target)
    pairs = whitebox_pairs(setup, o.neighbours)
    sample_root = seed_streams(o.seed, SEED_SAMPLES + 1)[SEED_SAMPLES]
    runs = collect_runs(setup, pairs, o.trials, seed_streams(sample_root, len(pairs)),
                        o.block_size, o.execution)
    return whitebox_result(setup, runs, o.how(), o.accountant)


def _gdp(runs: list[dict[str, Any]], alpha: float) -> tuple[float, str, str]:
    """Best pair's GDP mu lower bound (Bonferroni over pairs), its pair and method."""
    best: tuple[float, str, str] | None = None
    for r in runs:
        mu, method = gdp_mu_lower_bound_whitebox(r, alpha / len(runs))
        if best is None or mu > best[0]:
            best = (mu, r["label"], method)
    assert best is not None
    return best


def _parametric(setup: Any, runs: list[dict[str, Any]], alpha: float
                ) -> dict[str, Any] | str:
    """The sampled-Gaussian family's bound (Bonferroni over pairs), or why it does not apply."""
    family = sampled.family_of(plain_ledger(setup), setup.relation)
    if isinstance(family, str):
        return family
    return SampledGaussian(family).bound_runs(runs, alpha=alpha, delta=setup.delta)


def _choose(bound: Any, gdp_valid: bool, par: dict[str, Any] | str, delta: float) -> str:
    if not isinstance(bound, str):
        return "+".join(s.name for s in statistics_of(bound))
    if bound == "parametric" and isinstance(par, str):
        raise InputError(f"the parametric bound does not apply: {par}")
    if bound != "auto":
        return bound
    if gdp_valid and delta > 0:  # no mu > 0 of GDP has a finite pure-DP epsilon
        return "gdp"
    return "cp" if isinstance(par, str) else "parametric"


def whitebox_result(setup: Any, runs: list[dict[str, Any]], how: WhiteboxBound,
                    accountant: bool = True) -> AuditResult:
    """The white-box audit's result from the replayed losses of every pair.

    Examples
    --------
    >>> from dpverify.checks.audit.targets import prepare
    >>> s = prepare("noisy_gd:sound", params={"T": 2, "n": 20, "loss": "linear"})
    >>> runs = collect_runs(s, whitebox_pairs(s, "worst_case"), 200,
    ...                     [np.random.SeedSequence(0)])
    >>> r = whitebox_result(s, runs, WhiteboxBound(0.05), accountant=False)
    >>> r.bound, r.epsilon_lower <= r.epsilon_claimed < r.epsilon_detectable
    ('gdp', True)
    """
    alpha = how.alpha
    n = int(runs[0]["loss_D"].size)
    split = Split(how.select_fraction)
    n_sel = split.sizes(n)[0]
    audits = [ScoreAudit(r["loss_D"], r["loss_D_prime"], r["label"]) for r in runs]
    counted = ClopperPearson() if isinstance(how.bound, str) else how.bound
    cp = split.bound(audits, statistics_of(counted), delta=setup.delta, alpha=alpha)
    gdp_valid = all(r["gaussian"] for r in runs)
    if gdp_valid:
        par: dict[str, Any] | str = "not tried: every release is an unsampled Gaussian"
    elif how.bound in ("auto", "parametric"):
        par = _parametric(setup, runs, alpha)
    else:
        par = "not asked for"
    chosen = _choose(how.bound, gdp_valid, par, setup.delta)
    gdp_eps = gdp_mu = gdp_pair = gdp_method = None
    if chosen == "gdp" or gdp_valid:
        gdp_mu, gdp_pair, gdp_method = _gdp(runs, alpha)
        gdp_eps = (stats.epsilon_from_gdp(gdp_mu, setup.delta) if setup.delta > 0
                   else (math.inf if gdp_mu > 0 else 0.0))
    if chosen == "gdp":
        eps, best = gdp_eps, next(r for r in runs if r["label"] == gdp_pair)
    elif chosen == "parametric":
        assert isinstance(par, dict)
        eps, best = par["epsilon"], next(r for r in runs if r["label"] == par["pair"])
    else:
        eps, best = cp.epsilon, runs[cp.candidate]
    details = _details(setup, runs, best, cp, (gdp_eps, gdp_mu, gdp_valid, gdp_method), par)
    eps_acc, acc_note = (accountant_epsilon(setup) if accountant
                         else (None, "not computed (accountant=False)"))
    assumptions = {"gdp": [GDP_ASSUMPTION], "parametric": [sampled.ASSUMPTION]}.get(chosen, [])
    if chosen == "gdp" and not gdp_valid:
        assumptions.append("GDP forced although some release is not an unsampled Gaussian")
    res = AuditResult(setup.name, "whitebox", float(eps), setup.epsilon_claimed, eps_acc,
                      setup.delta, 1.0 - alpha, n, chosen, details,
                      _evidence(setup, best, cp, acc_note), assumptions)
    if how.probability is None:
        return res
    return res.with_power(_power(chosen, setup, how, (n, n_sel, len(runs)),
                                 gdp_method, par, cp))


def _power(chosen: str, setup: Any, how: WhiteboxBound, sizes: tuple[int, int, int],
           gdp_method: str | None, par: dict[str, Any] | str,
           cp: stats.ThresholdBound) -> Power:
    """What the white-box bound used catches, with its sizes (runs, selection, pairs)."""
    n, n_sel, pairs = sizes
    kw = {"alpha": how.alpha / pairs, "delta": setup.delta,
          "epsilon": setup.epsilon_claimed, "probability": how.probability}
    if chosen == "gdp" and gdp_method == "variance":
        return detectable_gdp_variance(2 * n - 2, **kw)
    if chosen == "gdp":
        return detectable_gdp_mean(n, n, **kw)
    if chosen == "parametric":
        assert isinstance(par, dict)
        return sampled.parametric_power(par["family"], n, **kw)
    return threshold_test_power(cp.n_pos, cp.n_neg, alpha=cp.alpha, delta=setup.delta,
                                epsilon=setup.epsilon_claimed, method=cp.method,
                                probability=how.probability, selection=(n_sel, n_sel))


def _details(setup: Any, runs: list[dict[str, Any]], best: dict[str, Any],
             cp: stats.ThresholdBound, gdp: tuple[Any, ...], par: dict[str, Any] | str
             ) -> dict[str, Any]:
    gdp_eps, gdp_mu, gdp_valid, gdp_method = gdp
    V, LD = best["V"], best["loss_D"]
    finite = np.isfinite(LD)
    n = int(LD.size)
    return {
        "epsilon_lower_cp": cp.epsilon,
        "epsilon_lower_gdp": gdp_eps,
        "mu_lower": gdp_mu,
        "gdp_valid": gdp_valid,
        "gdp_method": gdp_method,
        "epsilon_lower_parametric": par["epsilon"] if isinstance(par, dict) else None,
        "kappa_lower": par["kappa_lower"] if isinstance(par, dict) else None,
        "parametric": (f"{par['statistic']} statistic, {par['family'].steps} releases"
                       if isinstance(par, dict) else par),
        "epsilon_estimate": _epsilon_estimate(setup, LD),
        "kl_estimate": float(LD[finite].mean()) if finite.any() else math.inf,
        "mu_replay_min": None if V is None else float(np.sqrt(V.min())),
        "mu_replay_max": None if V is None else float(np.sqrt(V.max())),
        "runs_total": 2 * n * len(runs),
        "releases": best["releases"],
        "pairs": [r["label"] for r in runs],
        "pair": best["label"],
        "relation": setup.relation,
        "instance": list(setup.notes),
    }


def _epsilon_estimate(setup: Any, LD: np.ndarray) -> float:
    """Point estimate: the smallest epsilon whose empirical delta(eps) is <= delta."""
    fine = np.linspace(0.0, max(2.0 * setup.epsilon_claimed, 1.0), 801)
    below = np.flatnonzero(stats.privacy_profile(LD, fine) <= setup.delta)
    return float(fine[below[0]]) if below.size else math.inf


def _evidence(setup: Any, best: dict[str, Any], cp: stats.ThresholdBound,
              acc_note: str) -> dict[str, Any]:
    LD, LDp = best["loss_D"], best["loss_D_prime"]
    grid = np.linspace(0.0, max(2.0 * setup.epsilon_claimed, 1.0), 41)
    evidence = {
        "cp_test": cp.to_dict(),
        "privacy_profile": {"epsilon": grid.tolist(),
                            "delta_estimate": stats.privacy_profile(LD, grid).tolist()},
        "loss_quantiles_D": np.quantile(LD, [0.001, 0.01, 0.5, 0.99, 0.999]).tolist(),
        "loss_quantiles_D_prime": np.quantile(LDp, [0.001, 0.01, 0.5, 0.99, 0.999]).tolist(),
        "accountant": acc_note,
        # Descriptive views of the loss samples: the ROC of the loss as a test statistic,
        # and its histogram under D and D'.
        "roc": stats.roc_points(LD, LDp),
    }
    fD, fDp = np.isfinite(LD), np.isfinite(LDp)
    if fD.any() or fDp.any():
        edges = np.histogram_bin_edges(np.concatenate([LD[fD], LDp[fDp]]), bins=60)
        evidence["loss_histogram"] = {
            "edges": edges.tolist(),
            "counts_D": np.histogram(LD[fD], edges)[0].tolist(),
            "counts_D_prime": np.histogram(LDp[fDp], edges)[0].tolist(),
        }
    return evidence
