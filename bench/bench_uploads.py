"""The upload job (issue #4) vs the seed's serial approach, on the same S3 server and archives.

- Baseline: download the archive from the inbox, ``zipfile.extractall`` to a temporary
  directory, then per file ``head_object``, stdlib ``gzip.compress`` (default level 9) and
  ``put_object``, serially (``python -m bench.bench_uploads baseline ...``).
- Ours: a worker draining a queue holding the one upload (what ``python -m jobs.uploads
  drain`` does, with the repository's crontabber.ini options).

Throughput is timed inside each child (ours: the drain; the baseline: download to last PUT),
so interpreter start and imports (about 1 s on this loaded machine, the same for both) are
not counted; the whole-process wall times are reported in the notes.

Both run as child processes (so peak RSS is each side's own), into a fresh symbols bucket
each round (every file is new), interleaved. Metric: MB/s of archive (archive bytes / wall
time). Also, for the same archive: the compute limit (isal inflate + isal level-1 deflate of
every member in a process pool on all cores, no I/O), the S3 limit (PUTs of the already
compressed objects at the best of several concurrencies) and the fraction of the slower
limit the job reaches; and scale-out: four distinct archives drained by 1, 2 and 4 ``drain``
processes at once (total throughput; each upload processed once).

The S3 server is warmed first (``warm_server``: at least 40 unmeasured drains, until
s3proxy's CPU per drain stops falling); just after its start it costs twice as much.

Archives are generated once (realistic .sym text: MODULE, INFO, FILE, FUNC, line and PUBLIC
records; many 272 KiB files plus two large ones) and cached in ``.services/cache/bench/``.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import statistics
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any, Callable

import devservices

from .harness import Comparison, Sample, interleave
from .services import cpu_seconds, fresh_database, s3proxy_pid

ROUNDS = 3
REPO = Path(__file__).resolve().parent.parent
CACHE = devservices.current().cache_dir / "bench"
MB = 1e6
# Uncompressed .sym text per archive: the generator's text deflates about 3.1:1 at level 6, as
# real dump_syms output does (tests/fixtures/uploads_archives.py). "v2": the first generator's
# text (random line numbers) deflated 2.8:1 and gzipped twice as fast as real text.
ARCHIVES = {
    "50 MB": ("uploads-50mb-v2.zip", 160_000_000, 1),
    "300 MB": ("uploads-300mb-v2.zip", 960_000_000, 2),
}
SCALE_OUT = [(f"uploads-scale-{n}-v2.zip", 64_000_000, 10 + n) for n in range(4)]
INBOX = "bench-uploads-inbox"
JOB = "--crontabber.class-ProcessUploadsCronApp."


def archive(name: str, text: int, seed: int) -> Path:
    sys.path.insert(0, str(REPO))
    from tests.fixtures.uploads_archives import generate_bench_archive

    path = CACHE / name
    if not path.exists():
        print(f"   generating {path} ({text / MB:.0f} MB of .sym text)", file=sys.stderr)
        generate_bench_archive(path, text, seed)
    return path


def _client(pool: int = 16) -> Any:
    from jobs.s3 import make_s3_client

    return make_s3_client(pool)


def _empty_bucket(client: Any, bucket: str) -> None:
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys})
    client.delete_bucket(Bucket=bucket)


def _child(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MiB) and stdout of one child process.

    The peak comes from GNU time (``%M``): this process's own wait4 would count,
    in a forked child's peak, the pages it shared with this large parent before exec.
    """
    import tempfile

    with (
        tempfile.TemporaryFile() as errors,
        tempfile.TemporaryFile() as output,
        tempfile.NamedTemporaryFile("r") as peak,
    ):
        start = time.perf_counter()
        proc = subprocess.Popen(
            ["/usr/bin/time", "-o", peak.name, "-f", "%M", *argv],
            env=env,
            cwd=REPO,
            stdout=output,
            stderr=errors,
        )
        status = proc.wait()
        elapsed = time.perf_counter() - start
        if status != 0:
            errors.seek(0)
            raise RuntimeError(f"{argv[:4]} failed: {errors.read().decode(errors='replace')}")
        output.seek(0)
        return elapsed, int(peak.read().split()[-1]) / 1024, output.read().decode()


