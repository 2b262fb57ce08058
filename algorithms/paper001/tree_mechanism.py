"""Algorithm 1 of paper 001 on its own: the tree mechanism releasing noisy prefix sums.

A stream of Sigma leaves, leaf j the mean of B fresh records' (clipped) feature vectors,
is released as the Sigma noisy prefix sums X_p = v_1 + ... + v_p + TREE(p), the use
Algorithms 3 and 5 make of it (line 224 / line 393) within one period. Replacing one record
moves one leaf by at most s = 2 C / B (records clipped to norm C), so the worst record lies
below at most ``floor(log2 Sigma) + 1`` tree nodes and the node vector has L2 sensitivity
s sqrt(floor(log2 Sigma) + 1) (notes 001, "Corrected tree").

The variants isolate the two things a tree can get wrong:

* ``sound``: the dyadic tree (:class:`dpverify.mechanisms.tree.TreeAggregator`, binary mode), node
  noise set in closed form for exactly ``floor(log2 Sigma) + 1`` nodes per record: one
  Gaussian of sensitivity s sqrt(levels) calibrated to (epsilon, delta). The curator's
  ledger charges each record for the nodes it actually lies below, so the account check
  comparing the two is a coverage check: epsilon_accountant equals the claim exactly when
  the worst record is charged ``levels`` nodes, and exceeds it if any record is charged more.
* ``paper``: Algorithm 1 as printed and indexed TREE(t mod Sigma), with Prop. 2.5's
  sigma = 4 s sqrt(log Sigma log(1/delta)) / eps (line 147): the prefix at p = Sigma is
  released with no noise (NODE(0) is empty).
* ``planted_levels``: the dyadic tree, noise calibrated for ceil(log2 Sigma) nodes per
  record, the "log Sigma" of Prop. 2.5 read literally; for Sigma a power of two a record
  below the root is charged one node more than the noise pays for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from algorithms.paper001 import battery as bt
from algorithms.paper001 import settings as st
from algorithms.paper001.problems import PROBLEM_NAMES, make_problem
from dpverify.accounting.accountant import calibrate_gaussian
from dpverify.core.claims import Finding
from dpverify.core.curator import Curator
from dpverify.core.ranges import COUNT, POSITIVE, one_of
from dpverify.core.registry import Algorithm, RunFn, Setting, Variant
from dpverify.mechanisms.tree import TreeAggregator, tree_levels


def tree_noise(p: Mapping[str, Any], s: float, *, rule: str) -> float:
    """Node noise of a variant: ``"levels"`` (sound), ``"ceil_log2"`` (planted) or ``"paper"``.

    ``levels``/``ceil_log2``: sigma = z s sqrt(k) with z the noise multiplier of one Gaussian
    meeting (epsilon, delta) (PLD) and k = floor(log2 Sigma) + 1 or ceil(log2 Sigma) nodes
    per record (Gaussian releases compose by adding (s/sigma)^2, Dong, Roth, Su 2022,
    Cor. 3.3). ``paper``: Prop. 2.5 (line 147), 4 s sqrt(ln Sigma ln(1/delta)) / eps.

    Examples
    --------
    >>> p = {"Sigma": 16, "epsilon": 1.0, "delta": 1e-5}
    >>> [round(tree_noise(p, 1.0, rule=r), 3) for r in ("levels", "ceil_log2", "paper")]
    [8.342, 7.461, 22.599]
    """
    Sigma, eps, delta = int(p["Sigma"]), float(p["epsilon"]), float(p["delta"])
    if rule == "paper":
        return 4.0 * s * math.sqrt(math.log(Sigma) * math.log(1.0 / delta)) / eps
    k = tree_levels(Sigma) if rule == "levels" else max(1, (Sigma - 1).bit_length())
    return calibrate_gaussian(target_epsilon=eps, target_delta=delta) * s * math.sqrt(k)


def _clipped_mean(cur: Curator, clip: float, B: int):
    xp = cur.xp

    def query(X: Any, y: Any, w: Any) -> Any:
        # Projection onto the ball of radius C keeps a replaced record's move at 2 C / B
        # whatever the record (NaN rows count as zero).
        ok = xp.all(xp.isfinite(X), axis=1)
        X = xp.where(ok[:, None], X, xp.zeros_like(X))
        nrm = xp.linalg.vector_norm(X, axis=1, keepdims=True)
        scale = xp.where(nrm > clip, clip / xp.where(nrm > clip, nrm, xp.ones_like(nrm)),
                         xp.ones_like(nrm))
        return (w @ (X * scale)) / B

    return query


def _run(rule: str) -> RunFn:
    mode = "paper" if rule == "paper" else "binary"

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        Sigma, clip = int(p["Sigma"]), float(p["clip"])
        B = int(p["B"]) if p.get("B") is not None else max(1, cur.n // Sigma)
        s = 2.0 * clip / B  # replace-one: one leaf's mean moves by at most 2 C / B
        tree = TreeAggregator(cur, "tree", length=Sigma, noise_std=tree_noise(p, s, rule=rule),
                              mode=mode)
        leaf = _clipped_mean(cur, clip, B)
        outs = [tree.add(leaf, cur.subset(np.arange(j * B, (j + 1) * B)), sensitivity=s)
                for j in range(Sigma)]
        return cur.xp.concat(outs, axis=1)  # (trials, Sigma d): every prefix sum

    return run


_PRINTED = Finding(
    "Algorithms 3 and 5 add TREE(t mod Sigma) (lines 224, 393): at p = Sigma, NODE(0) is "
    "empty and the full prefix sum leaves with no noise; for Sigma a power of two NODE(Sigma) "
    "of Algorithm 1 (lines 158-166) also misses the last leaf, and at Sigma = 1 Prop. 2.5's "
    "sigma (line 147) is 0.",
    source="paper 001, Algorithm 1 (lines 151-166), Prop. 2.5 (line 147)",
    detected_by=("account", "sensitivity", "audit"),
)

_ONE_LEVEL_SHORT = Finding(
    "Planted: node noise for ceil(log2 Sigma) nodes per record, Prop. 2.5's 'log Sigma' read "
    "literally; for Sigma a power of two the first leaf lies below floor(log2 Sigma) + 1 "
    "nodes, one more than the noise pays for (epsilon about 1.13 at Sigma = 16).",
    source="paper 001, Prop. 2.5 (line 147); notes 001, 'Corrected tree'",
    detected_by=("account", "audit"),
)

TREE = Algorithm(
    name="tree_prefix",
    source=f"{st.SOURCE}, Algorithm 1 and Prop. 2.5",
    description="The tree mechanism alone: Sigma noisy prefix sums of leaf means of B "
                "records each (one period of Algorithms 3 and 5)",
    make_problem=make_problem,
    defaults={"problem": "amplitude", "n": 64, "d": 2, "Sigma": 16, "B": None, "clip": 1.0,
              "epsilon": 1.0, "delta": 1e-5, "n_population": 10},
    ranges={"problem": one_of(*PROBLEM_NAMES), "Sigma": COUNT, "B": COUNT,
            "clip": POSITIVE, "n_population": COUNT},
    variants={
        "sound": Variant(
            "sound", "sound", _run("levels"), st.claim,
            "Dyadic tree, every prefix tiled exactly; node noise for floor(log2 Sigma) + 1 "
            "nodes per record in closed form (one Gaussian at (epsilon, delta))",
            battery=bt.TREE_SOUND),
        "paper": Variant(
            "paper", "paper", _run("paper"), st.claim,
            "Algorithm 1 as printed, indexed TREE(t mod Sigma), sigma of Prop. 2.5",
            findings=(_PRINTED,), battery=bt.TREE_PAPER),
        "planted_levels": Variant(
            "planted_levels", "planted", _run("ceil_log2"), st.claim,
            "Dyadic tree with noise for ceil(log2 Sigma) nodes per record: one level short "
            "when Sigma is a power of two",
            findings=(_ONE_LEVEL_SHORT,), battery=bt.TREE_PLANTED_LEVELS),
    },
    battery=bt.TREE,
)

__all__ = ["TREE", "tree_noise"]
