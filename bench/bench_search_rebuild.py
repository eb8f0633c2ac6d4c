"""Rebuild throughput against Elasticsearch's own limit: the rebuild job's code path
over 1M symbol files vs the same documents posted by a client that costs almost
nothing, interleaved in one run.

The source (``tests.fixtures.search_source``, shared with the fault suite) is a PostgreSQL
database ``bench_search`` holding the contract tables (``tests/fixtures/search_tables.sql``)
with 1,000,000 symbol files: the 3,400 corpus names x 295 debug ids (+ 1 of each, uploaded twice), a
tenth of
them with a missing-symbol row. It is built once and reused while it holds
that many rows. ``BENCH_REBUILD_VERSIONS=30 python -m bench search_rebuild``
uses 30 debug ids per name instead (102,000 documents, database
``bench_search_v30``, alias ``bench-search-v30``): a quick run while developing.

Ours: ``jobs.search_index.SymbolFileStore`` (snapshot, count, server-side cursor)
-> ``search.indexer.rebuild`` (bulk bodies, count check, refresh, merge, alias
swap, pruning) into alias ``bench-search-1m``, which the latency benchmark then
reads. Baseline, "engine alone": the same documents, encoded before the run
(by ``search.documents.bulk_lines``, the bytes ours sends), into an index with
the same mapping and settings (refresh off, 0 replicas), posted as 5,000-document
bulk requests on 2 persistent ``http.client`` connections from 2 threads; then the
same finish as ours (settings restored, refresh, merge into one segment, count).
Each side's client CPU is this process's CPU seconds (all its threads) over the
side's run; Elasticsearch's from its node stats (other users of the shared node
count too). After the rounds, one more rebuild of ours (not merged, into a
throw-away alias) runs under cProfile (the main thread's CPU time: the posting
threads only wait) and its top functions go into the notes.
"""

from __future__ import annotations

import http.client
import os
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

from tests.fixtures.search_source import ALIAS, source_database

from .harness import Comparison, Sample, interleave

ROUNDS = 3
CHUNK = 5000  # documents per bulk request, both sides
STREAMS = 2  # requests in flight, both sides


def es_cpu_seconds(es: Any) -> float:
    """CPU seconds of the Elasticsearch node(s) so far."""
    nodes = es.nodes.stats(metric="process")["nodes"].values()
    return sum(node["process"]["cpu"]["total_in_millis"] for node in nodes) / 1000


class Side:
    """One side's measurements, a value per round."""

    def __init__(self) -> None:
        self.load: list[float] = []  # s until the last document was acknowledged
        self.whole: list[float] = []  # s until the index is searchable, merged
        self.client_cpu: list[float] = []
        self.es_cpu: list[float] = []

    def record(self, load: float, whole: float, cpu: float, es_cpu: float) -> None:
        self.load.append(load)
        self.whole.append(whole)
        self.client_cpu.append(cpu)
        self.es_cpu.append(es_cpu)


def rebuild_once(es: Any, settings: Any, side: Side) -> float:
    """One full rebuild (the job's path); returns the documents loaded."""
    from crontabber.store import connect
    from jobs.search_index import SymbolFileStore
    from search.indexer import BulkSettings, rebuild

    conn = connect(settings)
    es_before, cpu, start = es_cpu_seconds(es), time.process_time(), time.perf_counter()
    try:
        with SymbolFileStore(conn).snapshot() as source:
            result = rebuild(
                es,
                ALIAS,
                source.rows,
                keep=2,
                bulk=BulkSettings(chunk_size=CHUNK, threads=STREAMS),
                source_as_of=source.as_of,
            )
    finally:
        conn.close()
    whole, cpu = time.perf_counter() - start, time.process_time() - cpu
    side.record(
        whole - result.seconds + result.load_seconds, whole, cpu, es_cpu_seconds(es) - es_before
    )
    return result.documents


