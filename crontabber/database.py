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
import logging
import time
from typing import Any, Mapping, Sequence

from .identity import default_holder

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, TypeVar

    T = TypeVar("T")

__all__ = [
    "open_database",
    "database_now",
    "default_holder",
    "operator_command",
    "retried_when_lost",
]

logger = logging.getLogger(__name__)

#: How long a job's own database work is tried again after a lost connection: as long as the
#: runner tries to record a run's end (``lease_seconds``' default), a failover's span.
LOST_RETRY_SECONDS = 120.0
#: SQLSTATE 25006: the server no longer takes writes (a primary demoted to a standby).
_READ_ONLY = "25006"


def retried_when_lost(
    factory: Any,
    work: Callable[[Any], T],
    what: str,
    seconds: float = LOST_RETRY_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``work(connection)`` on a connection of ``factory`` (a job's
    ``database_connection_factory``), done again on a new connection when the database was
    lost under it (the connection closed: a failover, a server restart, PgBouncer's server
    gone; the server no longer taking writes; no server to connect to), as the runner does
    its own writes: after 0.5 s, doubling to 10 s, for up to ``seconds``, one WARNING line
    each. ``work`` must be safe to do again from its start (one transaction, or steps that
    are idempotent). ``what`` names it in the log.

    Raises:
        whatever ``work`` raised, when it is no lost database or ``seconds`` ran out.
    """
    from .errors import DatabaseUnavailable

    deadline, delay = time.monotonic() + seconds, 0.5
    while True:
        connection = None
        try:
            with factory() as connection:
                return work(connection)
        except Exception as exc:
            lost = isinstance(exc, DatabaseUnavailable) or (
                getattr(exc, "pgcode", None) == _READ_ONLY
                or (connection is not None and bool(connection.closed))
            )
            if not lost or time.monotonic() + delay > deadline:
                raise
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            logger.warning(
                "%s: lost the database (%s); trying again in %g s (for up to %g s)",
                what,
                reason,
                delay,
                seconds,
            )
            factory.force_reconnect()
            sleep(delay)
            delay = min(delay * 2, 10.0)


def open_database(
    config: Mapping[str, Any], application_name: str, schema_dirs: Sequence[str] = ()
) -> Any:
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
            from .identity import this_host

            raise CodeOlderThanSchema(this_host(), applied.unknown)
    except BaseException:
        connection.close()
        raise
    return connection


def operator_command(
    connection: Any,
    app_name: str,
    command: str,
    *,
    force: bool = False,
    reason: str | None = None,
    overrides: Mapping[str, str] | None = None,
) -> None:
    """Before a job's own command changes data (``python -m jobs.prune run``): apply the
    runner's rule of a pause (:func:`crontabber.overrides.check_pause`: refused while an
    operator's pause of the job is in force, unless ``force`` with a ``reason``), and record
    the command in the audit trail either way (``--audit``), as the runner's actions are:
    its outcome, ``force``, and the command line's ``overrides`` (secrets masked).

    Raises:
        JobPaused: the job is paused and ``force`` is not given (exit 6).
        PauseOverrideNeedsReason: it is paused and ``force`` comes without ``reason`` (exit 1).
        Both refusals are recorded too.
    """
    from .command import exit_code_for
    from .errors import CrontabberError
    from .overrides import check_pause, given_options
    from .store import StateStore

    store = StateStore(connection)
    options = given_options(overrides or {})
    detail: dict[str, Any] = {
        "command": command,
        "force": force,
        **({"options": options} if options else {}),
    }
    try:
        check_pause(
            app_name,
            store.state(app_name),
            store.now(),
            f"run {command!r}",
            force=force,
            reason=reason,
            override="--force --reason TEXT runs it anyway (recorded in --audit)",
        )
    except CrontabberError as refused:
        outcome = f"refused (exit {exit_code_for(refused)})"
        error = str(refused)[:300]
        _audit_command(store, app_name, reason, {**detail, "outcome": outcome, "error": error})
        raise
    _audit_command(store, app_name, reason, {**detail, "outcome": "done"})


def _audit_command(
    store: Any, app_name: str, reason: str | None, detail: Mapping[str, Any]
) -> None:
    """Record a job's own command on ``app_name`` in the audit trail (``--audit``) through
    ``store`` (a :class:`crontabber.store.StateStore`), as this login (``user@host``), with
    ``reason`` (empty: none) and ``detail``: the command, ``force``, its options, the outcome."""
    from .audit_store import AuditStore
    from .records import AuditEntry, actor

    AuditStore(store).audit(AuditEntry(actor(), "command", app_name, reason or None, dict(detail)))


def database_now(connection: Any) -> dt.datetime:
    """The database's clock (``clock_timestamp()``, UTC): the "now" a job run uses."""
    from .store import StateStore

    return StateStore(connection).now()
