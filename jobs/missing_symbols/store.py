"""The one module that runs SQL on the missing-symbol tables (``sql/jobs/missing_symbols.sql``).

Each public method is one visible transaction, except :class:`BatchTransaction`,
whose steps share the transaction opened by :meth:`MissingSymbolStore.batches`:
claiming batches, staging their counts, merging them and recording the batch
rows commit together or not at all (exactly-once counting).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from crontabber import sqlfiles
from jobs import SQL_DIR

Q = sqlfiles.load("missing_symbols.sql", SQL_DIR)


@dataclass(frozen=True)
class BatchOutcome:
    """What happened to one batch: counted (``reason`` None) or quarantined."""

    key: str
    events: int
    reason: str | None = None

    @property
    def status(self) -> str:
        return "ok" if self.reason is None else "quarantined"


class _Chunks:
    """A file-like reader over string chunks, for ``copy_expert``."""

    def __init__(self, chunks: Iterator[str]) -> None:
        self._chunks = chunks

    def read(self, size: int = -1) -> str:
        return next(self._chunks, "")


class BatchTransaction:
    """The steps of consuming batches, inside one open transaction."""

    def __init__(self, cursor: Any) -> None:
        self._cur = cursor

    def claim(self, keys: list[str]) -> list[str]:
        """The keys of ``keys`` this transaction now owns: advisory-locked here and
        not yet consumed. Locks last until commit or rollback."""
        if not keys:
            return []
        self._cur.execute(Q["try_lock"], {"keys": keys})
        locked = [row[0] for row in self._cur.fetchall()]
        if not locked:
            return []
        # A new statement, a new snapshot: sees batches committed by a previous holder.
        self._cur.execute(Q["processed_keys"], {"keys": locked})
        done = {row[0] for row in self._cur.fetchall()}
        return [key for key in locked if key not in done]

    def merge(self, rows: Iterable[str], one_day_per_symbol: bool) -> tuple[int, int]:
        """COPY one aggregate's rows (``aggregate.staging_chunks``: COPY's text
        format, sent as they are made, so the server loads a chunk while the next
        is built) into a staging table and upsert them; return (symbol rows, day
        rows) written. One aggregate holds each (hash, day) once, so the day rows
        need no grouping; with ``one_day_per_symbol``, neither do the symbol rows.
        Call it once per transaction (the staging table is created here).
        """
        self._cur.execute(Q["create_staging"])
        self._cur.copy_expert(Q["copy_staging"], _Chunks(iter(rows)))
        self._cur.execute(Q["merge_symbols_unique" if one_day_per_symbol else "merge_symbols"])
        symbols = self._cur.rowcount
        self._cur.execute(Q["merge_days"])
        return symbols, self._cur.rowcount

    def record(self, outcomes: list[BatchOutcome]) -> None:
        """One ``missing_symbol_batch`` row per batch; a key recorded twice fails
        the transaction (the primary key is the last guard of exactly-once)."""
        if not outcomes:
            return
        from psycopg2.extras import execute_values

        execute_values(
            self._cur,
            Q["record_batches"],
            [(o.key, o.events, o.status, o.reason) for o in outcomes],
            page_size=1000,
        )


class MissingSymbolStore:
    """Queries on ``missing_symbol``, ``missing_symbol_day`` and ``missing_symbol_batch``."""

    def __init__(self, connection: Any) -> None:
        self.conn = connection

    def processed(self, keys: list[str]) -> set[str]:
        """Which of ``keys`` have a batch row (were counted or quarantined)."""
        if not keys:
            return set()
        with self.conn, self.conn.cursor() as cur:
            cur.execute(Q["processed_keys"], {"keys": keys})
            return {row[0] for row in cur.fetchall()}

    @contextlib.contextmanager
    def batches(self) -> Iterator[BatchTransaction]:
        """One transaction: committed when the block ends, rolled back on an exception."""
        with self.conn, self.conn.cursor() as cur:
            yield BatchTransaction(cur)

    def report_rows(self, day: dt.date) -> Iterator[tuple[str, str, str, str, int]]:
        """The rows of ``day``'s report, by count descending, streamed from a server cursor."""
        with self.conn, self.conn.cursor(name="missing_symbol_report") as cur:
            cur.itersize = 10000
            cur.execute(Q["report_rows"], {"day": day})
            yield from cur

    def delete_old(self, keep_days: int, batch_size: int) -> tuple[int, int]:
        """Delete symbols not seen for ``keep_days`` and day rows older than that,
        ``batch_size`` rows per transaction; return (symbols, day rows) deleted."""
        return (
            self._delete_all("delete_old_symbols", keep_days, batch_size),
            self._delete_all("delete_old_days", keep_days, batch_size),
        )

    def _delete_all(self, query: str, keep_days: int, batch_size: int) -> int:
        total = 0
        while True:
            with self.conn, self.conn.cursor() as cur:
                cur.execute(Q[query], {"keep_days": keep_days, "batch_size": batch_size})
                deleted: int = cur.rowcount
            total += deleted
            if deleted < batch_size:
                return total

    def totals(self) -> tuple[int, int]:
        """(lookups counted, distinct symbols)."""
        with self.conn, self.conn.cursor() as cur:
            cur.execute(Q["totals"])
            lookups, symbols = cur.fetchone()
            return int(lookups), int(symbols)
