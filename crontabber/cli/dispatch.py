"""The dispatcher of the command line: the parser, the refusals made before anything runs,
and the mode's handler called with one :class:`~crontabber.cli.common.Context`. Exit codes:
:mod:`crontabber.command` (one table).

    python -m crontabber --admin.conf=crontabber.ini [--metrics-file PATH]   run due jobs
    python -m crontabber --list-jobs [NAME ...] [--wide] | --nagios | --job NAME [--force]
                         --history NAME [--limit N | --run ID] | --show-error NAME [--run ID]
                         --logs NAME [--run ID]
                         --reset-job NAME | --release NAME | --audit-ghosts | --verify-audit |
                         --configtest
                         --next N (--schedule EXPR [--time-zone ZONE] | --job NAME)
                                  [--after ISO-8601]
                         --sentrytest | --version | --help
    python -m crontabber --crontabber.error_retry_time=60 ...   override any option
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import sys
from types import SimpleNamespace

from ..command import ExitCode, exit_code_for, exit_codes_text, split_overrides
from ..config.catalog import (
    Job,
    configuration_notes,
    job_options,
    load_catalog,
    load_jobs,
    schema_dirs,
)
from ..config.settings import (
    Settings,
    effective_lines,
    iter_option_lines,
    load_settings,
    renamed_message,
    runner_options,
    shared_lines,
)
from ..errors import (
    ConfigurationError,
    ConfigurationRefused,
    CrontabberError,
    DatabaseUnavailable,
    HostNotFound,
    JobNotFound,
    SentryNotConfigured,
    Terminated,
)
from ..store import StateStore, open_store
from .common import Context, audit_entry, secret_values_of, setup_logging

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, Callable, TextIO

# The handlers' modules are imported when their mode runs (MODE_HANDLERS): an idle cron
# tick loads only run (and crontabber.tick), and neither the nagios check nor Sentry.

logger = logging.getLogger("crontabber")


MODES = (
    "list_jobs",
    "nagios",
    "history",
    "show_error",
    "logs",
    "version",
    "reset_job",
    "release",
    "explain",
    "pause",
    "resume",
    "rerun",
    "mark_success",
    "audit",
    "audit_ghosts",
    "verify_audit",
    "alerts",
    "test_alert",
    "mute",
    "unmute",
    "drain",
    "undrain",
    "next",
    "serve",
    "configtest",
    "sentrytest",
    "job",
)


#: The actions that change a job (``--reason`` is recorded with each).
ACTIONS = (
    "reset_job",
    "release",
    "pause",
    "resume",
    "rerun",
    "mark_success",
    "job",
    "mute",
    "unmute",
    "drain",
    "undrain",
)

#: The actions that change or redo a job's data or state and need ``--reason`` unless
#: ``require_reason`` is False (whoever reads the audit trail needs the why).
DESTRUCTIVE = ("reset_job", "release", "pause", "rerun", "mark_success", "mute", "drain")


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
    if mode in ("pause", "mute", "drain") or settings.require_reason:
        option = "--" + mode.replace("_", "-")
        why = (
            "it is shown to whoever looks"
            if mode in ("pause", "mute", "drain")
            else (
                "it goes to the audit trail; require_reason = False in [crontabber] makes it "
                "optional"
            )
        )
        raise ConfigurationError(option, f"needs --reason TEXT ({why})")


#: Each option that refines a mode, and the modes it refines. Given without one of them it
#: is refused with one line: crontabber would have ignored it and run a whole cron tick (a
#: stray ``--until 2h`` ran every due job).
DETAILS: dict[str, tuple[tuple[str, ...], str]] = {
    "wide": (("list_jobs",), "--list-jobs"),
    "limit": (("history", "audit", "alerts"), "--history NAME, --audit or --alerts"),
    "run": (("show_error", "history", "logs"), "--show-error NAME, --history NAME or --logs NAME"),
    "until": (("pause", "mute", "drain"), "--pause NAME, --mute NAME or --drain HOST"),
    "date": (("rerun",), "--rerun NAME"),
    "to": (("rerun",), "--rerun NAME"),
    "dry_run": (("rerun",), "--rerun NAME"),
    "yes": (("rerun",), "--rerun NAME"),
    "only": (("rerun",), "--rerun NAME"),
    "newest_first": (("rerun",), "--rerun NAME"),
    "resume_run": (("rerun",), "--rerun NAME"),
    "parallel": (("rerun",), "--rerun NAME"),
    "downstream": (("rerun",), "--rerun NAME"),
    "audit_job": (("audit", "alerts"), "--audit or --alerts"),
    "force": (("job", "rerun"), "--job NAME or --rerun NAME"),
    "replace": (("pause", "mute", "drain"), "--pause NAME, --mute NAME or --drain HOST"),
    "reason": (
        ACTIONS,
        "an action (--pause, --resume, --rerun, --mark-success, --release, "
        "--reset-job, --job, --mute, --unmute, --drain, --undrain)",
    ),
    "metrics_file": (("run", "serve"), "a tick (no mode option) or --serve"),
    "schedule": (("next",), "--next N"),
    "time_zone": (("next",), "--next N"),
    "after": (("next",), "--next N"),
}


def refuse_stray_options(mode: str, args: argparse.Namespace) -> None:
    """Refuse two modes at once, and an option given without a mode it refines.

    Raises:
        ConfigurationError: naming the option and the mode(s) it belongs to.
    """
    modes = [m for m in MODES if getattr(args, m) not in (None, False, "")]
    if "next" in modes and "job" in modes:  # --next N --job NAME: the job is what it asks about
        modes.remove("job")
    if sorted(modes) == ["rerun", "resume"]:  # --resume NAME is the pause's
        raise ConfigurationError(
            "--resume", "resumes a paused job; --rerun NAME --resume-run RUN continues a rerun"
        )
    if len(modes) > 1:
        named = " and ".join("--" + m.replace("_", "-") for m in modes)
        raise ConfigurationError(named, "one mode at a time")
    for name, (owners, where) in DETAILS.items():
        if getattr(args, name) not in (None, False, "") and mode not in owners:
            raise ConfigurationError(
                "--" + name.replace("_", "-"), f"only means something with {where}"
            )
    if args.wide and args.json:
        raise ConfigurationError("--wide", "is for the text table; --json has every field")
    if mode == "next" and bool(args.schedule) == bool(args.job):
        raise ConfigurationError("--next", "needs --schedule EXPR or --job NAME (one of them)")


def build_parser(epilog: str = "") -> argparse.ArgumentParser:
    from ..parsing import CommandParser, Formatter

    parser = CommandParser(
        prog="python -m crontabber",
        description="Run due jobs once (system cron starts this every few minutes on "
        "every host; PostgreSQL row locks make each due job run once).",
        epilog=epilog,
        formatter_class=Formatter,
    )
    parser.add_argument(
        "--admin.conf",
        dest="conf",
        metavar="FILE",
        help="the INI file (default: ./config/crontabber.ini or ./crontabber.ini)",
    )
    _add_modes(parser.add_argument_group("modes (the first in this order wins, as in crontabber)"))
    _add_details(parser.add_argument_group("details of the modes"))
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document instead of text (see crontabber/jsonout.py)",
    )
    parser.add_argument(
        "--metrics-file",
        metavar="PATH",
        default="",
        help="with a tick (no mode): write the state as a Prometheus text file "
        "there, atomically (or set crontabber.metrics_file)",
    )
    return parser


def _add_modes(modes: "argparse._ArgumentGroup") -> None:
    """The modes, in :data:`MODES` order (and ``--force``, which goes with ``--job``)."""
    _add_view_modes(modes)
    _add_state_modes(modes)
    _add_schedule_modes(modes)
    _add_audit_modes(modes)
    _add_window_modes(modes)
    _add_service_modes(modes)


def _add_view_modes(modes: "argparse._ArgumentGroup") -> None:
    """The modes that show the jobs' state and runs: ``--list-jobs``, ``--nagios``,
    ``--history``, ``--show-error``, ``--logs``, and ``--version``."""
    modes.add_argument(
        "-l",
        "--list-jobs",
        nargs="*",
        metavar="NAME",
        default=None,
        help=(
            "show every job's state (or only the jobs named), 100 columns wide; --wide: every "
            "column, nothing cut"
        ),
    )
    modes.add_argument(
        "-n",
        "--nagios",
        action="store_true",
        help="nagios check: failing, overdue, paused jobs, hosts silent, skewed "
        "or on different versions; status line, details, perfdata; exit 0/1/2",
    )
    modes.add_argument(
        "--history",
        metavar="NAME",
        default="",
        help="the job's last runs, newest first, one line each (--limit N runs, "
        "default 20); --run ID: each log row (interval) of that run",
    )
    modes.add_argument(
        "--show-error",
        metavar="NAME",
        default="",
        help="the full error and traceback of the job's last failed run "
        "(--run ID: of that run), with the end of what it logged and printed",
    )
    modes.add_argument(
        "--logs",
        metavar="NAME",
        default="",
        help="what the job's newest run (--run ID: that run) logged and printed, "
        "as its runner kept it (the last output_tail_bytes, secrets masked)",
    )
    modes.add_argument("-v", "--version", action="store_true", help="print the version")


def _add_state_modes(modes: "argparse._ArgumentGroup") -> None:
    """The modes that read or change one job's state row: ``--reset-job``, ``--release``,
    ``--explain``."""
    modes.add_argument(
        "-r",
        "--reset-job",
        metavar="NAME",
        default="",
        help="forget a job's state (it runs as if new); a ghost's too; refused while the job runs",
    )
    modes.add_argument(
        "--release",
        metavar="NAME",
        default="",
        help=(
            "clear a dead or expired 'ongoing' marker, keeping the job's history; refused while "
            "its lease is live"
        ),
    )
    modes.add_argument(
        "--explain",
        metavar="NAME",
        default="",
        help="why the job would or would not run now: paused, running (lease), "
        "due, parents, error backoff, backfill intervals pending",
    )


def _add_schedule_modes(modes: "argparse._ArgumentGroup") -> None:
    """The modes that change when a job runs: ``--pause``, ``--resume``, ``--rerun``,
    ``--mark-success``."""
    modes.add_argument(
        "--pause",
        metavar="NAME",
        default="",
        help="cron ticks skip the job (all: every job) until --until (default "
        "24 h) or --resume; a run already going continues; needs --reason",
    )
    modes.add_argument(
        "--resume", metavar="NAME", default="", help="end a job's pause (all: every paused job's)"
    )
    modes.add_argument(
        "--rerun",
        metavar="NAME",
        default="",
        help="run a backfill job for the days --date [--to] (the dates it is "
        "called with, UTC), oldest first; last success and next run unchanged",
    )
    modes.add_argument(
        "--mark-success",
        metavar="NAME",
        default="",
        help="record the job as just succeeded (errors cleared, pending backfill "
        "skipped), as Socorro's cronmarksuccess",
    )


def _add_audit_modes(modes: "argparse._ArgumentGroup") -> None:
    """The modes that read the audit trail and the alerts: ``--audit``, ``--audit-ghosts``,
    ``--verify-audit``, ``--alerts``."""
    modes.add_argument(
        "--audit",
        action="store_true",
        help=(
            "list operator actions (force, rerun, reset, release, pause, resume, mark-success): "
            "who, when, what, why"
        ),
    )
    modes.add_argument(
        "--audit-ghosts",
        action="store_true",
        help="list state rows of jobs that are no longer configured",
    )
    modes.add_argument(
        "--verify-audit",
        action="store_true",
        help="check the audit trail's hash chain: exit 0 when whole, else 1 naming the first "
        "changed or missing row (docs/security.md)",
    )
    modes.add_argument(
        "--alerts",
        action="store_true",
        help="the alerts, newest first: what was sent, to which target, when, by "
        "which host, and what failed to send (--limit N, --audit-job NAME)",
    )


def _add_window_modes(modes: "argparse._ArgumentGroup") -> None:
    """The modes that open or end a maintenance window or a host's drain (``--mute``,
    ``--unmute``, ``--drain``, ``--undrain``), and ``--test-alert``."""
    modes.add_argument(
        "--mute",
        metavar="NAME",
        default="",
        help="a maintenance window: no alert of the job (or of every job: all) "
        "opens, ends or repeats until --until (default 2 h); the jobs still run; "
        "needs --reason",
    )
    modes.add_argument(
        "--unmute",
        metavar="NAME",
        default="",
        help="end the maintenance window of the job (or all)",
    )
    modes.add_argument(
        "--drain",
        metavar="HOST",
        default="",
        help="the host's ticks claim nothing new until --until (default: until "
        "--undrain); its running runs finish; needs --reason",
    )
    modes.add_argument(
        "--undrain",
        metavar="HOST",
        default="",
        help="end the host's drain: its next tick claims jobs again",
    )
    modes.add_argument(
        "--test-alert",
        metavar="NAME",
        default="",
        help=(
            "send a test alert of the job to its targets now; exit 5 if one could not be delivered"
        ),
    )


def _add_service_modes(modes: "argparse._ArgumentGroup") -> None:
    """The modes that run or check something: ``--serve``, ``--next``, ``--configtest``,
    ``--sentrytest``, ``--job`` (and ``--force``, which goes with it)."""
    modes.add_argument(
        "--serve",
        action="store_true",
        help="stay up: a pass over the jobs every tick_seconds, the jobs that fall due "
        "starting beside the runs in flight; SIGTERM: claim nothing new, let the runs end for "
        "up to kill_grace_seconds, then stop them (systemd Type=simple; docs/deploy.md)",
    )
    modes.add_argument(
        "--next",
        metavar="N",
        default="",
        help="the next N times a schedule fires: --schedule EXPR [--time-zone ZONE] (no "
        "configuration or database) or --job NAME; --after ISO-8601 (default now); --json",
    )
    modes.add_argument(
        "--configtest", action="store_true", help="check the configuration and exit (no database)"
    )
    modes.add_argument("--sentrytest", action="store_true", help="send a test message to Sentry")
    modes.add_argument(
        "-j",
        "--job",
        metavar="NAME",
        default="",
        help="run one job (app_name or module.Class) if due",
    )
    modes.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="with --job: run even if not due or a parent has not run",
    )


def _add_details(details: "argparse._ArgumentGroup") -> None:
    """The options that refine a mode, grouped by the modes they go with."""
    _add_action_details(details)
    _add_rerun_range_details(details)
    _add_rerun_run_details(details)
    _add_next_details(details)
    _add_view_details(details)


def _add_action_details(details: "argparse._ArgumentGroup") -> None:
    """The details of an operator action: ``--reason``, ``--replace``, ``--until``."""
    details.add_argument(
        "--reason",
        metavar="TEXT",
        default="",
        help="why (required by --pause; recorded with any operator action)",
    )
    details.add_argument(
        "--replace",
        action="store_true",
        help="with --pause, --mute or --drain: replace a pause, a maintenance window or a "
        "drain still in force (refused otherwise, naming it: exit 6)",
    )
    details.add_argument(
        "--until",
        metavar="WHEN",
        default="",
        help="with --pause, --mute or --drain: 30m, 2h, 3d, or a UTC date/time (2026-11-24T06:00)",
    )


def _add_rerun_range_details(details: "argparse._ArgumentGroup") -> None:
    """The details of ``--rerun`` that choose its intervals: ``--date``, ``--to``, ``--only``,
    ``--newest-first``, and ``--dry-run``, ``--yes``."""
    details.add_argument(
        "--date", metavar="YYYY-MM-DD", default="", help="with --rerun: the first day"
    )
    details.add_argument(
        "--to", metavar="YYYY-MM-DD", default="", help="with --rerun: the last day"
    )
    details.add_argument(
        "--dry-run",
        action="store_true",
        help="with --rerun: list the intervals it would run, run nothing",
    )
    details.add_argument(
        "--yes",
        action="store_true",
        help="with --rerun: run more intervals than rerun_confirm_over (31)",
    )
    details.add_argument(
        "--only",
        metavar="failed|missing",
        default="",
        help="with --rerun: only the intervals whose last unit failed, or that "
        "have no recorded unit (failed,missing: both)",
    )
    details.add_argument(
        "--newest-first", action="store_true", help="with --rerun: run the newest interval first"
    )


def _add_rerun_run_details(details: "argparse._ArgumentGroup") -> None:
    """The details of how ``--rerun`` runs: ``--resume-run``, ``--parallel``, ``--downstream``."""
    details.add_argument(
        "--resume-run",
        type=int,
        metavar="RUN",
        default=None,
        help="with --rerun: continue rerun RUN (killed, failed or stopped) with "
        "the intervals it did not finish, in its order; join it when it runs --parallel",
    )
    details.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        default=None,
        help="with --rerun: run up to N intervals at once (a job with parallel_reruns = True); "
        "more runs join it with --resume-run RUN, on this host or others",
    )
    details.add_argument(
        "--downstream",
        action="store_true",
        help=(
            "with --rerun: then rerun the job's dependants (depends_on) for the same days, parents "
            "first"
        ),
    )


def _add_next_details(details: "argparse._ArgumentGroup") -> None:
    """The details of ``--next``: ``--schedule``, ``--time-zone``, ``--after``."""
    details.add_argument(
        "--schedule",
        metavar="EXPR",
        default="",
        help="with --next: a cron expression ('0 3 * * 1-5', @daily) or 5m, 1d|05:00",
    )
    details.add_argument(
        "--time-zone",
        metavar="ZONE",
        default="",
        help="with --next --schedule: its zone (IANA: Europe/Berlin)",
    )
    details.add_argument(
        "--after",
        metavar="ISO-8601",
        default="",
        help="with --next: times after this (default now; no offset: the schedule's zone)",
    )


def _add_view_details(details: "argparse._ArgumentGroup") -> None:
    """The details of the modes that show things: ``--audit-job``, ``--wide``, ``--limit``,
    ``--run``."""
    details.add_argument(
        "--audit-job",
        metavar="NAME",
        default="",
        help="with --audit or --alerts: one subject's only: a job, host:HOST, all (every job at "
        "once: --mute all) or crontabber (the runner's own)",
    )
    details.add_argument("--wide", action="store_true", help="with --list-jobs: every column")
    details.add_argument(
        "--limit",
        type=int,
        metavar="N",
        default=None,
        help=(
            "with --history: how many runs; with --audit or --alerts: how many actions or alerts "
            "(default 20)"
        ),
    )
    details.add_argument(
        "--run",
        type=int,
        metavar="ID",
        default=None,
        help="with --show-error, --history or --logs: that run",
    )


#: What the parser gives every option when none is given (a test compares them with
#: :func:`build_parser`'s): a plain tick's command line is read without argparse.
PARSER_DEFAULTS: dict[str, Any] = {
    "conf": None,
    "list_jobs": None,
    "nagios": False,
    "history": "",
    "show_error": "",
    "logs": "",
    "version": False,
    "reset_job": "",
    "release": "",
    "explain": "",
    "pause": "",
    "resume": "",
    "rerun": "",
    "mark_success": "",
    "audit": False,
    "audit_ghosts": False,
    "verify_audit": False,
    "alerts": False,
    "mute": "",
    "unmute": "",
    "drain": "",
    "undrain": "",
    "test_alert": "",
    "next": "",
    "serve": False,
    "configtest": False,
    "sentrytest": False,
    "job": "",
    "force": False,
    "reason": "",
    "replace": False,
    "until": "",
    "date": "",
    "to": "",
    "dry_run": False,
    "yes": False,
    "only": "",
    "newest_first": False,
    "resume_run": None,
    "parallel": None,
    "downstream": False,
    "audit_job": "",
    "wide": False,
    "limit": None,
    "run": None,
    "json": False,
    "metrics_file": "",
    "schedule": "",
    "time_zone": "",
    "after": "",
}


def plain_tick(argv: list[str]) -> argparse.Namespace | None:
    """The parsed command line of a plain cron tick (nothing, ``--admin.conf=FILE`` or
    ``--admin.conf FILE``) without argparse and gettext (~4 ms of every tick); None for
    any other command line, which :func:`build_parser` reads."""
    if not argv:
        conf = None
    elif len(argv) == 1 and argv[0].startswith("--admin.conf="):
        conf = argv[0].partition("=")[2]
    elif len(argv) == 2 and argv[0] == "--admin.conf" and not argv[1].startswith("-"):
        conf = argv[1]
    else:
        return None
    args = SimpleNamespace(**{**PARSER_DEFAULTS, "conf": conf})
    return args  # type: ignore[return-value]  # argparse's Namespace, without argparse


def help_epilog(argv: list[str]) -> str:
    """Every option with its default; job options too when the config loads."""
    lines = ["options (--NAME=VALUE; environment: NAME upper-cased, '.' and '-' as '_'):"]
    lines += [
        f"  --{name} (default {value})  {doc}"
        for name, value, doc in iter_option_lines(runner_options(), (), None)
    ]
    try:
        args, rest = build_parser().parse_known_args([a for a in argv if a not in ("-h", "--help")])
        settings = load_settings(args.conf, split_overrides(rest))
        for job in load_jobs(settings):
            lines.append(f"options of job {job.app_name} ({job.class_path}):")
            lines += [
                f"  --{name} (default {value})  {doc}"
                for name, value, doc in iter_option_lines(job_options(job.cls), job.namespace, None)
            ]
    except CrontabberError as exc:
        lines.append(f"(job options not shown: {exc})")
    lines.append(exit_codes_text())
    return "\n".join(lines)


def main(argv: list[str], stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    """Run the command line; return the exit code."""
    try:
        args, rest = _parse_command_line(argv)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except ConfigurationError as exc:
        print(f"crontabber: {exc}", file=stderr)
        return ExitCode.ERROR
    mode = next((m for m in MODES if getattr(args, m) not in (None, False, "")), "run")
    if mode == "version":  # no configuration or database needed
        from ..version import version

        print(version(), file=stdout)
        return ExitCode.OK
    try:
        return dispatch(mode, args, rest, stdout)
    except (CrontabberError, KeyboardInterrupt, Terminated) as exc:
        if mode == "nagios":
            from .monitor import nagios_failure

            return nagios_failure(exc, args, stdout)
        from ..formats import printable_lines  # (a refusal may quote the runner login's text)

        print(f"crontabber: {printable_lines(str(exc) or type(exc).__name__)}", file=stderr)
        return exit_code_for(exc)


def _parse_command_line(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The parsed options and the rest (the overrides): a plain tick's without argparse."""
    plain = plain_tick(argv)
    if plain is not None:
        return plain, []
    epilog = help_epilog(argv) if {"-h", "--help"} & set(argv) else ""
    return build_parser(epilog).parse_known_args(argv)


