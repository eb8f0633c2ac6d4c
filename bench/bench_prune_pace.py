"""The prune job's pace: the delete rate it reaches under ``deletes_per_second``, against the cap.

``deletes_per_second=250`` sends 1,000 keys in 4 chunks of 250, a second apart. The test
(``tests/cli/test_prune_inventory_cli.py::test_deletes_are_paced_per_prefix``) proves the
job is never faster than the cap; how close to the cap it comes is a speed, measured here
(issue #41 item 6: the test's old "at least 120 keys/s" failed at 89/s on a busy machine).

The rate counts the keys after the first chunk over the time from the first chunk's
``DeleteObjects`` answer to the last one's (boto3's ``after-call`` event), as the test
measured it from outside; the baseline is the cap itself. The objects are created directly
in s3proxy's filesystem backend (setup, not timed), as in ``bench_prune``.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from crontabber.schema import ensure_schema, with_runner
from crontabber.store import connect
from jobs import SQL_DIR as JOBS_SQL
from jobs.prune.rules import Kind, Protection, Rule
from jobs.prune.runs import PruneOptions, run_prune
from jobs.prune.store import PruneStore
from jobs.s3 import make_s3_client

from .bench_prune import _fill
from .harness import Comparison, Sample
from .services import fresh_database

ROUNDS = 5
KEYS = 1_000
CAP = 250.0


def run(rounds: int) -> list[Comparison]:
    client = make_s3_client(max_pool_connections=8)
    conn = connect(fresh_database("bench_prune_pace"))
    ensure_schema(conn, with_runner([JOBS_SQL]))
    store = PruneStore(conn)
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    answered: list[float] = []

    def note(**_: Any) -> None:
        answered.append(time.monotonic())

    client.meta.events.register("after-call.s3.DeleteObjects", note)
    rates: list[float] = []
    for _ in range(rounds):
        bucket = _fill(client, KEYS)
        answered.clear()
        rule = Rule("bench", Kind.AGE, bucket, "old/", 0.5)
        options = PruneOptions(
            [rule], Protection("none", "v1/"), cap=10**9, dry_run=False, threads=4, rate=CAP
        )
        report = run_prune(client, store, options, future)
        assert report.results[0].keys == KEYS and len(answered) == KEYS / CAP, (report, answered)
        rates.append((KEYS - CAP) / (answered[-1] - answered[0]))
        client.delete_bucket(Bucket=bucket)
    conn.close()
    return [
        Comparison(
            f"delete {KEYS:,} keys at deletes_per_second={CAP:g}",
            "paced delete rate",
            "keys/s",
            Sample("ours", rates),
            Sample("the cap", [CAP] * rounds),
            higher_is_better=True,
            goal=">= 0.48x (120 keys/s); never over 1x (the test checks that bound)",
            notes=[
                f"{KEYS:,} keys listed by prefix (source=list), chunks of {CAP:g}; the rate counts "
                "the keys after the first chunk, from the first DeleteObjects answer to the last",
            ],
        )
    ]
