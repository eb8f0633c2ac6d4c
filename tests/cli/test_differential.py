"""Compatibility with crontabber 0.18.1, on every ``make test``.

``scripts/differential/run.py`` runs the original (Python 2.7, installed by the
script itself on first use) and ours on the same scenarios and compares the
state both write to ``crontabber`` and ``crontabber_log``, exit codes and
``--nagios``/``--audit-ghosts`` output. It exits 1 on any difference other
than the bug fixes it declares, or if a declared one no longer happens.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import ENV

REPO = Path(__file__).resolve().parent.parent.parent


def test_the_original_crontabber_and_ours_write_the_same_state():
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "differential" / "run.py")],
        env=dict(ENV),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = [
        line.split()[1]
        for line in done.stdout.splitlines()
        if line.split()[1:2] in (["PASS"], ["DIFF"], ["FAIL"])
    ]
    assert len(results) >= 12 and set(results) <= {"PASS", "DIFF"}, done.stdout
