"""The README, run: every command of its ``bash`` blocks exits as the text says it will.

Each command runs with ``bash`` from a scratch copy of the repository (its suites,
examples, docs and the committed baseline), so nothing the commands write lands in the
checkout, with the ``dpverify`` and ``pytest`` of this interpreter's environment on PATH.
The README's conventions (stated in its "How this README is tested"):

* the two set-up commands (``python3 -m venv ...``) are not run here: CI runs the test one, and
  this test checks that ``.ci/run`` holds the test command verbatim;
* a trailing ``# exit N: why`` gives the exit code a command must end with (else 0);
* a comment line ``# long (...); a quick try adds: ARGS`` above a command marks it as
  taking minutes, and ``ARGS`` is appended to it here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"
SETUP = "python3 -m venv .venv"
QUICK_TRY = re.compile(r"#\s*long\b.*?a quick try adds:\s*(?P<args>.+?)\s*$")
EXIT = re.compile(r"#\s*exit (?P<code>\d+)\b")


@dataclass
class Command:
    """One command of the README, as it is written and as it is run here."""

    text: str  # as written (continuation lines joined)
    line: int  # where it starts in the README
    exit_code: int = 0
    extra: str = ""  # appended to make a long command quick, as the README says

    @property
    def run(self) -> str:
        return f"{self.text} {self.extra}".strip()


def _strip_comment(line: str) -> tuple[str, str]:
    """(command, trailing comment) of one shell line; a '#' inside quotes is no comment."""
    quote = None
    for i, ch in enumerate(line):
        if ch in "\"'" and quote in (None, ch):
            quote = None if quote == ch else ch
        elif ch == "#" and quote is None and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i:]
    return line.rstrip(), ""


def readme_commands(text: str) -> list[Command]:
    """Every command of the ``bash`` blocks of a README, with its expected exit code.

    Examples
    --------
    >>> md = ("```bash\\n# long (1 h); a quick try adds: --only a\\n"
    ...       "x run s \\\\\\n  --y 1  # exit 1: z\\n```")
    >>> [(c.text, c.exit_code, c.extra) for c in readme_commands(md)]
    [('x run s --y 1', 1, '--only a')]
    """
    out: list[Command] = []
    for block in re.finditer(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        start = text[: block.start()].count("\n") + 2
        pending_extra, pending_exit = "", None
        lines = block.group(1).splitlines()
        i = 0
        while i < len(lines):
            body, comment = _strip_comment(lines[i])
            first = i
            while body.endswith("\\") and i + 1 < len(lines):
                i += 1
                more, more_comment = _strip_comment(lines[i])
                body, comment = body[:-1].rstrip() + " " + more.strip(), more_comment
            i += 1
            if not body.strip():  # a comment line: it annotates the next command
                m = QUICK_TRY.search(comment)
                pending_extra = m.group("args") if m else pending_extra
                e = EXIT.search(comment)
                pending_exit = int(e.group("code")) if e else pending_exit
                continue
            e = EXIT.search(comment)
            code = int(e.group("code")) if e else (pending_exit or 0)
            out.append(Command(body.strip(), start + first, code, pending_extra))
            pending_extra, pending_exit = "", None
    return out


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))
SETUP_COMMANDS = [c for c in COMMANDS if c.text.startswith(SETUP)]
RUN = [c for c in COMMANDS if not c.text.startswith(SETUP)]


def test_the_readme_has_exactly_two_set_up_commands_and_ci_runs_the_tests_verbatim():
    """CI runs the test command as written; the main job (several minutes of suites on top
    of the tests) is the one a newcomer runs, and its report's figures are tested here in
    test_report.py rather than by running it twice per CI build."""
    assert len(SETUP_COMMANDS) == 2, [c.text for c in SETUP_COMMANDS]
    main_job, tests = (c.text for c in SETUP_COMMANDS)
    assert ".[plots]" in main_job and "dpverify run" in main_job  # figures in its report
    assert '.[test]" && .venv/bin/python -m pytest' in tests
    assert tests in CI.read_text(encoding="utf-8").splitlines(), f"{CI} does not run {tests}"


def test_every_other_command_says_how_to_reach_dpverify():
    text = README.read_text(encoding="utf-8")
    assert "source .venv/bin/activate" in text and ".venv/bin/dpverify" in text
    assert len(RUN) >= 15
    assert any(c.exit_code == 1 for c in RUN)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A copy of what the commands read, and an environment that finds this dpverify."""
    root = tmp_path_factory.mktemp("readme")
    for name in ("suites", "examples", "docs"):
        shutil.copytree(ROOT / name, root / name)
    (root / "reports").mkdir()
    shutil.copy(ROOT / "reports" / "papers.json", root / "reports" / "papers.json")
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "120"}
    if shutil.which("dpverify", path=env["PATH"]) is None:  # not installed as a script
        shim = root / ".bin"
        shim.mkdir()
        (shim / "dpverify").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m dpverify.cli '
                                       '"$@"\n')
        (shim / "dpverify").chmod(0o755)
        env["PATH"] = f"{shim}{os.pathsep}{env['PATH']}"
    return root, env


@pytest.mark.slow
@pytest.mark.parametrize("cmd", RUN, ids=[f"line{c.line}" for c in RUN])
def test_readme_command_exits_as_the_text_says(cmd: Command, scratch):
    root, env = scratch
    res = subprocess.run(["bash", "-c", cmd.run], cwd=root, env=env, capture_output=True,
                         text=True, timeout=600)
    tail = (res.stdout + res.stderr)[-3000:]
    assert res.returncode == cmd.exit_code, f"README line {cmd.line}: {cmd.run}\n{tail}"
    assert "Traceback" not in res.stderr, tail
