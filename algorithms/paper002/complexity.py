"""Gradient complexity of paper 002's algorithms, counted on the ledger of a run.

The paper counts per-record gradient evaluations (Table 1-3, Thms 4.2, 4.4, 5.4): DP-SVRG
makes T (n + 2m) (a full gradient per epoch, line 134, and two gradients of one record
per inner step, line 137), DP-SVRG++ T n + 2 m (2^(T+1) - 2), DP-AccMD and DP-GD n T.
:func:`gradient_evaluations` reads the count off what a run actually released, so a rate
check (``module:function`` target, :mod:`dpverify.checks.rates`) fits how the theorem-tuned
schedule's cost grows in n, epsilon, kappa or d.

Run it on the sound variants: their ledgers hold exactly what the algorithm computes (the
snapshot gradient once per epoch). The printed DP-SVRG releases the snapshot's noise at
every step (the proof's split of sigma, eqs. 15-16), so its ledger re-evaluates the snapshot
m times per epoch although the algorithm computes it once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

#: Gradients of one record a release evaluates: grad f(x, z) - grad f(x~, z) costs two.
GRADIENTS_PER_RECORD = {"svrg_difference": 2}


def count_gradients(releases: Iterable[Any]) -> int:
    """Per-record gradient evaluations of a ledger's releases.

    A sampled release reads its batch, any other the whole dataset; the SVRG difference
    reads each of its records twice (:data:`GRADIENTS_PER_RECORD`).

    Examples
    --------
    >>> from types import SimpleNamespace as R
    >>> count_gradients([R(name="svrg_snapshot", batch_size=None, dataset_size=100),
    ...                  R(name="svrg_difference", batch_size=1, dataset_size=100)])
    102
    """
    total = 0
    for rel in releases:
        records = rel.batch_size if rel.batch_size else rel.dataset_size
        total += GRADIENTS_PER_RECORD.get(rel.name, 1) * int(records)
    return total


def _count(target: str, params: dict[str, Any], seeds: Sequence[int]) -> np.ndarray:
    """One run of ``target`` at ``params``; its gradient count once per seed.

    The schedule depends on public parameters only, so every seed gives the same count;
    the rate machinery receives it once per seed (a ``module:function`` target with a
    ``seeds`` argument is called once per grid point).
    """
    from dpverify.execution.experiment import Experiment

    _, cur = Experiment(target, params).run(trials=1, rng=0)
    return np.full(len(seeds), float(count_gradients(cur.ledger.releases)))


def svrg_gradients(*, n: int, d: int, epsilon: float, lam: float, seeds: Sequence[int],
                   delta: float = 1e-3) -> np.ndarray:
    """Gradient evaluations of DP-SVRG (sound) at Thm 4.2's T, m, eta.

    Examples
    --------
    >>> from algorithms.paper002.svrg import DP_SVRG, svrg_schedule
    >>> count = svrg_gradients(n=200, d=5, epsilon=1.0, lam=1.0, seeds=[0])[0]
    >>> _, m, T = svrg_schedule(DP_SVRG.params("sound"), _setting("dp_svrg:sound", 200, 5),
    ...                         200, 5, plus=False)
    >>> bool(count == T * (200 + 2 * m))
    True
    """
    return _count("dp_svrg:sound", {"n": n, "d": d, "epsilon": epsilon, "lam": lam,
                                     "delta": delta, "T": None, "m": None}, seeds)


def svrg_pp_gradients(*, n: int, d: int, epsilon: float, seeds: Sequence[int],
                      delta: float = 1e-3) -> np.ndarray:
    """Gradient evaluations of DP-SVRG++ (sound) at Thm 4.4's T and the experiment's m = 10.

    Examples
    --------
    >>> int(svrg_pp_gradients(n=100, d=5, epsilon=1.0, seeds=[0])[0])  # T = 5
    1740
    """
    return _count("dp_svrg_pp:sound", {"n": n, "d": d, "epsilon": epsilon, "delta": delta,
                                        "T": None, "m": 10}, seeds)


def accmd_gradients(*, n: int, d: int, epsilon: float, seeds: Sequence[int],
                    delta: float = 1e-3) -> np.ndarray:
    """Gradient evaluations of DP-AccMD (sound) at Thm 5.4's T: n T.

    Examples
    --------
    >>> int(accmd_gradients(n=100, d=50, epsilon=1.0, seeds=[0])[0])  # T = 11
    1100
    """
    return _count("dp_accmd:sound", {"n": n, "d": d, "epsilon": epsilon, "delta": delta,
                                      "T": None}, seeds)


def _setting(target: str, n: int, d: int) -> Any:
    """The public setting of ``target``'s problem at size (n, d) (for the doctests)."""
    from dpverify.execution.experiment import Experiment

    return Experiment(target, {"n": n, "d": d}).setting()
