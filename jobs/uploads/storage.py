"""The upload job's S3 calls, on one shared, thread-safe boto3 client.

botocore errors become :class:`StorageFailed` here (after botocore's own standard-mode
retries) and never escape. Metadata follows Tecken: ``original_size`` and
``original_md5_hash``; we add ``upload_id`` and ``replaced`` so that an attempt
interrupted between a PUT and its database row can be finished exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO, Iterable

from .errors import StorageFailed
from .records import Existing, Written


def _reason(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        error = response["Error"]
        return f"{error.get('Code', '?')}: {error.get('Message', '') or exc}"
    return f"{type(exc).__name__}: {exc}"


def _is_not_found(exc: Exception) -> bool:
    response = getattr(exc, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return code in ("404", "NoSuchKey", "NotFound")


def download(client: Any, bucket: str, key: str, target: BinaryIO) -> None:
    """Stream an inbox archive into ``target`` (a temporary file)."""
    try:
        client.download_fileobj(bucket, key, target)
    except Exception as exc:  # botocore.exceptions.*: translated here, never escapes
        raise StorageFailed("GetObject", bucket, key, _reason(exc)) from None


def store_archive(client: Any, bucket: str, key: str, path: Path) -> None:
    """Put an archive into the inbox (``enqueue``)."""
    try:
        client.upload_file(str(path), bucket, key)
    except Exception as exc:
        raise StorageFailed("PutObject", bucket, key, _reason(exc)) from None


def list_directory(client: Any, bucket: str, prefix: str) -> set[str]:
    """Keys under ``prefix`` (one LIST per 1000 keys; an empty answer keeps the connection)."""
    keys: set[str] = set()
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.update(item["Key"] for item in page.get("Contents", []))
    except Exception as exc:
        raise StorageFailed("ListObjectsV2", bucket, prefix, _reason(exc)) from None
    return keys


def head(client: Any, bucket: str, key: str) -> Existing | None:
    """The object's size and metadata, or None when there is none."""
    try:
        response = client.head_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if _is_not_found(exc):
            return None
        raise StorageFailed("HeadObject", bucket, key, _reason(exc)) from None
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


def put(client: Any, bucket: str, written: Written, body: bytes, upload_id: int) -> None:
    """Write one symbol object with Tecken's headers and metadata."""
    extra: dict[str, Any] = {}
    if written.compressed:
        extra = {"ContentEncoding": "gzip", "ContentType": "text/plain"}
    metadata = {"original_size": str(written.original_size),
                "original_md5_hash": written.original_md5,
                "upload_id": str(upload_id), "replaced": "true" if written.update else "false"}
    try:
        client.put_object(Bucket=bucket, Key=written.key, Body=body, Metadata=metadata, **extra)
    except Exception as exc:
        raise StorageFailed("PutObject", bucket, written.key, _reason(exc)) from None


def directories(keys: Iterable[str]) -> list[str]:
    """The distinct ``<prefix>/<debug_file>/<DEBUG_ID>/`` directories of ``keys``, in order."""
    return list(dict.fromkeys(key.rsplit("/", 1)[0] + "/" for key in keys))
