"""Backend agreement: the same algorithm on NumPy and on torch must give the same answers.

Two comparisons, both against the NumPy backend as reference:

* **trajectory** (:func:`trajectory_agreement`): one seed, one noise stream. The torch
  backend takes its noise from the NumPy generator (``noise="shared"``), so every release
  and the final output must match up to rounding. What differs between the two runs is
  only how each backend computes: the order of summation in matrix products, autograd of
  ``loss.value`` against the closed-form ``loss.dvalue``, and the dtype. A wrong
  hand-written derivative, or Array API code that means something else on torch, shows
  up as a deviation far above rounding.
* **distribution** (:func:`distribution_agreement`): each backend draws its own noise
  (torch from a ``torch.Generator``), many trials, and a two-sample Kolmogorov-Smirnov
  test per output coordinate with Holm's correction. It catches what a shared stream
  hides: a torch sampler that is not the distribution the NumPy one is.

The ``agree`` check kind runs both; ``dpverify agree TARGET`` is its command line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dpverify.checks.base import (
    CheckKind,
    Options,
    Outcome,
    Result,
    doc,
    register_kind,
)
from dpverify.core.backends import Backend, get_backend
from dpverify.core.claims import Verdict
from dpverify.core.errors import InputError, check_positive, check_probability
from dpverify.core.prose import Statement, fmt
from dpverify.core.registry import Problem, Target, resolve
from dpverify.execution.experiment import Experiment
from dpverify.execution.trials import build_problem, run_target, seed_streams

#: Rounding differences each release may contribute, in units of machine epsilon (the rule
#: is in :func:`trajectory_tolerance`).
DEFAULT_SAFETY = 64.0
DEFAULT_ALPHA = 0.01
DEFAULT_TRIALS = 1000  # per backend, distributional comparison
DEFAULT_TRAJECTORY_TRIALS = 4
MODES = ("both", "trajectory", "distribution")


# Results ---------------------------------------------------------------------------------


@dataclass
class TrajectoryAgreement:
    """NumPy and torch runs on one noise stream, compared release by release.

    ``max_abs_dev`` and ``max_rel_dev`` are over the final output; ``worst_release`` is
    the release whose deviation is largest relative to its own tolerance.
    """

    target: str
    backend: str
    dtype: str
    trials: int
    releases: int
    max_abs_dev: float
    max_rel_dev: float
    tolerance: float
    ledger_match: bool
    release_rel_dev: list[float] = field(repr=False)
    release_tolerance: list[float] = field(repr=False)
    first_divergent_release: int | None = None
    first_divergent_name: str | None = None
    first_divergent_step: int | None = None

    @property
    def passed(self) -> bool:
        return (self.ledger_match and self.max_rel_dev <= self.tolerance
                and self.first_divergent_release is None)

    def metrics(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("release_rel_dev")
        out.pop("release_tolerance")
        out["passed"] = self.passed
        return out


@dataclass
class DistributionAgreement:
    """Two-sample tests per output coordinate, NumPy against torch, each with its own noise."""

    target: str
    backend: str
    dtype: str
    trials: int
    alpha: float
    statistics: list[float] = field(repr=False)
    pvalues: list[float] = field(repr=False)
    pvalues_adjusted: list[float] = field(repr=False)
    rejected: list[int] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.rejected

    @property
    def min_pvalue_adjusted(self) -> float:
        return min(self.pvalues_adjusted) if self.pvalues_adjusted else 1.0

    def metrics(self) -> dict[str, Any]:
        return {
            "target": self.target, "backend": self.backend, "dtype": self.dtype,
            "trials": self.trials, "alpha": self.alpha, "coordinates": len(self.pvalues),
            "min_pvalue_adjusted": self.min_pvalue_adjusted, "pvalues": self.pvalues,
            "pvalues_adjusted": self.pvalues_adjusted, "ks_statistics": self.statistics,
            "rejected_coordinates": self.rejected, "passed": self.passed,
        }


# Helpers ---------------------------------------------------------------------------------


def torch_status(device: str = "cpu") -> str | None:
    """``None`` when the torch backend can run on ``device``, else the reason it cannot.

    Examples
    --------
    >>> torch_status("cpu") is None or "torch" in torch_status("cpu")
    True
    """
    try:
        import torch
    except ImportError:
        return "torch is not installed (pip install 'dpverify[torch]')"
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        return f"device {device!r} requested but CUDA is not available"
    return None


def torch_backend(device: str = "cpu", dtype: str = "float64", noise: str = "shared",
                  seed: int | None = None) -> Any:
    """A :class:`~dpverify.core.backends.torch_backend.TorchBackend`, or :class:`InputError`.

    Examples
    --------
    >>> torch_backend(dtype="float32").dtype_name
    'float32'
    """
    reason = torch_status(device)
    if reason is not None:
        raise InputError(f"backend agreement needs the torch backend: {reason}")

    return get_backend(f"torch:{device}", dtype=dtype, noise=noise, seed=seed)


def machine_epsilon(dtype: str) -> float:
    """Machine epsilon of ``"float64"`` or ``"float32"``.

    Examples
    --------
    >>> machine_epsilon("float32") > machine_epsilon("float64")
    True
    """
    if dtype not in ("float64", "float32"):
        raise InputError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    return float(np.finfo(dtype).eps)


def trajectory_tolerance(dtype: str, releases: int, safety: float = DEFAULT_SAFETY) -> float:
    """Largest normwise relative deviation two backends may show after ``releases`` releases.

    The rule: ``tolerance = safety * eps(dtype) * max(1, releases)``. Each release adds a
    few ulps of difference between the backends (summation order in the matrix products,
    autograd against closed-form derivatives, the conversion of the noise to ``dtype``);
    an update that does not expand distances (a gradient step with a step size below 2/L,
    a projection) carries earlier differences forward without amplifying them, so the
    difference grows at most linearly in the number of releases. ``safety`` (default 64)
    covers the few ulps per release and the log2(n) growth of blocked summation. A wrong
    derivative or a numpy-only idiom moves the output by O(1), ten orders of magnitude
    above this in float64. Expansive or discontinuous algorithms (thresholds, argmax) may
    legitimately exceed it; the report then names the first release that did.

    Examples
    --------
    >>> trajectory_tolerance("float64", 50) == 64 * 50 * 2.0**-52
    True
    """
    return float(safety) * machine_epsilon(dtype) * max(1, int(releases))


def _describe(backend: Backend) -> str:
    device = getattr(backend, "device", None)
    return f"{backend.name}:{device}" if device is not None else backend.name


def _as_matrix(backend: Any, out: Any, trials: int) -> np.ndarray:
    """An output with a leading trial axis (an array, or a tuple/dict of them) as (K, m)."""
    if isinstance(out, Mapping):
        parts = [out[k] for k in sorted(out)]
    elif isinstance(out, (tuple, list)):
        parts = list(out)
    else:
        parts = [out]
    mats = [np.asarray(backend.to_numpy(p), dtype=float).reshape(trials, -1) for p in parts]
    return np.concatenate(mats, axis=1) if mats else np.zeros((trials, 0))


def _relative_deviation(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(max |a - b|, max over trials of ||a_k - b_k||_inf / ||a_k||_inf).

    ``a`` is the reference. A zero reference row is compared absolutely; NaN or inf in
    the same place on both sides agree, in one place only they are an infinite deviation.
    """
    if a.size == 0:
        return 0.0, 0.0
    same_nonfinite = (~np.isfinite(a)) & (~np.isfinite(b)) & (
        (np.isnan(a) & np.isnan(b)) | (a == b))
    with np.errstate(invalid="ignore"):  # inf - inf, masked just below
        diff = np.where(same_nonfinite, 0.0, np.abs(a - b))
    diff = np.where(np.isnan(diff), np.inf, diff)
    scale = np.max(np.where(np.isfinite(a), np.abs(a), 0.0), axis=1)
    scale = np.where(scale > 0, scale, 1.0)
    rel = np.max(diff, axis=1) / scale
    return float(np.max(diff)), float(np.max(rel))


