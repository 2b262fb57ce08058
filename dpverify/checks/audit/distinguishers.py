"""Distinguishers: statistics of a mechanism's output that separate runs on D from runs on D'.

A distinguisher is fitted on a training split of outputs (``pos`` from D, ``neg`` from
D', each of shape (runs, features)) and returns a scorer ``score(X) -> (runs,)``, higher
meaning "more likely D". Thresholds on the score are chosen and bounded later, on other
splits, so a distinguisher may overfit without making any bound invalid: it can only
lose power.

Built in:

* ``projection``: the output projected on the canary direction, estimated as the
  difference of the two means. For a Gaussian mechanism with isotropic noise it is the
  likelihood ratio, hence optimal (Neyman-Pearson).
* ``norm``: distance from the centre of the D' outputs (an outlier canary, missing clipping).
* ``lda``: the Gaussian likelihood ratio with a pooled, lightly regularized covariance
  (linear discriminant analysis); it finds exact linear relations, such as two releases
  whose noise cancels in their difference.
* ``laplace_lr``: the Laplace likelihood ratio sum_j (|x_j - m'_j| - |x_j - m_j|) / b_j
  with medians and scales from the training split.
* ``logistic``: logistic regression on standardized features (x, x^2), a learned test.
* ``histogram``: the empirical likelihood ratio of exact output rows: for discrete
  outputs (the pattern of answers of the sparse vector technique, the index of report-
  noisy-max) the exact test, and for outputs with atoms (a coarse or porous floating-
  point noise sampler, Mironov 2012). Where the outcomes are few, the black-box audit
  cross-fits such a table (:func:`crossfit_table`) and scores each outcome by its rank,
  so that a test's threshold reads "the j most telling outcomes".
* ``lowbits``: the likelihood ratio of each output's sign, exponent and last mantissa
  bits, read in float32 where every output is a float32, DP-Sniper's bit-pattern
  features: it catches floating-point arithmetic that leaks the input through the low
  bits of a release (``value + numpy.random.laplace(...)`` does, Mironov 2012).
* ``pattern``: the empirical likelihood ratio of each row's pattern of special codes
  (values that recur, such as a sparse vector's "below" and "aborted"), every other
  value replaced by its bin among a few quantiles;
* ``mixed``: logistic regression on those codes (one-hot per coordinate) with the
  continuous values masked where a code stands (DP-Sniper's flags features): outputs
  that mix codes with values, which swamp ``projection``, ``lda`` and ``norm``.

A user's ``module:function`` with the signature ``fit(pos, neg, rng) -> scorer`` works too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import optimize

from dpverify.core.errors import InputError
from dpverify.core.registry import load_callable

Scorer = Callable[[np.ndarray], np.ndarray]
FitFn = Callable[[np.ndarray, np.ndarray, np.random.Generator], Scorer]

# Learned distinguishers see at most this many training runs per world: enough for a
# handful of parameters, and it keeps fitting cheap next to sampling.
_MAX_FIT = 20000


def _as2d(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    return X.reshape(X.shape[0], -1)


def fit_projection(pos: np.ndarray, neg: np.ndarray, rng: np.random.Generator) -> Scorer:
    """Project on the estimated canary direction, mean(pos) - mean(neg).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = fit_projection(rng.normal(1, 1, (500, 2)), rng.normal(0, 1, (500, 2)), rng)
    >>> bool(s(np.array([[3.0, 3.0]]))[0] > s(np.array([[-3.0, -3.0]]))[0])
    True
    """
    w = _as2d(pos).mean(axis=0) - _as2d(neg).mean(axis=0)
    w = np.where(np.isfinite(w), w, 0.0)
    return lambda X: _as2d(X) @ w


def fit_norm(pos: np.ndarray, neg: np.ndarray, rng: np.random.Generator) -> Scorer:
    """Distance from the mean of the D' outputs (orientation is left to the threshold test).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = fit_norm(rng.normal(0, 9, (100, 2)), rng.normal(0, 1, (100, 2)), rng)
    >>> s(np.zeros((1, 2))).shape
    (1,)
    """
    c = _as2d(neg).mean(axis=0)
    c = np.where(np.isfinite(c), c, 0.0)
    return lambda X: np.linalg.norm(_as2d(X) - c, axis=1)


def fit_lda(pos: np.ndarray, neg: np.ndarray, rng: np.random.Generator,
            ridge: float = 1e-9) -> Scorer:
    """Gaussian likelihood ratio with a pooled covariance (Fisher's linear discriminant).

    The ridge is tiny on purpose: a direction in which the outputs do not vary at all
    (noise that cancels) should dominate the score.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(0, 1, (400, 1))
    >>> pos = np.hstack([z + 1.0, z + 0.5]); neg = np.hstack([z, z])  # a - b = 0.5 vs 0
    >>> s = fit_lda(pos[:200], neg[:200], rng)
    >>> bool(s(pos[200:]).min() > s(neg[200:]).max())
    True
    """
    P, N = _as2d(pos), _as2d(neg)
    P, N = P[np.isfinite(P).all(axis=1)], N[np.isfinite(N).all(axis=1)]
    if len(P) < 2 or len(N) < 2:
        return fit_projection(pos, neg, rng)
    diff = P.mean(axis=0) - N.mean(axis=0)
    S = 0.5 * (np.atleast_2d(np.cov(P, rowvar=False)) + np.atleast_2d(np.cov(N, rowvar=False)))
    scale = max(float(np.trace(S)) / S.shape[0], 1e-300)
    S = S + (ridge * scale) * np.eye(S.shape[0])
    try:
        w = np.linalg.solve(S, diff)
    except np.linalg.LinAlgError:
        w = np.linalg.lstsq(S, diff, rcond=None)[0]
    return lambda X: _as2d(X) @ w


def fit_laplace_lr(pos: np.ndarray, neg: np.ndarray, rng: np.random.Generator) -> Scorer:
    """Laplace likelihood ratio with medians and mean absolute deviations from training.

    |x - m'| - |x - m| is written as sgn(m - m') (2 clip(x, lo, hi) - m - m'), which is
    exactly constant where it saturates. The textbook form jitters in its last bits
    there, and the jitter follows the low bits of x: on a float64 Gaussian mechanism
    fl(v + sigma Z) it separated D from D' far beyond the mechanism's epsilon (a genuine
    floating-point leak, Mironov 2012), which a fixed statistic should not pick up by
    accident.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = fit_laplace_lr(rng.laplace(1, 1, (2000, 1)), rng.laplace(0, 1, (2000, 1)), rng)
    >>> bool(s(np.array([[5.0]]))[0] > 0 > s(np.array([[-5.0]]))[0])
    True
    >>> len(set(s(np.array([[-5.0], [-7.3], [-1e3]])).tolist()))  # saturated: one value
    1
    """
    P, N = _as2d(pos), _as2d(neg)
    mp, mn = np.median(P, axis=0), np.median(N, axis=0)
    b = 0.5 * (np.mean(np.abs(P - mp), axis=0) + np.mean(np.abs(N - mn), axis=0))
    b = np.where(np.isfinite(b) & (b > 0), b, 1.0)
    lo, hi = np.minimum(mp, mn), np.maximum(mp, mn)
    sign, centre = np.sign(mp - mn), mp + mn
    return lambda X: np.sum(sign * (2.0 * np.clip(_as2d(X), lo, hi) - centre) / b, axis=1)


def fit_logistic(pos: np.ndarray, neg: np.ndarray, rng: np.random.Generator,
                 l2: float = 1e-4) -> Scorer:
    """L2-regularized logistic regression on standardized features (x, x^2).

    The quadratic features let it pick up a change of spread as well as of location.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = fit_logistic(rng.normal(0, 3, (3000, 1)), rng.normal(0, 1, (3000, 1)), rng)
    >>> bool(s(np.array([[6.0]]))[0] > s(np.array([[0.0]]))[0])
    True
    """
    P, N = _subsample(_as2d(pos), rng), _subsample(_as2d(neg), rng)
    P, N = P[np.isfinite(P).all(axis=1)], N[np.isfinite(N).all(axis=1)]
    if len(P) < 2 or len(N) < 2:
        return fit_projection(pos, neg, rng)
    X = np.vstack([P, N])
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)

    def feats(A: np.ndarray) -> np.ndarray:
        Z = (A - mu) / sd
        return np.hstack([Z, Z * Z - 1.0])

    w = logistic_weights(feats(P), feats(N), rng, l2)
    return lambda A: _affine(feats(_as2d(A)), w)


def _subsample(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """At most ``_MAX_FIT`` rows of ``X``, drawn without replacement."""
    return X if len(X) <= _MAX_FIT else X[rng.choice(len(X), _MAX_FIT, replace=False)]


def _affine(F: np.ndarray, w: np.ndarray) -> np.ndarray:
    return F @ w[:-1] + w[-1]


def logistic_weights(fpos: np.ndarray, fneg: np.ndarray, rng: np.random.Generator,
                     l2: float = 1e-4) -> np.ndarray:
    """Balanced, L2-regularized logistic regression of "D" on features; the last weight
    is the intercept (unpenalized). At most ``_MAX_FIT`` runs per world are used.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> w = logistic_weights(rng.normal(1, 1, (500, 1)), rng.normal(-1, 1, (500, 1)), rng)
    >>> bool(w[0] > 1.0)
    True
    """
    fpos, fneg = _subsample(fpos, rng), _subsample(fneg, rng)
    F = np.hstack([np.vstack([fpos, fneg]), np.ones((len(fpos) + len(fneg), 1))])
    y = np.concatenate([np.ones(len(fpos)), np.zeros(len(fneg))])
    wts = np.where(y == 1, 0.5 / len(fpos), 0.5 / len(fneg))  # balanced classes

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = F @ w
        # log(1 + e^{-z}) for y=1 and log(1 + e^{z}) for y=0, stably
        s = np.where(y == 1, -z, z)
        val = float(wts @ np.logaddexp(0.0, s)) + 0.5 * l2 * float(w[:-1] @ w[:-1])
        p = 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid without overflow
        g = F.T @ (wts * (p - y))
        g[:-1] += l2 * w[:-1]
        return val, g

    res = optimize.minimize(loss, np.zeros(F.shape[1]), jac=True, method="L-BFGS-B",
                            options={"maxiter": 200})
    return np.asarray(res.x)


def _row_keys(X: np.ndarray) -> np.ndarray:
    X = np.ascontiguousarray(_as2d(X))
    if X.shape[1] == 1:
        return X[:, 0]
    return X.view(np.dtype((np.void, X.dtype.itemsize * X.shape[1])))[:, 0]


def row_coder(rows: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A map from rows to keys, equal exactly for equal rows, learned from ``rows``.

    Where every coordinate takes few values the key is an integer in mixed radix over
    each coordinate's values (values never seen get a digit of their own), fast to sort
    and look up; otherwise the row's bytes.

    Examples
    --------
    >>> code = row_coder(np.array([[0.0, 1.0], [1.0, 1.0]]))
    >>> code(np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 1.0], [5.0, 1.0]])).tolist()
    [1, 0, 1, 2]
    """
    rows = _as2d(rows)
    vocab = [np.unique(rows[:, j]) for j in range(rows.shape[1])]
    radix = [v.size + 1 for v in vocab]
    if math.prod(radix) >= 1 << 62:
        return _row_keys
    place = np.cumprod([1] + radix[:-1]).astype(np.int64)

    def code(X: np.ndarray) -> np.ndarray:
        Xt = np.ascontiguousarray(_as2d(X).T)
        keys = np.zeros(Xt.shape[1], dtype=np.int64)
        for j, v in enumerate(vocab):
            idx = np.clip(np.searchsorted(v, Xt[j]), 0, max(v.size - 1, 0))
            digit = np.where(v[idx] == Xt[j], idx, v.size) if v.size else 0
            keys += place[j] * digit
        return keys

    return code


def fit_histogram(pos: np.ndarray, neg: np.ndarray, rng: np.random.Generator,
                  pseudo: float = 0.5) -> Scorer:
    """Empirical likelihood ratio of exact output values; values never seen score 0.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> pos = rng.integers(0, 5, (1000, 1)) * 2.0; neg = rng.integers(0, 5, (1000, 1)) * 2.0 + 1
    >>> s = fit_histogram(pos, neg, rng)
    >>> np.sign(s(np.array([[2.0], [3.0], [0.5]]))).tolist()  # seen in D, in D', never
    [1.0, -1.0, 0.0]
    """
    code = row_coder(np.vstack([_as2d(pos), _as2d(neg)]))
    keys, table = _table(code(pos), code(neg), pseudo)
    return with_atoms(lambda X: _lookup(keys, table, code(X)), _as2d)


def float32_columns(X: np.ndarray) -> np.ndarray:
    """Which columns hold float32 values only (every finite value survives a round trip).

    A float32 output widened to float64 keeps its bits in the high part of the mantissa:
    its own last bits must be read at float32's width.

    Examples
    --------
    >>> float32_columns(np.array([[0.5, 0.1], [0.25, 0.2]])).tolist()
    [True, False]
    """
    X = _as2d(X)
    with np.errstate(over="ignore", invalid="ignore"):
        same = (X.astype(np.float32).astype(np.float64) == X) | ~np.isfinite(X)
    return same.all(axis=0)


def _bit_keys(X: np.ndarray, bits: int, f32: np.ndarray) -> np.ndarray:
    """Per coordinate: sign, binary exponent and the lowest ``bits`` mantissa bits."""
    X = np.ascontiguousarray(_as2d(X), dtype=np.float64)
    raw = X.view(np.int64)
    high = (raw >> 52) & 0xFFF  # sign and exponent
    low = raw & ((1 << bits) - 1)
    if f32.any():  # the same fields of the float32 these values are
        r32 = np.ascontiguousarray(X[:, f32]).astype(np.float32).view(np.int32).astype(np.int64)
        high[:, f32] = (r32 >> 23) & 0x1FF
        low[:, f32] = r32 & ((1 << bits) - 1)
    col = np.arange(X.shape[1], dtype=np.int64) << (13 + bits)
    return (high << bits) | low | col


def _table(kp: np.ndarray, kn: np.ndarray, pseudo: float) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys and the smoothed log ratio of their frequencies among pos and neg."""
    keys, inv = np.unique(np.concatenate([kp, kn]), return_inverse=True)
    cp = np.bincount(inv[: len(kp)], minlength=len(keys))
    cn = np.bincount(inv[len(kp):], minlength=len(keys))
    return keys, smoothed_log_ratio(cp, cn, pseudo)


def smoothed_log_ratio(c_pos: np.ndarray, c_neg: np.ndarray, pseudo: float = 0.5) -> np.ndarray:
    """Each outcome's log ratio of its frequencies on D and D', counts kept off 0 by
    ``pseudo``: the score a table of outcomes gives (``histogram``, ``lowbits``, ...).

    Examples
    --------
    >>> smoothed_log_ratio(np.array([30, 10]), np.array([10, 30])).round(3).tolist()
    [1.066, -1.066]
    """
    c_pos, c_neg = np.asarray(c_pos, float), np.asarray(c_neg, float)
    return np.log((c_pos + pseudo) / c_pos.sum()) - np.log((c_neg + pseudo) / c_neg.sum())


def _lookup(keys: np.ndarray, table: np.ndarray, k: np.ndarray,
            missing: float = 0.0) -> np.ndarray:
    idx = np.clip(np.searchsorted(keys, k), 0, len(keys) - 1)
    return np.where(keys[idx] == k, table[idx], missing)


def atom_ranks(table: np.ndarray, at: float | np.ndarray | None = None) -> np.ndarray:
    """Each atom's rank among a table's distinct log ratios, as a score: 0 for the atom
    most telling of D, -1 for the next, and so on (ties share a rank); with ``at``, the
    rank those log ratios would take among the table's.

    A threshold on ranks names the same event, "the j most telling atoms", in tables
    fitted on different runs, whose log ratios differ: what a cross-fitted selection
    chooses is then what the test, read by the table of all the runs, counts.

    Examples
    --------
    >>> atom_ranks(np.array([0.3, -0.1, 0.3, 0.0])).tolist()
    [0, -2, 0, -1]
    >>> int(atom_ranks(np.array([0.3, -0.1, 0.3, 0.0]), at=0.1))
    -1
    """
    levels = np.unique(table)
    values = table if at is None else np.asarray(at, dtype=float)
    return np.searchsorted(levels, values, side="right") - levels.size


def crossfitted_ranks(c_pos: np.ndarray, c_neg: np.ndarray) -> np.ndarray:
    """Row f: each atom's rank (:func:`atom_ranks`) in the table of every fold but f.

    ``c_pos`` and ``c_neg`` are the (folds, atoms) counts of each atom in each fold of
    the runs on D and on D'.

    Examples
    --------
    >>> c_pos = np.array([[9, 1, 5], [8, 2, 5]]); c_neg = np.array([[1, 9, 5], [2, 8, 5]])
    >>> crossfitted_ranks(c_pos, c_neg).tolist()
    [[0, -2, -1], [0, -2, -1]]
    """
    tp, tn = c_pos.sum(axis=0), c_neg.sum(axis=0)
    return np.stack([atom_ranks(smoothed_log_ratio(tp - cp, tn - cn))
                     for cp, cn in zip(c_pos, c_neg, strict=True)])


def crossfit_table(atoms: Callable[[np.ndarray], np.ndarray],
                   rows: tuple[np.ndarray, np.ndarray],
                   folds: int) -> tuple[Scorer, np.ndarray, np.ndarray]:
    """A table of likelihood ratios over atoms (rows of tokens), cross-fitted.

    ``rows`` holds the atoms of the runs on D and on D' (``atoms`` of their outputs,
    computed once by the caller, which tells a small alphabet by them); ``atoms`` maps the
    test's outputs to theirs.

    The runs are dealt into ``folds`` folds; each run is scored by its atom's rank
    (:func:`atom_ranks`) in the table of the other folds, so that the rates a selection
    reads off these scores are rates no fit has seen. Leaving one fold of many out, each
    table is nearly the table of all the runs, whose ranks score the test: with a few
    atoms close in likelihood ratio, halves order them apart far more often than the
    whole (on Lyu, Su and Li's SVT2 at 10^7 runs, its most telling atom and the next are
    ordered apart by one half or the other in half the searches, and the event
    selected then mixes them; ``benchmarks/search_choice.py``). Returns the scorer of
    the table of all the runs (atoms never seen rank as a log ratio of 0 would), and the
    cross-fitted scores of the runs on D and on D'.

    Examples
    --------
    >>> pos = np.repeat([0.0, 1.0], 300)[:, None]; neg = np.repeat([1.0, 2.0], 300)[:, None]
    >>> scorer, s_pos, s_neg = crossfit_table(_as2d, (pos, neg), 5)
    >>> scorer(np.array([[0.0], [1.0], [2.0], [7.0]])).tolist()  # D only, both, D' only, never
    [0.0, -1.0, -2.0, -1.0]
    >>> s_pos.shape, bool(s_pos.mean() > s_neg.mean())
    ((600,), True)
    """
    a_pos, a_neg = rows
    code = row_coder(np.vstack([a_pos, a_neg]))
    keys, inv = np.unique(np.concatenate([code(a_pos), code(a_neg)]), return_inverse=True)
    inv = inv.ravel()
    i_pos, i_neg = inv[: len(a_pos)], inv[len(a_pos):]
    f_pos, f_neg = np.arange(i_pos.size) % folds, np.arange(i_neg.size) % folds
    size = folds * keys.size
    c_pos = np.bincount(f_pos * keys.size + i_pos, minlength=size).reshape(folds, -1)
    c_neg = np.bincount(f_neg * keys.size + i_neg, minlength=size).reshape(folds, -1)
    ranks = crossfitted_ranks(c_pos, c_neg)
    table = smoothed_log_ratio(c_pos.sum(axis=0), c_neg.sum(axis=0))
    full, unseen = atom_ranks(table), float(atom_ranks(table, at=0.0))
    scorer = with_atoms(lambda X: _lookup(keys, full, code(atoms(X)), unseen), atoms)
    return scorer, ranks[f_pos, i_pos].astype(float), ranks[f_neg, i_neg].astype(float)


def fit_lowbits(pos: np.ndarray, neg: np.ndarray, rng: np.random.Generator,
                bits: int = 4, pseudo: float = 0.5) -> Scorer:
    """Empirical likelihood ratio of each output's sign, exponent and lowest mantissa bits.

    DP-Sniper's bit-pattern features (Bichsel et al. 2021): a floating-point mechanism
    whose outputs are "porous" (Mironov 2012) leaves input-dependent patterns in the last
    bits; in ``value + numpy.random.laplace(...)`` the sum is rounded to a grid set by
    ``value``'s binade, so outputs below 1 carry zeros in their last bits for some values
    and not for others. Coordinates are combined as independent (their log ratios add);
    a coordinate holding only float32 values is read at float32's width.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> even = 1.0 + rng.integers(0, 2**20, size=(2000, 1)) / 2**20  # low bits all zero
    >>> odd = np.nextafter(even, np.inf)  # the next float up: the last bit set
    >>> s = fit_lowbits(even[:1000], odd[:1000], rng)
    >>> bool(s(even[1000:]).min() > 0 > s(odd[1000:]).max())
    True
    >>> e32, o32 = even.astype(np.float32), np.nextafter(even.astype(np.float32), np.inf)
    >>> s = fit_lowbits(e32[:1000].astype(float), o32[:1000].astype(float), rng)
    >>> bool(s(e32[1000:].astype(float)).min() > 0 > s(o32[1000:].astype(float)).max())
    True
    """
    f32 = float32_columns(np.vstack([_as2d(pos), _as2d(neg)]))
    kp, kn = _bit_keys(pos, bits, f32).ravel(), _bit_keys(neg, bits, f32).ravel()
    keys, table = _table(kp, kn, pseudo)
    scorer = lambda X: _lookup(keys, table, _bit_keys(X, bits, f32)).sum(axis=1)  # noqa: E731
    # Outputs on a grid (snapped doubles, integers at either width) have these bits all
    # zero as read: the table then reads only signs and binary exponents, the outputs'
    # magnitudes, and what it finds is in the values.
    scorer.low_bits_vary = bool((keys & ((1 << bits) - 1)).any())  # type: ignore[attr-defined]
    return scorer


def special_codes(X: np.ndarray, min_share: float = 0.01, min_count: int = 5
                  ) -> list[np.ndarray]:
    """Per coordinate, the values that recur (at least ``min_share`` of the rows and
    ``min_count`` times): the special codes of a mixed output, or every value of a
    discrete one.

    Examples
    --------
    >>> X = np.column_stack([np.r_[np.full(50, -1.0), np.linspace(0, 1, 50)], np.ones(100)])
    >>> [c.tolist() for c in special_codes(X)]
    [[-1.0], [1.0]]
    """
    X = _as2d(X)
    out = []
    for j in range(X.shape[1]):
        v, c = np.unique(X[:, j], return_counts=True)
        out.append(v[(c >= min_count) & (c >= min_share * len(X))])
    return out


def _tokens(X: np.ndarray, codes: list[np.ndarray]) -> np.ndarray:
    """Each value's code index, or -1 where it is no code (a continuous value)."""
    Xt = np.ascontiguousarray(_as2d(X).T)
    T = np.full(Xt.shape, -1, dtype=np.int64)
    for j, c in enumerate(codes):
        if c.size <= 8:  # a few codes: comparisons beat a search
            for i, v in enumerate(c):
                T[j][Xt[j] == v] = i
        else:
            idx = np.clip(np.searchsorted(c, Xt[j]), 0, c.size - 1)
            T[j] = np.where(c[idx] == Xt[j], idx, -1)
    return T.T


