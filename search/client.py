"""The one place Elasticsearch clients are built (the rebuild job and the search
endpoint both use it). Imported lazily by jobs so an idle tick does not pay for it."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

from .errors import NoElasticsearchAddress


def es_url(url: str | None = None) -> str:
    """The Elasticsearch URL a client is built for: ``url``, else ``ES_URL``. Several nodes
    of a cluster: their URLs, comma-separated. There is no default (the development one,
    ``http://127.0.0.1:9201``, is ``scripts/services.sh``'s ``ES_URL``).

    Raises:
        NoElasticsearchAddress: neither is set (or both are blank).
    """
    chosen = (url or os.environ.get("ES_URL") or "").strip()
    if not chosen:
        raise NoElasticsearchAddress()
    return chosen


def node_urls(url: str) -> list[str]:
    """The nodes of an :func:`es_url` value (one URL, or a comma-separated list).

    Raises:
        ValueError: an empty list.
    """
    nodes = [part.strip() for part in url.split(",") if part.strip()]
    if not nodes:
        raise ValueError(f"no Elasticsearch URL in {url!r}")
    return nodes


def public_url(url: str) -> str:
    """``scheme://host:port`` of ``url`` (each of a comma-separated list), without the user
    and password a URL may carry: the address to print or log. The runner's
    ``crontabber.failures`` applies the same rule (``search/`` does not import the runner;
    a test checks they agree)."""
    if "," in url:
        return ",".join(public_url(part.strip()) for part in url.split(","))
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if not parts.scheme:
        return url
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}"


def make_es_client(url: str | None = None, request_timeout: float = 30) -> Any:
    """An Elasticsearch 8 client for ``url`` (default: :func:`es_url`'s): with several
    nodes, requests go round the ones alive, and a request a node fails (refused, reset,
    timed out) is retried on another (up to 3 times), so a node lost is no error.

    Health is checked with ``cluster.health()``, not ``ping()``: the local
    integ-test distribution answers ``GET /`` with 405.
    """
    from elasticsearch import Elasticsearch

    return Elasticsearch(
        node_urls(es_url(url)),
        request_timeout=request_timeout,
        retry_on_timeout=True,
        max_retries=3,
    )


@contextlib.contextmanager
def naming_address(url: str) -> Iterator[None]:
    """An exception leaving the block gets an ``address`` attribute, ``url``, unless it
    has one: a reset or an aborted connection (urllib3's ProtocolError) carries no node,
    so without it the runner's one-line failure could only say ``Elasticsearch:
    connection reset by peer`` (found by the fault suite, docs/faults.md)."""
    try:
        yield
    except Exception as exc:
        if getattr(exc, "address", None) is None:
            with contextlib.suppress(AttributeError):  # a class with __slots__
                exc.address = url  # type: ignore[attr-defined]
        raise
