"""A runner login can only run (the third security review's N-1, issue #43 item 1, its second
part; migration 0031): it has no UPDATE of the state table, and the functions a run writes
through are keyed on the run's id and the login that claimed it. Each reproduction of the
review is tried as a real runner login, directly and through a PgBouncer in transaction mode
whose file holds that login, against a live run of another login (the operator's)."""

from __future__ import annotations

import time
from typing import Any, Callable

import psycopg2
import psycopg2.errors
import pytest

from tests.fixtures.pgbouncer import running_bouncer
from tests.fixtures.roles import Login, group_roles, logins  # noqa: F401 - the fixtures

DENIED = psycopg2.errors.InsufficientPrivilege


def claim(login: Login, db: Any, app_name: str, kind: str, host: str, lease: float) -> int:
    """``crontabber_claim`` as ``login`` (what --job NAME [--force] does): the new run id."""
    ((run_id,),) = login.sql(
        db,
        "SELECT crontabber_claim(%s, %s, '{}', clock_timestamp(), %s, %s, 1, NULL, %s,"
        " 'RunAbandoned', 'taken over')",
        (app_name, kind, f"{host}:1", host, lease),
    )
    return int(run_id)


def operator_rerun(operator: Login, db: Any) -> int:
    """A rerun run of the operator's login holding interval 2026-01-01 of ``foo`` (its lease:
    an hour, stored with it)."""
    ((run_id,),) = operator.sql(
        db,
        "INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, heartbeat,"
        " lease_seconds) VALUES (nextval('crontabber_run_id_seq'), 'foo', 'rerun', 'ops-host',"
        " 1, clock_timestamp(), clock_timestamp(), 3600) RETURNING run_id",
    )
    assert operator.sql(
        db,
        f"SELECT crontabber_claim_interval('foo', '2026-01-01', {run_id}, 'rerun', 'ops-host:1',"
        " 3600)",
    ) == [(run_id,)]
    return int(run_id)


def reproductions(sql: Callable[[str], list[tuple]], live: int) -> None:
    """The review's reproductions against job ``foo`` (held by run ``live``, another login's)
    and ``basic-job`` (not running): each refused, or a no-op."""
    for forged in (
        "UPDATE crontabber SET next_run = 'infinity' WHERE app_name = 'basic-job'",
        "UPDATE crontabber SET last_success = clock_timestamp(), error_count = 0,"
        " last_error = '{}' WHERE app_name = 'basic-job'",
        "UPDATE crontabber SET ongoing = NULL, heartbeat = NULL WHERE app_name = 'foo'",
        "UPDATE crontabber_log SET exc_type = NULL",
    ):
        with pytest.raises(DENIED, match="permission denied"):
            sql(forged)
    # the run functions with the live run's id (readable by every login): not this login's run
    never = "'infinity', true, false, '{}', '{}'"
    assert sql(f"SELECT * FROM crontabber_finish('foo', {live}, clock_timestamp(), {never})") == []
    assert sql(f"SELECT * FROM crontabber_heartbeat('foo', {live}, NULL, NULL)") == []
    assert sql(f"SELECT crontabber_unit('foo', {live}, clock_timestamp())") == [(False,)]
    # a takeover of the live run, asking for a lease of 0 s: its own lease (an hour) decides
    with pytest.raises(DENIED, match=f"run {live} of foo is live"):
        sql(
            "SELECT crontabber_claim('foo', 'forced', '{}', clock_timestamp(), 'x:1', 'x', 1,"
            " NULL, 0, 'RunAbandoned', 'forged')"
        )
    # a scheduled claim of a job that is not due
    with pytest.raises(DENIED, match="basic-job is not due"):
        sql(
            "SELECT crontabber_claim('basic-job', 'scheduled', '{}', clock_timestamp(), 'x:1',"
            " 'x', 1, NULL, 60, NULL, NULL)"
        )
    # a schedule change while a run holds the job
    assert sql("SELECT crontabber_reschedule('foo', 'infinity', NULL)") == [(False,)]
    # notices: no UPDATE (a login sends, fails or claims through the functions, its own claims)
    with pytest.raises(DENIED, match="permission denied"):
        sql("UPDATE crontabber_notice SET given_up = true WHERE sent_at IS NULL")
    assert sql("SELECT crontabber_notice_sent(1, 'ops-host:1')") == [(False,)]


def ledger_reproductions(sql: Callable[[str], list[tuple]], live: int, rerun: int) -> None:
    """The run ledger and the intervals: another login's run (``live``; ``rerun``, a rerun
    holding an interval) cannot be changed, recorded dead before its own lease, or have its
    interval taken."""
    for forged in (
        f"UPDATE crontabber_run SET status = 'abandoned' WHERE run_id = {live}",
        f"UPDATE crontabber_run SET summary = 'forged' WHERE run_id = {rerun}",
        f"UPDATE crontabber_interval SET status = 'failed' WHERE run_id = {rerun}",
    ):
        with pytest.raises(DENIED, match="was claimed by the database user"):
            sql(forged)
    assert sql(f"SELECT crontabber_abandon_run({live}, 'forged', 0)") == [(False,)]
    assert sql("SELECT crontabber_sweep_lanes('forged', 0.001)") == [(0,)]
    assert sql("SELECT * FROM crontabber_abandon_expired_lanes('foo', 1, 'x', 0)") == []
    with pytest.raises(DENIED, match=f"run {rerun} of foo is not a running run of this database"):
        sql(f"SELECT crontabber_claim_interval('foo', '2026-01-01', {rerun}, 'rerun', 'x:1', 0)")
    # its own rerun asking for that interval with a lease of 0 s: the holder's own lease decides
    ((mine,),) = sql(
        "INSERT INTO crontabber_run (run_id, app_name, kind, host, pid, started, heartbeat,"
        " lease_seconds) VALUES (nextval('crontabber_run_id_seq'), 'foo', 'rerun', 'x', 1,"
        " clock_timestamp(), clock_timestamp(), 3600) RETURNING run_id"
    )
    took = f"SELECT crontabber_claim_interval('foo', '2026-01-01', {mine}, 'rerun', 'x:1', 0)"
    assert sql(took) == [(None,)]