def _ledgers_match(la: Any, lb: Any, rtol: float) -> bool:
    """Same releases, in order, with the same declarations (numbers up to ``rtol``)."""
    sa, sb = la.signature(), lb.signature()
    if len(sa) != len(sb):
        return False
    for ra, rb in zip(sa, sb, strict=True):
        for x, y in zip(ra, rb, strict=True):
            if isinstance(x, float) and isinstance(y, float):
                if not (x == y or math.isclose(x, y, rel_tol=rtol, abs_tol=0.0)):
                    return False
            elif x != y:
                return False
    return True


def _prepare(target: str | Target, params: Mapping[str, Any] | None, seed: int, scale: str,
             problem: Problem | None) -> tuple[Target, dict[str, Any], Problem]:
    t = resolve(target) if isinstance(target, str) else target
    p = t.algorithm.params(t.variant.name, params, scale)
    prob = problem if problem is not None else build_problem(t, p, seed)
    return t, p, prob


# Trajectory agreement ----------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """The backend compared with the NumPy (float64) reference.

    Parameters
    ----------
    device, dtype
        Where and in what precision torch computes.
    backend
        A backend to use instead of torch on ``device`` in ``dtype`` (which are then
        ignored); for a trajectory comparison its noise must come from the NumPy stream.

    Examples
    --------
    >>> Candidate(dtype="float32").make("shared").dtype_name
    'float32'
    """

    device: str = "cpu"
    dtype: str = "float64"
    backend: Backend | None = None

    def make(self, noise: str) -> Any:
        """The backend, its torch noise ``"shared"`` (the NumPy stream) or ``"own"``."""
        if self.backend is not None:
            return self.backend
        return torch_backend(self.device, self.dtype, noise=noise)


def trajectory_agreement(
    target: str | Target,
    params: Mapping[str, Any] | None = None,
    *,
    seed: int = 0,
    trials: int = DEFAULT_TRAJECTORY_TRIALS,
    scale: str = "quick",
    safety: float = DEFAULT_SAFETY,
    problem: Problem | None = None,
    candidate: Candidate | None = None,
) -> TrajectoryAgreement:
    """Run ``target`` on NumPy (float64) and on torch with one noise stream; compare.

    Both runs use the problem built from ``seed`` and the trial stream the ``account``
    check uses, and keep every release's answer. Release ``i`` (0-based) must agree within
    ``trajectory_tolerance(dtype, i + 1, safety)`` and the final output within
    ``trajectory_tolerance(dtype, len(ledger), safety)``, deviations being normwise
    relative per trial (see :func:`trajectory_tolerance` for the rule). The ledgers must
    declare the same releases.

    Parameters
    ----------
    target
        ``name:variant`` or a resolved :class:`~dpverify.core.registry.Target`.
    params
        Overrides of the algorithm's parameters.
    seed
        Root seed of the data and of the shared noise stream.
    trials
        Trials run at once on each backend.
    scale
        ``quick`` or ``thorough`` parameter set.
    safety
        Ulps of difference allowed per release.
    problem
        A ready problem (for instance with a different loss) instead of the target's own.
    candidate
        The backend compared with NumPy (:class:`Candidate`; default: torch on the CPU in
        float64, its noise from the NumPy stream).

    Examples
    --------
    >>> r = trajectory_agreement("noisy_gd:sound", {"T": 3, "n": 50})
    >>> r.passed, r.releases
    (True, 3)
    """
    trials = int(check_positive(trials, "trials", integer=True))
    check_positive(safety, "safety")
    t, p, prob = _prepare(target, params, seed, scale, problem)
    tb = (candidate or Candidate()).make("shared")
    dtype = tb.dtype_name
    eps_dtype = machine_epsilon(dtype)
    stream = seed_streams(seed, 2)[1]
    out_np, cur_np = run_target(t, p, prob, trials=trials, rng=stream, backend="numpy",
                                keep_answers=True)
    out_t, cur_t = run_target(t, p, prob, trials=trials, rng=stream, backend=tb,
                              keep_answers=True)
    ref = _as_matrix(cur_np.backend, out_np, trials)
    got = _as_matrix(tb, out_t, trials)
    R = len(cur_np.ledger)
    ledger_match = _ledgers_match(cur_np.ledger, cur_t.ledger, safety * eps_dtype)
    rel_devs, tols, first = (_release_deviations(cur_np.ledger, cur_t.ledger, dtype, safety)
                             if ledger_match else ([], [], None))
    if ref.shape != got.shape:
        max_abs, max_rel = math.inf, math.inf
    else:
        max_abs, max_rel = _relative_deviation(ref, got)
    first_rel = cur_np.ledger.releases[first] if first is not None else None
    return TrajectoryAgreement(
        target=t.id, backend=_describe(tb), dtype=dtype, trials=trials, releases=R,
        max_abs_dev=max_abs, max_rel_dev=max_rel,
        tolerance=trajectory_tolerance(dtype, R, safety), ledger_match=ledger_match,
        release_rel_dev=rel_devs, release_tolerance=tols, first_divergent_release=first,
        first_divergent_name=first_rel.name if first_rel is not None else None,
        first_divergent_step=first_rel.step if first_rel is not None else None,
    )


def _release_deviations(la: Any, lb: Any, dtype: str,
                        safety: float) -> tuple[list[float], list[float], int | None]:
    """Each release's relative deviation and tolerance, and the first release beyond it."""
    rel_devs: list[float] = []
    tols: list[float] = []
    first: int | None = None
    for i, (ra, rb) in enumerate(zip(la.records, lb.records, strict=True)):
        _, rel = _relative_deviation(ra.answer, rb.answer)
        tol_i = trajectory_tolerance(dtype, i + 1, safety)
        rel_devs.append(rel)
        tols.append(tol_i)
        if first is None and not rel <= tol_i:
            first = i
    return rel_devs, tols, first


