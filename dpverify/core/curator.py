"""The curator: the only door to private data, its ledger, and replay on neighbours.

Reference algorithms never touch a dataset. They ask the curator for answers: a noisy
query (Gaussian or Laplace), a sampled batch, or an explicitly non-private ``exact``
answer. Every release is written to the :class:`Ledger`. The same algorithm code serves
every check:

* run: :class:`Curator` adds noise and returns answers (for K trials at once);
* account: :mod:`dpverify.accounting.accountant` turns the ledger into a ``dp_accounting`` event;
* replay: :class:`Curator` built with :meth:`Curator.replay` evaluates every query on D
  and D' with the same randomness and released history, and records both values next to
  the declared sensitivity (sensitivity checks, white-box audits);
* agreement: the same noise stream on two backends.

The exponential mechanism (:meth:`Curator.exponential`) is a release too: its query returns a
score vector per trial and the answer is the index the curator selects.

A query is a function ``query(X, y, w) -> array (trials, ...)`` of the records ``X``
(slots, d), labels ``y`` (slots,) and per-trial record weights ``w`` (trials, slots): 0 for
a record outside the batch, 1 inside (a count under sampling with replacement).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpverify.core.backends import Backend, NumpyBackend, get_backend
from dpverify.core.data import Dataset, NeighbourPair
from dpverify.core.errors import InputError, check_positive

Query = Callable[[Any, Any, Any], Any]

SAMPLING_SCHEMES = (
    "full",
    "poisson",
    "uniform_without_replacement",
    "uniform_with_replacement",
    "shuffle",
)
# Schemes whose privacy amplification the accountant credits: the batch is a random draw
# from the whole pool, so each query "touches" every record with the sampling probability.
AMPLIFIED = ("poisson", "uniform_without_replacement", "uniform_with_replacement")


@dataclass(frozen=True)
class Batch:
    """A batch handed out by the curator; algorithms pass it to queries, never read it.

    ``size`` is the public nominal batch size (``None`` for Poisson, whose size is private).
    """

    scheme: str
    weights: np.ndarray = field(repr=False)  # (trials, slots), 0/1 or counts
    rate: float
    size: int | None
    epoch: int | None = None


@dataclass(frozen=True)
class Release:
    """One entry of the ledger: what a release declares, and all the accountant reads.

    ``touched`` (for a partitioned or fixed batch: which record slots the release charged,
    for a few trials) is part of the declaration: the batches are drawn from public
    randomness. What replaying the release on neighbours observed is a separate
    :class:`ReplayRecord`.
    """

    index: int
    name: str
    mechanism: str  # "gaussian" | "laplace" | "exponential" | "exact"
    sensitivity: float | None  # declared, in ``norm``
    norm: str | None  # "l2" | "l1" | "linf"
    noise: float  # Gaussian standard deviation, Laplace scale, or Gumbel scale 2 Delta / eps
    sampling: str
    rate: float
    batch_size: int | None
    dataset_size: int
    step: int | None
    shape: tuple[int, ...]
    touched: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def epsilon(self) -> float | None:
        """Pure-DP epsilon of an exponential release, from its Gumbel scale 2 Delta / eps."""
        if self.mechanism != "exponential":
            return None
        return 2.0 * float(self.sensitivity or 0.0) / self.noise if self.noise > 0 else math.inf

    @property
    def noise_multiplier(self) -> float:
        """Noise relative to the declared sensitivity (dp_accounting's convention)."""
        if self.mechanism == "exact":
            return 0.0
        if not self.sensitivity:
            return np.inf
        return self.noise / self.sensitivity

    def summary(self) -> dict[str, Any]:
        """JSON-ready description of the release (without per-trial arrays)."""
        return {
            "index": self.index,
            "name": self.name,
            "mechanism": self.mechanism,
            "sensitivity": self.sensitivity,
            "norm": self.norm,
            "noise": self.noise,
            "sampling": self.sampling,
            "rate": self.rate,
            "batch_size": self.batch_size,
            "dataset_size": self.dataset_size,
            "step": self.step,
            "shape": list(self.shape),
            "epsilon": self.epsilon,
        }


@dataclass
class ReplayRecord:
    """What one release observed beyond its declaration (all ``None`` in a plain run).

    Replayed on neighbours: the query's values on D and D' (with the differing record
    forced into the batch under amplified sampling), on D without it (``value_out``), and
    whether the batch actually drawn held it (``included``); values are per trial,
    flattened. ``answer`` is the noisy answer, kept when the curator is asked to.
    """

    release: Release
    value_D: np.ndarray | None = field(default=None, repr=False)
    value_D_prime: np.ndarray | None = field(default=None, repr=False)
    value_out: np.ndarray | None = field(default=None, repr=False)
    included: np.ndarray | None = field(default=None, repr=False)
    answer: np.ndarray | None = field(default=None, repr=False)

    @property
    def true_difference(self) -> np.ndarray | None:
        """||q(D) - q(D')|| per trial in the declared norm, when replayed.

        An exponential release's options that a trial does not offer (score -inf in both
        worlds) differ by 0; elsewhere a non-finite value gives a non-finite difference.

        Examples
        --------
        >>> r = Release(0, "u", "exponential", 1.0, "linf", 2.0, "full", 1.0, 3, 3, 0, (3,))
        >>> rec = ReplayRecord(r, np.array([[0.0, -np.inf, 1.0]]),
        ...                    np.array([[0.5, -np.inf, -1.0]]))
        >>> rec.true_difference.tolist()
        [2.0]
        """
        if self.value_D is None or self.value_D_prime is None:
            return None
        rel = self.release
        with np.errstate(invalid="ignore"):
            diff = self.value_D - self.value_D_prime
            if rel.mechanism == "exponential":
                diff = np.where(self.value_D == self.value_D_prime, 0.0, diff)
            ordr = {"l1": 1, "linf": np.inf}.get(rel.norm or "l2", 2)
            return np.linalg.norm(diff, ord=ordr, axis=1)


@dataclass
class Ledger:
    """Every release, in order, and beside each its replay record.

    ``releases`` are frozen declarations (what the accountant reads); ``records[i]`` is
    what release i observed when replayed on neighbours or asked to keep its answer.
    """

    releases: list[Release] = field(default_factory=list)
    dataset_size: int = 0
    trials: int = 1
    records_touched: int = 0  # per-record query evaluations (gradient evaluations), trial 0
    records: list[ReplayRecord] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.releases)

    def __iter__(self) -> Iterator[Release]:
        return iter(self.releases)

    def append(self, release: Release, record: ReplayRecord | None = None) -> None:
        """Add a release with its replay record (an empty one by default)."""
        self.releases.append(release)
        self.records.append(record if record is not None else ReplayRecord(release))

    def signature(self) -> list[tuple[Any, ...]]:
        """The data-independent shape of the run: what must not depend on the data."""
        return [
            (r.name, r.mechanism, r.sensitivity, r.noise, r.sampling, r.rate, r.batch_size,
             r.shape)
            for r in self.releases
        ]


