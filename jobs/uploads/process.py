"""Process one claimed upload: read the directory, download, verify and spool, then publish.

Nothing is published to the symbols bucket until the whole archive has passed: the
central directory (:mod:`jobs.uploads.validation`), then one pass over every member
(CRC, size, MD5). The directory is read first from a ranged GET of the archive's tail,
so the existence checks and the verify pass run while the archive downloads (each member
waits until its bytes are on disk). The pass already produces what will be written: a
member whose key is new (or not checked: see :mod:`jobs.uploads.existence`) is inflated
once, feeding MD5 and the isal compressor together, and its output is spooled to a file
beside the archive (memory stays at a chunk per thread; disk about the archive's size).
A member whose key exists is only digested (an identical file is never compressed); if
it changed, it is compressed in a second pass when it is written. Objects larger than
``multipart_threshold`` start their multipart upload as soon as they are spooled (parts
are invisible until completed, and every started upload is aborted if anything fails).
Once every member has passed, the spooled objects are PUT and the multipart uploads
completed, in a thread pool sharing one boto3 client. Each object written gets its
``file_upload`` row through the :class:`Recorder` (in batches), which also renews the
claim.

Idempotent: objects are deterministic (gzip without name or time), rows are unique per
(upload, key), and an object found with this upload's id in its metadata but no row
(killed between PUT and INSERT) gets its row from that metadata.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import logging
import os
import tempfile
import threading
import zipfile
from concurrent.futures import Executor, Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from . import archive, storage
from .errors import Rejected, StorageFailed, UploadError
from .existence import Lookup
from .records import Counts, Digest, Existing, Upload, UploadSettings, Written
from .validation import Plan, validate

logger = logging.getLogger(__name__)

RULE_NOT_ZIP = "not a zip archive (or its central directory is corrupt or truncated)"
TAIL = 1024 * 1024  # bytes of the archive's end fetched for its central directory


class Recorder(Protocol):
    """The database side of processing (implemented by the store)."""

    def written_keys(self) -> set[str]: ...

    def record(self, written: Written) -> None: ...

    def heartbeat(self) -> None: ...

    def tick(self) -> None: ...

    def flush(self) -> None: ...


Progress = Callable[[int], None]


@dataclass(frozen=True)
class Job:
    """What every task of one upload shares."""

    path: Path  # the archive
    spool: Path  # a directory for the objects to write
    upload_id: int
    settings: UploadSettings
    client: Any
    gate: Gate | None = None  # the archive is still downloading
    # multipart uploads started and not completed: {upload id: key} (aborted if we fail)
    staged: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # inflate/MD5/deflate at once: one per core, so the largest members (started first)
    # finish first and their parts travel while the rest is verified
    compute: threading.Semaphore = field(
        default_factory=lambda: threading.Semaphore(os.cpu_count() or 1))

    def spooled(self, index: int, info: zipfile.ZipInfo) -> tuple[Digest, Path]:
        """Stream member ``index`` into its spool file (gzipped if its key says so)."""
        target = self.spool / str(index)
        level = self.settings.gzip_level if self.settings.compresses(info.filename) else None
        with open(target, "wb") as out:
            return archive.spool(self.path, info, level, out), target

    def stage(self, written: Written, body: Path) -> Staged:
        """Upload a large object's parts (nothing visible until :meth:`complete`)."""
        ids: list[str] = []

        def started(upload: str) -> None:
            with self.lock:
                self.staged[upload] = written.key
                ids.append(upload)

        try:
            with open(body, "rb") as data:
                upload, parts = storage.start_multipart(
                    self.client, self.settings.symbols_bucket, written, data, self.upload_id,
                    self.settings.part_size, started)
        except BaseException:
            with self.lock:  # start_multipart aborted it already: not twice
                for upload in ids:
                    self.staged.pop(upload, None)
            raise
        return Staged(written, upload, parts)

    def complete(self, staged: Staged) -> Written:
        with self.lock:
            del self.staged[staged.upload]
        storage.complete_multipart(self.client, self.settings.symbols_bucket,
                                   staged.written.key, staged.upload, staged.parts)
        return staged.written

    def abort_staged(self) -> None:
        """Abort every multipart upload not completed (after a failure: none is published)."""
        with self.lock:
            left = dict(self.staged)
            self.staged.clear()
        for upload, key in left.items():
            storage.abort(self.client, self.settings.symbols_bucket, key, upload)


@dataclass(frozen=True)
class Staged:
    """A large object's multipart upload with all its parts, not completed (invisible)."""

    written: Written
    upload: str
    parts: list[dict]


@dataclass(frozen=True)
class Member:
    """A member after the verify pass: its digest, its object's file if spooled, and for
    a large object decided early: ``staged`` (to complete) or ``settled`` (there already;
    ``row`` is then the row to record, if any)."""

    index: int
    info: zipfile.ZipInfo
    key: str
    digest: Digest
    body: Path | None
    staged: Staged | None = None
    settled: bool = False
    row: Written | None = None


