"""Publishing: the verified members' objects written to the symbols bucket.

Runs on the upload pool's threads once every member has passed the verify pass (the
worker's thread submits the writes and records their rows as they finish). Owns the
multipart uploads started and not completed (:class:`Publisher`): a large object is staged
as soon as it is spooled, during the verify pass, and completed (made visible) only here;
after any failure every one not completed is aborted, so nothing is left half-published.
What a key's existence means for its write is decided in :mod:`.existence`; the writes
themselves are :mod:`.storage` calls.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
from concurrent.futures import Executor, Future, as_completed
from pathlib import Path
from typing import Any

from . import storage
from .existence import ArchiveKeys, Verdict, decide, recheck
from .records import Existing, Progress, Recorder, Staged, UploadSettings, Written
from .verify import Member, Spool


class WriteMode(enum.Enum):
    """How a member's object is written, from what the existence checks said of its key."""

    NEW = "new"  # checked: nothing there
    REPLACE = "replace"  # checked: another object there (``update``)
    IF_ABSENT = "if absent"  # not checked: a conditional write (``If-None-Match: *``)


class Publisher:
    """Writes one upload's objects on one shared client; the multipart uploads it started
    and did not complete are aborted by :meth:`abort_staged` (called after a failure, and
    harmless after success: none is left)."""

    def __init__(self, client: Any, settings: UploadSettings, upload_id: int,
                 spool: Spool) -> None:
        self._client, self._settings, self._upload_id, self._spool = \
            client, settings, upload_id, spool
        self._bucket = settings.symbols_bucket
        self._staged: dict[str, str] = {}  # multipart uploads not completed: {id: key}
        self._lock = threading.Lock()

    def stage_early(self, member: Member, conditional: bool) -> Member:
        """Start a large new object's multipart upload as soon as it is spooled (on a
        verify thread), so that its parts travel while the other members are verified (it
        is only completed, and so visible, once every member has passed).

        ``conditional``: the key was not checked: HEAD it first (a multipart upload takes
        no condition)."""
        assert member.body is not None
        written = self._written(member, member.body, update=False)
        if conditional:
            verdict = self._recheck(member)
            if not verdict.write:
                return dataclasses.replace(member, settled=True, row=verdict.row)
            written = dataclasses.replace(written, update=verdict.update)
        return dataclasses.replace(member, staged=self._stage(written, member.body))

    def write(self, member: Member, mode: WriteMode) -> Written | None:
        """Write one object (the new row), or None when it turned out to be there already.
        A member not spooled (its key existed with other bytes) is spooled now."""
        body = member.body if member.body is not None else \
            self._spool.spooled(member.index, member.info)[1]
        written = self._written(member, body, update=mode is WriteMode.REPLACE)
        large = written.size > self._settings.multipart_threshold
        if mode is WriteMode.IF_ABSENT and large:  # a multipart upload has no condition
            verdict = self._recheck(member)
            if not verdict.write:
                return verdict.row
            written, mode = dataclasses.replace(written, update=verdict.update), WriteMode.NEW
        if large:
            return self.complete(self._stage(written, body))
        content = body.read_bytes()
        if storage.put(self._client, self._bucket, written, content, self._upload_id,
                       only_if_new=mode is WriteMode.IF_ABSENT):
            return written
        verdict = self._recheck(member)  # refused: the key existed after all
        if not verdict.write:
            return verdict.row
        written = dataclasses.replace(written, update=verdict.update)
        storage.put(self._client, self._bucket, written, content, self._upload_id)
        return written

    def complete(self, staged: Staged) -> Written:
        """Complete a staged multipart upload: its object becomes visible."""
        with self._lock:
            del self._staged[staged.upload]
        storage.complete_multipart(self._client, self._bucket, staged.written.key,
                                   staged.upload, staged.parts)
        return staged.written

    def abort_staged(self) -> None:
        """Abort every multipart upload not completed (after a failure: none is published)."""
        with self._lock:
            left = dict(self._staged)
            self._staged.clear()
        for upload, key in left.items():
            storage.abort(self._client, self._bucket, key, upload)

    def _stage(self, written: Written, body: Path) -> Staged:
        """Upload a large object's parts (nothing visible until :meth:`complete`)."""
        ids: list[str] = []

        def started(upload: str) -> None:
            with self._lock:
                self._staged[upload] = written.key
                ids.append(upload)

        try:
            with open(body, "rb") as data:
                upload, parts = storage.start_multipart(
                    self._client, self._bucket, written, data, self._upload_id,
                    self._settings.part_size, started)
        except BaseException:
            with self._lock:  # start_multipart aborted it already: not twice
                for upload in ids:
                    self._staged.pop(upload, None)
            raise
        return Staged(written, upload, parts)

    def verdict(self, member: Member, found: Existing | None) -> Verdict:
        """What to do with ``member``'s key, given the object the checks found there."""
        return decide(found, member.key, member.digest, self._upload_id,
                      self._settings.compresses(member.key))

    def _written(self, member: Member, body: Path, update: bool) -> Written:
        return Written(member.key, body.stat().st_size, member.digest.size, member.digest.md5,
                       self._settings.compresses(member.key), update)

    def _recheck(self, member: Member) -> Verdict:
        return recheck(self._client, self._bucket, member.key, member.digest, self._upload_id,
                       self._settings.compresses(member.key))


def publish(pool: Executor, publisher: Publisher, members: list[Member], keys: ArchiveKeys,
            recorder: Recorder, progress: Progress) -> None:
    """Write the members' objects that are missing or changed, on ``pool``; record a row
    for each object written (and for one this upload wrote before its row was lost)."""
    existing = keys.lookup.result()
    recorder.heartbeat()
    writes: list[Future[Written | None]] = []
    for member in members:
        if member.staged is not None:
            writes.append(pool.submit(publisher.complete, member.staged))
            continue
        if member.key in keys.done or member.settled:
            _member_done(member.row, recorder, progress)
            continue
        mode = WriteMode.IF_ABSENT
        if member.key in existing:
            verdict = publisher.verdict(member, existing[member.key])
            if not verdict.write:
                _member_done(verdict.row, recorder, progress)
                continue
            mode = WriteMode.REPLACE if verdict.update else WriteMode.NEW
        writes.append(pool.submit(publisher.write, member, mode))
    for future in as_completed(writes):
        _member_done(future.result(), recorder, progress)
    recorder.flush()


def _member_done(row: Written | None, recorder: Recorder, progress: Progress) -> None:
    """One member done: its row recorded, if it has one."""
    if row is not None:
        recorder.record(row)
    progress.advance(1)  # the only place a member is counted (the verify pass is not)