# Quantile levels cutting a coordinate's values into bins: denser in the tails, where
# likelihood ratios are extreme (a released value far below the threshold it passed).
VALUE_LEVELS = (0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98)


def _value_bins(X: np.ndarray, codes: list[np.ndarray]) -> list[np.ndarray]:
    """Per coordinate, the :data:`VALUE_LEVELS` quantiles of its values that are no code."""
    T = _tokens(X, codes)
    out = []
    for j in range(X.shape[1]):
        free = X[(T[:, j] < 0) & np.isfinite(X[:, j]), j]
        out.append(np.unique(np.quantile(free, VALUE_LEVELS)) if free.size else np.zeros(0))
    return out


def _pattern_tokens(X: np.ndarray, codes: list[np.ndarray],
                    cuts: list[np.ndarray]) -> np.ndarray:
    """Each value's token: its code's index, else the number of codes plus its bin."""
    X = _as2d(X)
    T = _tokens(X, codes)
    for j, (c, q) in enumerate(zip(codes, cuts, strict=True)):
        col = T[:, j]
        free = col < 0
        col[free] = c.size + np.searchsorted(q, X[free, j])
        T[:, j] = col
    return T.astype(float)


def with_atoms(scorer: Scorer, atoms: Callable[[np.ndarray], np.ndarray]) -> Scorer:
    """Mark a table's scorer with the map from outputs to the atoms it tabulates (rows
    of tokens), so that an audit can tell a small alphabet of atoms.

    Examples
    --------
    >>> s = with_atoms(lambda X: X[:, 0], lambda X: X)
    >>> s.atoms(np.ones((2, 1))).shape
    (2, 1)
    """
    scorer.atoms = atoms  # type: ignore[attr-defined]
    return scorer


