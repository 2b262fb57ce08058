"""Black-box audit: distinguish outputs on D from outputs on D', bound epsilon from below.

The auditor sees only what the target returns. For each neighbouring pair it draws
``trials`` outputs on D and on D' (seeded blocks through
:func:`dpverify.execution.map_blocks`), cuts each into three splits:

1. *fit*: each distinguisher is fitted (a direction, a covariance, a classifier);
2. *select*: every (pair, distinguisher, threshold) is ranked by the bound it would give
   on the test split;
3. *test*: the chosen test is counted once, and Clopper-Pearson bounds on its FPR and FNR
   give epsilon in both orientations (:mod:`dpverify.audit.stats`).

Since nothing is chosen on the counts that bound it, the bound holds at the stated
confidence whatever was tried; keeping ``top_k`` > 1 tests costs a Bonferroni factor.
This is the pattern of DP-Sniper and Delta-Siege (Bichsel et al. 2021; Lokna et al. 2023)
with exact binomial bounds and every selection accounted for (the pitfalls in
anchors/auditing.md, section 2).

The GDP bound (``bound="gdp"``) reads mu off the same kind of test (Nasr et al. 2023) and
is valid only where the output's trade-off curve is Gaussian, e.g. a Gaussian mechanism
returned as is; the report carries that assumption.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dpverify.audit import stats
from dpverify.audit.distinguishers import resolve_distinguishers, safe_scores
from dpverify.audit.power import DETECT_PROBABILITY, threshold_test_power
from dpverify.audit.result import AuditResult
from dpverify.audit.targets import (
    AUTO_NEIGHBOURS,
    SEED_FIT,
    SEED_SAMPLES,
    accountant_epsilon,
    make_pairs,
    prepare,
    resolve_neighbours,
    sample,
)
from dpverify.errors import InputError, check_positive, check_probability
from dpverify.execution import seed_streams

if TYPE_CHECKING:
    from dpverify.executors import Execution

DEFAULT_SPLITS = (0.1, 0.2, 0.7)
GDP_ASSUMPTION = ("GDP bound: assumes the output's trade-off curve is Gaussian (true for a "
                  "Gaussian mechanism whose output is returned as is); not a general bound")


def check_bound(bound: str) -> str:
    """Return ``bound`` if it names a bound (``cp``, ``gdp``, ``auto``), else raise.

    Examples
    --------
    >>> check_bound("gdp")
    'gdp'
    """
    if bound not in ("cp", "gdp", "auto"):
        raise InputError(f"bound must be 'cp', 'gdp' or 'auto', got {bound!r}")
    return bound


def audit_blackbox(
    target: str,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    neighbours: str | Sequence[str] = AUTO_NEIGHBOURS,
    trials: int = 100_000,
    confidence: float = 0.95,
    distinguisher: str | Sequence[str] = "auto",
    bound: str = "cp",
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    scale: str = "quick",
    relation: str | None = None,
    splits: Sequence[float] = DEFAULT_SPLITS,
    top_k: int = 1,
    block_size: int | None = None,
    backend: str = "numpy",
    execution: Execution | None = None,
    accountant: bool = True,
    detect_probability: float | None = DETECT_PROBABILITY,
) -> AuditResult:
    """Black-box epsilon lower bound of ``target`` from ``trials`` runs per neighbour.

    Parameters
    ----------
    target
        ``name``, ``name:variant`` (registered) or ``module:function`` with the signature
        ``f(data, rng, trials) -> array (trials, ...)``.
    epsilon, delta
        The claim to test; for a registered target they default to its own claim.
    neighbours
        Pair generators: built-in names (``worst_case``, ``fresh_direction``,
        ``clip_boundary``, ``outlier``, ``nonfinite``, ``random``) or ``module:function``
        returning ``(D, D_prime)``; several, comma-separated, are searched on the
        selection split. ``auto`` (default): the worst-case canary where the target
        declares a clip (:func:`~dpverify.audit.targets.resolve_neighbours`), else
        ``fresh_direction``.
    trials
        Runs on each dataset of each pair.
    confidence
        1 - alpha for the reported bound, after every correction.
    distinguisher
        A name of :mod:`dpverify.audit.distinguishers`, several, or ``"auto"`` (all).
    bound
        ``"cp"`` (assumption-free; ``"auto"`` means this in black-box) or ``"gdp"``.
    splits
        Fractions of the runs used to fit, select and test.
    block_size, execution
        Trials per seeded block, and where blocks run (:mod:`dpverify.executors`; serial
        by default). Results depend on the seed and the block size only.
    accountant
        Whether to account the target's ledger for ``epsilon_accountant`` (skipped in
        repeated self-tests, where it is the same every time).
    detect_probability
        The probability at which ``epsilon_detectable`` is caught (``None``: not computed,
        for repeated self-tests).

    Returns
    -------
    AuditResult
        ``epsilon_lower`` from the chosen bound; ``details`` holds the CP bound (and the
        GDP bound when asked for), the pair and distinguisher that achieved it;
        ``evidence["test"]`` the test's threshold and held-out counts;
        ``epsilon_detectable`` what a test chosen and counted on splits of these sizes,
        at this level, catches with ``detect_probability``
        (:func:`~dpverify.audit.power.threshold_test_power`).

    Examples
    --------
    >>> r = audit_blackbox("gaussian_mechanism:sound", trials=20000, seed=1,
    ...                    distinguisher="projection")
    >>> r.verdict.value, 0.0 < r.epsilon_lower < r.epsilon_claimed
    ('PASS', True)
    """
    trials = int(check_positive(trials, "trials", integer=True))
    confidence = check_probability(confidence, "confidence")
    check_bound(bound)
    alpha = 1.0 - confidence
    dists = resolve_distinguishers(distinguisher)
    setup = prepare(target, epsilon=epsilon, delta=delta, params=params, seed=seed,
                    scale=scale, relation=relation, backend=backend)
    pairs = make_pairs(setup, resolve_neighbours(setup, neighbours))
    n_fit, n_sel, n_test = stats.split_sizes(trials, splits)

    sample_root = seed_streams(seed, SEED_SAMPLES + 1)[SEED_SAMPLES]
    fit_rng = np.random.default_rng(seed_streams(seed, SEED_FIT + 1)[SEED_FIT])
    candidates: list[stats.ScoreSplit] = []
    shapes: dict[str, Any] = {}
    for pr, ss in zip(pairs, seed_streams(sample_root, len(pairs)), strict=True):
        s_D, s_Dp = ss.spawn(2)
        out_D = sample(setup, pr.D, trials, s_D, block_size, execution)
        out_Dp = sample(setup, pr.D_prime, trials, s_Dp, block_size, execution)
        if out_D.shape[1:] != out_Dp.shape[1:]:
            raise InputError(f"target {setup.name} returned outputs of different shapes on "
                             f"D {out_D.shape[1:]} and D' {out_Dp.shape[1:]} ({pr.label})")
        shapes[pr.label] = list(out_D.shape[1:])
        fD, sD, tD = np.split(out_D, [n_fit, n_fit + n_sel])
        fDp, sDp, tDp = np.split(out_Dp, [n_fit, n_fit + n_sel])
        for name, fit in dists:
            scorer = fit(fD, fDp, fit_rng)
            candidates.append(stats.ScoreSplit(
                f"{pr.label} | {name}", safe_scores(scorer, sD, name),
                safe_scores(scorer, sDp, name),
                safe_scores(scorer, tD, name), safe_scores(scorer, tDp, name)))

    cp = stats.bound_from_scores(candidates, delta=setup.delta, alpha=alpha, method="cp",
                                 top_k=top_k)
    # The GDP bound is computed only on request: on a mechanism whose trade-off curve is
    # not Gaussian (Laplace, anything clipped or sampled) its number means nothing.
    gdp = (stats.bound_from_scores(candidates, delta=setup.delta, alpha=alpha, method="gdp",
                                   top_k=top_k) if bound == "gdp" else None)
    chosen = gdp if gdp is not None else cp
    eps_acc, acc_note = (accountant_epsilon(setup) if accountant
                         else (None, "not computed (accountant=False)"))
    pair_label, _, dist_label = chosen.label.rpartition(" | ")
    dist_label = dist_label.removesuffix(" (reversed)")
    details = {
        "epsilon_lower_cp": cp.epsilon,
        "epsilon_lower_gdp": None if gdp is None else gdp.epsilon,
        "mu_lower": None if gdp is None else gdp.mu,
        "runs_total": 2 * trials * len(pairs),
        "split": [n_fit, n_sel, n_test],
        "pairs": [p.label for p in pairs],
        "distinguishers": [n for n, _ in dists],
        "pair": pair_label,
        "distinguisher": dist_label,
        "relation": setup.relation,
        "instance": list(setup.notes),
    }
    evidence = {
        "test": chosen.to_dict(),
        "output_shape": shapes,
        "accountant": acc_note,
    }
    if gdp is not None:
        evidence["cp_test"] = cp.to_dict()
    # The chosen test's ROC on its test split, for plots against the claim's trade-off.
    base = chosen.label.removesuffix(" (reversed)")
    match = next((c for c in candidates if c.label == base), None)
    if match is not None:
        sign = -1.0 if chosen.label.endswith(" (reversed)") else 1.0
        evidence["roc"] = stats.roc_points(sign * match.test_pos, sign * match.test_neg)
    assumptions = [GDP_ASSUMPTION] if bound == "gdp" else []
    res = AuditResult(setup.name, "blackbox", chosen.epsilon, setup.epsilon_claimed, eps_acc,
                      setup.delta, confidence, trials, "gdp" if bound == "gdp" else "cp",
                      details, evidence, assumptions)
    if detect_probability is None:
        return res
    return res.with_power(threshold_test_power(
        chosen.n_pos, chosen.n_neg, alpha=chosen.alpha, delta=setup.delta,
        epsilon=setup.epsilon_claimed, method=chosen.method, probability=detect_probability,
        selection=(n_sel, n_sel)))
