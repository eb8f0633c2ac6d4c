"""List and delete, overlapped: one thread pages through ``list_objects_v2``
and hands batches of up to 1,000 selected keys to a pool of threads calling
``delete_objects`` on one shared client. Where the keys come from is a :class:`Source`:
the listing here (:class:`ListSource`), or an S3 Inventory report (:mod:`.inventory`).

Per-key errors in a ``delete_objects`` response are counted and sampled; the
keys stay in S3 and are retried by the next run. A run stops selecting keys
once ``cap`` keys have been selected (across rules) and says so.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Iterable, Iterator, Protocol

from .rules import Protection, Rule, older

logger = logging.getLogger(__name__)

BATCH = 1000  # delete_objects' maximum

# One entry of a ListObjectsV2 page's ``Contents`` (``Key``, ``Size``, ``LastModified``, ...),
# as boto3 returns it (boto3 has no type stubs here).
Listed = dict[str, Any]

# Given the keys of one listed page (already past the age), return those the
# database agrees may go (or None: no database check for this rule).
Check = Callable[[Rule, list[str], dt.datetime], set[str]]
# Told each batch of (key, size) before it is sent to delete_objects (on the caller's
# thread); returns the id of what it wrote, carried back by the batch's Batch.intent.
Intend = Callable[[list[tuple[str, int]]], "int | None"]


@dataclass(frozen=True)
class Batch:
    """What deleting one batch of keys did (in a dry run: the keys it would delete)."""

    keys: int  # deleted
    size: int  # bytes freed
    errors: list[str]  # one line per key that could not be deleted
    intent: int | None = None  # what Intend returned for the batch (none in a dry run)


@dataclass
class RuleResult:
    """What one rule did (or, in a dry run, would do): the one place a run's counts are
    summed (:meth:`add`)."""

    rule: str
    keys: int = 0
    bytes: int = 0
    errors: int = 0
    error_sample: list[str] = field(default_factory=list)  # the rule's first 5 errors

    def add(self, batch: Batch) -> None:
        self.keys += batch.keys
        self.bytes += batch.size
        self.errors += len(batch.errors)
        self.error_sample = (self.error_sample + batch.errors)[:5]


@dataclass
class Budget:
    """The per-run cap on deletions, shared by the rules of a run."""

    cap: int
    used: int = 0

    @property
    def exhausted(self) -> bool:
        return self.used >= self.cap

    def take(self, wanted: int) -> int:
        granted = min(wanted, self.cap - self.used)
        self.used += granted
        return granted


@dataclass(frozen=True)
class Scope:
    """What every rule of one run shares: the run's "now" (the database's clock), the
    protected symbol files, the cap, whether nothing is deleted, the threads, and the keys
    a rule may delete a second (0: no limit)."""

    now: dt.datetime
    protection: Protection
    budget: Budget
    dry_run: bool
    threads: int
    rate: float = 0.0


class Source(Protocol):
    """Where a rule's keys come from: :meth:`batches` selects them (within the budget, on
    the caller's thread), :meth:`confirm` is asked about each chunk just before it is sent
    (or, dry, counted) and returns the keys that may still go."""

    def batches(self) -> Iterator[list[tuple[str, int]]]:
        """Batches of ``(key, size)`` the rule may delete, at most 1,000 each."""
        ...

    def confirm(self, chunk: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """The keys of ``chunk`` that may still be deleted now."""
        ...


@dataclass
class Pace:
    """At most ``rate`` keys a second (0: no limit), one chunk at a time: :meth:`chunks`
    cuts a batch into chunks of at most a second's worth, :meth:`wait` sleeps until the
    next may be sent, :meth:`sent` is told when one was. Measured from each chunk's
    sending, so time spent between a wait and the sending (confirming the chunk) only
    slows the pace, never speeds it up."""

    rate: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _next: float = float("-inf")

    def chunks(self, batch: list[tuple[str, int]]) -> Iterator[list[tuple[str, int]]]:
        size = BATCH if self.rate <= 0 else max(1, min(BATCH, int(self.rate)))
        for start in range(0, len(batch), size):
            yield batch[start : start + size]

    def wait(self) -> None:
        """Return once the keys sent so far fit the rate."""
        if self.rate > 0 and self._next > (now := self.clock()):
            self.sleep(self._next - now)

    def sent(self, keys: int) -> None:
        """``keys`` keys were sent just now."""
        if self.rate > 0:
            self._next = self.clock() + keys / self.rate


def shards(client: Any, bucket: str, prefix: str) -> tuple[list[Listed], list[str]]:
    """Split a rule's prefix for parallel listing: the objects directly under it,
    and its first-level "folders" (``Delimiter='/'``), each listed on its own.

    s3proxy's filesystem backend scans the whole prefix for every page of a
    flat listing (quadratic in the number of keys); listing each folder
    separately, in parallel, is fast there and no slower on S3.
    """
    direct: list[Listed] = []
    folders: list[str] = []
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
        direct.extend(page.get("Contents", []))
        folders.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))
    return direct, folders


def _list_folder(
    client: Any,
    bucket: str,
    prefix: str,
    pages: "queue.Queue[list[Listed] | None]",
    stop: threading.Event,
) -> None:
    try:
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(
            Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": BATCH}
        ):
            if stop.is_set():
                return
            pages.put(page.get("Contents", []))
    finally:
        pages.put(None)  # this folder is done


def listed_pages(
    client: Any, rule: Rule, threads: int, stop: threading.Event
) -> Iterator[list[Listed]]:
    """Every object under the rule's prefix, a page at a time, listed on ``threads`` threads."""
    direct, folders = shards(client, rule.bucket, rule.prefix)
    for start in range(0, len(direct), BATCH):
        yield direct[start : start + BATCH]
    if not folders:
        return
    pages: queue.Queue[list[Listed] | None] = queue.Queue(maxsize=threads * 4)
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        futures = [
            pool.submit(_list_folder, client, rule.bucket, folder, pages, stop)
            for folder in folders
        ]
        remaining = len(folders)
        try:
            while remaining:
                page = pages.get()
                if page is None:
                    remaining -= 1
                    continue
                yield page
        finally:
            stop.set()
            while any(not f.done() for f in futures):  # unblock listers waiting on a full queue
                try:
                    pages.get(timeout=0.05)
                except queue.Empty:
                    pass
        for future in futures:
            future.result()  # a listing error fails the rule


