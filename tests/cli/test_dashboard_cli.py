"""``python -m dashboard`` as a subprocess: it serves what the configuration
names, and refuses a bad configuration or database in one line."""

import json
import socket
import subprocess
import sys
import time
import urllib.request

from tests.helpers import REPO


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serves_the_configured_jobs_and_logs_each_request(cli):
    cli.crontab.configure(["BasicJob|1d", "TroubleJob|1d"])
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dashboard",
            f"--admin.conf={cli.crontab.ini}",
            "--port",
            str(port),
            "--crontabber.overdue_warning_seconds=60",
        ],
        env=cli.env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, body = time.monotonic() + 30, None
        while body is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/jobs", timeout=5) as resp:
                    body = json.load(resp)
            except OSError:
                time.sleep(0.2)
        assert body is not None, "the dashboard did not answer"
        assert [job["name"] for job in body["jobs"]] == ["basic-job", "trouble"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
            assert resp.headers["Content-Type"] == "text/html; charset=utf-8"
            assert 'data-job="trouble"' in resp.read().decode()
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert f"serving on http://127.0.0.1:{port}/" in stderr
    assert "dashboard.access: GET /api/jobs 200" in stderr


def test_a_bad_configuration_or_database_is_one_line(cli):
    cli.crontab.configure(["BasicJob|1d"])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dashboard",
            f"--admin.conf={cli.crontab.ini}",
            "--crontabber.overdue_warning_secondz=5",
        ],
        env=cli.env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("python -m dashboard: ") and done.stderr.count("\n") == 1
    assert "did you mean --crontabber.overdue_warning_seconds?" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "dashboard", f"--admin.conf={cli.crontab.ini}"],
        env={**cli.env, "RESOURCE_POSTGRESQL_PORT": "1"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "cannot use the state database" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "dashboard", f"--admin.conf={cli.crontab.ini}", "--refresh", "0"],
        env=cli.env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "--refresh" in done.stderr


def test_a_busy_port_and_a_misspelled_option_are_one_line_each(cli):
    """Trial #16: a busy port said only ``[Errno 98] Address already in use``; ``--prot``
    got no "did you mean"."""
    cli.crontab.configure(["BasicJob|1d"])
    argv = [sys.executable, "-m", "dashboard", f"--admin.conf={cli.crontab.ini}"]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [*argv, "--port", str(port)],
            env=cli.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"python -m dashboard: --host/--port: 127.0.0.1:{port} is already in "
        "use (another process listens there): --port N picks another, 0 any "
        "free one\n"
    )
    done = subprocess.run(
        [*argv, "--prot", "8100"], env=cli.env, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (
        1,
        "python -m dashboard: the command line: unrecognized argument '--prot' (did you mean "
        "--port?)\n",
    )
