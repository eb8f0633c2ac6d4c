"""S3 faults between the upload job and the S3 server, through real proxies.

The job (``process-uploads``, run by the real runner) talks to S3 through Toxiproxy
(connection resets, latency, timeouts, bandwidth limits) or through mitmproxy as a reverse
proxy whose addon answers a share of the requests with 500 ``InternalError`` / 503
``SlowDown`` (``AWS_ENDPOINT_URL_S3`` points the job at the proxy). Each throw queues a
few fresh archives (one has a member large enough for a multipart upload), runs the job
with the fault on, then without it until the queue is drained, and checks by itself:

- transient faults: the first run already publishes everything (retries absorb them);
- lasting faults (the proxy refusing connections, every request answered 503): the run
  fails (exit code) with one line on stderr naming S3 and the proxy's address, no upload
  is ``done``, no multipart upload is left open; the next run without the fault converges;
- always, at the end: every upload ``done``; the bucket, listed here, holds exactly the
  archives' members (gzipped ``.sym`` decompressed) byte for byte, each key once.
"""

from __future__ import annotations

import gzip
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

import devservices
from faults import net
from faults.result import FaultResult

BUCKET = "faults-s3"
DBNAME = "faults_s3"
MiB = 1024 * 1024
# per kind at scale 1.0; a lasting fault's run costs ~1 minute of botocore's retries
TRANSIENT_THROWS = 5
LASTING_THROWS = 2


def options(max_attempts: int = 5, bucket: str = BUCKET) -> dict[str, Any]:
    job = "ProcessUploadsCronApp."
    return {
        f"{job}inbox_bucket": bucket,
        f"{job}symbols_bucket": bucket,
        f"{job}retry_delay_seconds": 0,
        f"{job}max_attempts": max_attempts,
        f"{job}multipart_threshold": 5 * MiB,
        f"{job}part_size": 5 * MiB,
        f"{job}concurrency": 4,
    }


class Bench:
    """The S3 client, the database and the archives of one module run."""

    def __init__(self, work: Path, bucket: str = BUCKET, dbname: str = DBNAME) -> None:
        from jobs.s3 import ensure_bucket, make_s3_client

        self.work = work
        self.bucket = bucket
        self.env = net.fresh_database(dbname)
        self.client = make_s3_client()  # straight to the S3 server, never through a proxy
        ensure_bucket(self.client, bucket)
        self.empty_bucket()
        self.expected: dict[str, bytes] = {}  # key -> member bytes, over every archive queued
        self.serial = 0

    def empty_bucket(self) -> None:
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            for item in page.get("Contents", []):
                self.client.delete_object(Bucket=self.bucket, Key=item["Key"])

    def queue(
        self, count: int, big: bool, extra: list[tuple[str, bytes]] | None = None
    ) -> list[int]:
        """Queue ``count`` new archives (the first with a 6 MiB binary member, a multipart
        upload, when ``big``; ``extra`` members in each); remember what each member must
        become."""
        from crontabber.store import connect
        from jobs.uploads.commands import enqueue_archive
        from jobs.uploads.store import UploadStore
        from tests.fixtures.uploads_archives import debug_id, symbol_members, write_zip

        conn = connect(_settings(self.env))
        conn.autocommit = True
        ids = []
        try:
            for n in range(count):
                self.serial += 1
                members = symbol_members(6, 20_000, seed=self.serial, prefix=f"f{self.serial}x")
                members += [(f"f{self.serial}{name}", data) for name, data in extra or []]
                if big and n == 0:
                    members.append(
                        (
                            f"f{self.serial}.dll/{debug_id(self.serial)}/f{self.serial}.dl_",
                            os.urandom(6 * MiB),
                        )
                    )
                path = write_zip(self.work / f"{self.serial}.zip", members)
                ids.append(
                    enqueue_archive(
                        UploadStore(conn), self.client, self.bucket, "inbox/", path, "faults"
                    )
                )
                for name, data in members:
                    self.expected[f"v1/{name}"] = data
                path.unlink()
        finally:
            conn.close()
        return ids

    def statuses(self) -> dict[int, str]:
        from crontabber.store import connect

        conn = connect(_settings(self.env))
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT id, status FROM upload ORDER BY id")
                return {int(i): str(s) for i, s in cur.fetchall()}
        finally:
            conn.close()

    def check_bucket(self) -> tuple[int, int, list[str]]:
        """(lost, duplicated, problems): the bucket listed and read here, against every
        member queued so far; open multipart uploads are problems."""
        seen: dict[str, int] = {}
        problems = []
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix="v1/"
        ):
            for item in page.get("Contents", []):
                seen[item["Key"]] = seen.get(item["Key"], 0) + 1
        lost = 0
        for key, data in self.expected.items():
            if key not in seen:
                lost += 1
                continue
            response = self.client.get_object(Bucket=self.bucket, Key=key)
            body = response["Body"].read()
            if response.get("ContentEncoding") == "gzip":
                body = gzip.decompress(body)
            if body != data:
                lost += 1
                problems.append(f"{key}: bytes differ")
        problems += [f"{key}: not from any archive" for key in seen if key not in self.expected]
        open_uploads = self.client.list_multipart_uploads(Bucket=self.bucket).get("Uploads", [])
        problems += [f"open multipart upload of {u['Key']}" for u in open_uploads]
        return lost, sum(n - 1 for n in seen.values()), problems


