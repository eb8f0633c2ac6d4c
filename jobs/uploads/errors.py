"""Errors of the upload job, under the runner's one base class."""

from __future__ import annotations

import errno
from typing import TypeGuard

from crontabber.errors import CrontabberError, WorkRefused


class UploadError(CrontabberError):
    """Base of the upload job's errors. ``permanent``: retrying the same archive cannot help."""

    permanent = False


class Rejected(UploadError):
    """The archive breaks a rule; nothing of it is written. ``member`` is the first offender."""

    permanent = True

    def __init__(self, rule: str, member: str | None = None, detail: str = "") -> None:
        self.rule = rule
        self.member = member
        self.detail = detail
        where = f"member {member!r}: " if member is not None else ""  # else the whole archive
        super().__init__(f"rejected: {where}{rule}" + (f" ({detail})" if detail else ""))


class StorageFailed(UploadError):
    """An S3 call failed after botocore's retries; a later attempt may succeed.
    ``unavailable``: the service itself failed (unreachable, timed out, a 5xx answer such
    as 503 SlowDown), not this object or request."""

    def __init__(
        self,
        operation: str,
        bucket: str,
        key: str,
        reason: str,
        unavailable: bool = False,
        status: int | None = None,
    ) -> None:
        self.operation = operation
        self.bucket = bucket
        self.key = key
        self.reason = reason
        self.unavailable = unavailable
        self.status = status  # the HTTP status S3 answered (None: no answer)
        super().__init__(f"S3 {operation} s3://{bucket}/{key} failed: {reason}")

    @property
    def maybe_this_key(self) -> bool:
        """S3 answered, with an error other than 503 (throttling, maintenance): it may be
        about this request's key only (a file-system back end refusing a name answers 500),
        so whether the service is down is for a probe to say (:func:`.storage.answers`)."""
        return self.status is not None and self.status != 503


class S3Unavailable(UploadError):
    """The run stops: S3 itself failed an upload after retries (the upload went back to
    ``pending``, or ``failed`` on its last attempt), so every other upload would fail the
    same way. Fails the job run with one line naming S3's address; the uploads left in
    the queue are untouched (no attempt used) and a later run takes them."""

    def __init__(self, endpoint: str, upload_id: int, error: str) -> None:
        self.endpoint = endpoint
        self.upload_id = upload_id
        self.error = error
        super().__init__(
            f"S3 at {endpoint} unavailable, the run stops (upload {upload_id}: {error})"
        )


class DiskFull(UploadError):
    """The run stops: the local file system of the archive and its spool (``TMPDIR``)
    is full. The upload was recorded as failed for this attempt (back to ``pending``),
    nothing of it published; every other upload would fail the same way, so the run
    fails with this one line and a later run, with space again, takes them."""

    def __init__(self, upload_id: int, error: OSError) -> None:
        self.upload_id = upload_id
        where = f" ({error.filename})" if error.filename else ""
        super().__init__(
            f"no space left on the upload spool's disk{where}, the run stops "
            f"(upload {upload_id} goes back to the queue)"
        )


def is_disk_full(exc: BaseException) -> TypeGuard[OSError]:
    """Whether ``exc`` is the local disk (or quota) being full."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class ClaimLost(UploadError):
    """Another worker took the upload over (this worker's lease had expired)."""

    def __init__(self, upload_id: int, worker: str) -> None:
        self.upload_id = upload_id
        self.worker = worker
        super().__init__(f"upload {upload_id}: claim lost by {worker} (lease expired, taken over)")


class UploadNotFound(UploadError):
    """``reprocess ID`` named an upload that does not exist or is held by a live worker."""

    def __init__(self, upload_id: int) -> None:
        self.upload_id = upload_id
        super().__init__(f"upload {upload_id} does not exist or another worker is processing it")


class NoSuchUpload(UploadError):
    """``show ID`` named an upload the table does not hold."""

    def __init__(self, upload_id: int) -> None:
        self.upload_id = upload_id
        super().__init__(
            f"upload {upload_id} does not exist (python -m jobs.uploads list shows the latest)"
        )


class ArchiveUnusable(UploadError):
    """``enqueue PATH`` named a local file that is missing or not a zip archive (nothing queued)."""

    permanent = True

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class NotQueued(UploadError, WorkRefused):
    """``enqueue`` stored the archive but could not write its upload row (``reason``: the
    database's failure, one line): nothing is queued. The archive was deleted again
    (``left`` None), or its deletion failed too (``left``: why): then it is an archive no
    upload row knows, which the prune job keeps, and the message names it. Exit 5."""

    def __init__(self, reason: str, bucket: str, key: str, left: str | None) -> None:
        self.reason = reason
        self.bucket = bucket
        self.key = key
        self.left = left
        where = f"s3://{bucket}/{key}"
        fate = (
            f"the archive stored at {where} was deleted again; run enqueue again"
            if left is None
            else f"the archive stored at {where} could not be deleted ({left}): delete it,"
            " then run enqueue again"
        )
        super().__init__(f"nothing queued: the upload row was not written ({reason}); {fate}")


class VersioningOff(UploadError):
    """``overwrite = versioned``, but the symbols bucket does not keep versions: the run
    stops before it claims anything (a replaced file would be gone for good)."""

    permanent = True

    def __init__(self, bucket: str, status: str) -> None:
        self.bucket = bucket
        self.status = status
        super().__init__(
            f"overwrite = versioned, but versioning of bucket {bucket!r} is "
            f"{status}: enable it (put-bucket-versioning Status=Enabled) or choose "
            f"overwrite = replace or keep-first; no upload was claimed"
        )