def select_page(
    rule: Rule, page: Iterable[tuple[str, int, dt.datetime]], scope: Scope, check: Check | None
) -> list[tuple[str, int]]:
    """Of one page of ``(key, size, last_modified)``, the ``(key, size)`` the rule may
    delete: under its prefix, past its age, not protected, agreed by ``check`` (the
    database), within the budget (taken here). The one place every source selects."""
    candidates = {
        key: size
        for key, size, modified in page
        if key.startswith(rule.prefix)
        and older(modified, rule, scope.now)
        and scope.protection.allows(rule, key)
    }
    if check is not None and candidates:
        allowed = check(rule, list(candidates), scope.now)
        candidates = {key: size for key, size in candidates.items() if key in allowed}
    return list(candidates.items())[: scope.budget.take(len(candidates))]


@dataclass
class ListSource:
    """A rule's keys from listing its prefix (``list_objects_v2``, folders in parallel)."""

    client: Any
    rule: Rule
    scope: Scope
    check: Check | None

    def batches(self) -> Iterator[list[tuple[str, int]]]:
        """Pages of ``(key, size)`` this rule may delete, at most 1,000 each, within the
        budget. Runs in the caller's thread (``check`` may use a database connection)."""
        stop = threading.Event()
        for page in listed_pages(self.client, self.rule, self.scope.threads, stop):
            chosen = select_page(
                self.rule,
                ((obj["Key"], obj["Size"], obj["LastModified"]) for obj in page),
                self.scope,
                self.check,
            )
            if chosen:
                yield chosen
            if self.scope.budget.exhausted:
                stop.set()
                return

    def confirm(self, chunk: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """Listed a moment ago: as it was."""
        return chunk


def _delete(client: Any, bucket: str, batch: list[tuple[str, int]], intent: int | None) -> Batch:
    """Delete one batch of ``(key, size)``; what it did.

    A batch the server refuses as a whole (s3proxy answers InternalError for
    all 1,000 keys when one of them cannot be removed) is retried key by key,
    so one bad key never holds back its neighbours.
    """
    from botocore.exceptions import ClientError

    sizes = dict(batch)
    try:
        response = client.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": key} for key in sizes], "Quiet": True}
        )
    except ClientError as exc:
        logger.warning(
            "delete_objects of %d keys in %s failed (%s); deleting them one by one",
            len(sizes),
            bucket,
            exc,
        )
        return _delete_one_by_one(client, bucket, sizes, intent)
    errors = [
        f"{e.get('Key')}: {e.get('Code')} {e.get('Message', '')}".strip()
        for e in response.get("Errors", [])
    ]
    failed = {e.get("Key") for e in response.get("Errors", [])}
    done = [key for key in sizes if key not in failed]
    return Batch(len(done), sum(sizes[key] for key in done), errors, intent)


