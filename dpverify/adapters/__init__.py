"""Adapters that make real DP libraries auditable targets, written to be copied.

Each target is a plain function ``f(data, rng, trials) -> array (trials, ...)``: ``data``
is the :class:`~dpverify.core.data.Dataset` a neighbour function returned, ``rng`` a NumPy
``Generator`` to seed the library from, and every row of the result one independent run.
Neighbour functions ``pair() -> (D, D_prime)`` build the datasets to tell apart. Give both
to the auditors by name::

    dpverify audit dpverify.adapters.diffprivlib_targets:gaussian_analytic \\
        --epsilon 1 --delta 1e-5 \\
        --neighbours dpverify.adapters.diffprivlib_targets:pair
    dpverify mia dpverify.adapters.opacus_targets:dp_sgd_linear --epsilon 3.2 --delta 1e-5

* :mod:`dpverify.adapters.diffprivlib_targets`: diffprivlib's ``GaussianAnalytic``,
  ``Gaussian`` and ``Laplace`` mechanisms and its ``LogisticRegression``;
* :mod:`dpverify.adapters.opacus_targets`: Opacus DP-SGD on a one-layer linear model.

The libraries are optional (``pip install dpverify[libraries]``); a module imports its
library only when a target runs.
"""
