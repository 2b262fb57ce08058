"""Second-order stationarity of a minimax value function Phi(x) = max_{y in Y} f(x, y).

For f mu-strongly concave in y, Phi is differentiable with grad Phi(x) =
grad_x f(x, y*(x)) (Danskin; Xu et al., "DP SOSP in stochastic minimax", eq. 4), and where
y*(x) is interior to Y its Hessian is the Schur complement

    hess Phi(x) = f_xx - f_xy f_yy^{-1} f_yx,   all at (x, y*(x))

(implicit function theorem on grad_y f(x, y*(x)) = 0; Luo et al. 2022, Lemma 3.2). Using
f_xx alone, or the tracked y of an algorithm instead of y*(x), gives a wrong lambda_min.

A point is an alpha-SOSP (Definition 4 of paper 003, from Xian et al. 2025) when
||grad Phi|| <= alpha and lambda_min(hess Phi) >= -sqrt(rho_Phi alpha); the smallest such
alpha is :func:`sosp_alpha`.

The objective is a duck-typed NumPy object (``obj``) with batched methods over a leading
trial axis: ``value, grad_x, grad_y, hess_xx, hess_xy, hess_yy`` at (x, y) and
``project_y``; ``hess_xy`` has shape (trials, d1, d2). Metrics have the signature
``metric(problem, outputs, params) -> (trials,)`` and read ``problem.info["minimax"]``
(and ``problem.info["rho_phi"]``); they are evaluated without privacy and never touch a
curator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dpverify.core.errors import InputError

__all__ = [
    "METRICS",
    "grad_norm_phi",
    "inner_argmax",
    "min_eig_phi",
    "phi_at",
    "phi_grad",
    "phi_hessian",
    "phi_min_eig",
    "phi_value",
    "sosp_alpha",
]

#: Inner solves stop when the projected-gradient mapping is below this.
INNER_TOL = 1e-12


def _x(x: Any) -> np.ndarray:
    out = np.asarray(x, dtype=float)
    return out.reshape(out.shape[0], -1) if out.ndim > 1 else out[None]


def inner_argmax(obj: Any, x: np.ndarray, y0: np.ndarray | None = None, *,
                 tol: float = INNER_TOL, max_newton: int = 50,
                 max_pga: int = 200000) -> tuple[np.ndarray, np.ndarray]:
    """y*(x) = argmax_{y in Y} f(x, y) to high precision, and whether it is interior to Y.

    Damped Newton steps (with backtracking on f) solve the unconstrained problem, in one
    step when f is quadratic in y. Trials whose unconstrained maximiser lies outside Y
    continue with projected gradient ascent at step 1/L_y, L_y the largest eigenvalue of
    -f_yy, which converges linearly at rate 1 - mu/L_y (Nesterov 2004, Thm 2.2.8) until
    the gradient mapping L_y ||y - P_Y(y + grad_y f / L_y)|| is below ``tol``.

    Returns ``(y_star, interior)``, shapes (trials, d2) and (trials,).

    Examples
    --------
    >>> from algorithms.paper003.problems import CosineObjective
    >>> f = CosineObjective(1.0, 2.0, np.eye(2), np.zeros(2), y_radius=1.0)
    >>> y, inside = inner_argmax(f, np.array([[1.0, 0.0], [4.0, 0.0]]))
    >>> y.round(12).tolist(), inside.tolist()  # (A x - b)/mu = (0.5, 0) and (2, 0) -> (1, 0)
    ([[0.5, 0.0], [1.0, 0.0]], [True, False])
    """
    x = _x(x)
    t = x.shape[0]
    y = np.zeros((t, obj.d2)) if y0 is None else np.array(y0, dtype=float, copy=True)
    for _ in range(max_newton):
        g = obj.grad_y(x, y)
        if np.max(np.linalg.norm(g, axis=1)) <= tol:
            break
        H = obj.hess_yy(x, y)
        step = -np.linalg.solve(H, g[..., None])[..., 0]  # ascent direction (H < 0)
        f0 = obj.value(x, y)
        s = np.ones(t)
        for _ in range(40):  # Armijo backtracking, per trial
            y_new = y + s[:, None] * step
            ok = obj.value(x, y_new) >= f0 + 1e-4 * s * np.sum(g * step, axis=1) - 1e-15
            if ok.all():
                break
            s = np.where(ok, s, 0.5 * s)
        y = y + s[:, None] * step
    yp = obj.project_y(y)
    interior = np.all(np.isclose(yp, y, rtol=0.0, atol=1e-14), axis=1)
    if interior.all():
        return y, interior
    # Constrained trials: projected gradient ascent from the projected Newton point.
    idx = np.flatnonzero(~interior)
    xs, ys = x[idx], yp[idx]
    Ly = np.max(np.linalg.eigvalsh(-obj.hess_yy(xs, ys)), axis=1)[:, None]
    for _ in range(max_pga):
        y_new = obj.project_y(ys + obj.grad_y(xs, ys) / Ly)
        gap = Ly[:, 0] * np.linalg.norm(y_new - ys, axis=1)
        ys = y_new
        if np.max(gap) <= tol:
            break
    y = y.copy()
    y[idx] = ys
    return y, interior


def phi_at(obj: Any, x: np.ndarray) -> np.ndarray:
    """Phi(x) = f(x, y*(x)) for every row of ``x``: shape (trials,).

    Examples
    --------
    >>> from algorithms.paper003.problems import CosineObjective
    >>> f = CosineObjective(1.0, 1.0, 0.5 * np.eye(2), np.zeros(2))
    >>> x = np.array([[0.3, -0.2]])
    >>> bool(np.allclose(phi_at(f, x), f.phi_closed(x), atol=1e-14))
    True
    """
    x = _x(x)
    y, _ = inner_argmax(obj, x)
    return obj.value(x, y)


def phi_grad(obj: Any, x: np.ndarray) -> np.ndarray:
    """grad Phi(x) = grad_x f(x, y*(x)) (paper 003, eq. 4): shape (trials, d1).

    Examples
    --------
    >>> from algorithms.paper003.problems import CosineObjective
    >>> f = CosineObjective(1.0, 1.0, 0.5 * np.eye(2), np.zeros(2))
    >>> phi_grad(f, np.array([[0.0, 1.0]])).round(12).tolist()  # (-sin x1 + x1/4, x2/4)
    [[0.0, 0.25]]
    """
    x = _x(x)
    y, _ = inner_argmax(obj, x)
    return obj.grad_x(x, y)


def phi_hessian(obj: Any, x: np.ndarray) -> np.ndarray:
    """hess Phi(x) = f_xx - f_xy f_yy^{-1} f_yx at (x, y*(x)): shape (trials, d1, d1).

    Rows whose y*(x) lies on the boundary of Y are NaN: Phi need not be twice
    differentiable there (notes, "How to measure SOSP", item 6).

    Examples
    --------
    >>> from algorithms.paper003.problems import CosineObjective
    >>> f = CosineObjective(1.0, 1.0, 0.5 * np.eye(2), np.zeros(2))
    >>> phi_hessian(f, np.zeros((1, 2))).round(12).tolist()  # diag(-a + b^2/mu, b^2/mu)
    [[[-0.75, 0.0], [0.0, 0.25]]]
    """
    x = _x(x)
    y, interior = inner_argmax(obj, x)
    Hxx = obj.hess_xx(x, y)
    Hxy = obj.hess_xy(x, y)
    Hyy = obj.hess_yy(x, y)
    # Schur complement of f_yy: the PSD correction -f_xy f_yy^{-1} f_yx (f_yy < 0).
    H = Hxx - Hxy @ np.linalg.solve(Hyy, Hxy.transpose(0, 2, 1))
    H = 0.5 * (H + H.transpose(0, 2, 1))
    H[~interior] = np.nan
    return H


def phi_min_eig(obj: Any, x: np.ndarray) -> np.ndarray:
    """lambda_min(hess Phi(x)) per row (NaN where y*(x) is on the boundary of Y).

    Examples
    --------
    >>> from algorithms.paper003.problems import CosineObjective
    >>> f = CosineObjective(1.0, 1.0, 0.5 * np.eye(2), np.zeros(2))
    >>> phi_min_eig(f, np.zeros((1, 2))).round(12).tolist()
    [-0.75]
    """
    H = phi_hessian(obj, x)
    out = np.full(H.shape[0], np.nan)
    ok = np.all(np.isfinite(H), axis=(1, 2))
    if ok.any():
        out[ok] = np.linalg.eigvalsh(H[ok])[:, 0]
    return out


# Metrics: metric(problem, outputs, params) -> (trials,) ------------------------------------


def _objective(problem: Any) -> Any:
    obj = getattr(problem, "info", {}).get("minimax")
    if obj is None:
        raise InputError("second-order metrics need a minimax problem: problem.info['minimax'] "
                         "(see algorithms.paper003.problems)")
    return obj


def phi_value(problem: Any, outputs: Any, params: Mapping[str, Any]) -> np.ndarray:
    """Phi at each output (for Phi(x_t) curves and F0).

    Examples
    --------
    >>> from algorithms.paper003.problems import make_minimax_problem
    >>> prob = make_minimax_problem({"phi": "population"}, np.random.default_rng(0))
    >>> phi_value(prob, np.zeros((2, 3)), {}).round(12).tolist()  # a cos(0) = 1
    [1.0, 1.0]
    """
    return phi_at(_objective(problem), _x(outputs))


def grad_norm_phi(problem: Any, outputs: Any, params: Mapping[str, Any]) -> np.ndarray:
    """||grad Phi(x)|| at each output, the first condition of Definition 4.

    Examples
    --------
    >>> from algorithms.paper003.problems import make_minimax_problem
    >>> prob = make_minimax_problem({"phi": "population"}, np.random.default_rng(0))
    >>> grad_norm_phi(prob, np.zeros((1, 3)), {}).tolist()  # the strict saddle
    [0.0]
    """
    return np.linalg.norm(phi_grad(_objective(problem), _x(outputs)), axis=1)


def min_eig_phi(problem: Any, outputs: Any, params: Mapping[str, Any]) -> np.ndarray:
    """lambda_min(hess Phi(x)) at each output, Schur complement included.

    Examples
    --------
    >>> from algorithms.paper003.problems import make_minimax_problem
    >>> prob = make_minimax_problem({"phi": "population"}, np.random.default_rng(0))
    >>> min_eig_phi(prob, np.zeros((1, 3)), {}).round(12).tolist()  # -(a - beta^2/mu)
    [-0.75]
    """
    return phi_min_eig(_objective(problem), _x(outputs))


def sosp_alpha(problem: Any, outputs: Any, params: Mapping[str, Any]) -> np.ndarray:
    """The smallest alpha for which x is an alpha-SOSP (Definition 4, line 91).

    ||grad Phi|| <= alpha and lambda_min >= -sqrt(rho_Phi alpha) hold together exactly
    when alpha >= max(||grad Phi||, max(0, -lambda_min)^2 / rho_Phi). rho_Phi comes from
    ``params["rho_phi"]``, else ``problem.info["rho_phi"]``.

    Examples
    --------
    >>> from algorithms.paper003.problems import make_minimax_problem
    >>> prob = make_minimax_problem({"phi": "population"}, np.random.default_rng(0))
    >>> sosp_alpha(prob, np.zeros((1, 3)), {}).round(12).tolist()  # 0.75^2 / rho_Phi(=a=1)
    [0.5625]
    """
    rho = params.get("rho_phi", getattr(problem, "info", {}).get("rho_phi"))
    if rho is None or not float(rho) > 0:
        raise InputError("sosp_alpha needs rho_phi > 0 (params or problem.info)")
    obj = _objective(problem)
    x = _x(outputs)
    g = np.linalg.norm(phi_grad(obj, x), axis=1)
    neg = np.maximum(0.0, -phi_min_eig(obj, x))
    return np.maximum(g, neg * neg / float(rho))


#: The metrics by name, for a rates registry to register.
METRICS = {
    "phi_value": phi_value,
    "grad_norm_phi": grad_norm_phi,
    "min_eig_phi": min_eig_phi,
    "sosp_alpha": sosp_alpha,
}
