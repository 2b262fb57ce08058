"""Progress of long runs: trials done, rate and time left.

A bar (``rich.progress``) is shown on standard error only when it is a terminal and the
run was not made quiet; a caller may instead pass a function ``report(label, fraction)``
(the shape of :attr:`dpverify.checks.base.RunContext.progress`) to receive updates.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

ProgressSpec = bool | str | Callable[[str, float], None] | None


class TrialProgress:
    """Counts finished trials and shows them.

    Parameters
    ----------
    total
        Trials in the run.
    label
        What is running (shown before the bar).
    progress
        ``None``/``False``: silent. ``True`` or ``"auto"``: a rich bar when standard error
        is a terminal. A callable: called as ``progress(label, fraction_done)``.
    initial
        Trials already done (resumed from a checkpoint).

    Examples
    --------
    >>> seen = []
    >>> with TrialProgress(10, "demo", lambda lab, f: seen.append(f)) as p:
    ...     p.advance(4)
    ...     p.advance(6)
    >>> seen
    [0.0, 0.4, 1.0]
    """

    def __init__(self, total: int, label: str = "trials", progress: ProgressSpec = None,
                 initial: int = 0) -> None:
        self.total = max(int(total), 0)
        self.label = label
        self.done = int(initial)
        self._callback: Callable[[str, float], None] | None = None
        self._bar: Any = None
        self._task: Any = None
        self._t0 = time.perf_counter()
        if callable(progress):
            self._callback = progress
        elif progress in (True, "auto") and _stderr_is_terminal():
            self._bar = _make_bar()

    @property
    def active(self) -> bool:
        """Whether anything is shown or reported."""
        return self._bar is not None or self._callback is not None

    def __enter__(self) -> TrialProgress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total, completed=self.done)
        if self._callback is not None:
            self._callback(self.label, self.fraction)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.stop()

    @property
    def fraction(self) -> float:
        return 1.0 if self.total == 0 else self.done / self.total

    def advance(self, trials: int) -> None:
        """Record ``trials`` more finished trials."""
        self.done += int(trials)
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)
        if self._callback is not None:
            self._callback(self.label, self.fraction)


def _stderr_is_terminal() -> bool:
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


def _make_bar() -> Any:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        """Trials per second."""

        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.0f} trials/s", style="cyan")

    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
        RateColumn(), TimeElapsedColumn(), TextColumn("elapsed,"), TimeRemainingColumn(),
        TextColumn("left"),
        console=Console(stderr=True), transient=True,
    )
