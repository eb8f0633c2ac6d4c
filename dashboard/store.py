"""Every query of the dashboard's pipeline panels (``sql/dashboard/dashboard.sql``): the
upload queue, failed uploads, quarantined missing-symbol batches, the most
missed symbols of a day, the incremental indexer's watermark and the last
prune run. Records are frozen dataclasses; driver errors are translated here
(:class:`DatabaseUnavailable` for a lost connection, :class:`PanelQueryFailed`
for anything else, e.g. a table a job has not created yet)."""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import psycopg2

from crontabber import sqlfiles
from crontabber.errors import CrontabberError, DatabaseUnavailable
from crontabber.failures import first_line

SQL_DIR = sqlfiles.directory("dashboard")
Q = sqlfiles.load("dashboard.sql", SQL_DIR)


class PanelQueryFailed(CrontabberError):
    """A pipeline panel's query failed for a reason other than a lost connection."""

    def __init__(self, query: str, reason: str) -> None:
        self.query = query
        self.reason = reason
        super().__init__(f"dashboard query {query!r} failed: {reason}")


@dataclass(frozen=True)
class UploadQueue:
    """Uploads waiting (``pending``: new, or back for a retry) and being processed;
    the oldest pending one's creation time (None when none waits)."""

    pending: int
    processing: int
    oldest_pending: dt.datetime | None

    @property
    def depth(self) -> int:
        return self.pending + self.processing


@dataclass(frozen=True)
class FailedUpload:
    """An upload given up on (permanent error, or attempts used up)."""

    id: int
    filename: str
    uploaded_by: str | None
    attempts: int
    error: str | None
    completed_at: dt.datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "filename": self.filename,
            "uploaded_by": self.uploaded_by,
            "attempts": self.attempts,
            "error": self.error,
            "failed_at": self.completed_at,
        }


@dataclass(frozen=True)
class ReplacedFile:
    """A symbol file written over another file with other bytes (the ``overwrite`` rule
    ``replace`` or ``versioned``): what it replaced."""

    key: str
    upload_id: int
    replaced_at: dt.datetime
    previous_upload_id: int | None
    previous_md5: str | None
    previous_size: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "upload_id": self.upload_id,
            "replaced_at": self.replaced_at,
            "previous": {
                "upload_id": self.previous_upload_id,
                "md5": self.previous_md5,
                "size": self.previous_size,
            },
        }


@dataclass(frozen=True)
class QuarantinedBatch:
    """A missing-symbol batch rejected whole: none of its events were counted."""

    key: str
    events: int
    reason: str | None
    processed_at: dt.datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "events": self.events,
            "reason": self.reason,
            "quarantined_at": self.processed_at,
        }


@dataclass(frozen=True)
class MissedSymbol:
    """A symbol and how often it was looked up and missed on one day."""

    debug_file: str
    debug_id: str
    code_file: str
    code_id: str
    count: int

    def as_json(self) -> dict[str, Any]:
        return {
            "debug_file": self.debug_file,
            "debug_id": self.debug_id,
            "code_file": self.code_file,
            "code_id": self.code_id,
            "count": self.count,
        }


@dataclass(frozen=True)
class IndexWatermark:
    """``index_name`` holds every upload finished up to ``indexed_to``."""

    index_name: str
    indexed_to: dt.datetime
    updated_at: dt.datetime

    def as_json(self) -> dict[str, Any]:
        return {
            "index_name": self.index_name,
            "indexed_to": self.indexed_to,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True)
class PruneRule:
    """What one rule of a prune run deleted."""

    rule: str
    keys_deleted: int
    bytes_freed: int
    errors: int
    error_sample: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "keys_deleted": self.keys_deleted,
            "bytes_freed": self.bytes_freed,
            "errors": self.errors,
            "error_sample": self.error_sample,
        }


@dataclass(frozen=True)
class PruneRun:
    """A prune run (``finished_at`` None: running, or it died) and its rules."""

    id: int
    started_at: dt.datetime
    finished_at: dt.datetime | None
    dry_run: bool
    cap: int
    capped: bool
    holder: str
    rules: tuple[PruneRule, ...]

    @property
    def keys_deleted(self) -> int:
        return sum(rule.keys_deleted for rule in self.rules)

    @property
    def bytes_freed(self) -> int:
        return sum(rule.bytes_freed for rule in self.rules)

    @property
    def errors(self) -> int:
        return sum(rule.errors for rule in self.rules)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "dry_run": self.dry_run,
            "cap": self.cap,
            "capped": self.capped,
            "holder": self.holder,
            "keys_deleted": self.keys_deleted,
            "bytes_freed": self.bytes_freed,
            "errors": self.errors,
            "rules": [rule.as_json() for rule in self.rules],
        }


