"""The one exception tree of the runner.

Every error the runner raises on purpose derives from :class:`CrontabberError`.
Each subclass carries its data as attributes and builds its own message, so the
CLI can print ``str(exc)`` and map the class to an exit code in one place
(:func:`crontabber.cli.exit_code_for`). Jobs define their own errors beside
them, under the same base.
"""

from __future__ import annotations

import datetime as dt


class CrontabberError(Exception):
    """Base class of every error raised by the runner or its jobs."""


class ConfigurationError(CrontabberError):
    """The configuration is invalid; nothing runs.

    ``where`` names the offending entry or option, ``problem`` says what is
    wrong with it.
    """

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"configuration error in {where}: {problem}")


class JobNotFound(CrontabberError):
    """``--job`` or ``--reset-job`` named a job that is not configured."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        listing = ", ".join(known) if known else "(no jobs configured)"
        super().__init__(f"no configured job is called {name!r}; configured: {listing}")


class JobLockError(CrontabberError):
    """Base of the two ways a job can be held by another runner."""

    app_name: str


class JobLocked(JobLockError):
    """Another transaction holds the job's row lock (SQLSTATE 55P03): exit 2."""

    def __init__(self, app_name: str) -> None:
        self.app_name = app_name
        super().__init__(
            f"{app_name}: its state row is locked by another runner right now"
        )


class JobOngoing(JobLockError):
    """The job's ``ongoing`` marker is set and younger than the max age: exit 3."""

    def __init__(self, app_name: str, since: dt.datetime, by: str | None) -> None:
        self.app_name = app_name
        self.since = since
        self.by = by
        holder = by or "an unknown runner (a crontabber without ongoing_by)"
        super().__init__(
            f"{app_name}: already running since {since:%Y-%m-%d %H:%M:%S} UTC "
            f"on {holder}"
        )


class DatabaseUnavailable(CrontabberError):
    """The state database cannot be reached or refused the login."""

    def __init__(self, target: str, reason: str) -> None:
        self.target = target
        self.reason = reason
        super().__init__(f"cannot use the state database at {target}: {reason}")


class SentryNotConfigured(CrontabberError):
    """``--sentrytest`` was asked for but no DSN is configured."""

    def __init__(self) -> None:
        super().__init__("sentry.dsn is not configured")


class Terminated(BaseException):
    """Raised in the main thread when SIGTERM arrives.

    It derives from ``BaseException`` on purpose, like ``KeyboardInterrupt``:
    a job's ``except Exception`` must not swallow it, yet the runner's
    ``finally`` blocks still run and release the job's lock.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by signal {signum}")
