"""The owner's step of a first deploy and of an upgrade (issue #44, item 2; docs/deploy.md,
"A first deploy"): a host with a runner login (no DDL rights) that finds part of the schema
missing says in one line what needs the schema's owner and the command that applies it
(not ``permission denied for schema public``), claims nothing, and ticks once the owner ran
that command."""

from __future__ import annotations

import subprocess
import uuid

import psycopg2

from tests.fixtures.crontab import FIXTURES
from tests.fixtures.pgbouncer import running_bouncer
from tests.fixtures.roles import group_roles, logins, superuser  # noqa: F401 - the fixtures
from tests.helpers import REPO, fresh_database

LATEST = "0029_serving_hosts"


def test_a_runner_login_names_the_migration_that_needs_the_owner_and_the_command(cli, logins):
    runner = logins["runner"]
    cli.crontab.sql("DELETE FROM schema_migrations WHERE number = 29")  # a release not applied
    done = runner.run()
    assert done.returncode == 1, done.stderr
    db = cli.crontab.database
    assert done.stderr.splitlines() == [
        f"crontabber: cannot use the state database at {runner.name}@{db.host}:{db.port}/"
        f"{db.dbname}: migration {LATEST} needs the schema's owner ({db.user}); this login"
        f" ({runner.name}) may not apply it: run once RESOURCE_POSTGRESQL_USER={db.user}"
        " python -m crontabber --admin.conf=FILE --list-jobs (FILE: this host's INI; the"
        " owner's password in RESOURCE_POSTGRESQL_PASSWORD), then the ticks"
        " (docs/deploy.md#a-first-deploy)"
    ]
    assert not cli.crontab.sql("SELECT 1 FROM crontabber_run")  # nothing claimed
    owner = cli.run("--list-jobs")  # the command the line names, with the owner's login
    assert owner.returncode == 0, owner.stderr
    assert f"database schema: applied {LATEST}" in owner.stderr
    done = runner.run()
    assert done.returncode == 0, done.stderr
    assert cli.crontab.calls("basic-job")


def test_several_missing_migrations_are_named_together(cli, logins):
    cli.crontab.sql("DELETE FROM schema_migrations WHERE number IN (28, 29)")
    done = logins["runner"].run("--list-jobs")
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert "2 migrations (0028_lock_timeouts, 0029_serving_hosts) needs" not in line
    assert "2 migrations (0028_lock_timeouts, 0029_serving_hosts) need the schema's owner" in line


def test_the_guides_first_deploy_end_to_end(cli, group_roles, tmp_path):  # noqa: F811
    """docs/deploy.md's "A first deploy", in its order, on an empty database: a host started
    too early is told the owner's command; the owner's first command applies the schema and
    grants the group roles; a runner login ticks through a PgBouncer made from the guide's
    file (with the runner and the owner in its userlist), under the name it is given."""
    owner = cli.crontab.database
    runner = f"test_first_{uuid.uuid4().hex[:10]}"
    password = uuid.uuid4().hex
    su = superuser()
    try:
        with fresh_database("test_first", None, pooled=False) as db:  # step 1: empty, owned
            with su.cursor() as cur:  # step 4, early: a host started before step 3
                cur.execute(
                    f"CREATE ROLE {runner} LOGIN PASSWORD %s IN ROLE crontabber_runner",
                    (password,),
                )
            cli.crontab.configure(["BasicJob|1d"])
            cli.env["RESOURCE_POSTGRESQL_DBNAME"] = db.dbname
            as_runner = {
                "RESOURCE_POSTGRESQL_USER": runner,
                "RESOURCE_POSTGRESQL_PASSWORD": password,
            }
            early = run_as(cli, as_runner)
            assert early.returncode == 1, early.stderr
            assert (
                "the schema (crontabber/schema.sql) needs the schema's owner"
                f" ({owner.user}); this login ({runner}) may not apply it: run once"
                f" RESOURCE_POSTGRESQL_USER={owner.user} python -m crontabber" in early.stderr
            ), early.stderr
            # step 3: the owner's first command applies the schema and grants the roles
            first = cli.run("--list-jobs")
            assert first.returncode == 0, first.stderr
            assert "database schema: applied crontabber/schema.sql" in first.stderr
            # the owner's own table for the sample jobs, granted again (docs/deploy.md#roles)
            mine = psycopg2.connect(**db.libpq())
            with mine, mine.cursor() as cur:
                cur.execute((FIXTURES / "sample_jobs.sql").read_text())
                cur.execute("SELECT crontabber_grant_rights()")
            # step 5: PgBouncer from the guide's file, the logins in its userlist
            with running_bouncer(db.port, {owner.user: owner.password, runner: password}) as pgb:
                cli.env.update(
                    RESOURCE_POSTGRESQL_HOST="127.0.0.1",
                    RESOURCE_POSTGRESQL_PORT=str(pgb.port),
                    CRONTABBER_HOST_NAME="cron-1",
                )
                tick = run_as(cli, as_runner)  # steps 6 and 7: a host ticks
                assert tick.returncode == 0, tick.stderr
            with mine, mine.cursor() as cur:
                cur.execute("SELECT app_name FROM test_job_calls")
                assert cur.fetchall() == [("basic-job",)]
                cur.execute("SELECT host FROM crontabber_host")
                assert cur.fetchall() == [("cron-1",)]
            mine.close()
    finally:
        with su.cursor() as cur:
            cur.execute(f"DROP ROLE IF EXISTS {runner}")
        su.close()


def run_as(cli, login):
    """The CLI's tick with another login."""
    return subprocess.run(
        cli.argv(), env={**cli.env, **login}, cwd=REPO, capture_output=True, text=True, timeout=60
    )