class Bench:
    """A database and an inbox shared by the rounds."""

    def __init__(self) -> None:
        from crontabber.schema import ensure_schema, with_runner
        from crontabber.store import connect
        from jobs import SQL_DIR

        self.db = fresh_database("bench_uploads")
        self.conn = connect(self.db)
        ensure_schema(self.conn, with_runner([SQL_DIR]))  # the jobs' tables too (upload, ...)
        self.conn.autocommit = True
        self.client = _client()
        try:
            self.client.create_bucket(Bucket=INBOX)
        except Exception:  # already there from an earlier run
            pass
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "RESOURCE_POSTGRESQL_DBNAME": self.db.dbname,
        }

    def sql(self, query: str, params: Any = None) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else []

    def stage(self, path: Path) -> str:
        key = f"bench/{path.name}"
        self.client.upload_file(str(path), INBOX, key)
        return key

    def enqueue(self, key: str, path: Path) -> None:
        self.sql(
            "INSERT INTO upload (inbox_key, filename, size) VALUES (%s, %s, %s)",
            (key, path.name, path.stat().st_size),
        )

    def fresh_bucket(self) -> str:
        bucket = f"bench-symbols-{uuid.uuid4().hex[:10]}"
        self.client.create_bucket(Bucket=bucket)
        return bucket

    def drain_argv(self, bucket: str) -> list[str]:
        """A worker draining the queue, as ``python -m jobs.uploads drain`` with the
        repository's crontabber.ini options, timing the drain itself (see ``ours_main``)."""
        return [sys.executable, "-m", "bench.bench_uploads", "ours", INBOX, bucket]

    def ours(
        self, key: str, path: Path, memory: list[float], walls: list[float]
    ) -> Callable[[], float]:
        """MB/s of archive over the drain's time (claim to done, in the child)."""

        def measure() -> float:
            bucket = self.fresh_bucket()
            self.sql("DELETE FROM upload")
            self.enqueue(key, path)
            wall, rss, out = _child(self.drain_argv(bucket), self.env)
            ((status,),) = self.sql("SELECT status FROM upload")
            assert status == "done", status
            started, ended = map(float, out.split()[-2:])
            seconds = ended - started
            memory.append(rss)
            walls.append(wall)
            _empty_bucket(self.client, bucket)
            return path.stat().st_size / MB / float(seconds)

        return measure

    def baseline(
        self, key: str, path: Path, memory: list[float], walls: list[float]
    ) -> Callable[[], float]:
        """MB/s of archive over the baseline's processing time (download to last PUT)."""

        def measure() -> float:
            bucket = self.fresh_bucket()
            argv = [sys.executable, "-m", "bench.bench_uploads", "baseline", INBOX, key, bucket]
            wall, rss, out = _child(argv, self.env)
            memory.append(rss)
            walls.append(wall)
            _empty_bucket(self.client, bucket)
            return path.stat().st_size / MB / float(out.split()[-1])

        return measure


def baseline_main(inbox: str, key: str, bucket: str) -> None:
    """The seed's way: extract to disk, then HEAD, gzip and PUT each file serially."""
    import gzip
    import hashlib
    import tempfile

    from botocore.exceptions import ClientError

    client = _client(10)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "archive.zip"
        client.download_file(inbox, key, str(local))
        root = Path(tmp) / "extracted"
        zipfile.ZipFile(local).extractall(root)
        for file in sorted(p for p in root.rglob("*") if p.is_file()):
            name = f"v1/{file.relative_to(root).as_posix()}"
            content = file.read_bytes()
            md5 = hashlib.md5(content).hexdigest()
            try:
                meta = client.head_object(Bucket=bucket, Key=name)["Metadata"]
                if meta.get("original_md5_hash") == md5:
                    continue
            except ClientError:
                pass
            client.put_object(
                Bucket=bucket,
                Key=name,
                Body=gzip.compress(content),
                ContentEncoding="gzip",
                ContentType="text/plain",
                Metadata={"original_size": str(len(content)), "original_md5_hash": md5},
            )
    print(f"{time.perf_counter() - start:.6f}")


def ours_main(inbox: str, bucket: str) -> None:
    """Drain the queue like ``python -m jobs.uploads drain``; print start and end times."""
    from crontabber.config.job import load_job_config
    from crontabber.database import open_database
    from jobs.uploads import ProcessUploadsCronApp
    from jobs.uploads.worker import Worker

    config = load_job_config(
        ProcessUploadsCronApp,
        None,
        {f"{JOB[2:]}inbox_bucket": inbox, f"{JOB[2:]}symbols_bucket": bucket},
    )
    worker = Worker.from_config(config, open_database(config, "bench"))
    started = time.time()
    worker.drain()
    print(f"{started:.6f} {time.time():.6f}")


