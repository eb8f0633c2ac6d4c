"""Two gunicorns on one host, the search endpoint and the dashboard, started as the docs show
(docs/deploy.md, "Serving search in production"; docs/dashboard.md), each get a control socket
of their own (issue #44, item 6, P16): gunicorn 27 otherwise puts every server of a user on
``~/.gunicorn/gunicorn.ctl``, and the second server takes the first one's."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import REPO

DOCS = {"search": REPO / "docs" / "deploy.md", "dashboard": REPO / "docs" / "dashboard.md"}


def documented(page: Path, app: str) -> list[str]:
    """The gunicorn command line of ``page`` that serves ``app`` (its environment dropped)."""
    text = page.read_text().replace("\\\n", " ")
    (line,) = [line for line in text.splitlines() if "gunicorn " in line and app in line]
    words = shlex.split(line)
    start = next(i for i, word in enumerate(words) if word.endswith("gunicorn"))
    return words[start + 1 :]


def option(argv: list[str], name: str) -> str | None:
    return next((argv[i + 1] for i, word in enumerate(argv[:-1]) if word == name), None)


def test_the_documented_servers_have_a_control_socket_each(tmp_path):
    commands = {
        "search": documented(DOCS["search"], "search.server:application"),
        "dashboard": documented(DOCS["dashboard"], "dashboard.app:application"),
    }
    sockets = {name: option(argv, "--control-socket") for name, argv in commands.items()}
    assert None not in sockets.values(), commands  # gunicorn's default: one shared path
    assert len(set(sockets.values())) == 2, sockets
    started = {}
    try:
        for name, argv in commands.items():  # as documented, in a directory of the test's
            ctl = tmp_path / Path(sockets[name]).name
            argv = list(argv)
            argv[argv.index("--control-socket") + 1] = str(ctl)
            for bind in ("-b", "--bind"):
                if bind in argv:
                    argv[argv.index(bind) + 1] = f"unix:{tmp_path / name}.sock"
            for workers in ("-w", "--workers"):
                if workers in argv:
                    argv[argv.index(workers) + 1] = "1"  # a 2-core machine shared by others
            log = open(tmp_path / f"{name}.log", "wb")
            started[name] = (
                subprocess.Popen(
                    [sys.executable, "-m", "gunicorn", *argv],
                    cwd=tmp_path,
                    env={**os.environ, "PYTHONPATH": str(REPO), "ES_URL": "http://es.invalid:9200"},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                ),
                ctl,
                log,
            )
        deadline = time.monotonic() + 60
        while not all(ctl.exists() for _, ctl, _ in started.values()):
            assert time.monotonic() < deadline, {
                n: (tmp_path / f"{n}.log").read_text() for n in started
            }
            assert all(proc.poll() is None for proc, _, _ in started.values())
            time.sleep(0.1)
        for name, (_proc, ctl, _log) in started.items():
            text = (tmp_path / f"{name}.log").read_text()
            listening = re.findall(r"Control socket listening at (\S+)", text)
            assert listening == [str(ctl)], text
    finally:
        for proc, _, log in started.values():
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
