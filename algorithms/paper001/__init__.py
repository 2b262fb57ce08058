"""Paper 001: Kornowski, Liu, Talwar, "Improved sample complexity for private nonsmooth
nonconvex optimization".

Registered algorithms (entry point ``dpverify.algorithms``: ``paper001``), each Algorithm 2
(O2NC) with one of the paper's oracles, as a ``paper`` variant (as printed, carrying the
findings of the notes with the paper's line numbers) and a ``sound`` one (per-record
estimates projected onto balls, noise calibrated by the accountant):

* ``o2nc_zo``: single-pass zero-order oracle, Algorithm 3 (Theorem 3.1);
* ``o2nc_erm``: multi-pass zero-order ERM oracle, Algorithm 4 (Theorem 4.1);
* ``o2nc_fo``: single-pass first-order oracle, Algorithm 5 (Theorem 6.1);
* ``tree_prefix``: the tree mechanism of Algorithm 1 alone, one period of noisy prefix sums
  (sound, as printed, and a planted one-level-short calibration);
* ``ztc_zo``: the baseline the paper improves on, Zhang, Tran, Cutkosky (ICLR 2024),
  reconstructed from the paper's description (:mod:`algorithms.paper001.baseline_zhang`).

``REGISTER`` (:mod:`algorithms.paper001.register`) is the paper's claims register; the
battery's declarations are in :mod:`algorithms.paper001.battery`.

The tree mechanism (Algorithm 1) is the curator primitive :mod:`dpverify.mechanisms.tree`; the
Goldstein stationarity metric is :mod:`dpverify.checks.rates.goldstein`.
"""

from algorithms.paper001 import generalization  # noqa: F401  (registers its metric)
from algorithms.paper001.baseline_zhang import ZHANG_ZO
from algorithms.paper001.multi_pass import O2NC_ERM
from algorithms.paper001.register import REGISTER
from algorithms.paper001.single_pass import O2NC_FO, O2NC_ZO
from algorithms.paper001.tree_mechanism import TREE

ALGORITHMS = [O2NC_ZO, O2NC_ERM, O2NC_FO, TREE, ZHANG_ZO]

__all__ = ["ALGORITHMS", "O2NC_ERM", "O2NC_FO", "O2NC_ZO", "REGISTER", "TREE", "ZHANG_ZO"]
