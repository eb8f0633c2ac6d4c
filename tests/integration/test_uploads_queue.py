"""The queue under concurrency and failure: racing workers, a worker killed mid-upload,
leases, a bucket that refuses writes, retries."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

import devservices
from jobs.s3 import make_s3_client
from jobs.uploads.errors import ClaimLost, DiskFull, S3Unavailable
from jobs.uploads.records import UploadSettings, UploadStatus
from jobs.uploads.storage import make_client
from tests.fixtures.uploads_archives import symbol_members, write_zip
from tests.fixtures.uploads_queue import uploads  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parent.parent.parent
# scripts/services.sh keeps the S3 server's buckets as directories here.
S3_DATA = devservices.current().s3_data
ROW = (
    "status",
    "attempts",
    "files_total",
    "files_uploaded",
    "files_skipped",
    "files_ignored",
    "bytes_uploaded",
    "error",
)


def test_two_workers_racing_on_one_queue_process_each_upload_once(uploads, tmp_path):
    ids = [
        uploads.enqueue(write_zip(tmp_path / f"{n}.zip", symbol_members(3, 4000, seed=n)))
        for n in range(8)
    ]
    results: dict[str, list] = {}
    workers = [uploads.worker(name) for name in ("host-a:1", "host-b:2")]
    threads = [
        threading.Thread(target=lambda w=w: results.__setitem__(w.name, w.drain())) for w in workers
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    handled = [o.upload_id for outcomes in results.values() for o in outcomes]
    assert sorted(handled) == ids  # each exactly once, by one worker or the other
    rows = [uploads.row(i) for i in ids]
    assert {(r["status"], r["attempts"], r["files_uploaded"]) for r in rows} == {("done", 1, 3)}
    assert len(uploads.files()) == 24 == len(uploads.keys())


def test_a_worker_killed_mid_upload_then_rerun_equals_a_clean_run(uploads, tmp_path):
    # enough members that publishing takes several heartbeats (rows are flushed every
    # 50 ms): the kill lands well before the last one
    members = symbol_members(120, 100_000, seed=7)
    archive = write_zip(tmp_path / "big.zip", members)
    upload_id = uploads.enqueue(archive)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "RESOURCE_POSTGRESQL_DBNAME": uploads.database.dbname,
    }
    options = [
        f"--crontabber.class-ProcessUploadsCronApp.{name}={value}"
        for name, value in (
            ("inbox_bucket", uploads.bucket),
            ("symbols_bucket", uploads.bucket),
            ("concurrency", 1),
            ("existence_check", "head"),
            ("heartbeat_seconds", 0.05),
        )
    ]
    child = subprocess.Popen(
        [sys.executable, "-m", "jobs.uploads", "reprocess", str(upload_id), *options],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while len(uploads.files(upload_id)) < 5 and time.monotonic() < deadline:
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.communicate()  # and its pipes closed
    written = len(uploads.files(upload_id))
    assert 5 <= written < 120 and uploads.row(upload_id)["status"] == "processing"
    assert uploads.worker().drain() == []  # the lease still holds
    uploads.sql("UPDATE upload SET claimed_at = claimed_at - interval '1 hour'")
    assert [o.status for o in uploads.worker().drain()] == [UploadStatus.DONE]
    # the clean run: the same archive under another prefix
    uploads.settings = UploadSettings(**{**uploads.settings.__dict__, "symbols_prefix": "clean"})
    clean_id = uploads.enqueue(archive)
    uploads.worker().drain()
    killed, clean = uploads.row(upload_id), uploads.row(clean_id)
    assert [killed[c] for c in ROW[2:]] == [clean[c] for c in ROW[2:]]
    assert (killed["status"], killed["attempts"]) == ("done", 2)

    def rows(upload: int) -> list:
        return [
            (
                f["key"].split("/", 1)[1],
                f["size"],
                f["original_size"],
                f["original_md5"],
                f["compressed"],
                f["update"],
            )
            for f in uploads.files(upload)
        ]

    assert rows(upload_id) == rows(clean_id) and len(rows(upload_id)) == 120
    for name, content in members:
        assert uploads.symbol(f"v1/{name}") == content


def test_a_put_without_its_row_is_finished_from_the_object_metadata(uploads, tmp_path):
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(3, 3000)))
    uploads.worker().drain()
    before = uploads.files(upload_id), uploads.row(upload_id)
    lost = before[0][1]["key"]  # as if killed between its PUT and its INSERT
    uploads.sql("DELETE FROM file_upload WHERE key = %s", (lost,))
    uploads.sql("UPDATE upload SET status = 'processing', claimed_at = now() - interval '1 hour'")
    uploads.worker().drain()
    after = uploads.files(upload_id), uploads.row(upload_id)
    assert after[0] == before[0]
    assert [after[1][c] for c in ROW] == [before[1][c] for c in ROW[:1]] + [2] + [
        before[1][c] for c in ROW[2:]
    ]


def test_an_expired_claim_on_the_last_attempt_is_abandoned_as_failed(uploads, tmp_path):
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(1, 100)))
    dead = uploads.worker("dead:1", max_attempts=1)
    assert dead.store.claim_next("dead:1", 1, 600, 0, []) is not None
    uploads.sql("UPDATE upload SET claimed_at = claimed_at - interval '1 hour'")
    assert uploads.worker(max_attempts=1).drain() == []
    row = uploads.row(upload_id)
    assert row["status"] == "failed" and "dead:1" in row["error"] and "lease" in row["error"]


def test_a_worker_whose_claim_was_taken_over_records_nothing(uploads, tmp_path):
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(1, 100)))
    slow = uploads.worker("slow:1")
    assert slow.store.claim_next("slow:1", 3, 600, 0, []) is not None
    uploads.sql("UPDATE upload SET claimed_at = claimed_at - interval '1 hour'")
    assert [o.status for o in uploads.worker("fast:2").drain()] == [UploadStatus.DONE]
    with pytest.raises(ClaimLost):
        slow.store.recorder(upload_id, "slow:1", 0).heartbeat()
    outcome = slow.handle(slow.store.get(upload_id))  # type: ignore[arg-type]
    assert outcome.status is UploadStatus.PROCESSING and "claim lost" in (outcome.error or "")
    assert uploads.row(upload_id)["claimed_by"] == "fast:2"


def test_a_bucket_that_refuses_writes_fails_the_upload_after_retries(uploads, tmp_path):
    """s3proxy keeps a bucket as a directory: made immutable, every PUT fails (500)."""
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(2, 1000)))
    directory = S3_DATA / uploads.bucket
    uploads.client = boto3.client(
        "s3",
        config=Config(
            retries={"mode": "standard", "max_attempts": 2}, s3={"addressing_style": "path"}
        ),
    )
    subprocess.run(["chattr", "+i", str(directory)], check=True)
    try:
        # a 500 is S3 failing, not the archive: the run stops and fails (S3Unavailable)
        with pytest.raises(S3Unavailable, match=f"upload {upload_id}: S3 PutObject"):
            uploads.worker(max_attempts=2).drain()
        row = uploads.row(upload_id)
        assert row["status"] == "pending"  # attempt 1 of 2: retried later
        assert row["attempts"] == 1 and "PutObject" in row["error"]
        assert "InternalError" in row["error"] and uploads.bucket in row["error"]
        with pytest.raises(S3Unavailable):
            uploads.worker(max_attempts=2).drain()
        row = uploads.row(upload_id)
        assert row["attempts"] == 2
        assert row["status"] == "failed" and "PutObject" in row["error"]
        assert uploads.worker(max_attempts=2).drain() == []
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)
    assert uploads.files() == [] and uploads.keys() == []
    outcome = uploads.worker(max_attempts=2).reprocess(upload_id)  # the operator's way back
    assert outcome.status is UploadStatus.DONE and len(uploads.keys()) == 2


def test_s3_unreachable_stops_the_drain_after_one_upload_and_fails_the_run(uploads, tmp_path):
    """Bug (found by faults/s3.py): with S3 down, the drain tried every queued upload in
    turn (~75 s of retries each), used an attempt of each, and returned normally, so the
    job run was recorded as a success. Now the first upload S3 fails stops the run with
    one line naming S3's address; the others are left as they were."""
    ids = [
        uploads.enqueue(write_zip(tmp_path / f"{n}.zip", symbol_members(1, 100, seed=n)))
        for n in range(3)
    ]
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    uploads.client = make_s3_client(4, endpoint_url=closed, max_attempts=1, connect_timeout=1)
    with pytest.raises(S3Unavailable) as raised:
        uploads.worker().drain()
    line = str(raised.value)
    assert line.startswith(f"S3 at {closed} unavailable") and "\n" not in line
    rows = [uploads.row(i) for i in ids]
    assert [(r["status"], r["attempts"]) for r in rows] == [
        ("pending", 1),
        ("pending", 0),
        ("pending", 0),
    ]
    assert "GetObject" in rows[0]["error"]
    uploads.client = make_client(8)  # S3 is back: the next run converges
    assert [o.status for o in uploads.worker().drain()] == [UploadStatus.DONE] * 3
    assert uploads.files() and len(uploads.files()) == len(uploads.keys()) == 3


