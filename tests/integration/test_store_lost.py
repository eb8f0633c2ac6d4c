"""The state store across a lost connection (issue #44, item 6, P11): a connection the server
ended is reopened and the call made again, with one WARNING line in the server's words; a
connection already known closed (a caller's retry after a failed attempt) is reopened without
a line, so a runner waiting for the database logs the database's errors, not "connection
already closed; reconnected" at each step."""

from __future__ import annotations

import logging

from crontabber.store import connect, open_store


def test_a_lost_connection_is_reopened_in_the_servers_words(database, caplog):
    store = open_store(database)
    try:
        killer = connect(database)
        with killer, killer.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", (store._conn.info.backend_pid,))
        killer.close()
        with caplog.at_level(logging.WARNING, logger="crontabber.store"):
            store.now()  # made again on a new connection
        assert [record.getMessage() for record in caplog.records] == [
            "lost the state database connection (server closed the connection unexpectedly);"
            " trying again on a new one"
        ]
        caplog.clear()
        store._conn.close()  # closed before the call: what a caller's retry meets
        with caplog.at_level(logging.WARNING, logger="crontabber.store"):
            store.now()
        assert caplog.records == []
    finally:
        store.close()
