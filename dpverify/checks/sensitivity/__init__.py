"""Grey-box sensitivity checking: does each noisy query move no more than it declares?

Every release an algorithm makes through the curator declares a sensitivity (the bound on
||q(D) - q(D')|| its noise is calibrated to). This checker replays the algorithm on
neighbouring datasets D and D', evaluating every query on both with the same randomness
and the same released history (:meth:`dpverify.core.curator.Curator.replay`), and compares the
true difference with the declared one, release by release, on the worst pairs it can find:

* the canaries of :data:`dpverify.core.data.PAIR_GENERATORS` (``fresh_direction``,
  ``clip_boundary``, ``outlier``, ``nonfinite``, ``random``) and ``opposed`` (the
  replace-one worst case of a clipped sum), plus random pairs;
* a ``hypothesis`` search that maximises the ratio true / declared over the differing
  record(s) and shrinks a violating pair to a minimal one;
* under both neighbouring relations, add/remove and replace-one.

A taint test runs alongside: with D''s released answers forced to equal D's, everything
else the algorithm does (releases, declared sensitivities, noise scales, sampling, batches,
output) must be identical. The verdict is FAIL with a counterexample pair and hints, or
PASS ("no violation found", never a proof).

Checking your own algorithm
---------------------------
Write it against the curator: ``algo(cur, setting, params) -> output``, where ``cur`` is a
:class:`~dpverify.core.curator.Curator` (``cur.trials`` runs at once), ``setting`` the public
:class:`~dpverify.core.registry.Setting` (``setting.n``, ``setting.d``: the algorithm never sees
the dataset, it asks the curator) and ``params`` holds your parameters plus ``relation``,
``n``, ``d``, ``epsilon``, ``delta``.
A file ``my_algo.py``::

    import numpy as np

    def data():
        rng = np.random.default_rng(0)
        X = rng.uniform(-1, 1, size=(200, 3))
        return X, X @ np.array([1.0, -1.0, 0.5])

    def clipped_gd(cur, setting, params, *, divide_by_count=False):
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
        return clipped_gd(cur, setting, params, divide_by_count=True)

From the command line (exit 0 on PASS, 1 on FAIL, 2 on bad input)::

    dpverify sensitivity my_algo:clipped_gd --data my_algo:data --relation both
    dpverify sensitivity my_algo:buggy_gd --data my_algo:data --json out.json
    dpverify sensitivity my_algo:clipped_gd --param n=300 --param d=4   # synthetic data

and from pytest::

    import my_algo
    from dpverify.checks.sensitivity import check_sensitivity

    def test_my_algo_sensitivity():
        report = check_sensitivity(my_algo.clipped_gd, data=my_algo.data,
                                   settings=SearchSettings(relation="both"))
        assert report.passed, report.summary()

A suite entry: ``kind = "sensitivity"``, ``target = "my_algo:clipped_gd"`` with
``[check.options] data = "my_algo:data"``. Options: ``neighbours``, ``relation``,
``search``, ``max_examples``, ``trials``, ``random_pairs``, ``data``, ``rtol``,
``max_abs``, ``nonfinite``, ``invariance`` (the fields of :class:`SearchSettings`, and
the ``data`` of :func:`check_sensitivity`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from dpverify.checks.base import CheckKind, Options, Outcome, Result, doc, register_kind
from dpverify.checks.sensitivity.replay import (
    DEFAULT_RTOL,
    InvarianceResult,
    LedgerExcess,
    PairResult,
    Replay,
    check_invariance,
    differing_records,
    ledger_excess,
    measure_pair,
)
from dpverify.checks.sensitivity.search import (
    DEFAULT_MAX_ABS,
    DEFAULT_MAX_EXAMPLES,
    DEFAULT_RANDOM_PAIRS,
    DEFAULT_TRIALS,
    GENERATORS,
    RELATION_CHOICES,
    SEARCHES,
    SearchResult,
    SearchSettings,
    SensitivityReport,
    check_sensitivity,
    hypothesis_search,
    opposed_pair,
    probe_hints,
)
from dpverify.checks.sensitivity.targets import (
    USER_DEFAULTS,
    load_data,
    resolve_target,
    user_target,
)
from dpverify.core.errors import InputError
from dpverify.core.prose import Statement, check_options, fmt, num
from dpverify.execution.experiment import Experiment

__all__ = [
    "DEFAULT_MAX_ABS", "DEFAULT_MAX_EXAMPLES", "DEFAULT_RANDOM_PAIRS", "DEFAULT_RTOL",
    "GENERATORS", "USER_DEFAULTS", "InvarianceResult", "LedgerExcess", "PairResult",
    "Replay", "SearchResult", "SearchSettings", "SensitivityReport", "check_invariance",
    "check_sensitivity",
    "differing_records", "hypothesis_search", "ledger_excess",
    "load_data", "measure_pair", "opposed_pair", "probe_hints", "resolve_target",
    "SensitivityCheck", "SensitivityOptions", "sensitivity_of", "user_target",
]

@dataclass(frozen=True)
class SensitivityOptions(Options, SearchSettings):
    """The :class:`SearchSettings` and the ``data`` of :func:`check_sensitivity`, as a
    suite gives them (``neighbours`` may be one name; ``trials`` defaults to the run's)."""

    neighbours: str | tuple[str, ...] | None = None
    trials: int | None = None
    data: str | None = None

    def __post_init__(self) -> None:
        """Nothing here: :meth:`validate` checks the options, the search the rest."""

    def validate(self) -> None:
        if self.relation not in RELATION_CHOICES:
            raise InputError(f"relation must be one of {RELATION_CHOICES}, got "
                             f"{self.relation!r}")
        if self.search not in SEARCHES:
            raise InputError(f"search must be one of {SEARCHES}, got {self.search!r}")


@dataclass(frozen=True)
class SensitivityMetrics(Result):
    """The ``sensitivity`` check's numbers: the declared sensitivity against the true
    difference on replayed neighbours (the worst pair)."""

    worst_ratio: float | None = doc("true difference / declared sensitivity, worst pair")
    declared: float | None = doc("the sensitivity the release declares")
    true_difference: float | None = doc("the largest difference measured on D and D'")
    release: int | None = doc("the release where it was measured")
    query: str | None = doc("the query released there")
    step: int | None = doc("the step of the release")
    relation: str | None = doc("the neighbouring relation of the worst pair")
    generator: str | None = doc("what generated the worst pair")
    trial: int | None = doc("the trial of the worst pair")
    pairs: int | None = doc("neighbouring pairs replayed")
    pairs_violated: int | None = doc("pairs whose difference exceeds the declared one")
    invariance_failures: int | None = doc("public-setting invariances that failed")
    hypothesis_examples: int | None = doc("examples hypothesis generated in the search")
    relations: list[Any] | None = doc("the relations tried")


@register_kind
class SensitivityCheck(CheckKind):
    """The ``sensitivity`` check kind: :func:`check_sensitivity` on the experiment's target.

    Metrics: ``worst_ratio``, ``declared``, ``true_difference``, ``release``, ``query``,
    ``step``, ``relation``, ``generator`` (of the worst pair) and counts; evidence: the
    ``counterexample`` (records, relation, index, ratio), the worst pair, hints.
    """

    name = "sensitivity"
    Options = SensitivityOptions
    Result = SensitivityMetrics
    column = "privacy"

    def run(self, exp: Experiment, options: SensitivityOptions) -> Outcome:
        report = sensitivity_of(exp, options)
        hint = f"; hint: {report.hints[0]}" if report.hints else ""
        return Outcome(report.verdict, SensitivityMetrics.from_metrics(report.metrics()),
                       report.evidence(), report.message + hint)

    def statement(self, check: Mapping[str, Any], claim: str,
                  info: Mapping[str, Any] | None) -> Statement:
        r = self.Result.of(check)
        if r.worst_ratio is None:
            measured = f"No neighbouring pair was replayed ({check.get('message', '')})."
        else:
            measured = (f"Replaying the run on {fmt(r.pairs)} neighbouring pairs "
                        f"({', '.join(r.relations or []) or r.relation}), the "
                        f"largest true difference of a release is {fmt(r.worst_ratio, 3)} "
                        f"times its declared sensitivity: query {r.query} at step "
                        f"{fmt(r.step)} moves by {fmt(r.true_difference)} where "
                        f"{fmt(r.declared)} is declared (pair {r.generator}, "
                        f"{r.relation}). {fmt(r.pairs_violated)} of "
                        f"{fmt(r.pairs)} pairs exceed the declaration.")
            if num(r.invariance_failures):
                measured += (f" {fmt(r.invariance_failures)} releases differ between "
                             "datasets where they should not.")
        conf = ("One pair above ratio 1 is a proof, not an estimate: both datasets are "
                "evaluated with the same randomness." if check.get("verdict") == "FAIL" else
                "A search can miss the worst pair, so finding none is no proof of the "
                "declared sensitivity.")
        short = ("no replayed pair moved a release beyond its declared sensitivity (a search, "
                 "not a proof)" if check.get("verdict") != "FAIL" else
                 f"a neighbouring pair moves {r.query} by {fmt(r.worst_ratio, 3)} "
                 "times its declared sensitivity (a counterexample: a proof)")
        if r.worst_ratio is not None and check.get("verdict") != "FAIL":
            short += f"; worst ratio {fmt(r.worst_ratio, 3)}"
        return Statement(f"Every noisy release declares the sensitivity its noise is scaled "
                         f"to; the variant claims {claim}.", measured, conf, short)

    def command(self, check: Mapping[str, Any]) -> list[str] | None:
        opts = check_options(check)
        finite = opts.pop("nonfinite", True) is False
        no_inv = opts.pop("invariance", True) is False
        if set(opts) - _FLAGS:
            return None
        args = ["dpverify", "sensitivity", str(check.get("target"))]
        for k, v in opts.items():
            vals = [str(x) for x in v] if isinstance(v, (list, tuple)) else [str(v)]
            args += [f"--{k.replace('_', '-')}", *vals]
        return args + ["--finite-only"] * finite + ["--no-invariance"] * no_inv


# Options with a flag of `dpverify sensitivity` (the command that reproduces a check alone).
_FLAGS = {"neighbours", "relation", "search", "max_examples", "trials", "random_pairs", "rtol",
          "max_abs", "data"}


def sensitivity_of(exp: Experiment, options: SensitivityOptions) -> SensitivityReport:
    """The sensitivity report of a check: ``options`` applied to the experiment.

    Examples
    --------
    >>> rep = sensitivity_of(Experiment("noisy_gd:planted_mean_noise_on_sum", {"T": 3, "n": 50}),
    ...                      SensitivityOptions(search="canaries", neighbours="clip_boundary"))
    >>> rep.verdict.value, rep.metrics()["query"]
    ('FAIL', 'grad_sum')
    """
    kw = {f.name: getattr(options, f.name) for f in fields(SearchSettings)}
    if isinstance(kw["neighbours"], str):
        kw["neighbours"] = [kw["neighbours"]]
    kw["trials"] = exp.trial_count(options.trials, DEFAULT_TRIALS)
    return check_sensitivity(exp.spec, exp.overrides, settings=SearchSettings(**kw),
                             seed=exp.seed, scale=exp.scale.value, backend=exp.backend,
                             data=options.data)
