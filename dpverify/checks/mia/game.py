"""The membership game: trials trained with and without each record of a pool.

A pool holds m target records, drawn from the same distribution as the rest of the data
(or crafted canaries). Trial k trains one model on

    base  +  {target j : M[k, j]}  +  {replacement j : not M[k, j]}

(replacements only under replace-one, so that every trial's dataset has the same size and
switching one bit of M is a neighbouring pair). Two designs fill the membership matrix M:

* ``poisson``: every target is in with probability 1/2, independently (the usual MIA
  setting, Carlini et al. 2022: every trial is a shadow model for every record);
* ``single``: one target record j_k, in with probability 1/2, all others out (the DP
  game of one record against a fixed dataset: the strongest black-box membership game).

Each trial also names one target record j_k (uniform; in ``single`` the record whose bit
was drawn). The pairs (M[k, j_k], trial k's statistics of record j_k) are independent and
identically distributed across trials, whatever the design, which is what lets exact
binomial bounds be put on an attack's error rates. For every record, its membership
changes the dataset by one record, so each such pair is a draw from the DP game.

A registered algorithm runs all trials of a block in one batched curator run: each trial's
dataset is the pool masked per trial, the mask multiplying the query weights (an absent
record weighs 0 in every query, as in :meth:`dpverify.core.curator.Curator.replay`'s add/remove
worlds; exact for full-batch and Poisson-sampled algorithms). A user's callable
``f(data, rng, trials)`` is called once per distinct dataset (m + 1 calls in ``single``),
with the records in the form its user gave them: ``(X, y)`` arrays for records given as a
tuple, a :class:`~dpverify.core.data.Dataset` for synthetic ones (as the audit does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dpverify.checks.audit.targets import sample
from dpverify.core.curator import Curator
from dpverify.core.data import PAIR_GENERATORS, Dataset, in_form
from dpverify.core.errors import InputError
from dpverify.core.registry import Problem, load_callable, resolve
from dpverify.execution.trials import BlockPlan, map_blocks, resolve_block_size, seed_streams

if TYPE_CHECKING:
    from dpverify.checks.audit.targets import AuditSetup
    from dpverify.execution.executors import Execution

DESIGNS = ("poisson", "single")
# Canary kinds that craft distinct records (a box corner is one record, the same for all).
RECORD_KINDS = ("data",) + tuple(k for k in PAIR_GENERATORS
                                  if k not in ("nonfinite", "random", "box_corners",
                                               "zero_base"))

# A membership statistic: (outputs (k, p), records X (m, d), labels y (m,)) -> (k, m), each
# record's statistic under each trial's output (higher: more likely a member).
Statistic = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Pool:
    """Target records, their replacements (replace-one) and the records always present."""

    targets: Dataset
    base: Dataset
    replacements: Dataset | None = None
    records: str = "data"
    # Membership of each target in every trial when it is not drawn (held-out non-members).
    fixed: np.ndarray | None = None
    # How a user's callable is handed a trial's records (dpverify.core.data.record_form).
    form: str = "dataset"

    @property
    def m(self) -> int:
        return self.targets.n

    def dataset(self, member: np.ndarray) -> Dataset:
        """The dataset of one trial whose membership row is ``member`` (m,)."""
        member = np.asarray(member, dtype=bool)
        parts_X = [self.targets.X[member]]
        parts_y = [self.targets.y[member]]
        if self.replacements is not None:
            parts_X.append(self.replacements.X[~member])
            parts_y.append(self.replacements.y[~member])
        parts_X.append(self.base.X)
        parts_y.append(self.base.y)
        return Dataset(np.concatenate(parts_X), np.concatenate(parts_y))

    def slots(self) -> Dataset:
        """Every record in one array: targets, replacements, base (the slots' order)."""
        Xs = [self.targets.X] + ([self.replacements.X] if self.replacements is not None else [])
        ys = [self.targets.y] + ([self.replacements.y] if self.replacements is not None else [])
        return Dataset(np.concatenate(Xs + [self.base.X]), np.concatenate(ys + [self.base.y]))

    def slot_mask(self, member: np.ndarray) -> np.ndarray:
        """Per-trial presence of every slot (trials, slots) for membership rows (trials, m)."""
        member = np.asarray(member, dtype=bool)
        k = member.shape[0]
        parts = [member]
        if self.replacements is not None:
            parts.append(~member)
        parts.append(np.ones((k, self.base.n), dtype=bool))
        return np.concatenate(parts, axis=1)


def make_pool(data: Dataset, *, size: int, records: str, relation: str,
              rng: np.random.Generator) -> Pool:
    """Split ``data`` into targets, replacements and base, or craft canary targets.

    ``records="data"``: ``size`` records of the data (in random order) are the targets,
    so members and non-members come from the same distribution as everything else.
    A canary kind of :data:`dpverify.core.data.PAIR_GENERATORS` (``outlier``,
    ``clip_boundary``, ``fresh_direction``) crafts ``size`` canaries against the data
    instead. Under replace-one, ``size`` more data records are the replacements.

    Examples
    --------
    >>> from dpverify.core.data import synthetic_classification
    >>> D, _ = synthetic_classification(50, 3, np.random.default_rng(0))
    >>> p = make_pool(D, size=8, records="data", relation="replace_one",
    ...               rng=np.random.default_rng(1))
    >>> p.m, p.replacements.n, p.base.n
    (8, 8, 34)
    """
    size = int(size)
    if size < 1:
        raise InputError(f"the pool needs at least one target record, got {size}")
    if records not in RECORD_KINDS:
        raise InputError(f"unknown record kind {records!r}; known: {list(RECORD_KINDS)}")
    order = rng.permutation(data.n)
    X, y = data.X[order], data.y[order]
    needed = (size if records == "data" else 0) + (size if relation == "replace_one" else 0)
    if data.n < needed + 1:
        raise InputError(f"{data.n} records are too few for a pool of {size} target records "
                         f"({records}, {relation}): need at least {needed + 1}")
    if records == "data":
        targets = Dataset(X[:size], y[:size])
        rest_X, rest_y = X[size:], y[size:]
    else:
        gen = PAIR_GENERATORS[records]
        rows = [gen(data, r, "add_remove").D for r in rng.spawn(size)]
        targets = Dataset(np.stack([r.X[0] for r in rows]), np.array([r.y[0] for r in rows]))
        rest_X, rest_y = X, y
    replacements = None
    if relation == "replace_one":
        replacements = Dataset(rest_X[:size], rest_y[:size])
        rest_X, rest_y = rest_X[size:], rest_y[size:]
    return Pool(targets, Dataset(rest_X, rest_y), replacements, records)


def heldout_pool(data: Dataset, heldout: Dataset, *, size: int,
                 rng: np.random.Generator) -> Pool:
    """Members from ``data``, non-members from ``heldout`` (e.g. a test set): not the DP game.

    The ``size`` member targets are records of the training data, in every trial; the
    ``size`` non-member targets are records of ``heldout``, in none. Every trial trains on
    all of ``data``. This is the protocol of attacks that take a test set as non-members:
    when ``heldout`` follows another distribution than ``data`` (a balanced test set for an
    imbalanced training set), the attack can tell the two apart by that shift alone, so its
    AUC says nothing about membership, and the DP ceilings do not apply to it.

    Examples
    --------
    >>> from dpverify.core.data import synthetic_classification
    >>> D, _ = synthetic_classification(50, 3, np.random.default_rng(0))
    >>> H, _ = synthetic_classification(20, 3, np.random.default_rng(1))
    >>> p = heldout_pool(D, H, size=8, rng=np.random.default_rng(2))
    >>> p.m, p.base.n, int(p.fixed.sum()), p.dataset(p.fixed).n
    (16, 42, 8, 50)
    """
    size = int(size)
    if size < 1:
        raise InputError(f"the pool needs at least one target record, got {size}")
    if heldout.d != data.d:
        raise InputError(f"held-out records have {heldout.d} features, the data {data.d}")
    if data.n < size + 1 or heldout.n < size:
        raise InputError(f"a held-out pool of {size} needs at least {size + 1} data records "
                         f"and {size} held-out ones, got {data.n} and {heldout.n}")
    order = rng.permutation(data.n)
    pick = rng.choice(heldout.n, size=size, replace=False)
    X, y = data.X[order], data.y[order]
    targets = Dataset(np.concatenate([X[:size], heldout.X[pick]]),
                      np.concatenate([y[:size], heldout.y[pick]]))
    fixed = np.concatenate([np.ones(size, bool), np.zeros(size, bool)])
    return Pool(targets, Dataset(X[size:], y[size:]), None, "heldout", fixed)


def pool_membership(rng: np.random.Generator, trials: int, pool: Pool,
                    design: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`draw_membership` for a pool, or its fixed membership (a held-out pool).

    Examples
    --------
    >>> from dpverify.core.data import synthetic_classification
    >>> D, _ = synthetic_classification(30, 2, np.random.default_rng(0))
    >>> p = heldout_pool(D, D, size=3, rng=np.random.default_rng(1))
    >>> j, M = pool_membership(np.random.default_rng(2), 4, p, "poisson")
    >>> M.sum(axis=1).tolist()
    [3, 3, 3, 3]
    """
    if pool.fixed is None:
        return draw_membership(rng, trials, pool.m, design)
    j = rng.integers(pool.m, size=trials)
    return j, np.broadcast_to(pool.fixed, (trials, pool.m)).copy()


def draw_membership(rng: np.random.Generator, trials: int, m: int,
                    design: str) -> tuple[np.ndarray, np.ndarray]:
    """Each trial's target record j_k (trials,) and membership matrix M (trials, m).

    Examples
    --------
    >>> j, M = draw_membership(np.random.default_rng(0), 5, 3, "single")
    >>> M.shape, bool((M.sum(axis=1) <= 1).all())
    ((5, 3), True)
    """
    if design not in DESIGNS:
        raise InputError(f"design must be one of {DESIGNS}, got {design!r}")
    j = rng.integers(m, size=trials)
    if design == "poisson":
        M = rng.random((trials, m)) < 0.5
    else:
        M = np.zeros((trials, m), dtype=bool)
        M[np.arange(trials), j] = rng.random(trials) < 0.5
    return j, M


@dataclass
class Observations:
    """What the game produced: per trial, its target record, memberships and statistics.

    ``stats`` maps a statistic's name (``"loss"``: minus the loss, for the loss-threshold
    attack; ``"lira"``: the statistic LiRA models as Gaussian) to a (trials, m) array.
    """

    target_index: np.ndarray
    member: np.ndarray
    stats: dict[str, np.ndarray]
    output_shape: tuple[int, ...] = ()
    calls: int = 0

    @property
    def trials(self) -> int:
        return int(self.target_index.shape[0])


# Statistics --------------------------------------------------------------------------

_MARGIN_LOSSES = ("logistic", "smoothed_hinge", "hinge")


def glm_statistics(loss: Any, outputs: np.ndarray, X: np.ndarray,
                   y: np.ndarray) -> dict[str, np.ndarray]:
    """Minus the loss, and the margin y z for margin losses (logistic: LiRA's logit).

    For the logistic loss y z is exactly the logit-scaled confidence log(p / (1 - p))
    of the true label that LiRA fits a Gaussian to (Carlini et al. 2022, Section IV-B).
    An output with one more column than the features carries an intercept last.
    """
    import array_api_compat.numpy as xp

    d = X.shape[1]
    w = outputs[:, :d]
    z = w @ X.T
    if outputs.shape[1] == d + 1:
        z = z + outputs[:, d:]
    yy = y[None, :]
    neg_loss = -np.asarray(loss.value(z, yy, xp), dtype=float)
    lira = yy * z if getattr(loss, "name", "") in _MARGIN_LOSSES else neg_loss
    return {"loss": neg_loss, "lira": lira}


def inner_statistics(outputs: np.ndarray, X: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """<output, x> for outputs that are not models (a released sum moves towards x)."""
    s = outputs[:, : X.shape[1]] @ X.T
    return {"loss": s, "lira": s}


def resolve_statistic(spec: str | None,
                      problem: Problem | None) -> Callable[..., dict[str, np.ndarray]]:
    """A function (outputs, X, y) -> {"loss": (k, m), "lira": (k, m)} from a spec.

    ``auto``: the problem's loss when the target has one (a GLM), else the logistic loss
    of a linear model for a callable whose output has d or d + 1 columns; ``inner``: the
    inner product with the record; ``logistic`` or ``squared``: that loss of a linear
    model; or ``module:function`` returning a (k, m) statistic (used by both attacks).

    Examples
    --------
    >>> f = resolve_statistic("logistic", None)
    >>> s = f(np.array([[1.0, 0.0]]), np.array([[2.0, 0.0]]), np.array([1.0]))
    >>> float(s["lira"][0, 0]), round(float(s["loss"][0, 0]), 4)
    (2.0, -0.1269)
    """
    spec = (spec or "auto").strip()
    if spec == "inner":
        return inner_statistics
    if spec == "auto":
        if problem is not None:
            loss = getattr(problem, "loss", None)
            if loss is None or not hasattr(loss, "value"):
                return inner_statistics
            return lambda outputs, X, y: glm_statistics(loss, outputs, X, y)
        spec = "logistic"
    if ":" in spec:
        fn = load_callable(spec)

        def user(outputs: np.ndarray, X: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
            s = np.asarray(fn(outputs, X, y), dtype=float)
            if s.shape != (outputs.shape[0], X.shape[0]):
                raise InputError(f"statistic {spec} must return shape "
                                 f"({outputs.shape[0]}, {X.shape[0]}), got {s.shape}")
            return {"loss": s, "lira": s}

        return user
    if spec not in _NAMED:
        raise InputError(f"unknown statistic {spec!r}: 'auto', 'inner', "
                         f"{', '.join(repr(k) for k in _NAMED)} or module:function")
    named = _NAMED[spec]
    return lambda outputs, X, y: glm_statistics(named, outputs, X, y)


class _LogisticLoss:
    """log(1 + exp(-y z)), labels in {-1, +1}, for a callable's linear model."""

    name = "logistic"

    @staticmethod
    def value(z: Any, y: Any, xp: Any) -> Any:
        return xp.logaddexp(xp.zeros_like(z), -y * z)


class _SquaredLoss:
    """(z - y)^2 / 2, for a callable's linear regression."""

    name = "squared"

    @staticmethod
    def value(z: Any, y: Any, xp: Any) -> Any:
        return 0.5 * (z - y) ** 2


# The losses a callable's output can be scored with by name (a registered target brings
# its own problem's loss).
_NAMED: dict[str, Any] = {"logistic": _LogisticLoss(), "squared": _SquaredLoss()}


def _check_outputs(out: np.ndarray, d: int, name: str) -> None:
    if out.ndim != 2 or out.shape[1] < d:
        raise InputError(f"{name} returned outputs of shape {out.shape}; a membership "
                         f"statistic of records with {d} features needs at least {d} output "
                         "columns (a linear model, optionally with its intercept last), or "
                         "give --statistic module:function")


# Registered targets: one batched run per block -------------------------------------------


@dataclass
class MembershipBlock:
    """The block function of a registered target's game: picklable ``fn(seed, k, index)``.

    Returns (k, 1 + m + 2 m): the target record, the membership row, and the "loss" and
    "lira" statistics of every pool record.
    """

    target: str
    params: Mapping[str, Any]
    problem: Problem
    pool: Pool
    design: str
    statistic: str = "auto"
    backend: str = "numpy"
    _stat: Any = field(default=None, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_stat"] = None
        return state

    def __call__(self, ss: np.random.SeedSequence, k: int, _: int) -> np.ndarray:
        game_ss, run_ss = ss.spawn(2)
        j, M = pool_membership(np.random.default_rng(game_ss), k, self.pool, self.design)
        data = self.pool.slots()
        cur = Curator.membership(data, self.pool.slot_mask(M), trials=k, rng=run_ss,
                                 backend=self.backend, n_public=self.problem.data.n)
        t = resolve(self.target)
        # The game's trials each hold their own records, so the public setting is the
        # problem's declared one; the setting check compares it across neighbours.
        out = t.variant.run(cur, t.setting(self.problem, self.params), self.params)
        out = np.asarray(cur.backend.to_numpy(out), dtype=float).reshape(k, -1)
        _check_outputs(out, self.pool.targets.d, self.target)
        if self._stat is None:
            self._stat = resolve_statistic(self.statistic, self.problem)
        st = self._stat(out, self.pool.targets.X, self.pool.targets.y)
        return np.hstack([j[:, None].astype(float), M.astype(float), st["loss"], st["lira"],
                          np.full((k, 1), float(out.shape[1]))])


def play_registered(setup: AuditSetup, pool: Pool, *, trials: int, design: str,
                    statistic: str, seed: np.random.SeedSequence,
                    block_size: int | str | None = None,
                    execution: Execution | None = None) -> Observations:
    """The game for a registered algorithm: ``trials`` trials in seeded blocks.

    ``block_size`` ``None``/``"auto"`` sizes blocks to the pool's slots
    (:func:`dpverify.execution.trials.auto_block_size`).
    """
    assert setup.target is not None and setup.problem is not None
    fn = MembershipBlock(setup.target.id, dict(setup.params), setup.problem, pool, design,
                         statistic, setup.backend)
    bs = resolve_block_size(block_size, n=pool.targets.n + pool.base.n
                            + (pool.m if pool.replacements is not None else 0))
    blocks = map_blocks(fn, trials, seed=seed, plan=BlockPlan(bs, execution))
    A = np.concatenate(blocks, axis=0)
    m = pool.m
    return Observations(A[:, 0].astype(int), A[:, 1 : 1 + m] > 0.5,
                        {"loss": A[:, 1 + m : 1 + 2 * m], "lira": A[:, 1 + 2 * m : 1 + 3 * m]},
                        (int(A[0, -1]),), calls=len(blocks))


# User callables: one call per distinct dataset -----------------------------------------


def play_callable(setup: AuditSetup, pool: Pool, *, trials: int, design: str,
                  statistic: str, seed: np.random.SeedSequence,
                  block_size: int | str | None = None,
                  execution: Execution | None = None) -> Observations:
    """The game for ``f(data, rng, trials)``: trials sharing a dataset share one call.

    ``data`` is the trial's records in the form the user gave them (``pool.form``,
    :func:`~dpverify.core.data.in_form`), as the audit hands a target its pair.

    In the ``single`` design there are m + 1 datasets (none of the targets, or one); in
    ``poisson`` nearly every trial has its own, so each is a call with ``trials=1``.
    """
    game_ss, run_ss = seed.spawn(2)
    m = pool.m
    j, M = pool_membership(np.random.default_rng(game_ss), trials, pool, design)
    rows, inverse = np.unique(M, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    stat = resolve_statistic(statistic, None)
    loss = np.empty((trials, m))
    lira = np.empty((trials, m))
    out_dim = 0
    for g, ss in zip(range(rows.shape[0]), seed_streams(run_ss, rows.shape[0]), strict=True):
        idx = np.flatnonzero(inverse == g)
        bs = None if block_size in (None, "auto") else int(block_size)
        out = sample(setup, in_form(pool.dataset(rows[g]), pool.form), idx.size, ss, bs,
                     execution)
        _check_outputs(out, pool.targets.d, setup.name)
        out_dim = out.shape[1]
        st = stat(out, pool.targets.X, pool.targets.y)
        loss[idx], lira[idx] = st["loss"], st["lira"]
    return Observations(j, M, {"loss": loss, "lira": lira}, (out_dim,), calls=rows.shape[0])
