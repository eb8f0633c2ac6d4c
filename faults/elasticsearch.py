"""Elasticsearch down before and during a rebuild, and the search endpoint meanwhile.

The rebuild (the job's own work, ``jobs.search_index.rebuild_from``,
in a subprocess of its own, ``python -m faults.elasticsearch rebuild``) and the search
endpoint (gunicorn, as README tells production) reach Elasticsearch through Toxiproxy;
disabling the proxy cuts Elasticsearch off (connections refused, open ones closed), at
once and as often as wanted. Once per module run Elasticsearch is also really stopped and
started (``scripts/services.sh stop/start es``, this checkout's own instance).

Checked by itself after each throw, from Elasticsearch directly (never through the proxy):
the alias still points at the previous complete index (its ``_count`` equals the source's
row count); the endpoint answered 503 with a JSON ``error`` (no traceback) while
Elasticsearch was down and answers 200 again by itself once it is back (the seconds it
took are a figure); the next rebuild succeeds and moves the alias; indices left behind by
the cut builds are counted.

The source is the search benchmarks' generator (``tests.fixtures.search_source.POPULATE``)
at a reduced size in a database of its own (``faults_es``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import devservices
from faults import net
from faults.result import FaultResult

DBNAME = "faults_es"
ALIAS = "faults-es"
VERSIONS = 20  # x 3,400 names: ~68,000 documents, a rebuild of a few seconds
THROWS = 5  # per kind at scale 1.0


def source() -> int:
    """Build the source database (once; reused while it holds the same rows): its row count."""
    from tests.fixtures.search_corpus import corpus
    from tests.fixtures.search_source import source_database

    source_database(corpus(), DBNAME, VERSIONS)
    return rebuild_count()


def rebuild_count() -> int:
    from crontabber.store import connect
    from devservices.databases import database
    from jobs.search_index import SymbolFileStore

    conn = connect(database(DBNAME))
    try:
        return SymbolFileStore(conn).count()
    finally:
        conn.close()


def rebuild_main(es_url: str) -> int:
    """``python -m faults.elasticsearch rebuild ES_URL``: one rebuild, the job's code path."""
    from crontabber.failures import describe
    from crontabber.store import connect
    from devservices.databases import database
    from jobs.search_index import rebuild_from
    from search.indexer import BulkSettings

    conn = connect(database(DBNAME))
    try:
        result = rebuild_from(
            conn, es_url, ALIAS, keep=2, bulk=BulkSettings(chunk_size=5000, threads=2)
        )
    except Exception as exc:  # the runner's own one-line summary of a failure
        print(describe(exc), file=sys.stderr)
        return 1
    finally:
        conn.close()
    print(result.index)
    return 0


class Endpoint:
    """The search endpoint under gunicorn (2 workers), reading ``ALIAS`` through ``es_url``."""

    def __init__(self, es_url: str) -> None:
        self.port = net.free_port()
        self.log = open(net.STATE / "faults" / "es-gunicorn.log", "wb")
        self.proc = subprocess.Popen(
            [
                net.PYTHON,
                "-m",
                "gunicorn",
                "--no-control-socket",  # not the shared ~/.gunicorn/gunicorn.ctl
                "-w",
                "2",
                "-b",
                f"127.0.0.1:{self.port}",
                "search.server:application",
            ],
            cwd=net.REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={
                **net.os.environ,
                "PYTHONPATH": str(net.REPO),
                "ES_URL": es_url,
                "SEARCH_ALIAS": ALIAS,
            },
        )
        net.wait_port(self.port, 30)

    def search(self) -> tuple[int, Any]:
        return net.http_json("GET", f"http://127.0.0.1:{self.port}/search?q=xul", timeout=60)

    def recovery(self, limit: float = 60) -> float | None:
        """Seconds until a search answers 200 again (None: not within ``limit``)."""
        start = time.monotonic()
        while time.monotonic() - start < limit:
            if self.search()[0] == 200:
                return time.monotonic() - start
            time.sleep(0.2)
        return None

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def check_503(endpoint: Endpoint) -> str | None:
    """None if a search answers 503 with a JSON error and no traceback; else the problem."""
    status, body = endpoint.search()
    if status != 503 or not isinstance(body, dict) or "error" not in body:
        return f"search while Elasticsearch is down: {status} {str(body)[:200]}"
    if "Traceback" in str(body):
        return "a traceback in the 503's body"
    return None


def alias_state(es: Any, expected: int) -> tuple[str | None, str | None]:
    """(the aliased index, a problem or None): one index behind the alias, complete."""
    from search.indexer import aliased

    es.indices.refresh(index=f"{ALIAS}-*")
    names = aliased(es, ALIAS)
    if len(names) != 1:
        return None, f"alias {ALIAS} on {names}"
    count = es.count(index=ALIAS)["count"]
    if count != expected:
        return names[0], f"alias {ALIAS} -> {names[0]} holds {count} of {expected} documents"
    return names[0], None


