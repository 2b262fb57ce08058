"""Array backends: the same algorithm code runs on NumPy or on torch tensors.

Algorithms take the array namespace from the curator (``cur.xp``, the Array API standard
through ``array_api_compat``) and ask the backend for per-sample gradients, so a backend
is the one place that knows how derivatives are computed: closed forms on NumPy, autograd
on torch.
"""

from __future__ import annotations

from dpverify.core.backends.base import Backend, NumpyBackend, get_backend

__all__ = ["Backend", "NumpyBackend", "get_backend"]
