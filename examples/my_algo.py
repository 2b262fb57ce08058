"""A user's own curator algorithm, checked by ``dpverify sensitivity`` (see
docs/sensitivity.md, which walks through it).

* ``clipped_gd``: gradient descent on a clipped gradient sum, noise scaled to its
  sensitivity (C under add/remove, 2C under replace-one);
* ``buggy_gd``: the same divided by the number of records present, which add/remove
  neighbours change: its declared sensitivity is wrong;
* ``data``: the dataset the checks replay it on.
"""

import numpy as np


def data():
    """200 records in the box [-1, 1]^3 with linear labels, as ``(X, y)``."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(200, 3))
    return X, X @ np.array([1.0, -1.0, 0.5])


def clipped_gd(cur, setting, params, *, divide_by_count=False):
    """T steps of gradient descent on the noisy sum of per-sample clipped gradients."""
    C, T = float(params.get("clip", 1.0)), int(params.get("T", 5))
    sens = C if params["relation"] == "add_remove" else 2 * C
    theta = np.zeros((cur.trials, cur.d))
    for t in range(T):
        cur.step(t)

        def grad_sum(X, y, w, theta=theta):
            ok = np.isfinite(X).all(axis=1) & np.isfinite(y)
            X, y, w = np.where(ok[:, None], X, 0.0), np.where(ok, y, 0.0), w * ok
            G = (theta @ X.T - y)[..., None] * X  # per-sample gradients
            norm = np.linalg.norm(G, axis=2, keepdims=True)
            G = G * np.minimum(1.0, C / np.maximum(norm, 1e-12))
            s = np.einsum("kn,knd->kd", w, G)
            return s / w.sum(axis=1, keepdims=True) if divide_by_count else s

        declared = sens / cur.n if divide_by_count else sens
        g = cur.gaussian("grad_sum", grad_sum, sensitivity=declared,
                         noise_std=2.0 * declared)
        theta = theta - 0.5 * (g if divide_by_count else g / cur.n)
    return theta


def buggy_gd(cur, setting, params):
    """The same, averaged over the records present: a private count in the denominator."""
    return clipped_gd(cur, setting, params, divide_by_count=True)
