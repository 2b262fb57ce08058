"""Errors that carry an exit code: bad input is the user's to fix (exit 2)."""

from __future__ import annotations

import math
from typing import Any


class InputError(ValueError):
    """Bad input from a user: a suite, a parameter, data or a target.

    The command-line interface turns it into exit code 2.

    Examples
    --------
    >>> try:
    ...     check_epsilon(float("nan"))
    ... except InputError as e:
    ...     print(e)
    epsilon must be a finite number > 0, got nan
    """


class UnknownTargetError(InputError, KeyError):
    """A target names no registered algorithm or variant."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0])


def check_epsilon(epsilon: Any, name: str = "epsilon") -> float:
    """Return ``epsilon`` as a float, or raise :class:`InputError` naming it.

    Examples
    --------
    >>> check_epsilon(1)
    1.0
    """
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a finite number > 0, got {epsilon!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{name} must be a finite number > 0, got {epsilon!r}")
    return value


def check_delta(delta: Any, name: str = "delta", *, positive: bool = False) -> float:
    """Return ``delta`` as a float in [0, 1), or raise :class:`InputError` naming it.

    delta = 0 is a pure epsilon-DP claim. ``positive`` refuses it where only
    approximate DP makes sense (calibrating Gaussian noise, which no finite noise makes
    pure).

    Examples
    --------
    >>> check_delta(1e-5), check_delta(0)
    (1e-05, 0.0)
    >>> try:
    ...     check_delta(0, positive=True)
    ... except InputError as e:
    ...     print(e)
    delta must be a number in (0, 1), got 0
    """
    span = "(0, 1)" if positive else "[0, 1)"
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number in {span}, got {delta!r}") from None
    if not (0.0 <= value < 1.0) or (positive and value == 0.0):
        raise InputError(f"{name} must be a number in {span}, got {delta!r}")
    return value


def check_positive(value: Any, name: str, *, integer: bool = False) -> float | int:
    """Return a finite positive number (an int when ``integer``), or raise naming it.

    Examples
    --------
    >>> check_positive(3, "trials", integer=True)
    3
    """
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a positive number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise InputError(f"{name} must be a finite number > 0, got {value!r}")
    if integer:
        if v != int(v):
            raise InputError(f"{name} must be a positive integer, got {value!r}")
        return int(v)
    return v


def check_probability(value: Any, name: str) -> float:
    """Return a probability in (0, 1), or raise naming it.

    Examples
    --------
    >>> check_probability(0.95, "confidence")
    0.95
    """
    return check_delta(value, name, positive=True)
