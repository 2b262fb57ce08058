"""The curator: noisy releases, sampling, the trial axis, the ledger and replay on neighbours."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import scipy.stats

from dpverify.accounting.accountant import account_ledger, zcdp_of_ledger
from dpverify.core.curator import Batch, Curator
from dpverify.core.data import Dataset, NeighbourPair
from dpverify.core.errors import InputError

# ---------------------------------------------------------------------------------------
# Noise distributions


@pytest.mark.statistical
def test_gaussian_release_has_the_declared_mean_and_std(small_data, sum_query):
    """Answers are q(D) + N(0, s^2) per trial and coordinate.

    K = 20000 trials, 3 coordinates: the mean is within 5 standard errors of q(D) and the
    sample std within 5 of its standard errors of s (failure probability below 1e-5 for a
    correct curator, by a union bound over the 6 comparisons), and the standardized noise
    passes a Kolmogorov-Smirnov test against N(0, 1) at level 1e-4.
    """
    K, s = 20_000, 2.5
    cur = Curator(small_data, trials=K, rng=12345)
    ans = cur.gaussian("sum", sum_query, sensitivity=1.0, noise_std=s)
    truth = small_data.X.sum(axis=0)
    assert ans.shape == (K, small_data.d)
    se_mean = s / math.sqrt(K)
    se_std = s / math.sqrt(2 * K)  # asymptotic SE of the sample std of a normal
    np.testing.assert_array_less(np.abs(ans.mean(axis=0) - truth), 5 * se_mean)
    np.testing.assert_array_less(np.abs(ans.std(axis=0, ddof=1) - s), 5 * se_std)
    z = ((ans - truth) / s).ravel()
    assert scipy.stats.kstest(z, "norm").pvalue > 1e-4


@pytest.mark.statistical
def test_laplace_release_has_the_declared_mean_and_scale(small_data, sum_query):
    """Answers are q(D) + Laplace(b) per trial and coordinate (std b sqrt 2).

    K = 20000 trials: the mean is within 5 standard errors (b sqrt(2/K)) of q(D); the
    sample std within 5 standard errors of b sqrt 2, with the SE sqrt((mu4 - s^4) / K) /
    (2 s) of a Laplace (mu4 = 24 b^4); a KS test against Laplace(0, 1) at level 1e-4.
    Failure probability below 1e-4 for a correct curator.
    """
    K, b = 20_000, 0.7
    cur = Curator(small_data, trials=K, rng=777)
    ans = cur.laplace("sum", sum_query, sensitivity=1.0, scale=b)
    truth = small_data.X.sum(axis=0)
    sd = b * math.sqrt(2.0)
    se_mean = sd / math.sqrt(K)
    se_std = math.sqrt((24 * b**4 - sd**4) / K) / (2 * sd)
    np.testing.assert_array_less(np.abs(ans.mean(axis=0) - truth), 5 * se_mean)
    np.testing.assert_array_less(np.abs(ans.std(axis=0, ddof=1) - sd), 5 * se_std)
    assert scipy.stats.kstest(((ans - truth) / b).ravel(), "laplace").pvalue > 1e-4


def test_zero_noise_returns_the_exact_query(small_data, sum_query):
    cur = Curator(small_data, trials=4, rng=0)
    ans = cur.gaussian("sum", sum_query, sensitivity=1.0, noise_std=0.0)
    np.testing.assert_array_equal(ans, np.tile(small_data.X.sum(axis=0), (4, 1)))


# ---------------------------------------------------------------------------------------
# The ledger


def test_ledger_records_the_declared_sensitivity_noise_and_sampling(small_data, sum_query):
    cur = Curator(small_data, trials=5, rng=3, keep_answers=True)
    cur.step(7)
    batch = cur.sample("poisson", rate=0.25)
    ans = cur.gaussian("g", sum_query, sensitivity=2.0, noise_std=3.0, batch=batch)
    cur.step(8)
    cur.laplace("l", lambda X, y, w: w @ y[:, None], sensitivity=0.5, scale=4.0)
    g, lap = cur.ledger.releases
    assert (g.index, g.name, g.mechanism, g.norm) == (0, "g", "gaussian", "l2")
    assert (g.sensitivity, g.noise, g.noise_multiplier) == (2.0, 3.0, 1.5)
    assert (g.sampling, g.rate, g.batch_size, g.dataset_size) == ("poisson", 0.25, None, 6)
    assert (g.step, g.shape) == (7, (3,))
    assert g.touched is None  # amplified sampling is charged to every record
    np.testing.assert_array_equal(cur.ledger.records[0].answer, ans)
    assert (lap.mechanism, lap.norm, lap.sensitivity, lap.noise) == ("laplace", "l1", 0.5, 4.0)
    assert (lap.sampling, lap.rate, lap.batch_size, lap.step, lap.shape) == (
        "full", 1.0, 6, 8, (1,))
    assert len(cur.ledger) == 2 and cur.ledger.trials == 5
    # Gradient evaluations of trial 0: its Poisson batch, then the full batch.
    assert cur.ledger.records_touched == int(batch.weights[0].sum()) + 6
    sig = cur.ledger.signature()
    assert sig[0] == ("g", "gaussian", 2.0, 3.0, "poisson", 0.25, None, (3,))
    assert g.summary()["shape"] == [3] and g.summary()["noise"] == 3.0


def test_exact_release_is_noise_free_and_costs_infinite_epsilon(small_data, sum_query):
    cur = Curator(small_data, trials=3, rng=0)
    cur.gaussian("fine", sum_query, sensitivity=1.0, noise_std=5.0)
    ans = cur.exact("peek", sum_query)
    np.testing.assert_array_equal(ans, np.tile(small_data.X.sum(axis=0), (3, 1)))
    rel = cur.ledger.releases[1]
    assert (rel.mechanism, rel.sensitivity, rel.noise, rel.noise_multiplier) == (
        "exact", None, 0.0, 0.0)
    res = account_ledger(cur.ledger, 1e-5)
    assert res.epsilon == math.inf and res.by_accountant == {"pld": math.inf, "rdp": math.inf}
    assert zcdp_of_ledger(cur.ledger) == math.inf


def test_n_public_is_the_dataset_size_in_the_ledger_and_rates():
    D = Dataset(np.ones((10, 2)), np.zeros(10))
    cur = Curator(D, trials=2, rng=0, n_public=40)
    b = cur.sample("uniform_without_replacement", size=4)
    cur.gaussian("g", lambda X, y, w: w @ X, sensitivity=1.0, noise_std=1.0, batch=b)
    assert cur.ledger.dataset_size == 40
    assert cur.ledger.releases[0].rate == pytest.approx(0.1)
    assert cur.full_batch().size == 40


# ---------------------------------------------------------------------------------------
# Sampling schemes


def _pool(n: int) -> Dataset:
    return Dataset(np.arange(n, dtype=float)[:, None], np.zeros(n))


@pytest.mark.statistical
def test_poisson_sampling_rate():
    """Each record is in each trial's batch independently with probability q.

    N = 200, q = 0.1, K = 2000 trials: the mean batch size is within 5 standard errors of
    qN and every record's inclusion count within 5 binomial standard deviations of qK
    (failure probability below 1e-4 by a union bound over the 201 comparisons).
    """
    N, q, K = 200, 0.1, 2000
    b = Curator(_pool(N), trials=K, rng=2024).sample("poisson", rate=q)
    assert (b.scheme, b.rate, b.size) == ("poisson", q, None)
    assert set(np.unique(b.weights)) <= {0.0, 1.0}
    sizes = b.weights.sum(axis=1)
    assert abs(sizes.mean() - q * N) < 5 * math.sqrt(N * q * (1 - q) / K)
    assert sizes.std() > 0  # the batch size itself is random
    per_record = b.weights.sum(axis=0)
    assert np.all(np.abs(per_record - q * K) < 5 * math.sqrt(K * q * (1 - q)))


@pytest.mark.statistical
def test_uniform_without_replacement_has_exact_size_and_no_duplicates():
    """Every batch has exactly ``size`` distinct records; each record is equally likely.

    N = 200, size 17, K = 2000: per-record inclusion counts within 5 binomial standard
    deviations of K size / N (failure probability below 1e-4 over the 200 records).
    """
    N, m, K = 200, 17, 2000
    b = Curator(_pool(N), trials=K, rng=5).sample("uniform_without_replacement", size=m)
    assert (b.scheme, b.size) == ("uniform_without_replacement", m)
    assert b.rate == pytest.approx(m / N)
    assert set(np.unique(b.weights)) <= {0.0, 1.0}  # no record twice
    np.testing.assert_array_equal(b.weights.sum(axis=1), np.full(K, m))
    p = m / N
    assert np.all(np.abs(b.weights.sum(axis=0) - p * K) < 5 * math.sqrt(K * p * (1 - p)))


@pytest.mark.statistical
def test_uniform_with_replacement_counts_sum_to_size():
    """Counts are non-negative integers summing to ``size`` in every trial.

    25 draws from 30 slots all differ with probability 30!/(5! 30^25) < 3e-7, so a correct
    sampler shows a repeat in more than 99% of K = 500 trials, and two trials draw the same
    counts with negligible probability (failure probability below 1e-6 overall).
    """
    N, m, K = 30, 25, 500
    b = Curator(_pool(N), trials=K, rng=9).sample("uniform_with_replacement", size=m)
    assert (b.scheme, b.size) == ("uniform_with_replacement", m)
    w = b.weights
    assert np.all(w >= 0) and np.all(w == np.round(w))
    np.testing.assert_array_equal(w.sum(axis=1), np.full(K, m))
    assert np.mean(w.max(axis=1) > 1) > 0.99
    # Trials draw independently.
    assert len({tuple(row) for row in w}) > K - 5


def test_uniform_with_replacement_reproducible_from_seed():
    a = Curator(_pool(40), trials=7, rng=11).sample("uniform_with_replacement", size=12)
    b = Curator(_pool(40), trials=7, rng=11).sample("uniform_with_replacement", size=12)
    np.testing.assert_array_equal(a.weights, b.weights)


def test_shuffled_epoch_covers_every_record_exactly_once():
    N, m, K = 23, 5, 50
    cur = Curator(_pool(N), trials=K, rng=1)
    batches = cur.epoch(m, epoch=3)
    assert [b.size for b in batches] == [5, 5, 5, 5, 3]
    assert all(b.scheme == "shuffle" and b.epoch == 3 for b in batches)
    assert [b.rate for b in batches] == pytest.approx([5 / 23] * 4 + [3 / 23])
    total = sum(b.weights for b in batches)
    np.testing.assert_array_equal(total, np.ones((K, N)))  # each record once per trial
    for b in batches:
        assert set(np.unique(b.weights)) <= {0.0, 1.0}
        np.testing.assert_array_equal(b.weights.sum(axis=1), np.full(K, b.size))
    # Each trial shuffles independently.
    first = batches[0].weights
    assert len({tuple(row) for row in first}) > 1


def test_full_batch_is_every_record_in_every_trial():
    b = Curator(_pool(9), trials=4, rng=0).full_batch()
    assert (b.scheme, b.rate, b.size) == ("full", 1.0, 9)
    np.testing.assert_array_equal(b.weights, np.ones((4, 9)))
    assert Curator(_pool(9), trials=4, rng=0).sample("full").scheme == "full"


@pytest.mark.parametrize(
    "scheme, kwargs",
    [
        ("poisson", {}),
        ("poisson", {"rate": 0.0}),
        ("poisson", {"rate": 1.5}),
        ("poisson", {"rate": float("nan")}),
        ("uniform_without_replacement", {}),
        ("uniform_without_replacement", {"size": 0}),
        ("uniform_without_replacement", {"size": 11}),
        ("uniform_with_replacement", {"size": -1}),
        ("reservoir", {"size": 3}),
    ],
)
def test_bad_sampling_requests_are_input_errors(scheme, kwargs):
    with pytest.raises(InputError, match=scheme if scheme == "reservoir" else "sampling"):
        Curator(_pool(10), rng=0).sample(scheme, **kwargs)


@pytest.mark.parametrize("size", [0, 11])
def test_bad_epoch_size_is_an_input_error(size):
    with pytest.raises(InputError, match="epoch batch size"):
        Curator(_pool(10), rng=0).epoch(size)


# ---------------------------------------------------------------------------------------
# The trial axis


@pytest.mark.statistical
def test_trials_are_independent(small_data, sum_query):
    """K trials give K independent answers: no two equal, and no correlation between trials.

    K = 4000 trials: the lag-1 sample correlation of the noise across trials is within
    5/sqrt(K) of zero for each coordinate (failure probability below 2e-6 each), and the
    covariance across coordinates is the identity times s^2 within 5 standard errors.
    """
    K, s = 4000, 1.0
    cur = Curator(small_data, trials=K, rng=99)
    ans = cur.gaussian("sum", sum_query, sensitivity=1.0, noise_std=s)
    assert len({tuple(r) for r in ans}) == K
    noise = ans - small_data.X.sum(axis=0)
    for j in range(small_data.d):
        r = np.corrcoef(noise[:-1, j], noise[1:, j])[0, 1]
        assert abs(r) < 5 / math.sqrt(K)
    cov = np.cov(noise.T)
    np.testing.assert_array_less(np.abs(cov - np.eye(small_data.d)), 5 * math.sqrt(2 / K))
    # Sampling is independent across trials too.
    w = cur.sample("poisson", rate=0.5).weights
    assert len({tuple(r) for r in w}) > 1


def test_a_query_with_the_wrong_leading_shape_is_an_input_error(small_data):
    cur = Curator(small_data, trials=4, rng=0)
    with pytest.raises(InputError, match="leading trial axis of 4"):
        cur.gaussian("bad", lambda X, y, w: X.sum(axis=0), sensitivity=1.0, noise_std=1.0)
    with pytest.raises(InputError, match="got shape \\(1, 3\\)"):
        cur.laplace("bad", lambda X, y, w: (w @ X)[:1], sensitivity=1.0, scale=1.0)
    assert len(cur.ledger) == 0  # a refused release is not recorded


def test_answers_are_reproducible_from_the_seed(small_data, sum_query):
    def run(seed):
        cur = Curator(small_data, trials=6, rng=seed)
        b = cur.sample("poisson", rate=0.5)
        return cur.gaussian("g", sum_query, sensitivity=1.0, noise_std=1.0, batch=b)

    np.testing.assert_array_equal(run(4), run(4))
    np.testing.assert_array_equal(run(np.random.SeedSequence(4)), run(np.random.SeedSequence(4)))
    assert not np.array_equal(run(4), run(5))


# ---------------------------------------------------------------------------------------
# Replay on neighbours


def test_replay_replace_one_records_the_true_difference(small_data, sum_query):
    x_new = np.array([0.0, -4.0, 0.0])
    pair = NeighbourPair.replace_one(small_data, 2, x_new, -1.0)
    cur = Curator.replay(pair, trials=4, rng=0)
    assert cur.replaying and cur.pair is pair
    ans = cur.gaussian("sum", sum_query, sensitivity=2.0, noise_std=0.0)
    rel = cur.ledger.records[0]
    s_D = small_data.X.sum(axis=0)
    s_Dp = s_D - small_data.X[2] + x_new
    np.testing.assert_allclose(rel.value_D, np.tile(s_D, (4, 1)))
    np.testing.assert_allclose(rel.value_D_prime, np.tile(s_Dp, (4, 1)))
    # ||(0, 0, 3) - (0, -4, 0)|| = 5, by hand.
    np.testing.assert_allclose(rel.true_difference, np.full(4, 5.0))
    assert rel.value_out is None and rel.included.all()
    np.testing.assert_allclose(ans, np.tile(s_D, (4, 1)))  # the algorithm sees D


def test_replay_laplace_difference_is_in_l1(small_data, sum_query):
    x_new = np.array([2.0, -4.0, 3.0])
    pair = NeighbourPair.replace_one(small_data, 0, x_new, 1.0)
    cur = Curator.replay(pair, trials=2, rng=0)
    cur.laplace("sum", sum_query, sensitivity=10.0, scale=1.0)
    # |1 - 2| + |0 + 4| + |0 - 3| = 8
    np.testing.assert_allclose(cur.ledger.records[0].true_difference, [8.0, 8.0])


def test_replay_add_remove_with_D_larger(small_data, sum_query):
    pair = NeighbourPair.add_remove(small_data, 1)  # D has record 1, D' does not
    cur = Curator.replay(pair, trials=3, rng=0)
    ans = cur.gaussian("sum", sum_query, sensitivity=1.0, noise_std=0.0)
    rel = cur.ledger.records[0]
    np.testing.assert_allclose(rel.value_D - rel.value_D_prime, np.tile([0.0, 2.0, 0.0], (3, 1)))
    np.testing.assert_allclose(rel.true_difference, [2.0, 2.0, 2.0])
    np.testing.assert_allclose(ans, np.tile(small_data.X.sum(axis=0), (3, 1)))
    assert cur.ledger.dataset_size == small_data.n


def test_replay_add_remove_with_D_smaller(small_data, sum_query):
    smaller = small_data.without(4)
    pair = NeighbourPair.from_datasets(smaller, small_data)
    assert (pair.relation, pair.index) == ("add_remove", 4)
    cur = Curator.replay(pair, trials=3, rng=0)
    ans = cur.gaussian("sum", sum_query, sensitivity=1.0, noise_std=0.0)
    rel = cur.ledger.records[0]
    np.testing.assert_allclose(rel.value_D, np.tile(smaller.X.sum(axis=0), (3, 1)))
    np.testing.assert_allclose(rel.value_D_prime, np.tile(small_data.X.sum(axis=0), (3, 1)))
    np.testing.assert_allclose(rel.true_difference, np.full(3, np.linalg.norm([0.5, -0.5, 0.25])))
    np.testing.assert_allclose(ans, np.tile(smaller.X.sum(axis=0), (3, 1)))
    assert cur.ledger.dataset_size == smaller.n  # the public size is D's


@pytest.mark.parametrize("larger", [True, False])
def test_replay_shows_a_query_that_ignores_its_weights_the_records_of_its_world(small_data,
                                                                                larger):
    """A query summing every row, weights or not, sees the removed record only where it is:
    its replayed difference is that record, as a run on each dataset would show."""
    i = 2
    pair = (NeighbourPair.add_remove(small_data, i) if larger
            else NeighbourPair.from_datasets(small_data.without(i), small_data))
    cur = Curator.replay(pair, trials=3, rng=0)
    ignores_w = lambda X, y, w: np.tile(X.sum(axis=0), (w.shape[0], 1))  # noqa: E731
    ans = cur.gaussian("sum", ignores_w, sensitivity=1.0, noise_std=0.0,
                       batch=cur.sample("poisson", rate=0.5))
    rel = cur.ledger.records[0]
    np.testing.assert_allclose(rel.true_difference, np.full(3, np.linalg.norm(small_data.X[i])))
    np.testing.assert_allclose(ans, np.tile(pair.D.X.sum(axis=0), (3, 1)))


def test_replay_refuses_an_add_remove_pair_whose_rows_do_not_line_up(small_data):
    shuffled = Dataset(small_data.X[::-1][1:], small_data.y[::-1][1:])
    pair = NeighbourPair(small_data, shuffled, "add_remove", 0)
    with pytest.raises(InputError, match="without record 0"):
        Curator.replay(pair, trials=2, rng=0)


def test_replay_uses_the_same_randomness_as_a_plain_run(small_data, sum_query):
    """On D larger the slots are D's: a replayed run hands the algorithm the same answers."""

    def steps(cur):
        out = [cur.gaussian("a", sum_query, sensitivity=1.0, noise_std=1.0)]
        b = cur.sample("poisson", rate=0.5)
        out.append(cur.gaussian("b", sum_query, sensitivity=1.0, noise_std=1.0, batch=b))
        return out

    plain = steps(Curator(small_data, trials=5, rng=31))
    replayed = steps(Curator.replay(NeighbourPair.add_remove(small_data, 3), trials=5, rng=31))
    for a, b in zip(plain, replayed, strict=True):
        np.testing.assert_allclose(a, b)


