"""The prune job's SQL (sql/prune.sql): run records, and the upload and batch
tables that say which inbox objects are finished with."""

from __future__ import annotations

import datetime as dt
from typing import Any

from crontabber import queries

Q = queries.load("prune.sql")


class PruneStore:
    """One connection, one short transaction per call (``with self._conn``)."""

    def __init__(self, connection: Any) -> None:
        self._conn = connection

    def _run(self, name: str, params: dict[str, Any]) -> list[tuple]:
        with self._conn, self._conn.cursor() as cur:
            cur.execute(Q[name], params)
            return cur.fetchall() if cur.description else []

    def start_run(self, dry_run: bool, cap: int, holder: str) -> int:
        return int(self._run("start_run", {"dry_run": dry_run, "cap": cap, "holder": holder})[0][0])

    def add_rule(self, run_id: int, rule: str) -> None:
        self._run("add_rule", {"run_id": run_id, "rule": rule})

    def add_progress(self, run_id: int, rule: str, keys: int, size: int, errors: int,
                     error_sample: list[str]) -> None:
        """Add to a rule's totals; ``error_sample`` (if any) replaces the stored one."""
        self._run("add_progress", {"run_id": run_id, "rule": rule, "keys": keys, "bytes": size,
                                   "errors": errors,
                                   "error_sample": "\n".join(error_sample[:5]) or None})

    def finish_run(self, run_id: int, capped: bool) -> None:
        self._run("finish_run", {"run_id": run_id, "capped": capped})

    def fail_run(self, run_id: int, error: str) -> None:
        """The run ended with ``error`` (one line)."""
        self._run("fail_run", {"run_id": run_id, "error": error})

    def finished_uploads(self, keys: list[str], cutoff: dt.datetime) -> set[str]:
        return {row[0] for row in self._run("finished_uploads", {"keys": keys, "cutoff": cutoff})}

    def consumed_batches(self, keys: list[str], cutoff: dt.datetime) -> set[str]:
        return {row[0] for row in self._run("consumed_batches", {"keys": keys, "cutoff": cutoff})}

    def history(self, limit: int) -> list[dict[str, Any]]:
        names = ("id", "started_at", "finished_at", "dry_run", "cap", "capped", "holder",
                 "error", "rule", "keys_deleted", "bytes_freed", "errors", "error_sample")
        return [dict(zip(names, row)) for row in self._run("history", {"limit": limit})]
