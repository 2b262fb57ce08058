"""Where ``dpverify run`` puts its report: a folder of its own, and ``latest`` beside it.

Each run writes into ``reports/runs/<time>-<suites>/`` and then points
``reports/latest`` at that folder (a relative symbolic link, swapped in atomically), so a
run never overwrites another's report and ``reports/latest/report.html`` is always the
newest complete one. Where symbolic links cannot be made, ``reports/latest`` is a small
text file holding the folder's path instead. ``--report-dir DIR`` writes exactly there
and leaves ``latest`` alone.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dpverify.report.io import check_writable

#: The folder that holds ``runs/`` and ``latest``.
REPORTS = Path("reports")
RUNS = "runs"
LATEST = "latest"


def run_name(suite_names: Sequence[str], now: _dt.datetime | None = None) -> str:
    """The name of a run's folder: local time, then the suites (shortened).

    Examples
    --------
    >>> import datetime
    >>> run_name(["smoke", "paper000"], datetime.datetime(2025, 3, 1, 14, 5, 9))
    '20250301-140509-smoke+paper000'
    >>> len(run_name([f"s{i}" * 20 for i in range(5)], datetime.datetime(2025, 3, 1)))
    80
    """
    now = now or _dt.datetime.now()
    names = "+".join(dict.fromkeys(re.sub(r"[^A-Za-z0-9_.-]+", "_", s) for s in suite_names))
    return f"{now:%Y%m%d-%H%M%S}-{names or 'run'}"[:80]


def new_run_folder(suite_names: Sequence[str], root: Path = REPORTS,
                   now: _dt.datetime | None = None) -> Path:
    """Create and return a fresh folder under ``root/runs`` (never an existing one).

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> a, b = new_run_folder(["s"], root), new_run_folder(["s"], root)
    >>> a != b and a.parent == b.parent == root / "runs"
    True
    """
    parent = Path(root) / RUNS
    parent.mkdir(parents=True, exist_ok=True)
    base = run_name(suite_names, now)
    for i in range(1, 1000):
        path = parent / (base if i == 1 else f"{base}-{i}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free run folder name under {str(parent)!r}")


def point_latest(run_dir: Path, root: Path = REPORTS) -> Path:
    """Make ``root/latest`` lead to ``run_dir``; returns the ``latest`` path.

    A ``latest`` that is a real folder (written by an older dpverify) is kept: it moves
    into ``runs/`` under its own time, so no report is lost.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> first = new_run_folder(["a"], root)
    >>> latest = point_latest(first, root)
    >>> second = new_run_folder(["b"], root)
    >>> resolve_latest(point_latest(second, root)) == second.resolve()
    True
    """
    root = Path(root)
    latest = root / LATEST
    if latest.is_dir() and not latest.is_symlink():
        stamp = _dt.datetime.fromtimestamp(latest.stat().st_mtime)
        (root / RUNS).mkdir(parents=True, exist_ok=True)
        latest.rename(root / RUNS / f"{stamp:%Y%m%d-%H%M%S}-previous-{secrets.token_hex(3)}")
    target = os.path.relpath(Path(run_dir).resolve(), root.resolve())
    tmp = root / f".{LATEST}.{secrets.token_hex(6)}"
    try:
        os.symlink(target, tmp, target_is_directory=True)
    except (OSError, NotImplementedError):  # no symbolic links here: a pointer file
        tmp.write_text(target + "\n", encoding="utf-8")
    os.replace(tmp, latest)
    return latest


def resolve_latest(latest: Path) -> Path:
    """The run folder ``latest`` leads to (through the link, or the pointer file).

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "latest").write_text("runs/x\\n")
    7
    >>> resolve_latest(root / "latest") == (root / "runs" / "x").resolve()
    True
    """
    latest = Path(latest)
    if latest.is_file():
        return (latest.parent / latest.read_text(encoding="utf-8").strip()).resolve()
    return latest.resolve()


@dataclass
class RunOutput:
    """Where one ``dpverify run`` writes: ``--report-dir`` if given, else its own folder.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> out = RunOutput.check(None, ["smoke"], root=root)
    >>> folder = out.folder()
    >>> folder.parent == root / "runs", out.publish() == root / "latest"
    (True, True)
    >>> RunOutput.check(str(root / "mine"), ["smoke"]).publish() is None
    True
    """

    given: Path | None
    suite_names: list[str]
    root: Path = REPORTS
    started: _dt.datetime = field(default_factory=_dt.datetime.now)
    _folder: Path | None = None

    @classmethod
    def check(cls, report_dir: str | None, suite_names: Sequence[str],
              root: Path = REPORTS) -> RunOutput:
        """Check, before any work, that the report can be written (InputError if not)."""
        if report_dir is not None:
            check_writable(report_dir, "--report-dir", folder=True)
            return cls(Path(report_dir), list(suite_names), root)
        check_writable(Path(root) / RUNS, "the reports folder", folder=True)
        return cls(None, list(suite_names), Path(root))

    def folder(self) -> Path:
        """The folder to write into (a new run folder is created on the first call)."""
        if self._folder is None:
            self._folder = self.given or new_run_folder(self.suite_names, self.root,
                                                        now=self.started)
        return self._folder

    def publish(self) -> Path | None:
        """Point ``latest`` at this run's folder; ``None`` when ``--report-dir`` chose it."""
        if self.given is not None:
            return None
        return point_latest(self.folder(), self.root)
