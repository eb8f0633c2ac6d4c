"""Maintenance of the whole fleet through the real entry point and the real PostgreSQL
(issue #32, items 8 and 10): ``--pause all`` / ``--resume all``, ``--nagios`` when every job is
paused, what ``--pause`` says of a run already going, a second ``--mute`` that needs
``--replace``, and ``--alerts`` naming what a window holds back."""

from __future__ import annotations

import json
import re

from tests.fixtures.alerting import alerts_ini
from tests.fixtures.dashboard_data import dashboard  # noqa: F401 - the fixture
from tests.fixtures.receiver import receiver  # noqa: F401 - the fixture


def test_pause_all_and_resume_all_and_nagios_warns_of_a_fleet_that_runs_nothing(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d", "FooJob|1d", "TroubleJob|1d"])
    assert cli.run().returncode == 0  # a tick: the fleet has a host
    crontab.sql("UPDATE crontabber SET error_count = 0, last_error = '{}'")  # all healthy
    done = cli.run("--pause", "trouble", "--reason", "INC-7: trouble's bucket", "--until", "3h")
    assert done.returncode == 0, done.stderr
    assert "a pause stops no run already going" in done.stdout
    done = cli.run("--pause", "all", "--reason", "DB maintenance CHG-9", "--until", "2h")
    assert done.returncode == 0, done.stderr
    first, *rest = done.stdout.splitlines()
    assert first.startswith("every job paused until ") and "basic-job, foo;" in first
    assert "a pause stops no run already going" in first and "--resume all" in first
    assert rest == [next(line for line in rest if line.startswith("  trouble: kept its pause"))]
    assert "INC-7: trouble's bucket (--pause all --replace replaces it)" in rest[0]
    assert crontab.state("foo").paused_reason == "DB maintenance CHG-9"

    done = cli.run("--nagios")
    assert done.returncode == 1, done.stdout
    assert done.stdout.startswith(
        "WARNING - every job is paused (paused_warning_percent 100): "
        "basic-job, foo, trouble; --resume all ends the pauses --pause all made, --resume NAME "
        "any one (a job's own pause and a breach pause stay until then)"
    )
    done = cli.run("--nagios", "--crontabber.paused_warning_percent=200")
    assert done.returncode == 2 and "paused_warning_percent: must be above 0" in done.stdout

    assert cli.run("--resume", "trouble", "--reason", "INC-7 over").returncode == 0
    done = cli.run("--nagios", "--crontabber.paused_warning_percent=50")
    assert done.returncode == 1 and "2 of 3 jobs are paused" in done.stdout.splitlines()[0]
    assert cli.run("--nagios").returncode == 0  # not every job: nominal by default

    done = cli.run("--resume", "all", "--reason", "CHG-9 done")
    assert done.returncode == 0, done.stderr
    assert [line.split(":")[0] for line in done.stdout.splitlines()] == ["basic-job", "foo"]
    assert cli.run("--resume", "all").stdout == "no job was paused by --pause all\n"
    audit = crontab.sql(
        "SELECT action, app_name, detail->>'scope' AS scope FROM crontabber_audit"
        " WHERE detail->>'scope' = 'all' ORDER BY id"
    )
    assert [(a["action"], a["app_name"]) for a in audit] == [
        ("pause", "basic-job"),
        ("pause", "foo"),
        ("resume", "basic-job"),
        ("resume", "foo"),
    ]


def test_resume_all_ends_only_the_pauses_pause_all_made(cli):
    """Issue #42 item 1: another operator's incident pause and a breach pause survive
    ``--resume all`` (the on-call trial's job ran 6 h early), each named with the command
    that ends it; ``--pause all --replace`` makes a pause ``--resume all`` may end."""
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d", "FooJob|1d", "TroubleJob|1d"])
    assert cli.run().returncode == 0
    done = cli.run("--pause", "trouble", "--reason", "INC-1234 bucket policy", "--until", "6h")
    assert done.returncode == 0, done.stderr
    # a breach pause, as a tick makes it after a run that breached a check (on_breach = pause):
    # foo's run of this tick, its breach recorded as the tick records it (mark_breach)
    run_id = crontab.sql(
        "UPDATE crontabber_run SET breach = 'min_duration 1h00m' WHERE app_name = 'foo'"
        " RETURNING run_id"
    )[0]["run_id"]
    crontab.sql(
        "SELECT crontabber_breach_pause('foo', '{}', NULL, %s, '{}')",
        (run_id,),
    )
    # issue #42 item 5: a breach pause runs nothing until someone looks: not "nominal"
    done = cli.run("--nagios")
    assert done.returncode == 1, done.stdout
    assert done.stdout.startswith(
        f"WARNING - foo (FooJob): paused until resumed by crontabber: on_breach: run {run_id} "
    )
    assert (
        "a breach pause runs nothing until someone looks (--history foo; --resume foo)"
        in done.stdout
    )
    assert crontab.state("foo").paused_scope == "breach"
    assert crontab.state("trouble").paused_scope is None
    assert cli.run("--pause", "all", "--reason", "CHG-90").returncode == 0
    done = cli.run("--resume", "all", "--reason", "CHG-90 done")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("basic-job: resumed (was paused until ")
    assert lines[1].startswith("foo: kept its pause until resumed by crontabber: on_breach: run")
    assert lines[1].endswith("(not made by --pause all; --resume foo ends it)")
    assert (
        lines[2].startswith("trouble: kept its pause until ")
        and "INC-1234 bucket policy" in lines[2]
    )
    assert (
        lines[2].endswith("(not made by --pause all; --resume trouble ends it)") and len(lines) == 3
    )
    assert crontab.state("trouble").paused_reason == "INC-1234 bucket policy"
    states = cli.run("--resume", "all", "--json")
    assert '"resumed": {}' in states.stdout and '"trouble"' in states.stdout
    audit = crontab.sql("SELECT app_name FROM crontabber_audit WHERE action = 'resume' ORDER BY id")
    assert [a["app_name"] for a in audit] == ["basic-job"]  # nothing ended: nothing audited
    # --pause all --replace takes the incident pause over: --resume all may end it then
    assert cli.run("--pause", "all", "--reason", "CHG-91", "--replace").returncode == 0
    done = cli.run("--resume", "all", "--reason", "CHG-91 done")
    assert [line.split(":")[0] for line in done.stdout.splitlines()] == [
        "basic-job",
        "foo",
        "trouble",
    ]
    assert "kept" not in done.stdout
    assert cli.run("--resume", "trouble").stdout == "trouble: not paused\n"


def test_pause_all_replace_replaces_every_pause(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d", "FooJob|1d"])
    assert cli.run("--pause", "foo", "--reason", "first").returncode == 0
    done = cli.run("--pause", "all", "--reason", "second", "--replace")
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 1, done.stdout
    assert {crontab.state(n).paused_reason for n in ("foo", "basic-job")} == {"second"}


def test_a_second_mute_needs_replace_and_alerts_shows_what_a_window_holds_back(
    cli, receiver, dashboard
):  # noqa: F811
    crontab = cli.crontab
    crontab.configure(["TroubleJob|1d", "BasicJob|1d"], extra=alerts_ini(receiver))
    done = cli.run("--mute", "all", "--reason", "maintenance CHG-1", "--until", "1h")
    assert done.returncode == 0, done.stderr
    done = cli.run("--mute", "all", "--reason", "again")
    assert done.returncode == 6, (done.stdout, done.stderr)
    assert "refusing to mute it again: muted until " in done.stderr
    assert "maintenance CHG-1; --mute all --replace replaces that window" in done.stderr
    assert cli.run("--alerts").stdout.startswith("muted: every job until ")
    assert "maintenance CHG-1" in cli.run("--alerts").stdout.splitlines()[0]
    audit = crontab.sql(
        "SELECT detail->>'outcome' AS outcome FROM crontabber_audit WHERE action = 'mute' ORDER BY "
        "id"
    )
    assert [a["outcome"] for a in audit] == ["done", "refused (exit 6)"]
    done = cli.run("--mute", "all", "--reason", "again", "--replace")
    assert done.returncode == 0 and "(replaced the window until " in done.stdout
    assert "maintenance CHG-1" in done.stdout
    done = cli.run("--mute", "basic-job", "--reason", "one job")
    assert "the job still runs" in done.stdout and "the jobs still run" not in done.stdout

    for _ in range(2):  # trouble fails twice under the window: no alert opens
        assert cli.run("--job", "trouble", "--force", "--reason", "drill").returncode == 5
    assert cli.run().returncode == 0
    assert crontab.sql("SELECT id FROM crontabber_alert") == [] and receiver.at("/hook") == []
    shown = cli.run("--alerts").stdout
    held = (
        r"  not alerted \(muted\): trouble: failed 2 times in a row; last: NameError: "
        r"Trouble!! \(run 2 on [^ :]+:\d+\); see --show-error trouble, --logs trouble"
    )
    assert any(re.fullmatch(held, line) for line in shown.splitlines()), shown
    dashboard.start()
    page = dashboard.get("/")[2]
    assert 'data-k="alerts.held_back">not alerted (muted): trouble: failed 2 times in a row' in page
    explained = cli.run(
        "--explain", "trouble"
    ).stdout  # issue #42 item 13: the mute shows there too
    assert "  alerts muted: until " in explained and "again (every job: --mute all)" in explained, (
        explained
    )
    assert cli.run("--unmute", "all").returncode == 0
    assert "not alerted" not in cli.run("--alerts").stdout
    assert "alerts muted" not in cli.run("--explain", "trouble").stdout
    # issue #42 item 7: --audit-job all and '*' are the scope every-job mutes are written under
    for name in ("all", "*"):
        done = cli.run("--audit", "--audit-job", name, "--json")
        assert done.returncode == 0, done.stderr
        rows = [(e["action"], e["job"], e["detail"]["outcome"]) for e in json.loads(done.stdout)]
        assert rows == [
            ("unmute", "*", "done"),
            ("mute", "*", "done"),
            ("mute", "*", "refused (exit 6)"),
            ("mute", "*", "done"),
        ]
    shown = cli.run("--audit", "--audit-job", "all").stdout  # times in the commands' one form
    assert (
        re.search(r"until=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", shown) and "-03:30" not in shown
    ), shown
    # the runner's own alerts (old-code, broken-entry) are under crontabber
    crontab.configure(
        ["TroubleJob|1d", "tests.fixtures.nowhere.NoJob|1d"], extra=alerts_ini(receiver)
    )
    assert cli.run().returncode == 1  # the broken entry: the other jobs ran
    done = cli.run("--alerts", "--audit-job", "crontabber")
    assert done.returncode == 0 and "broken-entry" in done.stdout, done.stdout
    assert cli.run("--audit", "--audit-job", "nope").returncode == 1
