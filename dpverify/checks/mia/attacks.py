"""Membership-inference attacks: turn the game's statistics into membership scores.

* ``loss``: the loss-threshold attack of Yeom et al. 2018 (Section 3.2): a record whose
  loss under the model is small is guessed a member. The score is minus the loss, one
  threshold for every record; it needs no shadow models.
* ``lira``: the likelihood-ratio attack of Carlini et al. 2022 ("Membership inference
  attacks from first principles", Section IV, online attack). From shadow trials in which
  record j was in and out, fit Gaussians N(mu_in_j, s_in^2) and N(mu_out_j, s_out^2) to
  its statistic (for the logistic loss, the logit-scaled confidence y z); the score of a
  new trial is the log-likelihood ratio of its statistic. The variances are pooled over
  records (their "fixed variance" variant, the better one with few shadow models per
  record); a record never seen in or out falls back to the pooled mean.

The shadow trials are the game's own: every trial is a model trained with or without each
record, so fitting LiRA costs no extra training, only trials set aside from the ones that
are bounded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpverify.core.errors import InputError

ATTACKS = ("loss", "lira")


@dataclass(frozen=True)
class LiraFit:
    """Per-record means and pooled standard deviations of the statistic, in and out."""

    mu_in: np.ndarray
    mu_out: np.ndarray
    sd_in: float
    sd_out: float
    shadows_in: np.ndarray
    shadows_out: np.ndarray

    def score(self, stat: np.ndarray) -> np.ndarray:
        """log N(s; mu_in_j, sd_in^2) - log N(s; mu_out_j, sd_out^2), for (trials, m)."""
        zi = (stat - self.mu_in[None, :]) / self.sd_in
        zo = (stat - self.mu_out[None, :]) / self.sd_out
        return -0.5 * zi * zi + 0.5 * zo * zo - np.log(self.sd_in / self.sd_out)


def _pooled(stat: np.ndarray, where: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """Per-record means of ``stat`` over trials where ``where`` and a pooled deviation."""
    cnt = where.sum(axis=0)
    tot = np.where(where, stat, 0.0).sum(axis=0)
    fin = np.isfinite(stat)
    glob = float(np.mean(stat[where & fin])) if np.any(where & fin) else 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = np.where(cnt > 0, tot / np.maximum(cnt, 1), glob)
    resid = np.where(where, stat - mu[None, :], 0.0)
    dof = max(int(cnt.sum() - np.count_nonzero(cnt)), 1)
    sd = float(np.sqrt(np.sum(resid * resid) / dof))
    return mu, sd, cnt


def fit_lira(stat: np.ndarray, member: np.ndarray) -> LiraFit:
    """Fit LiRA's Gaussians on shadow trials: ``stat`` and ``member`` are (shadows, m).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> M = rng.random((400, 3)) < 0.5
    >>> S = rng.normal(0, 1, (400, 3)) + 2.0 * M + np.array([0.0, 5.0, -5.0])
    >>> f = fit_lira(S, M)
    >>> bool(np.all(np.abs(f.mu_in - f.mu_out - 2.0) < 0.4)), round(f.sd_in, 1)
    (True, 1.0)
    """
    stat = np.asarray(stat, dtype=float)
    member = np.asarray(member, dtype=bool)
    if stat.shape != member.shape or stat.ndim != 2 or stat.shape[0] < 2:
        raise InputError(f"LiRA needs at least two shadow trials with statistics and "
                         f"memberships of equal shape, got {stat.shape} and {member.shape}")
    stat = np.where(np.isfinite(stat), stat, np.nan_to_num(stat, posinf=1e300, neginf=-1e300))
    mu_in, sd_in, n_in = _pooled(stat, member)
    mu_out, sd_out, n_out = _pooled(stat, ~member)
    # A statistic that does not vary (no noise at all) still gets a finite ratio.
    scale = float(np.nanmax(np.abs(stat))) if stat.size else 1.0
    floor = 1e-12 * max(scale, 1.0)
    return LiraFit(mu_in, mu_out, max(sd_in, floor), max(sd_out, floor), n_in, n_out)


def scores(attack: str, stats: dict[str, np.ndarray], fit: LiraFit | None = None) -> np.ndarray:
    """The (trials, m) membership scores of ``attack`` (higher: more likely a member).

    Examples
    --------
    >>> s = {"loss": np.array([[-0.1, -2.0]]), "lira": np.zeros((1, 2))}
    >>> scores("loss", s).tolist()
    [[-0.1, -2.0]]
    """
    if attack == "loss":
        return np.nan_to_num(np.asarray(stats["loss"], dtype=float), nan=-np.inf)
    if attack == "lira":
        if fit is None:
            raise InputError("the LiRA attack needs shadow trials (a fit)")
        return np.nan_to_num(fit.score(np.asarray(stats["lira"], dtype=float)), nan=0.0)
    raise InputError(f"unknown attack {attack!r}; known: {list(ATTACKS)} or 'auto'")


def resolve_attacks(spec: str) -> list[str]:
    """``"loss"``, ``"lira"``, ``"auto"`` (both) or a comma-separated list.

    Examples
    --------
    >>> resolve_attacks("auto")
    ['loss', 'lira']
    """
    out: list[str] = []
    for item in str(spec).split(","):
        item = item.strip()
        if item == "auto":
            out.extend(ATTACKS)
        elif item in ATTACKS:
            out.append(item)
        elif item:
            raise InputError(f"unknown attack {item!r}; known: {list(ATTACKS)} or 'auto'")
    if not out:
        raise InputError("no attack given")
    return list(dict.fromkeys(out))
