"""The batch writer: the contract between the download tier and the aggregator.

A batch is one S3 object under the inbox bucket's ``missing/`` prefix holding a
stream of msgpack maps, one per symbol lookup that found nothing::

    {"debug_file": "xul.pdb", "debug_id": "44E4EC8C2F41492B9369D6B9A059577C2",
     "code_file": "xul.dll", "code_id": "5F3B1A2C1E4000",   # optional, may be ""
     "count": 3,                                             # optional, default 1
     "seen_at": 1795000000}                                  # optional: epoch seconds or
                                                             # ISO-8601 UTC; default: the
                                                             # object's time
"""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from crontabber.errors import CrontabberError
from jobs.defaults import MISSING_PREFIX


def batch_key(prefix: str = MISSING_PREFIX, now: dt.datetime | None = None) -> str:
    """A new, unique batch key: ``<prefix>YYYY/MM/DD/HHMMSS-<uuid>.msgpack`` (UTC), so
    keys list roughly in time order."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return f"{prefix}{now:%Y/%m/%d/%H%M%S}-{uuid.uuid4().hex}.msgpack"


def encode_events(events: Iterable[Mapping[str, Any]]) -> bytes:
    """The msgpack stream of ``events`` (maps written as they are: no validation,
    so tests can write bad batches too)."""
    import msgpack

    packer = msgpack.Packer()
    buffer = io.BytesIO()
    for event in events:
        buffer.write(packer.pack(event))
    return buffer.getvalue()


def write_batch(
    s3_client: Any,
    bucket: str,
    events: Iterable[Mapping[str, Any]],
    prefix: str = MISSING_PREFIX,
    key: str | None = None,
) -> str:
    """Write one batch of missing-symbol events to S3; return its key.

    Parameters:
        s3_client: a boto3 S3 client (``jobs.s3.make_s3_client()``).
        bucket: the inbox bucket.
        events: maps with ``debug_file``, ``debug_id`` and optionally ``code_file``,
            ``code_id``, ``count``, ``seen_at`` (see the module docstring).
        prefix: where batches go; the aggregator reads the same prefix.
        key: the object key (default: :func:`batch_key`). A key is consumed once:
            rewriting a consumed key is never counted again.

    Raises:
        botocore.exceptions.ClientError: S3 refused the write (e.g. no such bucket).
    """
    key = key or batch_key(prefix)
    s3_client.put_object(
        Bucket=bucket, Key=key, Body=encode_events(events), ContentType="application/x-msgpack"
    )
    return key


class EventsFileError(CrontabberError):
    """``write FILE``: the file cannot be read, or a line is not JSON (nothing is written).
    ``where`` is the file, or ``file:line``."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The events of a JSON-lines file (one object per line; blank lines skipped).

    Raises:
        EventsFileError: the file cannot be read, or a line is not valid JSON (the
            message names the line).
    """
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise EventsFileError(f"{path}:{number}", f"not JSON: {exc.msg}") from None
    except FileNotFoundError:
        raise EventsFileError(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise EventsFileError(str(path), reason.lower()) from None
