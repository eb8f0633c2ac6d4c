"""Rights in PostgreSQL (issue #34 item 4) through the real entry point: LOGIN users granted
the three group roles of migration 0025 (as docs/deploy.md#roles shows), each connecting as
itself. The runner ticks and records runs but may not pause, reset, release, mark or mute; the
operator does those through the SECURITY DEFINER functions, audited with its database user;
neither may change an audit row; the read-only user lists and checks and writes nothing; a
row the owner deletes breaks the hash chain and --verify-audit names it.

The test cluster's login (``crontabber``) may not create roles, as many a deployment's owner:
the group roles and the users are made by a superuser over the cluster's socket (what a DBA
does), then the owner runs ``crontabber_grant_rights()`` (docs/deploy.md#roles). Not in the
pooled lane: PgBouncer authenticates users from its own file, which holds the test login only.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import subprocess
import threading
import uuid
from typing import Any, Iterator

import psycopg2
import psycopg2.errors
import pytest

from crontabber.config.database import DatabaseSettings
from tests.fixtures.roles import Login, group_roles, logins, superuser  # noqa: F401 - the fixtures
from tests.helpers import REPO, SERVICES

HOST = socket.gethostname()


def refused(done: subprocess.CompletedProcess, doing: str) -> None:
    """Exit 1 with one line saying the database user may not do it."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"may not {doing}; use an operator login (docs/deploy.md#roles)" in lines[0], lines[0]


def denied(login: Login, db: DatabaseSettings, query: str) -> None:
    with pytest.raises(psycopg2.errors.InsufficientPrivilege):
        login.sql(db, query)


def dead_marker(cli: Any, app_name: str) -> None:
    """The job held by a run whose host died two hours ago."""
    cli.crontab.sql(
        "UPDATE crontabber SET ongoing = now() - interval '2 hours', ongoing_by = 'gone:1', run_id "
        "= 999, "
        "heartbeat = now() - interval '2 hours' WHERE app_name = %s",
        (app_name,),
    )


def audit_rows(cli: Any) -> list[dict]:
    return cli.crontab.sql(
        "SELECT id, actor, db_user, action, app_name FROM crontabber_audit ORDER BY id"
    )


def test_the_runner_ticks_and_records_runs_but_may_not_operate(cli, logins):
    runner, db = logins["runner"], cli.crontab.database
    done = runner.run()
    assert done.returncode == 0, done.stderr
    runs = cli.crontab.sql("SELECT app_name, status FROM crontabber_run ORDER BY app_name")
    assert runs == [
        {"app_name": "basic-job", "status": "succeeded"},
        {"app_name": "foo", "status": "succeeded"},
    ]
    assert cli.crontab.calls("basic-job") and cli.crontab.log("foo")[0]["success"] is not None
    assert runner.run("--job", "basic-job", "--force", "--reason", "a forced run").returncode == 0

    refused(runner.run("--pause", "basic-job", "--reason", "x"), "pause jobs")
    refused(runner.run("--mark-success", "basic-job", "--reason", "x"), "mark jobs successful")
    refused(runner.run("--mute", "all", "--reason", "x", "--until", "1h"), "mute alerts")
    refused(runner.run("--drain", HOST, "--reason", "x"), "drain hosts")
    dead_marker(cli, "foo")
    refused(runner.run("--release", "foo", "--reason", "x"), "release jobs")
    refused(runner.run("--reset-job", "foo", "--reason", "x"), "reset jobs")
    state = cli.crontab.state("foo")
    assert state is not None and state.ongoing_by == "gone:1" and state.paused_until is None
    assert not cli.crontab.sql("SELECT 1 FROM crontabber_mute")
    assert not cli.crontab.sql("SELECT 1 FROM crontabber_host WHERE drained_at IS NOT NULL")

    # nor around the CLI: the operator columns, a reset, a release, the functions
    denied(runner, db, "UPDATE crontabber SET paused_until = now() + interval '1 day'")
    denied(runner, db, "UPDATE crontabber SET success_marked_at = now()")
    denied(runner, db, "DELETE FROM crontabber WHERE app_name = 'foo'")
    denied(runner, db, "UPDATE crontabber SET ongoing = NULL, run_id = NULL WHERE app_name = 'foo'")
    denied(runner, db, "UPDATE crontabber_host SET drained_at = now()")
    denied(runner, db, "INSERT INTO crontabber_mute VALUES ('*', now() + interval '1h', 'me', 'x')")
    denied(runner, db, "SELECT crontabber_pause('foo', '{}', now() + interval '1h', true, '{}')")
    denied(runner, db, "SELECT crontabber_reset('foo', '{}')")

    # the refusals are in the audit trail, under the runner's database user
    actions = [(r["action"], r["db_user"]) for r in audit_rows(cli)]
    assert ("force", runner.name) in actions and ("pause", runner.name) in actions
    refusal = cli.crontab.sql("SELECT detail FROM crontabber_audit WHERE action = 'pause'")[0][
        "detail"
    ]
    assert refusal["outcome"] == "refused (exit 1)"


def test_the_operator_acts_through_the_functions_audited_with_its_database_user(cli, logins):
    runner, operator, db = logins["runner"], logins["operator"], cli.crontab.database
    assert runner.run().returncode == 0
    for args in (
        ("--pause", "basic-job", "--reason", "incident 7", "--until", "2h"),
        ("--resume", "basic-job"),
        ("--mark-success", "basic-job", "--reason", "done by hand"),
        ("--mute", "all", "--reason", "maintenance", "--until", "1h"),
        ("--unmute", "all"),
        ("--drain", HOST, "--reason", "kernel patch"),
        ("--undrain", HOST),
    ):
        done = operator.run(*args)
        assert done.returncode == 0, (args, done.stderr)
    dead_marker(cli, "foo")
    assert operator.run("--release", "foo", "--reason", "host died").returncode == 0
    assert cli.crontab.state("foo").ongoing is None
    assert operator.run("--reset-job", "foo", "--reason", "start over").returncode == 0
    assert cli.crontab.state("foo") is None
    marked = cli.crontab.state("basic-job")
    assert marked.success_marked_reason == "done by hand" and marked.paused_until is not None

    rows = [(r["action"], r["app_name"], r["db_user"]) for r in audit_rows(cli)]
    assert rows == [
        ("pause", "basic-job", operator.name),
        ("resume", "basic-job", operator.name),
        ("mark-success", "basic-job", operator.name),
        ("mute", "*", operator.name),
        ("unmute", "*", operator.name),
        ("drain", f"host:{HOST}", operator.name),
        ("undrain", f"host:{HOST}", operator.name),
        ("release", "foo", operator.name),
        ("reset", "foo", operator.name),
    ]
    shown = json.loads(operator.run("--audit", "--json").stdout)
    assert shown[0]["db_user"] == operator.name and shown[0]["actor"].endswith(f"@{HOST}")
    assert f"(db: {operator.name})" in operator.run("--audit").stdout

    # the functions answer as the statements did: a drain kept, replaced, no such host, not drained
    assert operator.run("--drain", HOST, "--reason", "a").returncode == 0
    assert "refusing to drain it again" in operator.run("--drain", HOST, "--reason", "b").stderr
    assert (
        "replaced the drain in force"
        in operator.run("--drain", HOST, "--reason", "b", "--replace").stdout
    )
    assert "no host called 'nohost'" in operator.run("--drain", "nohost", "--reason", "c").stderr
    assert operator.run("--undrain", HOST).returncode == 0
    assert operator.run("--undrain", HOST).stdout == f"{HOST}: not drained\n"
    assert operator.run("--pause", "basic-job", "--reason", "again").returncode == 0
    assert (
        operator.run("--pause", "basic-job", "--reason", "once more").returncode == 6
    )  # the pause stays
    assert operator.run("--mute", "foo", "--reason", "m").returncode == 0
    assert operator.run("--mute", "foo", "--reason", "m").returncode == 6

    # only through the functions: not the columns themselves
    denied(operator, db, "UPDATE crontabber SET paused_until = NULL")
    denied(operator, db, "DELETE FROM crontabber_mute")


def test_no_role_may_change_or_delete_audit_rows(cli, logins):
    assert logins["operator"].run("--pause", "basic-job", "--reason", "x").returncode == 0
    db = cli.crontab.database
    for login in logins.values():  # what crontabber_grant_rights() gives them
        denied(login, db, "UPDATE crontabber_audit SET reason = 'nothing happened'")
        denied(login, db, "DELETE FROM crontabber_audit")
        denied(login, db, "TRUNCATE crontabber_audit")
        denied(login, db, "UPDATE crontabber_audit_head SET row_hash = NULL")
        denied(login, db, "SELECT crontabber_audit_action('pause', 'foo', '{}')")
    # an insert names its writer: the database user and the time are the trigger's
    logins["runner"].sql(
        db, "INSERT INTO crontabber_audit (actor, action, app_name) VALUES ('root@x', 'y', 'z')"
    )
    assert audit_rows(cli)[-1]["db_user"] == logins["runner"].name
    denied(
        logins["runner"],
        db,
        "INSERT INTO crontabber_audit (actor, action, app_name, at) VALUES ('a', 'b', 'c', now())",
    )
    # a user granted more still may not (the trigger; revoked by the fixture)
    cli.crontab.sql(f"GRANT UPDATE, DELETE ON crontabber_audit TO {logins['operator'].name}")
    denied(logins["operator"], db, "DELETE FROM crontabber_audit")
    assert logins["readonly"].run("--verify-audit").returncode == 0


def test_a_row_the_owner_deletes_or_changes_breaks_the_chain(cli, logins):
    operator, readonly = logins["operator"], logins["readonly"]
    for n in range(4):
        assert (
            operator.run("--pause", "basic-job", "--reason", f"pause {n}", "--replace").returncode
            == 0
        )
    ids = [r["id"] for r in audit_rows(cli)]
    done = readonly.run("--verify-audit")
    assert (
        done.returncode == 0
        and done.stdout == f"audit trail: 4 rows (rows up to {ids[-1]}), hash chain whole\n"
    )

    cli.crontab.sql("DELETE FROM crontabber_audit WHERE id = %s", (ids[1],))  # the owner may
    done = readonly.run("--verify-audit")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        f"crontabber: the audit trail's hash chain is broken: rows after row {ids[0]} before row "
        f"{ids[2]} "
        "are missing (deleted)"
    )

    cli.crontab.sql("DELETE FROM crontabber_audit WHERE id = %s", (ids[0],))
    done = readonly.run("--verify-audit")
    assert f"rows before row {ids[2]} are missing" in done.stderr and done.returncode == 1


