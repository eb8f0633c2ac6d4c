"""``python -m jobs.uploads [--admin.conf=INI] enqueue|reprocess|demo|drain|list|show``: parse,
call, print.

Options (buckets, limits, database) are the job's, read as the runner reads them:
command line (``--crontabber.class-ProcessUploadsCronApp.symbols_bucket=...``),
environment, then the INI file. Exit codes and one-line errors: :mod:`crontabber.command`
(the one table of every command).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TextIO

from crontabber import ExitCode, command_parser, jsonout, run_command
from crontabber.config.options import DotDict
from crontabber.errors import ConfigurationError
from jobs import SQL_DIR

from .app import ProcessUploadsCronApp
from .records import Progress, QuietProgress, UploadStatus

if TYPE_CHECKING:
    from crontabber import CommandParser

PROG = "python -m jobs.uploads"


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m jobs.uploads``: one subcommand required."""
    parser = command_parser(PROG, "The upload queue's operator commands.")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_queue_commands(commands)
    _add_reading_commands(commands)
    return parser


def _add_queue_commands(commands: argparse._SubParsersAction[CommandParser]) -> None:
    """The subcommands that queue or process uploads: ``enqueue``, ``reprocess``, ``demo``,
    ``drain``; the two that publish take ``--force --reason`` (past a pause of
    process-uploads)."""
    enqueue = commands.add_parser("enqueue", help="store an archive in the inbox and queue it")
    enqueue.add_argument("archive", type=Path)
    enqueue.add_argument("--uploaded-by", default=None)
    reprocess = commands.add_parser(
        "reprocess", help="process one upload now (exit 5 if it is rejected or fails)"
    )
    reprocess.add_argument("id", type=int)
    commands.add_parser("demo", help="queue a few small demo archives (idempotent)")
    drain = commands.add_parser(
        "drain", help="process queued uploads until none is left (one worker)"
    )
    for command in (reprocess, drain):  # they publish: a pause of process-uploads stops them
        command.add_argument(
            "--force",
            action="store_true",
            help="run even while process-uploads is paused (needs --reason; recorded in --audit)",
        )
        command.add_argument("--reason", default=None, help="why (recorded in the audit trail)")


def _add_reading_commands(commands: argparse._SubParsersAction[CommandParser]) -> None:
    """The subcommands that read the queue: ``list`` and ``show``."""
    listing = commands.add_parser(
        "list", help="the latest uploads, newest first: id, status, age, files, size, key, error"
    )
    listing.add_argument(
        "--status",
        choices=[s.value for s in UploadStatus],
        default=None,
        help="only uploads of this status",
    )
    listing.add_argument(
        "--limit", type=int, default=20, metavar="N", help="at most N uploads (default 20)"
    )
    listing.add_argument("--json", action="store_true", help="one JSON document")
    show = commands.add_parser(
        "show",
        help=(
            "one upload: key, timings, file counts, error, the objects it wrote (exit 1 if there "
            "is no such upload)"
        ),
    )
    show.add_argument("id", type=int)
    show.add_argument(
        "--files",
        type=int,
        default=20,
        metavar="N",
        help="list at most N objects written (default 20; 0: none)",
    )
    show.add_argument("--json", action="store_true", help="one JSON document")


def _connect(config: DotDict) -> Any:
    from crontabber.database import open_database

    return open_database(config, "jobs.uploads", [SQL_DIR])


def main(
    argv: list[str] | None = None, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr
) -> int:
    def body(args: argparse.Namespace, overrides: dict[str, str]) -> int:
        from crontabber.config.job import load_job_config

        # the job's options as the runner would resolve them
        config = load_job_config(ProcessUploadsCronApp, args.conf, overrides)
        args.overrides = overrides  # recorded with a data-changing command (--audit)
        return COMMANDS[args.command](args, config, stdout)

    return run_command(build_parser(), body, argv, stderr)


def cmd_enqueue(args: Any, config: DotDict, out: TextIO) -> int:
    from .commands import check_local_archive, enqueue_archive
    from .storage import make_client
    from .store import UploadStore

    check_local_archive(args.archive)
    connection = _connect(config)
    try:
        upload_id = enqueue_archive(
            UploadStore(connection),
            make_client(config["concurrency"]),
            config["inbox_bucket"],
            config["inbox_prefix"],
            args.archive,
            args.uploaded_by,
        )
    finally:
        connection.close()
    print(upload_id, file=out)
    return ExitCode.OK


def cmd_reprocess(args: Any, config: DotDict, out: TextIO) -> int:
    from .worker import Worker

    connection = _connect(config)
    try:
        _refuse_while_paused(connection, f"{PROG} reprocess {args.id}", args)
        worker = Worker.from_config(config, connection)
        with _progress(out) as progress:
            outcome = worker.reprocess(args.id, progress)
        row = worker.store.row(args.id) or {}
    finally:
        connection.close()
    print(
        f"upload {args.id}: {outcome.status.value}"
        + (
            f" ({outcome.error})"
            if outcome.error
            else f" ({row.get('files_uploaded')} uploaded, {row.get('files_skipped')} skipped, "
            f"{row.get('files_ignored')} ignored)"
        ),
        file=out,
    )
    return ExitCode.OK if outcome.status is UploadStatus.DONE else ExitCode.JOB_FAILED


