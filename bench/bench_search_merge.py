"""What merging a rebuilt index into one segment buys the search endpoint (issue #15).

Ours: the search benchmarks' 1M documents merged into one segment, as
``search.indexer.rebuild`` leaves an index since 2026-11-23. Baseline: the same
documents in the segments the bulk load wrote (``rebuild(..., merge=False)``,
what every rebuild left before). Each is built once from the source database of
``bench_search_rebuild`` into an alias of its own and reused while it holds those
documents; the notes give both segment counts as measured at the start.

Each alias is served the way the fault suite serves the endpoint (gunicorn, 4 sync
workers: ``faults.search_load.Gunicorn``) and loaded with hey at 4 connections
over the fault suite's 12 queries, 2 s each per round (``faults.search_load.level``);
the two servers take turns, the order alternating per round, after two warm-up
rounds of each (Elasticsearch's JVM keeps compiling its search path for minutes
after it starts: ``docs/faults.md``, search_load). A round's values:
the p99 and p50 of its requests' latencies as hey measured them, and
Elasticsearch's CPU time per request (its nodes stats, read around the round).
"""

from __future__ import annotations

import os
from typing import Any

from .harness import Comparison, Sample, interleave

ROUNDS = 5
WARMUP = 2
CONNECTIONS = 4
SECONDS_PER_QUERY = 2.0
MERGED = "bench-search-merged"
UNMERGED = "bench-search-unmerged"


def build(es: Any, alias: str, merge: bool) -> int:
    """The alias's document count, building it first when it is missing or
    short of the source's rows."""
    from crontabber.store import connect
    from jobs.search_index import SymbolFileStore
    from search.indexer import rebuild
    from tests.fixtures.search_corpus import corpus
    from tests.fixtures.search_source import source_database

    conn = connect(source_database(corpus()))
    try:
        store = SymbolFileStore(conn)
        count = store.count()
        if es.indices.exists_alias(name=alias) and es.count(index=alias)["count"] == count:
            return count
        with store.snapshot() as source:
            return rebuild(es, alias, source.rows, keep=1, merge=merge).documents
    finally:
        conn.close()


def es_cpu_ms(es: Any) -> float:
    """Elasticsearch's process CPU time so far, all nodes (ms)."""
    nodes = es.nodes.stats(metric="process")["nodes"]
    return float(sum(node["process"]["cpu"]["total_in_millis"] for node in nodes.values()))


def run(rounds: int) -> list[Comparison]:
    from faults import net
    from faults.search_load import Gunicorn, level, summary
    from search.client import make_es_client
    from search.indexer import segment_count
    from tests.fixtures.search_source import queries

    es = make_es_client(request_timeout=300)
    documents = build(es, MERGED, merge=True)
    build(es, UNMERGED, merge=False)
    counts = {alias: segment_count(es, alias) for alias in (MERGED, UNMERGED)}
    tools = net.tools()
    texts = queries()[:12]
    seconds = SECONDS_PER_QUERY * len(texts)
    figures: dict[str, dict[str, list[float]]] = {MERGED: {}, UNMERGED: {}}

    def round_(server: Gunicorn, alias: str) -> float:
        before = es_cpu_ms(es)
        rows = level(tools, server.port, texts, CONNECTIONS, seconds)
        cpu = (es_cpu_ms(es) - before) / len(rows)
        p50, p99, error_rate, _ = summary(rows)
        if error_rate:
            raise RuntimeError(f"{alias}: {error_rate:.2%} of the requests failed")
        for name, value in (("p50", p50), ("cpu", cpu)):
            figures[alias].setdefault(name, []).append(value)
        return p99

    servers = {alias: Gunicorn(alias) for alias in (MERGED, UNMERGED)}
    load = os.getloadavg()[0]
    try:
        ours, baseline = interleave(
            lambda: round_(servers[MERGED], MERGED),
            lambda: round_(servers[UNMERGED], UNMERGED),
            rounds,
            warmup=WARMUP,
        )
    finally:
        for server in servers.values():
            server.close()
    measured = {
        alias: {name: values[-rounds:] for name, values in found.items()}
        for alias, found in figures.items()
    }  # the warm-up rounds dropped
    notes = [
        f"{documents} documents; ours {counts[MERGED]} segment(s), baseline "
        f"{counts[UNMERGED]} segments; gunicorn -w 4, hey -c {CONNECTIONS}, "
        f"{len(texts)} queries x {SECONDS_PER_QUERY:.0f} s per round; load average "
        f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (2 cores shared "
        "with Elasticsearch, hey and gunicorn)"
    ]
    name = f"/search via gunicorn, 1M documents, hey -c {CONNECTIONS}"
    merged, unmerged = "ours (merged: one segment)", "as loaded (unmerged)"
    return [
        Comparison(
            name,
            "p99 latency",
            "ms",
            Sample(merged, ours),
            Sample(unmerged, baseline),
            higher_is_better=False,
            goal="ours p99 <= 30 ms",
            notes=notes,
        ),
        Comparison(
            name,
            "p50 latency",
            "ms",
            Sample(merged, measured[MERGED]["p50"]),
            Sample(unmerged, measured[UNMERGED]["p50"]),
            higher_is_better=False,
        ),
        Comparison(
            name,
            "Elasticsearch CPU per request",
            "ms",
            Sample(merged, measured[MERGED]["cpu"]),
            Sample(unmerged, measured[UNMERGED]["cpu"]),
            higher_is_better=False,
        ),
    ]
