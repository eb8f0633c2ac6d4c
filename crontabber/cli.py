"""The command line: parse, call, print. Exit codes: :mod:`crontabber.command` (one table).

    python -m crontabber --admin.conf=crontabber.ini [--metrics-file PATH]   run due jobs
    python -m crontabber --list-jobs [NAME ...] [--wide] | --nagios | --job NAME [--force]
                         --history NAME [--limit N | --run ID] | --show-error NAME [--run ID]
                         --logs NAME [--run ID]
                         --reset-job NAME | --release NAME | --audit-ghosts | --configtest
                         --sentrytest | --version | --help
    python -m crontabber --crontabber.error_retry_time=60 ...   override any option
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping, TextIO

from . import __version__, cli_monitor
from .catalog import Job, configuration_notes, job_options, load_jobs, schema_dirs
from .command import CommandParser, ExitCode, Formatter, exit_code_for, exit_codes_text, split_overrides
from .config import Settings, effective_lines, iter_option_lines, load_settings, runner_options
from .errors import (
    ConfigurationError,
    CrontabberError,
    DatabaseUnavailable,
    JobNotFound,
    SentryNotConfigured,
    Terminated,
)
from .runner import Runner, Status, first_lock_error
from .store import StateStore, open_store

if TYPE_CHECKING:
    from .runner import Reporter

# report and sentry are imported where used: an idle cron tick needs neither.

logger = logging.getLogger("crontabber")


MODES = ("list_jobs", "nagios", "history", "show_error", "logs", "version", "reset_job", "release",
         "explain", "pause", "resume", "rerun", "mark_success", "audit", "audit_ghosts",
         "configtest", "sentrytest", "job")


#: The actions that change a job (``--reason`` is recorded with each).
ACTIONS = ("reset_job", "release", "pause", "resume", "rerun", "mark_success", "job")

#: The actions that change or redo a job's data or state and need ``--reason`` unless
#: ``require_reason`` is False (whoever reads the audit trail needs the why).
DESTRUCTIVE = ("reset_job", "release", "pause", "rerun", "mark_success")


def require_reason(mode: str, args: argparse.Namespace, settings: Settings) -> None:
    """Refuse a destructive action without ``--reason`` (a ``--rerun --dry-run`` changes
    nothing and needs none).

    Raises:
        ConfigurationError: naming the action and how to make the reason optional.
    """
    if mode not in DESTRUCTIVE or (args.reason or "").strip():
        return
    if mode == "rerun" and args.dry_run:
        return
    if mode == "pause" or settings.require_reason:
        option = "--" + mode.replace("_", "-")
        why = ("it is shown to whoever looks" if mode == "pause" else
               "it goes to the audit trail; require_reason = False in [crontabber] makes it optional")
        raise ConfigurationError(option, f"needs --reason TEXT ({why})")

#: Each option that refines a mode, and the modes it refines. Given without one of them it
#: is refused with one line: crontabber would have ignored it and run a whole cron tick (a
#: stray ``--until 2h`` ran every due job).
DETAILS: dict[str, tuple[tuple[str, ...], str]] = {
    "wide": (("list_jobs",), "--list-jobs"),
    "limit": (("history", "audit"), "--history NAME or --audit"),
    "run": (("show_error", "history", "logs"), "--show-error NAME, --history NAME or --logs NAME"),
    "until": (("pause",), "--pause NAME"),
    "date": (("rerun",), "--rerun NAME"),
    "to": (("rerun",), "--rerun NAME"),
    "dry_run": (("rerun",), "--rerun NAME"),
    "yes": (("rerun",), "--rerun NAME"),
    "audit_job": (("audit",), "--audit"),
    "force": (("job", "rerun"), "--job NAME or --rerun NAME"),
    "replace": (("pause",), "--pause NAME"),
    "reason": (ACTIONS, "an action (--pause, --resume, --rerun, --mark-success, --release, "
               "--reset-job, --job)"),
    "metrics_file": (("run",), "a tick (no mode option)"),
}


def refuse_stray_options(mode: str, args: argparse.Namespace) -> None:
    """Refuse two modes at once, and an option given without a mode it refines.

    Raises:
        ConfigurationError: naming the option and the mode(s) it belongs to.
    """
    modes = [m for m in MODES if getattr(args, m) not in (None, False, "")]
    if len(modes) > 1:
        named = " and ".join("--" + m.replace("_", "-") for m in modes)
        raise ConfigurationError(named, "one mode at a time")
    for name, (owners, where) in DETAILS.items():
        if getattr(args, name) not in (None, False, "") and mode not in owners:
            raise ConfigurationError("--" + name.replace("_", "-"),
                                     f"only means something with {where}")
    if args.wide and args.json:
        raise ConfigurationError("--wide", "is for the text table; --json has every field")


def build_parser(epilog: str = "") -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="python -m crontabber",
        description="Run due jobs once (system cron starts this every few minutes on "
        "every host; PostgreSQL row locks make each due job run once).",
        epilog=epilog,
        formatter_class=Formatter,
    )
    parser.add_argument("--admin.conf", dest="conf", metavar="FILE",
                        help="the INI file (default: ./config/crontabber.ini or ./crontabber.ini)")
    _add_modes(parser.add_argument_group("modes (the first in this order wins, as in crontabber)"))
    _add_details(parser.add_argument_group("details of the modes"))
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document instead of text (see crontabber/jsonout.py)")
    parser.add_argument("--metrics-file", metavar="PATH", default="",
                        help="with a tick (no mode): write the state as a Prometheus text file "
                        "there, atomically (or set crontabber.metrics_file)")
    return parser


def _add_modes(modes: "argparse._ArgumentGroup") -> None:
    """The modes, in :data:`MODES` order (and ``--force``, which goes with ``--job``)."""
    modes.add_argument("-l", "--list-jobs", nargs="*", metavar="NAME", default=None,
                       help="show every job's state (or only the jobs named), 100 columns wide; "
                       "--wide: every column, nothing cut")
    modes.add_argument("-n", "--nagios", action="store_true",
                       help="nagios check: failing, overdue, paused jobs, hosts silent, skewed "
                       "or on different versions; status line, details, perfdata; exit 0/1/2")
    modes.add_argument("--history", metavar="NAME", default="",
                       help="the job's last runs, newest first, one line each (--limit N runs, "
                       "default 20); --run ID: each log row (interval) of that run")
    modes.add_argument("--show-error", metavar="NAME", default="",
                       help="the full error and traceback of the job's last failed run "
                       "(--run ID: of that run), with the end of what it logged and printed")
    modes.add_argument("--logs", metavar="NAME", default="",
                       help="what the job's newest run (--run ID: that run) logged and printed, "
                       "as its runner kept it (the last output_tail_bytes, secrets masked)")
    modes.add_argument("-v", "--version", action="store_true", help="print the version")
    modes.add_argument("-r", "--reset-job", metavar="NAME", default="",
                       help="forget a job's state (it runs as if new); a ghost's too; "
                       "refused while the job runs")
    modes.add_argument("--release", metavar="NAME", default="",
                       help="clear a dead or expired 'ongoing' marker, keeping the job's "
                       "history; refused while its lease is live")
    modes.add_argument("--explain", metavar="NAME", default="",
                       help="why the job would or would not run now: paused, running (lease), "
                       "due, parents, error backoff, backfill intervals pending")
    modes.add_argument("--pause", metavar="NAME", default="",
                       help="cron ticks skip the job until --until (default 24 h) or --resume; "
                       "needs --reason")
    modes.add_argument("--resume", metavar="NAME", default="", help="end a job's pause")
    modes.add_argument("--rerun", metavar="NAME", default="",
                       help="run a backfill job for the days --date [--to] (the dates it is "
                       "called with, UTC), oldest first; last success and next run unchanged")
    modes.add_argument("--mark-success", metavar="NAME", default="",
                       help="record the job as just succeeded (errors cleared, pending backfill "
                       "skipped), as Socorro's cronmarksuccess")
    modes.add_argument("--audit", action="store_true",
                       help="list operator actions (force, rerun, reset, release, pause, resume, "
                       "mark-success): who, when, what, why")
    modes.add_argument("--audit-ghosts", action="store_true",
                       help="list state rows of jobs that are no longer configured")
    modes.add_argument("--configtest", action="store_true",
                       help="check the configuration and exit (no database)")
    modes.add_argument("--sentrytest", action="store_true", help="send a test message to Sentry")
    modes.add_argument("-j", "--job", metavar="NAME", default="",
                       help="run one job (app_name or module.Class) if due")
    modes.add_argument("-f", "--force", action="store_true",
                       help="with --job: run even if not due or a parent has not run")


def _add_details(details: "argparse._ArgumentGroup") -> None:
    """The options that refine a mode."""
    details.add_argument("--reason", metavar="TEXT", default="",
                         help="why (required by --pause; recorded with any operator action)")
    details.add_argument("--replace", action="store_true",
                         help="with --pause: replace a pause still in force (refused otherwise, "
                         "naming it: exit 6)")
    details.add_argument("--until", metavar="WHEN", default="",
                         help="with --pause: 30m, 2h, 3d, or a UTC date/time (2026-11-24T06:00)")
    details.add_argument("--date", metavar="YYYY-MM-DD", default="", help="with --rerun: the first day")
    details.add_argument("--to", metavar="YYYY-MM-DD", default="", help="with --rerun: the last day")
    details.add_argument("--dry-run", action="store_true",
                         help="with --rerun: list the intervals it would run, run nothing")
    details.add_argument("--yes", action="store_true",
                         help="with --rerun: run more intervals than rerun_confirm_over (31)")
    details.add_argument("--audit-job", metavar="NAME", default="",
                         help="with --audit: one job's actions only")
    details.add_argument("--wide", action="store_true", help="with --list-jobs: every column")
    details.add_argument("--limit", type=int, metavar="N", default=None,
                         help="with --history: how many runs; with --audit: how many actions "
                         "(default 20)")
    details.add_argument("--run", type=int, metavar="ID", default=None,
                         help="with --show-error, --history or --logs: that run")


def help_epilog(argv: list[str]) -> str:
    """Every option with its default; job options too when the config loads."""
    lines = ["options (--NAME=VALUE; environment: NAME upper-cased, '.' and '-' as '_'):"]
    lines += [f"  --{name} (default {value})  {doc}" for name, value, doc
              in iter_option_lines(runner_options(), (), None)]
    try:
        args, rest = build_parser().parse_known_args([a for a in argv if a not in ("-h", "--help")])
        settings = load_settings(args.conf, split_overrides(rest))
        for job in load_jobs(settings):
            lines.append(f"options of job {job.app_name} ({job.class_path}):")
            lines += [f"  --{name} (default {value})  {doc}" for name, value, doc
                      in iter_option_lines(job_options(job.cls), job.namespace, None)]
    except CrontabberError as exc:
        lines.append(f"(job options not shown: {exc})")
    lines.append(exit_codes_text())
    return "\n".join(lines)


def main(argv: list[str], stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    """Run the command line; return the exit code."""
    try:
        epilog = help_epilog(argv) if {"-h", "--help"} & set(argv) else ""
        args, rest = build_parser(epilog).parse_known_args(argv)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except ConfigurationError as exc:
        print(f"crontabber: {exc}", file=stderr)
        return ExitCode.ERROR
    mode = next((m for m in MODES if getattr(args, m) not in (None, False, "")), "run")
    if mode == "version":  # no configuration or database needed
        print(__version__, file=stdout)
        return ExitCode.OK
    try:
        return dispatch(mode, args, rest, stdout)
    except (CrontabberError, KeyboardInterrupt, Terminated) as exc:
        if mode == "nagios":
            return cli_monitor.nagios_failure(exc, args, stdout)
        print(f"crontabber: {exc or type(exc).__name__}", file=stderr)
        return exit_code_for(exc)


def dispatch(mode: str, args: argparse.Namespace, rest: list[str], stdout: TextIO) -> int:
    refuse_stray_options(mode, args)
    overrides = split_overrides(rest)
    settings = load_settings(args.conf, overrides)
    setup_logging(settings, overrides)
    jobs = load_jobs(settings)  # also refuses unknown option names (crontabber.known)
    require_reason(mode, args, settings)
    if mode == "configtest":
        print(f"database: {settings.database.target} (password "
              f"{'set' if settings.database.password else 'not set'})", file=stdout)
        print("settings (value, where from; a job's options when set):", file=stdout)
        for name, value, origin in effective_lines(runner_options(), (), settings.sources):
            print(f"  {name} = {value}  [{origin}]", file=stdout)
        for job in jobs:
            for name, value, origin in effective_lines(job_options(job.cls), job.namespace,
                                                       settings.sources, defaults=False):
                print(f"  {name} = {value}  [{origin}]", file=stdout)
        for note in configuration_notes(settings.sources, jobs):
            print(f"note: {note}", file=stdout)
        print(f"configtest OK: {len(jobs)} jobs", file=stdout)
        return ExitCode.OK
    if mode == "sentrytest":
        if not settings.sentry_dsn:
            raise SentryNotConfigured()
        from .sentry import SentryReporter

        event_id = SentryReporter(settings.sentry_dsn, secret_values_of(settings)).send_test_message()
        print(f"Sentry test message sent: {event_id}", file=stdout)
        return ExitCode.OK
    store = open_store(settings.database, schema_dirs(jobs))
    try:
        handler = handler_for(mode)
        try:
            return handler(settings, jobs, store, args, stdout)
        except (CrontabberError, KeyboardInterrupt, Terminated) as exc:
            if mode in ACTIONS:
                _audit_refusal(store, mode, args, exc)
            raise
    finally:
        store.close()


def _audit_refusal(store: StateStore, mode: str, args: Any, exc: BaseException) -> None:
    """Record an operator action that was refused or failed, with its exit code (the done
    ones are recorded by the action itself): the audit trail says what happened, not what
    was asked. Never raises: the refusal is what the operator must see."""
    from .cli_operate import audit_entry

    name = str(getattr(args, mode, "") or "")
    if not name or isinstance(exc, (DatabaseUnavailable, JobNotFound)):
        return
    action = {"reset_job": "reset", "mark_success": "mark-success",
              "job": "force" if args.force else "job"}.get(mode, mode)
    try:
        store.audit(audit_entry(action, name, args, outcome=f"refused (exit {exit_code_for(exc)})",
                                error=str(exc)[:300]))
    except CrontabberError:
        logger.debug("could not record the refusal of %s %s", action, name, exc_info=True)


def audit_ghosts(settings: Settings, jobs: list[Job], store: StateStore, args: Any, out: TextIO) -> int:
    from . import report

    found = report.ghosts(jobs, store.states())
    if not found:
        print("No ghosts: every job in the state database is configured.", file=out)
        return ExitCode.OK
    print("Found the following in the state database but not available as a configured job:",
          file=out)
    for name in found:
        print(f"\t{name}", file=out)
    return ExitCode.OK


def run_one(settings: Settings, jobs: list[Job], store: StateStore, args: Any, out: TextIO) -> int:
    from .cli_operate import audit_entry, configured

    job = configured(jobs, args.job)
    if args.force:
        if job.is_backfill and not _backfill_pending(job, store):
            print(f"{job.app_name}: nothing to backfill (every interval up to now is done); "
                  f"--rerun {job.app_name} --date YYYY-MM-DD redoes a past day", file=out)
            return ExitCode.NOT_RUN
    with terminate_on_sigterm():
        result = runner_for(settings, jobs, store).run_job(job, force=args.force)
    if result.error is not None:
        raise result.error  # locked, running elsewhere, fenced: audited as refused by dispatch
    if args.force:  # recorded once it ran, with how it went (a refused one said "done")
        store.audit(audit_entry("force", job.app_name, args, outcome={
            Status.FAILED: "done: the job failed (exit 5)"}.get(result.status, "done")))
    if result.status is Status.PAUSED:
        print(f"{job.app_name}: not run: {result.detail}; --force runs it anyway", file=out)
        return ExitCode.PAUSED
    if result.status is Status.SKIPPED:
        hint = f"; --rerun {job.app_name} --date YYYY-MM-DD redoes a past day" \
            if job.is_backfill and result.detail == "not due yet" else ""
        print(f"{job.app_name}: skipped ({result.detail}); --force runs it anyway{hint}", file=out)
        return ExitCode.NOT_RUN  # a script asking for this job learns that nothing ran
    if result.status is Status.FAILED:
        # Recorded (see --list-jobs, --nagios); a script asking for this job learns it too.
        print(f"{job.app_name}: failed: {result.detail}", file=out)
        return ExitCode.JOB_FAILED
    for line in _unit_lines(job, result):
        print(line, file=out)
    return ExitCode.OK


def _unit_lines(job: Job, result: Any) -> list[str]:
    """What the run said it did: its summary (an ordinary job), or one line per interval
    (a backfill job); nothing when the job gave no summary."""
    if not any(text for _, text in result.summaries):
        return []
    if not job.is_backfill:
        return [f"{job.app_name}: ran (run {result.run_id}): {result.summary}"]
    return [f"{job.app_name}: ran (run {result.run_id}):"] + [
        f"  {when:%Y-%m-%d %H:%M} UTC: {text or 'done (no summary)'}" for when, text in result.summaries]


def _backfill_pending(job: Job, store: StateStore) -> bool:
    from .scheduling import backfill_dates

    state = store.state(job.app_name)
    last_success = state.last_success if state is not None else None
    return bool(backfill_dates(last_success, job.schedule, store.now()))


def run_all(settings: Settings, jobs: list[Job], store: StateStore, args: Any, out: TextIO) -> int:
    runner = Runner(settings, jobs, store, report=_sentry(settings),
                    tick=cli_monitor.fleet_tick())  # a tick records itself: --nagios watches
    with terminate_on_sigterm():
        results = runner.run_all()
    counts = {status: sum(r.status is status for r in results) for status in Status}
    logger.info("done: %s", ", ".join(f"{n} {s.value}" for s, n in counts.items() if n) or "no jobs")
    cli_monitor.write_metrics(settings, jobs, store, args)
    lock = first_lock_error(results)
    return exit_code_for(lock) if lock else ExitCode.OK


def runner_for(settings: Settings, jobs: list[Job], store: StateStore) -> Runner:
    """The runner of the operator commands (Sentry reporting when a DSN is set)."""
    return Runner(settings, jobs, store, report=_sentry(settings))


def _sentry(settings: Settings) -> "Reporter":
    """The Sentry reporter, imported only when a DSN is set."""
    if not settings.sentry_dsn:
        return lambda exc, job: None
    from .sentry import SentryReporter

    return SentryReporter(settings.sentry_dsn, secret_values_of(settings))


# Each mode's handler as "module:function", imported when its mode runs: a plain
# cron tick (mode "run") loads none of the operator commands' modules.
MODE_HANDLERS: dict[str, str] = {
    "list_jobs": "cli_inspect:list_jobs",
    "history": "cli_inspect:history",
    "show_error": "cli_inspect:show_error",
    "logs": "cli_inspect:logs",
    "nagios": "cli_monitor:nagios",
    "reset_job": "cli_operate:reset_job",
    "release": "cli_operate:release",
    "explain": "cli_operate:explain",
    "pause": "cli_operate:pause",
    "resume": "cli_operate:resume",
    "rerun": "cli_operate:rerun",
    "mark_success": "cli_operate:mark_success",
    "audit": "cli_operate:audit",
    "audit_ghosts": "cli:audit_ghosts",
    "job": "cli:run_one",
    "run": "cli:run_all",
}


def handler_for(mode: str) -> Callable[..., int]:
    """The function that carries out ``mode`` (a key of :data:`MODE_HANDLERS`)."""
    module, function = MODE_HANDLERS[mode].split(":")
    handler: Callable[..., int] = getattr(importlib.import_module(f"{__package__}.{module}"), function)
    return handler


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
    """The secrets to mask in logs and Sentry events: the environment's and the command
    line's (by name, and URL passwords), the database password and the Sentry DSN."""
    from .redaction import secret_values

    secrets = secret_values(os.environ, overrides or {})
    secrets.update(secret_values({"dsn": settings.sentry_dsn, "password": settings.database.password},
                                 {"user": settings.database.user, "dbname": settings.database.dbname}))
    return secrets


def setup_logging(settings: Settings, overrides: Mapping[str, str] | None = None) -> None:
    """Log to stderr at the configured level (stdout is for command output), every line
    redacted (:mod:`crontabber.redaction`): the secrets of the environment, the command line
    and the settings never reach a log, at DEBUG either."""
    from .redaction import redact_handlers

    logging.basicConfig(stream=sys.stderr, level=settings.log_level, format=settings.log_format)
    redact_handlers(secret_values_of(settings, overrides), settings.log_format)
    # everett logs every raw value it reads at DEBUG, secrets included.
    logging.getLogger("everett").setLevel(logging.WARNING)
    # Client libraries log every request at INFO, and each retry at WARNING with a
    # traceback: keep both for --logging.level=DEBUG; otherwise warnings only, without
    # tracebacks (the runner reports each failure once, in one line).
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        from .failures import CLIENT_LOGGERS, NoClientTracebacks

        for name in CLIENT_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        for handler in logging.getLogger().handlers:
            handler.addFilter(NoClientTracebacks())
