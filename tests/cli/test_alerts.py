"""Alerts through the real runner, the real PostgreSQL and a real local HTTP receiver: each
rule (failures in a row, recovery, silence, takeover, re-alert, muted while paused), the
webhook formats and signature, delivery retries, a dead host's claim, exactly once across
concurrent ticks, --alerts and --test-alert, and what an idle tick costs."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest

from crontabber.store import StateStore
from tests.fixtures.alerting import alerts, alerts_ini, make_due
from tests.fixtures.receiver import receiver  # noqa: F401 - the fixture
from tests.fixtures.smtp import smtp_server  # noqa: F401 - the fixture
from tests.fixtures.waiting import wait_for
from tests.helpers import REPO

HOUR = dt.timedelta(hours=1)
SECRET = "s3cret-hook-key"


def fail_twice(crontab):
    """TroubleJob failed twice in a row (two ticks, the retry wait over)."""
    for _ in range(2):
        code, out = crontab.run()
        assert code == 0, out
        make_due(crontab)


def notices(crontab) -> list[dict]:
    return crontab.sql("SELECT * FROM crontabber_notice ORDER BY id")


@pytest.fixture
def secret(monkeypatch):
    monkeypatch.setenv("HOOK_SECRET", SECRET)


def test_failures_in_a_row_alert_once_realert_and_recover(crontab, receiver, secret):
    crontab.configure(["TroubleJob|1d"], extra=alerts_ini(receiver))
    code, out = crontab.run()  # one failure: below alert_after_failures (2)
    assert code == 0 and receiver.received == []
    make_due(crontab)
    assert crontab.run()[0] == 0
    (hook,) = receiver.at("/hook")
    (slack,) = receiver.at("/slack")
    (alert,) = alerts(crontab)
    assert alert["kind"] == "failing" and alert["resolved_at"] is None
    body = hook.json
    assert (body["alert"], body["notice"], body["job"], body["kind"]) == (
        alert["id"],
        1,
        "trouble",
        "failing",
    )
    assert "failed 2 times in a row; last: NameError: Trouble!!" in body["message"]
    assert hook.signed_with(SECRET) and not hook.signed_with("another key")
    assert hook.headers["X-Crontabber-Notice"] == f"{alert['id']}.1"
    assert slack.json == {"text": f":red_circle: {body['message']}"}
    assert "X-Crontabber-Signature" not in slack.headers  # no secret_env: unsigned

    make_due(crontab)
    assert crontab.run()[0] == 0  # a third failure: the same streak, nothing new
    assert len(receiver.received) == 2 and len(alerts(crontab)) == 1

    crontab.sql("UPDATE crontabber_alert SET next_notice = now() - interval '1 second'")
    assert crontab.run()[0] == 0  # still failing, its re-alert is due
    assert [r.json["notice"] for r in receiver.at("/hook")] == [1, 2]
    assert receiver.at("/hook")[1].headers["X-Crontabber-Notice"] == f"{alert['id']}.2"
    assert crontab.run()[0] == 0  # the next re-alert is 4 h away
    assert len(receiver.at("/hook")) == 2

    code, out = crontab.run("--mark-success", "trouble", "--reason", "fixed by hand")
    assert code == 0, out
    assert crontab.run()[0] == 0
    failing, recovered = alerts(crontab)
    assert failing["resolved_at"] is not None
    assert recovered["kind"] == "recovered" and recovered["subject"] == str(failing["id"])
    last = receiver.at("/hook")[-1].json
    assert last["kind"] == "recovered"  # by an operator's mark, which it says (not "succeeded at")
    assert last["message"].startswith("trouble: recovered (marked successful by ")
    assert last["detail"]["resolves"]["kind"] == "failing"
    assert crontab.run()[0] == 0 and len(receiver.at("/hook")) == 3  # recovered once


def test_a_paused_job_is_muted_until_it_resumes(crontab, receiver, secret):
    crontab.configure(["TroubleJob|1d"], extra=alerts_ini(receiver))
    fail_twice(crontab)
    assert len(receiver.at("/hook")) == 1
    crontab.sql("DELETE FROM crontabber_alert")
    code, out = crontab.run("--pause", "trouble", "--reason", "known outage", "--until", "2h")
    assert code == 0, out
    assert crontab.run()[0] == 0
    assert len(receiver.at("/hook")) == 1 and alerts(crontab) == []
    assert crontab.run("--resume", "trouble")[0] == 0
    assert crontab.run()[0] == 0  # failing still: it alerts now
    assert len(receiver.at("/hook")) == 2


def test_the_job_rules_override_the_defaults_and_choose_targets(crontab, receiver, secret):
    rules = (
        "    alert_after_failures=5\n    [[class-TroubleJob]]\n        alert_after_failures=1\n    "
        "    alert_to=slack\n"
    )
    crontab.configure(["TroubleJob|1d"], extra=alerts_ini(receiver, rules))
    assert crontab.run()[0] == 0
    assert len(receiver.at("/slack")) == 1 and receiver.at("/hook") == []


def test_a_job_blocked_for_longer_than_its_silence_alerts_with_the_blocker(
    crontab, receiver, secret
):
    crontab.configure(
        ["TroubleJob|1d", "SadJob|1d"], extra=alerts_ini(receiver, "    alert_after_failures=0\n")
    )
    crontab.sql(
        "INSERT INTO crontabber (app_name, next_run, first_run, last_run, last_success, "
        "error_count, depends_on, last_error) VALUES ('sad', now() - interval '2 hours', "
        "now() - interval '3 days', now() - interval '1 day', now() - interval '1 day', 0, "
        "'{trouble}', '{}')"
    )
    assert crontab.run()[0] == 0  # trouble fails: sad waits for it, two hours after it was due
    (alert,) = alerts(crontab, "sad")
    assert alert["kind"] == "silent"
    (hook,) = receiver.at("/hook")
    message = hook.json["message"]
    assert message.startswith("sad: has not run since it was due at ") and " ago" not in message
    assert "--explain says:" in message and "trouble" in message
    assert crontab.run()[0] == 0 and len(receiver.at("/hook")) == 1  # once


def test_a_failed_delivery_is_retried_and_shown(crontab, receiver, secret):
    crontab.configure(["TroubleJob|1d"], extra=alerts_ini(receiver, "    alert_after_failures=1\n"))
    receiver.failures_left = 2  # both targets' first attempt
    assert crontab.run()[0] == 0
    assert receiver.received == []
    code, out = crontab.run("--alerts")
    assert code == 0, out
    assert "alert 1  failing  trouble  open" in out
    assert (
        "hook (notice 1): not sent yet: HTTP 500: receiver told to fail (1 attempt; next attempt"
        in out
    )
    assert crontab.run()[0] == 0  # the retry waits 30 s
    assert receiver.received == []
    crontab.sql("UPDATE crontabber_notice SET next_attempt = now()")
    assert crontab.run()[0] == 0
    assert len(receiver.at("/hook")) == 1 and len(receiver.at("/slack")) == 1
    code, out = crontab.run("--alerts", "--json")
    (row,) = json.loads(out)
    assert [(n["target"], n["attempts"], n["sent_at"] is not None) for n in row["notices"]] == [
        ("hook", 2, True),
        ("slack", 2, True),
    ]
    code, out = crontab.run("--alerts")
    assert "hook (notice 1): sent 20" in out


def test_delivery_gives_up_after_max_attempts(crontab, receiver, secret):
    crontab.configure(
        ["TroubleJob|1d"],
        extra=alerts_ini(
            receiver,
            "    alert_after_failures=1\n",
            f"        hook webhook {receiver.url}/hook\n",
            "    max_attempts=1\n",
        ),
    )
    receiver.failures_left = 1
    assert crontab.run()[0] == 0
    crontab.sql("UPDATE crontabber_notice SET next_attempt = now()")
    assert crontab.run()[0] == 0
    assert receiver.received == []
    code, out = crontab.run("--alerts")
    assert "hook (notice 1): NOT SENT, given up: HTTP 500: receiver told to fail (1 attempt)" in out


def test_a_claim_left_by_a_dead_host_is_sent_once_it_expires(crontab, receiver, secret):
    crontab.configure(
        ["TroubleJob|1d"],
        extra=alerts_ini(
            receiver, "    alert_after_failures=1\n", f"        hook webhook {receiver.url}/hook\n"
        ),
    )
    receiver.failures_left = 1
    assert crontab.run()[0] == 0  # opened; the send failed
    # a host claimed it for its retry and was killed before sending: its claim holds ...
    crontab.sql(
        "UPDATE crontabber_notice SET claimed_by = 'dead-host:4242', next_attempt = now(), "
        "claim_until = now() + interval '1 hour', last_error = NULL"
    )
    assert crontab.run()[0] == 0
    assert receiver.received == []
    # ... until it expires: then the next tick of any host sends it
    crontab.sql("UPDATE crontabber_notice SET claim_until = now() - interval '1 second'")
    assert crontab.run()[0] == 0
    assert len(receiver.at("/hook")) == 1
    (notice,) = notices(crontab)
    assert notice["sent_by"] and notice["sent_by"] != "dead-host:4242"


def test_concurrent_ticks_open_and_send_each_alert_once(cli, receiver, secret):
    crontab = cli.crontab
    crontab.configure(["TroubleJob|1d"], extra=alerts_ini(receiver, targets=""))
    fail_twice(crontab)  # two failures while no target was configured: no alert yet
    crontab.sql("UPDATE crontabber SET next_run = now() + interval '1 hour'")  # not due now
    crontab.configure(["TroubleJob|1d"], extra=alerts_ini(receiver))
    cli.env["HOOK_SECRET"] = SECRET
    ticks = [cli.spawn(host=f"host-{i}") for i in range(6)]
    for tick in ticks:
        _, err = tick.communicate(timeout=60)
        assert tick.returncode == 0, err
    assert len(alerts(crontab)) == 1
    assert len(receiver.wait("/hook", 1)) == 1 and len(receiver.at("/slack")) == 1
    assert {n["sent_by"].split(":")[0] for n in notices(crontab)} <= {f"host-{i}" for i in range(6)}


def test_a_takeover_of_a_dead_run_alerts(cli, receiver, secret):
    crontab = cli.crontab
    extra = alerts_ini(receiver, targets=f"        hook webhook {receiver.url}/hook\n")
    crontab.configure(["SlowJob|1d"], extra=f"    [[class-SlowJob]]\n        sleep=30\n{extra}")
    holder = cli.spawn()
    wait_for(lambda: crontab.calls("slow-job"))
    run_id = crontab.state("slow-job").run_id
    holder.kill()
    holder.communicate(timeout=20)
    crontab.configure(["SlowJob|1d"], extra=f"    [[class-SlowJob]]\n        sleep=0\n{extra}")
    crontab.wind(dt.timedelta(days=2), "slow-job")
    done = cli.run()
    assert done.returncode == 0, done.stderr
    (hook,) = receiver.wait("/hook", 1)
    body = hook.json
    assert body["kind"] == "takeover" and body["subject"] == f"run {run_id}"
    assert f"(run {run_id}, started " in body["message"] and f":{holder.pid}" in body["message"]


def test_test_alert_reaches_each_target_and_says_which_failed(
    crontab, receiver, secret, monkeypatch
):
    monkeypatch.setenv("PD_KEY", "pd-routing-key")
    targets = (
        f"        hook webhook {receiver.url}/hook secret_env=HOOK_SECRET\n"
        f"        pd webhook {receiver.url}/pd format=pagerduty routing_key_env=PD_KEY\n"
    )
    crontab.configure(["BasicJob|1d"], extra=alerts_ini(receiver, targets=targets))
    code, out = crontab.run("--test-alert", "basic-job")
    assert code == 0, out
    assert "basic-job: test alert 1 to hook: delivered" in out and "to pd: delivered" in out
    assert receiver.at("/hook")[0].json["kind"] == "test"
    event = receiver.at("/pd")[0].json
    assert (event["routing_key"], event["event_action"]) == ("pd-routing-key", "trigger")
    assert event["dedup_key"].startswith("crontabber/basic-job/test/")
    assert event["payload"]["severity"] == "info" and event["payload"]["component"] == "basic-job"
    receiver.failures_left = 1
    code, out = crontab.run("--test-alert", "basic-job")
    assert code == 5
    assert "NOT delivered: HTTP 500: receiver told to fail" in out


def test_bad_targets_are_refused_by_name(crontab, receiver):
    crontab.configure(
        ["BasicJob|1d"], extra=alerts_ini(receiver, targets="        hook pager a@b\n")
    )
    code, out = crontab.run("--configtest")
    assert code == 1 and "alerts.targets" in out and "unknown kind 'pager'" in out
    crontab.configure(
        ["BasicJob|1d"],
        extra=alerts_ini(
            receiver, targets="        pd webhook https://x.example format=pagerduty\n"
        ),
    )
    code, out = crontab.run("--configtest")
    assert code == 1 and "format=pagerduty needs routing_key_env" in out
    crontab.configure(["BasicJob|1d"])
    code, out = crontab.run("--test-alert", "basic-job")
    assert code == 1 and "no alert targets" in out


def count_statements(crontab, monkeypatch) -> int:
    """Statements an in-process tick sends to PostgreSQL."""
    counted = []
    real = StateStore._cursor

    class Counting:
        def __init__(self, cursor):
            self.cursor = cursor

        def __enter__(self):
            self.cursor.__enter__()
            return self

        def __exit__(self, *exc):
            return self.cursor.__exit__(*exc)

        def execute(self, *args, **kwargs):
            counted.append(args[0])
            return self.cursor.execute(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.cursor, name)

    monkeypatch.setattr(StateStore, "_cursor", lambda self: Counting(real(self)))
    assert crontab.run()[0] == 0
    monkeypatch.setattr(StateStore, "_cursor", real)
    return len(counted)


def test_an_idle_tick_costs_one_statement_more_with_alerts(crontab, receiver, monkeypatch):
    crontab.configure(["BasicJob|1d"])
    assert crontab.run()[0] == 0  # it ran: the next ticks are idle
    without = count_statements(crontab, monkeypatch)
    crontab.configure(
        ["BasicJob|1d"],
        extra=alerts_ini(receiver, targets=f"        hook webhook {receiver.url}/h\n"),
    )
    with_alerts = count_statements(crontab, monkeypatch)
    assert with_alerts == without + 1
    assert receiver.received == []


def test_email_alerts_go_through_a_real_smtp_server_and_recoveries_thread(crontab, smtp_server):
    targets = "        oncall email oncall@example.net,dev@example.net\n"
    delivery = (
        f"    smtp_host=127.0.0.1\n    smtp_port={smtp_server.port}\n    "
        "smtp_from=crontabber@symbols.example.net\n"
    )
    crontab.configure(
        ["TroubleJob|1d"], extra=alerts_ini(None, "    alert_after_failures=1\n", targets, delivery)
    )
    smtp_server.failures_left = 1  # a temporary failure: retried
    assert crontab.run()[0] == 0
    assert smtp_server.mails == []
    code, out = crontab.run("--alerts")
    assert "oncall (notice 1): not sent yet: SMTP 451: 4.3.0 told to fail" in out
    crontab.sql("UPDATE crontabber_notice SET next_attempt = now()")
    assert crontab.run()[0] == 0
    (mail,) = smtp_server.wait(1)
    (alert,) = alerts(crontab)
    assert mail.sender == "crontabber@symbols.example.net"
    assert mail.recipients == ["oncall@example.net", "dev@example.net"]
    message = mail.message
    assert message["Subject"].startswith(
        "[crontabber] failing: trouble: trouble: failed 1 time in a row"
    )
    assert message["Message-ID"] == f"<crontabber.{alert['id']}.1@symbols.example.net>"
    assert message["X-Crontabber-Notice"] == f"{alert['id']}.1"
    assert "NameError: Trouble!!" in message.get_content()
    assert crontab.run("--mark-success", "trouble", "--reason", "fixed")[0] == 0
    assert crontab.run()[0] == 0
    _, recovered = smtp_server.wait(2)
    assert recovered.message["Subject"].startswith("[crontabber] recovered: trouble")
    assert recovered.message["In-Reply-To"] == message["Message-ID"]


def test_an_email_target_needs_an_smtp_server(crontab):
    crontab.configure(
        ["BasicJob|1d"], extra=alerts_ini(None, targets="        oncall email a@b.example\n")
    )
    code, out = crontab.run("--configtest")
    assert code == 1 and "alerts.smtp_host" in out and "oncall needs an SMTP server" in out


def test_a_maintenance_window_mutes_alerts_but_not_the_job(crontab, receiver, secret):
    crontab.configure(["TroubleJob|1d"], extra=alerts_ini(receiver, "    alert_after_failures=1\n"))
    code, out = crontab.run("--mute", "trouble", "--until", "1h")
    assert code == 1 and "--mute: needs --reason" in out
    code, out = crontab.run(
        "--mute", "trouble", "--until", "1h", "--reason", "migrating the bucket"
    )
    assert code == 0 and "trouble's alerts muted until" in out and "the job still runs" in out
    assert crontab.run()[0] == 0
    assert len(crontab.calls("trouble")) == 1  # it ran ...
    assert receiver.received == [] and alerts(crontab) == []  # ... and nobody was told
    code, out = crontab.run("--alerts")
    assert "muted: trouble until 20" in out and "migrating the bucket" in out
    assert crontab.run("--unmute", "trouble")[0] == 0
    assert crontab.run()[0] == 0
    assert len(receiver.at("/hook")) == 1
    code, out = crontab.run("--audit")
    assert "mute trouble  why: migrating the bucket" in out and "unmute trouble" in out


def test_muting_all_covers_every_job(crontab, receiver, secret):
    crontab.configure(["TroubleJob|1d"], extra=alerts_ini(receiver, "    alert_after_failures=1\n"))
    assert crontab.run("--mute", "all", "--reason", "maintenance")[0] == 0
    assert crontab.run()[0] == 0 and receiver.received == []
    assert crontab.run("--unmute", "all")[0] == 0
    assert crontab.run()[0] == 0 and len(receiver.at("/hook")) == 1


def test_an_interval_past_its_deadline_alerts_and_shows_in_nagios_and_metrics(
    crontab, receiver, secret, tmp_path
):
    rules = (
        "    alert_after_failures=0\n    alert_silence=0\n    [[class-SadJob]]\n        "
        "deadline=30m\n"
    )
    crontab.configure(["TroubleJob|1d", "SadJob|1h"], extra=alerts_ini(receiver, rules))
    # sad last succeeded 3 hours ago: its next interval (2 hours ago) is 90 minutes past its
    # 30-minute deadline; it cannot run: its parent fails
    crontab.sql(
        "INSERT INTO crontabber (app_name, next_run, first_run, last_run, last_success, "
        "error_count, depends_on, last_error) VALUES ('sad', now() - interval '2 hours', "
        "now() - interval '3 days', now() - interval '3 hours', now() - interval '3 hours', 0, "
        "'{trouble}', '{}')"
    )
    metrics = tmp_path / "crontabber.prom"
    assert crontab.run(f"--metrics-file={metrics}")[0] == 0
    (alert,) = alerts(crontab, "sad")
    assert alert["kind"] == "late" and alert["subject"].startswith("interval ")
    (hook,) = receiver.at("/hook")
    message = hook.json["message"]
    assert message.startswith("sad: the interval of ") and "was not done by its deadline" in message
    assert "--explain says:" in message and "trouble" in message
    assert 'crontabber_job_deadline_missed{job="sad"} 1' in metrics.read_text()
    assert 'crontabber_job_deadline_missed{job="trouble"} 0' in metrics.read_text()
    code, out = crontab.run("--nagios")
    assert code == 2 and "sad: the interval of" in out  # CRITICAL: trouble fails
    # the interval gets done: the alert ends, with a recovery
    crontab.sql(
        "UPDATE crontabber SET last_success = now(), next_run = now() + interval '1 hour' WHERE "
        "app_name = 'sad'"
    )
    assert crontab.run(f"--metrics-file={metrics}")[0] == 0
    assert alerts(crontab, "sad")[0]["resolved_at"] is not None
    assert receiver.at("/hook")[-1].json["kind"] == "recovered"
    assert 'crontabber_job_deadline_missed{job="sad"} 0' in metrics.read_text()
    code, out = crontab.run("--nagios")
    assert "sad: the interval of" not in out


def test_a_job_without_a_deadline_is_never_late(crontab, receiver, secret):
    crontab.configure(
        ["TroubleJob|1d", "SadJob|1h"],
        extra=alerts_ini(receiver, "    alert_after_failures=0\n    alert_silence=0\n"),
    )
    crontab.sql(
        "INSERT INTO crontabber (app_name, next_run, first_run, last_run, last_success, "
        "error_count, depends_on, last_error) VALUES ('sad', now() - interval '2 hours', "
        "now() - interval '3 days', now() - interval '3 hours', now() - interval '3 hours', 0, "
        "'{trouble}', '{}')"
    )
    assert crontab.run()[0] == 0
    assert alerts(crontab) == [] and receiver.received == []
    code, out = crontab.run("--nagios")
    assert "the interval of" not in out


def test_an_idle_tick_with_alerts_does_not_load_the_rules(cli, receiver):
    """The sweep finds nothing and no job fails or is late: the rules' modules (their
    dataclasses cost a tick milliseconds) are never imported."""
    targets = f"        hook webhook {receiver.url}/h\n"
    cli.crontab.configure(["BasicJob|1d"], extra=alerts_ini(receiver, targets=targets))
    assert cli.run().returncode == 0  # runs BasicJob: the next tick is idle
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['crontabber', '--admin.conf={cli.crontab.ini}']\n"
        "try:\n    runpy.run_module('crontabber', run_name='__main__')\n"
        "except SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "print(' '.join(m for m in ('crontabber.alerts.alerter', 'crontabber.alerts.rules', "
        "'crontabber.explain', 'urllib.request', 'smtplib') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=cli.env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "1 skipped" in done.stderr
    assert done.stdout.split() == []
    cli.crontab.sql("UPDATE crontabber SET error_count = 1")  # a failing job: now it reads them
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=cli.env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "crontabber.alerts.rules" in done.stdout.split()