@pytest.fixture
def small_tmpdir(tmp_path, monkeypatch):
    """A 1 MiB tmpfs as the job's temporary directory (tempfile's), unmounted after."""
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], check=True)
    monkeypatch.setattr(tempfile, "tempdir", str(small))
    yield small
    monkeypatch.undo()
    subprocess.run(["umount", str(small)], check=True)


@pytest.mark.parametrize("shape", ["archive", "spool"])
def test_a_full_spool_disk_stops_the_run_in_one_line_and_publishes_nothing(
    uploads, tmp_path, small_tmpdir, shape
):
    """Bug (found by faults/disk.py): an archive whose download filled the disk was
    reported as an S3 GetObject failure, retried, and the run went on (a spool that filled
    it failed the run with an OSError instead). Now both are the local disk: the upload goes
    back to the queue with the reason, nothing published, the run stops in one line."""
    if shape == "archive":  # random bytes, stored: the archive itself is over 1 MiB
        members = [("big.pdb/" + "0" * 33 + "/big.sym", os.urandom(1536 * 1024))]
        archive = write_zip(tmp_path / "a.zip", members, compression=zipfile.ZIP_STORED)
    else:  # the archive fits (deflated text), its members do not
        archive = write_zip(tmp_path / "a.zip", symbol_members(3, 600 * 1024))
    upload_id = uploads.enqueue(archive)
    with pytest.raises(DiskFull) as raised:
        uploads.worker().drain()
    line = str(raised.value)
    assert line.startswith("no space left on the upload spool's disk") and "\n" not in line
    assert "S3" not in line
    row = uploads.row(upload_id)
    assert (row["status"], row["attempts"]) == ("pending", 1)
    assert "No space left on device" in row["error"] and "S3" not in row["error"]
    assert uploads.keys() == [] and uploads.files() == []
    assert list(small_tmpdir.iterdir()) == []  # the spool was cleaned up


