"""Your own code under dpverify: the module the README's examples name.

* ``f`` and ``pair``: a mechanism and a neighbouring pair, for ``dpverify audit``;
  ``f_textbook``: the same mechanism without snapping, whose floating-point output leaks;
* ``mean_error`` (and ``mean_error_planted``): a utility as a function of the grid's
  parameters, for ``dpverify rates``.

The mechanism is the Gaussian mechanism on the mean of records in the unit ball: under
replace-one neighbours the mean moves by at most 2/n, and noise of standard deviation
``(2/n) sqrt(2 log(1.25/delta)) / epsilon`` buys (epsilon, delta)-DP for epsilon <= 1
(Dwork and Roth 2014, Theorem A.1).
"""

from __future__ import annotations

import numpy as np

N, D = 100, 2


def sigma(n: int, epsilon: float, delta: float) -> float:
    """Noise of the Gaussian mechanism on a mean of n unit-ball records (replace-one).

    Dwork and Roth 2014, Theorem A.1: sigma = Delta sqrt(2 log(1.25/delta)) / epsilon,
    with Delta = 2/n the replace-one sensitivity of the mean.

    Examples
    --------
    >>> round(float(sigma(100, 1.0, 1e-5)), 4)
    0.0969
    """
    return float(2.0 / n * np.sqrt(2.0 * np.log(1.25 / delta)) / epsilon)


def f(data, rng: np.random.Generator, trials: int) -> np.ndarray:
    """The noisy mean of ``data = (X, y)``, ``trials`` times: an array (trials, d).

    Examples
    --------
    >>> D, _ = pair()
    >>> f(D, np.random.default_rng(0), 3).shape
    (3, 2)
    """
    # Snapped to a grid far coarser than the float spacing (Mironov, CCS 2012, Sec. 5): the
    # low bits of ``mean + noise`` otherwise depend on the mean, and a test reading them
    # proves a violation. A value moves to another grid point through rounding error only
    # with probability about 2^-26, well inside delta.
    return np.round(f_textbook(data, rng, trials) * SNAP) / SNAP


#: Grid of the snapped output (values are multiples of 1 / SNAP).
SNAP = 2.0**30


def f_textbook(data, rng: np.random.Generator, trials: int) -> np.ndarray:
    """The textbook noisy mean, ``mean + noise`` in floating point: not DP as computed.

    Examples
    --------
    >>> D, _ = pair()
    >>> f_textbook(D, np.random.default_rng(0), 3).shape
    (3, 2)
    """
    X = np.asarray(data[0], dtype=float)
    mean = X.mean(axis=0)
    return mean + sigma(len(X), 1.0, 1e-5) * rng.standard_normal((trials, mean.size))


def pair() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Two datasets that differ in one record (replace-one): the first record flips.

    Examples
    --------
    >>> (X, y), (X2, y2) = pair()
    >>> int((X != X2).any(axis=1).sum()), X.shape
    (1, (100, 2))
    """
    X = np.zeros((N, D))
    X[0] = [1.0, 0.0]
    X2 = X.copy()
    X2[0] = [-1.0, 0.0]
    return (X, np.zeros(N)), (X2, np.zeros(N))


def mean_error(n: int, d: int, epsilon: float, delta: float, seed: int) -> float:
    """Error of the private mean: the norm of the noise, about sqrt(d) / (n epsilon).

    The grid passes every parameter it knows by name (n, d, epsilon, delta: varied,
    fixed or their defaults) and an integer seed.

    Examples
    --------
    >>> round(mean_error(100, 2, 1.0, 1e-5, seed=0), 4)
    0.0177
    """
    rng = np.random.default_rng(seed)
    return float(np.linalg.norm(sigma(n, epsilon, delta) * rng.standard_normal(d)))


def mean_error_planted(n: int, d: int, epsilon: float, delta: float, seed: int) -> float:
    """A planted bug: noise for sensitivity 2/sqrt(n) instead of 2/n, error ~ n^(-1/2).

    Examples
    --------
    >>> mean_error_planted(400, 2, 1.0, 1e-5, 0) / mean_error(400, 2, 1.0, 1e-5, 0)
    20.0
    """
    return float(np.sqrt(n)) * mean_error(n, d, epsilon, delta, seed)
