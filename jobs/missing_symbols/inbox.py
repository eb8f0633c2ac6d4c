"""Reading batches from the inbox bucket: listing, streaming, decoding in workers.

:func:`decode_batches` is what a worker process runs: it streams each of its
batches from S3 through :func:`aggregate.aggregate_batch` and returns their
events counted by their bytes (an unsettled :class:`Aggregate`: the caller
merges the workers' and settles once, so each distinct event is decoded once
however many workers saw it) plus one :class:`BatchOutcome` per batch. A batch
whose stream is bad contributes no counts, only its outcome.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, Iterator

from jobs.s3 import is_not_found

from .aggregate import Aggregate, BadBatch, BadBatches, aggregate_batch
from .store import BatchOutcome

logger = logging.getLogger(__name__)

CHUNK_SIZE = 1 << 20


@dataclass(frozen=True)
class BatchObject:
    """A batch object as listed: key, size in bytes, last-modified (epoch seconds)."""

    key: str
    size: int
    modified: float


def list_batches(
    s3_client: Any, bucket: str, prefix: str, max_items: int | None = None
) -> Iterator[list[BatchObject]]:
    """The objects under ``prefix`` (the first ``max_items``), one list per listing page
    (up to 1,000)."""
    paginator = s3_client.get_paginator("list_objects_v2")
    config = {"MaxItems": max_items, "PageSize": min(1000, max_items)} if max_items else {}
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix, PaginationConfig=config):
        yield [
            BatchObject(obj["Key"], obj["Size"], obj["LastModified"].timestamp())
            for obj in page.get("Contents", [])
        ]


@dataclass(frozen=True)
class DecodeTask:
    """Batches for one worker to decode."""

    bucket: str
    keys: list[str]
    chunk_size: int = CHUNK_SIZE


@dataclass
class DecodeResult:
    """A worker's events, counted by their bytes and not yet settled, and each
    batch's outcome. ``gone``: keys whose object vanished before it was read (not
    consumed)."""

    aggregate: Aggregate = field(default_factory=Aggregate)
    outcomes: list[BatchOutcome] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)


_client: tuple[int, Any] | None = None


def _s3() -> Any:
    """This process's S3 client. Keyed by pid: a forked worker must never use a client
    inherited from its parent, whose pooled connections the parent (or a sibling) also
    reads from, which would mix up responses."""
    global _client
    if _client is None or _client[0] != os.getpid():
        from jobs.s3 import make_s3_client

        _client = (os.getpid(), make_s3_client())
    return _client[1]


def prepare_worker() -> None:
    """Make this process's S3 client now (a worker, before its memory limit is set)."""
    _s3()


def decode_batches(task: DecodeTask, s3_client: Any = None) -> DecodeResult:
    """Stream ``task``'s batches and count their events by their bytes (run in a
    worker process); the result's aggregate is not settled.

    Counts go straight into one aggregate for the whole task. A batch whose
    stream is bad gets a quarantined outcome and the task reads on: the job
    then reads the group again once without every bad batch found (a bad batch
    has already added part of its events; bad batches are rare, the common path
    pays nothing).

    Raises:
        botocore.exceptions.ClientError, BotoCoreError: S3 failed for another reason
            than a vanished object; the caller's transaction then rolls back.
    """
    s3 = s3_client or _s3()
    total = Aggregate()
    outcomes: list[BatchOutcome] = []
    gone: list[str] = []
    for key in task.keys:
        try:
            response = s3.get_object(Bucket=task.bucket, Key=key)
        except Exception as exc:
            if not is_not_found(exc):
                raise
            gone.append(key)
            continue
        before = total.events
        _die_here_for_tests(key)
        try:
            aggregate_batch(
                response["Body"].iter_chunks(task.chunk_size),
                response["LastModified"].timestamp(),
                task.chunk_size,
                into=total,
                batch=key,
            )
        except BadBatch as fault:
            outcomes.append(quarantined(fault))
            continue
        except BadBatches as found:  # settled early (the pending bound): any batch so far
            outcomes += [quarantined(fault) for fault in found.faults]
            continue
        finally:
            response["Body"].close()
        outcomes.append(BatchOutcome(key, total.events - before))
    return DecodeResult(total, outcomes, gone)


def _die_here_for_tests(key: str) -> None:
    """``MISSING_SYMBOLS_DIE_ON`` (tests only): SIGKILL this worker on a matching key."""
    marker = os.environ.get("MISSING_SYMBOLS_DIE_ON")
    if marker and marker in key:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def quarantined(fault: BadBatch) -> BatchOutcome:
    """The outcome of the batch ``fault`` names (its ``batch`` label is the key)."""
    return BatchOutcome(str(fault.batch), max(fault.event - 1, 0), str(fault))
