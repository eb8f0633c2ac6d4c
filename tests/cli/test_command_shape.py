"""Every command has the runner's shape (crontabber.command): the one exit-code table at the
end of its --help, and a bad argument as one line with exit 1 (argparse's own 2 means
"locked" in the table)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from crontabber import exit_codes_text
from tests.helpers import REPO

COMMANDS = ["crontabber", "jobs.uploads", "jobs.prune", "jobs.missing_symbols"]


def run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.mark.parametrize("module", COMMANDS)
def test_help_ends_with_the_one_exit_code_table(module):
    done = run(module, "--help")
    assert done.returncode == 0, done.stderr
    assert " ".join(exit_codes_text().split()) in " ".join(done.stdout.split())


@pytest.mark.parametrize("module", COMMANDS)
def test_a_bad_argument_is_one_line_and_exit_1(module):
    done = run(module, "--no-such-flag")
    assert done.returncode == 1, done
    prog = "crontabber" if module == "crontabber" else f"python -m {module}"
    assert done.stderr.startswith(f"{prog}: ") and done.stderr.count("\n") == 1, done.stderr
