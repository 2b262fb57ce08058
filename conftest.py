"""Test-session setup shared by every test, doctest and suite item."""

import os

# One BLAS thread: on a busy 2-core machine multithreaded BLAS makes the small products of
# per-trial work hundreds of times slower; trials are the parallel axis, not BLAS.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