def test_a_missing_inbox_archive_is_a_clear_failure(uploads, tmp_path):
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(1, 100)))
    key = uploads.row(upload_id)["inbox_key"]
    uploads.client.delete_object(Bucket=uploads.bucket, Key=key)
    uploads.worker(max_attempts=1).drain()
    row = uploads.row(upload_id)
    assert row["status"] == "failed" and "GetObject" in row["error"] and key in row["error"]


def test_a_retry_waits_for_the_retry_delay(uploads, tmp_path):
    upload_id = uploads.enqueue(write_zip(tmp_path / "a.zip", symbol_members(1, 100)))
    uploads.sql("UPDATE upload SET attempts = 1, claimed_at = now(), error = 'x'")
    assert uploads.worker(retry_delay_seconds=300).drain() == []
    assert [o.upload_id for o in uploads.worker(retry_delay_seconds=0).drain()] == [upload_id]


def test_uploads_are_drained_oldest_first_and_limited_per_run(uploads, tmp_path):
    ids = [
        uploads.enqueue(write_zip(tmp_path / f"{n}.zip", symbol_members(1, 100, seed=n)))
        for n in range(3)
    ]
    assert [o.upload_id for o in uploads.worker(max_uploads_per_run=2).drain()] == ids[:2]
    assert [o.upload_id for o in uploads.worker().drain()] == ids[2:]


def test_a_worker_whose_job_lost_its_lease_claims_no_more_uploads(uploads, tmp_path):
    """process-uploads passes the job's holds_lease(): once it turns False (the
    runner could not renew its lease), the uploads left stay pending for the run
    that takes over."""
    ids = [
        uploads.enqueue(write_zip(tmp_path / f"{n}.zip", symbol_members(1, 100, seed=n)))
        for n in range(3)
    ]
    answers = iter([True, False])
    outcomes = uploads.worker().drain(keep_going=lambda: next(answers))
    assert [o.upload_id for o in outcomes] == ids[:1]
    pending = uploads.sql("SELECT id FROM upload WHERE status = 'pending' ORDER BY id")
    assert [row["id"] for row in pending] == ids[1:]