def fit_pattern(pos: np.ndarray, neg: np.ndarray, rng: np.random.Generator,
                pseudo: float = 0.5) -> Scorer:
    """Empirical likelihood ratio of each row's pattern of special codes and value bins.

    Values that recur are codes (:func:`special_codes`); every other value is replaced by
    its bin among quantiles of such values in its coordinate (:data:`VALUE_LEVELS`); a
    row's pattern is
    its tuple of tokens: which queries a sparse vector answered "above", "below" or not at
    all, and roughly with what value. On outputs that are all codes it is ``histogram``,
    and scores every output 0.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> pos = np.where(rng.random((900, 2)) < 0.7, -1.0, rng.normal(size=(900, 2)))
    >>> neg = np.where(rng.random((900, 2)) < 0.3, -1.0, rng.normal(size=(900, 2)))
    >>> s = fit_pattern(pos, neg, rng)
    >>> bool(s(np.array([[-1.0, -1.0]]))[0] > 0 > s(np.array([[0.3, 2.0]]))[0])
    True
    """
    both = np.vstack([_as2d(pos), _as2d(neg)])
    codes = special_codes(both)
    if not (_tokens(both, codes) < 0).any():  # every value a code: it is ``histogram``
        return lambda X: np.zeros(_as2d(X).shape[0])
    cuts = _value_bins(both, codes)

    def atoms(X: np.ndarray) -> np.ndarray:
        return _pattern_tokens(X, codes, cuts)

    code = row_coder(atoms(both))
    keys, table = _table(code(atoms(pos)), code(atoms(neg)), pseudo)
    return with_atoms(lambda X: _lookup(keys, table, code(atoms(X))), atoms)


