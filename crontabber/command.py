"""The shape every command shares: the runner's and the jobs' operator commands.

One table of exit codes (:class:`ExitCode`, :data:`EXIT_CODES`), the one mapping of
exceptions to them (:func:`exit_code_for`), the ``--namespace.option=value`` overrides
(:func:`split_overrides`), and for the jobs' commands (``python -m jobs.uploads``,
``jobs.prune``, ``jobs.missing_symbols``) a main that turns every error into one line on stderr
and its exit code (:func:`run_command`). Jobs import it through :mod:`crontabber`'s public
surface.

Kept light (the error tree): the runner imports it on every cron tick. argparse's side (the
parser of every command, its ``--help``) is :mod:`crontabber.parsing`, which a plain tick
does not import.
"""

from __future__ import annotations

import enum
import logging
import os
import sys

from .errors import (
    CodeOlderThanSchema,
    ConfigurationError,
    CrontabberError,
    JobLocked,
    JobOngoing,
    JobPaused,
    LeaseLost,
    LockWaitTimedOut,
    MarkerIsLive,
    Terminated,
    WorkRefused,
)
from .formats import one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Callable, Mapping, NoReturn, Sequence, TextIO, TypeAlias

logger = logging.getLogger(__name__)


class ExitCode(enum.IntEnum):
    """Exit codes of every command (``--nagios`` uses nagios's 0/1/2 instead)."""

    OK = 0
    ERROR = (
        1  # bad configuration or arguments, unknown job or id, database unavailable, not permitted
    )
    LOCKED = 2  # held by another process right now (a job's row: SELECT ... FOR UPDATE NOWAIT)
    ONGOING = 3  # a job is held by a live run elsewhere (also: reset/release refused)
    FENCED = 4  # a run lost its lease to another run: its outcome was not recorded
    JOB_FAILED = 5  # the work ran and failed (--job, --rerun, a job command's work)
    PAUSED = 6  # paused: --job, --rerun, job commands (--force --reason), a second --pause
    NOT_RUN = 7  # --job: nothing ran (not due, a parent blocks it, nothing to backfill)
    CODE_TOO_OLD = 8  # the database's schema is newer than this code: it claims nothing
    PIPE_CLOSED = 141  # the reader of stdout went away (`--audit | head -1`), as cat's SIGPIPE
    INTERRUPTED = 130  # SIGINT / Ctrl-C (the job was recorded as failed, lock released)
    TERMINATED = 143  # SIGTERM (the same)


#: What each code means, for ``--help`` and docs/reference/exit-codes.md (generated from this);
#: docs/operations.md repeats it.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (
        ExitCode.OK,
        "ok; a cron tick also when jobs failed (they are recorded) or another runner "
        "held one (locked, or running on another host: a fleet's normal case)",
    ),
    (
        ExitCode.ERROR,
        "bad argument or configuration, unknown job or id, database unavailable, or the "
        "database user may not do it (docs/deploy.md#roles); a tick with a jobs entry that "
        "does not load (the other jobs ran); --verify-audit: the audit trail's chain is broken",
    ),
    (
        ExitCode.LOCKED,
        "locked by another process that very moment (--job and the operator commands; a cron tick "
        "exits 0)",
    ),
    (
        ExitCode.ONGOING,
        "the job is running elsewhere: --job, or a reset/release refused for that (a cron tick "
        "exits 0)",
    ),
    (ExitCode.FENCED, "a run was fenced off (it lost its lease)"),
    (ExitCode.JOB_FAILED, "the work ran and failed (--job, --rerun, a job command's work)"),
    (
        ExitCode.PAUSED,
        "the job is paused (--job, --rerun, a job's command: --force --reason runs it; --pause: "
        "--replace)",
    ),
    (ExitCode.NOT_RUN, "--job: nothing ran (not due, a parent blocks it, nothing to backfill)"),
    (
        ExitCode.CODE_TOO_OLD,
        "this host's code is older than the database's schema (a newer "
        "release migrated it): it claims no job until upgraded",
    ),
    (ExitCode.PIPE_CLOSED, "the reader of the output went away (| head): ended quietly"),
    (ExitCode.INTERRUPTED, "Ctrl-C"),
    (ExitCode.TERMINATED, "SIGTERM"),
)

#: The codes a cron tick (no mode option) exits with: 0 (jobs failed or held by another
#: runner included), 1 (configuration, database), 4 (a run fenced off), 8 (code older than
#: the schema), 130/143 (stopped). A scheduler's unit treats only 0 as success: no code a
#: tick returns for a healthy fleet is anything else (docs/deploy.md's systemd unit).
TICK_EXIT_CODES: tuple[int, ...] = (
    ExitCode.OK,
    ExitCode.ERROR,
    ExitCode.FENCED,
    ExitCode.CODE_TOO_OLD,
    ExitCode.INTERRUPTED,
    ExitCode.TERMINATED,
)


