"""``python -m jobs.missing_symbols``: operator commands. Parses, calls, prints.

- ``write FILE.jsonl [--bucket B] [--prefix P] [--key K]``: write one batch from a
  JSON-lines file (one event object per line) and print its key;
- ``demo [--bucket B]``: create the bucket if needed and write two small demo
  batches (for ``make run``'s demo data); print their keys.

Exit codes: 0 done, 1 bad input (unreadable file, bad JSON), 2 bad arguments.
S3 settings come from the environment (``jobs.s3``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from jobs.defaults import INBOX_BUCKET, MISSING_PREFIX

from .writer import read_jsonl, write_batch

DEMO_BATCHES: list[list[dict[str, Any]]] = [
    [{"debug_file": "xul.pdb", "debug_id": "44E4EC8C2F41492B9369D6B9A059577C2",
      "code_file": "xul.dll", "code_id": "5F3B1A2C1E4000", "count": 3},
     {"debug_file": "libc.so", "debug_id": "8E5E7AE4D9B24C1D1B1F8C2A3D4E5F600"},
     {"debug_file": "ntdll.pdb", "debug_id": "2F8B8E2CF7C849F8A9E2B3C4D5E6F7A81",
      "code_file": "ntdll.dll", "code_id": "9A8B7C6D1F2000"}],
    [{"debug_file": "xul.pdb", "debug_id": "44E4EC8C2F41492B9369D6B9A059577C2",
      "code_file": "xul.dll", "code_id": "5F3B1A2C1E4000"},
     {"debug_file": "libxul.so", "debug_id": "0A1B2C3D4E5F60718293A4B5C6D7E8F90", "count": 2}],
]


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m jobs.missing_symbols")
    commands = root.add_subparsers(dest="command", required=True)
    write = commands.add_parser("write", help="write one batch from a JSON-lines file")
    write.add_argument("file", type=Path)
    write.add_argument("--bucket", default=INBOX_BUCKET)
    write.add_argument("--prefix", default=MISSING_PREFIX)
    write.add_argument("--key", default=None, help="object key (default: a new unique key)")
    demo = commands.add_parser("demo", help="write two small demo batches")
    demo.add_argument("--bucket", default=INBOX_BUCKET)
    demo.add_argument("--prefix", default=MISSING_PREFIX)
    return root


def main(argv: list[str], stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    args = parser().parse_args(argv)
    from jobs.s3 import ensure_bucket, make_s3_client

    s3 = make_s3_client()
    if args.command == "demo":
        ensure_bucket(s3, args.bucket)
        for events in DEMO_BATCHES:
            print(write_batch(s3, args.bucket, events, args.prefix), file=stdout)
        return 0
    try:
        events = list(read_jsonl(args.file))
    except (OSError, ValueError) as exc:
        print(f"missing_symbols write: {exc}", file=stderr)
        return 1
    print(write_batch(s3, args.bucket, events, args.prefix, args.key), file=stdout)
    return 0
