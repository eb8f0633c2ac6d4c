"""Batches that would block the queue (issue #24 item 1), on real S3 and PostgreSQL: one
over the size limit, one whose worker dies, one that needs more memory than a worker may
use. Each is quarantined with its reason; the good batches of the same group are counted;
the run ends when the worker dies, not after the 30-minute worker timeout (which would
fail the run with a TimeoutError instead of quarantining the batch; pytest's timeout mark
bounds the wait)."""

from __future__ import annotations

import random

import pytest

from jobs.missing_symbols import write_batch
from tests.fixtures.missing_symbols_data import (
    AGGREGATE,
    brute_force,
    entries,
    ini,
    table_totals,
    write_random,
)
from tests.helpers import s3_client


def limits_ini(bucket: str, **options: object) -> str:
    lines = "".join(f"        {name}={value}\n" for name, value in options.items())
    return ini(bucket, workers=2).replace("        workers=2\n", "        workers=2\n" + lines, 1)


def batch_rows(crontab):
    return {
        r["key"]: r
        for r in crontab.sql("SELECT key, status, reason, events FROM missing_symbol_batch")
    }


def test_a_batch_over_the_size_limit_is_quarantined_unread(crontab, s3_bucket):
    written = write_random(s3_bucket, (300, 40))
    s3 = s3_client()
    # garbage: were it read, its reason would say "malformed", not "oversized"
    s3.put_object(Bucket=s3_bucket, Key="missing/huge.msgpack", Body=random.randbytes(300_000))
    written += write_random(s3_bucket, (25,), seed=9)
    crontab.configure(
        entries(f"{AGGREGATE}|5m"), extra=limits_ini(s3_bucket, max_batch_bytes=200_000)
    )
    assert crontab.run()[0] == 0
    assert crontab.state("missing-symbols").error_count == 0
    rows = batch_rows(crontab)
    assert rows["missing/huge.msgpack"]["status"] == "quarantined"
    assert rows["missing/huge.msgpack"]["reason"] == (
        "oversized batch: 300000 bytes, over max_batch_bytes (200000); not read"
    )
    assert len(rows) == 4 and table_totals(crontab) == brute_force(written)


@pytest.mark.timeout(120)  # multiprocessing.Pool waited 30 minutes for the dead worker's answer
def test_a_worker_killed_while_decoding_is_noticed_in_seconds(crontab, s3_bucket, monkeypatch):
    """A worker SIGKILLed as the kernel's OOM killer would (the test hook kills the real
    worker process when it starts reading the marked batch)."""
    written = write_random(s3_bucket, (300, 40, 200))
    write_batch(
        s3_client(),
        s3_bucket,
        [{"debug_file": "a.pdb", "debug_id": "A" * 33}],
        key="missing/kills-its-worker.msgpack",
    )
    written += write_random(s3_bucket, (25,), seed=9)
    monkeypatch.setenv("MISSING_SYMBOLS_DIE_ON", "kills-its-worker")
    crontab.configure(entries(f"{AGGREGATE}|5m"), extra=limits_ini(s3_bucket))
    assert crontab.run()[0] == 0
    assert crontab.state("missing-symbols").error_count == 0
    rows = batch_rows(crontab)
    assert rows["missing/kills-its-worker.msgpack"]["status"] == "quarantined"
    assert rows["missing/kills-its-worker.msgpack"]["reason"].startswith("worker died: ")
    assert len(rows) == 5 and table_totals(crontab) == brute_force(written)


@pytest.mark.timeout(180)
def test_a_batch_needing_more_memory_than_a_worker_may_use_is_quarantined(crontab, s3_bucket):
    """A real batch of 400,000 distinct symbols under a 64 MiB worker limit (RLIMIT_AS):
    its worker runs out of memory, it alone is quarantined, the rest is counted."""
    written = write_random(s3_bucket, (300, 40))
    big = [{"debug_file": f"lib{i}.pdb", "debug_id": f"{i:033X}"} for i in range(400_000)]
    write_batch(s3_client(), s3_bucket, big, key="missing/too-big-to-decode.msgpack")
    written += write_random(s3_bucket, (25,), seed=9)
    crontab.configure(entries(f"{AGGREGATE}|5m"), extra=limits_ini(s3_bucket, worker_memory_mb=64))
    assert crontab.run()[0] == 0
    assert crontab.state("missing-symbols").error_count == 0
    rows = batch_rows(crontab)
    assert rows["missing/too-big-to-decode.msgpack"]["status"] == "quarantined"
    assert rows["missing/too-big-to-decode.msgpack"]["reason"] in (  # (which stage: see
        # tests/cli/test_missing_symbols_memory.py, a batch made for each)
        "out of memory: decoding it alone needed more than worker_memory_mb (64 MiB)",
        "out of memory: settling its events alone needed more than worker_memory_mb (64 MiB)",
        "worker died: the process decoding it alone was killed (out of memory?)",
    )
    assert len(rows) == 4 and table_totals(crontab) == brute_force(written)