@pytest.mark.parametrize("larger", [True, False])
def test_replay_amplified_sampling_records_value_out_and_included(small_data, sum_query, larger):
    i = 1
    pair = (NeighbourPair.add_remove(small_data, i) if larger
            else NeighbourPair.from_datasets(small_data.without(i), small_data))
    K = 400
    cur = Curator.replay(pair, trials=K, rng=8)
    batch = cur.sample("poisson", rate=0.3)
    ans = cur.gaussian("sum", sum_query, sensitivity=1.0, noise_std=0.0, batch=batch)
    rel = cur.ledger.records[0]
    np.testing.assert_array_equal(rel.included, batch.weights[:, i] > 0)
    assert 0 < rel.included.sum() < K
    x_i = small_data.X[i]
    # value_D forces the differing record in, value_out leaves it out.
    if larger:
        np.testing.assert_allclose(rel.value_D - rel.value_out, np.tile(x_i, (K, 1)))
        np.testing.assert_allclose(rel.value_D_prime, rel.value_out)
    else:
        np.testing.assert_allclose(rel.value_D, rel.value_out)
        np.testing.assert_allclose(rel.value_D_prime - rel.value_out, np.tile(x_i, (K, 1)))
    np.testing.assert_allclose(rel.true_difference, np.full(K, np.linalg.norm(x_i)))
    # The answer on D is the batch actually drawn.
    present = np.ones(small_data.n)
    if not larger:
        present[i] = 0.0
    np.testing.assert_allclose(ans, (batch.weights * present) @ small_data.X)
    np.testing.assert_allclose(
        ans, np.where(rel.included[:, None], rel.value_D, rel.value_out))


