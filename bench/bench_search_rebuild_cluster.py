"""The rebuild benchmark (:mod:`bench.bench_search_rebuild`) on the 3-node Elasticsearch
cluster of ``scripts/services.sh start esc`` (``SYMBOLS_ESC_URLS``), reported beside the
single node's figures (issue #36, item 3).

The same 1M documents, the same two sides interleaved: ours is the rebuild job's path,
which on a cluster raises the new index's replicas (``auto_expand_replicas`` 0-1: one
copy more) and waits for green before the alias moves; the engine alone posts the same
pre-encoded bytes (its two streams to two nodes), then the same finish, replicas raised
and waited for likewise. Both sides' Elasticsearch CPU is the sum over the three nodes.
The three nodes share this machine's cores with each other, PostgreSQL and the client:
the figure says what a cluster costs a rebuild on one machine, not what three machines
would do.
"""

from __future__ import annotations

import os

from .bench_search_rebuild import run as run_rebuild
from .harness import Comparison

ROUNDS = 3


def run(rounds: int) -> list[Comparison]:
    """The rebuild's rounds on the cluster.

    Raises:
        RuntimeError: the cluster is not running (``scripts/services.sh start esc``).
    """
    from search.client import make_es_client

    urls = os.environ.get("SYMBOLS_ESC_URLS", "")
    if not urls or not _up(make_es_client(urls, request_timeout=10)):
        raise RuntimeError(
            "the Elasticsearch cluster is not running: scripts/services.sh start esc"
        )
    return run_rebuild(rounds, urls, where=" on a 3-node cluster (1 replica)")


def _up(es: object) -> bool:
    try:
        health = es.cluster.health(wait_for_nodes="3", timeout="5s")  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - refused, timed out: not running
        return False
    return int(health["number_of_nodes"]) == 3
