"""One line per failure, naming the service and its address when the failure
is a service's ("Elasticsearch at http://127.0.0.1:9201: connection refused", not
248 lines of retries and tracebacks).

The exception chain (causes, contexts, and elastic_transport's ``errors``) is
searched by the exception classes' module and name, so nothing here imports
the client libraries (an idle tick must not pay for them).
"""

from __future__ import annotations

import logging

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Loggers of the client libraries: their retry warnings lose their tracebacks
# unless the log level is DEBUG.
CLIENT_LOGGERS = (
    "elastic_transport",
    "elasticsearch",
    "botocore",
    "boto3",
    "urllib3",
    "s3transfer",
)


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception behind it (causes, contexts, elastic_transport's
    ``errors``, botocore's ``kwargs["error"]``), outermost first, each once."""
    found: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if current is None or any(current is seen for seen in found):
            continue
        found.append(current)
        todo += [current.__cause__, current.__context__]  # type: ignore[list-item]
        todo += [e for e in getattr(current, "errors", ()) or () if isinstance(e, BaseException)]
        wrapped = (getattr(current, "kwargs", None) or {}).get("error")  # botocore's
        if isinstance(wrapped, BaseException):
            todo.append(wrapped)
    return found


def _kind(exc: BaseException) -> tuple[str, str]:
    return type(exc).__module__.split(".")[0], type(exc).__name__


def first_line(exc: BaseException) -> str:
    """The first line of what the exception says (its type name when it says nothing)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _cause(exceptions: list[BaseException]) -> str:
    for exc in reversed(exceptions):  # the innermost cause says it best
        if isinstance(exc, ConnectionRefusedError):
            return "connection refused"
        if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
            return "timed out"
        if isinstance(exc, OSError) and exc.strerror:
            return exc.strerror.lower()
    text = " ".join(str(exc) for exc in exceptions)
    for needle, reason in (
        ("Connection refused", "connection refused"),
        ("timed out", "timed out"),
        ("Name or service not known", "unknown host"),
    ):
        if needle in text:
            return reason
    return first_line(exceptions[-1])


def _base(url: str) -> str:
    """``scheme://host:port`` of ``url``: no path or query, and no user or password,
    which a URL such as ``http://elastic:PASSWORD@es:9200`` carries (the line goes to
    stdout, the log and Sentry); each of a comma-separated list (a cluster's nodes).
    ``search.client.public_url`` is the same rule for ``search/``, which does not import
    the runner (a test checks they agree)."""
    if "," in url:
        return ",".join(_base(part.strip()) for part in url.split(","))
    from urllib.parse import urlsplit  # only on a failure: not on every tick

    parts = urlsplit(url)
    if not parts.scheme:
        return url
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port that is not a number: leave it out
        port = ""
    return f"{parts.scheme}://{host}{port}"


def _bucket(error: Any) -> str:
    """`` (bucket NAME)`` when S3's error names a bucket (``NoSuchBucket`` does)."""
    response = getattr(error, "response", None) or {}
    name = (response.get("Error") or {}).get("BucketName")
    return f" (bucket {name})" if name else ""


def describe(exc: BaseException) -> str:
    """A failure in one line: ``Service at address: reason`` for the services'
    connection failures, ``Type: first line of the message`` otherwise.

    Elasticsearch's address comes from urllib3's connection when the failure has one
    (refused, timed out), else from an ``address`` attribute on an exception of the
    chain (``search.client.naming_address``: a reset carries no connection)."""
    exceptions = chain(exc)
    for current in exceptions:
        library, name = _kind(current)
        if library in ("elastic_transport", "elasticsearch") and (
            "Connection" in name or name == "TransportError"
        ):
            conn: Any = next(
                (getattr(e, "conn") for e in exceptions if getattr(e, "conn", None) is not None),
                None,
            )
            address = next(
                (
                    str(getattr(e, "address"))
                    for e in exceptions
                    if getattr(e, "address", None) is not None
                ),
                None,
            )
            where = (
                f" at http://{conn.host}:{conn.port}"
                if conn is not None
                else f" at {_base(address)}"
                if address
                else ""
            )
            return f"Elasticsearch{where}: {_cause(exceptions)}"
        if library == "botocore":
            kwargs: dict[str, Any] = getattr(current, "kwargs", {}) or {}
            if "endpoint_url" in kwargs:
                return f"S3 at {_base(str(kwargs['endpoint_url']))}: {_cause(exceptions)}"
            # botocore's modeled errors (NoSuchBucket, ...) subclass ClientError
            if any(cls.__name__ == "ClientError" for cls in type(current).__mro__):
                return f"S3{_bucket(current)}: {first_line(current)}"
        if library == "psycopg2" and name == "OperationalError":
            return f"PostgreSQL: {first_line(current)}"
    return f"{type(exc).__name__}: {first_line(exc)}"


class NoClientTracebacks(logging.Filter):
    """Drop the tracebacks of the client libraries' log records (their retry
    warnings): the failure is reported once, in one line, by the runner."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.split(".")[0] in CLIENT_LOGGERS:
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True