def test_replay_uniform_sampling_is_amplified_and_shuffle_is_not(small_data, sum_query):
    cur = Curator.replay(NeighbourPair.add_remove(small_data, 0), trials=50, rng=2)
    cur.gaussian("u", sum_query, sensitivity=1.0, noise_std=1.0,
                 batch=cur.sample("uniform_without_replacement", size=3))
    cur.gaussian("r", sum_query, sensitivity=1.0, noise_std=1.0,
                 batch=cur.sample("uniform_with_replacement", size=3))
    ep = cur.epoch(3)
    cur.gaussian("s", sum_query, sensitivity=1.0, noise_std=1.0, batch=ep[0])
    u, r, s = cur.ledger.records
    assert u.value_out is not None and r.value_out is not None
    assert s.value_out is None
    np.testing.assert_array_equal(s.included, ep[0].weights[:, 0] > 0)
    np.testing.assert_array_equal(s.release.touched, ep[0].weights > 0)
    # Shuffled: D and D' differ exactly when record 0 is in the batch.
    np.testing.assert_allclose(s.true_difference, np.where(s.included, 1.0, 0.0))


# ---------------------------------------------------------------------------------------
# Invalid input


@pytest.mark.parametrize("noise", [-1.0, float("nan"), float("inf")])
def test_bad_noise_is_an_input_error(small_data, sum_query, noise):
    cur = Curator(small_data, rng=0)
    with pytest.raises(InputError, match="noise"):
        cur.gaussian("g", sum_query, sensitivity=1.0, noise_std=noise)
    with pytest.raises(InputError, match="noise"):
        cur.laplace("l", sum_query, sensitivity=1.0, scale=noise)
    assert len(cur.ledger) == 0


