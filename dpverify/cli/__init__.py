"""Front ends: the ``dpverify`` command (:mod:`~dpverify.cli.app` and one module per
subcommand) and suite files (:mod:`~dpverify.cli.suites`); the pytest plugin is
:mod:`dpverify.pytest_plugin`."""

from dpverify.cli.app import main

__all__ = ["main"]
