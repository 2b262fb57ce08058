"""Shared fixtures of the harness's own tests."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from dpverify.core.data import Dataset


@pytest.fixture
def small_data() -> Dataset:
    """Six records in three dimensions with distinct rows, labels in {-1, +1}."""
    X = np.array([
        [1.0, 0.0, 0.0],
        [0.0, 2.0, 0.0],
        [0.0, 0.0, 3.0],
        [1.0, 1.0, 0.0],
        [0.5, -0.5, 0.25],
        [-1.0, 0.0, 2.0],
    ])
    y = np.array([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])
    return Dataset(X, y)


@pytest.fixture
def sum_query() -> Callable:
    """The query "sum of the records in the batch", for every trial: (trials, d)."""
    return lambda X, y, w: w @ X


@pytest.fixture
def write_suite(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a suite file from (dedented) TOML text; returns its path."""

    def write(text: str, name: str = "suite.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path

    return write
