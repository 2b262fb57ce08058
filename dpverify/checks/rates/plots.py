"""Log-log plots of rate fits: seeds, means, the fitted curve with its band, the theory line.

matplotlib is optional (the ``plots`` extra): without it :func:`plot_fits` warns and
returns ``None``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpverify.stats.rate_fit import RateFit


def _curves(fit: RateFit, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fitted mean on ``grid`` (x units) and its pointwise bootstrap band."""
    L = np.exp(np.interp(np.log(grid), np.log(fit.x), np.log(fit.log_factor)))
    lg = np.log(grid)
    if fit.model == "offset":
        centre = fit.amplitude * L * grid**fit.exponent + fit.floor
    else:
        centre = np.exp(fit.intercept + fit.exponent * lg) * L
    b = fit.boot
    if not b:
        return centre, centre, centre
    use = b["use_offset"]
    with np.errstate(invalid="ignore", over="ignore"):
        pow_curves = np.exp(b["a_power"][:, None] + b["p_power"][:, None] * lg[None, :]) * L
        off_curves = (b["A_offset"][:, None] * L * grid[None, :] ** b["p_offset"][:, None]
                      + b["c_offset"][:, None])
    curves = np.where(use[:, None], off_curves, pow_curves)
    curves = curves[np.all(np.isfinite(curves), axis=1)]
    if curves.shape[0] < 10:
        return centre, centre, centre
    a = (1 - fit.settings.confidence) / 2
    lo, hi = np.quantile(curves, [a, 1 - a], axis=0)
    return centre, lo, hi


def plot_fits(fits: Sequence[RateFit], path: str | Path, *, title: str = "",
              ylabel: str = "utility") -> Path | None:
    """Write one log-log panel per fit to ``path`` (PNG); ``None`` without matplotlib.

    Each panel shows every seed's utility (faint), the per-point means (points outside the
    regime hollow), the fitted curve with its pointwise bootstrap band, and the theory's
    slope drawn through the fitted curve at the grid's geometric centre.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from dpverify.stats.rate_fit import FitSettings, fit_rate
    >>> n = 2.0 ** np.arange(6, 11)
    >>> Y = n[:, None] ** -1.0 * np.exp(0.2 * np.random.default_rng(0).standard_normal((5, 8)))
    >>> fit = fit_rate(n, Y, theory=-1.0, parameter="n", settings=FitSettings(n_boot=200))
    >>> out = plot_fits([fit], pathlib.Path(tempfile.mkdtemp()) / "r.png")
    >>> out is None or out.stat().st_size > 0
    True
    """
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter
    except ImportError:
        warnings.warn("matplotlib is not installed (pip install 'dpverify[plots]'): no plot "
                      "written", stacklevel=2)
        return None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    k = max(1, len(fits))
    fig, axes = plt.subplots(1, k, figsize=(4.6 * k, 4.0), squeeze=False)
    for ax, fit in zip(axes[0], fits, strict=False):
        xs = fit.x
        ax.loglog(np.repeat(xs, fit.seeds), fit.utilities.reshape(-1), ".", color="0.7",
                  ms=3, label="seeds")
        m = fit.means
        inr = fit.in_regime
        ax.loglog(xs[inr], m[inr], "o", color="C0", label="mean")
        if (~inr).any():
            ax.loglog(xs[~inr], m[~inr], "o", mfc="none", color="C0", label="outside regime")
        if math.isfinite(fit.exponent) and inr.sum() >= 2:
            sel = xs[inr]
            grid = np.geomspace(sel.min(), sel.max(), 50)
            centre, lo, hi = _curves(fit, grid)
            ax.loglog(grid, centre, "-", color="C1",
                      label=f"fit p={fit.exponent:.2f} [{fit.ci_low:.2f}, {fit.ci_high:.2f}]")
            ax.fill_between(grid, lo, hi, color="C1", alpha=0.25, lw=0)
            g0 = math.exp(np.mean(np.log(sel)))
            c0 = float(np.exp(np.interp(math.log(g0), np.log(grid), np.log(centre))))
            ax.loglog(grid, c0 * (grid / g0) ** fit.theory, "--", color="C2",
                      label=f"theory p={fit.theory:g}")
        xl = {"param": fit.parameter, "rate": f"1 / rate ({fit.parameter} axis)"}.get(
            fit.axis, f"GDP mu ({fit.parameter} axis)")
        ax.set_xlabel(xl)
        ax.set_ylabel(ylabel)
        ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels collide on short axes
        ax.set_title(f"{fit.parameter}: {fit.verdict.value}")
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
