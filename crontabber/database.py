"""The runner's public way for a job's own commands to reach the database.

A job run by the runner gets its connections from ``self.database_connection_factory``
(:mod:`crontabber.mixins`). An operator command of the job (``python -m jobs.uploads
reprocess ID``, ``python -m jobs.prune run``) runs outside a tick and needs the same three
things the runner has: a connection to the database the job's options name (with the
schema applied, since the command may be the first thing to use it), the database's
clock (the "now" every host agrees on), and the name this process writes into the rows
it claims (``host:pid``). They are here so that jobs import this module, not the runner's
store, schema and connection factory, which may change shape.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping, Sequence

from .runner import default_holder

__all__ = ["open_database", "database_now", "default_holder", "operator_command"]


def open_database(config: Mapping[str, Any], application_name: str,
                  schema_dirs: Sequence[str] = ()) -> Any:
    """A psycopg2 connection (no session settings: it works through PgBouncer) to the
    database of a job's config, the runner's schema and ``schema_dirs`` (the job's own, its
    ``schema_dir``) applied. The caller closes it.

    ``config`` is what :func:`crontabber.config.job.load_job_config` returns for a job class
    decorated with ``@using_postgres()`` (its ``database`` namespace holds host, port,
    dbname, user and password). ``application_name`` shows in ``pg_stat_activity``.

    Raises:
        DatabaseUnavailable: the server cannot be reached or refuses the login.
        CodeOlderThanSchema: the database's schema is newer than this code (a newer release
            migrated it): a job's command changes data, so it refuses (exit 8).
    """
    from .connection_factory import settings_from
    from .schema import ensure_schema, with_runner
    from .store import connect

    connection = connect(settings_from(config["database"]), application_name)
    try:
        applied = ensure_schema(connection, with_runner(schema_dirs))
        if applied.unknown:
            from .errors import CodeOlderThanSchema
            from .runner import this_host

            raise CodeOlderThanSchema(this_host(), applied.unknown)
    except BaseException:
        connection.close()
        raise
    return connection


def operator_command(connection: Any, app_name: str, command: str, *, force: bool = False,
                     reason: str | None = None) -> None:
    """Before a job's own command changes data (``python -m jobs.prune run``): refuse it
    while an operator's pause of the job is in force, unless ``force``, and record it in the
    audit trail either way (``--audit``), as the runner's actions are.

    Raises:
        JobPaused: the job is paused and ``force`` is not given (exit 6); the refusal is
            recorded too.
    """
    from .errors import JobPaused
    from .records import AuditEntry, actor
    from .scheduling import pause_active
    from .store import StateStore

    store = StateStore(connection)
    state = store.state(app_name)
    paused = state is not None and pause_active(state, store.now())
    detail = {"command": command, "force": force,
              "outcome": "refused (exit 6)" if paused and not force else "done"}
    store.audit(AuditEntry(actor(), "command", app_name, reason, detail))
    if paused and not force:
        assert state is not None
        raise JobPaused(app_name, command, state.paused_until, state.paused_by,
                        state.paused_reason, "--force runs it anyway")


def database_now(connection: Any) -> dt.datetime:
    """The database's clock (``clock_timestamp()``, UTC): the "now" a job run uses."""
    from .store import StateStore

    return StateStore(connection).now()
