"""The values a parameter of an algorithm takes, declared beside its defaults.

A parameter's range (numbers in an interval, or names) lets every door in (``--param``, a
suite's ``params``, a Python override) refuse ``T = -4``, ``n = 2.5`` or a misspelt rule
before any work, naming the parameter and the algorithm, where the algorithm itself would
find it only when it runs, crash inside NumPy, or read an unknown name as its default.
Algorithms declare ``ranges`` on :class:`~dpverify.core.registry.Algorithm`;
:data:`CONVENTIONS` holds the few names whose meaning the harness fixes for every
algorithm (the claim's epsilon, delta and relation, a dataset's size and dimension, a
number of steps), so they need not be retyped.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from dpverify.core.claims import RELATIONS


@dataclass(frozen=True)
class Range:
    """An interval of numbers (of integers where ``integer``), optionally a finite set.

    Bounds are included unless ``low_open`` / ``high_open``; NaN is never in a range, and
    an infinite value only where ``infinite`` says so (an unbounded clip, say). ``words``
    are the names a parameter also takes (``beta = "balanced"``: the theorem's choice);
    a parameter that takes names only is :func:`one_of` them.

    Examples
    --------
    >>> COUNT.contains(3), COUNT.contains(0), COUNT.contains(2.5), COUNT.describe()
    (True, False, False, 'an integer >= 1')
    >>> PROBABILITY.describe()
    'a number in [0, 1)'
    """

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    infinite: bool = False
    choices: tuple[float, ...] = ()
    words: tuple[str, ...] = ()
    numbers: bool = True

    def contains(self, value: Any) -> bool:
        """Whether ``value`` (a number, not a bool, or one of ``words``) lies in the range."""
        if isinstance(value, str):
            return value in self.words
        if not self.numbers or isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        v = float(value)
        if math.isnan(v) or (math.isinf(v) and not self.infinite):
            return False
        if self.choices:
            return v in self.choices
        if self.integer and not (math.isinf(v) or v.is_integer()):
            return False
        above = v > self.low if self.low_open else v >= self.low
        below = v < self.high if self.high_open else v <= self.high
        return above and below

    def describe(self) -> str:
        """The range in words, as an error message names it."""
        if not self.numbers:
            return "one of " + ", ".join(repr(w) for w in self.words)
        words = "".join(f" or {w!r}" for w in self.words)
        return self._numbers() + words

    def _numbers(self) -> str:
        if self.choices:
            return "one of " + ", ".join(_num(c) for c in self.choices)
        kind = "an integer" if self.integer else "a number"
        finite_low, finite_high = math.isfinite(self.low), math.isfinite(self.high)
        if finite_low and finite_high:
            return (f"{kind} in {'(' if self.low_open else '['}{_num(self.low)}, "
                    f"{_num(self.high)}{')' if self.high_open else ']'}")
        if finite_low:
            return f"{kind} {'>' if self.low_open else '>='} {_num(self.low)}"
        if finite_high:
            return f"{kind} {'<' if self.high_open else '<='} {_num(self.high)}"
        return f"a finite {kind[3:] if self.integer else 'number'}"


def one_of(*words: str) -> Range:
    """A parameter that takes one of ``words`` (a problem's name, a loss, a rule).

    Examples
    --------
    >>> r = one_of("pool", "single_pass")
    >>> r.contains("fresh"), r.describe()
    (False, "one of 'pool', 'single_pass'")
    """
    return Range(words=tuple(words), numbers=False)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


# The shapes of parameters the algorithms share.
COUNT = Range(1, integer=True)  # sizes, steps, batches
COUNT0 = Range(0, integer=True)  # offsets, warm-up passes
POSITIVE = Range(0, low_open=True)  # scales, step sizes, clips, privacy budgets
NONNEGATIVE = Range(0)  # regularisation, step sizes that may be switched off
PROBABILITY = Range(0, 1, high_open=True)  # delta
RATE = Range(0, 1, low_open=True)  # a sampling rate or a share of a budget: (0, 1]
OPEN_UNIT = Range(0, 1, low_open=True, high_open=True)  # a confidence, a strict share
ANY = Range()  # any finite number
SIGN = Range(choices=(-1.0, 1.0))

# Names whose meaning the harness fixes for every algorithm: the claim's epsilon, delta and
# neighbouring relation (checked as every claim is), a dataset's records and dimension,
# steps.
CONVENTIONS: dict[str, Range] = {
    "epsilon": POSITIVE, "delta": PROBABILITY, "relation": one_of(*RELATIONS), "n": COUNT,
    "d": COUNT, "T": COUNT,
}