def _settings(env: dict[str, str]) -> Any:
    from devservices.databases import database

    return database(env["RESOURCE_POSTGRESQL_DBNAME"])


def throw(
    bench: Bench,
    fault: str,
    endpoint: str,
    during: Callable[[], None] | None,
    lasting: bool,
    needle: str,
) -> tuple[bool, int, int, list[str], float]:
    """One throw: queue, run with the fault, then without it until drained; check.

    Returns (converged, lost, duplicated, notes, first run's seconds)."""
    ids = bench.queue(3, big=True)
    env = {**bench.env, "AWS_ENDPOINT_URL_S3": endpoint}
    side = threading.Thread(target=during) if during else None
    if side:
        side.start()
    first = net.run_job("process-uploads", options(), env)
    if side:
        side.join()
    notes: list[str] = []
    statuses = bench.statuses()
    ok = True
    if lasting:
        lines = net.one_line_errors(first.stderr, needle)
        notes += [f"the run's line: {line.strip()[:200]}" for line in lines[-1:]]
        if first.returncode == 0 or not lines:
            ok = False
            notes.append(
                f"{fault}: the run did not fail with a line naming {needle!r} (exit "
                f"{first.returncode})"
            )
        if "Traceback" in first.stderr:
            ok = False
            notes.append(f"{fault}: a traceback on stderr")
        if any(statuses[i] == "done" for i in ids):
            ok = False
            notes.append(f"{fault}: an upload was done through a lasting fault")
        _, _, problems = bench.check_bucket()
        if problems:
            ok = False
            notes += [f"{fault}, during: {p}" for p in problems[:3]]
    elif first.returncode != 0 or any(statuses[i] != "done" for i in ids):
        ok = False
        notes.append(
            f"{fault}: not absorbed by retries (exit {first.returncode}, "
            f"{sorted(set(statuses[i] for i in ids))}): "
            f"{first.stderr.strip().splitlines()[-1:]}"
        )
    for _ in range(3):  # the fault is off: reruns converge
        if all(s == "done" for s in bench.statuses().values()):
            break
        net.run_job("process-uploads", options(), bench.env)
    statuses = bench.statuses()
    lost, duplicated, problems = bench.check_bucket()
    converged = all(s == "done" for s in statuses.values()) and not problems and lost == 0
    notes += [f"{fault}: {p}" for p in problems[:3]]
    return ok and converged, lost, duplicated, notes, first.seconds


