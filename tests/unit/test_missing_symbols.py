"""Pure parts of jobs.missing_symbols: validation, streaming aggregation, CSV."""

from __future__ import annotations

import collections
import datetime as dt
import io
import random

import pytest

from jobs.missing_symbols.aggregate import (
    Aggregate,
    BadBatch,
    BadBatches,
    aggregate_batch,
    staging_chunks,
)
from jobs.missing_symbols.apps import report_day
from jobs.missing_symbols.consume import split
from jobs.missing_symbols.model import EventError, parse_seen_at, symbol_hash, validate_symbol
from jobs.missing_symbols.reports import write_csv
from jobs.missing_symbols.writer import batch_key, encode_events
from tests.fixtures.missing_symbols_data import brute_force, random_events, symbols

T0 = 1_795_000_000.0
ID = "0123456789ABCDEF0123456789ABCDEF1"


def chunks(data: bytes, size: int):
    return [data[i : i + size] for i in range(0, len(data), size)]


def as_totals(aggregate: Aggregate):
    totals, per_day = collections.Counter(), collections.Counter()
    for (*symbol, day), (count, _, _) in aggregate.counts.items():
        totals[tuple(symbol)] += count
        per_day[tuple(symbol), dt.date(1970, 1, 1) + dt.timedelta(days=day)] += count
    return totals, per_day


@pytest.mark.parametrize("chunk_size", [1, 7, 4096, 1 << 20])
def test_aggregation_equals_a_brute_force_count_whatever_the_chunking(chunk_size):
    rng = random.Random(chunk_size)
    events = random_events(rng, symbols(rng, 40), 3000)
    data = encode_events(events)
    aggregate = aggregate_batch(chunks(data, chunk_size), T0, chunk_size=max(chunk_size, 1024))
    assert aggregate.events == 3000
    assert as_totals(aggregate) == brute_force([(events, T0)])


