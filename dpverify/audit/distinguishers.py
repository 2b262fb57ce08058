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
* ``histogram``: the empirical likelihood ratio of exact output values, for outputs with
  atoms (a coarse or porous floating-point noise sampler, Mironov 2012).
* ``lowbits`` (not in ``auto``): the likelihood ratio of each output's exponent and last
  mantissa bits, DP-Sniper's bit-pattern features: it catches floating-point arithmetic
  that leaks the input through the low bits of a release.

A user's ``module:function`` with the signature ``fit(pos, neg, rng) -> scorer`` works too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import optimize

from dpverify.errors import InputError

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
    P, N = _as2d(pos), _as2d(neg)
    P, N = P[np.isfinite(P).all(axis=1)], N[np.isfinite(N).all(axis=1)]
    if len(P) < 2 or len(N) < 2:
        return fit_projection(pos, neg, rng)
    if len(P) > _MAX_FIT:
        P = P[rng.choice(len(P), _MAX_FIT, replace=False)]
    if len(N) > _MAX_FIT:
        N = N[rng.choice(len(N), _MAX_FIT, replace=False)]
    X = np.vstack([P, N])
    y = np.concatenate([np.ones(len(P)), np.zeros(len(N))])
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)

    def feats(A: np.ndarray) -> np.ndarray:
        Z = (A - mu) / sd
        return np.hstack([Z, Z * Z - 1.0, np.ones((len(Z), 1))])

    F = feats(X)
    wts = np.where(y == 1, 0.5 / len(P), 0.5 / len(N))  # balanced classes

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
    w = res.x
    return lambda A: feats(_as2d(A)) @ w


def _row_keys(X: np.ndarray) -> np.ndarray:
    X = np.ascontiguousarray(_as2d(X))
    if X.shape[1] == 1:
        return X[:, 0]
    return X.view(np.dtype((np.void, X.dtype.itemsize * X.shape[1])))[:, 0]


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
    kp, kn = _row_keys(pos), _row_keys(neg)
    keys, inv = np.unique(np.concatenate([kp, kn]), return_inverse=True)
    cp = np.bincount(inv[: len(kp)], minlength=len(keys)).astype(float)
    cn = np.bincount(inv[len(kp):], minlength=len(keys)).astype(float)
    table = np.log((cp + pseudo) / len(kp)) - np.log((cn + pseudo) / len(kn))

    def score(X: np.ndarray) -> np.ndarray:
        k = _row_keys(X)
        idx = np.clip(np.searchsorted(keys, k), 0, len(keys) - 1)
        hit = keys[idx] == k
        return np.where(hit, table[idx], 0.0)

    return score


def _bit_keys(X: np.ndarray, bits: int) -> np.ndarray:
    """Per coordinate: sign, binary exponent and the lowest ``bits`` mantissa bits."""
    X = np.ascontiguousarray(_as2d(X), dtype=np.float64)
    raw = X.view(np.int64)
    high = (raw >> 52) & 0xFFF  # sign and exponent
    low = raw & ((1 << bits) - 1)
    col = np.arange(X.shape[1], dtype=np.int64) << (12 + bits)
    return (high << bits) | low | col


def fit_lowbits(pos: np.ndarray, neg: np.ndarray, rng: np.random.Generator,
                bits: int = 4, pseudo: float = 0.5) -> Scorer:
    """Empirical likelihood ratio of each output's sign, exponent and lowest mantissa bits.

    DP-Sniper's bit-pattern features (Bichsel et al. 2021): a floating-point mechanism
    whose outputs are "porous" (Mironov 2012) leaves input-dependent patterns in the last
    bits. Coordinates are combined as independent (their log ratios add). Not part of
    ``auto``: it tests the arithmetic of a release, not its distribution, and every
    textbook float64 noise addition fails it.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> even = 1.0 + rng.integers(0, 2**20, size=(2000, 1)) / 2**20  # low bits all zero
    >>> odd = np.nextafter(even, np.inf)  # the next float up: the last bit set
    >>> s = fit_lowbits(even[:1000], odd[:1000], rng)
    >>> bool(s(even[1000:]).min() > 0 > s(odd[1000:]).max())
    True
    """
    kp, kn = _bit_keys(pos, bits).ravel(), _bit_keys(neg, bits).ravel()
    keys, inv = np.unique(np.concatenate([kp, kn]), return_inverse=True)
    cp = np.bincount(inv[: len(kp)], minlength=len(keys)).astype(float)
    cn = np.bincount(inv[len(kp):], minlength=len(keys)).astype(float)
    table = np.log((cp + pseudo) / len(kp)) - np.log((cn + pseudo) / len(kn))

    def score(X: np.ndarray) -> np.ndarray:
        k = _bit_keys(X, bits)
        idx = np.clip(np.searchsorted(keys, k), 0, len(keys) - 1)
        return np.where(keys[idx] == k, table[idx], 0.0).sum(axis=1)

    return score


DISTINGUISHERS: dict[str, FitFn] = {
    "projection": fit_projection,
    "norm": fit_norm,
    "lda": fit_lda,
    "laplace_lr": fit_laplace_lr,
    "logistic": fit_logistic,
    "histogram": fit_histogram,
    "lowbits": fit_lowbits,
}
AUTO = ("projection", "norm", "lda", "laplace_lr", "logistic", "histogram")


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
            from dpverify.registry import load_callable

            out.append((name, load_callable(name)))
        else:
            raise InputError(f"unknown distinguisher {name!r}; built-in: "
                             f"{sorted(DISTINGUISHERS)}, 'auto', or module:function")
    if not out:
        raise InputError("no distinguisher given")
    return out


def safe_scores(scorer: Scorer, X: np.ndarray, name: str) -> np.ndarray:
    """Scores as a flat float array, NaN mapped to the neutral 0, checked for shape.

    Examples
    --------
    >>> safe_scores(lambda X: np.array([0.5, np.nan]), np.zeros((2, 3)), "r")
    array([0.5, 0. ])
    """
    s = np.asarray(scorer(X), dtype=float).reshape(-1)
    if s.shape[0] != X.shape[0]:
        raise InputError(f"distinguisher {name!r} returned {s.shape[0]} scores for "
                         f"{X.shape[0]} outputs")
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