def _names_after(args: argparse.Namespace, rest: list[str]) -> list[str]:
    """``--list-jobs --wide NAME``: argparse ends ``--list-jobs``'s names at the next option
    and leaves the names after it in ``rest``; they join ``args.list_jobs`` (what is left: the
    overrides, ``--namespace.option value`` pairs included)."""
    kept: list[str] = []
    items = iter(rest)
    for item in items:
        if item.startswith("--") and "." in item and "=" not in item:
            kept.append(item)
            following = next(items, None)
            if following is not None:
                kept.append(following)
        elif item.startswith("-"):
            kept.append(item)
        else:
            args.list_jobs.append(item)
    return kept


def dispatch(mode: str, args: argparse.Namespace, rest: list[str], stdout: TextIO) -> int:
    refuse_stray_options(mode, args)
    if mode == "next" and args.schedule:  # any expression: no configuration, no database
        from .when import next_for_expression

        return next_for_expression(args, stdout)
    if mode == "list_jobs":  # --list-jobs --wide NAME: the names after another option
        rest = _names_after(args, rest)
    overrides = split_overrides(rest)
    # --configtest checks the file itself, never a kept parse of it (config.inicache)
    settings = load_settings(args.conf, overrides, ini_cache=mode != "configtest")
    setup_logging(settings, overrides)
    for old, new in settings.sources.renamed.items():  # deprecated names (DeprecationWarning too)
        logger.warning("%s", renamed_message(old, new))
    if mode == "configtest":  # the whole file, or nothing: a broken entry is refused
        return configtest(settings, load_jobs(settings), stdout)
    # the rest go on without an entry whose class does not load (shown, alerted)
    catalog = load_catalog(settings)  # also refuses unknown option names (config.names)
    for broken in catalog.broken:
        logger.error(
            "%s; the other jobs go on without it (--configtest refuses the file)", broken.error
        )
    jobs = catalog.jobs
    require_reason(mode, args, settings)
    if mode == "sentrytest":
        return sentrytest(settings, stdout)
    if mode == "next":  # the job's schedule: no database
        from .when import next_for_job

        return next_for_job(jobs, args, stdout)
    store = open_store(settings.database, schema_dirs(jobs))
    try:
        handler = handler_for(mode)
        resume_collection()
        ctx = Context(settings, jobs, store, args, stdout, catalog.broken)
        try:
            return handler(ctx)
        except (CrontabberError, KeyboardInterrupt, Terminated) as exc:
            if ctx.started is not None:
                _audit_ended(ctx, exc)
            elif mode in ACTIONS:
                _audit_refusal(store, mode, args, settings, exc)
            raise
    finally:
        store.close()