@pytest.mark.parametrize("sens", [-0.5, float("nan"), float("inf"), None, "one"])
def test_bad_sensitivity_is_an_input_error(small_data, sum_query, sens):
    cur = Curator(small_data, rng=0)
    with pytest.raises(InputError, match="sensitivity"):
        cur.gaussian("g", sum_query, sensitivity=sens, noise_std=1.0)
    with pytest.raises(InputError, match="sensitivity"):
        cur.laplace("l", sum_query, sensitivity=sens, scale=1.0)
    assert len(cur.ledger) == 0


@pytest.mark.parametrize("rng", ["seed", 1.5, np.random.RandomState(0), [1, 2]])
def test_rng_of_the_wrong_type_is_an_input_error(small_data, rng):
    with pytest.raises(InputError, match="rng must be"):
        Curator(small_data, rng=rng)


def test_accepted_rng_types(small_data, sum_query):
    for rng in (None, 3, np.int64(3), np.random.SeedSequence(3), np.random.default_rng(3)):
        cur = Curator(small_data, trials=2, rng=rng)
        assert cur.gaussian("g", sum_query, sensitivity=1.0, noise_std=1.0).shape == (2, 3)


@pytest.mark.parametrize("trials", [0, -2, 2.5, float("nan")])
def test_bad_trials_is_an_input_error(small_data, trials):
    with pytest.raises(InputError, match="trials"):
        Curator(small_data, trials=trials)


