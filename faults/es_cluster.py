"""An Elasticsearch cluster losing a data node: ``scripts/services.sh start esc`` (3 nodes,
small heaps), the index rebuilt by the job's own code path with its default replicas (``0-1``:
one replica wherever a second node is), every client given the three nodes' URLs.

- **Under search load**: the node holding the live index's primary is killed (SIGKILL) while
  two threads search without pause for a few seconds; every query must be answered (the
  figure: failed queries, 0 with replicas). The node is started again; the seconds until the
  index is green again are a figure.
- **During a rebuild**: a random node is killed at a random point of a rebuild (the job's
  ``rebuild_from`` in a process of its own). The rebuild completes, or fails cleanly: one line,
  the alias still on one complete index, searches still answered. The node comes back, the
  shards recover (green), and the next rebuild succeeds; no partial index is left.

The source is :mod:`faults.elasticsearch`'s (~68,000 documents in ``faults_es``).
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import devservices
from faults import net
from faults.elasticsearch import ALIAS, alias_state, finish, rebuild, source
from faults.result import FaultResult

THROWS = 3  # per kind at scale 1.0
LOAD_SECONDS, KILL_AFTER = 8.0, 2.0


def run(scale: float) -> list[FaultResult]:
    from search.client import make_es_client

    net.services("start", "esc")
    try:
        urls = (
            devservices.current().env.get("SYMBOLS_ESC_URLS")
            or "http://127.0.0.1:9211,http://127.0.0.1:9212,http://127.0.0.1:9213"
        )
        es = make_es_client(urls, request_timeout=60)
        expected = source()
        code, err = finish(rebuild(urls))
        if code != 0:
            raise RuntimeError(f"the first rebuild on the cluster failed: {err.strip()[-300:]}")
        random = net.rng()
        return [
            _under_load(es, urls, expected, net.scaled(THROWS, scale)),
            _during_rebuild(es, urls, expected, net.scaled(THROWS, scale), random),
        ]
    finally:
        net.services("stop", "esc")


def _node_of_primary(es: Any) -> int:
    (row,) = [r for r in es.cat.shards(index=ALIAS, format="json") if r["prirep"] == "p"]
    return int(row["node"].rsplit("-", 1)[1])


def _green_again(es: Any, limit: float = 180.0) -> float | None:
    """Start the killed node again; the seconds until every index of the alias is green."""
    start = time.monotonic()
    net.services("start", "esc")
    while time.monotonic() - start < limit:
        if es.cluster.health(index=f"{ALIAS}-*")["status"] == "green":
            return time.monotonic() - start
        time.sleep(0.5)
    return None


def _under_load(es: Any, urls: str, expected: int, throws: int) -> FaultResult:
    from search.client import make_es_client
    from search.engine import Searcher

    result = FaultResult("a data node killed under search load (3 nodes, replicas 0-1)", throws, 0)
    answered = failed = 0
    recoveries: list[float] = []
    for _ in range(throws):
        searcher = Searcher(make_es_client(urls, request_timeout=10), ALIAS)
        stop = threading.Event()
        counts = {"answered": 0, "failed": 0}
        lock = threading.Lock()
        threads = [
            threading.Thread(target=_load, args=(searcher, stop, counts, lock), daemon=True)
            for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        time.sleep(KILL_AFTER)
        victim = _node_of_primary(es)
        net.services("kill", "esc", str(victim))
        time.sleep(LOAD_SECONDS - KILL_AFTER)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        answered += counts["answered"]
        failed += counts["failed"]
        recovered = _green_again(es)
        _, problem = alias_state(es, expected)
        if recovered is not None:
            recoveries.append(recovered)
        if counts["failed"] == 0 and recovered is not None and problem is None:
            result.converged += 1
        elif len(result.notes) < 5:
            result.notes.append(
                f"node {victim} killed: {counts['failed']} of "
                f"{sum(counts.values())} queries failed; green again: "
                f"{recovered}; {problem or 'alias complete'}"
            )
    result.lost = failed
    result.figures = {
        "queries answered": str(answered),
        "queries failed": str(failed),
        "seconds of load per throw (node killed after 2 s)": f"{LOAD_SECONDS:g}",
        "node back to green (median, max)": (
            f"{statistics.median(recoveries):.1f} s, {max(recoveries):.1f} s" if recoveries else "-"
        ),
    }
    return result


def _load(
    searcher: Any, stop: threading.Event, counts: dict[str, int], lock: threading.Lock
) -> None:
    """Search without pause until ``stop``, counting answered and failed queries."""
    while not stop.is_set():
        try:
            searcher.search("libxul.so", 5)
            key = "answered"
        except Exception:  # noqa: BLE001 - counted: the figure must be 0
            key = "failed"
        with lock:
            counts[key] += 1


def _during_rebuild(es: Any, urls: str, expected: int, throws: int, random: Any) -> FaultResult:
    from search.indexer import versions

    result = FaultResult("a data node killed during a rebuild (3 nodes, replicas 0-1)", throws, 0)
    completed = clean_failures = 0
    leftovers = 0
    recoveries: list[float] = []
    for _ in range(throws):
        before, _ = alias_state(es, expected)
        proc = rebuild(urls)
        time.sleep(random.uniform(0.5, 4.0))
        victim = random.randint(1, 3)
        landed = proc.poll() is None
        net.services("kill", "esc", str(victim))
        code, err = finish(proc)
        lines = err.strip().splitlines()
        after, problem = alias_state(es, expected)
        problems = [problem] if problem else []
        if code == 0:
            completed += 1
        elif len(lines) == 1 and after == before:
            clean_failures += 1
        else:
            problems.append(f"exit {code}, alias {before} -> {after}: {err.strip()[-200:]}")
        recovered = _green_again(es)
        if recovered is None:
            problems.append("the indices never became green again")
        else:
            recoveries.append(recovered)
        code, err = finish(rebuild(urls))  # with the node back: must succeed
        if code != 0:
            problems.append(f"the rebuild after recovery failed: {err.strip()[-200:]}")
        left = len(versions(es, ALIAS))
        leftovers += max(0, left - 2)
        if not landed:
            problems.append("the kill came after the rebuild had ended")
        if not problems:
            result.converged += 1
        elif len(result.notes) < 5:
            result.notes.append(f"node {victim}: " + "; ".join(problems))
    result.figures = {
        "rebuilds that completed despite the kill": str(completed),
        "rebuilds that failed cleanly (one line, the alias kept)": str(clean_failures),
        "versions left beyond keep": str(leftovers),
        "node back to green (median)": (
            f"{statistics.median(recoveries):.1f} s" if recoveries else "-"
        ),
    }
    return result