def process(upload: Upload, settings: UploadSettings, client: Any, recorder: Recorder,
            progress: Progress | None = None) -> Counts:
    """Publish one upload's archive; return its counts.

    Raises:
        Rejected: the archive breaks a rule (nothing written).
        StorageFailed: S3 failed after retries.
        ClaimLost: another worker took the upload over.
    """
    with tempfile.TemporaryDirectory(prefix="upload-") as tmp:
        path = Path(tmp) / "archive.zip"
        early = _directory(client, settings, upload, Path(tmp))
        gate = Gate(early.ends) if early is not None else None
        with ThreadPoolExecutor(1, thread_name_prefix="download") as side:
            downloading = side.submit(_download, client, settings, upload, path, early, gate)
            try:
                if early is None:
                    downloading.result()
                    plan = read_plan(path, settings)
                else:  # the existence checks and the verify pass overlap the download
                    plan = early.plan
                counts = Counts(plan.total, len(plan.ignored))
                (Path(tmp) / "spool").mkdir()
                job = Job(path, Path(tmp) / "spool", upload.id, settings, client, gate)
                try:
                    with _answers(client, settings, plan, recorder) as answers, \
                            ThreadPoolExecutor(settings.concurrency,
                                               thread_name_prefix="upload") as pool:
                        try:
                            publish(pool, job, plan, recorder, progress or _quiet, answers)
                        except BaseException as exc:
                            if gate is not None:
                                gate.stop()  # members still waiting for their bytes give up
                            pool.shutdown(wait=True, cancel_futures=True)
                            # a download that ended early explains the rest (a member read
                            # while it still runs was all on disk: its error stands); never
                            # hide SIGTERM or Ctrl-C
                            if isinstance(exc, Exception) and (gate is None or gate.over):
                                downloading.result()
                            raise
                finally:
                    job.abort_staged()
            finally:
                if gate is not None:
                    gate.stop()  # published or failed: do not wait for the rest of the archive
            _after_publishing(downloading, upload)
    return counts


def _quiet(_: int) -> None:
    return None


def _after_publishing(downloading: Future[None], upload: Upload) -> None:
    """Every member was verified and published: a download that failed after its last
    member's bytes (in the central directory, already read from the tail) changes nothing."""
    try:
        downloading.result()
    except StorageFailed as exc:
        logger.warning("upload %d: published; the archive's download then failed: %s",
                       upload.id, exc)


def read_plan(path: Path, settings: UploadSettings) -> Plan:
    """The validated plan of the archive at ``path``.

    Raises:
        Rejected: not a zip, or a rule broken by a member.
    """
    try:
        with zipfile.ZipFile(path) as zipped:
            infos = zipped.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise Rejected(RULE_NOT_ZIP, None, str(exc)) from None
    return validate(infos, settings.limits)


@dataclass(frozen=True)
class Answers:
    """The archive's keys (in archive order), those this upload already recorded, and the
    existence checks of the others (running)."""

    keys: list[str]
    done: set[str]
    lookup: Lookup

    def __enter__(self) -> Answers:
        return self

    def __exit__(self, *_: object) -> None:
        self.lookup.close()


@dataclass(frozen=True)
class Directory:
    """The archive's validated plan read from its tail before the download, the version
    (ETag) it belongs to, and where each member's data ends in the archive."""

    plan: Plan
    etag: str
    ends: dict[str, int]


class Gate:
    """How much of the archive is on disk: a member is verified as soon as it is all there."""

    def __init__(self, ends: dict[str, int]) -> None:
        self.ends = ends
        self._ready = threading.Condition()
        self._have = 0
        self._over = False
        self._stopped = False

    @property
    def have(self) -> int | None:
        """Bytes on disk; None once the download is over (nothing more will come)."""
        with self._ready:
            return None if self._over else self._have

    def written(self, size: int) -> bool:
        """``size`` bytes are on disk; returns whether the download is to go on."""
        with self._ready:
            self._have = size
            self._ready.notify_all()
            return not self._stopped

    def close(self) -> None:
        """The download ended (done or failed: then the main thread reports its error)."""
        with self._ready:
            self._over = True
            self._ready.notify_all()

    @property
    def over(self) -> bool:
        with self._ready:
            return self._over

    def stop(self) -> None:
        """The rest of the archive is not needed (the upload is published or has failed):
        the download ends after its current chunk, and members still waiting give up."""
        with self._ready:
            self._stopped = True
            self._ready.notify_all()

    def wait(self, info: zipfile.ZipInfo) -> None:
        """Until the member's bytes are on disk, the download ended, or it was stopped."""
        end = self.ends[info.filename]
        with self._ready:
            self._ready.wait_for(lambda: self._have >= end or self._over or self._stopped)


