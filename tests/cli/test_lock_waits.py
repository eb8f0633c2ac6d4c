"""A session holding a lock an operator action needs makes the action fail naming it, never
hang (the third security review's N-8): the runner login may insert audit rows (each takes the
audit head's row lock) and update a job's run columns (a row lock). The holders here are real
runner logins (tests/fixtures/roles.py) with a transaction left open."""

from __future__ import annotations

import subprocess

import psycopg2
import pytest

from tests.fixtures.roles import Login, group_roles, logins  # noqa: F401 - the fixtures
from tests.helpers import REPO, SERVICES

HOLDS = {
    "the audit head": (
        "INSERT INTO crontabber_audit (actor, action, app_name) VALUES ('r', 'hold', 'x')",
        "audit_head",
    ),
    "the job's row": (
        # (the runner's way to lock a row since migration 0031: it has no UPDATE to lock with)
        "SELECT 1 FROM crontabber_lock_state('basic-job', NULL)",
        "crontabber",
    ),
}


@pytest.mark.parametrize("what", sorted(HOLDS))
def test_an_operator_action_waits_a_bounded_time_and_names_the_holder(cli, logins, what):  # noqa: F811
    runner, operator = logins["runner"], logins["operator"]
    cli.crontab.sql("INSERT INTO crontabber (app_name, next_run) VALUES ('basic-job', now())")
    statement, table = HOLDS[what]
    db = cli.crontab.database
    holder = psycopg2.connect(
        host=db.host,
        port=db.port,
        dbname=db.dbname,
        user=runner.name,
        password=runner.password,
        application_name="stuck-runner",
    )
    try:
        with holder.cursor() as cur:
            cur.execute(statement)  # and the transaction stays open: idle in transaction
        done = operator.run("--pause", "basic-job", "--reason", "incident")
        pid = holder.info.backend_pid
    finally:
        holder.rollback()
        holder.close()
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "could not pause jobs: another session held a lock it needs for over 5 s" in lines[0]
    on_table = "crontabber_audit_head" if table == "audit_head" else "crontabber"
    assert f"held by {runner.name} (pid {pid}, stuck-runner) on {on_table}" in lines[0], lines[0]
    assert cli.crontab.state("basic-job").paused_until is None  # nothing was changed
    again = operator.run("--pause", "basic-job", "--reason", "incident")  # the holder has gone
    assert again.returncode == 0, again.stderr
    assert cli.crontab.state("basic-job").paused_until is not None


def test_through_pgbouncer_the_wait_is_bounded_and_the_setting_does_not_leak(cli, logins):  # noqa: F811
    """The functions' own ``SET lock_timeout`` holds for their call only: through PgBouncer's
    transaction pooling (the owner's login: PgBouncer's file holds the test login only) the
    action fails the same way, and the pooled server sessions keep no lock_timeout after."""
    runner = logins["runner"]
    db = cli.crontab.database
    env = {**cli.env, "RESOURCE_POSTGRESQL_PORT": str(SERVICES.pgb_port)}
    holder = psycopg2.connect(
        host=db.host, port=db.port, dbname=db.dbname, user=runner.name, password=runner.password
    )
    try:
        with holder.cursor() as cur:
            cur.execute(HOLDS["the audit head"][0])
        done = subprocess.run(
            cli.argv("--pause", "basic-job", "--reason", "incident"),
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.rollback()
        holder.close()
    assert done.returncode == 2, done.stderr
    assert f"held by {runner.name} (pid " in done.stderr
    pooled = psycopg2.connect(**db.replace(port=SERVICES.pgb_port).libpq())
    try:
        for _ in range(5):  # (several transactions: whichever server connection they get)
            with pooled, pooled.cursor() as cur:
                cur.execute("SHOW lock_timeout")
                assert cur.fetchone()[0] == "0"
    finally:
        pooled.close()