def fit_mixed(pos: np.ndarray, neg: np.ndarray, rng: np.random.Generator) -> Scorer:
    """Logistic regression on codes and masked values (DP-Sniper's flags features).

    Per coordinate: one indicator per special code, the value where no code stands (0
    elsewhere, standardized over those values) and its square. Without codes anywhere
    it adds nothing to ``logistic`` and scores every output 0.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> v = lambda m, k: np.where(rng.random((k, 1)) < 0.5, -1000.0, rng.normal(m, 1, (k, 1)))
    >>> s = fit_mixed(v(1.0, 2000), v(0.0, 2000), rng)
    >>> bool(s(np.array([[3.0]]))[0] > s(np.array([[-3.0]]))[0])
    True
    """
    codes = special_codes(np.vstack([_as2d(pos), _as2d(neg)]))
    if not any(c.size for c in codes):
        return lambda X: np.zeros(_as2d(X).shape[0])
    P, N = _subsample(_as2d(pos), rng), _subsample(_as2d(neg), rng)
    both = np.vstack([P, N])
    free = (_tokens(both, codes) < 0) & np.isfinite(both)
    mu = np.array([both[free[:, j], j].mean() if free[:, j].any() else 0.0
                   for j in range(both.shape[1])])
    sd = np.array([both[free[:, j], j].std() if free[:, j].sum() > 1 else 1.0
                   for j in range(both.shape[1])])
    sd = np.where(sd > 0, sd, 1.0)

    def feats(X: np.ndarray) -> np.ndarray:
        X = _as2d(X)
        T = _tokens(X, codes)
        d = X.shape[1]
        F = np.zeros((X.shape[0], 2 * d + sum(c.size for c in codes)))
        F[:, :d] = np.where((T < 0) & np.isfinite(X), (X - mu) / sd, 0.0)
        F[:, d:2 * d] = F[:, :d] ** 2
        col = 2 * d
        for j, c in enumerate(codes):
            for i in range(c.size):
                F[:, col] = T[:, j] == i
                col += 1
        return F

    w = logistic_weights(feats(P), feats(N), rng)
    return lambda X: _affine(feats(X), w)


