"""Run the real entry point, ``python -m crontabber``, as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.fixtures.crontab import crontab  # noqa: F401 - the fixture
from tests.fixtures.netns import network_namespaces
from tests.helpers import REPO


class Cli:
    def __init__(self, crontab: Any) -> None:
        self.crontab = crontab
        self.spawned: list[subprocess.Popen] = []
        db = crontab.database
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "RESOURCE_POSTGRESQL_HOST": db.host,
            "RESOURCE_POSTGRESQL_PORT": str(db.port),
            "RESOURCE_POSTGRESQL_DBNAME": db.dbname,
            "RESOURCE_POSTGRESQL_USER": db.user,
            "RESOURCE_POSTGRESQL_PASSWORD": db.password,
        }

    def argv(self, *args: str, host: str | None = None) -> list[str]:
        """The command line; with ``host``, run under that host name (a UTS
        namespace of its own), as a runner on another machine would."""
        argv = [sys.executable, "-m", "crontabber", f"--admin.conf={self.crontab.ini}", *args]
        if host is None:
            return argv
        return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, *argv]

    def run(
        self, *args: str, timeout: float = 60, host: str | None = None
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.argv(*args, host=host),
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def spawn(self, *args: str, host: str | None = None, **kwargs: Any) -> subprocess.Popen:
        proc = subprocess.Popen(
            self.argv(*args, host=host),
            env=self.env,
            cwd=REPO,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **kwargs,
        )
        self.spawned.append(proc)
        return proc

    def close(self) -> None:
        """Kill what is still running of the spawned runners and close their pipes (an open
        pipe left to the garbage collector is a ResourceWarning: an error under pytest.ini's
        ``filterwarnings = error``, blamed on whichever test runs then)."""
        for proc in self.spawned:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:  # a job's process still holds the pipes
                for pipe in (proc.stdout, proc.stderr):
                    if pipe is not None:
                        pipe.close()
                proc.wait()


@pytest.fixture
def cli(crontab: Any) -> Iterator[Cli]:
    cli = Cli(crontab)
    yield cli
    cli.close()


@pytest.fixture
def namespaces() -> Any:
    """Four hosts: network namespaces, each with the address of its host side
    (:func:`tests.fixtures.netns.network_namespaces`)."""
    with network_namespaces(4) as made:
        yield made
