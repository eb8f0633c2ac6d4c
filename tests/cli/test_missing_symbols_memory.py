"""Security review N1 (issue #32 item 16): memory running out at any stage of a batch's life
isolates that batch and never blocks the good ones queued behind it.

Reproduced as the review did, with the real job as a process and a lowered memory limit: for
each stage, a batch that needs more memory there than it may use (a worker's
``worker_memory_mb``; the job's own process, its address space limited by the test). It is
quarantined with a reason naming memory and the stage; the good batches of its group and of
the next group are counted in the same run, exactly once."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from jobs.missing_symbols import write_batch
from tests.fixtures.missing_symbols_data import (
    AGGREGATE,
    brute_force,
    entries,
    ini,
    object_time,
    random_events,
    symbols,
    table_totals,
)
from tests.helpers import REPO, s3_client

#: ``python -m crontabber`` (argv[2:]) with its address space limited to what it holds once
#: what a run imports is imported (and its S3 client made), plus argv[1] MiB: the job's own
#: process gets a lowered limit as the workers do (``worker_memory_mb``).
LIMITED = """
import resource, runpy, sys
import concurrent.futures.process, msgpack, psycopg2
from jobs.s3 import make_s3_client
make_s3_client()
with open("/proc/self/statm") as statm:
    held = int(statm.read().split()[0]) * resource.getpagesize()
hard = resource.getrlimit(resource.RLIMIT_AS)[1]
resource.setrlimit(resource.RLIMIT_AS, (held + (int(sys.argv[1]) << 20), hard))
sys.argv = ["crontabber", *sys.argv[2:]]
runpy.run_module("crontabber", run_name="__main__", alter_sys=True)
"""

PAD = 60_000  # bytes of an unknown key (ignored when counted), as in the review


def padded(count: int) -> list[dict[str, object]]:
    """``count`` distinct valid events of about 60 kB each: memory held as pending bytes
    (decoding) and sent back as such (returning, receiving), never settled by the bound."""
    pad = "x" * PAD
    return [
        {"debug_file": f"padded{i}.pdb", "debug_id": f"{i:033X}", "pad": pad} for i in range(count)
    ]


def distinct(count: int) -> list[dict[str, object]]:
    """``count`` distinct small events: over the pending bound (200,000), the worker settles
    them itself, and their counts take about three times what their pending bytes did."""
    return [{"debug_file": f"lib{i}.pdb", "debug_id": f"{i:033X}"} for i in range(count)]


# stage -> (worker_memory_mb, the job's own budget (MiB, None: no limit), the bad batch,
#           the reason's start)
STAGES = {
    "decoding": (
        40,
        None,
        lambda: padded(1_500),  # 90 MB held: over 40 MiB while reading
        "out of memory: decoding it alone needed more than worker_memory_mb (40 MiB)",
    ),
    "settling": (
        100,
        None,
        lambda: distinct(210_000),  # ~55 MB pending, ~170 MB settling
        "out of memory: settling its events alone needed more than worker_memory_mb (100 MiB)",
    ),
    "returning": (
        100,
        None,
        lambda: padded(1_100),  # 66 MB held, as much again to pickle
        "out of memory: returning its events to the job alone needed more than worker_memory_mb "
        "(100 MiB)",
    ),
    "in the job": (
        2048,
        60,
        lambda: padded(1_600),  # 96 MB received: over 60 MiB
        "out of memory: receiving its events from the worker alone needed more memory than the "
        "job's process could get",
    ),
}


def write_good(s3_bucket: str, keys: list[str]) -> list[tuple[list[dict], float]]:
    rng = random.Random(32)
    pool, s3, written = symbols(rng, 200), s3_client(), []
    for key in keys:
        events = random_events(rng, pool, 300)
        write_batch(s3, s3_bucket, events, key=key)
        written.append((events, object_time(s3, s3_bucket, key)))
    return written


@pytest.mark.timeout(300)
@pytest.mark.parametrize("stage", list(STAGES))
def test_a_batch_out_of_memory_at_any_stage_is_quarantined_and_the_rest_counted(
    cli, s3_bucket, stage
):
    worker_mb, job_mb, bad_events, reason = STAGES[stage]
    # keys in queue order (the same listing second): the bad batch, a good one in its
    # group (two batches a transaction), two good ones in the next group
    write_batch(s3_client(), s3_bucket, bad_events(), key="missing/a-bad.msgpack")
    written = write_good(
        s3_bucket, ["missing/b-good.msgpack", "missing/c-good.msgpack", "missing/d-good.msgpack"]
    )
    extra = ini(s3_bucket, workers=2, per_transaction=2).replace(
        "        workers=2\n",
        f"        workers=2\n        worker_memory_mb={worker_mb}\n        "
        f"max_batch_bytes={512 << 20}\n",
        1,
    )
    cli.crontab.configure(entries(f"{AGGREGATE}|5m"), extra=extra)
    argv = cli.argv("--job=missing-symbols", "--force")
    # one malloc arena: a worker inherits the job's threads' arenas (64 MiB each, reserved
    # address space), and glibc's malloc falls back to them past the limit
    env = {**cli.env, "MALLOC_ARENA_MAX": "1"}
    if job_mb is not None:
        argv = [sys.executable, "-c", LIMITED, str(job_mb), *argv[3:]]
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert cli.crontab.state("missing-symbols").error_count == 0
    rows = {
        r["key"]: r
        for r in cli.crontab.sql("SELECT key, status, reason, events FROM missing_symbol_batch")
    }
    assert rows["missing/a-bad.msgpack"]["status"] == "quarantined", rows["missing/a-bad.msgpack"]
    assert rows["missing/a-bad.msgpack"]["reason"] == reason, done.stderr[-3000:]
    assert [rows[key]["status"] for key in sorted(rows)[1:]] == ["ok", "ok", "ok"], (
        rows,
        done.stderr[-3000:],
    )
    assert table_totals(cli.crontab) == brute_force(written)  # each good batch counted once