# Snapping grid: 2^-SNAP_BITS of the noise scale (rounded down to a power of two).
SNAP_BITS = 12


def snap(xp: Any, value: Any, scale: float, bits: int = SNAP_BITS) -> Any:
    """Round a noisy release to the grid Lambda = 2^(floor(log2 scale) - bits).

    Mironov 2012, Section 5.2 (the snapping mechanism), with a grid far finer than the
    noise: a float64 sum q + sigma Z carries q's trace in its last bits, which rounding
    to a power-of-two grid erases exactly (division and multiplication by a power of two
    are exact). The rounded value differs from the ideal one only when q + sigma Z lies
    within an ulp of a cell boundary, a probability of order ulp / Lambda (about 1e-12).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> snap(xp, np.array([1.0 + 2.0**-40]), 1.0).tolist()  # the last bits are gone
    [1.0]
    """
    if not scale > 0:
        return value
    lam = 2.0 ** (math.floor(math.log2(scale)) - bits)
    return xp.round(value / lam) * lam


class Curator:
    """Holds the data, answers queries for K trials at once, and keeps the ledger.

    Parameters
    ----------
    data
        The private dataset.
    trials
        Number of independent runs evaluated at once (the leading axis of every answer).
    rng
        Seed or generator for sampling and noise.
    backend
        ``"numpy"`` (default), ``"torch"``, ``"torch:cuda"`` or a :class:`Backend`.
    n_public
        The dataset size the algorithm may use (defaults to ``data.n``). Under add/remove
        neighbours the true size is private, so algorithms must divide by this, not by a
        count of the data.
    present
        Which records each trial holds, shape (trials, n) (default: all of them). A record
        absent from trial k weighs 0 in every query of trial k, whatever the release type
        and however the batch was drawn: the membership game's worlds.

    Examples
    --------
    >>> from dpverify.core.data import Dataset
    >>> D = Dataset(np.ones((4, 2)), np.zeros(4))
    >>> cur = Curator(D, trials=3, rng=0)
    >>> ans = cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=0.0)
    >>> ans.shape, float(ans[0, 0])
    ((3, 2), 4.0)
    >>> len(cur.ledger), cur.ledger.releases[0].mechanism
    (1, 'gaussian')
    """

    def __init__(
        self,
        data: Dataset,
        *,
        trials: int = 1,
        rng: int | np.random.Generator | np.random.SeedSequence | None = None,
        backend: str | Backend | None = None,
        n_public: int | None = None,
        keep_answers: bool = False,
        present: np.ndarray | None = None,
    ) -> None:
        self.trials = int(check_positive(trials, "trials", integer=True))
        self.rng = _as_generator(rng)
        self.backend = get_backend(backend)
        self.xp = self.backend.xp
        self._pair: NeighbourPair | None = None
        self._keep_answers = keep_answers
        self._worlds: list[Dataset] = [data]
        # Per world, the slot it lacks (the smaller world of an add/remove replay).
        self._drop: list[int | None] = [None, None]
        if present is None:
            self._present = [np.ones(data.n, dtype=bool)]
        else:
            mask = np.asarray(present)
            if mask.shape != (self.trials, data.n):
                raise InputError(f"a membership mask must have shape ({self.trials}, {data.n}), "
                                 f"got {mask.shape}")
            self._present = [mask.astype(bool)]
        self.n = int(n_public if n_public is not None else data.n)
        self.d = data.d
        self._slots = data.n
        self._ones: np.ndarray | None = None
        self._ones_b: Any = None
        self._to_backend()
        self.ledger = Ledger(dataset_size=self.n, trials=self.trials)
        self._step: int | None = None
        # Answers recorded from another run, handed out in place of this run's (a playback).
        self._playback: list[np.ndarray] | None = None
        # The first release a playback had no answer of its shape for (it got its own).
        self.unplayed: int | None = None
        # Fields of the public setting that differ between D and D' (a replay fills it in).
        self.setting_differences: list[str] = []

    # construction ---------------------------------------------------------------
    @classmethod
    def replay(
        cls,
        pair: NeighbourPair,
        *,
        trials: int = 1,
        rng: int | np.random.Generator | np.random.SeedSequence | None = None,
        backend: str | Backend | None = None,
        n_public: int | None = None,
        keep_answers: bool = False,
    ) -> Curator:
        """A curator that runs on ``pair.D`` and evaluates every query on ``pair.D_prime`` too.

        Records live in a common set of slots: under add/remove the larger dataset fills
        them, so both worlds see the same batches, and the smaller one is evaluated on its
        own records, the batch's weights with slot ``pair.index`` left out: a query sees the
        records of its world whether it weighs them or not (one that ignores its weights
        and sums every row is replayed as it would run). The algorithm receives D's noisy
        answers; D' is only evaluated.

        Examples
        --------
        >>> from dpverify.core.data import Dataset, NeighbourPair
        >>> D = Dataset(np.eye(3), np.zeros(3))
        >>> cur = Curator.replay(NeighbourPair.add_remove(D, 1))
        >>> _ = cur.gaussian("sum", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0)
        >>> float(cur.ledger.records[0].true_difference[0])
        1.0
        """
        D, Dp = pair.D, pair.D_prime
        big = D if D.n >= Dp.n else Dp
        cur = cls(big, trials=trials, rng=rng, backend=backend,
                  n_public=n_public if n_public is not None else D.n, keep_answers=keep_answers)
        cur._pair = pair
        if pair.relation == "add_remove":
            small = Dp if D.n > Dp.n else D
            _check_aligned(big, small, pair.index)
            cur._drop = [None, pair.index] if small is Dp else [pair.index, None]
        cur._worlds = [D, Dp]
        cur._present = [np.ones(D.n, dtype=bool), np.ones(Dp.n, dtype=bool)]
        cur._slots = big.n
        cur._to_backend()
        return cur

    @classmethod
    def membership(cls, data: Dataset, mask: np.ndarray, **kwargs: Any) -> Curator:
        """A curator whose trials each hold their own subset of ``data``'s records.

        ``mask`` (trials, n) says which records trial k holds; every release, of every type,
        sees only those (the membership-inference game).

        Examples
        --------
        >>> D = Dataset(np.ones((3, 1)), np.zeros(3))
        >>> cur = Curator.membership(D, np.array([[1, 1, 0], [0, 1, 0]], bool), trials=2)
        >>> cur.gaussian("s", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=0.0).ravel()
        array([2., 1.])
        """
        return cls(data, present=mask, **kwargs)

    @classmethod
    def playback(cls, data: Dataset, answers: Sequence[np.ndarray], **kwargs: Any) -> Curator:
        """A curator on ``data`` that hands out ``answers`` (another run's, in order).

        Every query is still evaluated on ``data`` and every random draw made as in a
        plain run, so an algorithm that reads the records only through its releases, run
        with the recorded run's seed, gives that run's output whatever ``data`` holds.

        Examples
        --------
        >>> from dpverify.core.data import Dataset
        >>> q = lambda X, y, w: w @ X
        >>> rec = Curator(Dataset(np.ones((3, 1)), np.zeros(3)), rng=0, keep_answers=True)
        >>> a = rec.gaussian("s", q, sensitivity=1.0, noise_std=1.0)
        >>> cur = Curator.playback(Dataset(np.zeros((3, 1)), np.zeros(3)),
        ...                        [r.answer for r in rec.ledger.records], rng=0)
        >>> bool(cur.gaussian("s", q, sensitivity=1.0, noise_std=1.0) == a)
        True
        """
        cur = cls(data, **kwargs)
        cur.play(answers)
        return cur

    def play(self, answers: Sequence[np.ndarray]) -> None:
        """Hand out ``answers`` (a kept ``ReplayRecord.answer`` per release, in order) in
        place of this curator's own. A release with no answer of its shape gets its own,
        and the first such is :attr:`unplayed`: the run asked for other releases."""
        self._playback = [np.asarray(a) for a in answers]
        self.unplayed = None

    def _played(self, value: Any) -> Any:
        """The recorded answer of this release in a playback, else ``value``."""
        if self._playback is None:
            return value
        i = len(self.ledger.releases)
        shape = tuple(value.shape)
        if i >= len(self._playback) or self._playback[i].size != int(np.prod(shape)):
            self.unplayed = i if self.unplayed is None else self.unplayed
            return value
        rec = self._playback[i].reshape(shape)
        if isinstance(value, np.ndarray):
            return rec.astype(value.dtype)
        return self.backend.asarray(rec)

    def _to_backend(self) -> None:
        b = self.backend
        self._X = [b.asarray(w.X) for w in self._worlds]
        self._y = [b.asarray(w.y) for w in self._worlds]
        self._present_b = [b.asarray(p.astype(float)) for p in self._present]
        self._all_present = [bool(p.all()) for p in self._present]
        self._ones = self._ones_b = None

    @property
    def replaying(self) -> bool:
        return self._pair is not None

    @property
    def pair(self) -> NeighbourPair | None:
        return self._pair

    # bookkeeping ------------------------------------------------------------------
    def step(self, t: int | None) -> None:
        """Label the releases that follow with iteration ``t`` (for reports)."""
        self._step = t

    # sampling ---------------------------------------------------------------------
    def full_batch(self) -> Batch:
        """Every record, every trial. Its weights are one shared read-only array."""
        return Batch("full", self._full_weights(), 1.0, self.n)

    def _full_weights(self) -> np.ndarray:
        # Built once: a fresh (trials, slots) array per step costs an allocation and a pass
        # over memory the size of the whole trial block, as much as a cheap query itself.
        if self._ones is None:
            w = np.ones((self.trials, self._slots))
            w.flags.writeable = False
            self._ones = w
        return self._ones

    def all_ones(self, w: Any) -> bool:
        """Whether ``w`` is the weight array of a full batch with every record present.

        A query may then skip multiplying by ``w`` (a product with 1 changes nothing).

        Examples
        --------
        >>> from dpverify.core.data import Dataset
        >>> cur = Curator(Dataset(np.ones((3, 1)), np.zeros(3)), trials=2)
        >>> cur.gaussian("s", lambda X, y, w: (1.0 * cur.all_ones(w)) * (w @ X),
        ...              sensitivity=1.0, noise_std=0.0).tolist()
        [[3.0], [3.0]]
        """
        return w is not None and w is self._ones_b

    def sample(
        self, scheme: str, *, rate: float | None = None, size: int | None = None
    ) -> Batch:
        """Draw a batch per trial.

        ``poisson`` takes ``rate`` (each record independently); the uniform schemes take
        ``size`` (drawn from the ``n_public`` slots).

        Examples
        --------
        >>> from dpverify.core.data import Dataset
        >>> cur = Curator(Dataset(np.ones((100, 1)), np.zeros(100)), trials=2, rng=0)
        >>> cur.sample("uniform_without_replacement", size=10).weights.sum(axis=1)
        array([10., 10.])
        """
        K, N = self.trials, self._slots
        if scheme == "poisson":
            if rate is None or not (0 < rate <= 1):
                raise InputError(f"poisson sampling needs a rate in (0, 1], got {rate!r}")
            w = (self.rng.random((K, N)) < rate).astype(float)
            return Batch("poisson", w, float(rate), None)
        if scheme in ("uniform_without_replacement", "uniform_with_replacement"):
            if size is None or not (0 < size <= N):
                raise InputError(f"{scheme} sampling needs a size in [1, {N}], got {size!r}")
            if scheme == "uniform_without_replacement":
                idx = np.argsort(self.rng.random((K, N)), axis=1)[:, :size]
                w = np.zeros((K, N))
                np.put_along_axis(w, idx, 1.0, axis=1)
            else:
                idx = self.rng.integers(0, N, size=(K, size))
                # One bincount for all trials, each trial's draws offset into its own row.
                rows = (idx + N * np.arange(K)[:, None]).ravel()
                w = np.bincount(rows, minlength=K * N).reshape(K, N).astype(float)
            return Batch(scheme, w, size / self.n, int(size))
        if scheme == "full":
            return self.full_batch()
        raise InputError(f"unknown sampling scheme {scheme!r}; known: {SAMPLING_SCHEMES}")

    def epoch(self, size: int, *, epoch: int | None = None) -> list[Batch]:
        """A shuffled pass: disjoint batches of ``size`` covering every record once.

        Examples
        --------
        >>> from dpverify.core.data import Dataset
        >>> cur = Curator(Dataset(np.ones((10, 1)), np.zeros(10)), rng=0)
        >>> [b.size for b in cur.epoch(4)]
        [4, 4, 2]
        """
        K, N = self.trials, self._slots
        if not (0 < size <= N):
            raise InputError(f"epoch batch size must be in [1, {N}], got {size!r}")
        perm = np.argsort(self.rng.random((K, N)), axis=1)
        out = []
        for start in range(0, N, size):
            idx = perm[:, start : start + size]
            w = np.zeros((K, N))
            np.put_along_axis(w, idx, 1.0, axis=1)
            out.append(Batch("shuffle", w, idx.shape[1] / self.n, int(idx.shape[1]), epoch))
        return out

    def subset(self, positions: Any) -> Batch:
        """A data-independent batch: the record slots ``positions``, in every trial.

        For algorithms that walk through the records in a public order (one pass over a
        stream, the leaves of a tree aggregation): nothing is sampled, so nothing is
        amplified, and like an epoch's partition the ledger charges a release on this batch
        only to the records it touches. ``positions`` is one list of slots shared by all
        trials, or one row of slots per trial (shape (trials, size)).

        Examples
        --------
        >>> from dpverify.core.data import Dataset
        >>> cur = Curator(Dataset(np.ones((5, 1)), np.zeros(5)), trials=2)
        >>> b = cur.subset([0, 3])
        >>> b.scheme, b.size, b.weights.tolist()
        ('shuffle', 2, [[1.0, 0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0, 0.0]])
        >>> _ = cur.gaussian("s", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0,
        ...                  batch=b)
        >>> cur.ledger.releases[0].touched[0].tolist()
        [True, False, False, True, False]
        """
        K, N = self.trials, self._slots
        pos = np.asarray(positions)
        if pos.ndim == 1:
            pos = np.broadcast_to(pos, (K, pos.shape[0]))
        if (pos.ndim != 2 or pos.shape[0] != K or pos.shape[1] == 0
                or not np.issubdtype(pos.dtype, np.integer)):
            raise InputError(f"subset positions must be a non-empty list of slots or a "
                             f"({K}, size) array of slots, got shape {pos.shape}")
        if pos.min() < 0 or pos.max() >= N:
            raise InputError(f"subset positions must lie in [0, {N}), got "
                             f"[{int(pos.min())}, {int(pos.max())}]")
        if np.any(np.diff(np.sort(pos, axis=1), axis=1) == 0):
            raise InputError("subset positions repeat a slot")
        w = np.zeros((K, N))
        np.put_along_axis(w, pos, 1.0, axis=1)
        size = int(pos.shape[1])
        return Batch("shuffle", w, size / self.n, size)

    # releases ---------------------------------------------------------------------
    def gaussian(
        self,
        name: str,
        query: Query,
        *,
        sensitivity: float,
        noise_std: float,
        batch: Batch | None = None,
        snap: bool = True,
    ) -> Any:
        """``query`` plus N(0, noise_std^2) noise; ``sensitivity`` is its declared L2 bound.

        The answer is snapped to a grid 2^-12 of the noise scale (:func:`snap`): a float
        sum q + sigma Z otherwise leaks q through its last bits. ``snap=False`` gives the
        textbook float mechanism, for planted bugs.
        """
        return self._release(name, query, "gaussian", sensitivity, "l2", noise_std, batch,
                             snap)

    def laplace(
        self,
        name: str,
        query: Query,
        *,
        sensitivity: float,
        scale: float,
        batch: Batch | None = None,
        snap: bool = True,
    ) -> Any:
        """``query`` plus Laplace(scale) noise; ``sensitivity`` is its declared L1 bound.

        Snapped like :meth:`gaussian` unless ``snap=False``.
        """
        return self._release(name, query, "laplace", sensitivity, "l1", scale, batch, snap)

    def exact(self, name: str, query: Query, *, batch: Batch | None = None) -> Any:
        """A non-private answer. The accountant reports epsilon = inf for any run using it."""
        return self._release(name, query, "exact", None, None, 0.0, batch)

    def exponential(
        self,
        name: str,
        scores_query: Query,
        *,
        sensitivity: float,
        epsilon: float,
        batch: Batch | None = None,
    ) -> np.ndarray:
        """Select one option per trial with probability proportional to exp(eps u / (2 Delta)).

        ``scores_query`` returns the scores u, shape (trials, options); ``sensitivity`` is
        their declared l-infinity bound Delta (no score moves by more between neighbours),
        and the selection is then ``epsilon``-DP (McSherry and Talwar 2007, Theorem 6). The
        index is drawn by Gumbel-max, argmax_j (eps u_j / (2 Delta) + G_j) with standard
        Gumbel G_j from the curator's stream: exact, and free of the overflow of
        normalising exp(eps u / (2 Delta)). An option a trial does not offer has score
        -inf; a NaN score is never selected (the sensitivity check still sees it).

        Returns
        -------
        numpy.ndarray
            The selected index per trial, shape (trials,), on every backend.

        Examples
        --------
        >>> from dpverify.core.data import Dataset
        >>> cur = Curator(Dataset(np.ones((3, 1)), np.zeros(3)), trials=4, rng=0)
        >>> scores = lambda X, y, w: np.stack([w @ X[:, 0], -np.inf * w[:, 0]], axis=1)
        >>> cur.exponential("pick", scores, sensitivity=1.0, epsilon=1.0).tolist()
        [0, 0, 0, 0]
        >>> r = cur.ledger.releases[0]
        >>> r.mechanism, r.norm, r.noise, r.epsilon, r.shape
        ('exponential', 'linf', 2.0, 1.0, (2,))
        """
        for what, v in (("sensitivity", sensitivity), ("epsilon", epsilon)):
            if not (_is_finite_nonneg(v) and float(v) > 0):
                raise InputError(f"release {name!r}: {what} must be finite and > 0, got {v!r}")
        batch = batch or self.full_batch()
        if batch.scheme in AMPLIFIED:
            # Neither the accountant nor the white-box audit models a sampled selection.
            raise InputError(f"release {name!r}: the exponential mechanism takes a full or "
                             f"partitioned batch, not {batch.scheme!r} sampling")
        scale = 2.0 * float(sensitivity) / float(epsilon)
        value, observed = self._answer(scores_query, batch)
        u = np.asarray(self.backend.to_numpy(value), dtype=float)
        if u.ndim != 2 or u.shape[1] == 0:
            raise InputError(f"release {name!r}: scores must have shape (trials, options), "
                             f"got {u.shape}")
        with np.errstate(invalid="ignore"):
            logits = np.where(np.isnan(u), -np.inf, u / scale)
        if np.any(np.all(logits == -np.inf, axis=1)):
            raise InputError(f"release {name!r}: a trial offers no option with a score")
        idx = self._played(np.argmax(logits + self.rng.gumbel(size=u.shape), axis=1))
        if self._keep_answers:
            observed["answer"] = idx.reshape(self.trials, 1).astype(float)
        self._record(name, "exponential", float(sensitivity), "linf", scale, batch,
                     (u.shape[1],), observed)
        return idx

    def _evaluate(self, query: Query, world: int, w: np.ndarray) -> Any:
        b = self.backend
        if (w is self._ones and self._drop[world] is None and self._all_present[world]
                and isinstance(b, NumpyBackend)):
            wb = self._ones_b  # the product below would be a copy of w
            if wb is None:
                wb = self._ones if b.dtype_name == "float64" else b.asarray(self._ones)
                wb.flags.writeable = False
                self._ones_b = wb
        else:
            # The shared full-batch array is read-only; hand other backends a copy.
            own = self._world_weights(world, np.array(w) if w is self._ones else w)
            wb = b.asarray(own) * self._present_b[world]
        out = query(self._X[world], self._y[world], wb)
        if tuple(out.shape[:1]) != (self.trials,):
            raise InputError(
                f"a query must return an array with a leading trial axis of {self.trials}, "
                f"got shape {tuple(out.shape)}"
            )
        return out

    def _world_weights(self, world: int, w: np.ndarray) -> np.ndarray:
        """The weights of ``world``'s own records: the slot it lacks left out."""
        drop = self._drop[world]
        return w if drop is None else np.delete(w, drop, axis=1)

    def _release(
        self,
        name: str,
        query: Query,
        mechanism: str,
        sensitivity: float | None,
        norm: str | None,
        noise: float,
        batch: Batch | None,
        snapped: bool = False,
    ) -> Any:
        # A noisy release without a numeric declared sensitivity would be accounted as free
        # (its noise multiplier is infinite), so it is refused rather than recorded.
        if mechanism != "exact" and not _is_finite_nonneg(sensitivity):
            raise InputError(f"release {name!r}: sensitivity must be finite and >= 0, "
                             f"got {sensitivity!r}")
        if not _is_finite_nonneg(noise):
            raise InputError(f"release {name!r}: noise must be finite and >= 0, got {noise!r}")
        batch = batch or self.full_batch()
        b = self.backend
        value, observed = self._answer(query, batch)
        shape = tuple(value.shape)
        if mechanism == "gaussian":
            value = value + noise * b.normal(self.rng, shape)
        elif mechanism == "laplace":
            value = value + noise * b.laplace(self.rng, shape)
        if snapped and mechanism != "exact":
            value = snap(self.xp, value, noise)
        value = self._played(value)
        if self._keep_answers:
            observed["answer"] = b.to_numpy(value).reshape(self.trials, -1).copy()
        self._record(name, mechanism, None if sensitivity is None else float(sensitivity),
                     norm, float(noise), batch, shape[1:], observed)
        return value

    def _answer(self, query: Query, batch: Batch) -> tuple[Any, dict[str, Any]]:
        """The query's value on the batch (D's, when replaying) and what replay observed."""
        observed: dict[str, Any] = {}
        if not self.replaying:
            return self._evaluate(query, 0, batch.weights), observed
        return self._replay(observed, query, batch), observed

    def _record(self, name: str, mechanism: str, sensitivity: float | None, norm: str | None,
                noise: float, batch: Batch, shape: tuple[int, ...],
                observed: dict[str, Any]) -> None:
        """Write the release's declaration and its replay record to the ledger."""
        touched = None
        if batch.scheme not in AMPLIFIED and batch.scheme != "full":
            touched = _compact_touched(batch.weights > 0)
        rel = Release(len(self.ledger.releases), name, mechanism, sensitivity, norm, noise,
                      batch.scheme, batch.rate, batch.size, self.n, self._step, tuple(shape),
                      touched)
        present = self._present[0] if self._present[0].ndim == 1 else self._present[0][0]
        if batch.weights is self._ones:
            self.ledger.records_touched += int(np.count_nonzero(present))
        else:
            self.ledger.records_touched += int(np.sum(
                self._world_weights(0, batch.weights[:1])[0] * present))
        self.ledger.append(rel, ReplayRecord(rel, **observed))

    def _replay(self, observed: dict[str, Any], query: Query, batch: Batch) -> Any:
        """Evaluate on both worlds; return D's value for the batch actually drawn."""
        b = self.backend
        i = self._pair.index  # type: ignore[union-attr]
        K = self.trials
        flat = lambda a: b.to_numpy(a).reshape(K, -1).astype(float)  # noqa: E731
        w = batch.weights
        if batch.scheme in AMPLIFIED:
            # Amplified sampling: the neighbouring record may or may not be drawn; record the
            # values with it forced in (the worst case for sensitivity) and with it left out,
            # so a white-box audit can form the mixture likelihood of the release.
            w_in = w.copy()
            w_in[:, i] = np.maximum(w_in[:, i], 1.0)
            w_out = w.copy()
            w_out[:, i] = 0.0
            v_in = self._evaluate(query, 0, w_in)
            v_in_p = self._evaluate(query, 1, w_in)
            v_out = self._evaluate(query, 0, w_out)
            included = w[:, i] > 0
            observed.update(value_D=flat(v_in), value_D_prime=flat(v_in_p),
                            value_out=flat(v_out), included=included)
            sel = b.asarray(included.astype(float)).reshape((K,) + (1,) * (v_in.ndim - 1))
            # Counts above 1 (with replacement) are approximated by the forced-in value.
            return sel * v_in + (1.0 - sel) * v_out
        v = self._evaluate(query, 0, w)
        vp = self._evaluate(query, 1, w)
        observed.update(value_D=flat(v), value_D_prime=flat(vp), included=w[:, i] > 0)
        return v


