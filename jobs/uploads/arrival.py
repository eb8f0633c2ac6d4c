"""The archive's arrival: its central directory read from the tail, then its download.

Owns the archive's bytes on the local disk and says how many are there. The directory
(:func:`read_directory`) is read on the worker's thread before anything else, from a ranged
GET of the archive's last :data:`TAIL` bytes into a sparse file, so that the existence
checks and the verify pass can start while the archive downloads. The download
(:func:`download_archive`) runs on the upload's one ``download`` thread and asks for the
ETag the tail had, so the directory read is the downloaded archive's; it tells a
:class:`Gate` after every chunk, on which verify threads wait for their member's bytes.
Talks to the inbox bucket only.
"""

from __future__ import annotations

import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import storage
from .errors import Rejected, UploadError
from .records import Upload, UploadSettings
from .validation import END_RECORD_RULES, RULE_NOT_ZIP, Plan, read_plan

__all__ = ["RULE_NOT_ZIP", "TAIL", "read_directory"]

TAIL = 1024 * 1024  # bytes of the archive's end fetched for its central directory


@dataclass(frozen=True)
class Directory:
    """The archive's validated plan read from its tail before the download, the version
    (ETag) it belongs to, and where each member's data ends in the archive."""

    plan: Plan
    etag: str
    ends: dict[str, int]


def read_directory(
    client: Any, settings: UploadSettings, upload: Upload, tmp: Path
) -> Directory | None:
    """The archive's central directory from a ranged GET of its tail into a sparse file,
    so that the existence checks and the verify pass need not wait for the download (which
    then asks for the same ETag). Best effort: None when the directory is not in the tail,
    is not valid, or S3 failed (the download then comes first and decides).

    Raises:
        Rejected: the end records alone refuse the archive (a split archive, more entries
            than ``max_members`` or a central directory over its bound).
    """
    sparse = tmp / "directory.zip"
    try:
        etag = storage.fetch_tail(client, settings.inbox_bucket, upload.inbox_key, sparse, TAIL)
        plan = read_plan(sparse, settings.limits, settings.symbols_prefix)
        with zipfile.ZipFile(sparse) as zipped:
            starts = sorted({info.header_offset for info in zipped.infolist()})
            # the last member's data ends where the central directory starts (already read:
            # its verify need not wait for the download's last bytes)
            directory = getattr(zipped, "start_dir", None)
        size = sparse.stat().st_size
    except Rejected as exc:
        if exc.rule in END_RECORD_RULES:  # the end records are always in the tail: final,
            raise  # and the (possibly huge) archive need not be downloaded to say so
        return None
    except (UploadError, OSError, zipfile.BadZipFile):
        return None
    finally:
        sparse.unlink(missing_ok=True)
    last = (
        directory
        if isinstance(directory, int) and starts and starts[-1] < directory <= size
        else size
    )
    after = dict(zip(starts, starts[1:] + [last]))
    return Directory(
        plan, etag, {info.filename: after[info.header_offset] for info in plan.members}
    )


class Gate:
    """How much of the archive is on disk: a member is verified as soon as it is all there.
    Written by the download thread, waited on by the verify threads."""

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


def download_archive(
    client: Any,
    settings: UploadSettings,
    upload: Upload,
    path: Path,
    directory: Directory | None,
    gate: Gate | None,
) -> None:
    """Download the archive to ``path`` (the version of ``directory`` if it was read
    first), telling ``gate`` as it goes and closing it at the end, whatever happens.

    Raises:
        StorageFailed: S3 failed after retries, or the archive changed since its tail.
    """
    try:
        with open(path, "wb") as target:
            storage.download(
                client,
                settings.inbox_bucket,
                upload.inbox_key,
                target,
                etag=directory.etag if directory else None,
                written=gate.written if gate else None,
            )
    finally:
        if gate is not None:
            gate.close()
