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
from .records import Existing, Overwrite, Progress, Recorder, Staged, UploadSettings, Written
from .verify import Member, Spool


class WriteMode(enum.Enum):
    """How a member's object is written, from what the existence checks said of its key."""

    NEW = "new"  # checked: nothing there (under keep-first: written as IF_ABSENT)
    REPLACE = "replace"  # checked: another object there (``update``)
    IF_ABSENT = "if absent"  # not checked: a conditional write (``If-None-Match: *``)


class Publisher:
    """Writes one upload's objects on one shared client; the multipart uploads it started
    and did not complete are aborted by :meth:`abort_staged` (called after a failure, and
    harmless after success: none is left).

    Under ``keep-first`` every new key is written conditionally (``If-None-Match: *``, on
    the PUT or on the multipart upload's completion), checked or not: another upload
    writing the same key between our check and our write (two drains racing) makes ours
    refused, and the key is then judged again (the same bytes: nothing to do; other bytes:
    the upload is refused). Under the other rules a write wins (a race writes the key twice).
    """

    def __init__(self, client: Any, settings: UploadSettings, upload_id: int, spool: Spool) -> None:
        self._client, self._settings, self._upload_id, self._spool = (
            client,
            settings,
            upload_id,
            spool,
        )
        self._bucket = settings.symbols_bucket
        self._keep_first = settings.overwrite is Overwrite.KEEP_FIRST
        self._staged: dict[str, str] = {}  # multipart uploads not completed: {id: key}
        self._lock = threading.Lock()

    def stage_early(self, member: Member, conditional: bool) -> Member:
        """Start a large new object's multipart upload as soon as it is spooled (on a
        verify thread), so that its parts travel while the other members are verified (it
        is only completed, and so visible, once every member has passed).

        ``conditional``: the key was not checked: HEAD it first (a multipart upload takes
        no condition)."""
        assert member.body is not None
        written = self._written(member, member.body, None)
        if conditional:
            verdict = self._recheck(member)
            if not verdict.write:
                return dataclasses.replace(member, settled=True, row=verdict.row)
            written = self._written(member, member.body, verdict)
        return dataclasses.replace(member, staged=self._stage(written, member.body))

    def write(
        self, member: Member, mode: WriteMode, verdict: Verdict | None = None
    ) -> Written | None:
        """Write one object (the new row), or None when it turned out to be there already
        (``verdict``: what the checks decided for a ``REPLACE``). A member not spooled (its
        key existed with other bytes) is spooled now.

        Raises:
            Rejected: a key not checked (or, under ``keep-first``, any new key) turned out
                to hold another upload's file, and the ``overwrite`` rule is ``keep-first``
                (a race with another upload: the files of this upload written so far stay,
                each whole, with its row).
        """
        body = (
            member.body
            if member.body is not None
            else self._spool.spooled(member.index, member.info)[1]
        )
        written = self._written(member, body, verdict if mode is WriteMode.REPLACE else None)
        large = written.size > self._settings.multipart_threshold
        if mode is WriteMode.IF_ABSENT and large:  # (a HEAD costs less than staging for nothing)
            verdict = self._recheck(member)
            if not verdict.write:
                return verdict.row
            written, mode = self._written(member, body, verdict), WriteMode.NEW
        if large:
            return self.complete(self._stage(written, body), dataclasses.replace(member, body=body))
        if mode is WriteMode.NEW and self._keep_first:
            mode = WriteMode.IF_ABSENT  # checked and absent, but a racing upload may write it
        content = body.read_bytes()
        if storage.put(
            self._client,
            self._bucket,
            written,
            content,
            self._upload_id,
            only_if_new=mode is WriteMode.IF_ABSENT,
        ):
            return written
        verdict = self._recheck(member)  # refused: the key existed after all
        if not verdict.write:
            return verdict.row
        written = self._written(member, body, verdict)
        storage.put(self._client, self._bucket, written, content, self._upload_id)
        return written

    def complete(self, staged: Staged, member: Member) -> Written | None:
        """Complete a staged multipart upload: its object becomes visible. Under
        ``keep-first`` a new key's completion is conditional; refused (another upload wrote
        the key since it was checked), the upload is aborted and the key judged again: None
        when the same bytes are there.

        Raises:
            Rejected: ``keep-first``, and the key now holds another upload's file.
        """
        with self._lock:
            del self._staged[staged.upload]
        written = staged.written
        only_if_new = self._keep_first and not written.update
        if storage.complete_multipart(
            self._client, self._bucket, written.key, staged.upload, staged.parts, only_if_new
        ):
            return written
        verdict = self._recheck(member)  # refused: the key was written meanwhile
        if not verdict.write:
            return verdict.row
        assert member.body is not None  # (a staged member was spooled)
        written = self._written(member, member.body, verdict)  # this upload's own, or gone again
        return self.complete(self._stage(written, member.body), member)

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
                    self._client,
                    self._bucket,
                    written,
                    data,
                    self._upload_id,
                    self._settings.part_size,
                    started,
                )
        except BaseException:
            with self._lock:  # start_multipart aborted it already: not twice
                for upload in ids:
                    self._staged.pop(upload, None)
            raise
        return Staged(written, upload, parts)

    def verdict(self, member: Member, found: Existing | None) -> Verdict:
        """What to do with ``member``'s key, given the object the checks found there."""
        return decide(
            found,
            member.key,
            member.digest,
            self._upload_id,
            self._settings.compresses(member.key),
            self._settings.overwrite,
            member.info.filename,
        )

    def _written(self, member: Member, body: Path, verdict: Verdict | None) -> Written:
        """The row of ``member``'s object, written from ``body``, over the object
        ``verdict`` found (None: a new key)."""
        header = member.header
        return Written(
            member.key,
            body.stat().st_size,
            member.digest.size,
            member.digest.md5,
            self._settings.compresses(member.key),
            verdict is not None and verdict.update,
            verdict.previous if verdict is not None else None,
            header.code_id if header is not None else None,
            header.code_file if header is not None else None,
        )

    def _recheck(self, member: Member) -> Verdict:
        return recheck(
            self._client,
            self._bucket,
            member.key,
            member.digest,
            self._upload_id,
            self._settings.compresses(member.key),
            self._settings.overwrite,
            member.info.filename,
        )