@dataclass(frozen=True)
class Listing:
    """The newest ``rows`` of a list and how many there are in all."""

    rows: tuple[Any, ...]
    total: int


class PipelineStore:
    """Runs ``sql/dashboard/dashboard.sql`` over one connection, one short transaction
    per call (``with self._conn``)."""

    def __init__(self, connection: Any, target: str = "the database") -> None:
        self._conn = connection
        self._target = target

    @contextlib.contextmanager
    def _translated(self, query: str) -> Iterator[None]:
        try:
            yield
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as exc:
            raise DatabaseUnavailable(self._target, first_line(exc)) from None
        except psycopg2.Error as exc:
            raise PanelQueryFailed(query, first_line(exc)) from None

    def _rows(self, name: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._translated(name), self._conn, self._conn.cursor() as cur:
            cur.execute(Q[name], params)
            columns = [column.name for column in cur.description]
            return [dict(zip(columns, row)) for row in cur.fetchall()]

    def now(self) -> dt.datetime:
        """The database clock."""
        return self._rows("clock")[0]["now"]

    def upload_queue(self) -> UploadQueue:
        row = self._rows("upload_queue")[0]
        return UploadQueue(int(row["pending"]), int(row["processing"]), row["oldest_pending"])

    def failed_uploads(self, since: dt.datetime, limit: int) -> Listing:
        """Uploads that failed for good after ``since``, newest first (at most ``limit``)."""
        rows = self._rows("failed_uploads", {"since": since, "limit": limit})
        found = tuple(
            FailedUpload(
                r["id"],
                r["filename"],
                r["uploaded_by"],
                r["attempts"],
                r["error"],
                r["completed_at"],
            )
            for r in rows
        )
        return Listing(found, int(rows[0]["total"]) if rows else 0)

    def replaced_files(self, since: dt.datetime, limit: int) -> Listing:
        """Symbol files written over other bytes after ``since``, newest first (at most
        ``limit``), and how many in all."""
        rows = self._rows("replaced_files", {"since": since, "limit": limit})
        found = tuple(
            ReplacedFile(
                r["key"],
                r["upload_id"],
                r["created_at"],
                r["previous_upload_id"],
                r["previous_md5"],
                r["previous_size"],
            )
            for r in rows
        )
        return Listing(found, int(rows[0]["total"]) if rows else 0)

    def quarantined_batches(self, limit: int) -> Listing:
        """Quarantined batches, newest first (at most ``limit``), and how many in all."""
        rows = self._rows("quarantined_batches", {"limit": limit})
        found = tuple(
            QuarantinedBatch(r["key"], int(r["events"]), r["reason"], r["processed_at"])
            for r in rows
        )
        return Listing(found, int(rows[0]["total"]) if rows else 0)

    def most_missed(self, day: dt.date, limit: int) -> tuple[MissedSymbol, ...]:
        """The symbols missed most on ``day`` (UTC), most first."""
        return tuple(
            MissedSymbol(
                r["debug_file"], r["debug_id"], r["code_file"], r["code_id"], int(r["count"])
            )
            for r in self._rows("most_missed", {"day": day, "limit": limit})
        )

    def watermark(self, alias: str) -> IndexWatermark | None:
        rows = self._rows("watermark", {"alias": alias})
        return IndexWatermark(**rows[0]) if rows else None

    def last_prune(self) -> PruneRun | None:
        """The newest prune run with its rules, or None before the first."""
        rows = self._rows("last_prune")
        if not rows:
            return None
        first = rows[0]
        rules = tuple(
            PruneRule(
                r["rule"],
                int(r["keys_deleted"]),
                int(r["bytes_freed"]),
                int(r["errors"]),
                r["error_sample"],
            )
            for r in rows
            if r["rule"] is not None
        )
        return PruneRun(
            first["id"],
            first["started_at"],
            first["finished_at"],
            first["dry_run"],
            first["cap"],
            first["capped"],
            first["holder"],
            rules,
        )
