"""Job errors reach Sentry (a local HTTP server stands in for the Sentry endpoint:
sentry-sdk itself runs for real and sends its envelope over HTTP)."""

import datetime as dt
import gzip
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent


class _Collector(http.server.BaseHTTPRequestHandler):
    bodies: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        type(self).bodies.append((self.path, body.decode("utf-8", "replace")))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def sentry_server():
    _Collector.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://public@127.0.0.1:{server.server_address[1]}/42", _Collector.bodies
    server.shutdown()
    server.server_close()  # the listening socket (a ResourceWarning otherwise)


def test_job_error_is_sent_to_sentry_and_still_recorded(crontab, sentry_server):
    """The job runs in a child process of the runner, which reports its exception
    (with the traceback) and logs the event's reference on stderr."""
    dsn, bodies = sentry_server
    crontab.configure(["TroubleJob|1d", "BasicJob|1d"])
    done = subprocess.run(
        [sys.executable, "-m", "crontabber", f"--admin.conf={crontab.ini}", f"--sentry.dsn={dsn}"],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert crontab.state("trouble").error_count == 1
    assert len(crontab.calls("basic-job")) == 1
    events = [body for path, body in bodies if path.startswith("/api/42/")]
    assert len(events) == 1
    assert (
        "NameError" in events[0]
        and "Trouble!!" in events[0]
        and '"job":"trouble"' in events[0].replace(" ", "")
    )
    assert "Error captured in Sentry. Reference:" in done.stderr


def test_unreachable_sentry_never_breaks_the_run(crontab):
    crontab.configure(["TroubleJob|1d", "BasicJob|1d"])
    assert crontab.run("--sentry.dsn=http://public@127.0.0.1:1/42")[0] == 0
    assert crontab.state("trouble").error_count == 1
    assert len(crontab.calls("basic-job")) == 1


def test_sentrytest(crontab, sentry_server):
    dsn, bodies = sentry_server
    code, out = crontab.run("--sentrytest")
    assert code == 1 and "sentry.dsn is not configured" in out
    code, out = crontab.run("--sentrytest", f"--sentry.dsn={dsn}")
    assert code == 0 and "Sentry test message sent" in out
    assert any("Sentry test sent from crontabber" in body for _, body in bodies)


def test_no_secret_reaches_sentry_from_a_jobs_local_variables(crontab, sentry_server):
    """Locals are sent (they make an event worth reading) but no secret in them (issue #24
    item 3): the config object's repr, a dict key, a URL's password, all masked."""
    dsn, bodies = sentry_server
    db_secret, es_secret = "Db-Secret-9137", "Es-Secret-5521"
    crontab.configure(["SecretsInLocalsJob|1d"])
    done = subprocess.run(
        [sys.executable, "-m", "crontabber", f"--admin.conf={crontab.ini}", f"--sentry.dsn={dsn}"],
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "JOB_DATABASE_PASSWORD": db_secret,
            "JOB_ES_PASSWORD": es_secret,
        },
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    events = [body for path, body in bodies if path.startswith("/api/42/")]
    assert len(events) == 1 and "cannot reach db" in events[0]
    assert '"vars"' in events[0] and "database_hostname" in events[0]  # locals are sent
    assert db_secret not in events[0] and es_secret not in events[0]
    assert "http://elastic:***@127.0.0.1:9200/" in events[0]


def _checkins(bodies):
    """The check-in payloads of the envelopes received, in order."""
    import json

    found = []
    for _, body in bodies:
        lines = body.splitlines()
        for header, payload in zip(lines, lines[1:]):
            if header.startswith("{") and json.loads(header).get("type") == "check_in":
                found.append(json.loads(payload))
    return found


def test_sentry_crons_check_ins_frame_each_run_with_the_monitor_from_the_schedule(
    crontab, sentry_server
):
    dsn, bodies = sentry_server
    crontab.configure(
        ["BasicJob|1d|03:00", "TroubleJob|2h"],
        extra="    jitter=10m\n    [[class-TroubleJob]]\n        timeout=90\n",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "crontabber",
            f"--admin.conf={crontab.ini}",
            f"--sentry.dsn={dsn}",
            "--sentry.crons=True",
            "--job",
            "basic-job",
            "--force",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    started, ended = _checkins(bodies)
    assert (started["monitor_slug"], started["status"]) == ("basic-job", "in_progress")
    assert started["monitor_config"]["schedule"] == {"type": "crontab", "value": "0 3 * * *"}
    from crontabber.scheduling import jitter_offset

    offset = jitter_offset("basic-job", dt.timedelta(minutes=10))
    assert started["monitor_config"]["checkin_margin"] == 5 + int(offset.total_seconds() // 60)
    assert (ended["status"], ended["check_in_id"]) == ("ok", started["check_in_id"])
    assert ended["duration"] > 0
    bodies.clear()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "crontabber",
            f"--admin.conf={crontab.ini}",
            f"--sentry.dsn={dsn}",
            "--sentry.crons=True",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    trouble = [c for c in _checkins(bodies) if c["monitor_slug"] == "trouble"]
    assert [c["status"] for c in trouble] == ["in_progress", "error"]
    config = trouble[0]["monitor_config"]
    assert config["schedule"] == {"type": "interval", "value": 2, "unit": "hour"}
    assert (config["max_runtime"], config["failure_issue_threshold"]) == (2, 2)


def test_without_crons_no_check_in_is_sent(crontab, sentry_server):
    dsn, bodies = sentry_server
    crontab.configure(["BasicJob|1d"])
    assert crontab.run(f"--sentry.dsn={dsn}")[0] == 0
    assert _checkins(bodies) == []