def test_a_changed_row_and_a_cut_tail_show(cli, logins):
    operator = logins["operator"]
    for n in range(3):
        assert (
            operator.run("--pause", "basic-job", "--reason", f"pause {n}", "--replace").returncode
            == 0
        )
    ids = [r["id"] for r in audit_rows(cli)]
    cli.crontab.sql(
        "UPDATE crontabber_audit SET reason = 'nothing to see' WHERE id = %s", (ids[1],)
    )
    assert f"row {ids[1]} was changed after it was written" in operator.run("--verify-audit").stderr
    cli.crontab.sql("UPDATE crontabber_audit SET reason = 'pause 1' WHERE id = %s", (ids[1],))
    assert operator.run("--verify-audit").returncode == 0  # the same text, the same hash
    cli.crontab.sql("DELETE FROM crontabber_audit WHERE id = %s", (ids[2],))
    done = operator.run("--verify-audit")
    assert done.returncode == 1
    assert (
        f"rows after row {ids[1]} are missing (deleted; the newest written was row {ids[2]})"
        in done.stderr
    )


def test_concurrent_writers_do_not_fork_the_chain(cli, logins):
    """Four writers at once, as four operators acting together: one chain, in id order."""
    db, runner = cli.crontab.database, logins["runner"]

    def write(n: int) -> None:
        for i in range(15):
            runner.sql(
                db,
                "INSERT INTO crontabber_audit (actor, action, app_name) VALUES (%s, 'x', 'y')",
                (f"{n}/{i}",),
            )

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(audit_rows(cli)) == 60
    done = logins["readonly"].run("--verify-audit")
    assert done.returncode == 0 and "60 rows" in done.stdout


