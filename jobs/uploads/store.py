"""Every query on tables ``upload`` and ``file_upload`` (SQL in ``sql/jobs/uploads.sql``).

Each method is one short transaction (``with self._conn:``): claims commit at once,
so row locks are held for milliseconds and a claimed upload is protected by its
status and lease, not by an open transaction.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from psycopg2.extras import execute_values

from crontabber import sqlfiles
from jobs import SQL_DIR

from .errors import ClaimLost
from .records import Counts, Upload, UploadStatus, Written

Q = sqlfiles.load("uploads.sql", SQL_DIR)


class UploadStore:
    """The upload queue over one psycopg2 connection."""

    def __init__(self, connection: Any) -> None:
        self._conn = connection

    def _one(self, name: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
        with self._conn, self._conn.cursor() as cur:
            cur.execute(Q[name], params)
            row = cur.fetchone() if cur.description else None
            if row is None:
                return None
            return {column.name: value for column, value in zip(cur.description, row)}

    def enqueue(self, inbox_key: str, filename: str, size: int, uploaded_by: str | None) -> int:
        row = self._one(
            "enqueue",
            {
                "inbox_key": inbox_key,
                "filename": filename,
                "size": size,
                "uploaded_by": uploaded_by,
            },
        )
        assert row is not None
        return int(row["id"])

    def find_queued(self, filename: str, uploaded_by: str | None) -> int | None:
        row = self._one("find_queued", {"filename": filename, "uploaded_by": uploaded_by})
        return int(row["id"]) if row else None

    def get(self, upload_id: int) -> Upload | None:
        row = self._one("get", {"id": upload_id})
        return Upload.from_row(row) if row else None

    def row(self, upload_id: int) -> dict[str, Any] | None:
        return self._one("get", {"id": upload_id})

    def recent(self, status: UploadStatus | None, limit: int) -> list[dict[str, Any]]:
        """``list``: up to ``limit`` uploads (of ``status``, or all), newest first; each row
        also holds ``now``, the database's clock."""
        return self._all("recent", {"status": status.value if status else None, "limit": limit})

    def one(self, upload_id: int) -> dict[str, Any] | None:
        """``show ID``: the upload's row with ``files_written`` (its ``file_upload`` rows) and
        ``now``, the database's clock; None when there is no such upload."""
        return self._one("one", {"id": upload_id})

    def files(self, upload_id: int, limit: int) -> list[dict[str, Any]]:
        """``show ID``: up to ``limit`` of the objects the upload wrote, in key order."""
        return self._all("files", {"id": upload_id, "limit": limit})

    def _all(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        with self._conn, self._conn.cursor() as cur:
            cur.execute(Q[name], params)
            names = [column.name for column in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]

    def claim_next(
        self, worker: str, max_attempts: int, lease: float, retry_delay: float, exclude: list[int]
    ) -> Upload | None:
        """The oldest claimable upload, now ``processing`` by ``worker`` (attempts + 1)."""
        row = self._one(
            "claim_next",
            {
                "worker": worker,
                "max_attempts": max_attempts,
                "lease": lease,
                "retry_delay": retry_delay,
                "exclude": exclude,
            },
        )
        return Upload.from_row(row) if row else None

    def claimable(self, max_attempts: int, lease: float, retry_delay: float) -> int:
        """How many uploads :meth:`claim_next` would hand out now (a progress bar's total)."""
        row = self._one(
            "claimable", {"max_attempts": max_attempts, "lease": lease, "retry_delay": retry_delay}
        )
        return int(row["n"]) if row else 0

    def claim_id(self, upload_id: int, worker: str, lease: float) -> Upload | None:
        row = self._one("claim_id", {"id": upload_id, "worker": worker, "lease": lease})
        return Upload.from_row(row) if row else None

    def abandon_expired(self, max_attempts: int, lease: float) -> list[int]:
        with self._conn, self._conn.cursor() as cur:
            cur.execute(Q["abandon_expired"], {"max_attempts": max_attempts, "lease": lease})
            return [row[0] for row in cur.fetchall()]

    def finish_done(self, upload_id: int, worker: str, counts: Counts) -> None:
        row = self._one(
            "finish_done",
            {
                "id": upload_id,
                "worker": worker,
                "files_total": counts.total,
                "files_ignored": counts.ignored,
            },
        )
        if row is None:
            raise ClaimLost(upload_id, worker)

    def finish_error(
        self,
        upload_id: int,
        worker: str,
        error: str,
        permanent: bool,
        max_attempts: int,
        counts: Counts | None,
    ) -> UploadStatus:
        row = self._one(
            "finish_error",
            {
                "id": upload_id,
                "worker": worker,
                "error": error,
                "permanent": permanent,
                "max_attempts": max_attempts,
                "files_total": counts.total if counts else None,
                "files_ignored": counts.ignored if counts else None,
            },
        )
        if row is None:
            raise ClaimLost(upload_id, worker)
        return UploadStatus(row["status"])

    def recorder(self, upload_id: int, worker: str, heartbeat_seconds: float) -> "ClaimRecorder":
        return ClaimRecorder(self, upload_id, worker, heartbeat_seconds)


class ClaimRecorder:
    """The :class:`jobs.uploads.process.Recorder` of one claimed upload.

    Rows are buffered and committed in batches (``batch_size`` rows or every
    ``heartbeat_seconds``, and by :meth:`flush`): a commit per row cost about 6 ms here,
    10 s for a 1,600-file archive. A row lost by a crash is recovered from the object's
    metadata on the next attempt. Each flush also renews the lease (raising
    :class:`ClaimLost` if another worker took over).
    """

    def __init__(
        self,
        store: UploadStore,
        upload_id: int,
        worker: str,
        heartbeat_seconds: float,
        batch_size: int = 200,
    ) -> None:
        self._store = store
        self._id = upload_id
        self._worker = worker
        self._every = heartbeat_seconds
        self._batch_size = batch_size
        self._pending: list[tuple[Any, ...]] = []
        self._last = time.monotonic()

    def written_keys(self) -> set[str]:
        with self._store._conn, self._store._conn.cursor() as cur:
            cur.execute(Q["written_keys"], {"id": self._id})
            return {row[0] for row in cur.fetchall()}

    def record(self, written: Written) -> None:
        previous = written.previous
        self._pending.append(
            (
                self._id,
                written.key,
                written.size,
                written.original_size,
                written.original_md5,
                written.compressed,
                written.update,
                previous.original_md5 if previous else None,
                previous.original_size if previous else None,
                previous.upload_id if previous else None,
                written.code_id,
                written.code_file,
            )
        )
        if len(self._pending) >= self._batch_size or time.monotonic() - self._last >= self._every:
            self.flush()

    def flush(self) -> None:
        """Commit the buffered rows and renew the lease, in one transaction."""
        with self._store._conn, self._store._conn.cursor() as cur:
            cur.execute(Q["heartbeat"], {"id": self._id, "worker": self._worker})
            if cur.fetchone() is None:
                raise ClaimLost(self._id, self._worker)
            if self._pending:  # one statement: a round trip per row, each waiting for the
                # GIL behind the upload threads, cost 0.3-0.4 s per 289-file upload
                execute_values(cur, Q["record_files"], self._pending, page_size=1000)
        self._pending = []
        self._last = time.monotonic()

    def heartbeat(self) -> None:
        self.flush()

    def tick(self) -> None:
        """Renew the lease (and commit buffered rows) if ``heartbeat_seconds`` have passed."""
        if time.monotonic() - self._last >= self._every:
            self.flush()
