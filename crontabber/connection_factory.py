"""Database connections for jobs, as crontabber's ``ConnectionFactory``.

One connection per factory and thread, reused across transactions; its
options (``host``, ``port``, ``dbname``, ``user``, ``password``) come from the
job's ``database`` namespace, which defaults to ``resource.postgresql``.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Mapping

from .store import DatabaseSettings, connect


def settings_from(config: Mapping[str, Any]) -> DatabaseSettings:
    """DatabaseSettings from a namespace holding host, port, dbname, user, password."""
    return DatabaseSettings(
        host=config["host"],
        port=int(config["port"]),
        dbname=config["dbname"],
        user=config["user"],
        password=config["password"],
    )


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
