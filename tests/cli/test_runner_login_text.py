"""What the runner login writes reaches operators' terminals escaped (the third security
review's N-5): the audit rows it may insert, the breach it records on a run (which a breach
pause's reason names: its actor is the function's since migration 0030), the markers and
alerts it writes. Each is written as a real runner login
(tests/fixtures/roles.py), then read by the operator's commands."""

from __future__ import annotations

import json

from tests.fixtures.roles import Login, group_roles, logins  # noqa: F401 - the fixtures

EVIL_BY = "<img src=x>\x1b]0;PWNED-BY\x07"
EVIL_REASON = "\x1b[2J\x1b]0;PWNED-REASON\x07 cleared"
RAW = ("\x1b", "\x07", "\x9b")


def _write_as_the_runner(cli, runner: Login) -> None:
    """As the runner login: a forged audit row, a breach pause of basic-job after its latest
    run's breach was rewritten (the actor it names is ignored), a marker of foo by a forged
    host, an alert opened by a forged process."""
    db = cli.crontab.database
    runner.sql(
        db,
        "INSERT INTO crontabber_audit (actor, action, app_name, reason, detail) VALUES (%s, %s, "
        "'foo', %s, %s)",
        (
            "user-c\x1b]0;AUDIT-TITLE\x07",
            "mark-success\x1b[2J",
            "<b>x</b>\x1b[31mred",
            json.dumps({"k": "\x1b[2J"}),
        ),
    )
    # the breach pause's actor and reason are the function's since migration 0030: what the
    # runner still writes into them is the breach it records on the job's latest run
    runner.sql(
        db,
        "UPDATE crontabber_run SET breach = %s WHERE run_id = "
        "(SELECT run_id FROM crontabber WHERE app_name = 'basic-job') RETURNING run_id",
        (EVIL_REASON,),
    )
    runner.sql(
        db,
        "SELECT crontabber_breach_pause('basic-job', '{}', 'infinity', "
        "(SELECT run_id FROM crontabber WHERE app_name = 'basic-job'), %s)",
        (json.dumps({"actor": EVIL_BY, "reason": "forged"}),),
    )
    runner.sql(  # the marker's holder is the claimer's text (migration 0031's claim)
        db,
        "SELECT crontabber_claim('foo', 'forced', '{}', clock_timestamp(), %s, 'evil', 1, NULL,"
        " 60, NULL, NULL)",
        ("evil\x1b]0;MARKER\x07:1",),
    )
    runner.sql(
        db,
        "INSERT INTO crontabber_alert (app_name, kind, subject, opened_by, message) "
        "VALUES ('foo', 'failing', 'x', %s, 'foo: failing')",
        ("vm:1\x1b]0;ALERT-TITLE\x07<img>",),
    )


def test_runner_written_text_is_escaped_in_every_operator_output(cli, logins):  # noqa: F811
    runner, operator = logins["runner"], logins["operator"]
    assert runner.run().returncode == 0  # basic-job and foo run
    _write_as_the_runner(cli, runner)
    texts = {}
    for args in (
        ("--audit",),
        ("--list-jobs", "--wide"),
        ("--list-jobs",),
        ("--alerts",),
        ("--pause", "all", "--reason", "incident", "--until", "1h"),
        ("--resume", "basic-job", "--reason", "done"),
    ):
        done = operator.run(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr[-2000:])
        texts[" ".join(args[:2])] = done.stdout + done.stderr
    breached = r"breached \x1b[2J\x1b]0;PWNED-REASON\x07 cleared"
    assert r"user-c\x1b]0;AUDIT-TITLE\x07 (db: " in texts["--audit"]
    assert r"mark-success\x1b[2J foo  why: <b>x</b>\x1b[31mred  (k=\x1b[2J)" in texts["--audit"]
    pause = f"crontabber (db: {runner.name})  pause basic-job  why: on_breach: run "
    assert pause in texts["--audit"]
    assert breached in texts["--audit"]
    wide = texts["--list-jobs --wide"]
    assert "until resumed by crontabber: on_breach: run " in wide and breached in wide
    assert r"evil\x1b]0;MARKER\x07" in wide
    assert "until resumed: on_breach: run " in texts["--list-jobs"]  # (cut before the breach)
    assert r" on evil\x1b]0;MARKER\x07, beat" in texts["--list-jobs"]
    assert r"by vm:1\x1b]0;ALERT-TITLE\x07<img>" in texts["--alerts"]
    assert "kept its pause until resumed by crontabber: on_breach: run " in texts["--pause all"]
    assert breached in texts["--pause all"]
    assert r"on evil\x1b]0;MARKER\x07:1" in texts["--pause all"]  # foo's run goes on
    assert (
        "basic-job: resumed (was paused until resumed by crontabber: on_breach: run "
        in texts["--resume basic-job"]
    )
    assert breached in texts["--resume basic-job"]
    assert [name for name, text in texts.items() if "PWNED-BY" in text] == []  # the forged actor
    assert [(name, raw) for name, text in texts.items() for raw in RAW if raw in text] == []