def encoded(settings: Any) -> tuple[int, list[bytes]]:
    """The rebuild's documents as bulk bodies of CHUNK documents, built once per run."""
    from crontabber.store import connect
    from jobs.search_index import SymbolFileStore
    from search.documents import bulk_bodies

    conn = connect(settings)
    try:
        with SymbolFileStore(conn).snapshot() as source:
            bodies = list(bulk_bodies(source.rows, CHUNK))
    finally:
        conn.close()
    return sum(count for count, _ in bodies), [body for _, body in bodies]


def post_all(urls: list[str], index: str, bodies: list[bytes]) -> None:
    """POST ``bodies`` to ``index``'s ``_bulk`` on STREAMS connections, as curl would (stream
    N to node N of ``urls``, round the list).

    Raises:
        RuntimeError: a request failed or a document was rejected.
    """
    queue: Iterator[bytes] = iter(bodies)
    lock = threading.Lock()
    errors: list[str] = []

    def stream(url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 9200)
        headers = {"Content-Type": "application/x-ndjson"}
        try:
            while not errors:
                with lock:
                    body = next(queue, None)
                if body is None:
                    return
                conn.request("POST", f"/{index}/_bulk?filter_path=errors", body, headers)
                answer = conn.getresponse().read()
                if b'"errors":false' not in answer:
                    errors.append(answer[:300].decode(errors="replace"))
        finally:
            conn.close()

    threads = [threading.Thread(target=stream, args=(urls[n % len(urls)],)) for n in range(STREAMS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"engine-alone load failed: {errors[0]}")


def engine_alone(
    es: Any, urls: list[str], documents: int, bodies: list[bytes], side: Side
) -> float:
    """The pre-encoded documents into a new index of the same mapping and load settings,
    then the rebuild's finish (settings restored, refresh, merge, the replicas the rebuild
    raises: one on a cluster, waited for); returns the documents."""
    from search.documents import index_body
    from search.indexer import Replicas

    name = f"{ALIAS}-engine-alone"
    es.indices.delete(index=name, ignore_unavailable=True)
    es.indices.create(index=name, **index_body())
    try:
        es_before, cpu, start = es_cpu_seconds(es), time.process_time(), time.perf_counter()
        post_all(urls, name, bodies)
        load = time.perf_counter() - start
        es.indices.put_settings(
            index=name,
            settings={"index": {"refresh_interval": None, "translog.durability": "request"}},
        )
        es.indices.refresh(index=name)
        es.options(request_timeout=3600).indices.forcemerge(
            index=name, max_num_segments=1, wait_for_completion=True
        )
        es.indices.refresh(index=name)
        counted = es.count(index=name)["count"]
        es.indices.put_settings(index=name, settings={"index": Replicas().settings()})
        es.options(request_timeout=900).cluster.health(
            index=name, wait_for_status="green", timeout="600s"
        )
        side.record(
            load,
            time.perf_counter() - start,
            time.process_time() - cpu,
            es_cpu_seconds(es) - es_before,
        )
    finally:
        es.indices.delete(index=name, ignore_unavailable=True)
    if counted != documents:
        raise RuntimeError(f"engine-alone index holds {counted} documents, not {documents}")
    return counted


def run(rounds: int, url: str | None = None, where: str = "") -> list[Comparison]:
    """The rounds against the Elasticsearch at ``url`` (default: ``ES_URL``, the single
    node); ``where`` names it in the results (the cluster's bench:
    :mod:`bench.bench_search_rebuild_cluster`). The profile runs on the single node only."""
    from search.client import es_url, make_es_client, node_urls
    from tests.fixtures.search_corpus import corpus

    es = make_es_client(url, request_timeout=120)
    settings = source_database(corpus())
    urls = node_urls(es_url(url))
    documents, bodies = encoded(settings)
    ours, engine = Side(), Side()
    load = os.getloadavg()[0]
    interleave(
        lambda: rebuild_once(es, settings, ours),
        lambda: engine_alone(es, urls, documents, bodies, engine),
        rounds,
        warmup=0,
    )
    bodies.clear()  # ~460 MB for 1M documents
    result = comparisons(documents, ours, engine, load, where)
    if not where:
        result[0].notes.append(profiled(es, settings))
    return result


def profiled(es: Any, settings: Any, top: int = 8) -> str:
    """Where ours spends the client's CPU: one rebuild (not merged, a throw-away alias)
    under cProfile, the main thread's top functions by their own time."""
    import cProfile
    import pstats

    from crontabber.store import connect
    from jobs.search_index import SymbolFileStore
    from search.indexer import BulkSettings, rebuild

    alias = f"{ALIAS}-profiled"
    conn = connect(settings)
    profile = cProfile.Profile(time.thread_time)
    cpu, thread = time.process_time(), time.thread_time()
    try:
        with SymbolFileStore(conn).snapshot() as source:
            profile.enable()
            rebuild(
                es,
                alias,
                source.rows,
                keep=0,
                merge=False,
                bulk=BulkSettings(chunk_size=CHUNK, threads=STREAMS),
            )
            profile.disable()
    finally:
        conn.close()
        es.indices.delete(index=f"{alias}-*", ignore_unavailable=True, allow_no_indices=True)
    cpu, thread = time.process_time() - cpu, time.thread_time() - thread
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values())
    ranked = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    items = "; ".join(
        f"{function if where == '~' else Path(where).name + ':' + function} {own / total:.0%}"
        for (where, _, function), (_, _, own, _, _) in ranked
    )
    return (
        f"profile of ours (cProfile, one more rebuild, not merged): client CPU {cpu:.1f} s "
        f"profiled, {thread:.1f} s of it the main thread; the main thread's own time: {items}"
    )