@functools.lru_cache(maxsize=None)
def _members(path: str) -> dict[str, zipfile.ZipInfo]:
    """The archive's directory, read once per worker process (reading it per member cost
    the 300 MB archive's 1,725 members ~8 s, a third of what was measured as compute)."""
    with zipfile.ZipFile(path) as zipped:
        return {info.filename: info for info in zipped.infolist()}


def _recompress(args: tuple[str, str]) -> int:
    from jobs.uploads import archive as members

    path, name = args
    return len(members.gzipped(Path(path), _members(path)[name], 1, reuse=False))


def compute_limit(path: Path) -> float:
    """MB/s of archive: isal inflate + level-1 deflate of every member on all cores, no I/O."""
    with zipfile.ZipFile(path) as zipped:
        infos = sorted(zipped.infolist(), key=lambda info: -info.file_size)  # big ones first
    jobs = [(str(path), info.filename) for info in infos]
    start = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(_recompress, jobs))
    return path.stat().st_size / MB / (time.perf_counter() - start)


def s3_limit(bench: Bench, path: Path) -> tuple[float, int]:
    """MB/s of archive: PUTs of the already-compressed objects, best of several concurrencies."""
    from jobs.uploads import archive as members
    from jobs.uploads.storage import make_client

    with zipfile.ZipFile(path) as zipped:
        bodies = [
            (f"v1/{info.filename}", members.gzipped(path, info, 1)) for info in zipped.infolist()
        ]
    best = (0.0, 0)
    for concurrency in (4, 8, 16):
        bucket = bench.fresh_bucket()
        client = make_client(concurrency)  # the job's client settings
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            # used at once, within this iteration
            list(
                pool.map(
                    lambda kb, client=client, bucket=bucket: client.put_object(
                        Bucket=bucket, Key=kb[0], Body=kb[1], ContentEncoding="gzip"
                    ),
                    bodies,
                )
            )
        rate = path.stat().st_size / MB / (time.perf_counter() - start)
        best = max(best, (rate, concurrency))
        _empty_bucket(bench.client, bucket)
    return best


def scale_out(bench: Bench, processes: int, staged: list[tuple[str, Path]]) -> tuple[float, float]:
    """Total MB/s of four archives drained by ``processes`` drain processes started at once:
    over the queue's processing span (first claim to last completion) and over the wall
    time of the processes (with interpreter start)."""
    bucket = bench.fresh_bucket()
    bench.sql("DELETE FROM upload")
    for key, path in staged:
        bench.enqueue(key, path)
    start = time.perf_counter()
    children = [
        subprocess.Popen(
            bench.drain_argv(bucket), env=bench.env, cwd=REPO, stdout=subprocess.PIPE, text=True
        )
        for _ in range(processes)
    ]
    times = [child.communicate()[0].split() for child in children]
    assert all(child.returncode == 0 for child in children)
    elapsed = time.perf_counter() - start
    span = max(float(t[1]) for t in times) - min(float(t[0]) for t in times)
    rows = bench.sql("SELECT status, attempts FROM upload")
    assert rows == [("done", 1)] * len(staged), rows  # each processed once
    dupes = bench.sql("SELECT count(*) - count(DISTINCT key) FROM file_upload")
    assert dupes == [(0,)], dupes
    _empty_bucket(bench.client, bucket)
    total = sum(path.stat().st_size for _, path in staged) / MB
    return total / span, total / elapsed


def warm_server(
    bench: Bench, key: str, path: Path, least: int = 40, window: int = 10, most: int = 100
) -> str:
    """Drain the archive, unmeasured, before measuring; return a note saying how it went.

    s3proxy's CPU per drain of the 50 MB archive moves a lot over its life on this host:
    2.6-2.9 s just after a start, 0.8-2.0 s later, falling over some runs (its JIT) and
    rising over others (not GC: 0.3 s in all), which moved the ratio by up to a third
    depending on what had run before. So the server is past its start whatever ran before:
    at least ``least`` drains, then until the median of the last ``window`` drains is no
    better than 97% of the window before (one drain varies by +-20%), at most ``most``.
    """
    server = s3proxy_pid()
    if server is None:
        return "server warm-up: s3proxy's pid not found, none done"
    drain = bench.ours(key, path, [], [])
    costs: list[float] = []
    start = time.perf_counter()
    while len(costs) < most:
        before = cpu_seconds(server)
        drain()
        costs.append(cpu_seconds(server) - before)
        if len(costs) >= max(least, 2 * window) and statistics.median(
            costs[-window:]
        ) > 0.97 * statistics.median(costs[-2 * window : -window]):
            break
    first, last = (statistics.median(part) for part in (costs[:window], costs[-window:]))
    return (
        f"server warm-up: {len(costs)} unmeasured drains of the 50 MB archive in "
        f"{time.perf_counter() - start:.0f} s; s3proxy CPU per drain (median of "
        f"{window}) {first:.2f} s at first, {last:.2f} s at the end"
    )