def _download(client: Any, settings: UploadSettings, upload: Upload, path: Path,
              early: Directory | None, gate: Gate | None) -> None:
    try:
        with open(path, "wb") as target:
            storage.download(client, settings.inbox_bucket, upload.inbox_key, target,
                             etag=early.etag if early else None,
                             written=gate.written if gate else None)
    finally:
        if gate is not None:
            gate.close()


def _answers(client: Any, settings: UploadSettings, plan: Plan, recorder: Recorder) -> Answers:
    """Start the existence checks, largest member first, as the verify pass will mostly
    need them (it waits per key, so it starts on the first members while the rest are
    checked)."""
    keys = [settings.object_key(info.filename) for info in plan.members]
    largest_first = sorted(range(len(keys)), key=lambda i: -plan.members[i].file_size)
    done = recorder.written_keys()  # (the verify pass renews the lease when due)
    lookup = Lookup(client, settings.symbols_bucket,
                    [keys[i] for i in largest_first if keys[i] not in done],
                    settings.existence_check, max(1, settings.concurrency - 1))
    return Answers(keys, done, lookup)


def _directory(client: Any, settings: UploadSettings, upload: Upload, tmp: Path) -> Directory | None:
    """The archive's central directory from a ranged GET of its tail into a sparse file,
    so that the existence checks and the verify pass need not wait for the download (which
    then asks for the same ETag). Best effort: None when the directory is not in the tail,
    is not valid, or S3 failed (the download then comes first and decides).
    """
    sparse = tmp / "directory.zip"
    try:
        etag = storage.fetch_tail(client, settings.inbox_bucket, upload.inbox_key, sparse, TAIL)
        plan = read_plan(sparse, settings)
        with zipfile.ZipFile(sparse) as zipped:
            starts = sorted({info.header_offset for info in zipped.infolist()})
            # the last member's data ends where the central directory starts (already read:
            # its verify need not wait for the download's last bytes)
            directory = getattr(zipped, "start_dir", None)
        size = sparse.stat().st_size
    except (UploadError, OSError, zipfile.BadZipFile):
        return None
    finally:
        sparse.unlink(missing_ok=True)
    last = directory if isinstance(directory, int) and starts and starts[-1] < directory <= size \
        else size
    after = dict(zip(starts, starts[1:] + [last]))
    return Directory(plan, etag, {info.filename: after[info.header_offset] for info in plan.members})


def publish(pool: Executor, job: Job, plan: Plan, recorder: Recorder, progress: Progress,
            answers: Answers) -> None:
    """Verify (and spool) every member, then write those that are missing or changed."""
    members = _verified(pool, job, plan, answers, recorder, progress)
    done, existing = answers.done, answers.lookup.result()
    recorder.heartbeat()
    writes: list[Future[Written | None]] = []
    for member in members:
        if member.staged is not None:
            writes.append(pool.submit(job.complete, member.staged))
            continue
        if member.key in done or member.settled:
            if member.row is not None:
                recorder.record(member.row)
            progress(1)
            continue
        found = existing.get(member.key)
        if member.key in existing:
            unchanged, row = _unchanged(found, member, job)
            if unchanged:
                if row is not None:
                    recorder.record(row)  # written by this upload, killed before its row
                progress(1)
                continue
        writes.append(pool.submit(_write, job, member, found is not None,
                                  member.key not in existing))
    for future in as_completed(writes):
        row = future.result()
        if row is not None:
            recorder.record(row)
        progress(1)
    recorder.flush()


def _verified(pool: Executor, job: Job, plan: Plan, answers: Answers, recorder: Recorder,
              progress: Progress) -> list[Member]:
    """Every member verified, in archive order; the first rejected one (in archive order)
    wins. Members to write are spooled on the way, in the order of :class:`_Queue`, on
    ``concurrency`` threads of ``pool``."""
    keys = answers.keys

    def verify(index: int) -> Member:
        info, key = plan.members[index], keys[index]
        if job.gate is not None:
            job.gate.wait(info)
        done = key in answers.done
        checked, found = (True, None) if done else answers.lookup.get(key)
        with job.compute:
            if done or found is not None:
                return Member(index, info, key, archive.digest(job.path, info), None)
            digest, body = job.spooled(index, info)
        member = Member(index, info, key, digest, body)
        if body.stat().st_size > job.settings.multipart_threshold:
            return _stage(job, member, conditional=not checked)
        return member

    futures: list[Future[Member]] = [Future() for _ in keys]
    queue = _Queue(plan, job.gate)

    def work() -> None:
        while (index := queue.take()) is not None:
            if not futures[index].set_running_or_notify_cancel():
                continue
            try:
                futures[index].set_result(verify(index))
            except BaseException as exc:
                futures[index].set_exception(exc)
                if not isinstance(exc, Exception):  # this thread stops: so does the pass
                    for left in queue.close():
                        if futures[left].set_running_or_notify_cancel():
                            futures[left].set_exception(exc)
                    return

    for _ in range(job.settings.concurrency):
        pool.submit(work)
    members = []
    try:
        for future in futures:
            members.append(future.result())
            recorder.tick()
            progress(1)
    except BaseException:
        queue.close()  # the threads take no more members
        raise
    return members


