"""Datasets, neighbouring relations, and generators of neighbouring pairs and canaries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dpverify.core.claims import check_relation
from dpverify.core.errors import InputError


@dataclass(frozen=True)
class Dataset:
    """Records as a feature matrix ``X`` of shape (n, d) and labels ``y`` of shape (n,).

    Non-finite values are refused unless ``allow_nonfinite`` is set (the sensitivity
    checker builds such records on purpose, to test that clipping stops them).

    Examples
    --------
    >>> D = Dataset(np.zeros((3, 2)), np.ones(3))
    >>> D.n, D.d
    (3, 2)
    """

    X: np.ndarray
    y: np.ndarray
    allow_nonfinite: bool = False

    def __post_init__(self) -> None:
        X = np.asarray(self.X, dtype=float)
        y = np.asarray(self.y, dtype=float)
        if X.ndim != 2:
            raise InputError(f"data X must have shape (n, d), got shape {X.shape}")
        if y.shape != (X.shape[0],):
            raise InputError(f"labels y must have shape ({X.shape[0]},), got shape {y.shape}")
        if not self.allow_nonfinite:
            bad = ~np.isfinite(X).all(axis=1) | ~np.isfinite(y)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(
                    f"data contain non-finite values (NaN or inf), first at record {i}: "
                    f"x={X[i].tolist()}, y={y[i]}"
                )
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    def without(self, index: int) -> Dataset:
        """The dataset with record ``index`` removed."""
        keep = np.arange(self.n) != index
        return Dataset(self.X[keep], self.y[keep], self.allow_nonfinite)

    def replaced(self, index: int, x: np.ndarray, y: float) -> Dataset:
        """The dataset with record ``index`` replaced by ``(x, y)``."""
        X = self.X.copy()
        Y = self.y.copy()
        X[index] = x
        Y[index] = y
        return Dataset(X, Y, self.allow_nonfinite or not np.isfinite(X[index]).all())

    def with_record(self, x: np.ndarray, y: float, index: int = 0) -> Dataset:
        """The dataset with record ``(x, y)`` inserted at position ``index``."""
        X = np.insert(self.X, index, np.asarray(x, dtype=float), axis=0)
        Y = np.insert(self.y, index, float(y))
        return Dataset(X, Y, self.allow_nonfinite or not np.isfinite(X[index]).all())


@dataclass(frozen=True)
class NeighbourPair:
    """Two datasets that differ in one record, at position ``index``.

    Under ``replace_one`` both have n records and differ at ``index``. Under ``add_remove``
    one of them holds an extra record at ``index`` and the other is it without that row.

    Examples
    --------
    >>> D = Dataset(np.eye(3), np.ones(3))
    >>> pair = NeighbourPair.add_remove(D, 0)
    >>> pair.D.n, pair.D_prime.n
    (3, 2)
    """

    D: Dataset
    D_prime: Dataset
    relation: str
    index: int
    label: str = ""

    def __post_init__(self) -> None:
        check_relation(self.relation)
        D, Dp = self.D, self.D_prime
        if D.d != Dp.d:
            raise InputError(f"neighbouring datasets differ in dimension: {D.d} vs {Dp.d}")
        if self.relation == "replace_one":
            if D.n != Dp.n:
                raise InputError(
                    f"replace_one neighbours must have equal sizes, got {D.n} and {Dp.n}"
                )
        elif abs(D.n - Dp.n) != 1:
            raise InputError(
                f"add_remove neighbours must differ by one record, got sizes {D.n} and {Dp.n}"
            )
        if not 0 <= self.index < max(D.n, Dp.n):
            raise InputError(f"differing index {self.index} is out of range")

    @classmethod
    def add_remove(cls, D: Dataset, index: int, label: str = "") -> NeighbourPair:
        """D and D without record ``index``."""
        return cls(D, D.without(index), "add_remove", index, label)

    @classmethod
    def replace_one(
        cls, D: Dataset, index: int, x: np.ndarray, y: float, label: str = ""
    ) -> NeighbourPair:
        """D and D with record ``index`` replaced by ``(x, y)``."""
        return cls(D, D.replaced(index, x, y), "replace_one", index, label)

    @classmethod
    def from_datasets(cls, D: Dataset, D_prime: Dataset, label: str = "") -> NeighbourPair:
        """Infer the relation and the differing index from two datasets.

        Examples
        --------
        >>> D = Dataset(np.eye(3), np.zeros(3))
        >>> NeighbourPair.from_datasets(D, D.without(1)).index
        1
        """
        if D.d != D_prime.d:
            raise InputError(f"neighbouring datasets differ in dimension: {D.d} vs {D_prime.d}")
        if D.n == D_prime.n:
            diff = np.flatnonzero(
                ~(_same(D.X, D_prime.X).all(axis=1) & _same(D.y, D_prime.y))
            )
            if len(diff) > 1:
                raise InputError(
                    f"replace_one neighbours must differ in one record, they differ in {len(diff)}"
                )
            return cls(D, D_prime, "replace_one", int(diff[0]) if len(diff) else 0, label)
        big, small = (D, D_prime) if D.n > D_prime.n else (D_prime, D)
        if big.n - small.n != 1:
            raise InputError(
                f"neighbouring datasets must differ by one record, got sizes {D.n} and {D_prime.n}"
            )
        for i in range(big.n):
            kept = np.arange(big.n) != i
            if (_same(big.X[kept], small.X).all() and _same(big.y[kept], small.y).all()):
                return cls(D, D_prime, "add_remove", i, label)
        raise InputError("the larger dataset is not the smaller one plus a single record")


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b) | (np.isnan(a) & np.isnan(b))


def synthetic_classification(
    n: int, d: int, rng: np.random.Generator, *, radius: float = 1.0, margin_noise: float = 0.5
) -> tuple[Dataset, np.ndarray]:
    """Linearly separable-ish labels in {-1, +1}, features in the ball of ``radius``.

    Returns the dataset and the generating direction.

    Examples
    --------
    >>> D, w = synthetic_classification(10, 3, np.random.default_rng(0))
    >>> D.X.shape, set(D.y) <= {-1.0, 1.0}
    ((10, 3), True)
    """
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((n, d))
    X *= radius / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), radius)
    logits = 4.0 * X @ w / radius + margin_noise * rng.standard_normal(n)
    y = np.where(logits >= 0, 1.0, -1.0)
    return Dataset(X, y), w


def synthetic_regression(
    n: int, d: int, rng: np.random.Generator, *, radius: float = 1.0, noise: float = 0.1
) -> tuple[Dataset, np.ndarray]:
    """Linear-model responses with Gaussian noise, features in the ball of ``radius``.

    Examples
    --------
    >>> D, w = synthetic_regression(10, 3, np.random.default_rng(0))
    >>> bool(np.all(np.linalg.norm(D.X, axis=1) <= 1 + 1e-12))
    True
    """
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((n, d))
    X *= radius / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), radius)
    y = X @ w + noise * rng.standard_normal(n)
    return Dataset(X, y), w


PairGenerator = Callable[[Dataset, np.random.Generator, str], NeighbourPair]


def _fresh_direction(D: Dataset, rng: np.random.Generator) -> np.ndarray:
    """A unit vector orthogonal to the span of the data where possible, else random."""
    v = rng.standard_normal(D.d)
    if D.n < D.d:
        q, _ = np.linalg.qr(D.X.T)
        v -= q @ (q.T @ v)
    nrm = np.linalg.norm(v)
    return v / nrm if nrm > 1e-12 else np.eye(D.d)[0]


def _make_pair(
    D: Dataset, x: np.ndarray, y: float, relation: str, label: str
) -> NeighbourPair:
    check_relation(relation)
    if relation == "replace_one":
        return NeighbourPair.replace_one(D, 0, x, y, label)
    return NeighbourPair(D.with_record(x, y, 0), D, "add_remove", 0, label)


def canary_fresh_direction(
    D: Dataset, rng: np.random.Generator, relation: str = "add_remove", *, scale: float = 1.0
) -> NeighbourPair:
    """A record in a direction the data do not span, with a label that fights the data."""
    x = scale * _fresh_direction(D, rng)
    y = -1.0 if np.mean(D.y) >= 0 else 1.0
    return _make_pair(D, x, y, relation, "fresh_direction")


def canary_clip_boundary(
    D: Dataset, rng: np.random.Generator, relation: str = "add_remove", *, scale: float = 1.0
) -> NeighbourPair:
    """A record on the boundary of the feature ball (norm ``scale``) with a flipped label."""
    i = int(np.argmax(np.linalg.norm(D.X, axis=1)))
    x = D.X[i] / max(np.linalg.norm(D.X[i]), 1e-12) * scale
    return _make_pair(D, x, -float(D.y[i]) if D.y[i] != 0 else 1.0, relation, "clip_boundary")


def canary_outlier(
    D: Dataset, rng: np.random.Generator, relation: str = "add_remove", *, scale: float = 100.0
) -> NeighbourPair:
    """A record far outside the feature ball: its gradient breaks any Lipschitz bound."""
    x = scale * _fresh_direction(D, rng)
    return _make_pair(D, x, 1.0, relation, "outlier")


def canary_box_corners(
    D: Dataset, rng: np.random.Generator, relation: str = "add_remove"
) -> NeighbourPair:
    """A record at the corner (1, ..., 1) of the box [-1, 1]^d, label kept: under
    replace-one it replaces the first record and the other dataset holds the opposite
    corner; under add/remove it is added.

    Statistics of records clipped coordinate-wise to [-1, 1] (a DP mean, sum or histogram
    of bounded values) move by the whole range in every coordinate at once, which no pair
    of records of the unit ball does (their L1 distance is at most 2 sqrt(d)); records
    clipped in norm meet their antipode at the clip.

    Examples
    --------
    >>> D, _ = synthetic_classification(5, 2, np.random.default_rng(0))
    >>> p = canary_box_corners(D, np.random.default_rng(1), "replace_one")
    >>> p.D.X[0].tolist(), p.D_prime.X[0].tolist()
    ([1.0, 1.0], [-1.0, -1.0])
    """
    return _corner_pair(D, float(D.y[0]), relation, "box_corners")


def _corner_pair(D: Dataset, y: float, relation: str, label: str) -> NeighbourPair:
    """The corner (1, ..., 1) added to ``D``, or under replace-one in its first record with
    the opposite corner in the other dataset."""
    check_relation(relation)
    corner = np.ones(D.d)
    if relation == "replace_one":
        return NeighbourPair.replace_one(D.replaced(0, corner, y), 0, -corner, y, label)
    return _make_pair(D, corner, y, relation, label)


def canary_zero_base(
    D: Dataset, rng: np.random.Generator, relation: str = "add_remove"
) -> NeighbourPair:
    """The canary at the corner (1, ..., 1) among records all at the origin (labels 1):
    under replace-one the other dataset holds the opposite corner, under add/remove it is
    added.

    In a random base the other records' contributions hide the canary wherever a mechanism
    draws on them: a subsample of them moves a sum more than the canary does, their spread
    sets a noise scale the canary barely changes. Records at the origin add nothing to a
    sum and spread nothing, so the canary is all there is to see (the dataset a Poisson
    subsampled sum, or noise scaled to the data's range, is audited on by hand).

    Examples
    --------
    >>> D, _ = synthetic_classification(5, 2, np.random.default_rng(0))
    >>> p = canary_zero_base(D, np.random.default_rng(1))
    >>> p.D.X[:2].tolist(), bool(p.D_prime.X.any())
    ([[1.0, 1.0], [0.0, 0.0]], False)
    """
    return _corner_pair(Dataset(np.zeros_like(D.X), np.ones(D.n)), 1.0, relation, "zero_base")


def canary_nonfinite(
    D: Dataset, rng: np.random.Generator, relation: str = "add_remove"
) -> NeighbourPair:
    """A record holding NaN and inf: clipping must not let it through."""
    x = np.full(D.d, np.nan)
    x[0] = np.inf
    return _make_pair(D, x, 1.0, relation, "nonfinite")


def least_used_direction(D: Dataset, rng: np.random.Generator) -> np.ndarray:
    """A unit vector the data span least: orthogonal to them when n < d, else the right
    singular vector of X with the smallest singular value (the direction of ClipBKD,
    Jagielski, Ullman, Oprea 2020).

    Examples
    --------
    >>> X = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 0.1]])
    >>> np.round(np.abs(least_used_direction(Dataset(X, np.zeros(3)),
    ...                                      np.random.default_rng(0))), 2).tolist()
    [0.02, 1.0]
    """
    if D.n < D.d:
        return _fresh_direction(D, rng)
    _, _, vt = np.linalg.svd(D.X, full_matrices=False)
    return vt[-1] / np.linalg.norm(vt[-1])


def canary_worst_case(
    D: Dataset, rng: np.random.Generator, relation: str = "add_remove", *,
    clip: float | None = None,
) -> NeighbourPair:
    """A record that attains a declared clip norm at every step, where the data are not.

    Its features are a unit vector the data use least (:func:`least_used_direction`)
    scaled to ``min(clip, 1)`` (records stay in the unit ball of the test problems), with
    a label that fights the data. Under a sum of records clipped to ``clip``, or a sum of
    per-sample gradients of the linear loss -y <x, theta> (gradient -y x, the same at
    every theta) clipped to ``clip``, it moves every release by exactly the declared
    sensitivity: the worst case of the accountant's analysis, the Dirac canary gradient of
    white-box audits (Nasr et al. 2023, "Tight auditing of DP ML"). Under replace-one the
    record of largest norm is replaced by its antipode at that norm, label kept, so the
    difference reaches twice that (the declared 2 clip) where the record is at the clip.

    Examples
    --------
    >>> D, _ = synthetic_classification(50, 3, np.random.default_rng(0))
    >>> p = canary_worst_case(D, np.random.default_rng(1), clip=1.0)
    >>> p.relation, round(float(np.linalg.norm(p.D.X[0])), 12), p.D.n - p.D_prime.n
    ('add_remove', 1.0, 1)
    """
    scale = min(float(clip), 1.0) if clip else 1.0
    check_relation(relation)
    if relation == "replace_one":
        i = int(np.argmax(np.linalg.norm(D.X, axis=1)))
        nrm = float(np.linalg.norm(D.X[i]))
        x = -scale * D.X[i] / nrm if nrm > 0 else scale * least_used_direction(D, rng)
        return NeighbourPair.replace_one(D, i, x, float(D.y[i]), "worst_case")
    y = -1.0 if np.mean(D.y) >= 0 else 1.0
    return _make_pair(D, scale * least_used_direction(D, rng), y, relation, "worst_case")


def random_pair(
    D: Dataset, rng: np.random.Generator, relation: str = "add_remove"
) -> NeighbourPair:
    """A random record of the data removed, or replaced by a random point of the ball."""
    check_relation(relation)  # anything but replace_one would silently become add_remove
    i = int(rng.integers(D.n))
    if relation == "replace_one":
        x = rng.standard_normal(D.d)
        x /= max(np.linalg.norm(x), 1.0)
        return NeighbourPair.replace_one(D, i, x, float(rng.choice([-1.0, 1.0])), "random")
    return NeighbourPair.add_remove(D, i, "random")


PAIR_GENERATORS: dict[str, PairGenerator] = {
    "worst_case": canary_worst_case,
    "fresh_direction": canary_fresh_direction,
    "clip_boundary": canary_clip_boundary,
    "outlier": canary_outlier,
    "box_corners": canary_box_corners,
    "zero_base": canary_zero_base,
    "nonfinite": canary_nonfinite,
    "random": random_pair,
}


def make_pair(
    spec: str, D: Dataset, rng: np.random.Generator, relation: str = "add_remove"
) -> NeighbourPair:
    """A neighbouring pair from a built-in generator name or ``module:function``.

    A user's ``module:function`` is called with no argument and returns ``(D, D_prime)``
    as datasets or as ``((X, y), (X', y'))`` tuples.

    Examples
    --------
    >>> D, _ = synthetic_classification(5, 2, np.random.default_rng(0))
    >>> make_pair("fresh_direction", D, np.random.default_rng(1)).relation
    'add_remove'
    """
    if spec in PAIR_GENERATORS:
        return PAIR_GENERATORS[spec](D, rng, relation)
    if ":" in spec:
        from dpverify.core.registry import load_callable

        out = load_callable(spec)()
        if not (isinstance(out, tuple) and len(out) == 2):
            raise InputError(f"neighbour function {spec} must return (D, D_prime), got {type(out)}")
        return NeighbourPair.from_datasets(as_dataset(out[0]), as_dataset(out[1]), spec)
    raise InputError(
        f"unknown neighbouring-pair generator {spec!r}; built-in: {sorted(PAIR_GENERATORS)}, "
        "or give module:function"
    )


def check_finite(obj: object, where: str) -> None:
    """Raise :class:`InputError` naming ``where`` and the value if ``obj`` holds NaN or inf.

    ``obj`` is a Dataset, an array, or tuples, lists and dicts of them (whatever a user's
    pair or data function returns); non-numeric leaves are left alone. A Dataset built
    with ``allow_nonfinite`` (the deliberate ``nonfinite`` canary) passes.

    Examples
    --------
    >>> check_finite((np.zeros((2, 2)), np.ones(2)), "pair D")
    >>> try:
    ...     check_finite((np.array([[0.0, np.nan]]), np.ones(1)), "neighbour function m:pair, D")
    ... except InputError as e:
    ...     print(e)
    neighbour function m:pair, D[0] holds nan at index (0, 1): data must be finite numbers
    """
    if isinstance(obj, Dataset):
        if not obj.allow_nonfinite:
            check_finite((obj.X, obj.y), where)
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            check_finite(v, f"{where}[{k!r}]")
        return
    arr = _numeric(obj)
    if arr is None:
        if isinstance(obj, (tuple, list)):
            for i, v in enumerate(obj):
                check_finite(v, f"{where}[{i}]")
        return
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        shown = idx[0] if len(idx) == 1 else idx
        raise InputError(f"{where} holds {arr[idx]} at index {shown}: data must be finite "
                         "numbers")


def _numeric(obj: object) -> np.ndarray | None:
    """``obj`` as a numeric (real or complex) array, or None if it is not one."""
    if isinstance(obj, (str, bytes)) or obj is None:
        return None
    try:
        arr = np.asarray(obj)
    except (ValueError, TypeError):  # ragged: a tuple (X, y) of different shapes
        return None
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
        return None
    return arr


def as_dataset(obj: object) -> Dataset:
    """Coerce a Dataset, an ``(X, y)`` tuple or a bare array (labels zero) to a Dataset."""
    if isinstance(obj, Dataset):
        return obj
    if isinstance(obj, tuple) and len(obj) == 2:
        return Dataset(np.asarray(obj[0], dtype=float), np.asarray(obj[1], dtype=float))
    arr = np.asarray(obj, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    return Dataset(arr, np.zeros(arr.shape[0]))


def record_form(obj: object) -> str:
    """The form a user gave records in: ``dataset``, ``xy`` (an ``(X, y)`` tuple), ``array``
    (X alone, (n, d)) or ``vector`` (X alone, (n,)); :func:`in_form` gives records back in it.

    Examples
    --------
    >>> record_form((np.zeros((3, 2)), np.ones(3))), record_form(np.zeros(3))
    ('xy', 'vector')
    """
    if isinstance(obj, Dataset):
        return "dataset"
    if isinstance(obj, tuple) and len(obj) == 2:
        return "xy"
    return "vector" if np.ndim(obj) == 1 else "array"


def in_form(data: Dataset, form: str) -> object:
    """``data`` in the form of :func:`record_form`: what a user's callable is handed.

    A target is handed records the way its user gave them (a neighbour function's pair
    or a data function's records), so code written for ``(X, y)`` tuples never meets a
    :class:`Dataset` and the other way round; records the harness makes itself stay a
    :class:`Dataset`.

    Examples
    --------
    >>> D = Dataset(np.zeros((3, 1)), np.ones(3))
    >>> [type(in_form(D, f)).__name__ for f in ("dataset", "xy", "array")]
    ['Dataset', 'tuple', 'ndarray']
    >>> in_form(D, "vector").shape
    (3,)
    """
    if form == "dataset":
        return data
    if form == "xy":
        return data.X, data.y
    if form == "array":
        return data.X
    if form == "vector":
        return data.X[:, 0]
    raise InputError(f"unknown record form {form!r}; known: dataset, xy, array, vector")


# Vectors of query answers ---------------------------------------------------------------
#
# A mechanism whose input is a vector of sensitivity-1 answers (counts, Laplace and
# sparse-vector inputs) is audited on pairs of such vectors. The neighbouring relations
# are read as follows:
#
# * ``add_remove``: one record added or removed moves one answer by one (a histogram or a
#   single count: L1 sensitivity 1; StatDP's ONE_DIFFER);
# * ``replace_one``: a record moves from one answer to another (one up, one down), or in
#   or out of one;
# * ``componentwise``: every answer may move by at most one, in any direction
#   (|a_i - a'_i| <= 1, L-infinity sensitivity 1; overlapping counting queries, as the
#   sparse vector technique and report-noisy-max assume; StatDP's ALL_DIFFER).

QUERY_RELATIONS: tuple[str, ...] = ("add_remove", "replace_one", "componentwise")


def check_query_relation(relation: str) -> str:
    """Return a relation between query-answer vectors, or raise naming the known ones.

    Examples
    --------
    >>> check_query_relation("componentwise")
    'componentwise'
    """
    if relation not in QUERY_RELATIONS:
        raise InputError(f"neighbouring relation of query answers must be one of "
                         f"{QUERY_RELATIONS}, got {relation!r}")
    return relation


def _half(k: int) -> int:
    return k // 2


# StatDP's input patterns (Ding et al. 2018, Section 5.1: "one above", "one below", "one
# above rest below", "one below rest above", "half half", "all above", "all below", "X shape"),
# as (base, neighbour) built from a length k and the distance ``far`` of the far pattern. The
# base is all ones so that neighbours stay non-negative counts; X shape moves the base itself.
_PATTERNS: dict[str, Callable[[int, float], tuple[list[float], list[float]]]] = {
    "one_above": lambda k, far: ([1.0] * k, [2.0] + [1.0] * (k - 1)),
    "one_below": lambda k, far: ([1.0] * k, [0.0] + [1.0] * (k - 1)),
    "one_up_one_down": lambda k, far: ([1.0] * k, [2.0, 0.0] + [1.0] * (k - 2)),
    "one_above_rest_below": lambda k, far: ([1.0] * k, [2.0] + [0.0] * (k - 1)),
    "one_below_rest_above": lambda k, far: ([1.0] * k, [0.0] + [2.0] * (k - 1)),
    # Beyond StatDP: one below the rest, the rest far above. Report noisy max's most telling
    # event is its index landing on the answer that moved down; the further that answer sits
    # below the others, the deeper in the noise's tail the event lies, where the loss of every
    # moved answer is whole: at far = 1/epsilon (the Laplace mechanism's scale for one answer;
    # half RNM1's) RNM1 (Dwork and Roth 2014, Claim 3.9) reaches log-ratio 0.0988 of its 0.1
    # where one_below_rest_above reaches 0.0946 (benchmarks/ceiling.py computes both exactly).
    "one_below_rest_far_above": lambda k, far: ([1.0] + [1.0 + far] * (k - 1),
                                                [0.0] + [2.0 + far] * (k - 1)),
    "half_half": lambda k, far: ([1.0] * k, [2.0] * _half(k) + [0.0] * (k - _half(k))),
    # Beyond StatDP: half_half with a longer run up. Sparse vector's most telling event is
    # its first answer above landing just after the queries that moved up; each of them
    # answered below adds to the loss, so on SVT1 (Lyu, Su and Li 2017, Alg. 1) three
    # quarters up reaches log-ratio 0.0975 of its 0.1 where half_half reaches 0.0885
    # (benchmarks/ceiling.py computes both exactly).
    "most_above_rest_below": lambda k, far: ([1.0] * k,
                                             [2.0] * (k - k // 4) + [0.0] * (k // 4)),
    "all_above": lambda k, far: ([1.0] * k, [2.0] * k),
    "all_below": lambda k, far: ([1.0] * k, [0.0] * k),
    "x_shape": lambda k, far: ([1.0] * _half(k) + [0.0] * (k - _half(k)),
                               [0.0] * _half(k) + [1.0] * (k - _half(k))),
}
_PATTERNS_OF = {
    "add_remove": ("one_above", "one_below"),
    "replace_one": ("one_above", "one_below", "one_up_one_down"),
    "componentwise": ("one_above", "one_below", "one_above_rest_below",
                      "one_below_rest_above", "one_below_rest_far_above", "half_half",
                      "most_above_rest_below", "all_above", "all_below", "x_shape"),
}
# The far pattern's distance where no claim sets it: the Laplace scale of a sensitivity-1
# answer at epsilon 0.1.
FAR = 10.0
QUERY_PATTERNS: tuple[str, ...] = tuple(_PATTERNS)


def query_pair(name: str, length: int, relation: str = "componentwise", far: float = FAR
               ) -> tuple[np.ndarray, np.ndarray]:
    """The pattern ``name`` as two answer vectors of ``length``, checked against ``relation``.

    ``far`` is how far above the moved answer the far pattern places the others (an audit
    sets 1/epsilon of the claim, :func:`far_distance`).

    Examples
    --------
    >>> a, b = query_pair("one_above_rest_below", 4)
    >>> a.tolist(), b.tolist()
    ([1.0, 1.0, 1.0, 1.0], [2.0, 0.0, 0.0, 0.0])
    >>> [v.tolist() for v in query_pair("one_below_rest_far_above", 3, far=4.0)]
    [[1.0, 5.0, 5.0], [0.0, 6.0, 6.0]]
    >>> try:
    ...     query_pair("all_above", 3, "add_remove")
    ... except InputError as e:
    ...     print(str(e)[:58])
    pattern 'all_above' is not a neighbour under add_remove: i
    """
    check_query_relation(relation)
    if name not in _PATTERNS:
        raise InputError(f"unknown query-answer pattern {name!r}; built-in: "
                         f"{list(QUERY_PATTERNS)}, 'search', or module:function")
    k = int(length)
    if k < 1:
        raise InputError(f"a vector of query answers needs length >= 1, got {length!r}")
    if not (np.isfinite(far) and far >= 0):
        raise InputError(f"the far pattern's distance must be finite and >= 0, got {far!r}")
    a, b = (np.asarray(v[:k], dtype=float) for v in _PATTERNS[name](max(k, 2), far))
    if not query_neighbours(a, b, relation):
        raise InputError(f"pattern {name!r} is not a neighbour under {relation}: it moves "
                         f"{a.tolist()} to {b.tolist()}")
    return a, b


def far_distance(epsilon: float) -> float:
    """The far pattern's distance for a claim of ``epsilon``: the Laplace scale of a
    sensitivity-1 answer (1/epsilon), or :data:`FAR` where the claim gives none.

    Examples
    --------
    >>> far_distance(0.5), far_distance(float("inf"))
    (2.0, 10.0)
    """
    eps = float(epsilon)
    return 1.0 / eps if np.isfinite(eps) and eps > 0 else FAR


def query_neighbours(a: np.ndarray, b: np.ndarray, relation: str) -> bool:
    """Whether two answer vectors are neighbours under ``relation`` (see above).

    Examples
    --------
    >>> query_neighbours(np.array([1.0, 1.0]), np.array([2.0, 0.0]), "replace_one")
    True
    >>> query_neighbours(np.array([1.0, 1.0]), np.array([2.0, 2.0]), "add_remove")
    False
    """
    d = np.asarray(b, float) - np.asarray(a, float)
    if d.shape != np.shape(a) or np.abs(d).max(initial=0.0) > 1.0:
        return False
    if relation == "componentwise":
        return True
    up, down = float(np.clip(d, 0, None).sum()), float(np.clip(-d, 0, None).sum())
    if relation == "add_remove":
        return up + down <= 1.0
    return up <= 1.0 and down <= 1.0


def query_search_pairs(length: int, relation: str, far: float = FAR
                       ) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Every pattern the relation allows for answer vectors of ``length``, duplicates once.

    A pattern and its swap (D and D' exchanged) are one pair: audits test both
    orientations of every pair.

    Examples
    --------
    >>> [n for n, _, _ in query_search_pairs(1, "componentwise")]
    ['one_above', 'one_below']
    >>> len(query_search_pairs(10, "componentwise"))
    10
    """
    out: list[tuple[str, np.ndarray, np.ndarray]] = []
    seen: set[tuple[bytes, bytes]] = set()
    for name in _PATTERNS_OF[check_query_relation(relation)]:
        if length < 2 and name in ("one_up_one_down", "x_shape"):
            continue
        a, b = query_pair(name, length, relation, far)
        key = (a.tobytes(), b.tobytes())
        if key in seen or (b.tobytes(), a.tobytes()) in seen:
            continue
        seen.add(key)
        out.append((name, a, b))
    return out