# Distributional agreement ------------------------------------------------------------------


def coordinate_test(x: np.ndarray, y: np.ndarray, dtype: str) -> tuple[float, float]:
    """(statistic, p-value) comparing one output coordinate's samples from two backends.

    The two-sample Kolmogorov-Smirnov test on the finite values; all values non-finite on
    one side agree only if on both. A point mass on each side (an exact release, the same
    in every trial) agrees when the two values match within the trajectory check's
    rounding tolerance: KS would tell values one rounding apart from each other.

    Examples
    --------
    >>> coordinate_test(np.full(50, 0.1 + 0.2), np.full(50, 0.3), "float64")
    (0.0, 1.0)
    >>> coordinate_test(np.full(50, 0.3), np.full(50, 0.3001), "float64")
    (1.0, 0.0)
    """
    from scipy.stats import ks_2samp

    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if x.size == 0 or y.size == 0:
        return (0.0, 1.0) if x.size == y.size else (1.0, 0.0)
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        close = abs(x[0] - y[0]) <= trajectory_tolerance(dtype, 1) * max(
            1.0, abs(x[0]), abs(y[0]))
        return (0.0, 1.0) if close else (1.0, 0.0)
    res = ks_2samp(x, y)
    return float(res.statistic), float(res.pvalue)


