"""Claims are data: what a variant promises about privacy and utility.

Checks compare measurements with these declarations, never with numbers written into a test.
"""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from dpverify.core.errors import InputError, check_delta, check_epsilon, check_positive

Relation = Literal["add_remove", "replace_one"]
RELATIONS: tuple[str, ...] = ("add_remove", "replace_one")


def check_relation(relation: str) -> str:
    """Return a valid neighbouring relation name, or raise :class:`InputError`.

    Examples
    --------
    >>> check_relation("replace_one")
    'replace_one'
    """
    if relation not in RELATIONS:
        raise InputError(f"neighbouring relation must be one of {RELATIONS}, got {relation!r}")
    return relation


class Verdict(str, enum.Enum):
    """Outcome of a check. PASS means "no evidence of violation at level alpha"."""

    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"

    @classmethod
    def parse(cls, value: str) -> Verdict:
        """Parse a verdict name, case-insensitively.

        Examples
        --------
        >>> Verdict.parse("fail")
        <Verdict.FAIL: 'FAIL'>
        """
        try:
            return cls(str(value).upper())
        except ValueError:
            raise InputError(
                f"verdict must be one of PASS, FAIL, INCONCLUSIVE, got {value!r}"
            ) from None


@dataclass(frozen=True)
class PrivacyClaim:
    """A privacy guarantee: (epsilon, delta)-DP or rho-zCDP under a neighbouring relation.

    delta = 0 is a pure epsilon-DP claim (Laplace, randomized response, report-noisy-max,
    the sparse vector technique, the exponential mechanism).

    Examples
    --------
    >>> PrivacyClaim(epsilon=1.0, delta=1e-5).relation
    'add_remove'
    >>> PrivacyClaim(epsilon=0.1, delta=0).epsilon_at(0.0)
    0.1
    >>> PrivacyClaim(rho=0.5).kind
    'zcdp'
    """

    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    relation: str = "add_remove"

    def __post_init__(self) -> None:
        check_relation(self.relation)
        if self.rho is None and self.epsilon is None:
            raise InputError("a privacy claim needs epsilon (with delta) or rho")
        if self.epsilon is not None:
            check_epsilon(self.epsilon)
            if self.delta is None:
                raise InputError("an (epsilon, delta) claim needs delta (use a small delta)")
            check_delta(self.delta)
        if self.rho is not None:
            check_positive(self.rho, "rho")

    @property
    def kind(self) -> str:
        """``"zcdp"`` for a rho claim, else ``"approx_dp"``."""
        return "zcdp" if self.rho is not None else "approx_dp"

    def epsilon_at(self, delta: float) -> float:
        """The claimed epsilon at ``delta`` (zCDP converted by Bun and Steinke 2016, Prop 1.3).

        Examples
        --------
        >>> round(PrivacyClaim(rho=0.5).epsilon_at(1e-5), 3)
        5.299
        """
        if self.epsilon is not None and (self.delta is None or delta >= self.delta):
            return float(self.epsilon)
        if self.rho is not None and delta > 0:
            # Bun & Steinke 2016, Prop 1.3: rho-zCDP gives (rho + 2 sqrt(rho log 1/delta), delta).
            return self.rho + 2.0 * math.sqrt(self.rho * math.log(1.0 / delta))
        return math.inf

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class UtilityClaim:
    """A utility theorem: ``quantity <= C * prod(param ** exponent) * log factors``.

    Parameters
    ----------
    quantity
        Name of the metric the theorem bounds, e.g. ``"excess_risk"`` or ``"grad_norm"``.
    exponents
        Exponent of each grid parameter, e.g. ``{"n": -2, "d": 1, "epsilon": -2}``.
    log_factors
        Factors the theorem carries and a fit divides out, as expressions in the grid
        parameters, e.g. ``("log(1/delta)",)``.
    sided
        ``"upper"`` for an upper bound (a one-sided test), ``"two"`` for a tight rate.
    regime
        Constraints under which the theorem holds, e.g. ``("n*epsilon >= sqrt(d)",)``.
    source
        Where the theorem is stated: paper, theorem number.

    Examples
    --------
    >>> u = UtilityClaim("excess_risk", {"n": -2.0, "d": 1.0}, source="Bassily et al. 2014")
    >>> u.exponents["n"]
    -2.0
    """

    quantity: str
    exponents: dict[str, float]
    log_factors: tuple[str, ...] = ()
    sided: str = "upper"
    regime: tuple[str, ...] = ()
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def private_rate(cls, quantity: str, power: float, *, extra_log_factors: tuple[str, ...] = (),
                     sided: str = "upper", regime: tuple[str, ...] = (),
                     source: str = "") -> UtilityClaim:
        """The usual shape of a private rate: ``(sqrt(d log(1/delta)) / (n eps))**power``.

        Exponents ``n: -power``, ``d: power/2``, ``epsilon: -power``, and the factor
        ``log(1/delta)**(power/2)`` (after ``extra_log_factors``, e.g. ``"log(n)"``), so the
        papers' claims of this shape are written once.

        Examples
        --------
        >>> u = UtilityClaim.private_rate("grad_norm", 2 / 3, source="paper 000, Theorem 2")
        >>> u.exponents, u.log_factors
        ({'n': -0.6666666666666666, 'd': 0.3333333333333333, 'epsilon': -0.6666666666666666}, \
('log(1/delta)**(1/3)',))
        """
        p = float(power)
        if not math.isfinite(p) or p <= 0:
            raise InputError(f"power must be a positive finite number, got {power!r}")
        log_delta = "log(1/delta)" if p == 2 else f"log(1/delta)**({_ratio(p / 2)})"
        return cls(quantity, {"n": -p, "d": p / 2, "epsilon": -p},
                   (*extra_log_factors, log_delta), sided, regime, source)


