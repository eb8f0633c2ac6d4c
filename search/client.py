"""The one place Elasticsearch clients are built (the rebuild job and the search
endpoint both use it). Imported lazily by jobs so an idle tick does not pay for it."""

from __future__ import annotations

import os
from typing import Any

DEFAULT_URL = "http://127.0.0.1:9201"


def make_es_client(url: str | None = None, request_timeout: float = 30) -> Any:
    """An Elasticsearch 8 client for ``url`` (default: ``ES_URL`` from the environment).

    Health is checked with ``cluster.health()``, not ``ping()``: the local
    integ-test distribution answers ``GET /`` with 405.
    """
    from elasticsearch import Elasticsearch

    return Elasticsearch(url or os.environ.get("ES_URL", DEFAULT_URL),
                         request_timeout=request_timeout, retry_on_timeout=True, max_retries=3)
