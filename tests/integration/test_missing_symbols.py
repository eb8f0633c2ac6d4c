"""The missing-symbols apps on real Postgres and S3: exact totals, bad batches, reports,
retention."""
from __future__ import annotations

import random

from jobs.missing_symbols import write_batch
from jobs.missing_symbols.writer import encode_events
from tests.conftest import s3_client
from tests.fixtures.missing_symbols_data import (AGGREGATE, brute_force, ini, object_time,
                                                  random_events, symbols, table_totals)


def test_totals_equal_a_brute_force_count_on_random_data(crontab, s3_bucket):
    rng = random.Random(5)
    s3 = s3_client()
    pool = symbols(rng, 300)
    written = []
    for size in (0, 1, 500, 2000, 777):
        events = random_events(rng, pool, size)
        key = write_batch(s3, s3_bucket, events)
        written.append((events, object_time(s3, s3_bucket, key)))
    crontab.configure([f"{AGGREGATE}|5m"], extra=ini(s3_bucket, per_transaction=2))
    assert crontab.run() == (0, "")
    assert crontab.state("missing-symbols").error_count == 0
    assert table_totals(crontab) == brute_force(written)
    batches = crontab.sql("SELECT status, events FROM missing_symbol_batch ORDER BY events")
    assert [(b["status"], b["events"]) for b in batches] == [
        ("ok", 0), ("ok", 1), ("ok", 500), ("ok", 777), ("ok", 2000)]