DISTINGUISHERS: dict[str, FitFn] = {
    "projection": fit_projection,
    "norm": fit_norm,
    "lda": fit_lda,
    "laplace_lr": fit_laplace_lr,
    "logistic": fit_logistic,
    "histogram": fit_histogram,
    "lowbits": fit_lowbits,
    "pattern": fit_pattern,
    "mixed": fit_mixed,
}
AUTO = ("projection", "norm", "lda", "laplace_lr", "logistic", "histogram", "lowbits",
        "pattern", "mixed")


def resolve_distinguishers(spec: str | list[str] | tuple[str, ...]) -> list[tuple[str, FitFn]]:
    """Names (or ``module:function``) to fit functions; ``"auto"`` is every built-in one.

    Examples
    --------
    >>> [n for n, _ in resolve_distinguishers("projection,norm")]
    ['projection', 'norm']
    """
    names: list[str] = []
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    for item in items:
        item = str(item).strip()
        if item == "auto":
            names.extend(AUTO)
        elif item:
            names.append(item)
    out: list[tuple[str, FitFn]] = []
    for name in dict.fromkeys(names):
        if name in DISTINGUISHERS:
            out.append((name, DISTINGUISHERS[name]))
        elif ":" in name:
            out.append((name, load_callable(name)))
        else:
            raise InputError(f"unknown distinguisher {name!r}; built-in: "
                             f"{sorted(DISTINGUISHERS)}, 'auto', or module:function")
    if not out:
        raise InputError("no distinguisher given")
    return out