def resume_collection() -> None:
    """Turn the garbage collector back on if ``python -m crontabber`` started with it off
    (crontabber/__main__.py), what was built so far moved out of its sight first: the
    modules, settings and jobs' classes live as long as the process (and a job's forked
    child shares their pages untouched)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def configtest(settings: Settings, jobs: list[Job], out: TextIO) -> int:
    """``--configtest``: the database, this code's version, each setting with where it came
    from, the notes."""
    from ..version import version

    print(
        f"database: {settings.database.target} (password "
        f"{'set' if settings.database.password else 'not set'})",
        file=out,
    )
    print(f"version: {version()}", file=out)
    print("settings (value, where from; a job's options when set):", file=out)
    lines = list(effective_lines(runner_options(), (), settings.sources))
    shown = {(name, value, origin) for name, value, origin in lines}
    for name, value, origin in lines:
        # resource.postgresql.X is listed once, as crontabber.X, when that takes its value
        section, _, option = name.rpartition(".")
        if section == "resource.postgresql" and (f"crontabber.{option}", value, origin) in shown:
            continue
        print(f"  {name} = {value}  [{origin}]", file=out)
    for job in jobs:
        for name, value, origin in effective_lines(
            job_options(job.cls), job.namespace, settings.sources, defaults=False
        ):
            print(f"  {name} = {value}  [{origin}]", file=out)
    namespaces = [(job_options(job.cls), job.namespace) for job in jobs]
    for name, value, origin in shared_lines(namespaces, settings.sources, {n for n, _, _ in lines}):
        print(f"  {name} = {value}  [{origin}]", file=out)
    from ..alerts.checks import validate_checks

    for job in jobs:  # a tick would only log them, once the job ran
        validate_checks(job, settings)
    refuse_services(settings, jobs)
    for note in configuration_notes(settings.sources, jobs):
        print(f"note: {note}", file=out)
    missing = [
        problem for target in settings.alerts.targets for problem in target.missing(os.environ)
    ]
    if missing:  # a tick would only find out when it has something to tell
        raise ConfigurationError("alerts.targets", "; ".join(missing))
    print(f"configtest OK: {len(jobs)} jobs", file=out)
    return ExitCode.OK


def refuse_services(settings: Settings, jobs: list[Job]) -> None:
    """``--configtest``'s check of the services' addresses: a job that has none for a
    service it needs (its ``config_problems``) and, on a production host
    (``crontabber.production``), each value that points at the development services
    (:mod:`crontabber.config.devdefaults`).

    Raises:
        ConfigurationRefused: one line for each.
    """
    from ..config.catalog import job_config
    from ..config.devdefaults import database_urls, development_values

    lines: list[str] = []
    db = settings.database
    options: list[tuple[str, object]] = (
        []
        if db.dsn
        else [("the state database (crontabber.host)", database_urls(db.host, db.port))]
    )
    for job in jobs:
        problems = getattr(job.cls, "config_problems", None)  # a BaseCronApp's (crontabber.base)
        if problems is not None:
            lines += problems(job_config(job, settings.sources))
        options += [
            (_where_set(settings, path, option), settings.sources.value(path, option))
            for path, option in job_options(job.cls).walk(job.namespace)
            if option.name.endswith("url")
        ]
    if settings.production:
        lines += [
            str(ConfigurationError("crontabber.production", line))
            for line in development_values(os.environ, options)
        ]
    if lines:
        raise ConfigurationRefused(lines)


def _where_set(settings: Settings, path: tuple[str, ...], option: Any) -> str:
    """Where an option's value is set, as a refusal names it: the variable or the shared
    option (``resource.elasticsearch.es_url``: one line for all the jobs that read it),
    else the option itself."""
    origin = settings.sources.origin(path, option)
    if origin.startswith("environment") or "(as " in origin:
        return origin
    return f"{'.'.join([*path, option.name])} ({origin})"


def sentrytest(settings: Settings, out: TextIO) -> int:
    """``--sentrytest``: send a test message to the configured Sentry.

    Raises:
        SentryNotConfigured: no DSN is set.
    """
    if not settings.sentry_dsn:
        raise SentryNotConfigured()
    from ..sentry import SentryReporter

    event_id = SentryReporter(settings.sentry_dsn, secret_values_of(settings)).send_test_message()
    print(f"Sentry test message sent: {event_id}", file=out)
    return ExitCode.OK


def _audit_refusal(
    store: StateStore, mode: str, args: Any, settings: Settings, exc: BaseException
) -> None:
    """Record an operator action that was refused or failed, with its exit code (the done
    ones are recorded by the action itself): the audit trail says what happened, not what
    was asked. Never raises: the refusal is what the operator must see."""
    name = str(getattr(args, mode, "") or "")
    if not name or isinstance(exc, (DatabaseUnavailable, JobNotFound, HostNotFound)):
        return
    from ..audit_store import AuditStore  # here, not at the top: a cron tick never loads it

    name = f"host:{name}" if mode in ("drain", "undrain") else name
    name = "*" if name == "all" else name  # every job at once: the subject --mute all writes
    action = {
        "reset_job": "reset",
        "mark_success": "mark-success",
        "job": "force" if args.force else "job",
    }.get(mode, mode)
    try:
        AuditStore(store).audit(
            audit_entry(
                action,
                name,
                args,
                settings,
                outcome=f"refused (exit {exit_code_for(exc)})",
                error=str(exc)[:300],
            )
        )
    except CrontabberError:
        logger.debug("could not record the refusal of %s %s", action, name, exc_info=True)


def _audit_ended(ctx: Context, exc: BaseException) -> None:
    """Complete the audit row of an action that had started (a forced run, a rerun) with how
    an exception ended it: stopped by a signal, interrupted, refused (locked, running
    elsewhere: nothing ran) or failed. Never raises: the exception is what the operator sees."""
    from ..errors import JobLockError

    code = exit_code_for(exc)
    if isinstance(exc, Terminated):
        outcome = f"stopped by signal (exit {code})"
    elif isinstance(exc, KeyboardInterrupt):
        outcome = f"interrupted (exit {code})"
    elif isinstance(exc, JobLockError):
        outcome = f"refused (exit {code})"
    else:
        outcome = f"failed (exit {code})"
    try:
        ctx.audit_end(outcome, error=str(exc)[:300])
    except CrontabberError:
        logger.debug("could not record the end of %s", ctx.started, exc_info=True)


# Each mode's handler as "module:function", imported when its mode runs: a plain
# cron tick (mode "run") loads none of the operator commands' modules.
MODE_HANDLERS: dict[str, str] = {
    "list_jobs": "show:list_jobs",
    "history": "show:history",
    "show_error": "show:show_error",
    "logs": "show:logs",
    "nagios": "monitor:nagios",
    "reset_job": "operate:reset_job",
    "release": "operate:release",
    "explain": "operate:explain",
    "pause": "operate:pause",
    "resume": "operate:resume",
    "rerun": "rerun:rerun",
    "mark_success": "operate:mark_success",
    "audit": "operate:audit",
    "audit_ghosts": "operate:audit_ghosts",
    "verify_audit": "operate:verify_audit",
    "alerts": "monitor:alerts",
    "test_alert": "monitor:test_alert",
    "mute": "operate:mute",
    "unmute": "operate:unmute",
    "drain": "fleet:drain",
    "undrain": "fleet:undrain",
    "job": "run:run_one",
    "run": "run:run_all",
    "serve": "run:serve",
}


def handler_for(mode: str) -> Callable[[Context], int]:
    """The function that carries out ``mode`` (a key of :data:`MODE_HANDLERS`)."""
    module, function = MODE_HANDLERS[mode].split(":")
    handler: Callable[[Context], int] = getattr(
        importlib.import_module(f"{__package__}.{module}"), function
    )
    return handler
