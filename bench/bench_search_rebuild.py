"""Rebuild throughput: the rebuild job's code path over 1M symbol files vs one
index request per document (on a sample).

The source is a PostgreSQL database ``bench_search`` holding the contract
tables (``tests/fixtures/search_tables.sql``) with 1,000,000 symbol files: the
3,400 corpus names x 295 debug ids (+ 1 of each, uploaded twice), a tenth of
them with a missing-symbol row. It is built once and reused while it holds
that many rows. Ours: ``jobs.search_index.SymbolFileStore`` (server-side
cursor) -> ``search.indexer.rebuild`` (parallel_bulk, refresh_interval -1,
count check, refresh, alias swap, pruning) into alias ``bench-search-1m``,
which the latency benchmark then reads. Baseline: ``es.index()`` per document
for the first ``SAMPLE`` rows of the same stream into a throw-away index.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import Any

from .harness import Comparison, Sample, interleave
from .services import database

ROUNDS = 2
ALIAS = "bench-search-1m"
DBNAME = "bench_search"
VERSIONS = 295
SAMPLE = 2000
REPO = Path(__file__).resolve().parent.parent

POPULATE = """
CREATE TEMP TABLE names (name text PRIMARY KEY);
INSERT INTO names SELECT unnest(%(names)s::text[]);
INSERT INTO file_upload (key, size, created_at)
SELECT 'v1/' || name || '/' || upper(md5(name || '/' || v)) || '0/'
       || CASE WHEN name LIKE '%%.pdb' THEN left(name, -4) ELSE name END || '.sym',
       1000 + (v * 7919) %% 100000,
       '2026-01-01'::timestamptz + v * interval '1 hour'
FROM names CROSS JOIN generate_series(1, %(versions)s) AS v;
INSERT INTO file_upload (key, size, created_at)
SELECT key, size + 1, created_at + interval '1 day' FROM file_upload WHERE id %% 1000 = 0;
INSERT INTO missing_symbol (debug_file, debug_id, code_file, code_id, count)
SELECT split_part(key, '/', 2), split_part(key, '/', 3), '', '', 1 + id %% 50
FROM file_upload WHERE id %% 10 = 0;
ANALYZE;
"""


def source_database(names: list[str], dbname: str = DBNAME, versions: int = VERSIONS) -> Any:
    """Settings of a source database of ``versions`` rows per name (the cached 1M-row one
    by default; the fault suite's smaller one), built on first use and rebuilt when its
    row count differs."""
    from crontabber.store import connect

    admin = connect(database("postgres"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,))
        if not cur.fetchone():
            cur.execute(f"CREATE DATABASE {dbname}")
            cur.execute(f"ALTER DATABASE {dbname} SET search_path = search_fixture, public")
    admin.close()
    settings = database(dbname)
    conn = connect(settings)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute((REPO / "tests/fixtures/search_tables.sql").read_text())
        cur.execute("SELECT count(*) FROM search_fixture.file_upload")
        if cur.fetchone()[0] != len(names) * versions + len(names) * versions // 1000:
            cur.execute("TRUNCATE search_fixture.file_upload, search_fixture.missing_symbol")
            cur.execute(POPULATE, {"names": names, "versions": versions})
    conn.close()
    return settings


def rebuild_once(es: Any, settings: Any, stats: dict[str, list[float]]) -> float:
    """One full rebuild; returns docs/s and records the wall time."""
    from crontabber.store import connect
    from jobs.search_index import SymbolFileStore
    from search.indexer import rebuild

    conn = connect(settings)
    start = time.perf_counter()
    try:
        with SymbolFileStore(conn).snapshot() as source:
            result = rebuild(es, ALIAS, source.rows, source.row_count, keep=2,
                             source_as_of=source.as_of)
    finally:
        conn.close()
    seconds = time.perf_counter() - start
    stats.setdefault("seconds", []).append(seconds)
    stats.setdefault("documents", []).append(result.documents)
    return result.documents / seconds


def per_document(es: Any, settings: Any) -> float:
    """docs/s of one ``es.index()`` per document over the first SAMPLE rows.

    The rows are read before the clock starts: the source query sorts and
    groups all 1M rows before its first row arrives (about 2 s), a fixed cost
    that a 2,000-row sample would otherwise charge at 1M/2,000 times its
    weight (it more than halved the baseline's rate before 2026-11-22 07:35).
    The index is the one a naive loader would write to: the same mapping, the
    default refresh interval and translog durability (an fsync per request).
    """
    from crontabber.store import connect
    from jobs.search_index import SymbolFileStore
    from search.documents import index_body

    name = f"{ALIAS}-per-document"
    es.indices.delete(index=name, ignore_unavailable=True)
    body = index_body()  # the same mapping, with the default load settings
    body["settings"].pop("refresh_interval")
    body["settings"].pop("translog")
    es.indices.create(index=name, **body)
    conn = connect(settings)
    try:
        with SymbolFileStore(conn).snapshot() as source:
            sample = list(itertools.islice(source.rows, SAMPLE))
        start = time.perf_counter()
        for row in sample:
            es.index(index=name, id=row.doc_id, document=row.to_source())
        seconds = time.perf_counter() - start
    finally:
        conn.close()
        es.indices.delete(index=name, ignore_unavailable=True)
    return SAMPLE / seconds


def run(rounds: int) -> list[Comparison]:
    from search.client import make_es_client
    from tests.fixtures.search_corpus import corpus

    es = make_es_client(request_timeout=120)
    settings = source_database(corpus())
    stats: dict[str, list[float]] = {}
    load = os.getloadavg()[0]
    ours, baseline = interleave(lambda: rebuild_once(es, settings, stats),
                                lambda: per_document(es, settings), rounds, warmup=0)
    documents = int(stats["documents"][0])
    extrapolated = [documents / rate for rate in baseline]
    notes = [f"{documents} documents; whole rebuild (query, load, count check, refresh, alias "
             f"swap, pruning) took {', '.join(f'{s:.1f}' for s in stats['seconds'])} s; "
             f"per-document baseline on the first {SAMPLE} rows of the same stream, read before "
             f"its clock starts; load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} "
             "at the end"]
    return [
        Comparison("rebuild 1M documents", "throughput", "docs/s", Sample("ours (parallel_bulk)", ours),
                   Sample("one index request per document", baseline), higher_is_better=True,
                   goal=">= 150x", notes=notes),
        Comparison("rebuild 1M documents", "wall time, alias swap included", "s",
                   Sample("ours", stats["seconds"]),
                   Sample("per document (extrapolated from the sample)", extrapolated),
                   higher_is_better=False, goal="ours < 60 s"),
    ]
