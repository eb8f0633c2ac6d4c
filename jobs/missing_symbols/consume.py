"""Consuming the inbox: claim batches, decode them in worker processes, upsert once.

For each group of up to ``batches_per_transaction`` unconsumed batches, one
transaction:

1. claims them (advisory locks, then a re-read of ``missing_symbol_batch``), so
   a batch another runner holds or has just consumed is skipped;
2. has ``workers`` processes stream them and count their events by their
   bytes, merges what they return and settles it once (each distinct event is
   decoded and validated once; a batch found bad then is quarantined and the
   group is read again without it). A worker that dies, or memory running out
   at any stage (in a worker or in this process), makes it read each batch
   alone: the one that fails alone is quarantined, the others are counted;
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
from typing import Any, Iterator

from crontabber.errors import CrontabberError

from .aggregate import Aggregate, BadBatch, BadBatches, collector_paused, staging_chunks
from .inbox import (
    BatchObject,
    DecodeResult,
    DecodeTask,
    decode_batches,
    list_batches,
    prepare_worker,
    quarantined,
)
from .memory import (
    DECODING,
    MERGING,
    RECEIVING,
    RETURNING,
    SETTLING,
    OutOfMemory,
    out_of_memory,
    reason,
    remote_out_of_memory,
)
from .store import BatchOutcome, MissingSymbolStore

logger = logging.getLogger(__name__)

#: Test hook: the name of a point at which the process stops and waits to be
#: killed (``before_commit``, ``after_commit``), after writing its pid to
#: ``MISSING_SYMBOLS_PAUSE_FILE``.
PAUSE_ENV = "MISSING_SYMBOLS_PAUSE_AT"
PAUSE_FILE_ENV = "MISSING_SYMBOLS_PAUSE_FILE"

#: Test hook: a worker that starts reading a key containing this text kills itself with
#: SIGKILL, as the kernel's OOM killer would (a real death of a real worker process).
DIE_ENV = "MISSING_SYMBOLS_DIE_ON"

DEFAULT_MAX_BATCH_BYTES = 64 << 20
DEFAULT_WORKER_MEMORY_MB = 2048


@dataclass(frozen=True)
class ConsumeSettings:
    """Where batches are and how to consume them."""

    bucket: str
    prefix: str = "missing/"
    workers: int = 2
    batches_per_transaction: int = 100
    #: A batch larger than this is quarantined unread (its size is the listing's).
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    #: How much a decoding worker may grow (address space, MiB; 0: no limit). A batch that
    #: needs more is quarantined; the host is never driven out of memory by one batch.
    worker_memory_mb: int = DEFAULT_WORKER_MEMORY_MB


@dataclass
class ConsumeReport:
    """What one run consumed."""

    batches: int = 0
    quarantined: int = 0
    events: int = 0
    lookups: int = 0
    skipped: int = 0


def pending_batches(
    store: MissingSymbolStore, s3_client: Any, bucket: str, prefix: str
) -> list[BatchObject]:
    """Listed batches without a ``missing_symbol_batch`` row, oldest first."""
    return pending_batches_listed(store, s3_client, bucket, prefix)[0]


def pending_batches_listed(
    store: MissingSymbolStore,
    s3_client: Any,
    bucket: str,
    prefix: str,
    max_listed: int | None = None,
) -> tuple[list[BatchObject], bool]:
    """:func:`pending_batches`, the listing stopped after ``max_listed`` objects (the
    dashboard's bound); and whether it was stopped there (then more may wait)."""
    pending: list[BatchObject] = []
    listed, capped = 0, False
    for page in list_batches(s3_client, bucket, prefix, max_listed):
        done = store.processed([obj.key for obj in page])
        pending += [obj for obj in page if obj.key not in done]
        listed += len(page)
    # (one more object may exist past exactly max_listed: "at least" is what is shown)
    capped = max_listed is not None and listed >= max_listed
    pending.sort(key=lambda obj: (obj.modified, obj.key))
    return pending, capped


def pause_point(name: str) -> None:
    """Stop here for a test that kills the process (see ``PAUSE_ENV``)."""
    if os.environ.get(PAUSE_ENV) != name:
        return
    with open(os.environ[PAUSE_FILE_ENV], "w") as marker:
        marker.write(str(os.getpid()))
    time.sleep(600)


class WorkerDied(CrontabberError):
    """A decoding worker process died (killed: out of memory, a signal) before answering."""


class Decoder:
    """Decodes tasks in this process (``workers`` <= 1) or in a pool of forked worker
    processes, each limited to ``worker_memory_mb`` of growth.

    A worker that dies is noticed at once (``concurrent.futures`` watches each worker's
    process; ``multiprocessing.Pool`` replaced it silently and the run waited for the
    task's result for 30 minutes): :meth:`__call__` raises :class:`WorkerDied` and the next
    call starts a new pool. Memory running out while a worker decodes or settles, while it
    sends its result (pickling) or while this process receives it (unpickling) raises
    :class:`OutOfMemory` naming the stage. :meth:`alone` decodes one task in a process of
    its own, to tell which batch does either.
    """

    def __init__(self, workers: int, worker_memory_mb: int = 0) -> None:
        self.workers = workers
        self.worker_memory_mb = worker_memory_mb
        self._pool: Any = None

    def __call__(self, tasks: list[DecodeTask]) -> Iterator[DecodeResult]:
        """Each task's result as soon as it is ready (in any order).

        Raises:
            WorkerDied: a worker died; the other results of this call are lost.
            OutOfMemory: memory ran out (in a worker, or ``in_job`` in this process); the
                other results of this call are lost.
            DecodeFailed: a worker failed to read or decode (S3, network).
        """
        if self.workers <= 1:
            yield from (_in_this_process(task) for task in tasks)
            return
        import concurrent.futures

        if self._pool is None:
            self._pool = self._new_pool(self.workers)
        futures = [self._pool.submit(_decode_in_worker, task) for task in tasks]
        try:
            for future in concurrent.futures.as_completed(futures, timeout=WORKER_TIMEOUT):
                yield _answer(_returned(future))
        except concurrent.futures.process.BrokenProcessPool as exc:
            self.close()
            raise _broken(exc, f"a decoding worker died: {exc}") from None
        finally:
            for future in futures:  # the others' results are no longer wanted
                future.cancel()

    def alone(self, task: DecodeTask) -> DecodeResult:
        """``task`` decoded in a new worker process of its own (in this process when there
        is no pool).

        Raises:
            WorkerDied: that process died.
            OutOfMemory: memory ran out (in that process, or ``in_job`` in this one).
            DecodeFailed: it failed to read or decode (S3, network).
        """
        if self.workers <= 1:
            return _in_this_process(task)
        import concurrent.futures

        with self._new_pool(1) as pool:
            try:
                return _answer(_returned(pool.submit(_decode_in_worker, task)))
            except concurrent.futures.process.BrokenProcessPool as exc:
                raise _broken(exc, f"the worker decoding {task.keys} died") from None

    def _new_pool(self, workers: int) -> Any:
        import concurrent.futures
        import multiprocessing

        return concurrent.futures.ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_worker_setup,
            initargs=(self.worker_memory_mb,),
        )

    def close(self) -> None:
        """End the pool's processes (idle workers exit on their own: no SIGTERM)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


@contextlib.contextmanager
def decoder(workers: int, worker_memory_mb: int = 0) -> Iterator[Decoder]:
    """A :class:`Decoder`, its processes ended when the block ends."""
    decode = Decoder(workers, worker_memory_mb)
    try:
        yield decode
    finally:
        decode.close()


def _answer(outcome: DecodeResult | OutOfMemory | str) -> DecodeResult:
    """A worker's result, or its failure raised: running out of memory is handled like
    dying (which of its batches needs so much is found by reading each alone)."""
    if isinstance(outcome, OutOfMemory):
        raise outcome
    if isinstance(outcome, str):
        raise DecodeFailed(outcome)
    return outcome


def _returned(future: Any) -> DecodeResult | OutOfMemory | str:
    """What a worker returned. Pickling the result happens in the worker after
    :func:`_decode_in_worker` returned, outside its ``try``: memory running out there
    reaches this process as the future's exception.

    Raises:
        OutOfMemory: the worker ran out of memory while sending its result.
        BrokenProcessPool: a worker died (or this process failed to read a result).
    """
    try:
        outcome: DecodeResult | OutOfMemory | str = future.result(WORKER_TIMEOUT)
        return outcome
    except (MemoryError, OSError) as exc:
        if not out_of_memory(exc):
            raise
    raise OutOfMemory(RETURNING)  # (raised here: the handled exception holds the worker's frames)


def _broken(exc: BaseException, died: str) -> CrontabberError:
    """What a broken pool means: this process ran out of memory reading a worker's result
    (``concurrent.futures`` reports that as a broken pool, the cause's text naming the
    error), or a worker died."""
    if remote_out_of_memory(str(exc.__cause__ or "")):
        return OutOfMemory(RECEIVING, in_job=True)
    return WorkerDied(died)


def _in_this_process(task: DecodeTask) -> DecodeResult:
    """:func:`decode_batches` in this process (no pool).

    Raises:
        OutOfMemory: ``in_job``: memory ran out decoding or settling.
    """
    stage = None
    try:
        return decode_batches(task)
    except OutOfMemory as exc:
        stage = exc.stage
    except (MemoryError, OSError) as exc:
        if not out_of_memory(exc):
            raise
        stage = DECODING
    raise OutOfMemory(stage, in_job=True)  # out of the handler: its frames (and memory) freed


def _worker_setup(worker_memory_mb: int) -> None:
    """In a worker: it dies with the job; SIGTERM kills quietly (the runner's handler,
    inherited by fork, would raise in the worker); Ctrl-C is the parent's to handle; its S3
    client is made; then the address space may grow by ``worker_memory_mb`` MiB past what it
    holds (then MemoryError, or death), never past the hard RLIMIT_AS."""
    import ctypes
    import resource
    import signal

    # die with the job (killed with -9, its workers would live on, holding copies of its
    # database socket: PostgreSQL would keep its session, and its locks, open)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux
    if os.getppid() == 1:  # the job died before prctl: orphaned already
        os._exit(71)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if worker_memory_mb > 0:  # the job's own soft limit is not the worker's
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    # the worker's fixed cost (its S3 client: imports, the service model) is paid before
    # its limit, which is then its batches' alone: the limit never blames a batch for it
    prepare_worker()
    if worker_memory_mb > 0:
        with open("/proc/self/statm") as statm:
            held = int(statm.read().split()[0]) * resource.getpagesize()
        limit = held + (worker_memory_mb << 20)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)  # (over it, setrlimit refused: every worker failed)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


#: Seconds a decoding task may take before the run fails (a stuck S3 read).
WORKER_TIMEOUT = 1800


class DecodeFailed(CrontabberError):
    """A worker process failed to read or decode its batches (S3 or network error)."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"missing-symbols: a decoding worker failed: {problem}")