def test_explicit_batches_may_be_built_by_hand(small_data, sum_query):
    w = np.zeros((2, small_data.n))
    w[:, [0, 2]] = 1.0
    cur = Curator(small_data, trials=2, rng=0)
    ans = cur.gaussian("g", sum_query, sensitivity=1.0, noise_std=0.0,
                       batch=Batch("shuffle", w, 2 / 6, 2))
    np.testing.assert_allclose(ans, np.tile(small_data.X[[0, 2]].sum(axis=0), (2, 1)))
    # The same records in every trial: the ledger keeps one row.
    np.testing.assert_array_equal(cur.ledger.releases[0].touched, w[:1] > 0)


def test_touched_masks_stay_small_at_audit_trial_counts(small_data, sum_query):
    from dpverify.core.curator import TOUCHED_TRIALS

    cur = Curator(small_data, trials=200, rng=0)
    for b in cur.epoch(2):
        cur.gaussian("g", sum_query, sensitivity=1.0, noise_std=1.0, batch=b)
    assert all(r.touched.shape == (TOUCHED_TRIALS, small_data.n) for r in cur.ledger)


# ---------------------------------------------------------------------------------------
# The exponential mechanism


def _three_scores(X, y, w):
    """Scores (sum of x_0, 0, -inf): the third option is never offered."""
    s = w @ X[:, 0]
    return np.stack([s, 0.0 * s, np.full_like(s, -np.inf)], axis=1)