def run(rounds: int) -> list[Comparison]:
    bench = Bench()
    comparisons: list[Comparison] = []
    warmed = None
    for label, (name, text, seed) in ARCHIVES.items():
        path = archive(name, text, seed)
        key = bench.stage(path)
        if warmed is None:
            warmed = warm_server(bench, key, path)
            print(f"   {warmed}", file=sys.stderr)
        with zipfile.ZipFile(path) as zipped:
            infos = zipped.infolist()
        shape = (
            f"{label} archive: {path.stat().st_size / MB:.0f} MB, {len(infos)} members, "
            f"{sum(i.file_size for i in infos) / MB:.0f} MB of .sym text"
        )
        memory: dict[str, list[float]] = {"ours": [], "baseline": []}
        walls: dict[str, list[float]] = {"ours": [], "baseline": []}
        ours, base = interleave(
            bench.ours(key, path, memory["ours"], walls["ours"]),
            bench.baseline(key, path, memory["baseline"], walls["baseline"]),
            rounds,
            warmup=1 if text < 300_000_000 else 0,
        )
        skip = len(memory["ours"]) - rounds
        compute = compute_limit(path)
        s3, concurrency = s3_limit(bench, path)
        slower = min(compute, s3)
        notes = (
            [shape]
            + ([warmed] if label == "50 MB" else [])
            + [
                f"{label}: compute limit {compute:.1f} MB/s (isal inflate + level-1 "
                f"deflate, {os.cpu_count()} processes, no I/O); S3 limit {s3:.1f} MB/s (PUTs of "
                f"the compressed objects, best concurrency {concurrency}); the job reaches "
                f"{Sample('x', ours).median / slower:.0%} of the slower one.",
                f"{label}: whole child process wall time incl. interpreter start, imports and "
                f"schema check (median s): ours {Sample('x', walls['ours']).median:.2f}, "
                f"baseline {Sample('x', walls['baseline']).median:.2f}; as MB/s of archive: "
                f"ours {path.stat().st_size / MB / Sample('x', walls['ours']).median:.1f}, "
                f"baseline {path.stat().st_size / MB / Sample('x', walls['baseline']).median:.1f}",
            ]
        )
        comparisons += [
            Comparison(
                f"{label} archive",
                "throughput",
                "MB/s of archive",
                Sample("ours", ours),
                Sample("extractall + head + gzip + put, serial", base),
                higher_is_better=True,
                goal=">= 10x",
                notes=notes,
            ),
            Comparison(
                f"{label} archive",
                "peak RSS",
                "MiB",
                Sample("ours", memory["ours"][skip:]),
                Sample("baseline", memory["baseline"][skip:]),
                higher_is_better=False,
                goal="bounded (not proportional to the archive)",
            ),
            Comparison(
                f"{label} archive",
                "job vs slower limit",
                "MB/s",
                Sample("ours", ours),
                Sample("min(compute, S3) limit", [slower]),
                higher_is_better=True,
                goal="fraction reported",
            ),
        ]
    staged = [(bench.stage(p), p) for p in (archive(*spec) for spec in SCALE_OUT)]
    results = {n: [scale_out(bench, n, staged) for _ in range(rounds)] for n in (1, 2, 4)}
    for processes in (2, 4):
        comparisons.append(
            Comparison(
                "scale-out, 4 archives of ~20 MB",
                f"total throughput, {processes} processes",
                "MB/s",
                Sample(f"{processes} processes", [r[0] for r in results[processes]]),
                Sample("1 process", [r[0] for r in results[1]]),
                higher_is_better=True,
                goal="reported; no upload twice",
                notes=[
                    f"scale-out: {processes} `drain` processes started at once on "
                    f"{os.cpu_count()} cores, throughput from the first drain's start to the "
                    "last drain's end; "
                    "every upload done with attempts = 1, no key recorded twice (asserted). "
                    "Over the processes' wall time (with interpreter start), median MB/s: "
                    + ", ".join(
                        f"{n} process(es) {Sample('x', [r[1] for r in results[n]]).median:.1f}"
                        for n in (1, 2, 4)
                    )
                ],
            )
        )
    bench.conn.close()
    return comparisons


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "baseline":
    baseline_main(*sys.argv[2:5])
if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "ours":
    ours_main(*sys.argv[2:4])
