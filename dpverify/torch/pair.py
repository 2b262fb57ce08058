"""A neighbouring pair of torch training sets, and where their records sit.

A :class:`CanaryPair` holds two ``TensorDataset`` objects that differ in one record (the
canary) at ``index``: under ``add_remove`` one of them holds the canary there and the
other lacks that row; under ``replace_one`` both have a record there and they differ.
The last tensor of a dataset is the target, the others are the model's inputs.

A training run sees one of the two datasets (its *world*) and draws batches as row
indices into it. Replay maps those rows to *slots*, the rows of the larger dataset (the
curator's convention, :meth:`dpverify.core.curator.Curator.replay`), so that the same batch can
be read in either world: the canary's slot is ``index`` in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import TensorDataset

from dpverify.core.claims import check_relation
from dpverify.core.errors import InputError


def _tensors(data: Any, what: str) -> tuple[torch.Tensor, ...]:
    if isinstance(data, TensorDataset):
        return tuple(data.tensors)
    if isinstance(data, (tuple, list)) and data and all(isinstance(t, torch.Tensor)
                                                         for t in data):
        return tuple(data)
    raise InputError(f"{what} must be a TensorDataset or a tuple of tensors, got "
                     f"{type(data).__name__}")


def _check_finite(tensors: Sequence[torch.Tensor], what: str) -> None:
    for k, t in enumerate(tensors):
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise InputError(f"{what}: tensor {k} holds NaN or inf values")


@dataclass(frozen=True)
class CanaryPair:
    """Two training sets that differ in one record, at row ``index``.

    Examples
    --------
    >>> X, y = torch.zeros(3, 2), torch.tensor([0, 1, 0])
    >>> pair = CanaryPair.add(TensorDataset(X, y), (torch.ones(2), torch.tensor(1)))
    >>> len(pair.D), len(pair.D_prime), pair.relation, pair.index
    (4, 3, 'add_remove', 0)
    >>> len(pair.swapped().D)
    3
    """

    D: TensorDataset
    D_prime: TensorDataset
    relation: str = "add_remove"
    index: int = 0
    label: str = ""

    def __post_init__(self) -> None:
        check_relation(self.relation)
        a, b = _tensors(self.D, "D"), _tensors(self.D_prime, "D_prime")
        if len(a) != len(b) or any(s.shape[1:] != t.shape[1:] for s, t in zip(a, b,
                                                                                strict=True)):
            raise InputError("the two datasets of a pair must hold tensors of the same shapes")
        n, m = len(a[0]), len(b[0])
        want = 0 if self.relation == "replace_one" else 1
        if abs(n - m) != want:
            raise InputError(f"{self.relation} neighbours have sizes differing by {want}, got "
                             f"{n} and {m}")
        if not 0 <= self.index < max(n, m):
            raise InputError(f"canary index {self.index} is outside the datasets (sizes {n}, "
                             f"{m})")
        _check_finite(a, "D")
        _check_finite(b, "D_prime")

    @classmethod
    def add(cls, data: TensorDataset, canary: Sequence[torch.Tensor], index: int = 0,
            label: str = "canary") -> CanaryPair:
        """``data`` with the record ``canary`` inserted at ``index`` (D), and ``data`` (D')."""
        base = _tensors(data, "data")
        rows = tuple(torch.cat([t[:index], torch.as_tensor(c, dtype=t.dtype)[None], t[index:]])
                     for t, c in zip(base, canary, strict=True))
        return cls(TensorDataset(*rows), TensorDataset(*base), "add_remove", index, label)

    @classmethod
    def replace(cls, data: TensorDataset, canary: Sequence[torch.Tensor], index: int = 0,
                label: str = "canary") -> CanaryPair:
        """``data`` (D), and ``data`` with row ``index`` replaced by ``canary`` (D')."""
        base = _tensors(data, "data")
        rows = []
        for t, c in zip(base, canary, strict=True):
            r = t.clone()
            r[index] = torch.as_tensor(c, dtype=t.dtype)
            rows.append(r)
        return cls(TensorDataset(*base), TensorDataset(*rows), "replace_one", index, label)

    def swapped(self) -> CanaryPair:
        """The pair with its two worlds exchanged."""
        return CanaryPair(self.D_prime, self.D, self.relation, self.index, self.label)

    def world(self, w: int) -> TensorDataset:
        """The training set of world ``w`` (0: D, 1: D')."""
        return self.D if w == 0 else self.D_prime


class Slots:
    """Row <-> slot bookkeeping of a run in world 0 of ``pair`` (use ``pair.swapped()``
    for a run on D').

    Examples
    --------
    >>> X, y = torch.arange(3.0)[:, None], torch.zeros(3)
    >>> pair = CanaryPair.add(TensorDataset(X, y), (torch.tensor([9.0]), torch.tensor(0.0)), 1)
    >>> s = Slots(pair.swapped())          # a run on the three records without the canary
    >>> s.to_slots([0, 1, 2]).tolist()     # their slots skip the canary's
    [0, 2, 3]
    >>> [float(v) for v in s.batch(1, s.to_slots([0, 1, 2]))[0][:, 0]]  # in D, canary in
    [0.0, 9.0, 1.0, 2.0]
    """

    def __init__(self, pair: CanaryPair) -> None:
        self.pair = pair
        self.c = pair.index
        sizes = [len(pair.D), len(pair.D_prime)]
        # Whether world w holds a record at the canary's slot.
        self.has = [pair.relation == "replace_one" or sizes[w] > sizes[1 - w] for w in (0, 1)]
        self._tensors = [_tensors(pair.D, "D"), _tensors(pair.D_prime, "D_prime")]

    def to_slots(self, rows: Sequence[int] | torch.Tensor) -> np.ndarray:
        """Slots of world 0's ``rows``."""
        r = np.asarray(torch.as_tensor(rows).cpu(), dtype=np.int64).reshape(-1)
        return r if self.has[0] else r + (r >= self.c)

    def rows(self, w: int, slots: np.ndarray) -> np.ndarray:
        """World ``w``'s rows of ``slots``; the canary's slot only where world ``w`` has it."""
        s = slots[slots != self.c] if not self.has[w] else slots
        return s if self.has[w] else s - (s > self.c)

    def batch(self, w: int, slots: Sequence[int] | np.ndarray, canary: bool = True
              ) -> tuple[torch.Tensor, ...]:
        """World ``w``'s records at ``slots`` (slot order), the canary's slot in or out."""
        s = np.unique(np.asarray(slots, dtype=np.int64))
        s = s[s != self.c]
        if canary:
            s = np.sort(np.append(s, self.c))
        idx = torch.as_tensor(self.rows(w, s))
        return tuple(t[idx] for t in self._tensors[w])

    def record(self, w: int) -> tuple[torch.Tensor, ...] | None:
        """World ``w``'s record at the canary's slot (``None`` where it has none)."""
        if not self.has[w]:
            return None
        return tuple(t[self.c] for t in self._tensors[w])
