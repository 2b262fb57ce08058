"""Atomic file writes: a report is either whole or absent, never half-written.

Files are created with mode 0666 less the process umask (0644 under the usual umask 022),
like any file a program writes: a committed report is world-readable. (``tempfile.mkstemp``
would make them 0600, whatever the umask.)
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from dpverify.checks.base import jsonable
from dpverify.core.errors import InputError


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file renamed into place.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a" / "r.txt"
    >>> write_text_atomic(p, "hi").read_text()
    'hi'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _create_temp(path: Path) -> tuple[int, str]:
    """A new, uniquely named file beside ``path``, opened for writing.

    Created by ``os.open`` with mode 0o666 so that the kernel applies the umask, as it
    does for an ordinary ``open``; ``O_EXCL`` makes the name ours alone, as mkstemp does.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {str(path)!r}")


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as indented JSON, atomically (numpy values made plain first).

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.json"
    >>> _ = write_json_atomic(p, {"x": np.float64(1.5), "e": float("inf")})
    >>> p.read_text().replace(chr(10), "").replace(" ", "")
    '{"x":1.5,"e":"inf"}'
    """
    return write_text_atomic(path, json.dumps(jsonable(obj), indent=2, sort_keys=False) + "\n")


def check_writable(path: str | os.PathLike[str], what: str, *, folder: bool = False) -> Path:
    """Fail now, naming ``what`` and ``path``, unless a report can be written there.

    ``folder``: the path is a folder that files go into (created if missing), else a file
    written atomically (through a temporary file beside it). The nearest existing folder
    on the way must take a new file: one is created and removed again, so the answer is
    the operating system's, whatever the user's privileges. Nothing else is created.

    Examples
    --------
    >>> import tempfile
    >>> check_writable(Path(tempfile.mkdtemp()) / "a" / "r.json", "--json").name
    'r.json'
    >>> from dpverify.core.errors import InputError
    >>> try:
    ...     check_writable("/proc/dpverify/report", "--report-dir", folder=True)
    ... except InputError as e:
    ...     print(str(e).split(" (")[0])
    --report-dir '/proc/dpverify/report': cannot write in '/proc'
    """
    p = Path(path)
    if folder and p.exists() and not p.is_dir():
        raise InputError(f"{what} {str(p)!r} is not a folder (a file is there)")
    if not folder and p.is_dir():
        raise InputError(f"{what} {str(p)!r} is a folder, not a file")
    start = p if folder else p.parent
    base = next((q for q in (start, *start.parents) if q.exists()), Path("."))
    if not base.is_dir():
        raise InputError(f"{what} {str(p)!r}: {str(base)!r} is not a folder")
    try:
        fd, tmp = _create_temp(base / ".dpverify-probe")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise InputError(f"{what} {str(p)!r}: cannot write in {str(base)!r} "
                         f"({e.strerror or e})") from None
    return p