def distribution_agreement(
    target: str | Target,
    params: Mapping[str, Any] | None = None,
    *,
    seed: int = 0,
    trials: int = DEFAULT_TRIALS,
    alpha: float = DEFAULT_ALPHA,
    scale: str = "quick",
    problem: Problem | None = None,
    candidate: Candidate | None = None,
) -> DistributionAgreement:
    """Do NumPy and torch, each drawing its own noise, give one output distribution?

    Each backend runs ``trials`` independent trials on the same problem from its own child
    stream of ``seed`` (torch noise from a ``torch.Generator`` seeded from it). Each
    output coordinate gets an exact two-sample Kolmogorov-Smirnov test (``scipy.stats.
    ks_2samp``); Holm's step-down procedure (``statsmodels`` ``multipletests``) keeps the
    probability of any false rejection at most ``alpha`` when the distributions agree.
    Coordinates are marginals: a difference only in the dependence between coordinates
    is not tested. Non-finite outputs are dropped before testing. ``candidate`` is the
    backend compared with NumPy (:class:`Candidate`; default: torch on the CPU in float64,
    drawing its own noise).

    Examples
    --------
    >>> r = distribution_agreement("noisy_gd:sound", {"T": 3, "n": 50}, trials=200)
    >>> r.passed
    True
    """
    from statsmodels.stats.multitest import multipletests

    trials = int(check_positive(trials, "trials", integer=True))
    if trials < 2:
        raise InputError(f"distributional agreement needs at least 2 trials, got {trials}")
    alpha = check_probability(alpha, "alpha")
    t, p, prob = _prepare(target, params, seed, scale, problem)
    tb = (candidate or Candidate()).make("own")
    dtype = tb.dtype_name
    # Children 2 and 3: independent of the data (child 0) and of the shared stream (child 1).
    s_np, s_t = seed_streams(seed, 4)[2:]
    out_np, cur_np = run_target(t, p, prob, trials=trials, rng=s_np, backend="numpy")
    out_t, _ = run_target(t, p, prob, trials=trials, rng=s_t, backend=tb)
    a = _as_matrix(cur_np.backend, out_np, trials)
    b = _as_matrix(tb, out_t, trials)
    if a.shape != b.shape:
        raise InputError(f"{t.id}: outputs differ in shape between backends: "
                         f"{a.shape[1:]} on numpy, {b.shape[1:]} on torch")
    stats: list[float] = []
    pvals: list[float] = []
    for j in range(a.shape[1]):
        stat, pv = coordinate_test(a[:, j], b[:, j], dtype)
        stats.append(stat)
        pvals.append(pv)
    if pvals:
        reject, adj, _, _ = multipletests(pvals, alpha=alpha, method="holm")
        adjusted = [float(v) for v in adj]
        rejected = [int(j) for j in np.flatnonzero(reject)]
    else:
        adjusted, rejected = [], []
    return DistributionAgreement(
        target=t.id, backend=_describe(tb), dtype=dtype, trials=trials, alpha=alpha,
        statistics=stats, pvalues=pvals, pvalues_adjusted=adjusted, rejected=rejected,
    )