# Trials kept per partitioned release for per-record accounting: the batch assignment is
# data-independent and identically distributed across trials, so a few dozen trials show
# the record histories, and a (trials x records) mask per release would not fit at audit
# trial counts (1e4 trials x 1e3 records x 100 releases is 1 GB).
TOUCHED_TRIALS = 64


def _compact_touched(mask: np.ndarray) -> np.ndarray:
    """One row when every trial touched the same records, else the first rows."""
    if mask.shape[0] > 1 and (mask == mask[:1]).all():
        return mask[:1].copy()
    return mask[:TOUCHED_TRIALS].copy()


def _check_aligned(big: Dataset, small: Dataset, index: int) -> None:
    """Refuse an add/remove pair whose smaller dataset is not the larger without ``index``
    (its rows are evaluated against the larger one's slots)."""
    rest = big.without(index)
    if not (np.array_equal(rest.X, small.X, equal_nan=True)
            and np.array_equal(rest.y, small.y, equal_nan=True)):
        raise InputError(f"an add/remove pair's smaller dataset must be the larger one "
                         f"without record {index}, in the same order")


def _as_generator(
    rng: int | np.random.Generator | np.random.SeedSequence | None,
) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is not None and not isinstance(rng, (int, np.integer, np.random.SeedSequence)):
        raise InputError(f"rng must be an int seed, a SeedSequence or a Generator, got {rng!r}")
    return np.random.default_rng(rng)


def _is_finite_nonneg(value: Any) -> bool:
    """Whether ``value`` is a real number, finite and >= 0 (None, bools and text are not)."""
    if value is None or isinstance(value, (bool, np.bool_, str, bytes)):
        return False
    try:
        v = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(v) and v >= 0
