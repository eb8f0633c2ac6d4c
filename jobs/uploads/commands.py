"""The operator commands' work (``cli.py`` only parses, calls these and prints)."""

from __future__ import annotations

import datetime as dt
import uuid
import zipfile
from pathlib import Path
from typing import Any

from jobs.s3 import ensure_bucket
from jobs.symbolkey import safe_part

from . import storage
from .demo import demo_archives
from .errors import ArchiveUnusable, NotQueued, StorageFailed
from .store import UploadStore


def inbox_key(prefix: str, filename: str) -> str:
    """``<prefix><YYYY-MM-DD>/<random>/<filename>``: unique, dated for the prune job. The
    uploader's file name is only a hint here: each character outside the symbol key set
    (:func:`jobs.symbolkey.safe_part`) becomes ``_`` (the upload's ``filename``
    keeps it as given)."""
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    return f"{prefix}{today}/{uuid.uuid4().hex}/{safe_part(filename)}"


def check_local_archive(path: Path) -> None:
    """Refuse, before S3 is touched, a local file the operator cannot mean to queue (a typo
    must not read as an S3 failure). Only the operator's ``enqueue`` checks: the queue itself
    takes any bytes, as the web tier does, and the worker rejects a bad archive.

    Raises:
        ArchiveUnusable: ``path`` is missing, not a regular file or not a zip archive.
    """
    if not path.exists():
        raise ArchiveUnusable(str(path), "no such file")
    if not path.is_file():
        raise ArchiveUnusable(str(path), "not a regular file")
    if not zipfile.is_zipfile(path):
        raise ArchiveUnusable(str(path), "not a zip archive")


def enqueue_archive(
    store: UploadStore, client: Any, bucket: str, prefix: str, path: Path, uploaded_by: str | None
) -> int:
    """Store ``path`` in the inbox bucket, then queue it (as the web tier does); the new id.
    An archive whose row could not be written (the database lost mid-way: a failover) is
    deleted again: the inbox holds no archive that no upload row knows (prune keeps those
    for ever), and the operator runs the command again.

    Raises:
        StorageFailed: the archive could not be stored (nothing is queued).
        NotQueued: its row could not be written (nothing is queued; whether the archive
            was deleted again is in the message).
    """
    key = inbox_key(prefix, path.name)
    storage.store_archive(client, bucket, key, path)
    try:
        return store.enqueue(key, path.name, path.stat().st_size, uploaded_by)
    except Exception as exc:
        from crontabber.failures import describe

        left = None
        try:
            storage.delete_archive(client, bucket, key)
        except StorageFailed as cleanup:
            left = cleanup.reason
        raise NotQueued(describe(exc), bucket, key, left) from exc


def demo(
    store: UploadStore, client: Any, buckets: tuple[str, str], prefix: str, workdir: Path
) -> list[tuple[str, int, bool]]:
    """Queue the demo archives not queued yet: ``[(filename, id, newly_queued)]``."""
    for bucket in buckets:
        ensure_bucket(client, bucket)
    results = []
    for path in demo_archives(workdir):
        existing = store.find_queued(path.name, "demo")
        if existing is not None:
            results.append((path.name, existing, False))
            continue
        results.append(
            (path.name, enqueue_archive(store, client, buckets[0], prefix, path, "demo"), True)
        )
    return results
