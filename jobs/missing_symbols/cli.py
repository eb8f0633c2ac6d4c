"""``python -m jobs.missing_symbols``: operator commands. Parses, calls, prints.

- ``write FILE.jsonl [--bucket B] [--prefix P] [--key K]``: write one batch from a
  JSON-lines file (one event object per line) and print its key;
- ``demo [--bucket B]``: create the bucket if needed and write two small demo
  batches (for ``make run``'s demo data); print their keys.

The bucket and prefix default to the ``missing-symbols`` job's ``inbox_bucket`` and
``prefix``, read as the runner reads them (``--admin.conf``, the environment,
``--crontabber.class-MissingSymbolsCronApp.inbox_bucket=...``); S3's address and credentials
come from the environment (``jobs.s3``). Exit codes and one-line errors:
:mod:`crontabber.command` (the one table of every command): 1 for a bad argument or an
unreadable or bad file (nothing written), 5 when S3 fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from crontabber import ExitCode, command_parser, printable, run_command

from .writer import read_jsonl, write_batch

PROG = "python -m jobs.missing_symbols"

DEMO_BATCHES: list[list[dict[str, Any]]] = [
    [
        {
            "debug_file": "xul.pdb",
            "debug_id": "44E4EC8C2F41492B9369D6B9A059577C2",
            "code_file": "xul.dll",
            "code_id": "5F3B1A2C1E4000",
            "count": 3,
        },
        {"debug_file": "libc.so", "debug_id": "8E5E7AE4D9B24C1D1B1F8C2A3D4E5F600"},
        {
            "debug_file": "ntdll.pdb",
            "debug_id": "2F8B8E2CF7C849F8A9E2B3C4D5E6F7A81",
            "code_file": "ntdll.dll",
            "code_id": "9A8B7C6D1F2000",
        },
    ],
    [
        {
            "debug_file": "xul.pdb",
            "debug_id": "44E4EC8C2F41492B9369D6B9A059577C2",
            "code_file": "xul.dll",
            "code_id": "5F3B1A2C1E4000",
        },
        {"debug_file": "libxul.so", "debug_id": "0A1B2C3D4E5F60718293A4B5C6D7E8F90", "count": 2},
    ],
]


def parser() -> argparse.ArgumentParser:
    root = command_parser(PROG, "Write missing-symbol batches to the inbox.")
    commands = root.add_subparsers(dest="command", required=True)
    write = commands.add_parser("write", help="write one batch from a JSON-lines file")
    write.add_argument("file", type=Path)
    write.add_argument("--bucket", default=None, help="default: the job's inbox_bucket")
    write.add_argument("--prefix", default=None, help="default: the job's prefix")
    write.add_argument("--key", default=None, help="object key (default: a new unique key)")
    demo = commands.add_parser("demo", help="write two small demo batches")
    demo.add_argument("--bucket", default=None, help="default: the job's inbox_bucket")
    demo.add_argument("--prefix", default=None, help="default: the job's prefix")
    return root


def main(
    argv: list[str] | None = None, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr
) -> int:
    def body(args: argparse.Namespace, overrides: dict[str, str]) -> int:
        from crontabber.config.job import load_job_config

        from .apps import MissingSymbolsCronApp

        config = load_job_config(MissingSymbolsCronApp, args.conf, overrides)
        bucket = args.bucket or config["inbox_bucket"]
        prefix = args.prefix if args.prefix is not None else config["prefix"]
        if args.command == "demo":
            return _demo(bucket, prefix, stdout)
        return _write(args.file, bucket, prefix, args.key, stdout)

    return run_command(parser(), body, argv, stderr)


def _demo(bucket: str, prefix: str, out: TextIO) -> int:
    from jobs.s3 import ensure_bucket, make_s3_client

    s3 = make_s3_client()
    ensure_bucket(s3, bucket)
    for events in DEMO_BATCHES:
        print(printable(write_batch(s3, bucket, events, prefix)), file=out)
    return ExitCode.OK


def _write(path: Path, bucket: str, prefix: str, key: str | None, out: TextIO) -> int:
    """Read the whole file first: a bad line writes nothing (EventsFileError, exit 1)."""
    events: list[dict[str, Any]] = list(read_jsonl(path))
    from jobs.s3 import make_s3_client

    print(printable(write_batch(make_s3_client(), bucket, events, prefix, key)), file=out)
    return ExitCode.OK
