"""``python -m jobs.prune run [--dry-run] [--cap N]`` and ``python -m jobs.prune history``.

Options come from crontabber.ini (``--admin.conf``), the environment and
``--crontabber.class-PruneS3CronApp.OPTION=VALUE`` overrides, as for the runner; exit codes
and one-line errors: :mod:`crontabber.command` (the one table of every command).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TextIO

from crontabber import (
    ExitCode,
    command_parser,
    exit_quietly,
    one_line,
    printable,
    run_command,
    utc_text,
)
from crontabber.config.job import load_job_config
from crontabber.database import database_now, open_database, operator_command
from jobs import SQL_DIR

from . import PruneS3CronApp
from .runs import PruneOptions, format_report, run_prune, terminal_listeners
from .store import PruneStore

PROG = "python -m jobs.prune"


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(PROG, "Prune S3 now, or see what the last runs did.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run", help="prune now (same rules as the cron job; exit 5 if the run fails)"
    )
    run.add_argument(
        "--dry-run", action="store_true", help="print what would be deleted, delete nothing"
    )
    run.add_argument("--cap", type=int, default=None, help="at most this many deletions")
    run.add_argument(
        "--force",
        action="store_true",
        help="run even while prune-s3 is paused (needs --reason; recorded in --audit)",
    )
    run.add_argument("--reason", default=None, help="why (recorded in the audit trail)")
    history = commands.add_parser(
        "history", help="what the last runs deleted, per rule, and why a run failed"
    )
    history.add_argument("--limit", type=int, default=10, help="number of runs")
    return parser


def main(argv: list[str], out: TextIO = sys.stdout) -> int:
    def body(args: argparse.Namespace, overrides: dict[str, str]) -> int:
        config = load_job_config(PruneS3CronApp, args.conf, overrides)
        connection = open_database(config, "jobs.prune", [SQL_DIR])
        try:
            if args.command == "history":
                print_history(PruneStore(connection), args.limit, out)
                return ExitCode.OK
            from jobs.s3 import make_s3_client

            options = PruneOptions.from_config(config)
            options = dataclasses.replace(
                options,
                cap=options.cap if args.cap is None else args.cap,
                dry_run=args.dry_run or options.dry_run,
            )
            if not options.dry_run:  # deletes: a pause of the cron job stops this too
                operator_command(
                    connection,
                    PruneS3CronApp.app_name,
                    f"{PROG} run",
                    force=args.force,
                    reason=args.reason,
                    overrides=overrides,
                )
            # the database's clock, as the cron job uses
            report = run_prune(
                make_s3_client(max_pool_connections=options.threads + 1),
                PruneStore(connection, options.lease_seconds),
                options,
                database_now(connection),
                terminal_listeners(),
            )
        finally:
            connection.close()
        for line in format_report(report):
            print(line, file=out)
        return ExitCode.OK

    return run_command(build_parser(), body, argv)


def print_history(store: PruneStore, limit: int, out: TextIO) -> None:
    """One line per rule of each run, newest run first: when it started and ended (or
    failed, with its error in one line; or is still running: its lease is live; or never
    ended: killed), what the rule deleted (and by which inventory report, if one)."""
    for row in store.history(limit):
        state = "dry run" if row["dry_run"] else "run"
        if row["error"]:
            ended = f"failed {utc_text(row['finished_at'])} ({one_line(row['error'])})"
        elif row["finished_at"]:
            ended = utc_text(row["finished_at"])
        elif row["running"]:
            ended = f"running (on {printable(row['holder'])})"
        else:
            ended = "unfinished (killed?)"
        capped = ", capped" if row["capped"] else ""
        by = f" (by {printable(row['inventory'])})" if row["inventory"] else ""
        print(
            f"#{row['id']} {state} {utc_text(row['started_at'])} -> {ended}{capped}: "
            f"{printable(row['rule']) or '-'}{by}: {row['keys_deleted'] or 0} keys, "
            f"{row['bytes_freed'] or 0} bytes, "
            f"{row['errors'] or 0} errors",
            file=out,
        )


def run() -> None:
    """The console script (``symbols-prune``): the command line of this process."""
    exit_quietly(lambda: main(sys.argv[1:]))


if __name__ == "__main__":
    run()