# The check kind ----------------------------------------------------------------------------


@dataclass(frozen=True)
class AgreeOptions(Options):
    """``mode`` (``both``, ``trajectory``, ``distribution``), ``trials`` (per backend for
    the distributional test; the run's ``--trials`` overrides), ``trajectory_trials``,
    ``alpha``, ``device`` (``cpu``, ``cuda``), ``dtype`` (``float64``, ``float32``) and
    ``safety`` (ulps per release)."""

    mode: str = "both"
    trials: int | None = None
    trajectory_trials: int = DEFAULT_TRAJECTORY_TRIALS
    alpha: float = DEFAULT_ALPHA
    device: str = "cpu"
    dtype: str = "float64"
    safety: float = DEFAULT_SAFETY

    def validate(self) -> None:
        if self.mode not in MODES:
            raise InputError(f"mode must be one of {MODES}, got {self.mode!r}")
        machine_epsilon(self.dtype)
        check_probability(self.alpha, "alpha")
        check_positive(self.safety, "safety")
        check_positive(self.trajectory_trials, "trajectory_trials", integer=True)


@dataclass(frozen=True)
class AgreeMetrics(Result):
    """The ``agree`` check's numbers: NumPy against torch, per release and in
    distribution."""

    device: str | None = doc("the torch device")
    dtype: str | None = doc("the torch dtype")
    mode: str | None = doc("`trajectory`, `distribution` or `both`")
    max_abs_dev: float | None = doc("largest absolute deviation of a release (trajectory)")
    max_rel_dev: float | None = doc("largest relative deviation of a release (trajectory)")
    tolerance: float | None = doc("the rounding budget the deviations are judged against")
    releases: int | None = doc("releases compared (trajectory)")
    trajectory_trials: int | None = doc("runs replayed on one noise stream")
    ledger_match: bool | None = doc("whether both ledgers hold the same releases")
    first_divergent_release: int | None = doc("the first release over its budget, if any")
    trials: int | None = doc("runs per backend (distribution)")
    alpha: float | None = doc("the distribution test's level")
    pvalues: list[Any] | None = doc("Holm-adjusted KS p-values per output coordinate")
    min_pvalue_adjusted: float | None = doc("the smallest adjusted p-value")
    rejected_coordinates: list[Any] | None = doc("coordinates whose distributions differ")


@register_kind
class AgreeCheck(CheckKind):
    """NumPy and torch agree: trajectories within rounding, and (optionally) distributions.

    INCONCLUSIVE when torch or the requested device is missing.
    """

    name = "agree"
    Options = AgreeOptions
    Result = AgreeMetrics
    column = "agreement"
    registered_only = True

    def run(self, exp: Experiment, options: AgreeOptions) -> Outcome:
        return agree_check(exp, options).typed(AgreeMetrics)

    def statement(self, check: Mapping[str, Any], claim: str,
                  info: Mapping[str, Any] | None) -> Statement:
        r = self.Result.of(check)
        bits = []
        if r.max_rel_dev is not None:
            bits.append(f"on one shared noise stream, torch ({r.device}, {r.dtype}) "
                        f"deviates from NumPy by at most {fmt(r.max_rel_dev, 3)} (relative; "
                        f"tolerance {fmt(r.tolerance, 3)}) over {fmt(r.releases)} "
                        f"releases" + ("" if r.ledger_match is not False else
                                       ", and the two ledgers differ"))
        if r.min_pvalue_adjusted is not None:
            bits.append(f"with independent noise ({fmt(r.trials)} trials per backend) the "
                        f"smallest Holm-adjusted Kolmogorov-Smirnov p-value is "
                        f"{fmt(r.min_pvalue_adjusted, 3)} (level {fmt(r.alpha)})")
        measured = ("; ".join(bits) + ".") if bits else str(check.get("message", ""))
        return Statement("The NumPy and torch backends must compute the same algorithm.",
                         measured[:1].upper() + measured[1:],
                         "Trajectory deviations are judged against a rounding budget per "
                         "release; the distribution test controls its false alarms at its level.")


