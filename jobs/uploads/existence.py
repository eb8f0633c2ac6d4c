"""Which symbol keys already exist, for few requests whether most keys are new or most exist.

On the local S3 server a LIST of a directory, a HEAD (found or not) and a small PUT
each take about 1.5 ms (and about 1 ms of this process's CPU; measured, see
docs/jobs/uploads.md), so the number of requests is what counts. Reading Tecken's
metadata needs one HEAD per existing object either way; a LIST of a
``<debug_file>/<DEBUG_ID>/`` directory answers for every key in it; and a conditional
PUT (``If-None-Match: *``) needs no check at all for a new key, only a HEAD (and maybe
the PUT again) when the key turns out to exist. With ``K`` keys in ``D`` directories,
of which a fraction ``p`` exists, the extra requests are:

- listing: ``D + p*K``; HEAD per key: ``K``;
- conditional writes: about ``2*p*K`` (a refused PUT, then a HEAD; a compression is
  wasted on each such key, counted in the 2).

``auto`` lists a sample of directories, estimates ``p`` and picks the cheapest way for
the rest: mostly-new archives are written conditionally (no per-key request at all),
mostly-existing ones are HEADed (so identical files are never compressed).
``list`` and ``head`` force one way (``conditional`` is never forced: it needs S3's
conditional writes, which AWS S3 and s3proxy 4 have).

The checks run while the archive is verified (:class:`Lookup`, on its own ``exists``
threads): the sample is the directories of the members verified first (the largest), and a
member waits only for its own directory's answer (or, outside the sample, for the way
chosen for the rest). Waiting for every answer first held the verify pass back 0.1-0.3 s
per upload.

This module is the one place that decides existence: what the checks found
(:class:`ArchiveKeys`), what to do with a key given the object there (:func:`decide`),
and the HEAD of a key that was not checked (:func:`recheck`: before a multipart upload,
which takes no condition, and after a conditional PUT was refused).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from . import storage
from .errors import Rejected
from .records import Digest, Existing, Overwrite, Recorder, UploadSettings, Written
from .validation import Plan

SAMPLE_DIRECTORIES = 16
LIST, HEAD, CONDITIONAL = "list", "head", "conditional"

#: ``{key: the object there, or None}`` for the keys checked.
Found = dict[str, "Existing | None"]


def choose(sampled_keys: int, sampled_hits: int, keys: int, dirs: int) -> str:
    """Pure: how to check the remaining keys: ``list``, ``head`` or ``conditional``
    (not checked now: written with ``If-None-Match: *``), whichever costs fewest requests."""
    if sampled_keys == 0 or keys == 0:
        return LIST
    p = sampled_hits / sampled_keys
    costs = {CONDITIONAL: 2 * p * keys, LIST: dirs + p * keys, HEAD: keys}
    return min(costs, key=lambda way: costs[way])


def _directory(key: str) -> str:
    return key.rsplit("/", 1)[0] + "/"


class Lookup:
    """The existence checks of an archive's keys, answered while the caller works.

    Started at once on ``threads`` threads (plus one that plans the rest after the sample);
    :meth:`get` blocks only until the asked key's own directory is answered, so the first
    members can be verified while the others are still being checked. ``keys`` come in the
    order the caller will ask for them: the sampled directories are the first ones, answered
    first. Use as a context manager (the threads stop at exit, pending checks cancelled).
    """

    def __init__(
        self, client: Any, bucket: str, keys: list[str], mode: str = "auto", threads: int = 8
    ) -> None:
        self._client, self._bucket = client, bucket
        self._checks = ThreadPoolExecutor(max(1, threads), thread_name_prefix="exists")
        self._planner = ThreadPoolExecutor(1, thread_name_prefix="exists-plan")
        by_dir: dict[str, list[str]] = {}
        for key in keys:
            by_dir.setdefault(_directory(key), []).append(key)
        dirs = list(by_dir)
        sample = dirs if mode in (LIST, HEAD) else dirs[:SAMPLE_DIRECTORIES]
        self._sampled: dict[str, Future[Found]] = {
            directory: self._checks.submit(self._check, by_dir[directory], mode == HEAD)
            for directory in sample
        }
        rest = {directory: by_dir[directory] for directory in dirs[len(sample) :]}
        self._rest: Future[Found] = self._planner.submit(self._plan, rest, len(keys), len(dirs))

    def __enter__(self) -> Lookup:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Cancel the checks not started; wait for those running (one request each)."""
        self._checks.shutdown(wait=True, cancel_futures=True)
        self._planner.shutdown(wait=True, cancel_futures=True)

    def get(self, key: str) -> tuple[bool, Existing | None]:
        """Whether ``key`` was checked (else it is to be written conditionally), and what
        exists there. Blocks until known.

        Raises:
            StorageFailed: S3 failed after retries while checking.
        """
        sampled = self._sampled.get(_directory(key))
        answers = (sampled or self._rest).result()
        return key in answers, answers.get(key)

    def result(self) -> Found:
        """``{key: Existing or None}`` for every key checked (blocks until all are)."""
        answers: Found = {}
        for future in self._sampled.values():
            answers.update(future.result())
        answers.update(self._rest.result())
        return answers

    def _check(self, keys: list[str], head_only: bool) -> Found:
        """One directory's keys: HEADs, or a LIST and a HEAD for each key it holds."""
        listed = (
            None
            if head_only
            else storage.list_directory(self._client, self._bucket, _directory(keys[0]))
        )
        return {
            key: storage.head(self._client, self._bucket, key)
            if listed is None or key in listed
            else None
            for key in keys
        }

    def _plan(self, rest: dict[str, list[str]], keys: int, dirs: int) -> Found:
        """After the sample: the rest's way (fewest requests), and its answers."""
        if not rest:
            return {}
        sampled = [future.result() for future in self._sampled.values()]
        way = choose(
            sum(map(len, sampled)),
            sum(found is not None for answers in sampled for found in answers.values()),
            keys,
            dirs,
        )
        if way == CONDITIONAL:
            return {}
        answers: Found = {}
        for part in self._checks.map(lambda group: self._check(group, way == HEAD), rest.values()):
            answers.update(part)
        return answers


