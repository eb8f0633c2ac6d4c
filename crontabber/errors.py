"""The one exception tree of the runner.

Every error the runner raises on purpose derives from :class:`CrontabberError`.
Each subclass carries its data as attributes and builds its own message, so the
CLI can print ``str(exc)`` and map the class to an exit code in one place
(:func:`crontabber.command.exit_code_for`). Jobs define their own errors beside
them, under the same base.
"""

from __future__ import annotations

import datetime as dt

from .formats import counted, minute_text, pause_end, short_span, utc_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported by a tick
    from typing import Sequence


class CrontabberError(Exception):
    """Base class of every error raised by the runner or its jobs."""


class ConfigurationError(CrontabberError):
    """The configuration, or the command line's arguments, are invalid; nothing runs (exit 1).

    ``where`` names the offending entry or option, ``problem`` says what is
    wrong with it. An argument (``where`` is ``--release``, ``--until``, or "the command
    line") reads ``--release: needs --reason TEXT``: a missing ``--reason`` is no
    configuration error; an entry or option of the configuration reads ``configuration
    error in crontabber.jobs: ...``.
    """

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        argument = where.startswith("--") or where == "the command line"
        super().__init__(
            f"{where}: {problem}" if argument else f"configuration error in {where}: {problem}"
        )


class ConfigurationRefused(ConfigurationError):
    """``--configtest`` refuses the configuration for several reasons (``lines``, each a
    whole message of one line): printed one line each (exit 1)."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = tuple(lines)
        self.where = "--configtest"
        self.problem = self.lines[0]
        CrontabberError.__init__(self, "\n".join(self.lines))


class JobNotFound(CrontabberError):
    """``--job`` or ``--reset-job`` named a job that is not configured."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        listing = ", ".join(known) if known else "(no jobs configured)"
        super().__init__(f"no configured job is called {name!r}; configured: {listing}")


class HostNotFound(CrontabberError):
    """``--drain`` or ``--undrain`` named a host that never ticked (a typo drains nothing)."""

    def __init__(self, host: str, known: list[str]) -> None:
        self.host = host
        self.known = known
        listing = ", ".join(known) if known else "(no host has ticked yet)"
        super().__init__(f"no host called {host!r} has ticked; hosts: {listing}")


class HostDrained(CrontabberError):
    """The claiming host is drained (``--drain``): it claims nothing new until undrained."""

    def __init__(self, host: str) -> None:
        self.host = host
        super().__init__(
            f"this host ({host}) is drained: it claims nothing new "
            f"(--list-jobs shows by whom and why; --undrain {host} ends it)"
        )


class RunNotFound(CrontabberError):
    """``--show-error``, ``--history`` or ``--logs NAME --run ID`` named a run the job's log does
    not hold
    (a wrong id, or its rows were pruned by ``prune-run-log``)."""

    def __init__(self, app_name: str, run_id: int) -> None:
        self.app_name = app_name
        self.run_id = run_id
        super().__init__(
            f"{app_name}: no run {run_id} in the run log (crontabber_log) or the "
            f"run ledger (crontabber_run); --history {app_name} lists its runs"
        )


class JobLockError(CrontabberError):
    """Base of the two ways a job can be held by another runner."""

    app_name: str


class JobLocked(JobLockError):
    """Another transaction holds the job's row lock (SQLSTATE 55P03): exit 2."""

    def __init__(self, app_name: str) -> None:
        self.app_name = app_name
        super().__init__(f"{app_name}: its state row is locked by another runner right now")


class JobOngoing(JobLockError):
    """The job's ``ongoing`` marker is live (held by a run that is alive, as far
    as anyone can tell): exit 3. ``heartbeat`` is the holder's last renewal
    (None for a crontabber 0.18 holder)."""

    def __init__(
        self,
        app_name: str,
        since: dt.datetime,
        by: str | None,
        heartbeat_age: float | None = None,
    ) -> None:
        self.app_name = app_name
        self.since = since
        self.by = by
        self.heartbeat_age = heartbeat_age
        holder = by or "an unknown runner (a crontabber without ongoing_by)"
        beat = "" if heartbeat_age is None else f" (last heartbeat {short_span(heartbeat_age)} ago)"
        super().__init__(f"{app_name}: already running since {utc_text(since)} on {holder}{beat}")


class MarkerIsLive(JobLockError):
    """An operator action (``--reset-job``, ``--release``) would break a live
    lease: refused, exit 3."""

    def __init__(self, app_name: str, action: str, holder: str) -> None:
        self.app_name = app_name
        self.action = action
        super().__init__(
            f"{app_name}: refusing to {action}: it is running on {holder}; "
            f"wait for it, or stop that process (its lease then expires)"
        )