class _Queue:
    """Which member a free verify thread takes next: the largest one whose bytes are all on
    disk, else the one whose bytes arrive next. A thread then never waits for a member far
    ahead in the download while others are ready (nor does a member rejected early wait for
    the download's end to be found); once the download is over, simply the largest first,
    so the pass does not end on one long member."""

    def __init__(self, plan: Plan, gate: Gate | None) -> None:
        self._plan, self._gate = plan, gate
        self._lock = threading.Lock()
        self._ready: list[tuple[int, int]] = []  # a heap of (-size, index)
        indexes = range(len(plan.members))  # without a download, all are ready at once
        self._arriving = collections.deque(indexes if gate is None else sorted(
            indexes, key=lambda index: gate.ends[plan.members[index].filename]))
        self._closed = False

    def take(self) -> int | None:
        """The next member's index, or None: none left, or :meth:`close` was called."""
        with self._lock:
            if self._closed:
                return None
            have = self._gate.have if self._gate is not None else None
            while self._arriving and (have is None or self._end(self._arriving[0]) <= have):
                index = self._arriving.popleft()
                heapq.heappush(self._ready, (-self._plan.members[index].file_size, index))
            if self._ready:
                return heapq.heappop(self._ready)[1]
            return self._arriving.popleft() if self._arriving else None

    def close(self) -> list[int]:
        """Take no more; returns the members never taken."""
        with self._lock:
            self._closed = True
            left = [index for _, index in self._ready] + list(self._arriving)
            self._ready, self._arriving = [], collections.deque()
            return left

    def _end(self, index: int) -> int:
        assert self._gate is not None
        return self._gate.ends[self._plan.members[index].filename]


def _unchanged(found: Existing | None, member: Member, job: Job) -> tuple[bool, Written | None]:
    """Whether the object already holds this member, and then the row to record for it
    (only when this upload wrote it and its row was lost)."""
    if found is None or not found.same(member.digest):
        return False, None
    if found.upload_id == job.upload_id:
        return True, Written(member.key, found.size, member.digest.size, member.digest.md5,
                             job.settings.compresses(member.key), found.replaced)
    return True, None


def _stage(job: Job, member: Member, conditional: bool) -> Member:
    """Start a large new object's multipart upload as soon as it is spooled, so that its
    parts travel while the other members are verified (it is only completed, and so
    visible, once every member has passed).

    ``conditional``: the key was not checked: HEAD it first (a multipart upload takes no
    condition)."""
    assert member.body is not None
    written = Written(member.key, member.body.stat().st_size, member.digest.size,
                      member.digest.md5, job.settings.compresses(member.key), False)
    if conditional:
        found = storage.head(job.client, job.settings.symbols_bucket, member.key)
        unchanged, row = _unchanged(found, member, job)
        if unchanged:
            return dataclasses.replace(member, settled=True, row=row)
        written = dataclasses.replace(written, update=found is not None)
    return dataclasses.replace(member, staged=job.stage(written, member.body))


def _write(job: Job, member: Member, update: bool, conditional: bool) -> Written | None:
    """Write one object (the new row), or None when it turned out to be there already.

    ``conditional``: the key was not checked; the write must not replace an object.
    """
    settings, bucket = job.settings, job.settings.symbols_bucket
    body = member.body if member.body is not None else job.spooled(member.index, member.info)[1]
    written = Written(member.key, body.stat().st_size, member.digest.size, member.digest.md5,
                      settings.compresses(member.key), update)
    large = written.size > settings.multipart_threshold
    if conditional and large:  # a multipart upload has no condition: check first
        found = storage.head(job.client, bucket, member.key)
        unchanged, row = _unchanged(found, member, job)
        if unchanged:
            return row
        written, conditional = dataclasses.replace(written, update=found is not None), False
    if large:
        return job.complete(job.stage(written, body))
    content = body.read_bytes()
    if storage.put(job.client, bucket, written, content, job.upload_id, only_if_new=conditional):
        return written
    found = storage.head(job.client, bucket, member.key)  # the key existed after all
    unchanged, row = _unchanged(found, member, job)
    if unchanged:
        return row
    written = dataclasses.replace(written, update=found is not None)
    storage.put(job.client, bucket, written, content, job.upload_id)
    return written
