"""Datasets, neighbouring pairs, and the pair generators under both relations."""

from __future__ import annotations

import numpy as np
import pytest

from dpverify.core.data import (
    PAIR_GENERATORS,
    Dataset,
    NeighbourPair,
    as_dataset,
    make_pair,
    synthetic_classification,
    synthetic_regression,
)
from dpverify.core.errors import InputError

RELATIONS = ("add_remove", "replace_one")


def _differing_rows(A: Dataset, B: Dataset) -> list[int]:
    same = ((A.X == B.X) | (np.isnan(A.X) & np.isnan(B.X))).all(axis=1)
    same &= (A.y == B.y) | (np.isnan(A.y) & np.isnan(B.y))
    return list(np.flatnonzero(~same))


# ---------------------------------------------------------------------------------------
# Dataset


@pytest.mark.parametrize("where", ["X", "y"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_data_are_refused_naming_the_record(small_data, where, bad):
    X, y = small_data.X.copy(), small_data.y.copy()
    if where == "X":
        X[3, 1] = bad
    else:
        y[3] = bad
    with pytest.raises(InputError, match="non-finite .* first at record 3"):
        Dataset(X, y)
    assert Dataset(X, y, allow_nonfinite=True).n == small_data.n


def test_nonfinite_error_names_the_first_bad_record():
    X = np.zeros((5, 2))
    X[4, 0] = np.nan
    X[2, 1] = np.inf
    with pytest.raises(InputError, match="record 2: x=\\[0.0, inf\\]"):
        Dataset(X, np.zeros(5))


@pytest.mark.parametrize("X, y, word", [
    (np.zeros(4), np.zeros(4), "shape \\(n, d\\)"),
    (np.zeros((4, 2)), np.zeros(3), "labels y must have shape \\(4,\\)"),
    (np.zeros((4, 2)), np.zeros((4, 1)), "labels y"),
])
def test_dataset_shapes_are_checked(X, y, word):
    with pytest.raises(InputError, match=word):
        Dataset(X, y)


def test_dataset_edits(small_data):
    D = small_data
    assert (D.n, D.d) == (6, 3)
    W = D.without(2)
    assert W.n == 5 and _differing_rows(W, Dataset(np.delete(D.X, 2, 0), np.delete(D.y, 2))) == []
    R = D.replaced(1, np.array([9.0, 9.0, 9.0]), 1.0)
    assert _differing_rows(D, R) == [1] and R.y[1] == 1.0
    assert D.X[1, 0] == 0.0  # the original is untouched
    A = D.with_record(np.array([7.0, 7.0, 7.0]), -1.0, index=2)
    assert A.n == 7 and A.X[2].tolist() == [7.0, 7.0, 7.0]
    assert A.without(2).X.tolist() == D.X.tolist()
    # A non-finite record may be put in on purpose (canaries); the dataset then allows it.
    nan_rec = D.replaced(0, np.array([np.nan, 0.0, 0.0]), 1.0)
    assert nan_rec.allow_nonfinite and not D.allow_nonfinite


# ---------------------------------------------------------------------------------------
# NeighbourPair


def test_neighbour_pair_constructors(small_data):
    ar = NeighbourPair.add_remove(small_data, 4, "lbl")
    assert (ar.relation, ar.index, ar.label, ar.D.n, ar.D_prime.n) == ("add_remove", 4, "lbl", 6, 5)
    assert _differing_rows(ar.D.without(4), ar.D_prime) == []
    ro = NeighbourPair.replace_one(small_data, 2, np.ones(3), 1.0)
    assert (ro.relation, ro.index) == ("replace_one", 2)
    assert _differing_rows(ro.D, ro.D_prime) == [2]


@pytest.mark.parametrize("make, word", [
    (lambda D: NeighbourPair(D, D.without(0), "replace_one", 0), "equal sizes"),
    (lambda D: NeighbourPair(D, D, "add_remove", 0), "differ by one record"),
    (lambda D: NeighbourPair(D, D.without(0).without(0), "add_remove", 0), "differ by one"),
    (lambda D: NeighbourPair(D, Dataset(np.zeros((6, 2)), np.zeros(6)), "replace_one", 0),
     "dimension"),
    (lambda D: NeighbourPair(D, D, "replace_one", 6), "out of range"),
    (lambda D: NeighbourPair(D, D, "replace_one", -1), "out of range"),
    (lambda D: NeighbourPair(D, D, "swap", 0), "relation"),
])
def test_neighbour_pair_validation(small_data, make, word):
    with pytest.raises(InputError, match=word):
        make(small_data)


@pytest.mark.parametrize("i", [0, 3, 5])
def test_from_datasets_infers_add_remove_in_both_directions(small_data, i):
    smaller = small_data.without(i)
    for A, B in ((small_data, smaller), (smaller, small_data)):
        pair = NeighbourPair.from_datasets(A, B, "x")
        assert (pair.relation, pair.index, pair.label) == ("add_remove", i, "x")
        assert pair.D is A and pair.D_prime is B


def test_from_datasets_infers_replace_one(small_data):
    other = small_data.replaced(4, np.array([0.0, 0.0, 1.0]), 1.0)
    pair = NeighbourPair.from_datasets(small_data, other)
    assert (pair.relation, pair.index) == ("replace_one", 4)
    # A label change alone is a replacement too.
    relabelled = small_data.replaced(1, small_data.X[1], 1.0)
    assert NeighbourPair.from_datasets(small_data, relabelled).index == 1
    # Identical datasets: a (null) replace-one pair.
    assert NeighbourPair.from_datasets(small_data, small_data).relation == "replace_one"


def test_from_datasets_treats_equal_nans_as_equal():
    X = np.array([[np.nan, 1.0], [2.0, 3.0], [4.0, 5.0]])
    D = Dataset(X, np.zeros(3), allow_nonfinite=True)
    pair = NeighbourPair.from_datasets(D, D.without(2))
    assert (pair.relation, pair.index) == ("add_remove", 2)


@pytest.mark.parametrize("make, word", [
    (lambda D: (D, D.replaced(0, np.ones(3) * 5, 1.0).replaced(1, np.ones(3) * 5, 1.0)),
     "differ in 2"),
    (lambda D: (D, D.without(0).without(0)), "differ by one record"),
    (lambda D: (D, D.without(0).replaced(0, np.ones(3) * 7, 1.0)), "plus a single record"),
    (lambda D: (D, Dataset(np.zeros((6, 2)), np.zeros(6))), "dimension"),
])
def test_from_datasets_refuses_non_neighbours(small_data, make, word):
    A, B = make(small_data)
    with pytest.raises(InputError, match=word):
        NeighbourPair.from_datasets(A, B)


# ---------------------------------------------------------------------------------------
# Generators


@pytest.fixture
def base() -> Dataset:
    D, _ = synthetic_classification(20, 4, np.random.default_rng(0))
    return D


@pytest.mark.parametrize("name", sorted(PAIR_GENERATORS))
@pytest.mark.parametrize("relation", RELATIONS)
def test_every_generator_makes_a_valid_pair_under_both_relations(base, name, relation):
    pair = make_pair(name, base, np.random.default_rng(3), relation)
    assert pair.relation == relation
    assert pair.D.d == base.d
    if relation == "replace_one":
        assert pair.D.n == pair.D_prime.n == base.n
        assert _differing_rows(pair.D, pair.D_prime) in ([pair.index], [])
        # D is the data and D' holds the canary, but for opposite corners, one in each;
        # zero_base puts them among records of its own.
        if name != "zero_base":
            moved = [pair.index] if name == "box_corners" else []
            assert _differing_rows(pair.D, base) == moved
    else:
        assert abs(pair.D.n - pair.D_prime.n) == 1
        big, small = (pair.D, pair.D_prime) if pair.D.n > pair.D_prime.n else (
            pair.D_prime, pair.D)
        assert _differing_rows(big.without(pair.index), small) == []
    # The pair can be inferred back from its two datasets.
    back = NeighbourPair.from_datasets(pair.D, pair.D_prime)
    assert back.relation == relation
    if relation == "add_remove":
        row = lambda P: (P.D if P.D.n > P.D_prime.n else P.D_prime).X[P.index]  # noqa: E731
        np.testing.assert_array_equal(row(back), row(pair))


def _canary(pair: NeighbourPair) -> tuple[np.ndarray, float]:
    """The record that is in one dataset of the pair and not the other."""
    if pair.relation == "replace_one":
        return pair.D_prime.X[pair.index], float(pair.D_prime.y[pair.index])
    big = pair.D if pair.D.n > pair.D_prime.n else pair.D_prime
    return big.X[pair.index], float(big.y[pair.index])


@pytest.mark.parametrize("relation", RELATIONS)
def test_canary_properties(base, relation):
    rng = np.random.default_rng(1)
    x, y = _canary(make_pair("fresh_direction", base, rng, relation))
    assert np.linalg.norm(x) == pytest.approx(1.0)
    assert y == (-1.0 if base.y.mean() >= 0 else 1.0)
    x, y = _canary(make_pair("clip_boundary", base, rng, relation))
    i = int(np.argmax(np.linalg.norm(base.X, axis=1)))
    assert np.linalg.norm(x) == pytest.approx(1.0)
    np.testing.assert_allclose(x, base.X[i] / np.linalg.norm(base.X[i]))
    assert y == -base.y[i]
    x, _ = _canary(make_pair("outlier", base, rng, relation))
    assert np.linalg.norm(x) == pytest.approx(100.0)
    x, _ = _canary(make_pair("nonfinite", base, rng, relation))
    assert np.isinf(x[0]) and np.isnan(x[1:]).all()


def test_fresh_direction_is_orthogonal_to_the_data_when_it_can_be():
    D = Dataset(np.random.default_rng(0).standard_normal((3, 6)), np.ones(3))
    x, _ = _canary(make_pair("fresh_direction", D, np.random.default_rng(2)))
    np.testing.assert_allclose(D.X @ x, 0.0, atol=1e-12)


def test_random_pair_replacement_lies_in_the_unit_ball(base):
    for seed in range(5):
        x, y = _canary(make_pair("random", base, np.random.default_rng(seed), "replace_one"))
        assert np.linalg.norm(x) <= 1.0 + 1e-12 and y in (-1.0, 1.0)


def test_make_pair_from_a_user_function(tmp_path, base):
    mod = tmp_path / "my_pairs.py"
    mod.write_text(
        "import numpy as np\n"
        "def datasets():\n"
        "    X = np.eye(3)\n"
        "    return (X, np.zeros(3)), (X[:2], np.zeros(2))\n"
        "def not_a_pair():\n"
        "    return 42\n"
    )
    pair = make_pair(f"{mod}:datasets", base, np.random.default_rng(0))
    assert (pair.relation, pair.index, pair.D.n, pair.D_prime.n) == ("add_remove", 2, 3, 2)
    assert pair.label == f"{mod}:datasets"
    with pytest.raises(InputError, match="must return \\(D, D_prime\\)"):
        make_pair(f"{mod}:not_a_pair", base, np.random.default_rng(0))
    with pytest.raises(InputError, match="no callable 'absent'"):
        make_pair(f"{mod}:absent", base, np.random.default_rng(0))


def test_make_pair_refuses_unknown_specs(base):
    with pytest.raises(InputError, match="unknown neighbouring-pair generator 'nearby'"):
        make_pair("nearby", base, np.random.default_rng(0))
    with pytest.raises(InputError, match="relation"):
        make_pair("random", base, np.random.default_rng(0), "swap")


# ---------------------------------------------------------------------------------------
# Synthetic data and coercion


@pytest.mark.parametrize("make", [synthetic_classification, synthetic_regression])
def test_synthetic_data_is_in_the_ball_and_reproducible(make):
    D, w = make(50, 4, np.random.default_rng(7), radius=2.0)
    assert (D.n, D.d) == (50, 4) and np.linalg.norm(w) == pytest.approx(1.0)
    assert np.all(np.linalg.norm(D.X, axis=1) <= 2.0 + 1e-12)
    D2, _ = make(50, 4, np.random.default_rng(7), radius=2.0)
    np.testing.assert_array_equal(D.X, D2.X)
    np.testing.assert_array_equal(D.y, D2.y)


def test_classification_labels_are_signs_and_follow_the_direction():
    D, w = synthetic_classification(400, 3, np.random.default_rng(1), margin_noise=0.0)
    assert set(np.unique(D.y)) == {-1.0, 1.0}
    np.testing.assert_array_equal(D.y, np.where(D.X @ w >= 0, 1.0, -1.0))


def test_as_dataset():
    D = Dataset(np.eye(2), np.ones(2))
    assert as_dataset(D) is D
    t = as_dataset((np.eye(2), [1.0, 2.0]))
    assert t.y.tolist() == [1.0, 2.0]
    v = as_dataset([1.0, 2.0, 3.0])
    assert (v.n, v.d) == (3, 1) and v.y.tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(InputError, match="non-finite"):
        as_dataset(([[np.nan]], [0.0]))


# ---------------------------------------------------------------------------------------
# Vectors of query answers


@pytest.mark.parametrize("relation", ["add_remove", "replace_one", "componentwise"])
@pytest.mark.parametrize("k", [1, 2, 5, 10])
def test_search_pairs_are_neighbours_and_distinct(relation: str, k: int) -> None:
    from dpverify.core.data import query_neighbours, query_search_pairs

    pairs = query_search_pairs(k, relation)
    assert pairs and all(a.shape == b.shape == (k,) for _, a, b in pairs)
    assert all(query_neighbours(a, b, relation) for _, a, b in pairs)
    keys = {(a.tobytes(), b.tobytes()) for _, a, b in pairs}
    assert len(keys) == len(pairs)
    assert all((b.tobytes(), a.tobytes()) not in keys for _, a, b in pairs)  # no swaps


def test_statdp_patterns_per_relation() -> None:
    from dpverify.core.data import query_pair, query_search_pairs

    names = [n for n, _, _ in query_search_pairs(10, "componentwise")]
    assert names == ["one_above", "one_below", "one_above_rest_below", "one_below_rest_above",
                     "one_below_rest_far_above", "half_half", "most_above_rest_below",
                     "all_above", "all_below", "x_shape"]
    assert [n for n, _, _ in query_search_pairs(5, "add_remove")] == ["one_above", "one_below"]
    assert "one_up_one_down" in [n for n, _, _ in query_search_pairs(5, "replace_one")]
    a, b = query_pair("x_shape", 4)
    assert a.tolist() == [1.0, 1.0, 0.0, 0.0] and b.tolist() == [0.0, 0.0, 1.0, 1.0]


@pytest.mark.parametrize("name, relation, word", [
    ("all_above", "add_remove", "not a neighbour"),
    ("one_up_one_down", "add_remove", "not a neighbour"),
    ("zigzag", "componentwise", "unknown query-answer pattern"),
    ("one_above", "swap_two", "must be one of"),
])
def test_bad_patterns_are_refused(name: str, relation: str, word: str) -> None:
    from dpverify.core.data import query_pair

    with pytest.raises(InputError, match=word):
        query_pair(name, 4, relation)


def test_the_far_pattern_follows_the_claim() -> None:
    from dpverify.core.data import far_distance, query_pair

    a, b = query_pair("one_below_rest_far_above", 4, far=far_distance(0.25))
    assert a.tolist() == [1.0, 5.0, 5.0, 5.0] and b.tolist() == [0.0, 6.0, 6.0, 6.0]
    with pytest.raises(InputError, match="far pattern's distance"):
        query_pair("one_below_rest_far_above", 4, far=float("nan"))
