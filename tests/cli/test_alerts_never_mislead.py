"""Alerts that never mislead (issue #32, items 1-4; on-call trial 4, #1, #11, #12, #8): a
new failure streak supersedes the old alert, never "recovered" after it; a SIGTERM stops a
run without counting as a failure; a --mark-success is an operator's mark everywhere, the
recovery alert included; a test to PagerDuty resolves what it triggers and is tried once;
--configtest checks the variables the targets name. The real entry point as a subprocess,
the real PostgreSQL, a real local HTTP receiver."""

from __future__ import annotations

import json
import signal

from tests.fixtures.alerting import configure_alerts, make_due, not_due
from tests.fixtures.dashboard_data import Dashboard
from tests.fixtures.receiver import receiver  # noqa: F401 - the fixture
from tests.fixtures.waiting import wait_for
from tests.helpers import ok


def test_a_success_then_a_new_streak_supersedes_the_alert_in_order(cli, receiver):
    """Trial #1: the old alert ends before the new one opens, and nothing says "recovered"
    while the job is failing."""
    configure_alerts(
        cli, receiver, ["ChattyJob|1d"], "    [[class-ChattyJob]]\n        fail=True\n"
    )
    ok(cli.run())
    make_due(cli.crontab, "chatty")
    ok(cli.run())  # a second failure: alert A
    (first,) = receiver.at("/slack")
    assert first.json["text"].startswith(":red_circle: chatty: failed 2 times in a row")
    # between two evaluations: on-call fixes it by hand (a success), then it fails twice more
    ok(
        cli.run(
            "--job",
            "chatty",
            "--force",
            "--reason",
            "feed fixed",
            "--crontabber.class-ChattyJob.fail=False",
        )
    )
    for _ in range(2):
        assert cli.run("--job", "chatty", "--force", "--reason", "retry").returncode == 5
    not_due(cli.crontab, "chatty")
    ok(cli.run())  # the next tick evaluates

    texts = [r.json["text"] for r in receiver.at("/slack")]
    assert len(texts) == 3, texts
    old_id, new_id = (
        a["id"]
        for a in cli.crontab.sql(
            "SELECT id FROM crontabber_alert WHERE kind = 'failing' ORDER BY id"
        )
    )
    assert texts[1].startswith(
        f":repeat: chatty: alert {old_id} superseded by alert {new_id}: it succeeded at "
    )
    assert "then failed again (2 times in a row now)" in texts[1]
    assert texts[2].startswith(":red_circle: chatty: failed 2 times in a row")
    assert f"(supersedes alert {old_id})" in texts[2]
    assert not any("recovered" in text for text in texts)
    kinds = [r.json["kind"] for r in receiver.at("/hook")]
    assert kinds == ["failing", "superseded", "failing"]
    assert receiver.at("/hook")[1].json["detail"]["resolves"]["id"] == old_id
    # PagerDuty: the old incident resolved, then the new one triggered
    events = [(e.json["event_action"], e.json["dedup_key"]) for e in receiver.at("/pd")]
    assert [action for action, _ in events] == ["trigger", "resolve", "trigger"]
    assert events[1][1] == events[0][1] != events[2][1]
    ok(cli.run())
    assert len(receiver.at("/slack")) == 3  # told once


def test_a_sigterm_stops_a_run_without_counting_a_failure(cli, receiver):
    """Trial #11: a deploy's SIGTERM is "stopped by signal", pages nobody, and the next tick
    runs the job again."""
    rules = "    alert_after_failures=1\n    [[class-SlowJob]]\n        sleep=30\n"
    configure_alerts(cli, receiver, ["SlowJob|1d"], rules)
    tick = cli.spawn()
    wait_for(lambda: cli.crontab.calls("slow-job"))
    tick.send_signal(signal.SIGTERM)
    tick.communicate(timeout=30)
    assert tick.returncode == 143
    (run,) = cli.crontab.sql("SELECT status FROM crontabber_run WHERE app_name = 'slow-job'")
    assert run["status"] == "stopped by signal"
    state = cli.crontab.state("slow-job")
    assert state.ongoing is None and state.error_count == 0 and state.last_error == {}
    nagios = cli.run("--nagios")
    assert nagios.returncode == 0, nagios.stdout
    configure_alerts(cli, receiver, ["SlowJob|1d"], rules.replace("sleep=30", "sleep=0"))
    ok(cli.run())  # the next tick runs it again, and nobody was paged
    assert len(cli.crontab.calls("slow-job")) == 2
    assert receiver.received == [] and cli.crontab.sql("SELECT * FROM crontabber_alert") == []
    assert [
        r["status"] for r in cli.crontab.sql("SELECT status FROM crontabber_run ORDER BY run_id")
    ] == [
        "stopped by signal",
        "succeeded",
    ]