class JobPaused(CrontabberError):
    """An action refused because of an operator's pause (exit 6): another ``--pause``
    without ``--replace``, or ``--rerun`` without ``--force``. Names the pause."""

    def __init__(
        self, app_name: str, action: str, until: object, by: object, reason: object, override: str
    ) -> None:
        self.app_name = app_name
        self.action = action
        until_text = pause_end(until) if isinstance(until, dt.datetime) else f"until {until}"
        super().__init__(
            f"{app_name}: refusing to {action}: paused {until_text} by {by}: {reason}; {override}"
        )


class MuteInForce(JobPaused):
    """A second ``--mute`` of a scope refused (exit 6, as a second ``--pause``): a
    maintenance window of it is in force. Names the window and ``--replace``."""

    def __init__(
        self, scope: str, until: object, by: object, reason: object, override: str
    ) -> None:
        self.app_name = scope
        self.action = "mute it again"
        until_text = minute_text(until) if isinstance(until, dt.datetime) else str(until)
        CrontabberError.__init__(
            self,
            f"{scope}: refusing to mute it again: muted until {until_text} by {by}: {reason}; "
            f"{override}",
        )


class DrainInForce(JobPaused):
    """A second ``--drain`` of a host refused (exit 6, as a second ``--pause`` or ``--mute``):
    another operator's drain is in force. Names it and ``--replace``."""

    def __init__(self, host: str, until: object, by: object, reason: object) -> None:
        self.app_name = f"host:{host}"
        self.action = "drain it again"
        until_text = minute_text(until) if isinstance(until, dt.datetime) else "until --undrain"
        if isinstance(until, dt.datetime):
            until_text = f"until {until_text}"
        CrontabberError.__init__(
            self,
            f"{host}: refusing to drain it again: drained {until_text} by {by}: {reason}; "
            f"--drain {host} --replace replaces that drain",
        )


class PauseOverrideNeedsReason(CrontabberError):
    """``--force`` given to go past an operator's pause, without ``--reason``: refused
    (exit 1), whatever ``require_reason`` says, as a pause itself needs one. The reason goes
    to the audit trail beside the pause it overrides. Names the pause."""

    def __init__(self, app_name: str, until: object, by: object, reason: object) -> None:
        self.app_name = app_name
        until_text = pause_end(until) if isinstance(until, dt.datetime) else f"until {until}"
        super().__init__(
            f"{app_name}: --force overrides its pause ({until_text} by {by}: {reason}) "
            f"only with --reason TEXT (recorded in --audit beside the pause)"
        )


class LeaseLost(CrontabberError):
    """A run lost its hold on the job: another run took it over (its lease
    had expired) or an operator released it. Its state writes were refused
    (fencing): it is recorded as fenced off, and the runner exits 4."""

    def __init__(self, app_name: str, run_id: int, why: str) -> None:
        self.app_name = app_name
        self.run_id = run_id
        self.why = why
        super().__init__(f"{app_name}: run {run_id} was fenced off: {why}")


class RunAbandoned(CrontabberError):
    """A run whose holder died (``kill -9``, a lost host) without recording its end. Never
    raised: its name is the ``exc_type`` of the log row that records the run, written by
    whoever takes the job over, releases it or resets it (``store.log_abandoned``)."""


class JobTimeout(CrontabberError):
    """A job ran past its ``timeout``: it was stopped (SIGTERM, then SIGKILL)."""

    def __init__(self, app_name: str, seconds: float) -> None:
        self.app_name = app_name
        self.seconds = seconds
        super().__init__(f"timeout: {app_name} ran longer than its timeout of {seconds:g} s")


class JobProcessDied(CrontabberError):
    """The job's child process ended without reporting how the job ended
    (a segfault, an OOM kill, ``os._exit``)."""

    def __init__(self, app_name: str, how: str) -> None:
        self.app_name = app_name
        self.how = how
        super().__init__(f"{app_name}: the job's process died: {how}")

    @property
    def by_signal(self) -> bool:
        """Whether a signal killed it (the run was stopped rather than failed)."""
        return self.how.startswith("killed by signal")


class WorkRefused(CrontabberError):
    """A job's work started and stopped at something it will not act on (an input it checks
    only once it reads it: a stale or corrupt report, say): the work ran and failed (exit 5,
    as any failed work), not a configuration a command could check first (exit 1). Jobs
    subclass it for their own refusals."""


class DatabaseUnavailable(CrontabberError):
    """The state database cannot be reached or refused the login."""

    def __init__(self, target: str, reason: str) -> None:
        self.target = target
        self.reason = reason
        super().__init__(f"cannot use the state database at {target}: {reason}")


class DatabaseReadOnly(DatabaseUnavailable):
    """The server reached is a read-only standby (in recovery): nothing can be claimed or
    recorded there. A standby promoted later takes writes; until then this is the database
    being unavailable (exit 1, ``--nagios`` CRITICAL), said in one line naming the server."""

    def __init__(self, target: str, server: str, behind: str | None = None) -> None:
        self.server = server
        self.behind = behind  # the server a pooler at ``server`` passed the session to
        if behind is None:
            advice = (
                f"{server} is a read-only standby (in recovery): name the "
                "primary, or list every server in host with "
                "target_session_attrs = read-write"
            )
        else:  # behind PgBouncer, libpq's multi-host form would only reach the pooler again
            advice = (
                f"{server} is a pooler or proxy (PgBouncer) in front of {behind}, a read-only"
                " standby (in recovery): point its entry for this database at the primary and"
                " reload it (docs/deploy.md#postgresql-a-primary-and-a-standby)"
            )
        super().__init__(target, advice)


