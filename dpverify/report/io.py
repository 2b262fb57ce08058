"""Atomic file writes: a report is either whole or absent, never half-written."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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
    from dpverify.checks import jsonable

    return write_text_atomic(path, json.dumps(jsonable(obj), indent=2, sort_keys=False) + "\n")