def agree_check(exp: Experiment, o: AgreeOptions) -> Outcome:
    """The ``agree`` check on an experiment.

    Examples
    --------
    >>> agree_check(Experiment("noisy_gd:sound", {"T": 3, "n": 50}),
    ...             AgreeOptions(mode="trajectory")).verdict
    <Verdict.PASS: 'PASS'>
    """
    mode, device, dtype, alpha = o.mode, o.device, o.dtype, o.alpha
    trials = exp.trial_count(o.trials, DEFAULT_TRIALS)
    reason = torch_status(device)
    if reason is not None:
        return Outcome(Verdict.INCONCLUSIVE, {"device": device, "dtype": dtype},
                       message=f"backend agreement not run: {reason}")

    metrics: dict[str, Any] = {"device": device, "dtype": dtype, "mode": mode}
    evidence: dict[str, Any] = {}
    parts: list[str] = []
    failed = False
    if mode in ("both", "trajectory"):
        tr = trajectory_agreement(
            exp.spec, exp.overrides, seed=exp.seed, scale=exp.scale.value,
            candidate=Candidate(device, dtype), trials=o.trajectory_trials, safety=o.safety,
        )
        metrics.update(
            max_abs_dev=tr.max_abs_dev, max_rel_dev=tr.max_rel_dev, tolerance=tr.tolerance,
            releases=tr.releases, trajectory_trials=tr.trials, ledger_match=tr.ledger_match,
            first_divergent_release=tr.first_divergent_release,
        )
        evidence["release_rel_dev"] = tr.release_rel_dev
        evidence["release_tolerance"] = tr.release_tolerance
        failed |= not tr.passed
        parts.append(_trajectory_sentence(tr))
    if mode in ("both", "distribution"):
        dr = distribution_agreement(
            exp.spec, exp.overrides, seed=exp.seed, scale=exp.scale.value,
            candidate=Candidate(device, dtype), trials=trials, alpha=alpha,
        )
        metrics.update(
            trials=dr.trials, alpha=dr.alpha, pvalues=dr.pvalues_adjusted,
            min_pvalue_adjusted=dr.min_pvalue_adjusted,
            rejected_coordinates=dr.rejected,
        )
        evidence["pvalues_raw"] = dr.pvalues
        evidence["ks_statistics"] = dr.statistics
        failed |= not dr.passed
        parts.append(_distribution_sentence(dr))
    verdict = Verdict.FAIL if failed else Verdict.PASS
    return Outcome(verdict, metrics, evidence, "; ".join(parts))


def _trajectory_sentence(tr: TrajectoryAgreement) -> str:
    if not tr.ledger_match:
        return (f"trajectory: the ledgers differ between numpy and {tr.backend} "
                f"({tr.releases} releases on numpy)")
    head = (f"trajectory ({tr.dtype}, {tr.releases} releases): max relative deviation "
            f"{tr.max_rel_dev:.3g} {'<=' if tr.max_rel_dev <= tr.tolerance else '>'} "
            f"tolerance {tr.tolerance:.3g}")
    if tr.first_divergent_release is not None:
        head += (f", first diverging at release {tr.first_divergent_release} "
                 f"({tr.first_divergent_name!r}, step {tr.first_divergent_step})")
    return head


def _distribution_sentence(dr: DistributionAgreement) -> str:
    verdict = (f"{len(dr.rejected)} of {len(dr.pvalues)} coordinates differ"
               if dr.rejected else f"no coordinate of {len(dr.pvalues)} differs")
    return (f"distribution ({dr.trials} trials per backend, KS + Holm at alpha={dr.alpha:g}): "
            f"{verdict}, smallest adjusted p = {dr.min_pvalue_adjusted:.3g}")


__all__ = [
    "AgreeCheck", "AgreeOptions", "Candidate", "DistributionAgreement", "TrajectoryAgreement",
    "agree_check",
    "distribution_agreement", "machine_epsilon",
    "trajectory_agreement", "trajectory_tolerance",
]
