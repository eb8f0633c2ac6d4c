"""The upload job's S3 calls, on one shared, thread-safe boto3 client.

botocore errors become :class:`StorageFailed` here (after botocore's own standard-mode
retries) and never escape. Metadata follows Tecken: ``original_size`` and
``original_md5_hash``; we add ``upload_id`` and ``replaced`` so that an attempt
interrupted between a PUT and its database row can be finished exactly.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, BinaryIO, Callable

from jobs.s3 import is_not_found

from .errors import StorageFailed, is_disk_full
from .records import Existing, Part, Written

logger = logging.getLogger(__name__)

DOWNLOAD_CHUNK = 8 * 1024 * 1024


def _s3_error_text(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        error = response["Error"]
        return f"{error.get('Code', '?')}: {error.get('Message', '') or exc}"
    return f"{type(exc).__name__}: {exc}"


# botocore's errors that mean the server could not be reached or did not answer in time
# (by class name: botocore is imported only when a client is made)
_UNREACHABLE = (
    "EndpointConnectionError",
    "ConnectionClosedError",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "ConnectionError",
    "ProxyConnectionError",
)


def _is_s3_unavailable(exc: Exception) -> bool:
    """Whether ``exc`` (after botocore's retries) means the S3 service itself is unavailable
    (unreachable, timing out, or answering 5xx such as 503 SlowDown), rather than a problem
    with one object or request: then the other uploads of the run would fail the same way."""
    if type(exc).__name__ in _UNREACHABLE:
        return True
    status = _status(exc)
    return status is not None and status >= 500


def _failed(operation: str, bucket: str, key: str, exc: Exception) -> StorageFailed:
    return StorageFailed(
        operation,
        bucket,
        key,
        _s3_error_text(exc),
        unavailable=_is_s3_unavailable(exc),
        status=_status(exc),
    )


def _status(exc: Exception) -> int | None:
    """The HTTP status of S3's answer that ``exc`` carries (None: no answer)."""
    response = getattr(exc, "response", None)
    status = (
        response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(response, dict)
        else None
    )
    return status if isinstance(status, int) else None


def versioning(client: Any, bucket: str) -> str:
    """The bucket's versioning status: ``Enabled``, ``Suspended``, ``never enabled``, or
    ``not supported by this S3 server (...)``.

    Raises:
        StorageFailed: S3 failed after retries.
    """
    try:
        status = client.get_bucket_versioning(Bucket=bucket).get("Status")
    except Exception as exc:
        if _status(exc) == 501:
            return f"not supported by this S3 server ({_s3_error_text(exc)})"
        raise _failed("GetBucketVersioning", bucket, "", exc) from None
    return str(status) if status else "never enabled"


#: The object a write probe writes (outside the symbol keys' layout; no prune rule covers it).
PROBE_KEY = "_probe/process-uploads"
_WRITES = ("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload")


def answers(client: Any, failed: StorageFailed) -> bool:
    """Whether S3 still does what ``failed`` could not, for another key: a HEAD of its
    bucket answers, and for a write, a PUT of an empty object at :data:`PROBE_KEY` in it
    succeeds. Then the service is up and the failure was about that key only."""
    try:
        client.head_bucket(Bucket=failed.bucket)
        if failed.operation in _WRITES:
            client.put_object(Bucket=failed.bucket, Key=PROBE_KEY, Body=b"")
    except Exception:  # (botocore's errors, after its retries: the service is not up)
        return False
    return True


def make_client(concurrency: int) -> Any:
    """The upload job's one shared client: a connection per thread, and the hot-path
    settings of :func:`jobs.s3.make_s3_client` (no client-side parameter validation, no
    ``100 Continue`` wait: bodies are at most ``multipart_threshold`` bytes, in memory).
    Together with unsigned payloads they cut the CPU per small PUT of both this process and
    the local S3 server; see docs/jobs/uploads.md."""
    from jobs.s3 import make_s3_client

    return make_s3_client(concurrency, validate_parameters=False, expect_continue=False)


def download(
    client: Any,
    bucket: str,
    key: str,
    target: BinaryIO,
    tries: int = 3,
    etag: str | None = None,
    written: Callable[[int], bool] | None = None,
) -> None:
    """Stream an inbox archive into ``target`` (a temporary file), 8 MiB at a time.

    One GET read in order: about half the CPU of ``download_fileobj``'s ranged GETs on
    threads (measured on the 300 MB benchmark archive: 0.12-0.26 s vs 0.38-0.47 s).
    botocore retries the request itself; a connection lost in the middle of the body
    starts the download again, ``tries`` times in all. ``etag``: only that version of the
    object (If-Match). ``written`` is told the bytes on disk after each chunk and returns
    whether to go on (then the download is not restarted: readers may already rely on what
    was written).

    Raises:
        StorageFailed: S3 failed after retries.
    """
    extra = {"IfMatch": etag} if etag else {}
    tries = 1 if written is not None else tries
    for attempt in range(1, tries + 1):
        target.seek(0)
        target.truncate()
        try:
            body = client.get_object(Bucket=bucket, Key=key, **extra)["Body"]
            size = 0
            for chunk in iter(lambda: body.read(DOWNLOAD_CHUNK), b""):  # noqa: B023 (this body)
                target.write(chunk)
                size += len(chunk)
                if written is not None:
                    target.flush()
                    if not written(size):
                        return  # the caller needs no more
            return
        except Exception as exc:  # botocore.exceptions.*: translated here, never escapes
            if is_disk_full(exc):
                raise  # the local disk, not S3: the worker stops the run (DiskFull)
            if attempt == tries or getattr(exc, "response", None) is not None:
                raise _failed("GetObject", bucket, key, exc) from None
            logger.warning(
                "GetObject s3://%s/%s: %s; starting again", bucket, key, _s3_error_text(exc)
            )


def fetch_tail(client: Any, bucket: str, key: str, target: Path, length: int) -> str:
    """The last ``length`` bytes of an object, written at their place in a sparse file
    of the object's size (zipfile can then read an archive's central directory from it).
    Returns the object's ETag.

    Raises:
        StorageFailed: S3 failed after retries.
    """
    try:
        response = client.get_object(Bucket=bucket, Key=key, Range=f"bytes=-{length}")
        total = int(response["ContentRange"].rsplit("/", 1)[1])
        data = response["Body"].read()
    except Exception as exc:
        raise _failed("GetObject", bucket, key, exc) from None
    with open(target, "wb") as out:
        out.truncate(total)
        out.seek(total - len(data))
        out.write(data)
    return str(response["ETag"])


def store_archive(client: Any, bucket: str, key: str, path: Path) -> None:
    """Put an archive into the inbox (``enqueue``)."""
    try:
        client.upload_file(str(path), bucket, key)
    except Exception as exc:
        raise _failed("PutObject", bucket, key, exc) from None


def delete_archive(client: Any, bucket: str, key: str) -> None:
    """Delete an archive ``enqueue`` stored but could not queue.

    Raises:
        StorageFailed: S3 refused or did not answer (botocore's retries done).
    """
    try:
        client.delete_object(Bucket=bucket, Key=key)
    except Exception as exc:
        raise _failed("DeleteObject", bucket, key, exc) from None


def list_directory(client: Any, bucket: str, prefix: str) -> set[str]:
    """Keys under ``prefix`` (one LIST per 1000 keys; an empty answer keeps the connection)."""
    keys: set[str] = set()
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.update(item["Key"] for item in page.get("Contents", []))
    except Exception as exc:
        raise _failed("ListObjectsV2", bucket, prefix, exc) from None
    return keys


def head(client: Any, bucket: str, key: str) -> Existing | None:
    """The object's size and metadata, or None when there is none."""
    try:
        response = client.head_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise _failed("HeadObject", bucket, key, exc) from None
    meta = response.get("Metadata", {})
    original_size = meta.get("original_size")
    upload_id = meta.get("upload_id")
    return Existing(
        size=int(response["ContentLength"]),
        original_size=int(original_size) if original_size and original_size.isdigit() else None,
        original_md5=meta.get("original_md5_hash"),
        upload_id=int(upload_id) if upload_id and upload_id.isdigit() else None,
        replaced=meta.get("replaced") == "true",
    )


def _headers(written: Written, upload_id: int) -> dict[str, Any]:
    """Tecken's headers and metadata, plus ours (``upload_id``, ``replaced``)."""
    extra: dict[str, Any] = {}
    if written.compressed:
        extra = {"ContentEncoding": "gzip", "ContentType": "text/plain"}
    extra["Metadata"] = {
        "original_size": str(written.original_size),
        "original_md5_hash": written.original_md5,
        "upload_id": str(upload_id),
        "replaced": "true" if written.update else "false",
    }
    return extra


def put(
    client: Any,
    bucket: str,
    written: Written,
    body: bytes,
    upload_id: int,
    only_if_new: bool = False,
) -> bool:
    """Write one symbol object with Tecken's headers and metadata.

    ``only_if_new``: a conditional write (``If-None-Match: *``) that does nothing when the
    key exists. Returns False when it did nothing, True when the object was written.

    Raises:
        StorageFailed: S3 failed after retries.
    """
    extra = _headers(written, upload_id)
    if only_if_new:
        extra["IfNoneMatch"] = "*"
    try:
        client.put_object(Bucket=bucket, Key=written.key, Body=body, **extra)
    except Exception as exc:
        if only_if_new and _is_precondition_failed(exc):
            return False
        raise _failed("PutObject", bucket, written.key, exc) from None
    return True


def _is_precondition_failed(exc: Exception) -> bool:
    response = getattr(exc, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return code in ("PreconditionFailed", "412")


def start_multipart(
    client: Any,
    bucket: str,
    written: Written,
    body: BinaryIO,
    upload_id: int,
    part_size: int,
    started: Callable[[str], None] = lambda _: None,
) -> tuple[str, list[Part]]:
    """Upload ``written.size`` bytes read from ``body`` as the parts (``part_size`` each;
    memory: one part) of a new multipart upload; return its id and parts. Nothing is
    visible until :func:`complete_multipart`. Headers and metadata are set when the upload
    is created: the MD5 is known by then (the member was spooled first). ``started`` is
    told the upload's id as soon as it exists, so that a caller can abort it later.

    Raises:
        StorageFailed: a call failed after botocore's retries (the upload was aborted).
    """
    try:
        upload = client.create_multipart_upload(
            Bucket=bucket, Key=written.key, **_headers(written, upload_id)
        )["UploadId"]
    except Exception as exc:
        raise _failed("CreateMultipartUpload", bucket, written.key, exc) from None
    started(upload)
    parts: list[Part] = []
    try:
        for number in range(1, max(1, -(-written.size // part_size)) + 1):
            response = client.upload_part(
                Bucket=bucket,
                Key=written.key,
                UploadId=upload,
                PartNumber=number,
                Body=body.read(part_size),
            )
            parts.append({"PartNumber": number, "ETag": response["ETag"]})
    except BaseException as exc:
        abort(client, bucket, written.key, upload)
        if not isinstance(exc, Exception):
            raise  # SIGTERM, Ctrl-C: aborted, then stop
        raise _failed("UploadPart", bucket, written.key, exc) from None
    return upload, parts


def complete_multipart(
    client: Any, bucket: str, key: str, upload: str, parts: list[Part], only_if_new: bool = False
) -> bool:
    """Publish a multipart upload's object.

    ``only_if_new``: complete it only if the key holds no object (``If-None-Match: *``,
    which AWS S3 and s3proxy honour on the completion). Returns False when it was refused
    for that (the upload is aborted), True when the object was published.

    Raises:
        StorageFailed: S3 failed after retries (the upload was aborted).
    """
    extra = {"IfNoneMatch": "*"} if only_if_new else {}
    try:
        client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}, **extra
        )
    except Exception as exc:
        abort(client, bucket, key, upload)
        if only_if_new and _is_precondition_failed(exc):
            return False
        raise _failed("CompleteMultipartUpload", bucket, key, exc) from None
    return True


def abort(client: Any, bucket: str, key: str, upload: str) -> None:
    """Abort a multipart upload, best effort: a failure here is logged and the first error
    wins (a bucket lifecycle rule for incomplete multipart uploads is the backstop)."""
    try:
        client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
    except Exception as exc:
        logger.error(
            "could not abort multipart upload %s of s3://%s/%s: %s",
            upload,
            bucket,
            key,
            _s3_error_text(exc),
        )
