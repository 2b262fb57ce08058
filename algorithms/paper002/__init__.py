"""Paper 002: Wang, Ye and Xu (2017), "Differentially private empirical risk minimization
revisited: faster and more general" (NIPS 2017).

Registered algorithms (entry point ``dpverify.algorithms``: ``paper002``), each with a
``paper`` variant (as printed, with stated constants, carrying the findings of the notes)
and a ``sound`` one (per-sample clipping, noise calibrated by the accountant):

* ``dp_svrg``: DP-SVRG, Alg. 1 (strongly convex F^r, prox step for a nonsmooth r);
* ``dp_svrg_pp``: DP-SVRG++, Alg. 2 (convex F^r, doubling epochs);
* ``dp_accmd``: DP-AccMD, Alg. 3 (mirror descent on the l1 ball);
* ``dp_gd_002``: DP-GD, Alg. 4 (PL: ``paper``/``sound``; nonconvex: ``paper_nonconvex``/
  ``sound_nonconvex``);
* ``dp_sgd_002``: the DP-SGD baseline of Thm 3.1.

``REGISTER`` lists every testable claim of the paper and of the notes on it, with the
checks that decide it (:mod:`algorithms.paper002.register`).
"""

from algorithms.paper002.accmd import DP_ACCMD
from algorithms.paper002.gd import DP_GD, DP_SGD
from algorithms.paper002.register import REGISTER
from algorithms.paper002.svrg import DP_SVRG, DP_SVRG_PP

ALGORITHMS = [DP_SVRG, DP_SVRG_PP, DP_ACCMD, DP_GD, DP_SGD]

__all__ = ["ALGORITHMS", "DP_ACCMD", "DP_GD", "DP_SGD", "DP_SVRG", "DP_SVRG_PP", "REGISTER"]
