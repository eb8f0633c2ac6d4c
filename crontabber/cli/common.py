"""What every handler of the command line shares: the :class:`Context` it is called with,
the SIGTERM guard around a run, the audit entry of an action, the secrets to mask and the
logging setup.
"""

from __future__ import annotations

import os
import signal
import sys

from ..command import configure_logging
from ..config.catalog import BrokenEntry, Job, find_job
from ..config.settings import Settings
from ..errors import CodeOlderThanSchema, JobNotFound, Terminated
from ..identity import this_host
from ..runner import Reporters, Runner
from ..store import StateStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, Mapping, TextIO

    from ..records import AuditEntry
    from ..runner import Reporter


class Context:
    """What a handler works with: the settings, the configured jobs, the open state store,
    the parsed command line, where to print, and the jobs entries that did not load
    (:func:`crontabber.config.catalog.load_catalog`). A handler is ``handler(ctx) -> exit code``.
    (A plain class, not a dataclass: see :mod:`crontabber.frozen`.)"""

    def __init__(
        self,
        settings: Settings,
        jobs: list[Job],
        store: StateStore,
        args: argparse.Namespace,
        out: TextIO,
        broken: list[BrokenEntry] | None = None,
    ) -> None:
        self.settings = settings
        self.jobs = jobs
        self.store = store
        self.args = args
        self.out = out
        self.broken: list[BrokenEntry] = [] if broken is None else broken
        # the audit row of an action that takes time (a forced run, a rerun), written when it
        # started (outcome "started"): (its id, the action, its subject)
        self.started: tuple[int, str, str] | None = None

    def broken_entry(self, name: str) -> BrokenEntry | None:
        """The jobs entry that did not load that ``name`` means, if any."""
        return next((entry for entry in self.broken if entry.matches(name)), None)

    def runner(self) -> Runner:
        """The runner, reporting to Sentry when a DSN is set (:meth:`reporters`)."""
        return Runner(
            self.settings, self.jobs, self.store, reporters=self.reporters(), host=this_host()
        )

    def reporters(self) -> Reporters:
        """The runner's Sentry reporters: errors, and each run's check-ins with
        ``sentry.crons`` (one reporter for both; None without)."""
        report = sentry_reporter(self.settings)
        crons = report if self.settings.sentry_dsn and self.settings.sentry_crons else None
        return Reporters(report, crons)

    def refuse_older_code(self) -> None:
        """Before anything claims a job: refuse when the database's schema is newer than this
        code (a newer release migrated it; :attr:`StateStore.unknown_migrations`).

        Raises:
            CodeOlderThanSchema: it is (exit 8).
        """
        if self.store.unknown_migrations:
            raise CodeOlderThanSchema(this_host(), self.store.unknown_migrations)

    def job(self, name: str) -> Job:
        """The configured job ``name`` means (app name or class path).

        Raises:
            ConfigurationError: it names a jobs entry that did not load (its error).
            JobNotFound: none does.
        """
        job = find_job(self.jobs, name)
        if job is None:
            broken = self.broken_entry(name)
            if broken is not None:
                raise broken.error
            raise JobNotFound(name, [j.app_name for j in self.jobs])
        return job

    def state_name(self, name: str) -> str:
        """The app name an operator command means: a configured job's, or a ghost's (a
        state row of a job no longer configured).

        Raises:
            JobNotFound: neither.
        """
        job = find_job(self.jobs, name)
        if job is not None:
            return job.app_name
        if name not in self.store.states():
            raise JobNotFound(name, [j.app_name for j in self.jobs])
        return name

    def audit_start(self, action: str, app_name: str, **detail: Any) -> None:
        """Record ``action`` in the audit trail as it starts (outcome ``started``): a run
        killed, or still going, is in the trail with who started it and why;
        :meth:`audit_end` records how it went, in a row of its own (the trail is
        append-only: its hash chain)."""
        from ..audit_store import AuditStore

        row_id = AuditStore(self.store).audit(
            self.audit_entry(action, app_name, outcome="started", **detail)
        )
        self.started = (row_id, action, app_name)

    def audit_end(self, outcome: str, **detail: Any) -> None:
        """Record how the action :meth:`audit_start` recorded ended (``done``, ``failed
        (exit 5)``, ``stopped by signal (exit 143)``...), naming its first row (``started``)."""
        from ..audit_store import AuditStore

        assert self.started is not None
        row_id, action, app_name = self.started
        self.started = None
        AuditStore(self.store).audit(
            self.audit_entry(action, app_name, outcome=outcome, started=row_id, **detail)
        )

    def subject_name(self, name: str) -> str:
        """What ``--audit-job NAME`` / ``--alerts --audit-job NAME`` means: a configured
        job's or a ghost's app name (:meth:`state_name`), ``*`` for ``all`` or ``*`` (the
        windows and actions of every job: ``--mute all``), or the name as written for a host
        (``host:NAME``: ``--drain``) and for the runner's own rows (``crontabber``: its
        ``old-code`` and ``broken-entry`` alerts).

        Raises:
            JobNotFound: none of these.
        """
        from ..alerts.rules import RUNNER

        if name in ("all", "*"):
            return "*"
        if name.startswith("host:") and len(name) > len("host:") or name == RUNNER:
            return name
        return self.state_name(name)

    def audit_entry(self, action: str, app_name: str, **detail: Any) -> "AuditEntry":
        """:func:`audit_entry` of this command line (with its overrides)."""
        return audit_entry(action, app_name, self.args, self.settings, **detail)