def _decode_in_worker(task: DecodeTask) -> DecodeResult | OutOfMemory | str:
    """:func:`decode_batches`, an exception returned as text (not every exception
    survives pickling back to the parent: botocore's do not), memory running out (past
    worker_memory_mb; what it held is freed on the way out) as :class:`OutOfMemory`."""
    try:
        return decode_batches(task)
    except OutOfMemory as exc:  # settling
        return OutOfMemory(exc.stage)
    except Exception as exc:  # noqa: BLE001 - re-raised in the parent as DecodeFailed
        if out_of_memory(exc):
            return OutOfMemory(DECODING)
        return f"{type(exc).__name__}: {exc}"


def split(keys: list[str], parts: int) -> list[list[str]]:
    """``keys`` dealt round-robin into at most ``parts`` non-empty lists."""
    return [keys[index::parts] for index in range(min(parts, len(keys)))]


def decode_group(
    bucket: str,
    keys: list[str],
    workers: int,
    decode: Decoder,
    bad: dict[str, BatchOutcome] | None = None,
) -> tuple[Aggregate, list[BatchOutcome]]:
    """``keys``' events counted and settled, and each batch's outcome. Batches
    found bad when settling are quarantined and the others read again (once).
    ``bad``: batches already quarantined (oversized), not read.

    When a worker dies, or memory runs out anywhere (a worker decoding, settling or
    sending its result; this process receiving, merging or settling), each batch of the
    group is read again alone, in a process of its own, and settled here: one that fails
    so alone is quarantined, the others are counted (nothing of the failed read is kept).

    Raises:
        DecodeFailed: a worker died or memory ran out, and no batch alone does so.
    """
    bad = dict(bad or {})
    while True:
        todo = [key for key in keys if key not in bad]
        try:
            total, outcomes, found = _decode_once(bucket, todo, workers, decode)
        except (WorkerDied, OutOfMemory) as exc:
            failed = str(exc)
        else:
            if not found:
                return total, outcomes + list(bad.values())
            failed = ""
        # (out of the handler: what the failed read held is freed before reading alone)
        if failed:
            found = {outcome.key: outcome for outcome in _culprits(bucket, todo, decode)}
            if not found:
                raise DecodeFailed(f"{failed}; no batch alone fails so")
        for outcome in found.values():  # every bad batch at once: one more read, not one each
            logger.warning("missing-symbols: quarantined %s: %s", outcome.key, outcome.reason)
        bad.update(found)


