"""Audit the PyTorch training loop you already have: Opacus or hand-written DP-SGD.

Record a run without changing it, and ask what it actually released and whether that buys
the epsilon it reports::

    import dpverify.torch as dpt

    with dpt.record() as rec:               # Opacus: nothing else changes
        model, optimizer, loader = engine.make_private(...)
        for x, y in loader:
            ...
            optimizer.step()
    run = rec.run
    print(run.summary(delta=1e-5))          # executed ledger, epsilon vs Opacus's, findings

A hand-written loop calls :func:`record_noise` where it adds noise (a no-op outside a
recording). With a :class:`CanaryPair` the run is replayed on D and D' as it goes
(declared versus true sensitivity of every release); :func:`whitebox` replays many runs
for a white-box privacy-loss audit, and :func:`assert_private` does it all inside a test.

* :mod:`~dpverify.torch.record`: the recording, :class:`Mechanism`, :func:`record_noise`;
* :mod:`~dpverify.torch.opacus_hooks`: what is observed of Opacus;
* :mod:`~dpverify.torch.run`: :class:`Run`, the executed ledger and its epsilons;
* :mod:`~dpverify.torch.findings`: findings from the ledger alone;
* :mod:`~dpverify.torch.replay`, :mod:`~dpverify.torch.pair`: replay on a neighbouring pair;
* :mod:`~dpverify.torch.audit`: white-box audit over runs, :func:`assert_private`.
"""

from dpverify.torch.audit import LoopAudit, WhiteboxPlan, assert_private, audit_loop, whitebox
from dpverify.torch.findings import LoopFinding, ledger_findings
from dpverify.torch.pair import CanaryPair
from dpverify.torch.record import Mechanism, Recorder, ReplaySpec, record, record_noise
from dpverify.torch.run import Run

__all__ = [
    "CanaryPair", "LoopAudit", "LoopFinding", "Mechanism", "Recorder", "ReplaySpec", "Run",
    "WhiteboxPlan", "assert_private", "audit_loop", "ledger_findings", "record",
    "record_noise", "whitebox",
]
