"""``python -m jobs.uploads [--admin.conf=INI] enqueue|reprocess|demo|drain``: parse, call, print.

Options (buckets, limits, database) are the job's, read as the runner reads them:
command line (``--crontabber.class-ProcessUploadsCronApp.symbols_bucket=...``),
environment, then the INI file.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, TextIO

from crontabber.errors import CrontabberError
from crontabber.options import DotDict

from .app import ProcessUploadsCronApp
from .records import Progress, QuietProgress, UploadStatus

# the runner's table (crontabber.cli.ExitCode), so one table serves every command
EXIT_OK, EXIT_ERROR, EXIT_FAILED = 0, 1, 5
EXIT_CODES = ("exit codes (the runner's): 0 ok; 1 bad argument, configuration, database or "
              "not found; 5 the work ran and failed (the upload was rejected or failed)")


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, dict[str, str]]:
    parser = argparse.ArgumentParser(prog="python -m jobs.uploads", epilog=EXIT_CODES)
    parser.add_argument("--admin.conf", dest="conf", default=None, help="crontabber.ini to read")
    commands = parser.add_subparsers(dest="command", required=True)
    enqueue = commands.add_parser("enqueue", help="store an archive in the inbox and queue it")
    enqueue.add_argument("archive", type=Path)
    enqueue.add_argument("--uploaded-by", default=None)
    reprocess = commands.add_parser("reprocess", help="process one upload now")
    reprocess.add_argument("id", type=int)
    commands.add_parser("demo", help="queue a few small demo archives (idempotent)")
    commands.add_parser("drain", help="process queued uploads until none is left (one worker)")
    args, rest = parser.parse_known_args(argv)
    overrides = {}
    for item in rest:
        if not item.startswith("--") or "=" not in item:
            parser.error(f"unrecognized argument: {item}")
        name, _, value = item[2:].partition("=")
        overrides[name] = value
    return args, overrides


def _connect(config: DotDict) -> Any:
    from crontabber.database import open_database

    return open_database(config, "jobs.uploads")


def main(argv: list[str] | None = None, stdout: TextIO = sys.stdout,
         stderr: TextIO = sys.stderr) -> int:
    args, overrides = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, stream=stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        from crontabber.jobconfig import load_job_config

        # the job's options as the runner would resolve them
        config = load_job_config(ProcessUploadsCronApp, args.conf, overrides)
        command: Callable[[Any, DotDict, TextIO], int] = COMMANDS[args.command]
        return command(args, config, stdout)
    except CrontabberError as exc:
        print(f"python -m jobs.uploads: {exc}", file=stderr)
        return EXIT_ERROR


def cmd_enqueue(args: Any, config: DotDict, out: TextIO) -> int:
    from .commands import check_local_archive, enqueue_archive
    from .storage import make_client
    from .store import UploadStore

    check_local_archive(args.archive)
    connection = _connect(config)
    try:
        upload_id = enqueue_archive(UploadStore(connection), make_client(config["concurrency"]),
                                    config["inbox_bucket"], config["inbox_prefix"], args.archive,
                                    args.uploaded_by)
    finally:
        connection.close()
    print(upload_id, file=out)
    return EXIT_OK


def cmd_reprocess(args: Any, config: DotDict, out: TextIO) -> int:
    from .worker import Worker

    connection = _connect(config)
    worker = Worker.from_config(config, connection)
    try:
        with _progress(out) as progress:
            outcome = worker.reprocess(args.id, progress)
        row = worker.store.row(args.id) or {}
    finally:
        connection.close()
    print(f"upload {args.id}: {outcome.status.value}" +
          (f" ({outcome.error})" if outcome.error else
           f" ({row.get('files_uploaded')} uploaded, {row.get('files_skipped')} skipped, "
           f"{row.get('files_ignored')} ignored)"), file=out)
    return EXIT_OK if outcome.status is UploadStatus.DONE else EXIT_FAILED


def cmd_demo(args: Any, config: DotDict, out: TextIO) -> int:
    from .commands import demo
    from .storage import make_client
    from .store import UploadStore

    connection = _connect(config)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = demo(UploadStore(connection), make_client(config["concurrency"]),
                           (config["inbox_bucket"], config["symbols_bucket"]),
                           config["inbox_prefix"], Path(tmp))
    finally:
        connection.close()
    for filename, upload_id, new in results:
        print(f"{upload_id}\t{filename}\t{'queued' if new else 'already queued'}", file=out)
    return EXIT_OK


def cmd_drain(args: Any, config: DotDict, out: TextIO) -> int:
    from .worker import Worker

    connection = _connect(config)
    try:
        outcomes = Worker.from_config(config, connection).drain()
    finally:
        connection.close()
    for outcome in outcomes:
        print(f"{outcome.upload_id}\t{outcome.status.value}" +
              (f"\t{outcome.error}" if outcome.error else ""), file=out)
    return EXIT_OK


class TqdmProgress:
    """A :class:`~jobs.uploads.records.Progress` drawn by tqdm on ``stream``: one unit per
    member (published or already there), with the total, so tqdm shows the ETA."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._bar: Any = None

    def start(self, total: int) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=total, unit="file", desc="verify+publish", file=self._stream)

    def advance(self, count: int) -> None:
        if self._bar is not None:
            self._bar.update(count)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class _progress:
    """A bar on stderr when stdout is a terminal; nothing otherwise (quiet logs)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._bar: TqdmProgress | None = None

    def __enter__(self) -> Progress:
        if not self._out.isatty():
            return QuietProgress()
        self._bar = TqdmProgress(sys.stderr)
        return self._bar

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()


COMMANDS: dict[str, Callable[[Any, DotDict, TextIO], int]] = {
    "enqueue": cmd_enqueue, "reprocess": cmd_reprocess, "demo": cmd_demo, "drain": cmd_drain}