def _decode_once(
    bucket: str, keys: list[str], workers: int, decode: Decoder
) -> tuple[Aggregate, list[BatchOutcome], dict[str, BatchOutcome]]:
    """``keys`` read by the workers, merged and settled here: the aggregate, each batch's
    outcome, and the batches found bad (stream or event), by key.

    Raises:
        WorkerDied: a worker died.
        OutOfMemory: memory ran out, in a worker or (``in_job``) here.
    """
    total, outcomes = Aggregate(), []
    try:
        for result in decode([DecodeTask(bucket, part) for part in split(keys, workers)]):
            total.merge(result.aggregate)
            outcomes += result.outcomes
    except (MemoryError, OSError) as exc:
        if not out_of_memory(exc):
            raise
    else:
        return _settled(total, outcomes)
    # raised out of the handler: a handled exception held in this frame would make a
    # reference cycle, and the collector is paused: the memory would stay held
    raise OutOfMemory(MERGING, in_job=True)


def _settled(
    total: Aggregate, outcomes: list[BatchOutcome]
) -> tuple[Aggregate, list[BatchOutcome], dict[str, BatchOutcome]]:
    """``total`` settled here, with ``outcomes`` and the batches found bad, by key.

    Raises:
        OutOfMemory: ``in_job`` (settling).
    """
    found: dict[str, BatchOutcome] = {}
    for outcome in outcomes:
        if outcome.reason is not None:
            _keep_first(found, outcome)
    faults = _settle_here(total)
    for fault in faults:
        _keep_first(found, quarantined(fault))
    return total, outcomes, found


