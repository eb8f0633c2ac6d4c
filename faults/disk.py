"""The upload spool's disk full: a small tmpfs as the job's temporary directory.

The upload job keeps an archive and the objects it will write in a temporary directory
(``tempfile``, so ``TMPDIR``) until the upload ends. This module mounts a 4 MiB tmpfs
(``mount -t tmpfs -o size=4m``; the suite runs as root) and runs ``process-uploads``
with ``TMPDIR`` on it, for two shapes of archive:

- the archive itself does not fit (its download fills the disk);
- the archive fits but what it spools does not (text members, stored uncompressed).

Checked by itself: the run fails and the upload goes back to ``pending`` with the reason
(``No space left on device``) on its row; nothing of it is in the bucket; the tmpfs is
empty again; then, with the tmpfs unmounted (``TMPDIR`` back on the real disk), the next
run publishes it, byte for byte (the bucket listed and read here).
"""

from __future__ import annotations

import os
import subprocess

from faults import net
from faults.result import FaultResult
from faults.s3 import Bench, options

BUCKET = "faults-disk"
DBNAME = "faults_disk"
THROWS = 5  # per shape at scale 1.0
MiB = 1024 * 1024
SIZE = "4m"


def text(size: int, seed: int) -> bytes:
    """Symbol-like text that deflates about 3:1 (well within the job's ratio limit)."""
    from tests.fixtures.uploads_archives import sym_text

    return sym_text("spool", "0" * 33, size, seed)


def mount(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE},mode=1777", "tmpfs", path],
        check=True,
        stderr=subprocess.PIPE,
        text=True,
    )


def unmount(path: str) -> None:
    subprocess.run(["umount", path], check=False, stderr=subprocess.DEVNULL)


def run(scale: float) -> list[FaultResult]:
    from tests.fixtures.uploads_archives import debug_id

    (net.STATE / "faults").mkdir(parents=True, exist_ok=True)
    work = net.STATE / "faults" / "disk-work"
    work.mkdir(parents=True, exist_ok=True)
    spool = str(net.STATE / "faults" / "spool-tmpfs")
    bench = Bench(work, BUCKET, DBNAME)
    shapes = [
        (
            "upload spool disk full: the archive does not fit (tmpfs 4 MiB)",
            lambda n: [(f"big.dll/{debug_id(n)}/big.dl_", os.urandom(5 * MiB))],
        ),
        (
            "upload spool disk full: the spooled objects do not fit (tmpfs 4 MiB)",
            lambda n: [
                (f"text{i}.dll/{debug_id(n * 10 + i)}/text{i}.dl_", text(2 * MiB, n + i))
                for i in range(3)
            ],
        ),
    ]
    results = []
    for fault, extra in shapes:
        result = FaultResult(fault, net.scaled(THROWS, scale), 0)
        for n in range(result.thrown):
            notes: list[str] = []
            ids = bench.queue(1, big=False, extra=extra(bench.serial + 1))
            mount(spool)
            try:
                first = net.run_job(
                    "process-uploads", options(bucket=BUCKET), {**bench.env, "TMPDIR": spool}
                )
                leftover = os.listdir(spool)
            finally:
                unmount(spool)
            row = _row(bench, ids[0])
            if first.returncode == 0 and row[0] == "done":
                notes.append("the upload was done on a full disk")
            if row[0] != "pending" or "No space left on device" not in (row[1] or ""):
                notes.append(f"after the full disk: {row[0]}, error {row[1]!r}")
            if "Traceback" in first.stderr:
                notes.append("a traceback on the run's stderr")
            keys = _published(bench, ids[0])
            if keys:
                notes.append(f"{len(keys)} objects published from the full disk's attempt")
            if leftover:
                notes.append(f"left on the spool's disk: {leftover[:3]}")
            if n == 0:
                result.figures["the run's line"] = (first.stderr.strip().splitlines() or ["-"])[-1][
                    :160
                ]
            again = net.run_job("process-uploads", options(bucket=BUCKET), bench.env)
            lost, duplicated, problems = bench.check_bucket()
            if again.returncode != 0 or _row(bench, ids[0])[0] != "done" or problems:
                notes.append(
                    f"no convergence after the disk came back: exit {again.returncode}, "
                    f"{_row(bench, ids[0])}, {problems[:2]}"
                )
            result.lost += lost
            result.duplicated += duplicated
            result.converged += not notes
            result.notes += notes
        results.append(result)
    return results


def _row(bench: Bench, upload_id: int) -> tuple[str, str | None]:
    from crontabber.store import connect
    from devservices.databases import database

    conn = connect(database(bench.env["RESOURCE_POSTGRESQL_DBNAME"]))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT status, error FROM upload WHERE id = %s", (upload_id,))
            status, error = cur.fetchone()
            return str(status), error
    finally:
        conn.close()


def _published(bench: Bench, upload_id: int) -> list[str]:
    """Keys in the bucket whose metadata names ``upload_id`` (listed and HEADed here)."""
    found = []
    for page in bench.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="v1/"):
        for item in page.get("Contents", []):
            meta = bench.client.head_object(Bucket=BUCKET, Key=item["Key"]).get("Metadata", {})
            if meta.get("upload_id") == str(upload_id):
                found.append(item["Key"])
    return found
