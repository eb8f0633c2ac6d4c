"""What a job's error says is masked and made safe wherever it goes (issue #32 item 5, the
second security review's N2-N6): secrets in the database, every command, the dashboard and
every alert payload; control characters in every human output and log line; Slack markup; the
webhooks' redirects and answers; a malformed target address; the signed notice id."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys

import pytest

from tests.fixtures.alerting import alerts, make_due
from tests.fixtures.dashboard_data import dashboard  # noqa: F401 - the fixture
from tests.fixtures.receiver import Received, Receiver, receiver  # noqa: F401 - the fixture
from tests.fixtures.smtp import smtp_server  # noqa: F401 - the fixture
from tests.helpers import REPO

TOKEN = "Upstream-T0ken-8841"  # in UPSTREAM_TOKEN: a secret by its name
HOOK_TOKEN = "T0SECRETHOOKTOKEN"  # in the path of the Slack target's env: address
SIGNING = "s3cret-signing-key"
# the error a library might raise: a token, a password parameter, a URL's password, the webhook
SECRETS = (TOKEN, "hunter2xyz", "PwInUrl99", HOOK_TOKEN)
# a hostile batch key quoted by an error: retitle the terminal, clear it, C1 CSI, reorder it
ESCAPES = "boom \x1b]0;ERR-TITLE\x07 \x1b[2J \x9b31m \u202eevil | end"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def leaky(cli, receiver, error: str, targets: str | None = None) -> None:
    """LeakyJob fails with ``error``; alerts after 2 failures to a signed JSON hook, a Slack
    hook read from the environment (its token in the path) and PagerDuty."""
    cli.env.update(
        UPSTREAM_TOKEN=TOKEN,
        HOOK_SECRET=SIGNING,
        PD_KEY="pd-routing-key",
        HOOK_URL=f"{receiver.url}/slack/{HOOK_TOKEN}",
        LEAKY_ERROR=error,
    )
    if targets is None:
        targets = (
            f"        hook webhook {receiver.url}/hook secret_env=HOOK_SECRET\n"
            "        slack webhook env:HOOK_URL format=slack\n"
            f"        pd webhook {receiver.url}/pd format=pagerduty routing_key_env=PD_KEY\n"
        )
    cli.crontab.configure(["LeakyJob|1d"], extra=f"[alerts]\n    targets='''\n{targets}    '''\n")


def fail_twice(cli) -> list[str]:
    """The job fails by ``--job`` (its failure line), then by a tick (which alerts): their
    stdout and stderr."""
    first = cli.run("--job", "leaky")
    assert first.returncode == 5, first.stderr[-2000:]
    make_due(cli.crontab, "leaky")
    second = cli.run()
    assert second.returncode == 0, second.stderr[-2000:]
    return [first.stdout, first.stderr, second.stdout, second.stderr]


def shown(cli, *args: str) -> str:
    done = cli.run(*args)
    assert done.returncode in (0, 2), (args, done.stdout, done.stderr[-2000:])  # --nagios: 2
    return done.stdout + done.stderr


def found(texts: list[str], needles: tuple[str, ...]) -> list[tuple[int, str]]:
    """(which text, which needle) for each needle found."""
    return [(i, needle) for i, text in enumerate(texts) for needle in needles if needle in text]


def test_a_secret_in_a_job_error_is_masked_wherever_it_is_stored_or_shown(cli, receiver, dashboard):
    hook_url = f"{receiver.url}/slack/{HOOK_TOKEN}"
    leaky(
        cli,
        receiver,
        f"upstream said: key={TOKEN} password=hunter2xyz url=http://u:PwInUrl99@h.example/ "
        f"hook={hook_url}",
    )
    texts = fail_twice(cli)
    assert (
        "leaky: failed: RuntimeError: upstream said: key=*** password=*** "
        "url=http://u:***@h.example/" in texts[0]
    )
    assert len(receiver.wait("/hook", 1)) == 1 and len(receiver.at("/pd")) == 1
    assert len(receiver.at(f"/slack/{HOOK_TOKEN}")) == 1
    texts += [r.body.decode() for r in receiver.received]
    for args in (
        ("--show-error", "leaky"),
        ("--logs", "leaky"),
        ("--explain", "leaky"),
        ("--explain", "leaky", "--json"),
        ("--nagios",),
        ("--list-jobs",),
        ("--list-jobs", "--json"),
        ("--history", "leaky"),
        ("--history", "leaky", "--json"),
        ("--alerts",),
        ("--alerts", "--json"),
    ):
        texts.append(shown(cli, *args))
    texts += [
        repr(cli.crontab.sql(f"SELECT * FROM {table}"))
        for table in ("crontabber", "crontabber_log", "crontabber_alert", "crontabber_notice")
    ]
    dashboard.start()
    for path in ("/", "/api/jobs", "/api/alerts", "/jobs/leaky", "/api/jobs/leaky/history"):
        status, _, body = dashboard.get(path)
        assert status == 200, (path, body)
        texts.append(json.dumps(body) if not isinstance(body, str) else body)
    assert found(texts, SECRETS) == []
    assert "upstream said: key=*** password=***" in receiver.at("/hook")[0].json["message"]


def test_control_characters_are_escaped_in_every_human_output_and_log_line(cli, receiver):
    leaky(cli, receiver, ESCAPES)
    texts = fail_twice(cli)
    assert (
        r"leaky: failed: RuntimeError: boom \x1b]0;ERR-TITLE\x07 \x1b[2J \x9b31m \u202eevil"
        in texts[0]
    )
    assert r"leaky: about to fail: boom \x1b]0;ERR-TITLE\x07" in texts[1]  # the job's own log line
    assert r"leaky failed: RuntimeError: boom \x1b]0;" in texts[1]  # the runner's
    for args in (
        ("--explain", "leaky"),
        ("--nagios",),
        ("--alerts",),
        ("--show-error", "leaky"),
        ("--logs", "leaky"),
        ("--list-jobs",),
        ("--history", "leaky"),
    ):
        texts.append(shown(cli, *args))
    assert found(texts, RAW) == []
    nagios = texts[-6]
    assert (
        r"<class 'RuntimeError'> | boom \x1b]0;ERR-TITLE\x07 \x1b[2J \x9b31m \u202eevil / end"
        in nagios
    )
    # a summary, and a log line's traceback (DEBUG), escaped too; the traceback keeps its lines
    cli.env.update(LEAKY_ERROR="", LEAKY_SUMMARY=f"summed {ESCAPES}")
    done = cli.run("--job", "leaky", "--force", "--logging.level=DEBUG")
    assert done.returncode == 0, done.stderr[-2000:]
    assert r"leaky: ran (run 3): summed boom \x1b]0;ERR-TITLE\x07" in done.stdout
    assert found([done.stdout, done.stderr], RAW) == []
    cli.env.update(LEAKY_ERROR=ESCAPES)
    done = cli.run("--job", "leaky", "--force", "--logging.level=DEBUG")
    assert "Traceback (most recent call last):\n" in done.stderr
    assert found([done.stdout, done.stderr], RAW) == []


def test_slack_text_is_escaped(cli, receiver):  # noqa: F811
    leaky(cli, receiver, "batch missing/<!channel> <https://evil.example/fix|see runbook> & more")
    fail_twice(cli)
    (slack,) = receiver.wait(f"/slack/{HOOK_TOKEN}", 1)
    text = slack.json["text"]
    assert "&lt;!channel&gt; &lt;https://evil.example/fix|see runbook&gt; &amp; more" in text
    assert "<" not in text and ">" not in text
    # the plain webhook keeps the text as it is (its receiver escapes for its own medium)
    assert (
        "<!channel> <https://evil.example/fix|see runbook> & more"
        in receiver.at("/hook")[0].json["message"]
    )


@pytest.fixture
def internal():
    """Another local service: what a redirect would reach."""
    found = Receiver()
    yield found
    found.close()


def test_webhooks_follow_no_redirect_and_keep_only_a_short_status_line(cli, receiver, internal):
    receiver.answers["/redirect"] = (
        302,
        None,
        {"Location": f"{internal.url}/latest/meta-data/"},
        b"",
    )
    receiver.answers["/err"] = (
        500,
        None,
        {"Content-Type": "text/plain"},
        b"internal metadata: AKIA-SECRET-FROM-INTERNAL-SERVICE iam creds",
    )
    # the reason phrase is the answerer's text too: escaped, and cut short
    receiver.answers["/reason"] = (503, "\x1b]0;PWN\x07 " + "x" * 300, {}, b"")
    leaky(
        cli,
        receiver,
        "Trouble",
        targets=(
            f"        redir webhook {receiver.url}/redirect\n"
            f"        err webhook {receiver.url}/err\n"
            f"        reason webhook {receiver.url}/reason\n"
        ),
    )
    texts = fail_twice(cli)
    assert len(receiver.at("/redirect")) == 1 and len(receiver.at("/err")) == 1
    assert internal.received == []  # the redirect was not followed
    texts += [
        shown(cli, "--alerts"),
        shown(cli, "--alerts", "--json"),
        repr(cli.crontab.sql("SELECT * FROM crontabber_notice")),
    ]
    assert "redir (notice 1): not sent yet: HTTP 302: Found (a redirect: not followed)" in texts[-3]
    assert "err (notice 1): not sent yet: HTTP 500: Internal Server Error (1 attempt" in texts[-3]
    assert "reason (notice 1): not sent yet: HTTP 503: \\x1b]0;PWN\\x07 xxx" in texts[-3]
    assert "x" * 60 not in texts[-3]
    assert found(texts, ("AKIA-SECRET", "internal metadata", "\x1b", "\x07")) == []


def test_a_malformed_target_address_is_that_targets_error_not_a_crashed_tick(cli, receiver):
    cli.env["BAD_URL"] = "http://127.0.0.1:84x1/hook"
    cli.env["WORSE_URL"] = f"{receiver.url}/hook/{HOOK_TOKEN}\x01"
    targets = (
        "        a-bad webhook env:BAD_URL\n"
        "        a-worse webhook env:WORSE_URL\n"
        f"        b-good webhook {receiver.url}/good\n"
    )
    cli.crontab.configure(
        ["BasicJob|1d", "TroubleJob|1d"],
        extra=(f"    alert_after_failures=1\n[alerts]\n    targets='''\n{targets}    '''\n"),
    )
    done = cli.run("--test-alert", "basic-job")
    assert done.returncode == 5, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "to b-good: delivered" in done.stdout
    assert (
        "to a-bad: NOT delivered: environment variable BAD_URL (the address of a-bad) is not a "
        "valid URL (bad port)" in done.stdout
    )
    assert (
        "to a-worse: NOT delivered: environment variable WORSE_URL (the address of a-worse) holds "
        "a space or a control character" in done.stdout
    )
    tick = cli.run()  # TroubleJob fails: its alert goes to b-good, the tick ends normally
    assert tick.returncode == 0 and "Traceback" not in tick.stderr, tick.stderr[-2000:]
    assert len(receiver.wait("/good", 2)) == 2
    (failing,) = [a for a in alerts(cli.crontab) if a["kind"] == "failing"]
    assert failing["app_name"] == "trouble"
    assert found([done.stdout, done.stderr, tick.stdout, tick.stderr], (HOOK_TOKEN,)) == []


def _docs_receiver() -> dict:
    """The receiver's code of docs/alerts.md, run as written."""
    text = (REPO / "docs" / "alerts.md").read_text()
    (code,) = [
        block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "def genuine" in block
    ]
    scope: dict = {}
    exec(compile(code, "docs/alerts.md", "exec"), scope)  # noqa: S102 - our own documentation
    return scope