def _settle_here(aggregate: Aggregate) -> list[BadBatch]:
    """Settle ``aggregate`` in this process; return each bad batch's first fault.

    Raises:
        OutOfMemory: ``in_job`` (settling); the aggregate must be discarded.
    """
    try:
        aggregate.settle(every_fault=True)
    except BadBatches as exc:
        return exc.faults
    except OutOfMemory:
        pass
    else:
        return []
    raise OutOfMemory(SETTLING, in_job=True)  # (out of the handler, as in _decode_once)


def _culprits(bucket: str, keys: list[str], decode: Decoder) -> list[BatchOutcome]:
    """The batches of ``keys`` that fail alone (read in a process of their own, settled
    here): their worker dies, or memory runs out at any stage; quarantined with why."""
    found = []
    for key in keys:
        try:
            _settle_here(
                decode.alone(DecodeTask(bucket, [key])).aggregate
            )  # (a bad event: found later)
        except WorkerDied:
            why = "worker died: the process decoding it alone was killed (out of memory?)"
        except OutOfMemory as exc:
            why = reason(exc, decode.worker_memory_mb)
        else:
            continue
        found.append(BatchOutcome(key, 0, why))
    return found


def _keep_first(found: dict[str, BatchOutcome], outcome: BatchOutcome) -> None:
    """Keep a batch's earliest fault (an invalid event before a malformed byte wins)."""
    known = found.get(outcome.key)
    if known is None or outcome.events < known.events:
        found[outcome.key] = outcome


def consume_group(
    store: MissingSymbolStore,
    bucket: str,
    keys: list[str],
    workers: int,
    decode: Decoder,
    report: ConsumeReport,
    oversized: dict[str, BatchOutcome] | None = None,
) -> None:
    """Consume ``keys`` in one transaction (steps 1-5 of the module docstring);
    ``oversized`` ones are recorded as quarantined, unread."""
    with store.batches() as tx:
        claimed = tx.claim(keys)
        report.skipped += len(keys) - len(claimed)
        if not claimed:
            return
        unread = {key: outcome for key, outcome in (oversized or {}).items() if key in claimed}
        for outcome in unread.values():
            logger.warning("missing-symbols: quarantined %s: %s", outcome.key, outcome.reason)
        total, outcomes = decode_group(bucket, claimed, workers, decode, unread)
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
    listed = pending_batches(store, s3_client, settings.bucket, settings.prefix)
    pending = [obj.key for obj in listed]
    if not pending:
        return report
    oversized = {
        obj.key: BatchOutcome(
            obj.key,
            0,
            f"oversized batch: {obj.size} bytes, over max_batch_bytes "
            f"({settings.max_batch_bytes}); not read",
        )
        for obj in listed
        if obj.size > settings.max_batch_bytes
    }
    size = max(1, settings.batches_per_transaction)
    # The collector paused for each group, until its aggregate is gone: running,
    # it rescanned the growing containers (unpickling a worker's 100,000 pending
    # events took 0.4 s instead of 0.035 s), and re-enabled while the aggregate
    # lived, its first collection scanned ~300,000 of them (0.1 s) for no garbage.
    with decoder(min(settings.workers, len(pending)), settings.worker_memory_mb) as decode:
        for start in range(0, len(pending), size):
            with collector_paused():
                consume_group(
                    store,
                    settings.bucket,
                    pending[start : start + size],
                    settings.workers,
                    decode,
                    report,
                    oversized,
                )
    return report