def publish(
    pool: Executor,
    publisher: Publisher,
    members: list[Member],
    keys: ArchiveKeys,
    recorder: Recorder,
    progress: Progress,
) -> None:
    """Write the members' objects that are missing or changed, on ``pool``; record a row
    for each object written (and for one this upload wrote before its row was lost).

    Every checked key's verdict is decided before the first write, so an upload that the
    ``overwrite`` rule refuses (``keep-first``) publishes nothing, unless another upload
    writes one of its keys meanwhile (then it is refused at that key's conditional write).

    Raises:
        Rejected: ``keep-first``, and a key holds another upload's file.
    """
    existing = keys.lookup.result()
    recorder.heartbeat()
    plans: list[tuple[Member, WriteMode | None, Verdict | None]] = []
    for member in members:
        if member.staged is not None or member.key in keys.done or member.settled:
            plans.append((member, None, None))
        elif member.key in existing:
            found = publisher.verdict(member, existing[member.key])
            mode = (WriteMode.REPLACE if found.update else WriteMode.NEW) if found.write else None
            plans.append((member, mode, found))
        else:
            plans.append((member, WriteMode.IF_ABSENT, None))
    writes: list[Future[Written | None]] = []
    for member, mode, verdict in plans:
        if member.staged is not None:
            writes.append(pool.submit(publisher.complete, member.staged, member))
        elif mode is not None:
            writes.append(pool.submit(publisher.write, member, mode, verdict))
        else:  # recorded already, settled early, or there with the same bytes
            _member_done(verdict.row if verdict is not None else member.row, recorder, progress)
    for future in as_completed(writes):
        _member_done(future.result(), recorder, progress)
    recorder.flush()


def _member_done(row: Written | None, recorder: Recorder, progress: Progress) -> None:
    """One member done: its row recorded, if it has one."""
    if row is not None:
        recorder.record(row)
    progress.advance(1)  # the only place a member is counted (the verify pass is not)
