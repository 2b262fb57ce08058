"""Checkpoints of finished trial blocks, so a long run that is killed resumes where it was.

A run of :func:`dpverify.execution.trials.map_blocks` is identified by a key: a hash of what the
block function computes (target, parameters, data, backend), the root seed and the block
layout. Every finished block is written at once to ``DIR/<key>/block-<index>.npz`` (through
a temporary file and ``os.replace``, so a file is either whole or absent, even under
SIGKILL); a rerun with the same command loads those files and computes only the rest.
Because each block has its own child of the root seed, the resumed result is bit-identical
to an uninterrupted run.

Results of a block must be NumPy arrays, numbers, or tuples, lists or string-keyed dicts of
them (what a block of trials returns: outputs or sufficient statistics); they are stored
without pickle.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpverify.core.errors import InputError

FORMAT_VERSION = 1
_BLOCK_RE = re.compile(r"^block-(\d{7})\.npz$")


def fingerprint(obj: Any) -> str:
    """A stable SHA-256 hex digest of nested plain data and NumPy arrays.

    Dicts are hashed with sorted keys; arrays by dtype, shape and bytes; other objects by
    ``repr`` (so only use it on values whose repr is deterministic).

    Examples
    --------
    >>> fingerprint({"b": 1, "a": np.arange(3)}) == fingerprint({"a": np.arange(3), "b": 1})
    True
    >>> fingerprint([1.0]) == fingerprint([1.0000001])
    False
    """
    h = hashlib.sha256()
    _feed(h, obj)
    return h.hexdigest()


def _feed(h: Any, obj: Any) -> None:
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        h.update(f"nd:{a.dtype.str}:{a.shape}:".encode())
        h.update(a.tobytes())
    elif isinstance(obj, Mapping):
        h.update(b"map{")
        for k in sorted(obj, key=str):
            _feed(h, str(k))
            _feed(h, obj[k])
        h.update(b"}")
    elif isinstance(obj, (list, tuple)):
        h.update(b"seq[")
        for v in obj:
            _feed(h, v)
        h.update(b"]")
    elif isinstance(obj, (str, bytes)):
        data = obj.encode() if isinstance(obj, str) else obj
        h.update(f"s{len(data)}:".encode() + data)
    elif isinstance(obj, (bool, int, float, np.generic)) or obj is None:
        h.update(f"v:{type(obj).__name__}:{obj!r};".encode())
    else:
        h.update(f"r:{type(obj).__qualname__}:{obj!r};".encode())


def seed_fingerprint(seed: int | np.random.SeedSequence) -> dict[str, Any]:
    """What identifies a root seed: its entropy and spawn key (plain data).

    Examples
    --------
    >>> seed_fingerprint(3)
    {'entropy': '3', 'spawn_key': []}
    """
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return {"entropy": str(ss.entropy), "spawn_key": [int(k) for k in ss.spawn_key]}


def pack(result: Any) -> dict[str, np.ndarray]:
    """Arrays to store for a block result (see :func:`unpack`).

    Examples
    --------
    >>> unpack(pack((np.ones(2), {"n": 3})))
    (array([1., 1.]), {'n': array(3)})
    """
    out: dict[str, np.ndarray] = {}
    out["__layout__"] = np.array(json.dumps(_pack(result, out, "r")))
    return out


def _pack(obj: Any, out: dict[str, np.ndarray], name: str) -> Any:
    if isinstance(obj, tuple):
        return {"tuple": [_pack(v, out, f"{name}_{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return {"list": [_pack(v, out, f"{name}_{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, Mapping):
        if not all(isinstance(k, str) for k in obj):
            raise InputError("a checkpointed block may return dicts with string keys only")
        return {"dict": {k: _pack(v, out, f"{name}_{i}") for i, (k, v) in enumerate(obj.items())}}
    if obj is None:  # a part of a result that does not apply (a white-box block's values)
        return {"none": None}
    arr = np.asarray(obj)
    if arr.dtype == object:
        raise InputError(
            f"a checkpointed block must return arrays or numbers (or tuples/lists/dicts of "
            f"them), got {type(obj).__name__}"
        )
    out[name] = arr
    return {"array": name}


def unpack(arrays: Mapping[str, np.ndarray]) -> Any:
    """The block result that :func:`pack` stored."""
    layout = json.loads(str(arrays["__layout__"]))
    return _unpack(layout, arrays)


def _unpack(layout: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    (kind, v), = layout.items()
    if kind == "none":
        return None
    if kind == "array":
        return np.asarray(arrays[v])
    if kind == "tuple":
        return tuple(_unpack(x, arrays) for x in v)
    if kind == "list":
        return [_unpack(x, arrays) for x in v]
    return {k: _unpack(x, arrays) for k, x in v.items()}


class BlockStore:
    """The folder holding the finished blocks of one run.

    Parameters
    ----------
    root
        The checkpoint directory given by the user (``--checkpoint DIR``).
    key
        What identifies the run; :meth:`for_run` builds it. Runs with different keys never
        share files, so one directory can hold many runs.
    description
        Plain data written to ``manifest.json`` so a person can tell the runs apart.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     st = BlockStore(d, "abc")
    ...     st.save(2, np.arange(3.0), trials=3)
    ...     sorted(st.load(sizes=[3, 3, 3]))
    [2]
    """

    def __init__(self, root: str | os.PathLike[str], key: str,
                 description: Mapping[str, Any] | None = None) -> None:
        self.root = Path(root)
        self.key = key
        self.path = self.root / key[:32]
        self.path.mkdir(parents=True, exist_ok=True)
        manifest = self.path / "manifest.json"
        if not manifest.exists():
            _atomic_write_bytes(manifest, json.dumps(
                {"format": FORMAT_VERSION, "key": key, "run": dict(description or {})},
                indent=1, sort_keys=True, default=str).encode())

    @classmethod
    def for_run(cls, root: str | os.PathLike[str], *, what: Any,
                seed: int | np.random.SeedSequence, sizes: list[int]) -> BlockStore:
        """The store of a run of ``what`` (plain data naming the computation) on a layout."""
        desc = {"what": what, "seed": seed_fingerprint(seed), "blocks": len(sizes),
                "trials": int(sum(sizes)), "block_size": int(sizes[0]) if sizes else 0,
                "format": FORMAT_VERSION}
        return cls(root, fingerprint(desc), _describe(desc))

    def _file(self, index: int) -> Path:
        return self.path / f"block-{index:07d}.npz"

    def save(self, index: int, result: Any, *, trials: int) -> None:
        """Write block ``index`` atomically (a temporary file, then ``os.replace``)."""
        arrays = pack(result)
        arrays["__trials__"] = np.array(int(trials))
        target = self._file(index)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                tmp.unlink()

    def load(self, sizes: list[int]) -> dict[int, Any]:
        """Every stored block whose index and trial count fit the layout ``sizes``.

        A file that cannot be read (a disk error; never a partial write) is ignored and its
        block recomputed.
        """
        found: dict[int, Any] = {}
        for p in self.path.iterdir():
            m = _BLOCK_RE.match(p.name)
            if not m:
                continue
            i = int(m.group(1))
            if i >= len(sizes):
                continue
            try:
                with np.load(p, allow_pickle=False) as z:
                    arrays = {k: z[k] for k in z.files}
            except (OSError, ValueError, KeyError):
                continue
            if int(arrays.pop("__trials__", -1)) != sizes[i]:
                continue
            found[i] = unpack(arrays)
        return found

    def count(self) -> int:
        """Number of finished blocks on disk."""
        return sum(1 for p in self.path.iterdir() if _BLOCK_RE.match(p.name))


def _describe(desc: Any) -> Any:
    """A JSON-friendly, size-limited rendering of a run description for the manifest."""
    if isinstance(desc, Mapping):
        return {str(k): _describe(v) for k, v in desc.items()}
    if isinstance(desc, (list, tuple)):
        return [_describe(v) for v in desc][:50]
    if isinstance(desc, np.ndarray):
        return f"array{desc.shape} {desc.dtype} sha256={fingerprint(desc)[:16]}"
    if isinstance(desc, (str, int, float, bool)) or desc is None:
        return desc
    return repr(desc)[:200]


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
