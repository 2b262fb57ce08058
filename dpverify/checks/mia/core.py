"""Membership inference as a privacy audit: attack, ROC, and the DP ceiling of the claim.

The game (:mod:`dpverify.checks.mia.game`) gives each trial a target record j_k, its membership
b_k and the model's statistics; the attacks (:mod:`dpverify.checks.mia.attacks`) turn them into
scores. The trials are cut into three splits:

1. *shadow*: LiRA's per-record Gaussians are fitted (the loss attack needs none);
2. *select*: the attack, the orientation and the threshold are chosen;
3. *test*: the chosen test is counted once on the pairs (b_k, score_k), which are iid.

Two tests of the claim share the error probability alpha = 1 - confidence (Bonferroni,
alpha / 2 each):

* the ROC test: Clopper-Pearson bounds on the chosen threshold's FPR and FNR give the
  epsilon lower bound of :class:`dpverify.stats.score_audit.ScoreAudit`; it exceeds the
  claimed epsilon exactly when the bounded ROC point (FPR_upper, TPR_lower) lies above
  the ceiling :func:`~dpverify.stats.membership_bounds.tpr_ceiling` of the claim;
* the AUC test: a Hoeffding lower bound on the test split's AUC against
  :func:`~dpverify.stats.membership_bounds.auc_ceiling`. It has more power than the ROC test for
  small claimed epsilons, where the ceiling is close to the diagonal everywhere.

FAIL means one of them showed the claim false at the stated confidence; PASS means
neither did ("no evidence of violation at level alpha", never "private"). AUC and TPR at
FPR 0.1% and 1% are reported as the attack's performance, measured on every (trial,
record) pair of the select and test splits, next to the largest values the claim allows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dpverify.checks.audit.targets import (
    DEFAULT_USER_D,
    DEFAULT_USER_N,
    RunOptions,
    accountant_epsilon,
)
from dpverify.checks.base import Outcome, jsonable
from dpverify.checks.mia import attacks as atk
from dpverify.checks.mia.game import (
    DESIGNS,
    Observations,
    heldout_pool,
    make_pool,
    play_callable,
    play_registered,
)
from dpverify.core.claims import Verdict
from dpverify.core.data import (
    Dataset,
    as_dataset,
    check_finite,
    in_form,
    record_form,
    synthetic_classification,
)
from dpverify.core.errors import InputError
from dpverify.core.registry import load_callable
from dpverify.execution.trials import seed_streams
from dpverify.stats import membership_bounds as bounds
from dpverify.stats.power import threshold_test_power
from dpverify.stats.score_audit import ClopperPearson, ScoreAudit, Split, statistics_of

if TYPE_CHECKING:
    pass

# Root-seed children: 0 is the problem's data and 4 the accountant run (dpverify.checks.audit),
# then these.
SEED_POOL, SEED_GAME, SEED_DATA = 5, 6, 7

DEFAULT_TRIALS = 4000
# The design label of a game whose non-members are held out (not drawn per trial).
HELDOUT = "heldout"
DEFAULT_POOL = 16
FPRS = (0.001, 0.01)
# Shadow, select and test fractions of the trials.
LIRA_SPLITS = (0.4, 0.2, 0.4)
LOSS_SPLITS = (0.0, 0.3, 0.7)


@dataclass
class MiaResult:
    """The outcome of a membership-inference audit, with the numbers behind it.

    Examples
    --------
    >>> r = MiaResult("x", "loss", "single", epsilon_lower=0.2, epsilon_claimed=1.0,
    ...               epsilon_accountant=None, delta=1e-5, confidence=0.95, trials=100,
    ...               auc=0.55, auc_lower=0.5, tpr={0.001: 0.0, 0.01: 0.02})
    >>> r.verdict.value, round(r.metrics()["auc_ceiling"], 4)
    ('PASS', 0.7311)
    """

    target: str
    attack: str
    design: str
    epsilon_lower: float
    epsilon_claimed: float
    epsilon_accountant: float | None
    delta: float
    confidence: float
    trials: int
    auc: float
    auc_lower: float | None
    tpr: dict[float, float]
    details: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    epsilon_detectable: float | None = None
    detect_probability: float | None = None
    power: dict[str, Any] = field(default_factory=dict)

    @property
    def auc_ceiling(self) -> float:
        return bounds.auc_ceiling(self.epsilon_claimed, self.delta)

    @property
    def roc_violation(self) -> bool:
        return self.epsilon_lower > self.epsilon_claimed

    @property
    def auc_violation(self) -> bool:
        return self.auc_lower is not None and self.auc_lower > self.auc_ceiling

    @property
    def verdict(self) -> Verdict:
        return Verdict.FAIL if (self.roc_violation or self.auc_violation) else Verdict.PASS

    def metrics(self) -> dict[str, Any]:
        """The report's metrics: the attack's ROC next to what the claim allows."""
        out: dict[str, Any] = {
            "auc": self.auc,
            **{f"tpr_at_fpr_{f:g}": v for f, v in self.tpr.items()},
            "epsilon_lower": self.epsilon_lower,
            "epsilon_claimed": self.epsilon_claimed,
            "epsilon_accountant": self.epsilon_accountant,
            "confidence": self.confidence,
            "trials": self.trials,
            "delta": self.delta,
            "auc_lower": self.auc_lower,
            "auc_ceiling": self.auc_ceiling,
            **{f"tpr_ceiling_at_fpr_{f:g}": float(bounds.tpr_ceiling(
                f, self.epsilon_claimed, self.delta)) for f in self.tpr},
            "advantage_ceiling": bounds.advantage_ceiling(self.epsilon_claimed, self.delta),
            "attack": self.attack,
            "design": self.design,
            "epsilon_detectable": self.epsilon_detectable,
            "detect_probability": self.detect_probability,
        }
        out.update(self.details)
        return jsonable(out)

    def message(self) -> str:
        what = []
        if self.roc_violation:
            what.append(f"epsilon_lower {self.epsilon_lower:.4g} > claimed "
                        f"{self.epsilon_claimed:.4g}")
        if self.auc_violation:
            what.append(f"AUC lower bound {self.auc_lower:.4g} > the claim's ceiling "
                        f"{self.auc_ceiling:.4g}")
        head = (f"{self.attack} attack ({self.design}, {self.trials} trials): AUC "
                f"{self.auc:.4g} (ceiling {self.auc_ceiling:.4g}), epsilon_lower "
                f"{self.epsilon_lower:.4g} vs claimed {self.epsilon_claimed:.4g} at "
                f"delta={self.delta:g}, confidence {self.confidence:g}")
        if self.design == HELDOUT:
            # Not the DP game: the attack may separate two distributions, not members.
            return (f"{head}: non-members held out ({self.details.get('nonmembers')}), so "
                    f"this is not the DP game; "
                    + (f"above the DP ceiling ({'; '.join(what)}): the attack separates "
                       "the training records from the held-out ones, which a shift "
                       "between the two explains without any membership leak"
                       if what else "within the DP ceilings"))
        if what:
            return f"{head}: proven violation ({'; '.join(what)})"
        if self.epsilon_detectable is None:
            return f"{head}: no evidence of violation at level {1 - self.confidence:.3g}"
        x = self.epsilon_detectable
        shown = f"{x:.3g}" if math.isfinite(x) else "inf (nothing this test can detect)"
        return (f"{head}: no violation above epsilon = {shown} at confidence "
                f"{self.detect_probability:g} (the ROC test alone; false alarms at most "
                f"{1 - self.confidence:.3g})")

    def to_outcome(self) -> Outcome:
        ev = {**self.evidence, "power": self.power} if self.power else self.evidence
        return Outcome(self.verdict, self.metrics(), jsonable(ev), self.message())

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"target": self.target, "verdict": self.verdict.value,
                         "metrics": self.metrics(), "evidence": self.evidence,
                         "power": self.power, "message": self.message()})


def _population(setup: Any, data: str | Dataset | None, seed: int) -> tuple[Dataset, str]:
    """The records a callable is attacked on (synthetic, or a user's ``module:function``)
    and the form the callable is handed them in (:func:`~dpverify.core.data.record_form`)."""
    if isinstance(data, Dataset):
        return data, "dataset"
    if data is None or data == "synthetic":
        n = int(setup.params.get("n", DEFAULT_USER_N))
        d = int(setup.params.get("d", DEFAULT_USER_D))
        rng = np.random.default_rng(seed_streams(seed, SEED_DATA + 1)[SEED_DATA])
        return synthetic_classification(n, d, rng)[0], "dataset"
    try:
        obj = load_callable(str(data))()
    except InputError:
        raise
    except Exception as e:
        raise InputError(f"data function {data} raised {type(e).__name__}: {e}") from e
    check_finite(obj, f"data function {data}")
    return as_dataset(obj), record_form(obj)


def _heldout(spec: str, source: Any, rng: np.random.Generator) -> Dataset:
    """Held-out non-member records from a user's ``module:function`` ``f(source, rng)``."""
    if ":" not in str(spec):
        raise InputError(f"nonmembers must be 'pool' or module:function, got {spec!r}")
    fn = load_callable(str(spec))
    try:
        obj = fn(source, rng)
    except InputError:
        raise
    except Exception as e:
        raise InputError(f"nonmembers function {spec} raised {type(e).__name__}: {e}") from e
    check_finite(obj, f"nonmembers function {spec}")
    return as_dataset(obj)


def _per_trial(S: np.ndarray, obs: Observations, rows: np.ndarray) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """Scores of member and non-member target records, one pair per trial in ``rows``."""
    j = obs.target_index[rows]
    s = S[rows, j]
    b = obs.member[rows, j]
    return s[b], s[~b]


def _all_pairs(S: np.ndarray, obs: Observations, rows: np.ndarray) -> tuple[np.ndarray,
                                                                            np.ndarray]:
    M = obs.member[rows]
    return S[rows][M], S[rows][~M]


@dataclass(frozen=True)
class MembershipOptions(RunOptions):
    """The options of a membership-inference audit (those of
    :class:`~dpverify.checks.audit.targets.RunOptions` and these).

    trials
        Models trained (every one is a shadow model or an attacked model).
    attack
        ``"lira"``, ``"loss"`` or ``"auto"`` (both; the better one is chosen on the
        selection split).
    design
        ``"poisson"`` (each pool record in each trial with probability 1/2; the default
        for registered targets) or ``"single"`` (one target record per trial; the default
        for callables, which then need only pool + 1 calls).
    pool, records
        Number of target records, and where they come from: ``"data"`` (records of the
        data, so members and non-members share one distribution) or a canary kind
        (``"outlier"``, ``"clip_boundary"``, ``"fresh_direction"``).
    splits
        Shadow, select and test fractions (default (0.4, 0.2, 0.4) with LiRA, else
        (0, 0.3, 0.7)).
    statistic
        How a model scores a record: ``"auto"`` (the target's loss, or the logistic loss
        of a linear model for a callable), ``"inner"``, a loss name, or ``module:function``
        ``(outputs (k, p), X (m, d), y (m,)) -> (k, m)``.
    data
        For a callable: ``"synthetic"`` (default; ``n`` and ``d`` from ``params``) or
        ``module:function`` returning the records: a Dataset, an ``(X, y)`` tuple or X
        alone. The callable is handed each trial's records in that same form, as the
        audit hands a target what its neighbour function returned
        (:func:`~dpverify.core.data.in_form`): ``(X, y)`` arrays for a tuple, X for X,
        a :class:`~dpverify.core.data.Dataset` (``data.X``, ``data.y``, ``data.n``) for a
        Dataset and for synthetic records.
    nonmembers
        Where non-members come from: ``"pool"`` (default: the DP game above, every target
        in or out by a coin flip) or ``module:function`` called as ``f(source, rng)``
        with the target's :class:`~dpverify.core.registry.Problem` (a registered target) or
        its records (a callable), returning held-out records such as a test set: then
        ``pool`` training records are members in every trial, ``pool`` held-out records
        never are (:func:`~dpverify.checks.mia.game.heldout_pool`, design ``"heldout"``). That
        is the protocol of attacks scored on a test set; it is not the DP game, and an
        AUC above the ceiling then shows a shift between the two sets, not a leak.
    auc_test
        Also test the AUC against the claim's ceiling (each test then at alpha / 2).
    bound
        The counts statistic(s) of the ROC test (:mod:`dpverify.stats.score_audit`;
        default Clopper-Pearson).
    block_size
        Trials per seeded block (default: sized to the data for a registered target, 1024
        for a callable).

    ``detect_probability`` is caught by the ROC test alone: the epsilon of a
    Gaussian-trade-off mechanism that it refutes with that probability
    (:func:`~dpverify.stats.power.threshold_test_power`; the AUC test only adds power).

    Examples
    --------
    >>> MembershipOptions(splits=(0.5, 0.5, 0.5))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpverify.core.errors.InputError: splits must be three fractions ..., got [0.5, 0.5, 0.5]
    """

    trials: int = DEFAULT_TRIALS
    attack: str = "lira"
    design: str | None = None
    pool: int = DEFAULT_POOL
    records: str = "data"
    splits: Sequence[float] | None = None
    statistic: str = "auto"
    data: str | Dataset | None = None
    nonmembers: str = "pool"
    auc_test: bool = True
    bound: Any = field(default_factory=ClopperPearson)
    block_size: int | str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        statistics_of(self.bound)
        if self.design is not None and self.design not in DESIGNS:
            raise InputError(f"design must be one of {DESIGNS}, got {self.design!r}")
        if self.splits is not None:
            _check_splits(self.splits)

    def fractions(self, names: Sequence[str]) -> list[float]:
        """Shadow, select and test fractions for the attacks ``names``."""
        fr = _check_splits(self.splits if self.splits is not None
                           else LIRA_SPLITS if "lira" in names else LOSS_SPLITS)
        if "lira" in names and fr[0] <= 0:
            raise InputError("the LiRA attack needs a shadow split > 0")
        return fr


def _check_splits(splits: Sequence[float]) -> list[float]:
    fr = [float(f) for f in splits]
    if len(fr) != 3 or any(f < 0 for f in fr) or fr[1] <= 0 or fr[2] <= 0 \
            or abs(sum(fr) - 1.0) > 1e-9:
        raise InputError(f"splits must be three fractions (shadow, select, test) summing to "
                         f"1 with select and test > 0, got {list(splits)}")
    return fr


@dataclass
class _Game:
    """The played game: its setup, pool, design, observations and split rows."""

    setup: Any
    pool: Any
    design: str
    obs: Observations
    rows: dict[str, np.ndarray]


def membership_inference(target: str, options: MembershipOptions | None = None) -> MiaResult:
    """Membership inference against ``target``, judged against its privacy claim.

    ``target`` is ``name``, ``name:variant`` (registered) or ``module:function`` with the
    signature ``f(data, rng, trials) -> array (trials, p)``, ``data`` one trial's records
    in the form the user gave them (see ``data`` in :class:`MembershipOptions`), ``rng``
    a NumPy Generator and each row of the result one independent run; the claim defaults
    to a registered target's own.

    Examples
    --------
    >>> r = membership_inference("dp_sgd:planted_no_clip", MembershipOptions(
    ...     trials=600, attack="loss", records="outlier", pool=4, design="single",
    ...     params={"n": 100, "T": 10, "q": 1.0}, accountant=False))
    >>> r.verdict.value, r.epsilon_lower > r.epsilon_claimed
    ('FAIL', True)
    """
    o = options or MembershipOptions()
    names = atk.resolve_attacks(o.attack)
    game = _play(target, o, names)
    setup, obs, rows = game.setup, game.obs, game.rows
    fit = None
    if "lira" in names:
        fit = atk.fit_lira(obs.stats["lira"][rows["shadow"]], obs.member[rows["shadow"]])
    scored = {a: atk.scores(a, obs.stats, fit) for a in names}
    parts = [(ScoreAudit(*_per_trial(scored[a], obs, rows["select"]), label=a),
              ScoreAudit(*_per_trial(scored[a], obs, rows["test"]), label=a)) for a in names]
    roc = Split().bound_parts(parts, statistics_of(o.bound), delta=setup.delta,
                              alpha=o.alpha / 2.0 if o.auc_test else o.alpha)
    chosen = names[roc.candidate]
    auc_lower, auc_test_info = _auc_test(parts, o.alpha / 2.0) if o.auc_test else (None, {})
    per_attack: dict[str, Any] = {}
    for a in names:
        pos, neg = _all_pairs(scored[a], obs, rows["eval"])
        per_attack[a] = {"auc": bounds.roc_auc(pos, neg),
                         **{f"tpr_at_fpr_{f:g}": bounds.tpr_at_fpr(pos, neg, f) for f in FPRS}}
    head = per_attack[chosen]
    eps_acc, acc_note = _accountant(setup, o.accountant)
    details = {
        "pool": game.pool.m, "records": o.records, "nonmembers": o.nonmembers,
        "relation": setup.relation, "split": [len(rows[k]) for k in ("shadow", "select",
                                                                   "test")],
        "attacks": per_attack, "target_calls": obs.calls, "epsilon_lower_attack": roc.label,
    }
    evidence = {
        "roc_test": {**roc.to_dict(), "tpr_lower": 1.0 - roc.fnr_upper,
                     "tpr_ceiling_at_fpr_upper": float(bounds.tpr_ceiling(
                         roc.fpr_upper, setup.epsilon_claimed, setup.delta))},
        "auc_test": auc_test_info, "accountant": acc_note,
        "output_shape": list(obs.output_shape),
    }
    if fit is not None:
        evidence["lira_fit"] = {"sd_in": fit.sd_in, "sd_out": fit.sd_out,
                                "min_shadows_in": int(fit.shadows_in.min()),
                                "min_shadows_out": int(fit.shadows_out.min())}
    res = MiaResult(setup.name, chosen, game.design, roc.epsilon, setup.epsilon_claimed,
                    eps_acc, setup.delta, o.confidence, o.trials, head["auc"], auc_lower,
                    {f: head[f"tpr_at_fpr_{f:g}"] for f in FPRS}, details, evidence)
    if o.detect_probability is not None:
        pw = threshold_test_power(roc.n_pos, roc.n_neg, alpha=roc.alpha, delta=setup.delta,
                                  epsilon=setup.epsilon_claimed, method=roc.method,
                                  probability=o.detect_probability,
                                  selection=(parts[0][0].n_pos, parts[0][0].n_neg))
        res.epsilon_detectable, res.detect_probability = pw.epsilon, pw.probability
        res.power = pw.to_dict()
    return res


def _play(target: str, o: MembershipOptions, names: Sequence[str]) -> _Game:
    """Prepare the target, make the pool, play the game and cut its trials into splits."""
    setup = o.prepare(target)
    design = o.design or ("poisson" if setup.registered else "single")
    population, form = ((setup.problem.data, "dataset") if setup.registered
                        else _population(setup, o.data, o.seed))
    pool_rng = np.random.default_rng(seed_streams(o.seed, SEED_POOL + 1)[SEED_POOL])
    if o.nonmembers == "pool":
        the_pool = make_pool(population, size=o.pool, records=o.records,
                             relation=setup.relation, rng=pool_rng)
    else:
        if o.records != "data":
            raise InputError("held-out non-members need records = 'data' (members are "
                             f"training records), got {o.records!r}")
        held = _heldout(o.nonmembers, setup.problem if setup.registered
                        else in_form(population, form), pool_rng)
        the_pool = heldout_pool(population, held, size=o.pool, rng=pool_rng)
        design = HELDOUT
    the_pool = dataclasses.replace(the_pool, form=form)
    fr = o.fractions(names)
    trials = o.trials
    n_shadow = int(math.floor(trials * fr[0]))
    n_select = int(math.floor(trials * fr[1]))
    game_seed = seed_streams(o.seed, SEED_GAME + 1)[SEED_GAME]
    play = play_registered if setup.registered else play_callable
    obs = play(setup, the_pool, trials=trials, design=design, statistic=o.statistic,
               seed=game_seed, block_size=o.block_size, execution=o.execution)
    rows = {"shadow": np.arange(n_shadow),
            "select": np.arange(n_shadow, n_shadow + n_select),
            "test": np.arange(n_shadow + n_select, trials),
            "eval": np.arange(n_shadow, trials)}
    for label in ("select", "test"):
        b = obs.member[rows[label], obs.target_index[rows[label]]]
        if b.all() or not b.any():
            raise InputError(f"{trials} trials leave the {label} split without members or "
                             "without non-members; give more trials")
    return _Game(setup, the_pool, design, obs, rows)


def _auc_test(parts: Sequence[tuple[ScoreAudit, ScoreAudit]], alpha: float
              ) -> tuple[float, dict[str, Any]]:
    """The AUC's lower bound: attack and orientation chosen on the selection split,
    bounded on the test split."""
    best, sign, best_gap = 0, 1.0, -1.0
    for i, (sel, _) in enumerate(parts):
        gap = bounds.roc_auc(sel.scores_D, sel.scores_D_prime) - 0.5
        if abs(gap) > best_gap:
            best, sign, best_gap = i, (1.0 if gap >= 0 else -1.0), abs(gap)
    t = parts[best][1]
    pos, neg = sign * t.scores_D, sign * t.scores_D_prime
    auc_lower = bounds.auc_lower_bound(pos, neg, alpha)
    return auc_lower, {"attack": t.label, "reversed": sign < 0,
                       "auc_test_split": bounds.roc_auc(pos, neg), "auc_lower": auc_lower,
                       "alpha": alpha, "members": int(t.n_pos), "non_members": int(t.n_neg)}


def _accountant(setup: Any, asked: bool) -> tuple[float | None, str]:
    """The target's accountant epsilon (a registered ledger, or a callable's own)."""
    if not asked:
        return None, "not computed (accountant=False)"
    if setup.registered:
        return accountant_epsilon(setup)
    fn_acc = getattr(setup.fn, "epsilon_accountant", None)
    if callable(fn_acc):
        return float(fn_acc(setup.delta)), "the target's epsilon_accountant"
    return None, "a callable has no ledger"