def _delete_one_by_one(
    client: Any, bucket: str, sizes: dict[str, int], intent: int | None
) -> Batch:
    from botocore.exceptions import ClientError

    deleted, freed, errors = 0, 0, []
    for key, size in sizes.items():
        try:
            client.delete_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            errors.append(f"{key}: {error.get('Code', '?')} {error.get('Message', '')}".strip())
            continue
        deleted += 1
        freed += size
    return Batch(deleted, freed, errors, intent)


def _paced_chunks(source: Source, pace: Pace) -> Iterator[list[tuple[str, int]]]:
    """The source's batches cut to the pace, each confirmed by the source once it may go
    (the caller tells ``pace`` when it sent it)."""
    batches = source.batches()
    try:
        for batch in batches:
            for chunk in pace.chunks(batch):
                pace.wait()
                chunk = source.confirm(chunk)
                if chunk:
                    yield chunk
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()  # the listing threads stop now, not when collected


def deleted_batches(
    client: Any, rule: Rule, source: Source, scope: Scope, intend: Intend
) -> Generator[Batch, None, None]:
    """Apply one rule: each batch once deleted (dry: once selected), as the deletions end.

    Selecting (``source``) runs in the caller's thread (a check and ``intend`` may use its
    database connection); ``intend`` is told each batch before it is sent (not in a dry run),
    so a record of it exists before any of its keys can be gone. Batches are sent at most
    ``scope.rate`` keys a second (0: no limit), cut into chunks of a second's worth. Up to
    ``threads * 2`` batches are deleted at once on ``threads`` threads sharing ``client``,
    while selecting goes on.
    """
    if scope.dry_run:
        for batch in _paced_chunks(source, Pace(0)):
            yield Batch(len(batch), sum(size for _, size in batch), [])
        return
    pace = Pace(scope.rate)
    with concurrent.futures.ThreadPoolExecutor(scope.threads) as pool:
        pending: set[concurrent.futures.Future[Batch]] = set()
        for batch in _paced_chunks(source, pace):  # selecting goes on meanwhile
            intent = intend(batch)
            pending.add(pool.submit(_delete, client, rule.bucket, batch, intent))
            pace.sent(len(batch))
            if len(pending) >= scope.threads * 2:  # bound memory: wait for some to finish
                done, pending = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    yield future.result()
        for future in concurrent.futures.as_completed(pending):
            yield future.result()
