"""jobs.prune by inventory against the real S3 server and PostgreSQL: the database's say
and the cap hold as when listing."""

from __future__ import annotations

import dataclasses
import datetime as dt

from jobs.prune.inventory import InventoryLocation
from jobs.prune.runs import PruneOptions, run_prune
from jobs.prune.store import PruneStore
from jobs.s3 import make_s3_client
from tests.fixtures.prune_buckets import OFFSET, by_rule, prune, symbols_bucket
from tests.fixtures.s3_inventory import listing, write_inventory
from tests.helpers import keys_in, put_many, s3_client


def run_by_inventory(prune, dest, cap=100000):
    location = InventoryLocation(dest, "inv", "", dt.timedelta(hours=48))
    with prune.db.cursor() as cur:
        cur.execute("SELECT clock_timestamp()")
        now = cur.fetchone()[0] + OFFSET
    options = dataclasses.replace(
        PruneOptions(prune.rules(), prune.protection, cap, False, 4), inventory=location
    )
    return run_prune(make_s3_client(), PruneStore(prune.db), options, now)


def reports(prune, dest):
    """Inventories of both buckets, taken (as the run's clock sees it) an hour ago."""
    taken = dt.datetime.now(dt.timezone.utc) + OFFSET - dt.timedelta(hours=1)
    for bucket in (prune.inbox, prune.symbols):
        write_inventory(s3_client(), dest, "inv", bucket, listing(s3_client(), bucket), taken=taken)


def test_the_database_decides_for_uploads_and_batches(prune):
    inbox = [
        "uploads/done-old.zip",
        "uploads/pending-old.zip",
        "uploads/unknown.zip",
        "missing/ok-old.msgpack",
        "missing/quarantined-old.msgpack",
    ]
    put_many(prune.inbox, inbox)
    put_many(prune.symbols, ["reports/missing-symbols/a.csv", "v1/xul.pdb/ABC/xul.sym"])
    prune.upload("uploads/done-old.zip", "done", 200)
    prune.upload("uploads/pending-old.zip", "pending", 200)
    prune.batch("missing/ok-old.msgpack", "ok", 200)
    prune.batch("missing/quarantined-old.msgpack", "quarantined", 200)
    reports(prune, prune.symbols)  # the reports go to the symbols bucket, under inv/
    report = run_by_inventory(prune, prune.symbols)
    assert by_rule(report) == {"uploads": (1, 10, 0), "batches": (1, 10, 0), "reports": (1, 10, 0)}
    assert keys_in(prune.inbox) == {
        "uploads/pending-old.zip",
        "uploads/unknown.zip",
        "missing/quarantined-old.msgpack",
    }
    assert "v1/xul.pdb/ABC/xul.sym" in keys_in(prune.symbols)


def test_the_cap_holds(prune):
    put_many(prune.symbols, [f"reports/missing-symbols/{i:04d}.csv" for i in range(2500)])
    reports(prune, prune.symbols)
    report = run_by_inventory(prune, prune.symbols, cap=1200)
    assert report.capped and by_rule(report)["reports"] == (1200, 12000, 0)
    left = keys_in(prune.symbols)
    assert len([k for k in left if k.startswith("reports/")]) == 1300


def test_a_forged_key_with_dot_segments_is_refused_never_deleted(prune):
    """The third review's N-7: a row whose key leaves the rule's prefix once its ``..`` are
    resolved (s3proxy's file store resolves them, for HEAD and DELETE alike) passes a text
    prefix check; it is refused, and the protected symbol file it points at stays."""
    put_many(
        prune.symbols,
        ["reports/missing-symbols/old-1.csv", "v1/prot.pdb/ABC/prot.sym", "v1/prot.pdb/ABC/p2.sym"],
    )
    objects = listing(s3_client(), prune.symbols)
    forged = []
    for obj in objects:
        if obj["Key"].startswith("v1/"):  # the same file, under a key inside the rule's prefix
            forged.append({**obj, "Key": f"reports/missing-symbols/../../{obj['Key']}"})
            forged.append({**obj, "Key": f"reports/missing-symbols//../{obj['Key']}"})
    taken = dt.datetime.now(dt.timezone.utc) + OFFSET - dt.timedelta(hours=1)
    write_inventory(s3_client(), prune.symbols, "inv", prune.symbols, objects + forged, taken=taken)
    write_inventory(
        s3_client(),
        prune.symbols,
        "inv",
        prune.inbox,
        listing(s3_client(), prune.inbox),
        taken=taken,
    )
    report = run_by_inventory(prune, prune.symbols)
    assert by_rule(report)["reports"] == (1, 10, 0)
    assert {"v1/prot.pdb/ABC/prot.sym", "v1/prot.pdb/ABC/p2.sym"} <= keys_in(prune.symbols)
    assert "reports/missing-symbols/old-1.csv" not in keys_in(prune.symbols)
