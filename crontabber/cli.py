"""The command line: parse, call, print. Exit codes are named once here.

    python -m crontabber --admin.conf=crontabber.ini [--metrics-file PATH]   run due jobs
    python -m crontabber --list-jobs | --nagios | --job NAME [--force]
                         --reset-job NAME | --release NAME | --audit-ghosts | --configtest
                         --sentrytest | --version | --help
    python -m crontabber --crontabber.error_retry_time=60 ...   override any option
"""

from __future__ import annotations

import argparse
import enum
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, Callable, NoReturn, TextIO

from . import __version__, cli_monitor
from .catalog import Job, configuration_notes, find_job, job_options, load_jobs
from .config import Settings, iter_option_lines, load_settings, runner_options
from .errors import (
    ConfigurationError,
    CrontabberError,
    JobLocked,
    JobNotFound,
    JobOngoing,
    LeaseLost,
    MarkerIsLive,
    SentryNotConfigured,
    Terminated,
)
from .runner import Runner, Status, first_lock_error
from .store import StateStore, open_store

if TYPE_CHECKING:
    from .runner import Reporter

# report and sentry are imported where used: an idle cron tick needs neither.

logger = logging.getLogger("crontabber")


class ExitCode(enum.IntEnum):
    """Exit codes of run modes (``--nagios`` uses nagios's 0/1/2 instead)."""

    OK = 0
    ERROR = 1  # bad configuration or arguments, unknown job, database unavailable
    LOCKED = 2  # a job's row was locked by another runner (SELECT ... FOR UPDATE NOWAIT)
    ONGOING = 3  # a job is held by a live run elsewhere (also: reset/release refused)
    FENCED = 4  # a run lost its lease to another run: its outcome was not recorded
    INTERRUPTED = 130  # SIGINT / Ctrl-C (the job was recorded as failed, lock released)
    TERMINATED = 143  # SIGTERM (the same)


def exit_code_for(exc: BaseException) -> int:
    """The one place exceptions become exit codes."""
    if isinstance(exc, JobLocked):
        return ExitCode.LOCKED
    if isinstance(exc, (JobOngoing, MarkerIsLive)):
        return ExitCode.ONGOING
    if isinstance(exc, LeaseLost):
        return ExitCode.FENCED
    if isinstance(exc, Terminated):
        return ExitCode.TERMINATED
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    return ExitCode.ERROR


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigurationError("the command line", message)


MODES = ("list_jobs", "nagios", "version", "reset_job", "release", "audit_ghosts",
         "configtest", "sentrytest", "job")


def build_parser(epilog: str = "") -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m crontabber",
        description="Run due jobs once (system cron starts this every few minutes on "
        "every host; PostgreSQL row locks make each due job run once).",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--admin.conf", dest="conf", metavar="FILE",
                        help="the INI file (default: ./config/crontabber.ini or ./crontabber.ini)")
    modes = parser.add_argument_group("modes (the first in this order wins, as in crontabber)")
    modes.add_argument("-l", "--list-jobs", action="store_true", help="show every job's state")
    modes.add_argument("-n", "--nagios", action="store_true",
                       help="nagios check: failing, overdue, paused jobs, hosts silent, skewed "
                       "or on different versions; status line, details, perfdata; exit 0/1/2")
    modes.add_argument("-v", "--version", action="store_true", help="print the version")
    modes.add_argument("-r", "--reset-job", metavar="NAME", default="",
                       help="forget a job's state (it runs as if new); a ghost's too; "
                       "refused while the job runs")
    modes.add_argument("--release", metavar="NAME", default="",
                       help="clear a dead or expired 'ongoing' marker, keeping the job's "
                       "history; refused while its lease is live")
    modes.add_argument("--audit-ghosts", action="store_true",
                       help="list state rows of jobs that are no longer configured")
    modes.add_argument("--configtest", action="store_true",
                       help="check the configuration and exit (no database)")
    modes.add_argument("--sentrytest", action="store_true", help="send a test message to Sentry")
    modes.add_argument("-j", "--job", metavar="NAME", default="",
                       help="run one job (app_name or module.Class) if due")
    modes.add_argument("-f", "--force", action="store_true",
                       help="with --job: run even if not due or a parent has not run")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document instead of text (see crontabber/jsonout.py)")
    parser.add_argument("--metrics-file", metavar="PATH", default="",
                        help="with a tick (no mode): write the state as a Prometheus text file "
                        "there, atomically (or set crontabber.metrics_file)")
    return parser


