"""``python -m jobs.prune run [--dry-run] [--cap N]`` and ``python -m jobs.prune history``.

Options come from crontabber.ini (``--admin.conf``), the environment and
``--crontabber.class-PruneS3CronApp.OPTION=VALUE`` overrides, as for the runner.
"""

from __future__ import annotations

import argparse
import datetime as dt
import dataclasses
import sys
from typing import TextIO

from crontabber.database import database_now, open_database
from crontabber.errors import CrontabberError
from crontabber.jobconfig import load_job_config

from . import PruneS3CronApp
from .runs import PruneOptions, format_report, run_prune, terminal_listeners
from .store import PruneStore


def main(argv: list[str], out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.prune",
        epilog="exit codes (the runner's): 0 ok; 1 bad argument, configuration, database or "
               "not found")
    parser.add_argument("--admin.conf", dest="conf", metavar="FILE", default=None)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="prune now (same rules as the cron job)")
    run.add_argument("--dry-run", action="store_true", help="print what would be deleted, delete nothing")
    run.add_argument("--cap", type=int, default=None, help="at most this many deletions")
    history = commands.add_parser("history", help="what the last runs deleted, per rule")
    history.add_argument("--limit", type=int, default=10, help="number of runs")
    args, rest = parser.parse_known_args(argv)
    try:
        # the runner's own parsing, so the overrides the docstring promises work
        from crontabber.cli import split_overrides

        config = load_job_config(PruneS3CronApp, args.conf, split_overrides(rest))
        connection = open_database(config, "jobs.prune")
        store = PruneStore(connection)
        if args.command == "history":
            print_history(store, args.limit, out)
            return 0
        from jobs.s3 import make_s3_client

        options = PruneOptions.from_config(config)
        options = dataclasses.replace(
            options, cap=options.cap if args.cap is None else args.cap,
            dry_run=args.dry_run or options.dry_run)
        # the database's clock, as the cron job uses
        report = run_prune(make_s3_client(max_pool_connections=options.threads + 1), store,
                           options, database_now(connection), terminal_listeners())
    except CrontabberError as exc:
        print(f"python -m jobs.prune: {exc}", file=sys.stderr)
        return 1
    for line in format_report(report):
        print(line, file=out)
    return 0


def utc(moment: dt.datetime) -> str:
    """``2026-11-23 12:00:00 UTC``: the one time format of the command (and the runner's)."""
    return f"{moment.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def print_history(store: PruneStore, limit: int, out: TextIO) -> None:
    for row in store.history(limit):
        state = "dry run" if row["dry_run"] else "run"
        ended = utc(row["finished_at"]) if row["finished_at"] else "unfinished (killed?)"
        capped = ", capped" if row["capped"] else ""
        print(f"#{row['id']} {state} {utc(row['started_at'])} -> {ended}{capped}: "
              f"{row['rule'] or '-'}: {row['keys_deleted'] or 0} keys, {row['bytes_freed'] or 0} bytes, "
              f"{row['errors'] or 0} errors", file=out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
