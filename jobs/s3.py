"""The one place S3 clients are built.

Credentials and the endpoint come from the environment, as boto3 reads them
itself (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL_S3``,
``AWS_DEFAULT_REGION``), so no secret passes through crontabber.ini. boto3 is
imported when a client is made, never at module import: an idle cron tick
must not pay for it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

DEFAULT_POOL = 10


def parse_timestamp(value: Any) -> dt.datetime:
    """botocore's timestamp parser, minus dateutil for the ISO-8601 form S3 uses in
    XML bodies (``2026-11-22T07:23:10.000Z``), which ``datetime.fromisoformat``
    reads since Python 3.11. botocore's own parser (dateutil) took ~85% of the
    time of parsing a 1,000-key listing page; anything else (HTTP dates, epoch
    numbers) still goes to it. Always timezone-aware."""
    if type(value) is str:
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)
    from botocore.utils import parse_timestamp as botocore_parse

    # botocore has no type stubs: its parser's return is declared here (a datetime, aware)
    parsed_by_botocore: dt.datetime = botocore_parse(value)
    return parsed_by_botocore


def is_not_found(exc: BaseException) -> bool:
    """Whether a botocore error says the key (or object) is not there: ``NoSuchKey``, or the
    ``404``/``NotFound`` of a HEAD, which has no body to name the error."""
    response = getattr(exc, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return code in ("404", "NoSuchKey", "NotFound")


def make_s3_client(
    max_pool_connections: int = DEFAULT_POOL,
    endpoint_url: str | None = None,
    connect_timeout: float = 10,
    read_timeout: float = 60,
    max_attempts: int = 5,
    validate_parameters: bool = True,
    expect_continue: bool = True,
) -> Any:
    """A thread-safe boto3 S3 client; share one per job run.

    ``max_pool_connections`` should match the number of threads using it (a
    smaller pool makes threads wait for connections). Transient errors are
    retried with botocore's standard retry mode (exponential backoff,
    ``max_attempts`` tries in all). Path-style addressing works with every S3-compatible server.

    Request bodies are not SHA-256 signed, on http endpoints either (botocore already
    skips it on https): every upload carries botocore's default CRC-32 checksum instead
    (``x-amz-checksum-crc32``, checked by the server), which protects the bytes as well
    and costs both sides far less CPU. For a job's hot path: ``validate_parameters=False``
    skips botocore's client-side check of each call's parameters, and
    ``expect_continue=False`` sends PutObject bodies at once instead of waiting a round
    trip for ``100 Continue`` (worth it for small bodies already in memory).
    """
    import boto3
    import botocore.session
    from botocore.config import Config

    config = Config(
        max_pool_connections=max_pool_connections,
        retries={"mode": "standard", "max_attempts": max_attempts},
        s3={"addressing_style": "path", "payload_signing_enabled": False},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        parameter_validation=validate_parameters,
    )
    session = botocore.session.get_session()
    session.get_component("response_parser_factory").set_parser_defaults(
        timestamp_parser=parse_timestamp
    )
    client = boto3.session.Session(botocore_session=session).client(
        "s3", endpoint_url=endpoint_url or None, config=config
    )
    if not expect_continue:
        # botocore adds the header on "before-call.s3" (every operation): after it, there
        client.meta.events.register_last("before-call.s3", _send_at_once)
    client.meta.events.register("before-parameter-build.s3", _remember_bucket)
    client.meta.events.register("after-call.s3", _name_the_bucket)
    return client


def _remember_bucket(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """Keep the call's bucket in its context, for ``_name_the_bucket``."""
    if isinstance(params.get("Bucket"), str):
        context["symbols_bucket"] = params["Bucket"]


def _name_the_bucket(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """Put the bucket in an S3 error that does not name it (S3-compatible servers leave
    ``BucketName`` out of ``NoSuchBucket``; AWS names it only there), so the one-line failure
    (``crontabber.failures.describe``) can say which bucket: a job uses two."""
    error = parsed.get("Error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and error.get("Code") and "symbols_bucket" in context:
        error.setdefault("BucketName", context["symbols_bucket"])


def ensure_bucket(client: Any, bucket: str) -> None:
    """Create ``bucket`` unless it exists (the demos, on a fresh S3 server; deployments
    create their buckets themselves)."""
    try:
        client.head_bucket(Bucket=bucket)
    except Exception:  # botocore's ClientError 404: create it
        client.create_bucket(Bucket=bucket)


def _send_at_once(model: Any, params: dict[str, Any], **_: Any) -> None:
    """Drop the ``Expect: 100-continue`` botocore adds to a PutObject's request."""
    if model.name == "PutObject":
        params.get("headers", {}).pop("Expect", None)