def split_overrides(rest: list[str]) -> dict[str, str]:
    """``--namespace.option=value`` (or ``--namespace.option value``) pairs.

    Raises:
        ConfigurationError: on anything else.
    """
    overrides: dict[str, str] = {}
    items = iter(rest)
    for item in items:
        if not item.startswith("--") or "." not in item.split("=", 1)[0]:
            raise ConfigurationError("the command line", f"unrecognized argument {item!r}")
        name, eq, value = item[2:].partition("=")
        if not eq:
            following = next(items, None)
            if following is None:
                raise ConfigurationError(f"--{name}", "needs a value")
            value = following
        overrides[name] = value
    return overrides


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
    lines.append("exit codes: 0 ok (even if jobs failed), 1 error, 2 a job was row-locked, "
                 "3 a job was running elsewhere (or reset/release refused), 4 a run was fenced "
                 "off (it lost its lease), 130/143 interrupted; --nagios: 0/1/2")
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
    mode = next((m for m in MODES if getattr(args, m)), "run")
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
    if args.force and not args.job:
        raise ConfigurationError("--force", "only means something with --job NAME")
    if args.metrics_file and mode != "run":
        raise ConfigurationError("--metrics-file", "is written by a tick (no mode option)")
    settings = load_settings(args.conf, split_overrides(rest))
    setup_logging(settings)
    jobs = load_jobs(settings)  # also refuses unknown option names (crontabber.known)
    if mode == "configtest":
        for note in configuration_notes(settings.sources, jobs):
            print(f"note: {note}", file=stdout)
        print(f"configtest OK: {len(jobs)} jobs", file=stdout)
        return ExitCode.OK
    if mode == "sentrytest":
        if not settings.sentry_dsn:
            raise SentryNotConfigured()
        from .sentry import SentryReporter

        event_id = SentryReporter(settings.sentry_dsn).send_test_message()
        print(f"Sentry test message sent: {event_id}", file=stdout)
        return ExitCode.OK
    store = open_store(settings.database)
    try:
        handler = MODE_HANDLERS[mode]
        return handler(settings, jobs, store, args, stdout)
    finally:
        store.close()


def list_jobs(settings: Settings, jobs: list[Job], store: StateStore, args: Any, out: TextIO) -> int:
    from . import report

    states, now = store.states(), store.now()
    runner = _runner(settings, jobs, store)
    rows = report.list_rows(jobs, states, now, lambda state: runner.marker(state, now))
    for line in report.align(rows):
        print(line, file=out)
    return ExitCode.OK


def reset_job(settings: Settings, jobs: list[Job], store: StateStore, args: Any, out: TextIO) -> int:
    name = _state_name(jobs, store, args.reset_job)
    if _runner(settings, jobs, store).reset(name) is not None:
        logger.info("App reset: %s", name)
        ghost = "" if find_job(jobs, name) else " (it was a ghost: not configured)"
        print(f"{name}: state reset{ghost}", file=out)
    else:
        logger.warning("App already reset: %s", name)
        print(f"{name}: had no state (already reset)", file=out)
    return ExitCode.OK


def release(settings: Settings, jobs: list[Job], store: StateStore, args: Any, out: TextIO) -> int:
    name = _state_name(jobs, store, args.release)
    released = _runner(settings, jobs, store).release(name)
    if released:
        logger.warning("%s: released the marker of %s", name, released)
        print(f"{name}: released the marker of {released}; last run, last success and "
              "backfill progress are kept", file=out)
    else:
        print(f"{name}: not running: nothing to release", file=out)
    return ExitCode.OK


def _state_name(jobs: list[Job], store: StateStore, name: str) -> str:
    """The app name an operator command means: a configured job's, or a ghost's.

    Raises:
        JobNotFound: neither.
    """
    job = find_job(jobs, name)
    if job is not None:
        return job.app_name
    if name not in store.states():
        raise JobNotFound(name, [j.app_name for j in jobs])
    return name


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
    job = find_job(jobs, args.job)
    if job is None:
        raise JobNotFound(args.job, [j.app_name for j in jobs])
    with terminate_on_sigterm():
        result = _runner(settings, jobs, store).run_job(job, force=args.force)
    if result.error is not None:
        raise result.error
    if result.status is Status.SKIPPED:
        print(f"{job.app_name}: skipped ({result.detail}); --force runs it anyway", file=out)
    elif result.status is Status.FAILED:
        # Exit 0 as in crontabber: the failure is recorded (see --list-jobs, --nagios).
        print(f"{job.app_name}: failed: {result.detail}", file=out)
    return ExitCode.OK


def run_all(settings: Settings, jobs: list[Job], store: StateStore, args: Any, out: TextIO) -> int:
    runner = Runner(settings, jobs, store, report=_sentry(settings.sentry_dsn),
                    tick=cli_monitor.fleet_tick())  # a tick records itself: --nagios watches
    with terminate_on_sigterm():
        results = runner.run_all()
    counts = {status: sum(r.status is status for r in results) for status in Status}
    logger.info("done: %s", ", ".join(f"{n} {s.value}" for s, n in counts.items() if n) or "no jobs")
    cli_monitor.write_metrics(settings, jobs, store, args)
    lock = first_lock_error(results)
    return exit_code_for(lock) if lock else ExitCode.OK


def _runner(settings: Settings, jobs: list[Job], store: StateStore) -> Runner:
    return Runner(settings, jobs, store, report=_sentry(settings.sentry_dsn))


def _sentry(dsn: str) -> "Reporter":
    """The Sentry reporter, imported only when a DSN is set."""
    if not dsn:
        return lambda exc, job: None
    from .sentry import SentryReporter

    return SentryReporter(dsn)


MODE_HANDLERS: dict[str, Callable[..., int]] = {
    "list_jobs": list_jobs,
    "nagios": cli_monitor.nagios,
    "reset_job": reset_job,
    "release": release,
    "audit_ghosts": audit_ghosts,
    "job": run_one,
    "run": run_all,
}


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


def setup_logging(settings: Settings) -> None:
    """Log to stderr at the configured level (stdout is for command output)."""
    logging.basicConfig(stream=sys.stderr, level=settings.log_level, format=settings.log_format)
    # everett logs every raw value it reads at DEBUG, secrets included.
    logging.getLogger("everett").setLevel(logging.WARNING)
    # Client libraries log every request at INFO: keep them for --logging.level=DEBUG.
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        for name in ("elastic_transport", "botocore", "boto3", "urllib3", "s3transfer"):
            logging.getLogger(name).setLevel(logging.WARNING)