def run(scale: float) -> list[FaultResult]:
    tools = net.tools()
    (net.STATE / "faults").mkdir(parents=True, exist_ok=True)
    work = net.STATE / "faults" / "s3-work"
    work.mkdir(parents=True, exist_ok=True)
    s3_port = devservices.current().s3_port
    bench = Bench(work)
    toxi = net.Toxiproxy(tools)
    mitm = net.Mitm(tools, s3_port)
    random = net.rng()
    try:
        proxy_port = toxi.proxy("s3", s3_port)
        via_toxi = f"http://127.0.0.1:{proxy_port}"
        via_mitm = f"http://127.0.0.1:{mitm.port}"

        def resets() -> None:  # cut every connection (resets) 1-3 times at random points
            for _ in range(random.randint(1, 3)):
                time.sleep(random.uniform(0.2, 2.0))
                toxi.enable("s3", False)
                time.sleep(random.uniform(0.05, 0.5))
                toxi.enable("s3", True)

        kinds: list[tuple[str, str, Callable[[], object], Callable[[], None] | None, bool, str]] = [
            (
                "S3 connection resets (reset_peer on 30% of connections + cuts at random points)",
                via_toxi,
                lambda: toxi.toxic("s3", "reset_peer", toxicity=0.3, timeout=0),
                resets,
                False,
                "",
            ),
            (
                "S3 latency (300 ms +- 200 ms each way)",
                via_toxi,
                lambda: (
                    toxi.toxic("s3", "latency", latency=300, jitter=200),
                    toxi.toxic("s3", "latency", "upstream", latency=300, jitter=200),
                ),
                None,
                False,
                "",
            ),
            (
                "S3 timeouts (20% of connections hang, closed after 3 s)",
                via_toxi,
                lambda: toxi.toxic("s3", "timeout", toxicity=0.2, timeout=3000),
                None,
                False,
                "",
            ),
            (
                "S3 bandwidth limit (512 KB/s each way)",
                via_toxi,
                lambda: (
                    toxi.toxic("s3", "bandwidth", rate=512),
                    toxi.toxic("s3", "bandwidth", "upstream", rate=512),
                ),
                None,
                False,
                "",
            ),
            (
                "S3 HTTP 503 SlowDown on 25% of requests (mitmproxy)",
                via_mitm,
                lambda: mitm.set(0.25, 503),
                None,
                False,
                "",
            ),
            (
                "S3 HTTP 500 InternalError on 25% of requests (mitmproxy)",
                via_mitm,
                lambda: mitm.set(0.25, 500),
                None,
                False,
                "",
            ),
            (
                "S3 unreachable for a whole run (proxy refusing connections)",
                via_toxi,
                lambda: toxi.enable("s3", False),
                None,
                True,
                f"S3 at {via_toxi}",
            ),
            (
                "S3 answering 503 SlowDown to every request for a whole run (mitmproxy)",
                via_mitm,
                lambda: mitm.set(1.0, 503),
                None,
                True,
                f"S3 at {via_mitm}",
            ),
        ]
        results = []
        for fault, endpoint, start, during, lasting, needle in kinds:
            throws = net.scaled(LASTING_THROWS if lasting else TRANSIENT_THROWS, scale)
            result = FaultResult(fault, throws, 0)
            seconds = []
            for _ in range(throws):
                start()
                try:
                    ok, lost, duplicated, notes, first = throw(
                        bench, fault, endpoint, during, lasting, needle
                    )
                finally:
                    toxi.clear("s3")
                    mitm.set(0.0)
                result.converged += ok
                result.lost += lost
                result.duplicated += duplicated
                result.notes += notes
                seconds.append(first)
            result.figures["uploads per throw"] = "3 (19 objects, one a 2-part multipart upload)"
            result.figures["faulty run"] = f"{min(seconds):.1f}-{max(seconds):.1f} s"
            if "mitmproxy" in fault:
                result.figures["error answers injected (so far)"] = str(mitm.injected())
            print(f"   {fault}: {result.converged}/{throws}", flush=True)
            results.append(result)
        return results
    finally:
        toxi.close()
        mitm.close()
