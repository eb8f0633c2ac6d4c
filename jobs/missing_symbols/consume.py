"""Consuming the inbox: claim batches, decode them in worker processes, upsert once.

For each group of up to ``batches_per_transaction`` unconsumed batches, one
transaction:

1. claims them (advisory locks, then a re-read of ``missing_symbol_batch``), so
   a batch another runner holds or has just consumed is skipped;
2. has ``workers`` processes stream them and count their events by their
   bytes, merges what they return and settles it once (each distinct event is
   decoded and validated once; a batch found bad then is quarantined and the
   group is read again without it);
3. COPYs the counts into a temporary table and merges them with two
   set-based ``INSERT ... ON CONFLICT`` statements;
4. inserts one ``missing_symbol_batch`` row per batch (counted or quarantined);
5. commits. A crash anywhere before the commit loses nothing (the batches are
   still unconsumed); after it, nothing is counted twice (they have rows).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from crontabber.errors import CrontabberError

from .aggregate import Aggregate, BadBatches, collector_paused, staging_chunks
from .inbox import (BatchObject, DecodeResult, DecodeTask, decode_batches, list_batches,
                    quarantined)
from .store import BatchOutcome, MissingSymbolStore

logger = logging.getLogger(__name__)

#: Test hook: the name of a point at which the process stops and waits to be
#: killed (``before_commit``, ``after_commit``), after writing its pid to
#: ``MISSING_SYMBOLS_PAUSE_FILE``.
PAUSE_ENV = "MISSING_SYMBOLS_PAUSE_AT"
PAUSE_FILE_ENV = "MISSING_SYMBOLS_PAUSE_FILE"

#: Decodes tasks, yielding each result as soon as it is ready (in any order).
Decoder = Callable[[list[DecodeTask]], Iterator[DecodeResult]]


@dataclass(frozen=True)
class ConsumeSettings:
    """Where batches are and how to consume them."""

    bucket: str
    prefix: str = "missing/"
    workers: int = 2
    batches_per_transaction: int = 100


@dataclass
class ConsumeReport:
    """What one run consumed."""

    batches: int = 0
    quarantined: int = 0
    events: int = 0
    lookups: int = 0
    skipped: int = 0


def pending_batches(store: MissingSymbolStore, s3_client: Any, bucket: str,
                    prefix: str) -> list[BatchObject]:
    """Listed batches without a ``missing_symbol_batch`` row, oldest first."""
    pending: list[BatchObject] = []
    for page in list_batches(s3_client, bucket, prefix):
        done = store.processed([obj.key for obj in page])
        pending += [obj for obj in page if obj.key not in done]
    pending.sort(key=lambda obj: (obj.modified, obj.key))
    return pending


def pause_point(name: str) -> None:
    """Stop here for a test that kills the process (see ``PAUSE_ENV``)."""
    if os.environ.get(PAUSE_ENV) != name:
        return
    with open(os.environ[PAUSE_FILE_ENV], "w") as marker:
        marker.write(str(os.getpid()))
    time.sleep(600)


@contextlib.contextmanager
def decoder(workers: int) -> Iterator[Decoder]:
    """A function decoding tasks: in this process (``workers`` <= 1) or a pool of
    forked worker processes, closed when the block ends."""
    if workers <= 1:
        yield lambda tasks: (decode_batches(task) for task in tasks)
        return
    import multiprocessing

    def decode(tasks: list[DecodeTask]) -> Iterator[DecodeResult]:
        outcomes = pool.imap_unordered(_decode_in_worker, tasks, chunksize=1)
        for _ in tasks:
            outcome = outcomes.next(WORKER_TIMEOUT)
            if isinstance(outcome, str):
                raise DecodeFailed(outcome)
            yield outcome

    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_worker_signals)
    try:
        yield decode
    except BaseException:
        pool.terminate()
        pool.join()
        raise
    pool.close()  # idle workers exit on their own: no SIGTERM, no traceback
    pool.join()


def _worker_signals() -> None:
    """In a worker: SIGTERM kills quietly (the runner's handler, inherited by fork, would
    raise in the worker); Ctrl-C is the parent's to handle."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: Seconds a decoding task may take before the run fails (a stuck S3 read).
