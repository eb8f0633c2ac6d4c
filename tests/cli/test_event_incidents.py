"""The events whose cause can go away end with it (issue #42 item 10): a ``broken-entry`` alert
when its jobs entry loads again, a ``breach`` alert when a later run of the job passes the rule.
Each ends with a ``recovered`` notice, which PagerDuty receives as the ``resolve`` of the
incident the event triggered (the same ``dedup_key``). The real entry point as a subprocess,
the real PostgreSQL and a real local HTTP receiver."""

from __future__ import annotations

import datetime as dt

from tests.fixtures.alerting import TARGETS, alerts
from tests.fixtures.receiver import receiver  # noqa: F401 - the fixture

BROKEN = "no_such_module_after_deploy.BrokenApp"


def configure(cli, receiver, jobs, extra=""):  # noqa: F811
    cli.crontab.configure(
        jobs, extra=f"{extra}[alerts]\n    targets='''\n{TARGETS.format(url=receiver.url)}    '''\n"
    )
    cli.env["PD_KEY"] = "pd-routing-key"


def test_a_broken_entry_incident_is_resolved_once_the_entry_loads(cli, receiver):  # noqa: F811
    configure(cli, receiver, ["BasicJob|1d", f"{BROKEN}|10m"])
    assert cli.run().returncode == 1
    (trigger,) = receiver.wait("/pd", 1)
    assert trigger.json["event_action"] == "trigger"
    assert trigger.json["payload"]["class"] == "broken-entry"
    assert cli.run().returncode == 1  # still broken: nothing ends, nothing is sent again
    assert len(receiver.at("/pd")) == 1 and alerts(cli.crontab)[0]["resolved_at"] is None

    configure(cli, receiver, ["BasicJob|1d"])  # the entry fixed (here: taken out)
    # another host's tick does not end it (in a rolling deploy its code or list may differ)
    assert cli.run(host="cron-b").returncode == 0
    assert len(receiver.at("/pd")) == 1 and alerts(cli.crontab)[0]["resolved_at"] is None
    done = cli.run()  # the host that found it loads the whole list now
    assert done.returncode == 0, done.stderr
    _, resolve = receiver.wait("/pd", 2)
    assert resolve.json["event_action"] == "resolve"
    assert resolve.json["dedup_key"] == trigger.json["dedup_key"]
    (_, recovered) = receiver.wait("/slack", 2)
    assert recovered.json["text"].startswith(
        f":large_green_circle: crontabber: recovered (jobs entry '{BROKEN}|10m' loads, or is no "
        "longer listed); was: jobs entry"
    )
    broken = [a for a in alerts(cli.crontab) if a["kind"] == "broken-entry"]
    assert broken[0]["resolved_at"] is not None
    assert "broken-entry  crontabber  ended " in cli.run("--alerts").stdout
    assert cli.run().returncode == 0 and len(receiver.at("/pd")) == 2  # ended once

    configure(cli, receiver, ["BasicJob|1d", f"{BROKEN}|10m"])  # the same entry breaks again
    assert cli.run().returncode == 1
    *_, again = receiver.wait("/pd", 3)  # a new incident, not swallowed by the ended one
    assert (again.json["event_action"], again.json["payload"]["class"]) == (
        "trigger",
        "broken-entry",
    )
    broken = [a for a in alerts(cli.crontab) if a["kind"] == "broken-entry"]
    assert [a["resolved_at"] is None for a in broken] == [False, True]


DAY = dt.timedelta(days=1)


def checked(cli, receiver, sleep="0"):  # noqa: F811
    configure(
        cli,
        receiver,
        ["MeasuringJob|1d"],
        f"    [[class-MeasuringJob]]\n        slower_than=2 x p95(5)\n        sleep={sleep}\n",
    )


def tick(cli):
    cli.crontab.wind(DAY, "measuring")
    done = cli.run()
    assert done.returncode == 0, done.stderr
    return done


def test_a_breach_incident_is_resolved_by_a_later_run_that_passes_the_rule(cli, receiver):
    for _ in range(3):
        checked(cli, receiver)
        tick(cli)
    checked(cli, receiver, sleep="1.0")
    tick(cli)
    (trigger,) = receiver.wait("/pd", 1)
    assert (trigger.json["event_action"], trigger.json["payload"]["class"]) == ("trigger", "breach")
    tick(cli)  # slow again: a second breach, the first still open
    assert len(receiver.wait("/pd", 2)) == 2
    assert [a["resolved_at"] for a in alerts(cli.crontab, "measuring")] == [None, None]

    checked(cli, receiver)  # fixed: the next run passes slower_than
    tick(cli)
    events = receiver.wait("/pd", 4)
    resolves = [e.json for e in events[2:]]
    assert {e["event_action"] for e in resolves} == {"resolve"}
    assert {e["dedup_key"] for e in resolves} == {e.json["dedup_key"] for e in events[:2]}
    run_id = max(r["run_id"] for r in cli.crontab.sql("SELECT run_id FROM crontabber_run"))
    texts = [r.json["text"] for r in receiver.at("/slack")[-2:]]
    assert all(
        f"measuring: recovered (run {run_id} passed slower_than 2 x p95(5)); was: " in text
        for text in texts
    ), texts
    breaches = [a for a in alerts(cli.crontab, "measuring") if a["kind"] == "breach"]
    assert all(a["resolved_at"] is not None for a in breaches)
    tick(cli)
    assert len(receiver.at("/pd")) == 4  # nothing more to end