def test_the_read_only_user_lists_and_checks_and_writes_nothing(cli, logins, monkeypatch):
    readonly = logins["readonly"]
    assert logins["runner"].run().returncode == 0
    done = readonly.run("--list-jobs")
    assert done.returncode == 0 and "basic-job" in done.stdout, done.stderr
    done = readonly.run("--nagios")
    assert done.returncode == 0 and done.stdout.startswith("OK"), done.stdout + done.stderr
    assert readonly.run("--history", "basic-job").returncode == 0
    assert readonly.run("--audit").returncode == 0

    # the dashboard's data source, connecting as it
    from dashboard.source import Source

    for name, value in (("USER", readonly.name), ("PASSWORD", readonly.password)):
        monkeypatch.setenv(f"RESOURCE_POSTGRESQL_{name}", value)
    source = Source.load(str(cli.crontab.ini), {})
    assert source.settings.database.user == readonly.name
    with source.session() as session:
        names = [job["name"] for job in source.jobs_document(session)["jobs"]]
        assert names == ["basic-job", "foo"]

    refused(readonly.run("--pause", "basic-job", "--reason", "x"), "pause jobs")
    done = readonly.run()  # a tick records its host: refused, in one line
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"this database user ({readonly.name}) may not" in done.stderr
    for query in (
        "UPDATE crontabber SET next_run = now()",
        "INSERT INTO crontabber_log (app_name) VALUES ('x')",
        "DELETE FROM crontabber_run",
        "INSERT INTO crontabber_audit (actor, action, app_name) VALUES ('a', 'b', 'c')",
        "SELECT crontabber_resume('basic-job', '{}')",
    ):
        denied(readonly, cli.crontab.database, query)
    assert cli.crontab.state("basic-job").next_run > cli.crontab.now() - dt.timedelta(minutes=5)


