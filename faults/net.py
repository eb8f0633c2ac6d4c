"""What the network and load fault modules (s3, elasticsearch, search_load, disk) share:
the tools (scripts/fault-tools.sh), a Toxiproxy server, a mitmproxy reverse proxy with
the S3 error addon, job runs as real runner subprocesses, a scratch database, gunicorn.

Everything is found from the environment that ``.services/env`` exports (ports, the
state directory), so the same code runs on the default ports under ``make faults`` and
on a helper's own services.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import devservices

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
STATE = devservices.current().state_dir
ADDON = Path(__file__).resolve().parent / "s3_errors_addon.py"


def scaled(count: int, scale: float, least: int = 1) -> int:
    """``count`` at ``scale``, never fewer than ``least``."""
    return max(least, round(count * scale))


def tools() -> Path:
    """The tools directory, installing what is missing (idempotent, pinned)."""
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "fault-tools.sh")],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SYMBOLS_STATE_DIR": str(STATE)},
    )
    return Path(out.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, seconds: float = 20) -> None:
    """Wait until something accepts connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"nothing listens on 127.0.0.1:{port} after {seconds} s"
                ) from None
            time.sleep(0.1)


def http_json(method: str, url: str, body: Any = None, timeout: float = 10) -> tuple[int, Any]:
    """One HTTP request; the status and the decoded JSON body (None when empty or not JSON)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode("utf-8", "replace")


class Toxiproxy:
    """A Toxiproxy server of our own (a free port), driven by its HTTP API."""

    def __init__(self, tools_dir: Path) -> None:
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}"
        self.log = open(STATE / "faults" / f"toxiproxy-{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [
                str(tools_dir / "bin" / "toxiproxy-server"),
                "-host",
                "127.0.0.1",
                "-port",
                str(self.port),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_port(self.port)

    def proxy(self, name: str, upstream_port: int) -> int:
        """Create a proxy to 127.0.0.1:``upstream_port``; its listening port."""
        port = free_port()
        status, body = http_json(
            "POST",
            f"{self.api}/proxies",
            {
                "name": name,
                "listen": f"127.0.0.1:{port}",
                "upstream": f"127.0.0.1:{upstream_port}",
                "enabled": True,
            },
        )
        if status not in (200, 201):
            raise RuntimeError(f"toxiproxy: creating {name}: {status} {body}")
        return port

    def enable(self, name: str, enabled: bool) -> None:
        """Enabled False closes the listener and every connection (refused from then on)."""
        http_json("POST", f"{self.api}/proxies/{name}", {"enabled": enabled})

    def toxic(
        self,
        name: str,
        kind: str,
        stream: str = "downstream",
        toxicity: float = 1.0,
        **attributes: Any,
    ) -> str:
        toxic_name = f"{kind}_{stream}"
        status, body = http_json(
            "POST",
            f"{self.api}/proxies/{name}/toxics",
            {
                "name": toxic_name,
                "type": kind,
                "stream": stream,
                "toxicity": toxicity,
                "attributes": attributes,
            },
        )
        if status not in (200, 201):
            raise RuntimeError(f"toxiproxy: toxic {kind} on {name}: {status} {body}")
        return toxic_name

    def clear(self, name: str) -> None:
        """Remove every toxic of ``name`` and enable it."""
        _, body = http_json("GET", f"{self.api}/proxies/{name}/toxics")
        for toxic in body or []:
            http_json("DELETE", f"{self.api}/proxies/{name}/toxics/{toxic['name']}")
        self.enable(name, True)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


class Mitm:
    """mitmproxy (mitmdump) as a reverse proxy in front of ``upstream_port``, with
    faults/s3_errors_addon.py answering a chosen share of requests with an S3 error."""

    def __init__(self, tools_dir: Path, upstream_port: int) -> None:
        self.port = free_port()
        self.control = STATE / "faults" / f"mitm-{self.port}.json"
        self.set(0.0)
        self.log = open(STATE / "faults" / f"mitm-{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [
                str(tools_dir / "mitmproxy" / "bin" / "mitmdump"),
                "--mode",
                f"reverse:http://127.0.0.1:{upstream_port}",
                "--listen-host",
                "127.0.0.1",
                "--listen-port",
                str(self.port),
                "--set",
                "keep_host_header=true",
                "--set",
                "flow_detail=0",
                "-s",
                str(ADDON),
            ],
            env={**os.environ, "FAULTS_MITM_CONTROL": str(self.control)},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_port(self.port, 60)

    def set(self, share: float, status: int = 503) -> None:
        """From now on answer ``share`` of the requests with ``status`` (500 InternalError or
        503 SlowDown), the others passed through."""
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(json.dumps({"share": share, "status": status}))
        tmp.replace(self.control)

    def injected(self) -> int:
        """How many error answers the addon has sent so far."""
        try:
            return int(json.loads(self.control.with_suffix(".count").read_text())["injected"])
        except (OSError, ValueError, KeyError):
            return 0

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.log.close()


@dataclass
class Run:
    """A finished runner (or command) subprocess."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 900) -> Run:
    """Run ``python -m ...`` (or any command) from the repository; its output and time."""
    start = time.monotonic()
    proc = subprocess.run(
        argv,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


def run_job(app_name: str, options: dict[str, Any], env: dict[str, str]) -> Run:
    """One forced run of job ``app_name`` by the real runner (``python -m crontabber``)."""
    return run(
        [
            PYTHON,
            "-m",
            "crontabber",
            "--admin.conf=crontabber.ini",
            "--job",
            app_name,
            "--force",
            *(f"--crontabber.class-{k}={v}" for k, v in options.items()),
        ],
        env,
    )


def fresh_database(dbname: str) -> dict[str, str]:
    """Drop and create ``dbname`` on the services' PostgreSQL, apply the schema; the
    environment that points the runner and the jobs at it."""
    from crontabber.schema import ensure_schema, with_runner
    from crontabber.store import connect
    from devservices.databases import fresh_database as create
    from jobs import SQL_DIR as JOBS_SQL

    conn = connect(create(dbname))
    try:
        ensure_schema(conn, with_runner([JOBS_SQL]))
    finally:
        conn.close()
    return {"RESOURCE_POSTGRESQL_DBNAME": dbname}


def services(command: str, *names: str) -> None:
    """``scripts/services.sh COMMAND NAMES`` for the services this environment points at:
    the script's port settings are taken from the addresses ``.services/env`` exported
    when they are not set (else a restart would pick the default ports)."""
    env = {**devservices.current().script_ports(), **os.environ, "SYMBOLS_STATE_DIR": str(STATE)}
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "services.sh"), command, *names],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    if proc.returncode:
        raise RuntimeError(f"services.sh {command} {' '.join(names)}: {proc.stderr.strip()[-500:]}")


def rng(seed: int | None = None) -> random.Random:
    """The module's random source: FAULTS_SEED fixes it, else a fresh seed (noted)."""
    return random.Random(
        seed if seed is not None else int(os.environ.get("FAULTS_SEED", "0")) or None
    )


def one_line_errors(stderr: str, needle: str) -> list[str]:
    """The stderr lines holding ``needle`` (the runner's one-line failure summaries)."""
    return [line for line in stderr.splitlines() if needle in line]
