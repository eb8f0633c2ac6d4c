"""The runner login can only run (the third security review's N-1, issue #43 item 1, its
first part): ``crontabber_breach_pause`` judges the stored run and writes its own actor and
reason (migration 0030), and neither the runner nor the operator login may delete the run
ledger or the run log (the retention job trims them through the schema's functions). Each
reproduction is tried as a real runner login (tests/fixtures/roles.py), and the breach pause as
the owner through PgBouncer too (its transaction pooling; PgBouncer's file holds the owner's
login only): the function judges the run whoever calls it."""

from __future__ import annotations

import json
from typing import Any

import psycopg2
import psycopg2.errors
import pytest

from tests.fixtures.roles import Login, group_roles, logins  # noqa: F401 - the fixtures
from tests.helpers import SERVICES

FORGED = json.dumps({"actor": "user-a@ops1", "reason": "routine maintenance (forged)"})
MEASURING = "    [[class-MeasuringJob]]\n        min_duration=1h\n        on_breach=pause\n"


def breach_pause(app_name: str, run_id: int) -> str:
    return f"SELECT crontabber_breach_pause('{app_name}', '{{}}', NULL, {run_id}, '{FORGED}')"


def refused_pause(
    runner: Login, cli: Any, app_name: str, run_id: int, owner_too: bool = True
) -> None:
    """Refused as the runner login directly and (``owner_too``) as the owner through
    PgBouncer."""
    with pytest.raises(psycopg2.errors.InsufficientPrivilege, match="no breach pause"):
        runner.sql(cli.crontab.database, breach_pause(app_name, run_id))
    if not owner_too:
        return
    pooled = psycopg2.connect(**cli.crontab.database.replace(port=SERVICES.pgb_port).libpq())
    try:
        with pytest.raises(psycopg2.errors.InsufficientPrivilege, match="no breach pause"):
            with pooled, pooled.cursor() as cur:
                cur.execute(breach_pause(app_name, run_id))
    finally:
        pooled.close()


def last_run_id(cli: Any, app_name: str) -> int:
    rows = cli.crontab.sql(
        "SELECT max(run_id) AS run_id FROM crontabber_run WHERE app_name = %s", (app_name,)
    )
    return int(rows[0]["run_id"])


def test_a_run_the_runner_inserted_or_changed_pauses_nothing(cli, logins):  # noqa: F811
    """The review's reproduction: a forged succeeded run, then a pause under a forged actor."""
    runner = logins["runner"]
    assert runner.run().returncode == 0
    db = cli.crontab.database
    runner.sql(
        db,
        "INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, status) "
        "VALUES (900001, 'basic-job', 'forced', 'forged-host', 1, now(), 'succeeded')",
    )
    refused_pause(runner, cli, "basic-job", 900001)
    # a forged run that looks finished, scheduled and breached: not the run the job's row
    # last recorded (its finish wrote last_run = its start, its run id)
    runner.sql(
        db,
        "INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, ended, status, "
        "breach) VALUES (900002, 'basic-job', 'scheduled', 'forged-host', 1, now(), now(), "
        "'succeeded', 'min_duration 1h00m')",
    )
    refused_pause(runner, cli, "basic-job", 900002)
    # the job's own latest run, but no breach recorded by its tick; nor another job's run
    real = last_run_id(cli, "foo")
    refused_pause(runner, cli, "foo", real)
    runner.sql(db, f"UPDATE crontabber_run SET breach = 'x' WHERE run_id = {real}")
    refused_pause(runner, cli, "basic-job", real)
    assert cli.crontab.state("basic-job").paused_until is None
    assert cli.crontab.state("foo").paused_until is None
    assert not cli.crontab.sql("SELECT 1 FROM crontabber_audit WHERE action = 'pause'")


def test_a_breach_pause_names_the_run_never_the_callers_actor(cli, logins):  # noqa: F811
    runner, operator = logins["runner"], logins["operator"]
    cli.crontab.configure(["MeasuringJob|1d"], extra=MEASURING)
    done = runner.run()
    assert done.returncode == 0 and "breached" in done.stderr, done.stderr
    run_id = last_run_id(cli, "measuring")
    state = cli.crontab.state("measuring")
    assert state.paused_by == "crontabber" and state.paused_until.year > 9000
    assert state.paused_reason.startswith(f"on_breach: run {run_id} took ")
    assert state.paused_reason.endswith(" s and breached min_duration 1h00m"), state.paused_reason
    (row,) = cli.crontab.sql("SELECT actor, db_user, reason, detail FROM crontabber_audit")
    assert (row["actor"], row["db_user"], row["reason"]) == (
        "crontabber",
        runner.name,
        state.paused_reason,
    )
    assert row["detail"] == {
        "outcome": "done",
        "run_id": run_id,
        "host": cli.crontab.sql("SELECT host FROM crontabber_run")[0]["host"],
        "run_db_user": runner.name,
        "breach": ["min_duration 1h00m"],
        "scope": "breach",
    }

    # the same run again, under a forged actor and reason, after an operator resumed it
    assert operator.run("--resume", "measuring", "--reason", "looked").returncode == 0
    assert runner.sql(cli.crontab.database, breach_pause("measuring", run_id)) == [(True,)]
    again = cli.crontab.state("measuring")
    assert (again.paused_by, again.paused_reason) == ("crontabber", state.paused_reason)
    actors = cli.crontab.sql("SELECT actor FROM crontabber_audit WHERE action = 'pause'")
    assert [r["actor"] for r in actors] == ["crontabber", "crontabber"]

    # another host's claim of the job running since: still the job's latest finished run
    assert operator.run("--resume", "measuring", "--reason", "again").returncode == 0
    cli.crontab.sql(
        "UPDATE crontabber SET ongoing = now(), ongoing_by = 'other:1', heartbeat = now(), "
        "run_id = %s WHERE app_name = 'measuring'",
        (run_id + 1,),
    )
    assert runner.sql(cli.crontab.database, breach_pause("measuring", run_id)) == [(True,)]
    # once that run has finished, it is not
    assert operator.run("--resume", "measuring", "--reason", "again").returncode == 0
    cli.crontab.sql(
        "INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, ended, status) "
        "VALUES (%s, 'measuring', 'scheduled', 'other', 1, now(), now(), 'succeeded')",
        (run_id + 1,),
    )
    refused_pause(runner, cli, "measuring", run_id)


