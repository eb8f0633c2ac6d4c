"""Process one claimed upload: download, validate, verify, check existence, publish.

Nothing is written to the symbols bucket until the whole archive has passed: the
central directory (:mod:`jobs.uploads.validation`), then a verify pass that streams
every member (CRC, size, MD5). Members that need writing are then streamed a second
time (isal inflate is cheap next to deflate and S3) and gzipped and PUT in a thread
pool sharing one boto3 client. Each object written gets its ``file_upload`` row
through the :class:`Recorder` (in batches), which also renews the claim.

Idempotent: objects are deterministic (gzip without name or time), rows are unique per
(upload, key), and an object found with this upload's id in its metadata but no row
(killed between PUT and INSERT) gets its row from that metadata.
"""

from __future__ import annotations

import logging
import tempfile
import zipfile
from concurrent.futures import Executor, Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Protocol

from . import archive, storage
from .errors import Rejected
from .existence import find_existing
from .records import Counts, Digest, Existing, Settings, Upload, Written
from .validation import Plan, validate

logger = logging.getLogger(__name__)

RULE_NOT_ZIP = "not a zip archive (or its central directory is corrupt or truncated)"


class Recorder(Protocol):
    """The database side of processing (implemented by the store)."""

    def written_keys(self) -> set[str]: ...

    def record(self, written: Written) -> None: ...

    def heartbeat(self) -> None: ...

    def flush(self) -> None: ...


Progress = Callable[[int], None]


def process(upload: Upload, settings: Settings, client: Any, recorder: Recorder,
            progress: Progress | None = None) -> Counts:
    """Publish one upload's archive; return its counts.

    Raises:
        Rejected: the archive breaks a rule (nothing written).
        StorageFailed: S3 failed after retries.
        ClaimLost: another worker took the upload over.
    """
    with tempfile.TemporaryDirectory(prefix="upload-") as tmp:
        path = Path(tmp) / "archive.zip"
        with open(path, "wb") as target:
            storage.download(client, settings.inbox_bucket, upload.inbox_key, target)
        recorder.heartbeat()
        plan = read_plan(path, settings)
        counts = Counts(plan.total, len(plan.ignored))
        with ThreadPoolExecutor(settings.concurrency, thread_name_prefix="upload") as pool:
            try:
                publish(pool, path, plan, upload, settings, client, recorder, progress or _quiet)
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    return counts


def _quiet(_: int) -> None:
    return None


def read_plan(path: Path, settings: Settings) -> Plan:
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


def publish(pool: Executor, path: Path, plan: Plan, upload: Upload, settings: Settings,
            client: Any, recorder: Recorder, progress: Progress) -> None:
    """Verify every member, then write those that are missing or changed."""
    keys = [settings.object_key(info.filename) for info in plan.members]
    verifying = [pool.submit(archive.digest, path, info) for info in plan.members]
    # S3 checks in their own threads, so they overlap the verify pass instead of queueing
    # behind it (the verify pass does not use S3: the client's connections are all theirs).
    with ThreadPoolExecutor(settings.concurrency, thread_name_prefix="exists") as checks:
        existing = find_existing(checks, client, settings.symbols_bucket, keys,
                                 settings.existence_check)
    digests = _verified(verifying, progress)
    recorder.heartbeat()
    done = recorder.written_keys()
    writes: list[Future[Written]] = []
    for info, key, digest in zip(plan.members, keys, digests):
        found = existing[key]
        if key in done or (found is not None and found.same(digest) and found.upload_id != upload.id):
            progress(1)
            continue
        if found is not None and found.same(digest):
            recorder.record(_from_metadata(key, digest, found, settings))  # killed before its row
            progress(1)
            continue
        written = Written(key, 0, digest.size, digest.md5, settings.compresses(key), found is not None)
        writes.append(pool.submit(_write, path, info, written, upload.id, settings, client))
    for future in as_completed(writes):
        recorder.record(future.result())
        progress(1)
    recorder.flush()


def _verified(futures: list[Future[Digest]], progress: Progress) -> list[Digest]:
    """Digests in archive order; the first rejected member (in archive order) wins."""
    digests = []
    for future in futures:
        digests.append(future.result())
        progress(1)
    return digests


def _from_metadata(key: str, digest: Digest, found: Existing, settings: Settings) -> Written:
    return Written(key, found.size, digest.size, digest.md5, settings.compresses(key), found.replaced)


def _write(path: Path, info: zipfile.ZipInfo, written: Written, upload_id: int,
           settings: Settings, client: Any) -> Written:
    body = archive.gzipped(path, info, settings.gzip_level) if written.compressed \
        else archive.raw(path, info)
    final = Written(written.key, len(body), written.original_size, written.original_md5,
                    written.compressed, written.update)
    storage.put(client, settings.symbols_bucket, final, body, upload_id)
    return final