# Outputs are scored this many at a time: features of millions of runs need not fit in
# memory at once.
SCORE_CHUNK = 1 << 18


def safe_scores(scorer: Scorer, X: np.ndarray, name: str) -> np.ndarray:
    """Scores as a flat float array, NaN mapped to the neutral 0, checked for shape.

    Examples
    --------
    >>> safe_scores(lambda X: np.array([0.5, np.nan]), np.zeros((2, 3)), "r")
    array([0.5, 0. ])
    """
    parts = []
    for start in range(0, max(len(X), 1), SCORE_CHUNK):
        part = X[start:start + SCORE_CHUNK]
        s = np.asarray(scorer(part), dtype=float).reshape(-1)
        if s.shape[0] != part.shape[0]:
            raise InputError(f"distinguisher {name!r} returned {s.shape[0]} scores for "
                             f"{part.shape[0]} outputs")
        parts.append(s)
    s = np.concatenate(parts)
    return np.where(np.isnan(s), 0.0, s)


def describe(name: str) -> dict[str, Any]:
    """A JSON-ready description of a distinguisher.

    Examples
    --------
    >>> describe("norm")["summary"]
    "Distance from the mean of the D' outputs (orientation is left to the threshold test)."
    """
    fn = DISTINGUISHERS.get(name)
    doc = (fn.__doc__ or "").strip().splitlines()[0] if fn else name
    return {"name": name, "summary": doc}
