"""Mechanisms: the Gaussian and Laplace mechanisms, sound and with planted bugs.

The subjects of the auditors' self-tests. Each releases, through the curator, the sum of
the records clipped to norm ``clip`` (L2 for Gaussian noise, L1 for Laplace), or a
histogram; the planted variants each break one step of the textbook proof:

* ``gaussian_mechanism:planted_half_noise``: the noise standard deviation halved;
* ``gaussian_mechanism:planted_mean_noise_on_sum``: noise for the mean (sensitivity C/n)
  added to the sum (TF-Privacy issue #153);
* ``gaussian_mechanism:planted_no_clip``: records are not clipped;
* ``gaussian_mechanism:planted_reused_noise``: two releases share one noise draw, so it
  cancels in their difference (a seed reused in both terms of a variance-reduction
  difference);
* ``laplace_mechanism:planted_naive_float``: Laplace noise by the textbook inverse CDF
  in floating point from a coarse uniform (Mironov 2012): the noise takes finitely many
  values, and the set of outputs moves with the input;
* ``laplace_histogram:planted_replace_sensitivity``: under replace-one a record moves
  between two bins, L1 sensitivity 2, declared 1.

* ``gaussian_mechanism:planted_float_textbook``: the sound mechanism without snapping: the
  textbook float64 ``q(D) + sigma Z``, whose last bits depend on q(D) (Mironov 2012;
  Jin et al. 2022).

The data-independent ``gaussian_mechanism:null_constant`` releases noise alone: its
outputs have the same distribution on every dataset.

Every other variant has its output snapped by the curator to a grid far below the noise
scale (Mironov 2012, Section 5.2, with a fine grid; see :func:`dpverify.core.curator.snap`):
rounding erases the floating-point artefacts of the noise addition, which the
``lowbits`` distinguisher otherwise finds at epsilon > 5 in a
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from dpverify.accounting.accountant import calibrate_gaussian
from dpverify.core.claims import Finding, PrivacyClaim
from dpverify.core.curator import Curator
from dpverify.core.data import Dataset, synthetic_classification
from dpverify.core.ranges import COUNT, POSITIVE, Range
from dpverify.core.registry import Algorithm, Battery, CheckConfig, Problem, Setting, Variant


def make_sum_problem(params: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    """``n`` records in the unit ball of R^``d`` (labels unused by the mechanisms).

    Examples
    --------
    >>> make_sum_problem({"n": 5, "d": 2}, np.random.default_rng(0)).data.X.shape
    (5, 2)
    """
    data, _ = synthetic_classification(int(params["n"]), int(params["d"]), rng)
    public = {"clip": float(params.get("clip", 1.0))}
    return Problem(data=data, info=public, public=public)


def clipped_sum(xp: Any, clip: float | None, norm: str = "l2"):
    """The query sum_i w_i clip(x_i): each record scaled down to norm ``clip``.

    A record holding a non-finite value counts as zero: clipping cannot bound it (NaN
    compares false with the threshold), and one such record would poison the sum.

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> q = clipped_sum(xp, 1.0)
    >>> q(np.array([[3.0, 4.0], [0.3, 0.4], [np.nan, np.inf]]), None,
    ...   np.ones((1, 3))).round(6).tolist()
    [[0.9, 1.2]]
    """
    order = 1 if norm == "l1" else 2

    def query(X: Any, y: Any, w: Any) -> Any:
        ok = xp.all(xp.isfinite(X), axis=1)
        X = xp.where(ok[:, None], X, xp.zeros_like(X))
        if clip is None:
            return w @ X
        nrm = xp.linalg.vector_norm(X, ord=order, axis=1)
        factor = xp.where(nrm > clip, clip / xp.where(nrm > clip, nrm, 1.0), 1.0)
        return w @ (X * factor[:, None])

    return query


def _claim(p: Mapping[str, Any]) -> PrivacyClaim:
    return PrivacyClaim(epsilon=float(p["epsilon"]), delta=float(p["delta"]),
                        relation=str(p["relation"]))


def _sum_sensitivity(p: Mapping[str, Any]) -> float:
    # One record moves a clipped sum by clip when added or removed, 2 clip when replaced.
    c = float(p["clip"])
    return c if p["relation"] == "add_remove" else 2.0 * c


# Gaussian mechanism ---------------------------------------------------------------------


#: The white-box audit's privacy loss is that of ideal noise around the replayed answers:
#: a leak in the floating-point representation of the output is outside its model.
_FLOAT_LEAK = Battery(checks={"audit.whitebox": CheckConfig(
    expected="PASS",
    reason="the white-box audit computes the privacy loss of ideal real-valued noise "
           "around the replayed answers, which these releases match exactly; the leak "
           "is in the floating-point values of the output, which only the black-box "
           "audit's distinguishers read (no account, sensitivity or replay sees it)")})

#: Audits on the outlier canary: the worst-case canary sits at the clip norm, where a
#: missing clip changes nothing.
_OUTLIER_AUDITS = Battery(checks={
    name: CheckConfig(options={"neighbours": "outlier"},
                      description="the outlier canary (norm 100): clipping is what bounds it")
    for name in ("audit.whitebox", "audit.blackbox")})


def _gaussian_run(*, noise_factor: float = 1.0, bug: str = "none"):
    snapped = bug != "float_textbook"

    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        xp = cur.xp
        sens = _sum_sensitivity(p)
        releases = 2 if bug in ("reused_noise", "two_releases") else 1
        # Unsampled Gaussian: the multiplier is relative to the whole distance between
        # q(D) and q(D'), whatever the relation (see calibrate_gaussian).
        mult = calibrate_gaussian(target_epsilon=float(p["epsilon"]),
                                  target_delta=float(p["delta"]), steps=releases)
        clip = None if bug == "no_clip" else float(p["clip"])
        query = clipped_sum(xp, clip)
        declared = sens
        if bug == "mean_noise_on_sum":
            declared = sens / cur.n  # the mean's sensitivity, noise added to the sum
        if bug == "null":
            query = lambda X, y, w: w @ xp.zeros_like(X)  # noqa: E731  (ignores the data)
        std = noise_factor * mult * declared
        before = cur.rng.bit_generator.state
        first = cur.gaussian("sum", query, sensitivity=declared, noise_std=std, snap=snapped)
        if releases == 1:
            return first
        half = lambda X, y, w: 0.5 * query(X, y, w)  # noqa: E731
        if bug == "reused_noise":
            # The noise source is re-seeded to the state it had before the first release,
            # so the second answer carries the very same draw.
            after = cur.rng.bit_generator.state
            cur.rng.bit_generator.state = before
            second = cur.gaussian("half_sum", half, sensitivity=declared, noise_std=std,
                                  snap=snapped)
            cur.rng.bit_generator.state = after
        else:
            second = cur.gaussian("half_sum", half, sensitivity=declared, noise_std=std,
                                  snap=snapped)
        return xp.concat([first, second], axis=1)

    return run


GAUSSIAN = Algorithm(
    name="gaussian_mechanism",
    source="Dwork and Roth 2014, Appendix A; calibrated by PLD (Balle and Wang 2018)",
    description="The Gaussian mechanism on the sum of records clipped to L2 norm clip",
    make_problem=make_sum_problem,
    defaults={"n": 20, "d": 1, "clip": 1.0, "epsilon": 1.0, "delta": 1e-5,
              "relation": "add_remove"},
    ranges={"clip": POSITIVE},
    variants={
        "sound": Variant("sound", "sound", _gaussian_run(), _claim,
                         "sigma calibrated by PLD for one release of sensitivity clip"),
        "null_constant": Variant(
            "null_constant", "sound", _gaussian_run(bug="null"), _claim,
            "Releases noise alone: the same output distribution on every dataset"),
        "sound_two_releases": Variant(
            "sound_two_releases", "sound", _gaussian_run(bug="two_releases"), _claim,
            "The sum and half the sum, each with fresh noise calibrated for two releases"),
        "planted_float_textbook": Variant(
            "planted_float_textbook", "planted", _gaussian_run(bug="float_textbook"), _claim,
            "The textbook float64 Gaussian mechanism q(D) + sigma Z, not snapped",
            findings=(Finding("the last bits of the output depend on q(D): a bit-pattern "
                              "test separates D from D' far beyond epsilon",
                              source="Mironov 2012; Jin et al. 2022 (IEEE S&P)",
                              detected_by=("audit",)),),
            battery=_FLOAT_LEAK),
        "planted_half_noise": Variant(
            "planted_half_noise", "planted", _gaussian_run(noise_factor=0.5), _claim,
            "Noise standard deviation half the calibrated one",
            findings=(Finding("sigma halved: mu doubles", detected_by=("account", "audit")),)),
        "planted_mean_noise_on_sum": Variant(
            "planted_mean_noise_on_sum", "planted", _gaussian_run(bug="mean_noise_on_sum"),
            _claim, "Noise for the mean (sensitivity clip/n) added to the sum",
            findings=(Finding("noise n times too small", source="TF-Privacy issue #153",
                              detected_by=("sensitivity", "audit")),)),
        "planted_no_clip": Variant(
            "planted_no_clip", "planted", _gaussian_run(bug="no_clip"), _claim,
            "Records are not clipped; sensitivity clip declared",
            findings=(Finding("an outlier record moves the sum without bound",
                              detected_by=("sensitivity", "audit")),),
            battery=_OUTLIER_AUDITS),
        "planted_reused_noise": Variant(
            "planted_reused_noise", "planted", _gaussian_run(bug="reused_noise"), _claim,
            "The sum and half the sum released with the same noise draw",
            findings=(Finding("the noise cancels in the difference of the two releases, "
                              "which is half the sum, exactly", detected_by=("audit",)),)),
    },
)


# Laplace mechanism ----------------------------------------------------------------------


class _NaiveFloatLaplace:
    """A backend whose Laplace sampler is the textbook float inverse CDF (Mironov 2012).

    Y = -sgn(U) ln(1 - 2|U|) with U uniform on (-1/2, 1/2), computed in float32 from a
    uniform on a grid of 2^bits points (Mironov 2012, Section 3: the sampler the libraries
    used; the grid stands for a low-resolution uniform). The noise then takes at most
    2^bits values and x + noise lives on a finite set that moves with x: one output can
    rule out an input.
    """

    def __init__(self, inner: Any, bits: int) -> None:
        self._inner = inner
        self._bits = int(bits)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def laplace(self, rng: np.random.Generator, shape: tuple[int, ...]) -> Any:
        f32 = np.float32
        grid = f32(2.0 ** self._bits)
        k = rng.integers(0, 2**self._bits, size=shape).astype(f32)
        u = (k + f32(0.5)) / grid - f32(0.5)
        y = -np.sign(u) * np.log(f32(1.0) - f32(2.0) * np.abs(u))
        return self._inner.asarray(y.astype(f32))


@contextlib.contextmanager
def _noise_source(cur: Curator, backend: Any) -> Iterator[None]:
    saved = cur.backend
    cur.backend = backend
    try:
        yield
    finally:
        cur.backend = saved


def _laplace_run(*, bug: str = "none"):
    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        sens = _sum_sensitivity(p)
        query = clipped_sum(cur.xp, float(p["clip"]), "l1")
        scale = sens / float(p["epsilon"])
        if bug == "naive_float":
            with _noise_source(cur, _NaiveFloatLaplace(cur.backend, int(p["grid_bits"]))):
                return cur.laplace("sum", query, sensitivity=sens, scale=scale)
        return cur.laplace("sum", query, sensitivity=sens, scale=scale)

    return run


LAPLACE = Algorithm(
    name="laplace_mechanism",
    source="Dwork, McSherry, Nissim, Smith 2006",
    description="The Laplace mechanism on the sum of records clipped to L1 norm clip",
    make_problem=make_sum_problem,
    defaults={"n": 20, "d": 1, "clip": 1.0, "epsilon": 1.0, "delta": 1e-9,
              "relation": "add_remove", "grid_bits": 12},
    ranges={"clip": POSITIVE, "grid_bits": Range(1, 52, integer=True)},
    variants={
        "sound": Variant("sound", "sound", _laplace_run(), _claim,
                         "Laplace noise of scale sensitivity / epsilon"),
        "planted_naive_float": Variant(
            "planted_naive_float", "planted", _laplace_run(bug="naive_float"), _claim,
            "Laplace noise by the naive floating-point inverse CDF from a coarse uniform",
            findings=(Finding("outputs are porous: their set of values depends on the input",
                              source="Mironov 2012, CCS", detected_by=("audit",)),),
            battery=_FLOAT_LEAK),
    },
)


# Laplace histogram ----------------------------------------------------------------------


def make_histogram_problem(params: Mapping[str, Any], rng: np.random.Generator) -> Problem:
    """``n`` records, one feature uniform on [-1, 1], cut into ``bins`` equal bins (bins >= 3).

    Examples
    --------
    >>> make_histogram_problem({"n": 6, "bins": 3}, np.random.default_rng(0)).data.X.shape
    (6, 1)
    """
    n = int(params["n"])
    X = rng.uniform(-1.0, 1.0, size=(n, 1))
    # Record 0 (the one replace-one canaries overwrite) sits in an interior bin, so a
    # canary on the boundary of the domain always moves it across bins.
    X[0, 0] = 0.5 / int(params["bins"])
    public = {"bins": int(params["bins"])}
    return Problem(data=Dataset(X, np.zeros(n)), info=public, public=public)


def histogram_query(xp: Any, bins: int):
    """Counts of records per bin of the first feature (values outside [-1, 1] clamp).

    Examples
    --------
    >>> import array_api_compat.numpy as xp
    >>> histogram_query(xp, 4)(np.array([[-1.0], [0.1], [0.2], [5.0]]), None,
    ...                        np.ones((1, 4))).tolist()
    [[1.0, 0.0, 2.0, 1.0]]
    """

    def query(X: Any, y: Any, w: Any) -> Any:
        b = xp.floor((X[:, 0] + 1.0) * (bins / 2.0))
        b = xp.clip(b, 0.0, float(bins - 1))
        edges = xp.reshape(xp.arange(bins, dtype=X.dtype), (1, bins))
        onehot = xp.astype(xp.reshape(b, (-1, 1)) == edges, X.dtype)
        return w @ onehot

    return query


def _histogram_run(*, declared_factor: float = 1.0):
    def run(cur: Curator, setting: Setting, p: Mapping[str, Any]) -> Any:
        # L1 sensitivity of a histogram: 1 when a record is added or removed, 2 when one
        # is replaced (it leaves one bin and enters another).
        sens = 1.0 if p["relation"] == "add_remove" else 2.0
        declared = declared_factor * sens
        scale = declared / float(p["epsilon"])
        return cur.laplace("histogram", histogram_query(cur.xp, int(p["bins"])),
                           sensitivity=declared, scale=scale)

    return run


HISTOGRAM = Algorithm(
    name="laplace_histogram",
    source="Dwork, McSherry, Nissim, Smith 2006, Example 3",
    description="A histogram of one feature with Laplace noise on every count",
    make_problem=make_histogram_problem,
    defaults={"n": 50, "bins": 4, "epsilon": 1.0, "delta": 1e-9, "relation": "replace_one"},
    ranges={"bins": COUNT},
    variants={
        "sound": Variant("sound", "sound", _histogram_run(), _claim,
                         "Scale 2/epsilon under replace-one (1/epsilon under add/remove)"),
        "planted_replace_sensitivity": Variant(
            "planted_replace_sensitivity", "planted", _histogram_run(declared_factor=0.5),
            _claim, "Under replace-one, L1 sensitivity 1 declared (it is 2)",
            findings=(Finding("a replaced record changes two counts: epsilon doubles",
                              detected_by=("sensitivity", "audit")),)),
    },
)

ALGORITHMS = [GAUSSIAN, LAPLACE, HISTOGRAM]

__all__ = ["ALGORITHMS", "clipped_sum", "histogram_query", "make_histogram_problem",
           "make_sum_problem"]
