"""The verify pass: every member read once, checked, and spooled if it is to be written.

Runs on ``concurrency`` threads of the upload's pool (inflate, MD5 and deflate on at most
one of them per core, :class:`Spool`'s semaphore), while the archive may still be
downloading (each member waits on the :class:`~.arrival.Gate` for its bytes) and the
existence checks still run (each member waits for its own key's answer). Owns the order
in which free threads take members (:class:`VerifyQueue`) and the futures of the members'
results; nothing is published here: a large new object only starts its multipart upload
(the ``stage`` callback of :class:`VerifyPass`), invisible until completed. The first
member rejected, in archive order, fails the pass.
"""

from __future__ import annotations

import collections
import heapq
import os
import threading
import zipfile
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import archive, symheader
from .arrival import Gate
from .existence import ArchiveKeys
from .records import Digest, Recorder, Staged, UploadSettings, Written
from .symheader import Header
from .validation import Plan


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
    header: Header | None = None  # a .sym file's MODULE and INFO CODE_ID (checked)


class Spool:
    """The archive on disk and the objects spooled beside it (a file per member to write:
    memory stays at a chunk per thread). Inflate, MD5 and deflate run under
    :attr:`compute`, one per core, so the largest members (taken first) finish first and
    their parts travel while the rest is verified."""

    def __init__(
        self, archive_path: Path, directory: Path, settings: UploadSettings, gate: Gate | None
    ) -> None:
        self.archive = archive_path
        self.directory = directory
        self.settings = settings
        self.gate = gate  # None: the archive is all on disk
        self.compute = threading.Semaphore(os.cpu_count() or 1)

    def spooled(self, index: int, info: zipfile.ZipInfo) -> tuple[Digest, Path]:
        """Stream member ``index`` into its spool file (gzipped if its key says so)."""
        target = self.directory / str(index)
        level = self.settings.gzip_level if self.settings.compresses(info.filename) else None
        with open(target, "wb") as out:
            return archive.spool(self.archive, info, level, out), target

    def digest(self, info: zipfile.ZipInfo) -> Digest:
        """Size and MD5 of a member (checked as it is read), nothing spooled."""
        return archive.digest(self.archive, info)


#: Starts a large new object's multipart upload as soon as it is spooled; ``conditional``:
#: its key was not checked (see :meth:`.publish.Publisher.stage_early`).
Stage = Callable[[Member, bool], Member]


class VerifyPass:
    """Verifies (and spools) every member of ``plan`` on the threads of a pool."""

    def __init__(self, spool: Spool, plan: Plan, keys: ArchiveKeys, stage: Stage) -> None:
        self._spool, self._plan, self._keys, self._stage = spool, plan, keys, stage

    def run(self, pool: Executor, recorder: Recorder) -> list[Member]:
        """Every member verified, in archive order; the first rejected one (in archive
        order) wins. Members to write are spooled on the way, in the order of
        :class:`VerifyQueue`, on ``concurrency`` threads of ``pool``; the caller's thread
        collects them (renewing the lease: ``recorder.tick``)."""
        futures: list[Future[Member]] = [Future() for _ in self._keys.keys]
        queue = VerifyQueue(self._plan, self._spool.gate)
        for _ in range(self._spool.settings.concurrency):
            pool.submit(self._work, queue, futures)
        members = []
        try:
            for future in futures:
                members.append(future.result())
                recorder.tick()
        except BaseException:
            queue.close()  # the threads take no more members
            raise
        return members

    def _work(self, queue: VerifyQueue, futures: list[Future[Member]]) -> None:
        """One thread: members from the queue until none is left."""
        while (index := queue.take()) is not None:
            if not futures[index].set_running_or_notify_cancel():
                continue
            try:
                futures[index].set_result(self._verify(index))
            except BaseException as exc:
                futures[index].set_exception(exc)
                if not isinstance(exc, Exception):  # this thread stops: so does the pass
                    for left in queue.close():
                        if futures[left].set_running_or_notify_cancel():
                            futures[left].set_exception(exc)
                    return

    def _verify(self, index: int) -> Member:
        """One member: digested only when its key is recorded or exists (an identical file
        is never compressed), else spooled, and staged if large."""
        spool, info, key = self._spool, self._plan.members[index], self._keys.keys[index]
        if spool.gate is not None:
            spool.gate.wait(info)
        done = key in self._keys.done
        checked, found = (True, None) if done else self._keys.lookup.get(key)
        with spool.compute:
            if done or found is not None:
                digest = spool.digest(info)
                return Member(
                    index,
                    info,
                    key,
                    Digest(digest.size, digest.md5),
                    None,
                    header=self._header(index, digest),
                )
            digest, body = spool.spooled(index, info)
        # (the first bytes are checked here and not kept: 8 KiB a member, for every member
        # of a large archive until it is published, showed in the job's peak memory)
        member = Member(
            index,
            info,
            key,
            Digest(digest.size, digest.md5),
            body,
            header=self._header(index, digest),
        )
        if body.stat().st_size > spool.settings.multipart_threshold:
            return self._stage(member, not checked)
        return member

    def _header(self, index: int, digest: Digest) -> Header | None:
        """A ``.sym`` member's header, checked against its key (:mod:`.symheader`)."""
        return symheader.check(
            self._plan.members[index].filename,
            self._plan.keys[index],
            digest.head,
            digest.size <= len(digest.head),
        )


class VerifyQueue:
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
        self._arriving = collections.deque(
            indexes
            if gate is None
            else sorted(indexes, key=lambda index: gate.ends[plan.members[index].filename])
        )
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