@pytest.mark.statistical
def test_exponential_selects_with_the_softmax_probabilities(small_data):
    """P(j) = exp(eps u_j / (2 Delta)) / sum_k exp(eps u_k / (2 Delta)).

    K = 20000 trials, 3 options (one never offered): a chi-square goodness-of-fit test of
    the two offered counts against the softmax at level 1e-4 (failure probability 1e-4 for
    a correct sampler); the unoffered option is never drawn.
    """
    K, eps, sens = 20_000, 1.0, 2.0
    cur = Curator(small_data, trials=K, rng=7)
    idx = cur.exponential("pick", _three_scores, sensitivity=sens, epsilon=eps)
    u = np.array([small_data.X[:, 0].sum(), 0.0])
    p = scipy.special.softmax(eps * u / (2 * sens))
    counts = np.bincount(idx, minlength=3)
    assert idx.shape == (K,) and counts[2] == 0
    assert scipy.stats.chisquare(counts[:2], K * p).pvalue > 1e-4


def test_exponential_ledger_entry_and_reproducibility(small_data):
    a = Curator(small_data, trials=50, rng=3)
    b = Curator(small_data, trials=50, rng=3)
    ia = a.exponential("pick", _three_scores, sensitivity=0.5, epsilon=2.0)
    ib = b.exponential("pick", _three_scores, sensitivity=0.5, epsilon=2.0)
    np.testing.assert_array_equal(ia, ib)
    r = a.ledger.releases[0]
    assert (r.mechanism, r.norm, r.sensitivity, r.epsilon, r.noise, r.shape) == (
        "exponential", "linf", 0.5, 2.0, 0.5, (3,))
    assert r.summary()["epsilon"] == 2.0