#: The options that override a refusal, recorded with each action that was given one.
OVERRIDES = ("force", "replace", "yes")


def audit_entry(
    action: str, app_name: str, args: Any, settings: Settings | None = None, **detail: Any
) -> "AuditEntry":
    """An audit entry for ``action``: who, the reason, the overrides of a refusal given
    (``overrides``: ``--force`` ...), the command line's option overrides (``options``:
    ``--crontabber.class-X.bucket=...``, secrets masked, from ``settings``), the outcome
    (``done`` unless ``detail`` says otherwise) and ``detail``."""
    from ..records import AuditEntry, actor

    overrides = [f"--{name}" for name in OVERRIDES if getattr(args, name, False)]
    options = list(settings.sources.given) if settings is not None else []
    detail = {
        "outcome": "done",
        **({"overrides": overrides} if overrides else {}),
        **({"options": options} if options else {}),
        **detail,
    }
    return AuditEntry(actor(), action, app_name, getattr(args, "reason", None) or None, detail)


def sentry_reporter(settings: Settings) -> "Reporter":
    """The Sentry reporter, imported only when a DSN is set (an idle tick needs none)."""
    if not settings.sentry_dsn:
        return lambda exc, job: None
    from ..sentry import SentryReporter

    return SentryReporter(settings.sentry_dsn, secret_values_of(settings))


class terminate_on_sigterm:
    """While active, SIGTERM raises :class:`Terminated` in the main thread, so
    the runner's ``finally`` blocks release the job's lock.

    Processes a job forks (a multiprocessing pool) get the default SIGTERM
    back: the handler is the runner's, not theirs.
    """

    def __enter__(self) -> None:
        self._previous = signal.signal(signal.SIGTERM, self._raise)

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGTERM, self._previous)

    @staticmethod
    def _raise(signum: int, frame: object) -> None:
        raise Terminated(signum)


def _default_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


os.register_at_fork(after_in_child=_default_sigterm)


def secret_values_of(settings: Settings, overrides: Mapping[str, str] | None = None) -> set[str]:
    """The secrets to mask in logs, stored errors and Sentry events: the environment's, the
    command line's and the INI file's (by name, a job's options included, and URL passwords),
    the database password and DSN, the Sentry DSN, the SMTP password, and what the alert
    targets read from the environment (a webhook address such as Slack's is a secret, whatever
    its variable is called)."""
    from ..redaction import secret_values

    ini = {
        ".".join((*value.path, value.name)): value.value for value in settings.sources.ini.values
    }
    secrets = secret_values(os.environ, overrides or {}, ini)
    alerts = settings.alerts
    secrets.update(
        secret_values(
            {
                "dsn": settings.sentry_dsn,
                "password": settings.database.password,
                "database_dsn": settings.database.dsn,
                "smtp_password": alerts.smtp.password if alerts.smtp else "",
                **{
                    f"{name}_secret": os.environ.get(name, "")
                    for target in alerts.targets
                    for name in target.variables()
                },
            },
            {"user": settings.database.user, "dbname": settings.database.dbname},
        )
    )
    return secrets


def setup_logging(settings: Settings, overrides: Mapping[str, str] | None = None) -> None:
    """Log to stderr at the configured level (stdout is for command output), every line
    redacted (:mod:`crontabber.redaction`): the secrets of the environment, the command line
    and the settings never reach a log, at DEBUG either."""
    configure_logging(
        sys.stderr, settings.log_level, settings.log_format, secret_values_of(settings, overrides)
    )