def test_a_marked_success_is_shown_as_an_operators_mark_even_in_the_recovery(cli, receiver):
    """Trial #12: --mark-success is never a real success."""
    configure_alerts(cli, receiver, ["TroubleJob|1d"], "    alert_after_failures=1\n")
    ok(cli.run())
    assert receiver.at("/hook")[0].json["kind"] == "failing"
    done = ok(cli.run("--mark-success", "trouble", "--reason", "declared ok: INC-7"))
    assert "marked successful by " in done.stdout and "declared ok: INC-7" in done.stdout
    assert "an operator's mark, not a run" in done.stdout
    listed = ok(cli.run("--list-jobs", "trouble")).stdout
    assert "now (marked)" in listed and "marked successful by " in listed
    (job,) = json.loads(ok(cli.run("--list-jobs", "--json")).stdout)["jobs"]
    assert "declared ok: INC-7" in job["last_success_marked"]
    explained = ok(cli.run("--explain", "trouble")).stdout
    assert "marked successful by " in explained and "no run has succeeded since" in explained
    dashboard = Dashboard(cli.crontab)
    dashboard.start()
    try:
        status, _, page = dashboard.get("/")
        assert status == 200 and '<div class="marked">marked successful by ' in page
        assert "declared ok: INC-7" in page
    finally:
        dashboard.stop()
    ok(cli.run())  # the tick that ends the alert
    recovered = receiver.at("/hook")[-1].json
    assert recovered["kind"] == "recovered"
    assert "marked successful by " in recovered["message"]
    assert "declared ok: INC-7" in recovered["message"]
    assert "no run has succeeded since" in recovered["message"]
    assert "(succeeded at" not in recovered["message"]
    assert recovered["detail"]["marked"]["reason"] == "declared ok: INC-7"


def test_a_test_alert_resolves_its_pagerduty_incident_and_is_tried_once(cli, receiver):
    """Trial #8: no open test incident; a failed test is not sent by a later tick."""
    targets = (
        "        pd webhook {url}/pd format=pagerduty routing_key_env=PD_KEY\n"
        "        slack webhook env:SLACK_URL format=slack\n"
    )
    configure_alerts(cli, receiver, ["BasicJob|1d"], targets=targets)
    cli.env.pop("SLACK_URL", None)
    done = cli.run("--test-alert", "basic-job")
    assert done.returncode == 5
    assert "to pd: delivered" in done.stdout and "SLACK_URL" in done.stdout
    events = [e.json for e in receiver.at("/pd")]
    assert [e["event_action"] for e in events] == ["trigger", "resolve"]
    assert events[0]["dedup_key"] == events[1]["dedup_key"]
    # the variable is set now, on this host or another: a tick does not send the stale test
    cli.env["SLACK_URL"] = f"{receiver.url}/slack"
    cli.crontab.sql("UPDATE crontabber_notice SET next_attempt = now() - interval '1 second'")
    ok(cli.run())
    assert receiver.at("/slack") == []
    shown = ok(cli.run("--alerts")).stdout
    assert "slack (notice 1): NOT SENT, given up" in shown


def test_configtest_checks_the_variables_the_targets_name(cli, receiver):
    """Trial #8: an unset env: address, secret_env or routing_key_env is a configuration
    error, named, before a tick finds out."""
    targets = (
        "        pd webhook {url}/pd format=pagerduty routing_key_env=PD_KEY\n"
        "        slack webhook env:SLACK_URL format=slack\n"
        "        hook webhook {url}/hook secret_env=HOOK_SECRET\n"
    )
    configure_alerts(cli, receiver, ["BasicJob|1d"], targets=targets)
    for name in ("SLACK_URL", "HOOK_SECRET", "PD_KEY"):
        cli.env.pop(name, None)
    done = cli.run("--configtest")
    assert done.returncode == 1 and "configtest OK" not in done.stdout
    error = done.stderr.strip().splitlines()[-1]
    assert "alerts.targets" in error
    for name in ("SLACK_URL", "HOOK_SECRET", "PD_KEY"):
        assert f"environment variable {name}" in error
    cli.env.update(SLACK_URL=f"{receiver.url}/slack", HOOK_SECRET="s3cret", PD_KEY="key")
    done = ok(cli.run("--configtest"))
    assert "configtest OK" in done.stdout
