"""Latency of ``GET /search`` over the 1M-document index with 4 concurrent clients.

Ours: ``python -m search.server`` (``search.engine``). Baseline: the seed's
algorithm as written (``bench_search_quality.SeedSearcher``, two round trips,
three when the phrase finds nothing) behind the same WSGI app and server.
Both serve alias ``bench-search-1m`` (built by ``bench_search_rebuild``; built
here if missing) from their own process, on the same machine as Elasticsearch.
Each round, 4 client threads send the same 240 queries (120 one-edit typos,
60 two-edit typos, 30 exact names, 30 debug ids of the corpus, shuffled) to
one server, then to the other (the order alternates); a round's value is the
p99 (and p50) of its 240 request latencies, measured at the client. Before
them, the two take turns for 150 s unmeasured: right after Elasticsearch
starts its search path is several times slower until its JVM has compiled it.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

from tests.fixtures.search_source import queries

from .harness import Comparison, Sample, interleave

ROUNDS = 5
CLIENTS = 4
WARM_UP_SECONDS = 150
REPO = Path(__file__).resolve().parent.parent
ALIAS = "bench-search-1m"


def serve_seed(port: int) -> None:
    """Serve the seed's algorithm behind our WSGI app (run in a subprocess)."""
    from bench.bench_search_quality import SeedSearcher
    from search.client import make_es_client
    from search.engine import Hit, SearchResult, check_query
    from search.server import SearchApp, make

    class SeedAdapter:
        def __init__(self) -> None:
            self.es = make_es_client(request_timeout=10)
            self.index = ALIAS
            self.seed = SeedSearcher(self.es, ALIAS)

        def search(self, query: str, size: int = 10) -> SearchResult:
            text = check_query(query, size)
            hits = [
                Hit(
                    h["_source"]["debug_file"],
                    h["_source"]["debug_id"],
                    h["_source"]["filename"],
                    h["_source"].get("code_file"),
                    h["_source"].get("code_id"),
                    h["_score"],
                    "",
                )
                for h in self.seed.hits(text, size)
            ]
            return SearchResult(text, [], len(hits), hits)

    make("127.0.0.1", port, SearchApp(SeedAdapter())).serve_forever()  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(argv: list[str], port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "SEARCH_ALIAS": ALIAS}
    proc = subprocess.Popen(
        argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    for _ in range(200):
        try:
            if request(port, "/__lbheartbeat__")[0] == 200:
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{argv} did not start")


def request(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def round_(port: int, texts: list[str], p50s: list[float]) -> float:
    """Send ``texts`` from 4 threads; record p50, return p99 (ms)."""
    latencies: list[float] = []
    lock = threading.Lock()
    work = list(texts)

    def client() -> None:
        while True:
            with lock:
                if not work:
                    return
                text = work.pop()
            path = "/search?" + urllib.parse.urlencode({"q": text, "size": 10})
            begin = time.perf_counter()
            status, body = request(port, path)
            elapsed = (time.perf_counter() - begin) * 1000
            if status != 200:
                raise RuntimeError(f"{path}: {status} {body[:200]!r}")
            with lock:
                latencies.append(elapsed)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if len(latencies) != len(texts):
        raise RuntimeError("a client failed")
    cuts = statistics.quantiles(latencies, n=100)
    p50s.append(cuts[49])
    return cuts[98]


def run(rounds: int) -> list[Comparison]:
    from search.client import make_es_client

    es = make_es_client(request_timeout=120)
    if not es.indices.exists_alias(name=ALIAS):
        from . import bench_search_rebuild

        bench_search_rebuild.run(1)
    documents = es.count(index=ALIAS)["count"]
    texts = queries()
    ours_port, seed_port = free_port(), free_port()
    servers = [
        start([sys.executable, "-m", "search.server", "--port", str(ours_port)], ours_port),
        start(
            [
                sys.executable,
                "-c",
                f"from bench.bench_search_latency import serve_seed; serve_seed({seed_port})",
            ],
            seed_port,
        ),
    ]
    p50: dict[str, list[float]] = {"ours": [], "seed": []}
    load = os.getloadavg()[0]
    try:
        # Elasticsearch's JVM compiles its search path for minutes after it starts
        # (docs/faults.md, search_load): both servers take turns until WARM_UP_SECONDS
        # have passed, then the measured rounds (after interleave's own warm-up round).
        deadline = time.monotonic() + WARM_UP_SECONDS
        while time.monotonic() < deadline:
            round_(ours_port, texts, p50["ours"])
            round_(seed_port, texts, p50["seed"])
        ours, seed = interleave(
            lambda: round_(ours_port, texts, p50["ours"]),
            lambda: round_(seed_port, texts, p50["seed"]),
            rounds,
        )
    finally:
        for proc in servers:
            proc.terminate()
            proc.wait(timeout=20)
    skip = len(p50["ours"]) - rounds  # warm-up rounds
    notes = [
        f"{documents} documents, {len(texts)} queries per round from {CLIENTS} clients; "
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
        "(2 cores shared with Elasticsearch, PostgreSQL and other engineers' runs)",
        f"sample queries: {json.dumps(texts[:4])}",
    ]
    label = "seed as written (two round trips)"
    return [
        Comparison(
            "/search, 1M documents, 4 clients",
            "p99 latency",
            "ms",
            Sample("ours", ours),
            Sample(label, seed),
            higher_is_better=False,
            goal="ours p99 <= 30 ms",
            notes=notes,
        ),
        Comparison(
            "/search, 1M documents, 4 clients",
            "p50 latency",
            "ms",
            Sample("ours", p50["ours"][skip:]),
            Sample(label, p50["seed"][skip:]),
            higher_is_better=False,
        ),
    ]
