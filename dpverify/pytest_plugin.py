"""pytest plugin: ``pytest suites/`` collects suite files, one test item per check.

A check item passes when the check meets its expectation (a planted bug expected to FAIL
passes as an item when it is caught). Options: ``--dpverify-seed``, ``--dpverify-scale``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    from dpverify.cli.app import nonnegative_int

    group = parser.getgroup("dpverify")
    group.addoption("--dpverify-seed", type=nonnegative_int, default=None,
                    help="root seed of suite checks (default: each suite's own, else 0)")
    group.addoption("--dpverify-scale", choices=["quick", "thorough"], default="quick",
                    help="scale of suite checks")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "dpverify_check: a check collected from a suite file")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix == ".toml" and _is_suite(file_path):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


def _is_suite(path: Path) -> bool:
    if path.name == "pyproject.toml":
        return False
    try:
        head = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "[[check]]" in head


@pytest.fixture
def assert_private(request: pytest.FixtureRequest) -> Any:
    """:func:`dpverify.torch.assert_private` seeded by ``--dpverify-seed`` (default 0)::

        def test_training_is_private(assert_private):
            assert_private(train, claim=(8, 1e-5), pair=canary_pair)
    """
    pytest.importorskip("torch")
    import functools

    from dpverify.torch import assert_private as check

    seed = request.config.getoption("dpverify_seed")
    return functools.partial(check, seed=0 if seed is None else seed)


class SuiteFile(pytest.File):
    """A suite file; loading errors surface as a collection error naming file and line."""

    def collect(self) -> Iterator[pytest.Item]:
        from dpverify.cli.suites import load_suite
        from dpverify.core.errors import InputError

        try:
            suite = load_suite(self.path)
        except InputError as e:
            # The message names file, line and value: a traceback would only bury it.
            raise self.CollectError(str(e)) from None
        for spec in suite.checks:
            item = CheckItem.from_parent(self, name=spec.id, spec=spec, suite_seed=suite.seed)
            item.add_marker("dpverify_check")
            yield item


class CheckFailed(Exception):
    """A check whose verdict differs from its expectation, or that its input stopped."""


class CheckItem(pytest.Item):
    def __init__(self, *, spec: Any, suite_seed: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.suite_seed = suite_seed

    def runtest(self) -> None:
        from dpverify.checks.base import RunContext, run_check
        from dpverify.cli.suites import scaled
        from dpverify.core.errors import InputError

        cfg = self.config
        seed = cfg.getoption("dpverify_seed")
        if seed is None:
            seed = self.suite_seed if self.suite_seed is not None else 0
        scale = cfg.getoption("dpverify_scale")
        try:
            res = run_check(scaled(self.spec, scale), RunContext(seed=seed, scale=scale))
        except InputError as e:
            # Bad input found only when the check runs: its message, not the traceback.
            raise CheckFailed(f"bad input: {e}") from None
        self.user_properties.append(("verdict", res.outcome.verdict.value))
        if not res.met:
            raise CheckFailed(
                f"{self.spec.id}: verdict {res.outcome.verdict.value}, expected "
                f"{self.spec.expected.value}: {res.outcome.message}"
            )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
                     ) -> str:
        if isinstance(excinfo.value, CheckFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.spec.kind}: {self.spec.target}"