def test_replay_exponential_records_both_score_vectors_and_the_linf_difference(small_data):
    """Replay keeps both worlds' scores, selects on D's, and measures them in l-infinity;
    the -inf option, equal in both worlds, differs by 0."""
    pair = NeighbourPair.replace_one(small_data, 0, small_data.X[0] + 1.0, small_data.y[0])
    cur = Curator.replay(pair, trials=5, rng=1, keep_answers=True)
    idx = cur.exponential("pick", _three_scores, sensitivity=1.0, epsilon=1.0)
    plain = Curator(small_data, trials=5, rng=1).exponential(
        "pick", _three_scores, sensitivity=1.0, epsilon=1.0)
    np.testing.assert_array_equal(idx, plain)
    r = cur.ledger.records[0]
    assert r.value_D.shape == r.value_D_prime.shape == (5, 3)
    np.testing.assert_allclose(r.true_difference, 1.0)
    np.testing.assert_array_equal(r.answer[:, 0], idx)


@pytest.mark.parametrize("kwargs", [{"sensitivity": 0.0, "epsilon": 1.0},
                                    {"sensitivity": 1.0, "epsilon": 0.0},
                                    {"sensitivity": 1.0, "epsilon": math.inf},
                                    {"sensitivity": None, "epsilon": 1.0}])
def test_exponential_bad_parameters_are_input_errors(small_data, kwargs):
    with pytest.raises(InputError):
        Curator(small_data, rng=0).exponential("pick", _three_scores, **kwargs)


def test_exponential_refuses_sampling_and_scoreless_trials(small_data):
    cur = Curator(small_data, trials=2, rng=0)
    with pytest.raises(InputError, match="sampling"):
        cur.exponential("pick", _three_scores, sensitivity=1.0, epsilon=1.0,
                        batch=cur.sample("poisson", rate=0.5))
    with pytest.raises(InputError, match="no option"):
        cur.exponential("pick", lambda X, y, w: np.full((2, 2), -np.inf), sensitivity=1.0,
                        epsilon=1.0)
    with pytest.raises(InputError, match="shape"):
        cur.exponential("pick", lambda X, y, w: w @ X[:, 0], sensitivity=1.0, epsilon=1.0)