def test_a_run_another_database_user_claimed_pauses_nothing(cli, logins):  # noqa: F811
    """A run's database user is the trigger's (crontabber_run.db_user), kept by any update."""
    runner, operator, db = logins["runner"], logins["operator"], cli.crontab.database
    cli.crontab.configure(["MeasuringJob|1d"], extra=MEASURING)
    assert cli.run().returncode == 0  # the owner's tick: the owner's run, paused by the owner
    run_id = last_run_id(cli, "measuring")
    assert cli.crontab.state("measuring").paused_by == "crontabber"
    assert operator.run("--resume", "measuring", "--reason", "looked").returncode == 0
    refused_pause(runner, cli, "measuring", run_id, owner_too=False)  # the owner's run
    # another login's run cannot be changed at all (migration 0031's ledger guard)
    with pytest.raises(psycopg2.errors.InsufficientPrivilege, match="claimed by the database"):
        runner.sql(
            db, f"UPDATE crontabber_run SET db_user = '{runner.name}' WHERE run_id = {run_id}"
        )
    refused_pause(runner, cli, "measuring", run_id, owner_too=False)
    runner.sql(
        db,
        "INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, status, db_user)"
        " VALUES (900003, 'x', 'forced', 'h', 1, now(), 'running', 'alice_ops')",
    )
    users = cli.crontab.sql("SELECT run_id, db_user FROM crontabber_run ORDER BY run_id")
    assert [r["db_user"] for r in users] == [cli.crontab.database.user, runner.name]
    assert cli.crontab.state("measuring").paused_until < cli.crontab.now()


@pytest.mark.parametrize("who", ["runner", "operator"])
def test_no_login_but_the_owner_deletes_the_run_ledger_or_log(cli, logins, who):  # noqa: F811
    login, db = logins[who], cli.crontab.database
    assert logins["runner"].run().returncode == 0
    for table in ("crontabber_run", "crontabber_log"):
        with pytest.raises(psycopg2.errors.InsufficientPrivilege):
            login.sql(db, f"DELETE FROM {table}")
        with pytest.raises(psycopg2.errors.InsufficientPrivilege):
            login.sql(db, f"TRUNCATE {table}")
    assert len(cli.crontab.sql("SELECT 1 FROM crontabber_run")) == 2
    assert len(cli.crontab.sql("SELECT 1 FROM crontabber_log")) == 2


def test_the_retention_job_as_the_runner_keeps_the_last_week(cli, logins):  # noqa: F811
    runner = logins["runner"]
    cli.crontab.sql(
        "INSERT INTO crontabber_log (app_name, log_time) VALUES ('x', now() - interval '9 days'),"
        " ('x', now() - interval '2 days')"
    )
    cli.crontab.sql(
        "INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, ended, status) "
        "SELECT nextval('crontabber_run_id_seq'), 'x', 'scheduled', 'h', 1, t, t, 'succeeded' "
        "FROM unnest(ARRAY[now() - interval '9 days', now() - interval '2 days']) AS t"
    )
    job = "jobs.runlog.PruneRunLogCronApp|1d"
    cli.crontab.configure([job], extra="    [[class-PruneRunLogCronApp]]\n        keep_days=3\n")
    assert runner.run().returncode == 0
    (failed,) = cli.crontab.sql("SELECT status, error FROM crontabber_run WHERE app_name <> 'x'")
    assert (failed["status"], failed["error"]) == (
        "failed",
        "InvalidParameterValue: keep_days 3 is under 7: the run log keeps the last 7 days",
    )
    assert len(cli.crontab.sql("SELECT 1 FROM crontabber_log WHERE app_name = 'x'")) == 2

    cli.crontab.configure([job], extra="    [[class-PruneRunLogCronApp]]\n        keep_days=7\n")
    assert runner.run("--job", "prune-run-log", "--force", "--reason", "again").returncode == 0
    logs = cli.crontab.sql(
        "SELECT log_time > now() - interval '3 days' AS recent FROM "
        "crontabber_log WHERE app_name = 'x'"
    )
    assert logs == [{"recent": True}]
    runs = cli.crontab.sql(
        "SELECT ended > now() - interval '3 days' AS recent FROM "
        "crontabber_run WHERE app_name = 'x'"
    )
    assert runs == [{"recent": True}]
