"""The owner's step of a first deploy and of an upgrade (issue #44, item 2; docs/deploy.md,
"A first deploy"): a host with a runner login (no DDL rights) that finds part of the schema
missing says in one line what needs the schema's owner and the command that applies it
(not ``permission denied for schema public``), claims nothing, and ticks once the owner ran
that command."""

from __future__ import annotations

from tests.fixtures.roles import group_roles, logins  # noqa: F401 - the fixtures

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