def test_the_notice_id_a_receiver_dedupes_on_is_signed(cli, receiver):  # noqa: F811
    leaky(
        cli,
        receiver,
        "Trouble",
        targets=f"        hook webhook {receiver.url}/hook secret_env=HOOK_SECRET\n",
    )
    fail_twice(cli)
    (sent,) = receiver.wait("/hook", 1)
    docs = _docs_receiver()
    key = docs["notice_key"](sent.headers, sent.body, SIGNING.encode())
    assert (
        key == sent.headers["X-Crontabber-Notice"] == f"{sent.json['alert']}.{sent.json['notice']}"
    )
    # a replay within the window under another notice header: the same key, so it is dropped
    replay = Received(sent.path, {**sent.headers, "X-Crontabber-Notice": "999.1"}, sent.body)
    assert docs["notice_key"](replay.headers, replay.body, SIGNING.encode()) == key
    # a body claiming another notice: not genuine
    forged = sent.body.replace(b'"notice": 1', b'"notice": 2')
    assert (
        forged != sent.body and docs["notice_key"](sent.headers, forged, SIGNING.encode()) is None
    )


def test_the_dashboards_log_escapes_a_requests_control_characters(cli):
    """The access line quotes the request's path, which the client chooses byte for byte."""
    cli.crontab.configure(["BasicJob|1d"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashboard", f"--admin.conf={cli.crontab.ini}", "--port", "0"],
        env=cli.env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = _stderr_until(proc, "serving on")
        port = int(re.search(r"serving on http://127\.0\.0\.1:(\d+)/", seen).group(1))
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            conn.sendall(b"GET /\x1b]0;PWN\x07\x9b2J HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while chunk := conn.recv(65536):  # all of it (HTTP/1.0: until closed): then it logs
                answer += chunk
            assert answer.startswith(b"HTTP/1.0 404 "), answer
        seen += _stderr_until(proc, "dashboard.access: GET ")
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert r"dashboard.access: GET /\x1b]0;PWN\x07\x9b2J " in seen, seen
    assert found([seen], RAW) == []


def _stderr_until(proc: subprocess.Popen, needle: str) -> str:
    """The process's stderr lines up to the first holding ``needle`` (waits for it)."""
    seen = ""
    while needle not in seen:
        line = proc.stderr.readline()
        assert line, seen  # the process ended first
        seen += line
    return seen


def test_a_password_in_a_webhook_address_is_refused_never_sent_stored_or_shown(cli, receiver):
    """The third review's N-3: ``user:password@`` in a target's address. Inline, the INI is
    refused at load (``--configtest`` and a tick, exit 1); from the environment,
    ``--configtest`` refuses it and a delivery is that target's error, without the address."""
    good = f"        b-good webhook {receiver.url}/good\n"
    inline = "        a-inline webhook http://hookuser:HookPassInline77@127.0.0.1/hook\n"
    cli.crontab.configure(
        ["BasicJob|1d"], extra=f"[alerts]\n    targets='''\n{inline}{good}    '''\n"
    )
    for args in (("--configtest",), ()):
        done = cli.run(*args)
        assert done.returncode == 1, (args, done.stdout, done.stderr[-2000:])
        assert (
            "target a-inline: the address holds user info (user:password@ before the host)"
            in done.stderr
        )
        assert found([done.stdout, done.stderr], ("HookPassInline77", "hookuser")) == []
    cli.env["USERINFO_URL"] = "http://envuser:EnvPassUrl55@127.0.0.1/x"
    cli.crontab.configure(
        ["BasicJob|1d"],
        extra=f"[alerts]\n    targets='''\n        a-env webhook env:USERINFO_URL\n{good}    '''\n",
    )
    configtest = cli.run("--configtest")
    assert configtest.returncode == 1
    assert (
        "environment variable USERINFO_URL (the address of a-env) holds user info"
        in configtest.stderr
    )
    done = cli.run("--test-alert", "basic-job")
    assert done.returncode == 5, done.stdout + done.stderr
    assert (
        "to a-env: NOT delivered: environment variable USERINFO_URL (the address of a-env) holds"
        in done.stdout
    )
    assert "to b-good: delivered" in done.stdout
    texts = [
        configtest.stdout,
        configtest.stderr,
        done.stdout,
        done.stderr,
        shown(cli, "--alerts", "--json"),
    ]
    texts.append(repr(cli.crontab.sql("SELECT * FROM crontabber_notice")))
    assert found(texts, ("EnvPassUrl55",)) == []


INI_SECRETS = ("IniTok3nZZ91", "IniPassw0rdQQ")
SUMMARY_SECRETS = ("SumPw4242", "SIGSIG123")


def test_a_jobs_secret_options_from_the_ini_and_its_summary_are_masked(cli, dashboard):
    """The third review's N-6: a secret-named job option set in the INI file, quoted by an
    error, and a success summary quoting a URL's password and a signed URL's signature."""
    cli.env["LEAKY_ERROR"] = "auth refused for {token} / {password}"
    section = (
        "    [[class-LeakyJob]]\n        upstream_token=IniTok3nZZ91\n        "
        "upstream_password=IniPassw0rdQQ\n"
    )
    cli.crontab.configure(["LeakyJob|1d"], extra=section)
    failed = cli.run("--job", "leaky")
    assert failed.returncode == 5, failed.stderr[-2000:]
    assert "leaky: failed: RuntimeError: auth refused for *** / ***" in failed.stdout
    texts = [failed.stdout, failed.stderr]
    for args in (
        ("--show-error", "leaky"),
        ("--nagios",),
        ("--nagios", "--json"),
        ("--list-jobs", "--json"),
    ):
        texts.append(shown(cli, *args))
    cli.env.update(
        LEAKY_ERROR="",
        LEAKY_SUMMARY="pushed to https://u:SumPw4242@h.example/p?X-Amz-Signature=SIGSIG123",
    )
    ran = cli.run("--job", "leaky", "--force")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert (
        "leaky: ran (run 2): pushed to https://u:***@h.example/p?X-Amz-Signature=***" in ran.stdout
    )
    texts += [ran.stdout, ran.stderr]
    for args in (("--history", "leaky"), ("--history", "leaky", "--json"), ("--logs", "leaky")):
        texts.append(shown(cli, *args))
    texts += [
        repr(cli.crontab.sql(f"SELECT * FROM {table}"))
        for table in ("crontabber", "crontabber_log")
    ]
    dashboard.start()
    for path in ("/", "/api/fleet", "/jobs/leaky", "/api/jobs/leaky/history"):
        status, _, body = dashboard.get(path)
        assert status == 200, (path, body)
        texts.append(json.dumps(body) if not isinstance(body, str) else body)
    assert found(texts, INI_SECRETS + SUMMARY_SECRETS) == []


def test_a_delivery_error_is_stored_and_shown_masked(cli, smtp_server):  # noqa: F811
    """The third review's N-3, second half: what a receiver answers is stored with the notice
    (``--alerts``, the dashboard) masked like a job's failure; here an SMTP server quoting the
    SMTP password in its refusal."""
    cli.env["ALERTS_SMTP_PASSWORD"] = "SmtpPassw0rd77"
    smtp_server.failures_left = 1
    smtp_server.failure_reply = "451 4.3.0 refused: SmtpPassw0rd77 is not welcome here"
    delivery = (
        f"    smtp_host=127.0.0.1\n    smtp_port={smtp_server.port}\n    "
        "smtp_from=cron@example.net\n"
    )
    targets = "    targets='''\n        oncall email ops@example.net\n    '''\n"
    cli.crontab.configure(["BasicJob|1d"], extra=f"[alerts]\n{targets}{delivery}")
    done = cli.run("--test-alert", "basic-job")
    assert done.returncode == 5, done.stdout + done.stderr
    assert (
        "to oncall: NOT delivered: SMTP 451: 4.3.0 refused: *** is not welcome here" in done.stdout
    )
    texts = [done.stdout, done.stderr, shown(cli, "--alerts"), shown(cli, "--alerts", "--json")]
    texts.append(repr(cli.crontab.sql("SELECT * FROM crontabber_notice")))
    assert "refused: *** is not welcome here" in texts[-1]
    assert found(texts, ("SmtpPassw0rd77",)) == []
