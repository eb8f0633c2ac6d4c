"""Database connections for jobs, as crontabber's ``ConnectionFactory``.

One connection per factory and thread, reused across transactions; its
options (``host``, ``port``, ``dbname``, ``user``, ``password``,
``target_session_attrs``, ``dsn``: :mod:`crontabber.config.database`) come from the
job's ``database`` namespace, which defaults to ``resource.postgresql``.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Mapping

from .config.database import DatabaseSettings
from .connection import connect


def settings_from(config: Mapping[str, Any]) -> DatabaseSettings:
    """DatabaseSettings from a job's ``database`` namespace.

    Raises:
        ConfigurationError: a value libpq would refuse.
    """
    from .config.database import database_settings

    return database_settings(config, "database")


class ConnectionFactory:
    """Hands out a per-thread pooled psycopg2 connection."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.settings = settings_from(config)
        self._local = threading.local()

    @contextlib.contextmanager
    def __call__(self) -> Iterator[Any]:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._local.conn = connect(self.settings, "crontabber-job")
        yield conn

    def close_connection(self, connection: Any, force: bool = False) -> None:
        """Close ``connection`` when ``force``; otherwise keep it pooled."""
        if force:
            connection.close()
            if getattr(self._local, "conn", None) is connection:
                self._local.conn = None

    def force_reconnect(self) -> None:
        """Close this thread's connection; the next use opens a new one."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None

    def close(self) -> None:
        self.force_reconnect()
