"""Where the conformance battery looks at the algorithms of paper 002.

The battery (:mod:`dpverify.checks.conformance`) runs every check on every variant at the sizes
declared here. Three kinds of configuration recur:

* the *paper's universe* for variants that do not clip: every record has ||a|| <= 1 (the
  rows of App. A scaled to the unit ball give G = 1, Def. 3.1, line 75), so a sensitivity
  search draws only such records: an outlier would break G trivially, not the proof;
* the *Huber canary* configurations of DP-SVRG and DP-SVRG++: a convex, 1-Lipschitz,
  1-smooth loss (inside Thm 4.1's class) whose derivative spans [-1, 1], so a record's
  variance-reduced term grad f(x, z) - grad f(x~, z) reaches 2G when x and x~ straddle the
  kink, with a step eta = 5 that makes the iterates cross it (Thm 4.1 holds for any eta);
* the *linear canary* of DP-GD and DP-SGD: f(x, z) = -y <a, x>, whose gradient never fades,
  so the transcript is exactly a Gaussian mechanism and a white-box audit is tight.
"""

from __future__ import annotations

import math
from typing import Any


def universe(d: int, **extra: Any) -> dict[str, Any]:
    """Sensitivity options that keep every drawn record in the paper's unit ball.

    Canaries at or inside the ball only (no ``outlier``, ``nonfinite`` or ``opposed``
    records) and hypothesis draws with coordinates of at most 1/sqrt(d).

    Examples
    --------
    >>> universe(4)["max_abs"], universe(4)["nonfinite"]
    (0.5, False)
    """
    return {"neighbours": ("fresh_direction", "clip_boundary", "random"),
            "max_abs": 1.0 / math.sqrt(d), "nonfinite": False, **extra}


#: DP-SVRG's Huber canary: one epoch of m = 100 steps at n = 200, eps = 2, d = 2; the
#: condition eps <= c1 T m / n^2 of Thm 4.1 then holds for c1 >= 800.
SVRG_HUBER = {"loss": "huber", "d": 2, "n": 200, "epsilon": 2.0, "lam": 0.01, "eta": 5.0,
              "T": 1, "m": 100}

#: DP-SVRG++'s Huber canary: m = 10 (Fig. 2's), T = 3 (140 noisy steps; eq. (6) counts
#: 2^T m = 80), n = 150, eps = 2: eps <= c1 2^T m / n^2 holds for c1 >= 562.
SVRG_PP_HUBER = {"loss": "huber", "d": 2, "n": 150, "epsilon": 2.0, "eta": 5.0, "T": 3,
                 "m": 10}

#: DP-GD's linear canary (notes A1): the white-box bound is the exact GDP curve.
GD_LINEAR = {"loss": "linear", "lam": 1.0}

#: DP-SGD at batch 1 (q = 1/n), the regime DP-SVRG's proof applies Thm 3.1 in (line 451):
#: eps / (q^2 T) = 400 and a noise multiplier below 1.
SGD_BATCH1 = {"n": 200, "d": 5, "lam": 1.0, "loss": "linear", "batch": 1, "T": 100}

#: Null audits of sound variants: a bound above the claim at this confidence is a FAIL.
NULL = {"confidence": 0.999}


#: Size of :func:`output_canary`'s datasets (the audit's problem must match).
CANARY_N = 100
CANARY = "algorithms.paper002.battery:output_canary"

#: Black-box configurations on :func:`output_canary`: one short epoch (5 steps of
#: DP-SVRG, 2 m = 4 of DP-SVRG++), so the record is drawn in about 1 run in 20-25 while the
#: noise of the printed sigma stays a fifth of its kick; eta = 50 carries the iterate past
#: the kink at once (the privacy theorems hold for any eta).
SVRG_OUTPUT = {"loss": "huber", "d": 1, "n": CANARY_N, "epsilon": 2.0, "lam": 0.0,
               "eta": 50.0, "T": 1, "m": 5}
SVRG_PP_OUTPUT = {**SVRG_OUTPUT, "m": 2}

#: DP-SGD at batch 1 on :func:`output_canary`, linear loss: 5 steps, so the record is drawn in
#: about 1 run in 20 and each draw moves the output by eta G against a printed noise of
#: std G sigma = 0.07 G per step; eps / (q^2 T) = 4000 (Thm 3.1's condition needs c1 above).
SGD_CANARY = {"loss": "linear", "d": 1, "n": CANARY_N, "epsilon": 2.0, "lam": 0.001,
              "lam1": 0.0, "batch": 1, "T": 5}


def output_canary() -> tuple[Any, Any]:
    """A replace-one pair in d = 1 where a sampled step shows in the output (notes A3).

    D' holds ``CANARY_N`` records with zero features (their gradients vanish, so the run on
    D' is the noise alone); D replaces record 0 by (a, y) = (1, -1). For DP-SVRG's Huber
    loss the derivative clip(x - y, -1, 1) is 1 at the snapshot x~ = 0 and -1 once the
    iterate passes x = -2, so when the record is drawn its variance-reduced term is up to
    2G: a kick of 2 eta that the later iterates keep, against a noise of sigma per step.
    For DP-SGD's linear loss every draw moves the output by eta G.

    Examples
    --------
    >>> D, D_prime = output_canary()
    >>> D.X[0].tolist(), float(abs(D_prime.X).sum()), D.n
    ([1.0], 0.0, 100)
    """
    import numpy as np

    from dpverify.core.data import Dataset

    X, y = np.zeros((CANARY_N, 1)), np.zeros(CANARY_N)
    D_prime = Dataset(X, y)
    return D_prime.replaced(0, np.array([1.0]), -1.0), D_prime