def test_the_reviews_reproductions_are_refused_directly_and_through_pgbouncer(cli, logins):  # noqa: F811
    runner, operator = logins["runner"], logins["operator"]
    assert runner.run().returncode == 0  # the runner login ticks: basic-job and foo ran
    db = cli.crontab.database
    before = {name: cli.crontab.state(name) for name in ("basic-job", "foo")}
    live = claim(operator, db, "foo", "forced", "ops-host", 3600)  # another login's live run
    rerun = operator_rerun(operator, db)

    def direct(query: str) -> list[tuple]:
        return runner.sql(db, query)

    reproductions(direct, live)
    ledger_reproductions(direct, live, rerun)
    with running_bouncer(db.port, {runner.name: runner.password}) as pgb:

        def pooled(query: str) -> list[tuple]:
            return runner.sql(db.replace(port=pgb.port), query)

        reproductions(pooled, live)
        ledger_reproductions(pooled, live, rerun)

    basic, foo = cli.crontab.state("basic-job"), cli.crontab.state("foo")
    assert (basic.next_run, basic.last_success, basic.error_count) == (
        before["basic-job"].next_run,
        before["basic-job"].last_success,
        before["basic-job"].error_count,
    )
    assert foo.run_id == live and foo.ongoing is not None
    assert foo.next_run == before["foo"].next_run
    runs = cli.crontab.sql(
        "SELECT status, summary FROM crontabber_run WHERE run_id IN (%s, %s)", (live, rerun)
    )
    assert [(r["status"], r["summary"]) for r in runs] == [("running", None)] * 2
    (held,) = cli.crontab.sql("SELECT run_id, status FROM crontabber_interval")
    assert (held["run_id"], held["status"]) == (rerun, "running")


def test_a_run_is_taken_over_once_its_own_lease_expired_or_by_its_own_host(cli, logins):  # noqa: F811
    """What a runner may still do: take over a run whose own lease expired (whatever lease the
    taker asks for), and one its own host saw die (the holder names this host, under this
    login); the run taken over is recorded abandoned, once."""
    runner, operator = logins["runner"], logins["operator"]
    assert runner.run().returncode == 0
    db = cli.crontab.database
    short = claim(operator, db, "foo", "forced", "ops-host", 0.2)
    time.sleep(0.5)  # past that run's lease (an order of events: no wall time is asserted)
    taken = claim(runner, db, "foo", "forced", "cron-1", 3600)
    mine = claim(runner, db, "foo", "forced", "cron-1", 3600)  # cron-1 saw run `taken` die
    rows = cli.crontab.sql(
        "SELECT run_id, status, db_user FROM crontabber_run WHERE run_id IN (%s, %s, %s)"
        " ORDER BY run_id",
        (short, taken, mine),
    )
    assert [(r["status"], r["db_user"]) for r in rows] == [
        ("abandoned", operator.name),
        ("abandoned", runner.name),
        ("running", runner.name),
    ]
    logged = cli.crontab.sql(
        "SELECT run_id FROM crontabber_log WHERE app_name = 'foo' AND exc_type = 'RunAbandoned'"
        " ORDER BY run_id"
    )
    assert [r["run_id"] for r in logged] == [short, taken]
    # another host's claim under the same login is not its own host's: the lease decides
    with pytest.raises(DENIED, match=f"run {mine} of foo is live"):
        claim(runner, db, "foo", "forced", "cron-2", 3600)
    # and the run's own functions work for the login that claimed it
    assert runner.sql(db, f"SELECT crontabber_unit('foo', {mine}, clock_timestamp())") == [(True,)]
    ended = runner.sql(
        db,
        f"SELECT run_id, ongoing FROM crontabber_finish('foo', {mine}, clock_timestamp(),"
        " clock_timestamp() + interval '1 day', true, false, '{}', '{}')",
    )
    assert ended == [(mine, None)]


def test_a_next_run_later_than_the_schedule_allows_is_flagged(cli, logins):  # noqa: F811
    """What a runner login can still write: a job's next run, through a schedule change while
    no run holds the job (or its own run's end). --nagios names a next run later than the
    job's schedule allows; the job stays listed, not silently stopped."""
    runner = logins["runner"]
    assert runner.run().returncode == 0
    db = cli.crontab.database
    (row,) = cli.crontab.sql("SELECT next_run FROM crontabber WHERE app_name = 'basic-job'")
    assert runner.sql(
        db,
        "SELECT crontabber_reschedule('basic-job', now() + interval '30 days', %s)",
        (row["next_run"],),
    ) == [(True,)]
    check = cli.run("--nagios")
    assert check.returncode == 1, check.stdout
    (line,) = [ln for ln in check.stdout.splitlines() if ln.startswith("basic-job (BasicJob)")]
    assert "is later than its schedule (1d) allows (at the latest" in line, line
    assert "foo" not in check.stdout.splitlines()[0]