def _ratio(x: float) -> str:
    """``x`` as a small fraction when it is one (``1/3``), else as a float."""
    from fractions import Fraction

    f = Fraction(x).limit_denominator(24)
    return str(f) if abs(float(f) - x) < 1e-12 else repr(x)


@dataclass(frozen=True)
class Finding:
    """A known defect a variant carries on purpose (planted) or as printed (paper)."""

    summary: str
    source: str = ""
    detected_by: tuple[str, ...] = field(default_factory=tuple)


REGISTER_KINDS = ("privacy", "violation", "utility", "experiment", "invariant")


@dataclass(frozen=True)
class RegisterEntry:
    """One testable claim of a paper, where it is stated, and how it is checked.

    A paper's claims register is a tuple of these beside its algorithms (``REGISTER`` in
    the module of its ``dpverify.algorithms`` entry point); the report opens each paper
    with it, each entry's verdict read from the checks it names.

    Parameters
    ----------
    id
        Short and stable, e.g. ``"T2.n"`` (Theorem 2's rate in n).
    claim
        What the paper claims (or, for a ``violation``, what the notes find broken).
    source
        Paper, theorem or section, and line: ``"Theorem 2, line 412"``.
    kind
        ``privacy`` (a privacy claim), ``violation`` (where the printed algorithm is not
        private as claimed), ``utility`` (a rate, in ``variable``), ``experiment`` (a table
        or figure) or ``invariant`` (a unit property the notes propose).
    checks
        The check ids that decide it (generated battery checks such as
        ``dp_svrg.paper.account``, or suite checks), or unit tests as
        ``test:tests/test_paper002.py::test_name``.
    variable
        For a utility claim: the variable its rate is in (``n``, ``d``, ``epsilon``...).
    untestable
        Why it cannot be checked here, with the arithmetic (empty when ``checks`` decide it).

    Examples
    --------
    >>> e = RegisterEntry("T2.n", "||grad Psi|| = O(n^-1/2) at epsilon = 16", "Theorem 2, "
    ...                   "line 412", "utility", ("dp_double_spider.sound.rate.n",),
    ...                   variable="n")
    >>> e.kind, e.variable
    ('utility', 'n')
    """

    id: str
    claim: str
    source: str
    kind: str
    checks: tuple[str, ...] = ()
    variable: str | None = None
    untestable: str = ""

    def __post_init__(self) -> None:
        if self.kind not in REGISTER_KINDS:
            raise ValueError(f"register kind must be one of {REGISTER_KINDS}, got {self.kind!r}")
        if not self.checks and not self.untestable:
            raise ValueError(f"register entry {self.id!r} names no check and no reason why "
                             "it cannot be checked")
        if self.kind == "utility" and not self.variable:
            raise ValueError(f"utility entry {self.id!r} needs the variable of its rate")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
