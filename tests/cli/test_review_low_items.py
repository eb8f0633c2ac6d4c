"""The second security review's low items on the upload pipeline's edges (issue #33 item 5),
through the real entry points: ``--configtest`` never prints an inline webhook's token (I-2),
and the dashboard never trusts a user header anyone can send (I-3)."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time

from tests.helpers import REPO

TOKEN = "InlineSecretToken999"


def test_configtest_masks_the_path_of_an_inline_webhook_address(cli):
    cli.crontab.configure(
        ["BasicJob|1d"],
        extra=(
            "[alerts]\n    targets='''\n"
            f"        ops webhook https://hooks.slack.com/services/T000/B000/{TOKEN} format=slack\n"
            "        hook webhook http://127.0.0.1:9/\n    '''\n"
        ),
    )
    done = cli.run("--configtest")
    assert done.returncode == 0, done.stdout + done.stderr
    assert TOKEN not in done.stdout + done.stderr
    assert "ops webhook https://hooks.slack.com/*** format=slack" in done.stdout
    assert "hook webhook http://127.0.0.1:9/" in done.stdout  # nothing to hide: as it is


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_trusted_user_header_needs_a_loopback_address(cli):
    cli.crontab.configure(["BasicJob|1d"])
    env = {**cli.env, "DASHBOARD_TRUSTED_USER_HEADER": "X-Forwarded-User"}
    for host in ("0.0.0.0", "::", "10.1.2.3"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "dashboard",
                f"--admin.conf={cli.crontab.ini}",
                "--host",
                host,
                "--port",
                "0",
            ],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert (
            f"DASHBOARD_TRUSTED_USER_HEADER trusts a header anyone can send to {host}"
            in done.stderr
        )


def test_an_underscore_header_never_stands_for_the_trusted_one(cli):
    """wsgiref maps ``X-Forwarded_User`` and ``X-Forwarded-User`` to one variable: the first
    must not authenticate anyone."""
    cli.crontab.configure(["BasicJob|1d"])
    port = _free_port()
    env = {**cli.env, "DASHBOARD_TRUSTED_USER_HEADER": "X-Forwarded-User"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashboard", f"--admin.conf={cli.crontab.ini}", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def status(header: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/jobs", headers={header: "mallory"})
        answer = conn.getresponse()
        answer.read()
        conn.close()
        return answer.status

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert status("X-Forwarded-User") == 200
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        assert status("X-Forwarded_User") == 401
        assert status("X_Forwarded_User") == 401
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_wildcard_listening_address_is_no_allowed_host():
    from dashboard.app import Guard

    guard = Guard(allowed_hosts=["localhost"], token="", user_header="")
    guard.allow_host("0.0.0.0")
    guard.allow_host("::")
    guard.allow_host("127.0.0.1")
    assert guard.allowed_hosts == {"localhost", "127.0.0.1"}