def test_a_runners_tick_pauses_a_job_that_breached_a_check_and_no_other(cli, logins):
    """on_breach = pause is the runner's one pause: after a succeeded run of that job only."""
    runner, db = logins["runner"], cli.crontab.database
    cli.crontab.configure(
        ["MeasuringJob|1d"],
        extra="    [[class-MeasuringJob]]\n        min_duration=1h\n        on_breach=pause\n",
    )
    done = runner.run()
    assert done.returncode == 0 and "breached" in done.stderr, done.stderr
    state = cli.crontab.state("measuring")
    assert state.paused_reason.startswith("on_breach: run ") and state.paused_until.year > 9000
    assert "breached min_duration 1h00m" in state.paused_reason
    (row,) = audit_rows(cli)
    assert (row["action"], row["app_name"], row["db_user"]) == ("pause", "measuring", runner.name)
    run_id = cli.crontab.sql("SELECT run_id FROM crontabber_run WHERE app_name = 'measuring'")[0][
        "run_id"
    ]
    for app_name, run in (("basic-job", run_id), ("measuring", run_id + 1)):
        denied(
            runner,
            db,
            f"SELECT crontabber_breach_pause('{app_name}', '{{}}', now() + interval '1d', {run}, "
            f"'{{}}')",
        )


def test_every_break_in_one_pass_with_json_and_audit_marks_a_changed_row(cli, logins):
    """Issue #42 item 12: a changed row, a deleted row and a cut tail, all in one pass (the
    trial saw one at a time), the same as JSON; --audit marks the changed row."""
    operator, readonly = logins["operator"], logins["readonly"]
    for n in range(6):
        assert (
            operator.run("--pause", "basic-job", "--reason", f"pause {n}", "--replace").returncode
            == 0
        )
    ids = [r["id"] for r in audit_rows(cli)]
    cli.crontab.sql(
        "UPDATE crontabber_audit SET reason = 'nothing to see' WHERE id = %s", (ids[1],)
    )
    cli.crontab.sql("DELETE FROM crontabber_audit WHERE id = %s", (ids[3],))
    cli.crontab.sql("DELETE FROM crontabber_audit WHERE id = %s", (ids[5],))
    done = readonly.run("--verify-audit")
    assert done.returncode == 1, done.stdout
    assert done.stdout.splitlines() == [
        f"audit trail: row {ids[1]} was changed after it was written",
        f"audit trail: rows after row {ids[2]} before row {ids[4]} are missing (deleted)",
        f"audit trail: rows after row {ids[4]} are missing (deleted; the newest written was row "
        f"{ids[5]})",
    ]
    assert done.stderr.strip().endswith("(and 2 more: see above)")
    shown = readonly.run("--verify-audit", "--json")
    assert shown.returncode == 1
    document = json.loads(shown.stdout)
    assert document["whole"] is False and document["rows"] == 4
    assert [b["row"] for b in document["breaks"]] == [ids[1], ids[4], ids[4]]
    listed = readonly.run("--audit").stdout.splitlines()
    marked = [line for line in listed if "[CHANGED after it was written: --verify-audit]" in line]
    assert len(marked) == 1 and "why: nothing to see" in marked[0]
    assert [e["changed"] for e in json.loads(readonly.run("--audit", "--json").stdout)] == [
        False,
        False,
        True,
        False,
    ]