def comparisons(
    documents: int, ours: Side, engine: Side, load: float, where: str = ""
) -> list[Comparison]:
    """What a run of :func:`run` reports."""
    name = f"rebuild {documents:,} documents{where}"
    notes = [
        f"{documents} documents, {CHUNK}-document bulk requests on {STREAMS} streams both sides; "
        "ours: the job's path (snapshot, server-side cursor, bodies built "
        "by search.documents.bulk_lines, es.bulk), 'load' from the snapshot to the last "
        "acknowledged document, 'whole' to the alias swap (count check, refresh, merge into "
        "one segment, pruning); engine alone: the same bytes pre-encoded, posted by "
        "http.client, then the same refresh and merge",
        f"client CPU s per round, ours {_values(ours.client_cpu)}, engine alone "
        f"{_values(engine.client_cpu)}; Elasticsearch CPU s ours {_values(ours.es_cpu)}, "
        f"engine alone {_values(engine.es_cpu)}; wall s (whole) ours {_values(ours.whole)}, "
        f"engine alone {_values(engine.whole)}",
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end",
    ]
    label = "engine alone (pre-encoded NDJSON, http.client)"
    return [
        Comparison(
            name,
            "load throughput, share of the engine alone",
            "docs/s",
            Sample("ours", [documents / s for s in ours.load]),
            Sample(label, [documents / s for s in engine.load]),
            higher_is_better=True,
            goal="" if where else ">= 0.70x",
            notes=notes,
        ),
        Comparison(
            name,
            "wall time to a merged, searchable index",
            "s",
            Sample("ours (alias swapped)", ours.whole),
            Sample(label, engine.whole),
            higher_is_better=False,
            goal="" if where else "ours < 30 s (1M, quiet machine)",
        ),
        Comparison(
            name,
            "client CPU",
            "s",
            Sample("ours", ours.client_cpu),
            Sample(label, engine.client_cpu),
            higher_is_better=False,
        ),
        Comparison(
            name,
            "Elasticsearch CPU",
            "s",
            Sample("ours", ours.es_cpu),
            Sample(label, engine.es_cpu),
            higher_is_better=False,
        ),
    ]


def _values(values: list[float]) -> str:
    return ", ".join(f"{value:.1f}" for value in values)
