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
from typing import Any, Mapping

from .runner import default_holder

__all__ = ["open_database", "database_now", "default_holder"]


def open_database(config: Mapping[str, Any], application_name: str) -> Any:
    """A psycopg2 connection (session time zone UTC) to the database of a job's config,
    the schema applied. The caller closes it.

    ``config`` is what :func:`crontabber.jobconfig.load_job_config` returns for a job class
    decorated with ``@using_postgres()`` (its ``database`` namespace holds host, port,
    dbname, user and password). ``application_name`` shows in ``pg_stat_activity``.

    Raises:
        DatabaseUnavailable: the server cannot be reached or refuses the login.
    """
    from .connection_factory import settings_from
    from .schema import ensure_schema
    from .store import connect

    connection = connect(settings_from(config["database"]), application_name)
    try:
        ensure_schema(connection)
    except BaseException:
        connection.close()
        raise
    return connection


def database_now(connection: Any) -> dt.datetime:
    """The database's clock (``clock_timestamp()``, UTC): the "now" a job run uses."""
    from .store import StateStore

    return StateStore(connection).now()