def exit_codes_text() -> str:
    """The table in one paragraph, as every ``--help`` ends."""
    return (
        "exit codes (one table for every command): "
        + "; ".join(f"{int(code)} {meaning}" for code, meaning in EXIT_CODES)
        + "; --nagios: 0/1/2 (nagios's)"
    )


def exit_code_for(exc: BaseException) -> int:
    """The one place exceptions become exit codes."""
    if isinstance(exc, (JobLocked, LockWaitTimedOut)):
        return ExitCode.LOCKED
    if isinstance(exc, (JobOngoing, MarkerIsLive)):
        return ExitCode.ONGOING
    if isinstance(exc, LeaseLost):
        return ExitCode.FENCED
    if isinstance(exc, JobPaused):
        return ExitCode.PAUSED
    if isinstance(exc, CodeOlderThanSchema):
        return ExitCode.CODE_TOO_OLD
    if isinstance(exc, WorkRefused):
        return ExitCode.JOB_FAILED
    if isinstance(exc, Terminated):
        return ExitCode.TERMINATED
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    return ExitCode.ERROR


def exit_quietly(main: Callable[[], int]) -> NoReturn:
    """``sys.exit(main())`` for a ``__main__``, ending quietly when the reader of stdout has
    gone (``--audit | head -1``): no traceback, no "Exception ignored" at exit, exit 141.
    Python's own advice: point stdout at /dev/null so the final flush cannot fail again."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = ExitCode.PIPE_CLOSED
    sys.exit(code)


def split_overrides(rest: Sequence[str]) -> dict[str, str]:
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


def error_line(exc: BaseException) -> str:
    """An error's message on one line (its type's name when it has none)."""
    return one_line(str(exc)) or type(exc).__name__


Body: TypeAlias = "Callable[[argparse.Namespace, dict[str, str]], int]"


def run_command(
    parser: argparse.ArgumentParser,
    body: Body,
    argv: Sequence[str] | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Parse ``argv`` with ``parser`` (the rest must be overrides; ``--admin.conf`` may also
    follow the subcommand: it lands in ``args.conf``), call ``body(args, overrides)`` and
    return its exit code; log WARNING and up on stderr (every level with
    ``--logging.level=DEBUG``).

    Every error is one line on stderr, ``prog: message``: the runner's errors with their
    code (:func:`exit_code_for`); anything else (a service failing mid-work, which
    :func:`crontabber.failures.describe` names with its address) exits
    :attr:`ExitCode.JOB_FAILED`, its traceback logged at DEBUG only.
    """
    err = sys.stderr if stderr is None else stderr
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args, rest = parser.parse_known_args(argv)
        overrides = split_overrides(rest)
        if "admin.conf" in overrides:  # given after the subcommand, whose parser lacks it
            args.conf = overrides.pop("admin.conf")
        level = overrides.get("logging.level", "WARNING").upper()
        if not isinstance(logging.getLevelName(level), int):
            raise ConfigurationError("--logging.level", f"{level!r} is not a log level")
        _setup_logging(err, level, overrides)
        return body(args, overrides)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except (CrontabberError, KeyboardInterrupt, Terminated) as exc:
        logger.debug("%s failed", parser.prog, exc_info=True)
        print(f"{parser.prog}: {error_line(exc)}", file=err)
        return exit_code_for(exc)
    except BrokenPipeError:
        raise  # the reader of stdout went away: exit_quietly ends the process
    except Exception as exc:
        from .failures import describe

        logger.debug("%s failed", parser.prog, exc_info=True)
        print(f"{parser.prog}: {describe(exc)}", file=err)
        return ExitCode.JOB_FAILED


def _setup_logging(stream: TextIO, level: str, overrides: Mapping[str, str]) -> None:
    """Like the runner's (:func:`configure_logging`), with the secrets of the environment
    and the command line."""
    from .redaction import secret_values

    configure_logging(
        stream,
        level,
        "%(asctime)s %(levelname)s %(name)s: %(message)s",
        secret_values(os.environ, overrides),
    )


def configure_logging(stream: TextIO, level: str, log_format: str, secrets: set[str]) -> None:
    """How every command logs: to ``stream``, every line redacted (``secrets``, passwords in
    URLs: :mod:`crontabber.redaction`), everett's raw values never logged, the client
    libraries' retry warnings without tracebacks unless DEBUG (a command reports a failure
    once, in one line)."""
    from .redaction import redact_handlers

    logging.basicConfig(level=level, stream=stream, format=log_format)
    redact_handlers(secrets, log_format)
    # everett logs the environment it searches at DEBUG, secrets included (73 lines)
    logging.getLogger("everett").setLevel(logging.WARNING)
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        from .failures import CLIENT_LOGGERS, NoClientTracebacks

        for name in CLIENT_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        for handler in logging.getLogger().handlers:
            handler.addFilter(NoClientTracebacks())