WORKER_TIMEOUT = 1800


class DecodeFailed(CrontabberError):
    """A worker process failed to read or decode its batches (S3 or network error)."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"missing-symbols: a decoding worker failed: {problem}")


def _decode_in_worker(task: DecodeTask) -> DecodeResult | str:
    """:func:`decode_batches`, an exception returned as text: not every exception
    survives pickling back to the parent (botocore's do not)."""
    try:
        return decode_batches(task)
    except Exception as exc:  # noqa: BLE001 - re-raised in the parent as DecodeFailed
        return f"{type(exc).__name__}: {exc}"


def split(keys: list[str], parts: int) -> list[list[str]]:
    """``keys`` dealt round-robin into at most ``parts`` non-empty lists."""
    return [keys[index::parts] for index in range(min(parts, len(keys)))]


def decode_group(bucket: str, keys: list[str], workers: int, decode: Decoder
                 ) -> tuple[Aggregate, list[BatchOutcome]]:
    """``keys``' events counted and settled, and each batch's outcome. Batches
    found bad when settling are quarantined and the others read again (once)."""
    bad: dict[str, BatchOutcome] = {}
    while True:
        todo = [key for key in keys if key not in bad]
        total, outcomes = Aggregate(), []
        for result in decode([DecodeTask(bucket, part) for part in split(todo, workers)]):
            total.merge(result.aggregate)
            outcomes += result.outcomes
        found: dict[str, BatchOutcome] = {}
        for outcome in outcomes:
            if outcome.reason is not None:
                _keep_first(found, outcome)
        try:
            total.settle(every_fault=True)
        except BadBatches as exc:
            for fault in exc.faults:
                _keep_first(found, quarantined(fault))
        if not found:
            return total, outcomes + list(bad.values())
        for outcome in found.values():  # every bad batch at once: one more read, not one each
            logger.warning("missing-symbols: quarantined %s: %s", outcome.key, outcome.reason)
        bad.update(found)


def _keep_first(found: dict[str, BatchOutcome], outcome: BatchOutcome) -> None:
    """Keep a batch's earliest fault (an invalid event before a malformed byte wins)."""
    known = found.get(outcome.key)
    if known is None or outcome.events < known.events:
        found[outcome.key] = outcome


def consume_group(store: MissingSymbolStore, bucket: str, keys: list[str], workers: int,
                  decode: Decoder, report: ConsumeReport) -> None:
    """Consume ``keys`` in one transaction (steps 1-5 of the module docstring)."""
    with store.batches() as tx:
        claimed = tx.claim(keys)
        report.skipped += len(keys) - len(claimed)
        if not claimed:
            return
        total, outcomes = decode_group(bucket, claimed, workers, decode)
        tx.merge(staging_chunks(total), total.one_day_per_symbol())
        tx.record(outcomes)
        pause_point("before_commit")
    pause_point("after_commit")
    report.batches += len(outcomes)
    report.quarantined += sum(1 for o in outcomes if o.reason is not None)
    report.events += sum(o.events for o in outcomes if o.reason is None)
    report.lookups += total.lookups


def consume(store: MissingSymbolStore, s3_client: Any, settings: ConsumeSettings) -> ConsumeReport:
    """Consume every pending batch under ``settings.prefix``; return what was done."""
    report = ConsumeReport()
    pending = [obj.key for obj in pending_batches(store, s3_client, settings.bucket,
                                                  settings.prefix)]
    if not pending:
        return report
    size = max(1, settings.batches_per_transaction)
    # The collector paused for each group, until its aggregate is gone: running,
    # it rescanned the growing containers (unpickling a worker's 100,000 pending
    # events took 0.4 s instead of 0.035 s), and re-enabled while the aggregate
    # lived, its first collection scanned ~300,000 of them (0.1 s) for no garbage.
    with decoder(min(settings.workers, len(pending))) as decode:
        for start in range(0, len(pending), size):
            with collector_paused():
                consume_group(store, settings.bucket, pending[start:start + size],
                              settings.workers, decode, report)
    return report
