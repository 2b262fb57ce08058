"""diffprivlib (IBM) as audit targets: three mechanisms and ``LogisticRegression``.

Copy a function, change the constants, and audit your own configuration. Every target
has the signature ``f(data, rng, trials) -> array (trials, ...)``; neighbour functions
``*pair() -> (D, D_prime)`` give the datasets.

Mechanisms release the sum of the records' first feature clipped to [-1, 1] (L1 and L2
sensitivity 1 under add/remove-one, 2 under replace-one). diffprivlib's ``randomise``
takes one number at a time, so the trials are a Python loop over one mechanism object
(about 20 microseconds a draw); its RNG is a legacy ``RandomState`` seeded from ``rng``,
since diffprivlib does not accept a NumPy ``Generator``.

``LogisticRegression`` is objective perturbation (Chaudhuri, Monteleoni, Sarwate 2011,
Algorithm 2, through diffprivlib's ``Vector`` mechanism), (epsilon, 0)-DP under
replace-one for records of norm at most ``data_norm``. Each trial is a fit (about 20 ms
for 100 records), so audits of it run hundreds of trials, not tens of thousands: with
``n`` trials per dataset and the default splits, the largest epsilon lower bound any
test can show is about log(0.7 n / 3.7) (3.3 at n = 150), so only gross leaks show.

Compatibility: diffprivlib 0.6.6 does not import with scikit-learn 1.9, whose
``sklearn.tree._tree`` no longer exports ``DOUBLE`` and ``DTYPE`` (diffprivlib's
random-forest module imports them), and its ``LogisticRegression.__init__`` passes
``multi_class``, which scikit-learn 1.9's ``LogisticRegression`` no longer takes.
:func:`load_diffprivlib` restores the two dtype aliases (used only by the forest, which
is not audited here) and :func:`dp_logistic_regression` sets the estimator's parameters
itself when the constructor fails that way.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from dpverify.core.data import Dataset, synthetic_classification

EPSILON = 1.0
DELTA = 1e-5
SENSITIVITY = 1.0
BOUND = 1.0  # records' first feature is clipped to [-BOUND, BOUND]
DATA_NORM = 1.0  # LogisticRegression's bound on the records' L2 norm


def load_diffprivlib() -> Any:
    """Import diffprivlib, restoring the scikit-learn names 0.6.6 needs.

    Examples
    --------
    >>> load_diffprivlib().mechanisms.GaussianAnalytic.__name__
    'GaussianAnalytic'
    """
    try:
        import sklearn.tree._tree as tree_mod
    except ImportError:  # pragma: no cover - diffprivlib will say what is missing
        tree_mod = None
    if tree_mod is not None:
        # The float types scikit-learn's trees used before 1.8 (DOUBLE_t, DTYPE_t).
        for name, dtype in (("DOUBLE", np.float64), ("DTYPE", np.float32)):
            if not hasattr(tree_mod, name):
                setattr(tree_mod, name, dtype)
    import diffprivlib

    return diffprivlib


def random_state(rng: np.random.Generator) -> np.random.RandomState:
    """A legacy ``RandomState`` seeded from ``rng`` (what diffprivlib accepts)."""
    return np.random.RandomState(int(rng.integers(2**32)))


def clipped_sum(data: Dataset) -> float:
    """Sum of the first feature clipped to [-BOUND, BOUND]: sensitivity BOUND (add/remove)."""
    return float(np.sum(np.clip(data.X[:, 0], -BOUND, BOUND)))


def _draws(mech: Any, value: float, trials: int) -> np.ndarray:
    # randomise accepts a single number: one call per trial.
    return np.array([mech.randomise(value) for _ in range(trials)], dtype=float)[:, None]


def gaussian_analytic(data: Dataset, rng: np.random.Generator, trials: int) -> np.ndarray:
    """``GaussianAnalytic(epsilon=1, delta=1e-5, sensitivity=1)`` on :func:`clipped_sum`.

    Examples
    --------
    >>> D, _ = pair()
    >>> gaussian_analytic(D, np.random.default_rng(0), 3).shape
    (3, 1)
    """
    mech = load_diffprivlib().mechanisms.GaussianAnalytic(
        epsilon=EPSILON, delta=DELTA, sensitivity=SENSITIVITY, random_state=random_state(rng))
    return _draws(mech, clipped_sum(data), trials)


def gaussian(data: Dataset, rng: np.random.Generator, trials: int) -> np.ndarray:
    """The classic ``Gaussian(epsilon=1, delta=1e-5, sensitivity=1)`` on :func:`clipped_sum`.

    sigma = sqrt(2 ln(1.25 / delta)) / epsilon (Dwork and Roth 2014, Theorem A.1, proved
    for epsilon < 1); diffprivlib refuses epsilon > 1 with a ValueError.
    """
    mech = load_diffprivlib().mechanisms.Gaussian(
        epsilon=EPSILON, delta=DELTA, sensitivity=SENSITIVITY, random_state=random_state(rng))
    return _draws(mech, clipped_sum(data), trials)


def gaussian_epsilon_2(data: Dataset, rng: np.random.Generator, trials: int) -> np.ndarray:
    """The classic ``Gaussian`` asked for epsilon = 2, outside its theorem's range.

    diffprivlib raises ``ValueError`` ("Epsilon cannot be greater than 1"), so an audit
    of this target ends with the library's own refusal.
    """
    mech = load_diffprivlib().mechanisms.Gaussian(
        epsilon=2.0, delta=DELTA, sensitivity=SENSITIVITY, random_state=random_state(rng))
    return _draws(mech, clipped_sum(data), trials)


def laplace(data: Dataset, rng: np.random.Generator, trials: int) -> np.ndarray:
    """``Laplace(epsilon=1, sensitivity=1)`` on :func:`clipped_sum` (pure epsilon-DP)."""
    mech = load_diffprivlib().mechanisms.Laplace(
        epsilon=EPSILON, sensitivity=SENSITIVITY, random_state=random_state(rng))
    return _draws(mech, clipped_sum(data), trials)


def gaussian_analytic_replace_misuse(data: Dataset, rng: np.random.Generator,
                                     trials: int) -> np.ndarray:
    """A misuse: sensitivity 1 declared for :func:`clipped_sum` under replace-one (it is 2).

    The library is right and the caller wrong; audited on :func:`replace_pair` it must
    FAIL, which shows the audit has the power to see a factor-2 sensitivity error.
    """
    return gaussian_analytic(data, rng, trials)


def pair() -> tuple[Dataset, Dataset]:
    """Add/remove-one: ten records in [-1, 1], with and without one more at +1.

    Examples
    --------
    >>> D, Dp = pair()
    >>> D.n - Dp.n, clipped_sum(D) - clipped_sum(Dp)
    (1, 1.0)
    """
    rng = np.random.default_rng(20240501)
    base = Dataset(rng.uniform(-1, 1, (10, 1)), np.zeros(10))
    return base.with_record(np.array([BOUND]), 0.0), base


def replace_pair() -> tuple[Dataset, Dataset]:
    """Replace-one: the record at +1 of :func:`pair` replaced by -1 (the sum moves by 2).

    Examples
    --------
    >>> D, Dp = replace_pair()
    >>> D.n == Dp.n, clipped_sum(D) - clipped_sum(Dp)
    (True, 2.0)
    """
    D, _ = pair()
    return D, D.replaced(0, np.array([-BOUND]), 0.0)


# LogisticRegression -------------------------------------------------------------------


def dp_logistic_regression(**params: Any) -> Any:
    """``diffprivlib.models.LogisticRegression(**params)``, across scikit-learn versions.

    When the constructor fails on scikit-learn's removed ``multi_class`` argument, the
    estimator is built without it and given the parameters its constructor would have
    set (diffprivlib's ``fit`` reads only these).
    """
    LR = load_diffprivlib().models.LogisticRegression
    try:
        return LR(**params)
    except TypeError as e:
        if "multi_class" not in str(e):
            raise
    from diffprivlib.accountant import BudgetAccountant

    est = LR.__new__(LR)
    sk = {"penalty": "l2", "dual": False, "tol": 1e-4, "C": 1.0, "fit_intercept": True,
          "intercept_scaling": 1.0, "class_weight": None, "random_state": None,
          "solver": "lbfgs", "max_iter": 100, "verbose": 0, "warm_start": False,
          "n_jobs": None, "l1_ratio": 0.0}
    own = {"epsilon": 1.0, "data_norm": None, "accountant": None}
    for k, v in {**sk, **own, **params}.items():
        setattr(est, k, v)
    est.classes_ = None
    est.accountant = BudgetAccountant.load_default(est.accountant)
    return est


def _fit_many(data: Dataset, rng: np.random.Generator, trials: int, data_norm: float | None,
              fit_intercept: bool = True) -> np.ndarray:
    from diffprivlib.accountant import BudgetAccountant

    out = np.empty((trials, data.d + 1))
    with warnings.catch_warnings():
        # scipy's deprecation notes and L-BFGS convergence notes from inside the library.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*failed to converge.*")
        for t in range(trials):
            est = dp_logistic_regression(epsilon=EPSILON, data_norm=data_norm,
                                         fit_intercept=fit_intercept,
                                         random_state=random_state(rng),
                                         accountant=BudgetAccountant())
            est.fit(data.X, data.y)
            out[t, : data.d] = est.coef_[0]
            out[t, data.d] = est.intercept_[0]
    return out


def logistic_regression(data: Dataset, rng: np.random.Generator, trials: int) -> np.ndarray:
    """``LogisticRegression(epsilon=1, data_norm=1)`` fitted per trial; (coef, intercept)."""
    load_diffprivlib()
    return _fit_many(data, rng, trials, DATA_NORM)


def logistic_regression_data_norm_from_data(data: Dataset, rng: np.random.Generator,
                                            trials: int) -> np.ndarray:
    """``LogisticRegression(epsilon=1, fit_intercept=False)`` without ``data_norm``.

    diffprivlib warns (``PrivacyLeakWarning``) and takes the largest record norm as the
    bound, so the noise scale itself depends on the private data. (With an intercept the
    bound becomes sqrt(norm^2 + 1), which dilutes the effect for records of small norm;
    the intercept column of the output is then 0.)
    """
    load_diffprivlib()
    return _fit_many(data, rng, trials, None, fit_intercept=False)


def lr_pair() -> tuple[Dataset, Dataset]:
    """Replace-one: 100 records in the unit ball; record 0 swapped for a boundary canary.

    The canary sits on the unit sphere with the label that fights the data, the record
    objective perturbation's proof allows to move the minimiser most.

    Examples
    --------
    >>> D, Dp = lr_pair()
    >>> D.n == Dp.n, bool(np.linalg.norm(Dp.X[0]) <= 1.0 + 1e-12)
    (True, True)
    """
    D, w = synthetic_classification(100, 2, np.random.default_rng(20240502))
    x = -w / np.linalg.norm(w) * DATA_NORM
    return D, D.replaced(0, x, 1.0)


def lr_small_norm_pair() -> tuple[Dataset, Dataset]:
    """Replace-one: :func:`lr_pair`'s records shrunk to norm <= 0.01, and one of norm 1.

    Without ``data_norm`` diffprivlib bounds the norms by the largest record: 0.01 on D,
    1 on D', and the noise it adds follows (its scale is proportional to the bound).

    Examples
    --------
    >>> D, Dp = lr_small_norm_pair()
    >>> round(float(np.linalg.norm(D.X, axis=1).max()), 3), float(np.linalg.norm(Dp.X[0]))
    (0.01, 1.0)
    """
    D, w = synthetic_classification(100, 2, np.random.default_rng(20240502))
    D = Dataset(0.01 * D.X, D.y)
    return D, D.replaced(0, -w / np.linalg.norm(w), 1.0)