def _refuse_while_paused(connection: Any, command: str, args: Any) -> None:
    """The runner's rule of a pause (audited, with the command line's overrides).

    Raises:
        JobPaused: process-uploads is paused and ``--force`` is not given.
        PauseOverrideNeedsReason: it is paused and ``--force`` comes without ``--reason``.
    """
    from crontabber.database import operator_command

    operator_command(
        connection,
        ProcessUploadsCronApp.app_name,
        command,
        force=args.force,
        reason=args.reason,
        overrides=getattr(args, "overrides", None),
    )


def cmd_demo(args: Any, config: DotDict, out: TextIO) -> int:
    from .commands import demo
    from .storage import make_client
    from .store import UploadStore

    connection = _connect(config)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = demo(
                UploadStore(connection),
                make_client(config["concurrency"]),
                (config["inbox_bucket"], config["symbols_bucket"]),
                config["inbox_prefix"],
                Path(tmp),
            )
    finally:
        connection.close()
    for filename, upload_id, new in results:
        print(f"{upload_id}\t{filename}\t{'queued' if new else 'already queued'}", file=out)
    return ExitCode.OK


def cmd_drain(args: Any, config: DotDict, out: TextIO) -> int:
    from .worker import Worker

    connection = _connect(config)
    try:
        _refuse_while_paused(connection, f"{PROG} drain", args)
        with _progress(out, "drain", "upload") as progress:
            outcomes = Worker.from_config(config, connection).drain(progress=progress)
    finally:
        connection.close()
    for outcome in outcomes:
        print(
            f"{outcome.upload_id}\t{outcome.status.value}"
            + (f"\t{outcome.error}" if outcome.error else ""),
            file=out,
        )
    return ExitCode.OK


class TqdmProgress:
    """A :class:`~jobs.uploads.records.Progress` drawn by tqdm on ``stream``: each unit once
    (a member published or already there; an upload drained), against the total, so tqdm
    shows the ETA. Units beyond the total (uploads queued while ``drain`` runs) raise it."""

    def __init__(self, stream: TextIO, desc: str, unit: str) -> None:
        self._stream = stream
        self._desc = desc
        self._unit = unit
        self._bar: Any = None

    def start(self, total: int) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=total, unit=self._unit, desc=self._desc, file=self._stream)

    def advance(self, count: int) -> None:
        if self._bar is None:
            return
        if self._bar.total is not None and self._bar.n + count > self._bar.total:
            self._bar.total = self._bar.n + count
        self._bar.update(count)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class _progress:
    """A bar on stderr when stdout is a terminal; nothing otherwise (quiet logs)."""

    def __init__(self, out: TextIO, desc: str = "verify+publish", unit: str = "file") -> None:
        self._out = out
        self._desc = desc
        self._unit = unit
        self._bar: TqdmProgress | None = None

    def __enter__(self) -> Progress:
        if not self._out.isatty():
            return QuietProgress()
        self._bar = TqdmProgress(sys.stderr, self._desc, self._unit)
        return self._bar

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()


def cmd_list(args: Any, config: DotDict, out: TextIO) -> int:
    from .listing import list_lines, upload_json
    from .store import UploadStore

    if args.limit < 1:
        raise ConfigurationError("--limit", f"must be at least 1, not {args.limit}")
    connection = _connect(config)
    try:
        rows = UploadStore(connection).recent(
            UploadStatus(args.status) if args.status else None, args.limit
        )
    finally:
        connection.close()
    if args.json:
        jsonout.emit([upload_json(row) for row in rows], out)
    elif not rows:
        print("no uploads" + (f" with status {args.status}" if args.status else ""), file=out)
    else:
        for line in list_lines(rows):
            print(line, file=out)
    return ExitCode.OK


def cmd_show(args: Any, config: DotDict, out: TextIO) -> int:
    from .errors import NoSuchUpload
    from .listing import show_json, show_lines
    from .store import UploadStore

    if args.files < 0:
        raise ConfigurationError("--files", f"must be 0 or more, not {args.files}")
    connection = _connect(config)
    try:
        store = UploadStore(connection)
        row = store.one(args.id)
        if row is None:
            raise NoSuchUpload(args.id)
        files = store.files(args.id, args.files) if args.files else []
    finally:
        connection.close()
    if args.json:
        jsonout.emit(show_json(row, files), out)
    else:
        for line in show_lines(row, files):
            print(line, file=out)
    return ExitCode.OK


COMMANDS: dict[str, Callable[[Any, DotDict, TextIO], int]] = {
    "enqueue": cmd_enqueue,
    "reprocess": cmd_reprocess,
    "demo": cmd_demo,
    "drain": cmd_drain,
    "list": cmd_list,
    "show": cmd_show,
}
