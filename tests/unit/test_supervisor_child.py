"""The forked job process and its runner: a runner that dies right after the fork, before the
child has set its death signal, must still take the job with it (no runs at once)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# A subreaper (P) forks an intermediate runner (I), which forks the job's child (G) and dies
# at once, before G set its death signal. G waits until it is reparented to P, then becomes
# the job's child of I. P reports how G ended: exit 71 is "my runner is gone, I stop".
SCRIPT = textwrap.dedent("""
    import ctypes, os, sys, time
    from types import SimpleNamespace
    from crontabber import supervisor
    ctypes.CDLL(None, use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    me = os.getpid()
    intermediate = os.fork()
    if intermediate == 0:
        runner = os.getpid()
        if os.fork() == 0:
            while os.getppid() == runner:
                time.sleep(0.01)
            stub = SimpleNamespace(inherited_fds=(), clock=None, limits=None)
            try:
                supervisor._become_child(stub, runner)
            except BaseException:
                os._exit(2)  # went on past the check: it would have run the job
            os._exit(3)
        os._exit(0)
    os.waitpid(intermediate, 0)
    pid, status = os.wait()  # the reparented job's child
    print(os.waitstatus_to_exitcode(status))
""")


def test_a_child_whose_runner_died_before_prctl_does_not_run_the_job():
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "71"
