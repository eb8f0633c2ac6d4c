"""Process one claimed upload: read the directory, download, verify and spool, then publish.

Nothing is published to the symbols bucket until the whole archive has passed: the
central directory (:mod:`.validation`), then one pass over every member (CRC, size, MD5).
Each stage is a module of its own, saying what it owns and which threads run it:

- :mod:`.arrival`: the directory read from the archive's tail (this thread), then the
  download (the upload's ``download`` thread), which the other stages overlap;
- :mod:`.existence`: which keys exist (its ``exists`` threads), and what that means for
  each key's write (the one place that decides it);
- :mod:`.verify`: every member verified, and spooled if it is to be written (``concurrency``
  threads of the ``upload`` pool; compression one per core); large objects start their
  multipart upload there;
- :mod:`.publish`: the objects written and the multipart uploads completed (the same
  pool), or all aborted after a failure.

This module runs on the worker's thread: it starts the stages in order and, when one fails,
stops the others in the order that loses nothing and reports the first cause (below).
Each object written gets its ``file_upload`` row through the :class:`~.records.Recorder`
(in batches), which also renews the claim.

Idempotent: objects are deterministic (gzip without name or time), rows are unique per
(upload, key), and an object found with this upload's id in its metadata but no row
(killed between PUT and INSERT) gets its row from that metadata.
"""

from __future__ import annotations

import logging
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import arrival
from .arrival import RULE_NOT_ZIP, Gate
from .errors import StorageFailed
from .existence import ArchiveKeys
from .publish import Publisher, publish
from .records import Counts, Progress, QuietProgress, Recorder, Upload, UploadSettings
from .validation import Plan, read_plan
from .verify import Spool, VerifyPass

__all__ = ["RULE_NOT_ZIP", "process"]

logger = logging.getLogger(__name__)


def process(
    upload: Upload,
    settings: UploadSettings,
    client: Any,
    recorder: Recorder,
    progress: Progress | None = None,
) -> Counts:
    """Publish one upload's archive; return its counts.

    Raises:
        Rejected: the archive breaks a rule (nothing written).
        StorageFailed: S3 failed after retries.
        ClaimLost: another worker took the upload over.
    """
    with tempfile.TemporaryDirectory(prefix="upload-") as tmp:
        path = Path(tmp) / "archive.zip"
        directory = arrival.read_directory(client, settings, upload, Path(tmp))
        gate = Gate(directory.ends) if directory is not None else None
        with ThreadPoolExecutor(1, thread_name_prefix="download") as side:
            downloading = side.submit(
                arrival.download_archive, client, settings, upload, path, directory, gate
            )
            try:
                if directory is None:
                    downloading.result()
                    plan = read_plan(path, settings.limits, settings.symbols_prefix)
                else:  # the existence checks and the verify pass overlap the download
                    plan = directory.plan
                (Path(tmp) / "spool").mkdir()
                spool = Spool(path, Path(tmp) / "spool", settings, gate)
                _verify_and_publish(
                    client, upload, plan, spool, recorder, progress or QuietProgress(), downloading
                )
            finally:
                if gate is not None:
                    gate.stop()  # published or failed: do not wait for the rest of the archive
            _after_publishing(downloading, upload)
    return Counts(plan.total, len(plan.ignored))


def _verify_and_publish(
    client: Any,
    upload: Upload,
    plan: Plan,
    spool: Spool,
    recorder: Recorder,
    progress: Progress,
    downloading: Future[None],
) -> None:
    """The existence checks, the verify pass and the writes, on one ``upload`` pool; after a
    failure, the pass stopped and every multipart upload aborted before the error goes on."""
    settings, gate = spool.settings, spool.gate
    publisher = Publisher(client, settings, upload.id, spool)
    try:
        with (
            ArchiveKeys.start(client, settings, plan, recorder) as keys,
            ThreadPoolExecutor(settings.concurrency, thread_name_prefix="upload") as pool,
        ):
            try:
                progress.start(len(plan.members))
                members = VerifyPass(spool, plan, keys, publisher.stage_early).run(pool, recorder)
                publish(pool, publisher, members, keys, recorder, progress)
            except BaseException as exc:
                if gate is not None:
                    gate.stop()  # members still waiting for their bytes give up
                pool.shutdown(wait=True, cancel_futures=True)
                # a download that ended early explains the rest (a member read while it
                # still runs was all on disk: its error stands); never hide SIGTERM or Ctrl-C
                if isinstance(exc, Exception) and (gate is None or gate.over):
                    downloading.result()
                raise
    finally:
        publisher.abort_staged()


def _after_publishing(downloading: Future[None], upload: Upload) -> None:
    """Every member was verified and published: a download that failed after its last
    member's bytes (in the central directory, already read from the tail) changes nothing."""
    try:
        downloading.result()
    except StorageFailed as exc:
        logger.warning(
            "upload %d: published; the archive's download then failed: %s", upload.id, exc
        )