@dataclass(frozen=True)
class Verdict:
    """What to do with a member's key, given what is there: ``write`` it (``update``: over
    ``previous``, another object), or not, recording ``row`` if there is one (this upload
    wrote the object and was stopped before its row)."""

    write: bool
    update: bool = False
    row: Written | None = None
    previous: Existing | None = None


RULE_KEEP_FIRST = "the key holds another file (overwrite = keep-first)"


def decide(
    found: Existing | None,
    key: str,
    digest: Digest,
    upload_id: int,
    compressed: bool,
    overwrite: Overwrite = Overwrite.REPLACE,
    member: str | None = None,
) -> Verdict:
    """Pure: a key is written unless the object there holds the same bytes (Tecken's
    ``original_size`` and ``original_md5_hash``); such an object written by this upload
    gets its row back from its metadata. Over other bytes it is written by ``overwrite``'s
    rule (:class:`~.records.Overwrite`).

    Raises:
        Rejected: ``keep-first``, and another upload's object holds other bytes (naming
            ``member``, or the key, and that upload).
    """
    if found is None:
        return Verdict(write=True)
    if not found.same(digest):
        if overwrite is Overwrite.KEEP_FIRST and found.upload_id != upload_id:
            earlier = (
                f"upload {found.upload_id}"
                if found.upload_id is not None
                else "an object of no known upload"
            )
            raise Rejected(
                RULE_KEEP_FIRST,
                member or key,
                f"{key} was written by {earlier}: {found.original_size} bytes, "
                f"MD5 {found.original_md5}; this one: {digest.size} bytes, "
                f"MD5 {digest.md5}",
            )
        return Verdict(write=True, update=True, previous=found)
    if found.upload_id == upload_id:
        return Verdict(
            write=False,
            row=Written(key, found.size, digest.size, digest.md5, compressed, found.replaced),
        )
    return Verdict(write=False)


def recheck(
    client: Any,
    bucket: str,
    key: str,
    digest: Digest,
    upload_id: int,
    compressed: bool,
    overwrite: Overwrite = Overwrite.REPLACE,
    member: str | None = None,
) -> Verdict:
    """HEAD a key that was not checked, and :func:`decide`.

    Raises:
        StorageFailed: S3 failed after retries.
        Rejected: as :func:`decide`.
    """
    return decide(
        storage.head(client, bucket, key), key, digest, upload_id, compressed, overwrite, member
    )


@dataclass(frozen=True)
class ArchiveKeys:
    """The archive's object keys (in archive order), those this upload already recorded
    (a reclaimed attempt), and the existence checks of the others (running). Use as a
    context manager: the checks stop at exit."""

    keys: list[str]
    done: set[str]
    lookup: Lookup

    @classmethod
    def start(
        cls, client: Any, settings: UploadSettings, plan: Plan, recorder: Recorder
    ) -> ArchiveKeys:
        """Start the existence checks, largest member first, as the verify pass will mostly
        need them (it waits per key, so it starts on the first members while the rest are
        checked)."""
        keys = [key.object_key(settings.symbols_prefix) for key in plan.keys]
        largest_first = sorted(range(len(keys)), key=lambda i: -plan.members[i].file_size)
        done = recorder.written_keys()  # (the verify pass renews the lease when due)
        lookup = Lookup(
            client,
            settings.symbols_bucket,
            [keys[i] for i in largest_first if keys[i] not in done],
            settings.existence_check,
            max(1, settings.concurrency - 1),
        )
        return cls(keys, done, lookup)

    def __enter__(self) -> ArchiveKeys:
        return self

    def __exit__(self, *_: object) -> None:
        self.lookup.close()