def test_first_and_last_seen_and_merging():
    events = [
        {"debug_file": "a.pdb", "debug_id": ID, "seen_at": T0 + 10},
        {"debug_file": "a.pdb", "debug_id": ID, "seen_at": T0 + 5, "count": 4},
        {"debug_file": "a.pdb", "debug_id": ID, "code_file": None, "code_id": ""},
    ]
    one = aggregate_batch([encode_events(events)], T0 + 7)
    key = ("a.pdb", ID, "", "", int((T0 + 7) // 86400))
    assert one.counts == {key: [6, T0 + 5, T0 + 10]}
    other = aggregate_batch([encode_events(events[:1])], T0)
    one.merge(other)
    assert one.counts[key] == [7, T0 + 5, T0 + 10] and one.events == 4 and one.lookups == 7


def test_a_lowercase_debug_id_counts_as_the_uppercase_one():
    """One canonical id (jobs.symbolkey): the report and search see one symbol, the one the
    upload job stores (issue #33)."""
    events = [
        {"debug_file": "a.pdb", "debug_id": ID.lower()},
        {"debug_file": "a.pdb", "debug_id": ID, "count": 2},
        {"debug_file": "a.pdb", "debug_id": ID.lower(), "count": 3},
    ]
    aggregate = aggregate_batch([encode_events(events)], T0)
    assert aggregate.counts == {("a.pdb", ID, "", "", int(T0 // 86400)): [6, T0, T0]}
    assert validate_symbol({"debug_file": "a.pdb", "debug_id": ID.lower()})[1] == ID
    assert aggregate.one_day_per_symbol()  # validated holds the canonical symbol once


@pytest.mark.parametrize(
    "event, reason",
    [
        ({"debug_id": ID}, "missing key"),
        ({"debug_file": "a.pdb", "debug_id": ID.lower()[:-1]}, "invalid debug id"),
        ({"debug_file": b"a.pdb", "debug_id": ID}, "wrong type"),
        ({"debug_file": "a.pdb", "debug_id": ID, "count": 0}, "wrong type"),
        ({"debug_file": "a.pdb", "debug_id": ID, "count": 1.5}, "wrong type"),
        ({"debug_file": "a.pdb", "debug_id": ID, "seen_at": True}, "wrong type"),
        ({"debug_file": "a.pdb", "debug_id": ID, "code_file": "x" * 151}, "oversized string"),
        ({"debug_file": "a\tb.pdb", "debug_id": ID}, "wrong type"),
        ({"debug_file": "a.pdb", "debug_id": ID, "code_file": 0}, "wrong type"),
        ({"debug_file": "a.pdb", "debug_id": ID, "code_id": False}, "wrong type"),
        ({"debug_file": "a.pdb", "debug_id": ID + "0" * 8}, "invalid debug id"),
        ("just a string", "wrong type"),
        ({"debug_file": ["a.pdb"], "debug_id": ID}, "wrong type"),
        ({"debug_file": "a.pdb", "debug_id": ID, "code_file": {"x": 1}}, "wrong type"),
    ],
)
def test_a_bad_event_names_its_kind_and_position(event, reason):
    good = {"debug_file": "a.pdb", "debug_id": ID}
    with pytest.raises(BadBatch) as caught:
        aggregate_batch([encode_events([good, event])], T0)
    assert caught.value.kind == reason and caught.value.event == 2


def test_malformed_and_truncated_streams():
    good = encode_events([{"debug_file": "a.pdb", "debug_id": ID}])
    with pytest.raises(BadBatch, match="malformed msgpack: event 2"):
        aggregate_batch([good + b"\xc1"], T0)
    with pytest.raises(BadBatch, match="event 2: truncated: 3 bytes left over after 1 events"):
        aggregate_batch([good + good[:3]], T0)


def test_validation_and_seen_at_parsing():
    assert validate_symbol({"debug_file": "a", "debug_id": ID, "code_id": None}) == (
        "a",
        ID,
        "",
        "",
    )
    assert (
        parse_seen_at("2026-11-20T10:00:00Z")
        == parse_seen_at("2026-11-20T10:00:00")
        == dt.datetime(2026, 11, 20, 10, tzinfo=dt.timezone.utc).timestamp()
    )
    with pytest.raises(EventError):
        parse_seen_at(float("nan"))
    assert symbol_hash("a", "b", "", "") != symbol_hash("a", "", "b", "")
    assert len(symbol_hash("a", "b", "c", "d")) == 32


def test_staging_rows_carry_the_hash_and_epoch_times_with_backslashes_escaped():
    name = 'a\\,"b".pdb'  # a backslash, a comma and quotes
    aggregate = aggregate_batch([encode_events([{"debug_file": name, "debug_id": ID}])], T0)
    assert (
        "".join(staging_chunks(aggregate))
        == "\t".join(
            [
                symbol_hash(name, ID, "", ""),
                'a\\\\,"b".pdb',
                ID,
                "",
                "",
                str(int(T0 // 86400)),
                "1",
                repr(T0),
                repr(T0),
            ]
        )
        + "\n"
    )


def test_report_csv_and_report_day():
    out = io.StringIO()
    assert write_csv([("a.pdb", ID, "", "", 3)], out) == 1
    assert out.getvalue() == f"debug_file,debug_id,code_file,code_id,count\na.pdb,{ID},,,3\n"
    when = dt.datetime(2026, 11, 22, 0, 30, tzinfo=dt.timezone.utc)
    assert report_day(when) == dt.date(2026, 11, 21)


def test_split_and_batch_keys():
    assert split(["a", "b", "c"], 2) == [["a", "c"], ["b"]]
    assert split(["a"], 4) == [["a"]]
    key = batch_key("missing/", dt.datetime(2026, 11, 22, 5, 6, 7))
    assert key.startswith("missing/2026/11/22/050607-") and key.endswith(".msgpack")


def test_memory_grows_with_distinct_keys_not_with_events():
    import tracemalloc

    one = encode_events([{"debug_file": f"lib{i}.pdb", "debug_id": ID} for i in range(50)])

    def peak(repeats: int) -> int:
        stream = (one * 20 for _ in range(repeats // 20))  # 1,000 events a chunk, made lazily
        tracemalloc.start()
        try:
            assert aggregate_batch(stream, T0).events == repeats * 50
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert peak(2000) < 1.3 * peak(100)  # 100,000 vs 5,000 events over the same 50 keys


def first_last(aggregate: Aggregate):
    return {key: (first, last) for key, (_, first, last) in aggregate.counts.items()}


def brute_first_last(batches):
    """(symbol, day) -> (first, last seen) of ``(events, object time)`` batches."""
    seen_range: dict = {}
    for events, object_time in batches:
        for event in events:
            seen = parse_seen_at(event["seen_at"]) if "seen_at" in event else object_time
            key = (
                event["debug_file"],
                event["debug_id"],
                event.get("code_file") or "",
                event.get("code_id") or "",
                int(seen // 86400),
            )
            first, last = seen_range.get(key, (seen, seen))
            seen_range[key] = (min(first, seen), max(last, seen))
    return seen_range


@pytest.mark.parametrize("pending_bound", [7, 200_000])
def test_batches_settled_together_equal_a_brute_force_count(monkeypatch, pending_bound):
    """Events counted by their bytes across batches with different object times
    (two of them on another day), settled mid-stream or at the end."""
    import jobs.missing_symbols.aggregate as aggregate_module

    monkeypatch.setattr(aggregate_module, "PENDING_ENTRIES", pending_bound)
    rng = random.Random(pending_bound)
    pool = symbols(rng, 30)
    batches = [
        (random_events(rng, pool, 400), T0 + offset) for offset in (0, 50, -20, 86400, 86400 + 5)
    ]
    total = Aggregate()
    for events, object_time in batches:
        aggregate_batch(
            chunks(encode_events(events), 999),
            object_time,
            chunk_size=1024,
            into=total,
            batch=object_time,
        )
    total.settle()
    assert total.events == 2000
    assert as_totals(total) == brute_force(batches)
    assert first_last(total) == brute_first_last(batches)


def test_a_bad_event_found_when_settling_names_its_batch_and_position():
    good = {"debug_file": "a.pdb", "debug_id": ID}
    bad = {"debug_file": "a.pdb", "debug_id": "nothex"}
    total = Aggregate()
    aggregate_batch([encode_events([good, good])], T0, into=total, batch="first")
    aggregate_batch([encode_events([good, good, bad, bad])], T0, into=total, batch="second")
    aggregate_batch([encode_events([good])], T0, into=total, batch="third")
    with pytest.raises(BadBatch) as caught:
        total.settle()
    assert (caught.value.batch, caught.value.event, caught.value.kind) == (
        "second",
        3,
        "invalid debug id",
    )


def test_an_invalid_event_before_a_malformed_byte_is_the_fault_reported():
    good = {"debug_file": "a.pdb", "debug_id": ID}
    data = encode_events([good, {"debug_file": "a.pdb"}, good])
    with pytest.raises(BadBatch) as caught:
        aggregate_batch([data + b"\xc1"], T0)
    assert (caught.value.kind, caught.value.event) == ("missing key", 2)


def test_events_that_never_repeat_are_counted_with_bounded_pending_memory(monkeypatch):
    import jobs.missing_symbols.aggregate as aggregate_module

    monkeypatch.setattr(aggregate_module, "PENDING_ENTRIES", 100)
    events = [{"debug_file": "a.pdb", "debug_id": ID, "seen_at": T0 + i} for i in range(1000)]
    total = Aggregate()
    aggregate_batch([encode_events(events)], T0, into=total)
    assert total.pending_entries < 100
    total.settle()
    [(key, entry)] = total.counts.items()
    assert entry == [1000, T0, T0 + 999]


def test_one_day_per_symbol_is_false_when_a_symbol_spans_two_days():
    event = {"debug_file": "a.pdb", "debug_id": ID}
    one = aggregate_batch([encode_events([event, event, dict(event, code_id=None)])], T0)
    assert one.one_day_per_symbol()
    two = aggregate_batch([encode_events([event, dict(event, seen_at=T0 - 86400)])], T0)
    assert not two.one_day_per_symbol()
    merged = aggregate_batch([encode_events([event])], T0)
    merged.merge(aggregate_batch([encode_events([event])], T0 - 86400))  # settled elsewhere
    assert not merged.one_day_per_symbol()
    other = aggregate_batch([encode_events([dict(event, debug_file="b.pdb")])], T0 - 86400)
    merged = aggregate_batch([encode_events([event])], T0)
    merged.merge(other)
    assert merged.one_day_per_symbol()
    assert all(len(a.validated) == len({key[:4] for key in a.counts}) for a in (one, two, merged))


def test_staging_chunks_hold_every_row_once():
    rng = random.Random(3)
    aggregate = aggregate_batch([encode_events(random_events(rng, symbols(rng, 50), 400))], T0)
    chunks = list(staging_chunks(aggregate, lines=7))
    assert [chunk.count("\n") for chunk in chunks[:-1]] == [7] * (len(chunks) - 1)
    assert 1 <= chunks[-1].count("\n") <= 7
    assert "".join(chunks) == "".join(staging_chunks(aggregate))
    assert len("".join(chunks).splitlines()) == len(aggregate.counts)


def test_settling_every_fault_names_each_bad_batch_once_at_its_first_fault():
    good = {"debug_file": "a.pdb", "debug_id": ID}
    no_id = {"debug_file": "b.pdb"}
    bad_count = dict(good, count=0)
    total = Aggregate()
    aggregate_batch([encode_events([good, no_id, good, bad_count])], T0, into=total, batch="one")
    aggregate_batch([encode_events([good, good])], T0, into=total, batch="fine")
    aggregate_batch(
        [encode_events([good, good, good, bad_count])], T0 - 86400, into=total, batch="two"
    )
    with pytest.raises(BadBatches) as caught:
        total.settle(every_fault=True)
    assert [(f.batch, f.event, f.kind) for f in caught.value.faults] == [
        ("one", 2, "missing key"),
        ("two", 4, "wrong type"),
    ]


def test_csv_cells_a_spreadsheet_evaluates_get_a_quote():
    import io

    from jobs.missing_symbols.reports import write_csv

    out = io.StringIO()
    write_csv([("=1+1", "+x", "-y", "@z", "\tt", "\rr", "a=b", 7)], out)
    assert out.getvalue().split("\n")[1:] == ["'=1+1,'+x,'-y,'@z,'\tt,'\rr,a=b,7", ""]
