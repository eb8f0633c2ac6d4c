"""The prune job's inventory mode, pure parts: the manifest's checks, the CSV rows, the pace."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json

import pytest

from crontabber.config.options import DotDict
from crontabber.errors import ConfigurationError
from jobs.prune.engine import Pace
from jobs.prune.inventory import InventoryRefused, Manifest, _csv_rows
from jobs.prune.runs import PruneOptions

NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.timezone.utc)


def manifest_body(**changes):
    doc = {
        "sourceBucket": "symbols",
        "creationTimestamp": str(int(NOW.timestamp() * 1000)),
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate, ETag",
        "files": [{"key": "inv/symbols/daily/data/a.csv.gz", "size": 10, "MD5checksum": "AB"}],
    }
    doc.update(changes)
    return json.dumps(doc).encode()


def test_a_manifest_is_read():
    m = Manifest.parse("dest", "inv/symbols/daily/2026-11-22T12-00Z/manifest.json", manifest_body())
    assert (m.source_bucket, m.created, m.files[0].md5) == ("symbols", NOW, "ab")
    assert m.address == "s3://dest/inv/symbols/daily/2026-11-22T12-00Z/manifest.json"
    m.check("symbols", NOW + dt.timedelta(hours=47), dt.timedelta(hours=48))


def test_without_a_creation_time_the_folder_says_when():
    body = json.loads(manifest_body())
    del body["creationTimestamp"]
    m = Manifest.parse(
        "d", "p/symbols/daily/2026-11-20T01-00Z/manifest.json", json.dumps(body).encode()
    )
    assert m.created == dt.datetime(2026, 11, 20, 1, 0, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize(
    "changes, problem",
    [
        ({"fileFormat": "Parquet"}, "fileFormat is 'Parquet', only CSV is read"),
        ({"fileSchema": "Bucket, Key, Size"}, "fileSchema lacks LastModifiedDate"),
        ({"files": [{"key": "x"}]}, "not a readable manifest"),
    ],
)
def test_what_a_manifest_lacks_is_refused(changes, problem):
    with pytest.raises(InventoryRefused, match=problem):
        Manifest.parse("d", "k/x/y/2026-11-22T12-00Z/manifest.json", manifest_body(**changes))


def test_an_old_report_or_another_buckets_is_refused():
    m = Manifest.parse("d", "k/symbols/daily/2026-11-22T12-00Z/manifest.json", manifest_body())
    with pytest.raises(InventoryRefused, match="taken 49.0 h ago, over inventory_max_age_hours=48"):
        m.check("symbols", NOW + dt.timedelta(hours=49), dt.timedelta(hours=48))
    with pytest.raises(InventoryRefused, match="it lists bucket 'symbols', not 'inbox'"):
        m.check("inbox", NOW, dt.timedelta(hours=48))


def test_rows_decode_keys_and_skip_other_versions_and_delete_markers():
    columns = [
        "Bucket",
        "Key",
        "VersionId",
        "IsLatest",
        "IsDeleteMarker",
        "Size",
        "LastModifiedDate",
        "ETag",
    ]
    lines = [
        [
            "symbols",
            "a+b%2Bc/d%20e.sym",
            "1",
            "true",
            "false",
            "5",
            "2026-01-01T00:00:00.000Z",
            "e1",
        ],
        ["symbols", "old", "0", "false", "false", "5", "2026-01-01T00:00:00.000Z", "e2"],
        ["symbols", "gone", "2", "true", "true", "", "2026-01-01T00:00:00.000Z", ""],
        ["elsewhere", "x", "1", "true", "false", "5", "2026-01-01T00:00:00.000Z", "e3"],
    ]
    text = io.StringIO()
    csv.writer(text).writerows(lines)
    text.seek(0)
    rows = list(_csv_rows(csv.reader(text), {c: i for i, c in enumerate(columns)}, "symbols"))
    assert [(r.key, r.size, r.etag) for r in rows] == [("a b+c/d e.sym", 5, "e1")]
    assert rows[0].modified == dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_the_pace_sends_a_seconds_worth_at_a_time():
    clock = FakeClock()
    pace = Pace(250, clock=clock, sleep=clock.sleep)
    chunks = list(pace.chunks([(str(i), 1) for i in range(1000)]))
    assert [len(c) for c in chunks] == [250] * 4
    sent = []
    for chunk in chunks:
        pace.wait()
        clock.now += 0.2  # confirming the chunk
        sent.append(clock.now)
        pace.sent(len(chunk))
    assert sent == pytest.approx([0.2, 1.4, 2.6, 3.8])  # never two within a second


def test_no_pace_cuts_batches_of_a_thousand_and_never_sleeps():
    pace = Pace(0, sleep=lambda s: pytest.fail("slept"))
    assert [len(c) for c in pace.chunks([("k", 1)] * 2500)] == [1000, 1000, 500]
    pace.sent(1000)
    pace.wait()


def config(**changes):
    values = {
        "inbox_bucket": "inbox",
        "uploads_prefix": "inbox/",
        "upload_days": 30,
        "missing_prefix": "missing/",
        "batch_days": 30,
        "symbols_bucket": "symbols",
        "symbols_prefix": "v1/",
        "reports_prefix": "reports/",
        "report_days": 90,
        "extra_rules": "",
        "cap": 10,
        "threads": 4,
        "dry_run": False,
        "lease_seconds": 60,
        "deletes_per_second": 0,
        "source": "list",
        "inventory_bucket": "",
        "inventory_prefix": "",
        "inventory_id": "",
        "inventory_max_age_hours": 48,
    }
    values.update(changes)
    return DotDict(values)


def test_options_say_where_the_keys_come_from():
    assert PruneOptions.from_config(config()).inventory is None
    options = PruneOptions.from_config(
        config(
            source="inventory",
            inventory_bucket="inv",
            inventory_prefix="reports",
            deletes_per_second=3000,
        )
    )
    assert (
        options.inventory is not None and options.inventory.folder("symbols") == "reports/symbols/"
    )
    assert options.rate == 3000


@pytest.mark.parametrize(
    "changes, where",
    [
        ({"source": "both"}, "prune-s3.source"),
        ({"source": "inventory"}, "prune-s3.inventory_bucket"),
        (
            {"source": "inventory", "inventory_bucket": "i", "inventory_max_age_hours": 0},
            "prune-s3.inventory_max_age_hours",
        ),
        ({"deletes_per_second": -1}, "prune-s3.deletes_per_second"),
    ],
)
def test_bad_options_are_refused(changes, where):
    with pytest.raises(ConfigurationError, match=where):
        PruneOptions.from_config(config(**changes))


def test_keys_a_file_store_would_resolve_are_ambiguous_and_never_allowed():
    from jobs.prune.rules import Kind, Protection, Rule, ambiguous_key

    for key in ("r/../v1/x", "r/./x", "..", "/v1/x", "r//x", "r/x/.."):
        assert ambiguous_key(key), key
    for key in ("r/x", "r/", "r/..x", "r/x..", "r/.hidden"):
        assert not ambiguous_key(key), key
    rule = Rule("reports", Kind.AGE, "b", "r/", 1)
    protection = Protection("b", "v1/")
    assert protection.allows(rule, "r/x") and not protection.allows(rule, "r/../v1/x")