def rebuild(es_url: str) -> subprocess.Popen:
    return subprocess.Popen(
        [net.PYTHON, "-m", "faults.elasticsearch", "rebuild", es_url],
        cwd=net.REPO,
        env={**net.os.environ, "PYTHONPATH": str(net.REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    _, err = proc.communicate(timeout=600)
    return proc.returncode, err


def run(scale: float) -> list[FaultResult]:
    from search.client import make_es_client
    from search.indexer import versions

    tools = net.tools()
    (net.STATE / "faults").mkdir(parents=True, exist_ok=True)
    es_port = devservices.current().es_port
    direct = f"http://127.0.0.1:{es_port}"
    es = make_es_client(direct, request_timeout=120)
    expected = source()
    if finish(rebuild(direct))[0] != 0:
        raise RuntimeError("the first rebuild failed with Elasticsearch up")
    toxi = net.Toxiproxy(tools)
    port = toxi.proxy("es", es_port)
    via = f"http://127.0.0.1:{port}"
    endpoint = Endpoint(via)
    random = net.rng()
    before = FaultResult(
        "Elasticsearch down before a rebuild (Toxiproxy cut)", net.scaled(THROWS, scale), 0
    )
    during = FaultResult(
        "Elasticsearch down during a rebuild (Toxiproxy cut at a random point)",
        net.scaled(THROWS, scale),
        0,
    )
    stopped = FaultResult(
        "Elasticsearch stopped during a rebuild (services.sh stop/start es)", 1, 0
    )
    recoveries: list[float] = []
    build_seconds: list[float] = []
    leftovers = 0
    lines: set[str] = set()  # one-line failures that do not name the address
    try:
        if endpoint.recovery() is None:
            raise RuntimeError("the endpoint does not answer with Elasticsearch up")

        def throw(result: FaultResult, cut_after: float | None, real_stop: bool) -> None:
            nonlocal leftovers
            previous, problem = alias_state(es, expected)
            notes: list[str] = [problem] if problem else []
            proc = None
            while cut_after is not None:  # the cut must land while the build runs
                proc = rebuild(via)
                time.sleep(cut_after)
                if proc.poll() is None:
                    break
                finish(proc)  # it finished first: a shorter delay, on a new build
                cut_after /= 2
                previous, problem = alias_state(es, expected)
            if real_stop:
                net.services("stop", "es")
            else:
                toxi.enable("es", False)
            if proc is None:
                proc = rebuild(via)
            code, err = finish(proc)
            if code == 0:
                notes.append("a rebuild succeeded with Elasticsearch down")
            elif (
                "Elasticsearch" not in (err.strip().splitlines() or [""])[-1] or "Traceback" in err
            ):
                notes.append(
                    "the failed rebuild does not end with one line naming Elasticsearch: "
                    f"{err.strip()[-300:]!r}"
                )
            elif f":{port}" not in err and f":{es_port}" not in err:
                lines.add(err.strip().splitlines()[-1])
            notes += [p for p in [check_503(endpoint)] if p]
            if real_stop:
                net.services("start", "es")
            else:
                toxi.enable("es", True)
            seconds = endpoint.recovery()
            if seconds is None:
                notes.append("the endpoint did not recover within 60 s")
            else:
                recoveries.append(seconds)
            now, problem = alias_state(es, expected)
            if problem or now != previous:
                notes.append(problem or f"the alias moved from {previous} to {now}")
            start = time.monotonic()
            code, err = finish(rebuild(via))
            build_seconds.append(time.monotonic() - start)
            after, problem = alias_state(es, expected)
            if code != 0 or problem or after == previous:
                notes.append(
                    f"the rebuild after recovery: exit {code}, {problem or after}; {err[:200]}"
                )
            left = [v for v in versions(es, ALIAS) if v != after]
            leftovers = max(leftovers, len(left) - 1)  # keep=2: the previous one stays
            result.converged += not notes
            result.notes += notes

        for _ in range(before.thrown):
            throw(before, None, False)
        for _ in range(during.thrown):
            limit = max(
                0.3,
                (sorted(build_seconds)[len(build_seconds) // 2] if build_seconds else 3.0) * 0.8,
            )
            throw(during, random.uniform(0.2, limit), False)
        throw(stopped, random.uniform(0.2, 2.0), True)
    finally:
        endpoint.close()
        toxi.close()
    figures = {
        "documents": str(expected),
        "endpoint back to 200 after Elasticsearch returns": f"max {max(recoveries):.1f} s"
        if recoveries
        else "n/a",
        "rebuild": f"{min(build_seconds):.1f}-{max(build_seconds):.1f} s"
        if build_seconds
        else "n/a",
    }
    for result in (before, during, stopped):
        result.figures.update(figures)
    if leftovers:
        during.notes.append(
            f"up to {leftovers} index(es) of cut builds left beside the alias's "
            "and the previous one until later rebuilds prune them"
        )
    during.figures["cut builds' indices left over"] = str(leftovers)
    stopped.notes += [f"the failure line names no address: {line!r}" for line in sorted(lines)]
    return [before, during, stopped]


if __name__ == "__main__":
    if sys.argv[1:2] == ["rebuild"]:
        sys.exit(rebuild_main(sys.argv[2]))
    sys.exit("usage: python -m faults.elasticsearch rebuild ES_URL")