class SchemaNeedsOwner(DatabaseUnavailable):
    """The database lacks part of the schema (``pending``: ``crontabber/schema.sql`` for a
    schema new to it, else migration names, ``0026_rerun_parallel``) and this ``login`` may
    not apply it (a runner login has no DDL rights): the schema's ``owner`` runs one command
    first (docs/deploy.md#a-first-deploy). Exit 1, as the database unavailable: nothing ran."""

    def __init__(self, target: str, pending: Sequence[str], login: str, owner: str | None) -> None:
        self.pending = tuple(pending)
        self.login = login
        self.owner = owner
        what = (
            f"migration {self.pending[0]} needs"
            if len(self.pending) == 1
            else f"{counted(len(self.pending), 'migration')} ({', '.join(self.pending)}) need"
        )
        if any(name.endswith("/schema.sql") for name in self.pending):
            what = f"the schema ({', '.join(self.pending)}) needs"
        who = owner or "the schema's owner"
        super().__init__(
            target,
            f"{what} the schema's owner ({who}); this login ({login}) may not apply it:"
            f" run once RESOURCE_POSTGRESQL_USER={who} python -m crontabber --admin.conf=FILE"
            " --list-jobs (FILE: this host's INI; the owner's password in"
            " RESOURCE_POSTGRESQL_PASSWORD), then the ticks (docs/deploy.md#a-first-deploy)",
        )


class NotPermitted(CrontabberError):
    """The database user may not do what was asked (SQLSTATE 42501): its role lacks the right,
    as deployed (docs/deploy.md#roles: a runner login may tick and run, not pause, reset,
    release, mark, mute or drain; a read-only one only reads). Exit 1."""

    def __init__(self, user: str, doing: str, operators: bool = True) -> None:
        self.user = user
        self.doing = doing
        hint = "use an operator login" if operators else "which login may is in"
        super().__init__(
            f"this database user ({user}) may not {doing}; {hint} (docs/deploy.md#roles)"
        )


class LockWaitTimedOut(CrontabberError):
    """A lock the action needed stayed held by another session for the functions' whole wait
    (SQLSTATE 55P03 after ``lock_timeout``, migration 0028): nothing was changed. ``holders``
    describe the sessions holding locks on the tables it waited for (one line each, from
    ``pg_locks``; empty when they were gone by the time they were looked up). Exit 2."""

    def __init__(self, doing: str, holders: tuple[str, ...]) -> None:
        self.doing = doing
        self.holders = holders
        held = (
            f"held by {'; '.join(holders)}" if holders else "its holder has gone since: try again"
        )
        super().__init__(
            f"could not {doing}: another session held a lock it needs for over 5 s ({held}); "
            "nothing was "
            "changed (a session that stays: its owner or a superuser ends it with "
            "pg_terminate_backend(PID))"
        )


class AuditChainBroken(CrontabberError):
    """``--verify-audit``: the audit trail's hash chain is broken at row ``row_id`` (a row
    changed, or rows missing before it or after it): someone with the owner's rights changed
    the trail. Exit 1."""

    def __init__(self, row_id: int | None, problem: str) -> None:
        self.row_id = row_id
        self.problem = problem
        super().__init__(f"the audit trail's hash chain is broken: {problem}")


class CodeOlderThanSchema(CrontabberError):
    """The database's schema is newer than this host's code: a newer release migrated it,
    and this host has not been upgraded. It claims no job (its runs would write to a schema it
    does not know); reading is fine. Its ticks record it, so ``--nagios``, the dashboard and
    an ``old-code`` alert name it. Exit 8."""

    def __init__(self, host: str, unknown: tuple[int, ...]) -> None:
        self.host = host
        self.unknown = unknown
        listed = ", ".join(f"{number:04d}" for number in unknown)
        super().__init__(
            f"{host} runs code older than the database's schema (it lacks "
            f"migration {listed}): it claims no job until it is upgraded"
        )


class SentryNotConfigured(CrontabberError):
    """``--sentrytest`` was asked for but no DSN is configured."""

    def __init__(self) -> None:
        super().__init__("sentry.dsn is not configured")


class MetricsFileNotWritten(CrontabberError):
    """``--metrics-file`` could not be written (the tick itself ran and was recorded)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot write the metrics file {path}: {reason}")


class Terminated(BaseException):
    """Raised in the main thread when SIGTERM arrives.

    It derives from ``BaseException`` on purpose, like ``KeyboardInterrupt``:
    a job's ``except Exception`` must not swallow it, yet the runner's
    ``finally`` blocks still run and release the job's lock.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by signal {signum}")
