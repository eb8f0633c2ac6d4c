"""A read-only server behind PgBouncer (issue #44, item 4, P15): the refusal names the fix
that applies there, repointing the pooler, and not libpq's multi-host form (which would
only reach the pooler again: ``session is read-only``). Directly, the advice is libpq's.
The read-only server is a test database whose sessions default to read-only, reached
through the shared PgBouncer (scripts/services.sh's ``pgb``) and directly."""

from __future__ import annotations

import psycopg2

from tests.helpers import SERVICES, fresh_database


def test_a_read_only_server_behind_pgbouncer_is_fixed_by_repointing_it(cli, template_database):
    with fresh_database("test_ro", template_database, pooled=False) as db:
        admin = psycopg2.connect(**db.libpq())
        admin.autocommit = True
        with admin.cursor() as cur:  # before any session through PgBouncer: all read-only
            cur.execute(f"ALTER DATABASE {db.dbname} SET default_transaction_read_only = on")
        admin.close()
        cli.crontab.configure(["BasicJob|1d"])
        cli.env["RESOURCE_POSTGRESQL_DBNAME"] = db.dbname
        cli.env["RESOURCE_POSTGRESQL_PORT"] = str(SERVICES.pgb_port)
        pooled = cli.run()
        cli.env["RESOURCE_POSTGRESQL_PORT"] = str(db.port)
        direct = cli.run()
    assert pooled.returncode == 1, pooled.stderr
    (line,) = pooled.stderr.splitlines()
    assert (
        f"127.0.0.1:{SERVICES.pgb_port} is a pooler or proxy (PgBouncer) in front of"
        f" 127.0.0.1:{db.port}, a read-only standby (in recovery): point its entry for this"
        " database at the primary and reload it" in line
    ), line
    assert "target_session_attrs" not in line
    assert direct.returncode == 1, direct.stderr
    assert f"127.0.0.1:{db.port} is a read-only standby (in recovery): name the primary" in (
        direct.stderr
    )
