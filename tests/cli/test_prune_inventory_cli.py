"""jobs.prune with source=inventory, through its entry points, against a real S3 Inventory
report written into the local S3 server (issue #34 item 5)."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest

from tests.fixtures.prune_buckets import buckets, configure_prune, prune_cmd  # noqa: F401 - the fixture
from tests.fixtures.s3_inventory import (
    corrupt_first_data_file,
    listing,
    wait_a_second,
    write_inventory,
)
from tests.helpers import keys_in, put_many, s3_client

REPORTS = "reports/missing-symbols/"


@pytest.fixture
def inventory(s3_bucket):
    """The bucket S3 Inventory writes to (the inbox fixture's bucket is another)."""
    client = s3_client()
    name = f"{s3_bucket}-inv"[:63]
    client.create_bucket(Bucket=name)
    yield name
    for key in keys_in(name):
        client.delete_object(Bucket=name, Key=key)
    client.delete_bucket(Bucket=name)


def by_inventory(cli, buckets, inventory, inbox_report=True, **extra):
    """Prune by inventory; the inbox (whose rules come first) has an empty report."""
    configure_prune(
        cli,
        *buckets,
        source="inventory",
        inventory_bucket=inventory,
        inventory_prefix="inv",
        **extra,
    )
    if inbox_report:
        write_inventory(s3_client(), inventory, "inv", buckets[0], [])


def test_inventory_mode_deletes_what_the_newest_report_allows_and_nothing_else(
    cli, buckets, inventory
):
    inbox, symbols = buckets
    by_inventory(cli, buckets, inventory)
    client = s3_client()
    old = [f"{REPORTS}{i:03d}.csv" for i in range(30)]
    put_many(
        symbols, old + ["v1/a/1/a.sym", "other/keep.txt", f"{REPORTS}only-in-older-report.csv"]
    )
    before = listing(client, symbols)
    # an older report lists one more key, which the newest one does not: only the newest counts
    write_inventory(
        client,
        inventory,
        "inv",
        symbols,
        before,
        taken=dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2),
    )
    newest = [obj for obj in before if not obj["Key"].endswith("only-in-older-report.csv")]
    manifest = write_inventory(client, inventory, "inv", symbols, newest)
    wait_a_second()
    put_many(symbols, [old[0]])  # uploaded again after the report: must stay
    client.delete_object(Bucket=symbols, Key=old[1])  # gone since: deleting it is a no-op
    put_many(symbols, [f"{REPORTS}after.csv"])  # not in the report: not touched
    time.sleep(1.2)  # all past the rules' age

    dry = prune_cmd(cli, "run", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "reports: would delete 28 keys, 280 bytes, 0 errors" in dry.stdout
    assert len(keys_in(symbols)) == 33  # the dry run deleted nothing

    done = cli.run("--job", "prune-s3", "--force")
    assert done.returncode == 0, done.stderr
    assert keys_in(symbols) == {
        old[0],
        "v1/a/1/a.sym",
        "other/keep.txt",
        f"{REPORTS}only-in-older-report.csv",
        f"{REPORTS}after.csv",
    }
    history = prune_cmd(cli, "history").stdout
    assert f"reports (by s3://{inventory}/{manifest}): 28 keys, 280 bytes, 0 errors" in history
    assert cli.crontab.sql("SELECT count(*) AS n FROM prune_intent")[0]["n"] == 0


def test_a_report_older_than_the_maximum_age_is_refused_in_one_line(cli, buckets, inventory):
    inbox, symbols = buckets
    by_inventory(cli, buckets, inventory, inventory_max_age_hours=48)
    put_many(symbols, [f"{REPORTS}{i}.csv" for i in range(3)])
    manifest = write_inventory(
        s3_client(),
        inventory,
        "inv",
        symbols,
        listing(s3_client(), symbols),
        taken=dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=49),
    )
    time.sleep(1.2)
    done = prune_cmd(cli, "run")
    assert done.returncode == 5  # the work ran and failed (exit-codes.md)
    assert done.stderr == (
        f"python -m jobs.prune: inventory s3://{inventory}/{manifest} refused: "
        "taken 49.0 h ago, over inventory_max_age_hours=48: it does not know "
        "what changed since\n"
    )
    assert len(keys_in(symbols)) == 3
    assert "refused: taken 49.0 h ago" in prune_cmd(cli, "history").stdout


def test_a_corrupt_data_file_is_refused_by_its_md5(cli, buckets, inventory):
    inbox, symbols = buckets
    by_inventory(cli, buckets, inventory)
    put_many(symbols, [f"{REPORTS}{i}.csv" for i in range(3)])
    manifest = write_inventory(
        s3_client(), inventory, "inv", symbols, listing(s3_client(), symbols)
    )
    data = corrupt_first_data_file(s3_client(), inventory, manifest)
    time.sleep(1.2)
    done = prune_cmd(cli, "run")
    assert done.returncode == 5  # the work ran and failed (exit-codes.md)
    assert done.stderr.startswith(
        f"python -m jobs.prune: inventory s3://{inventory}/{data} refused: MD5 "
    )
    assert done.stderr.count("\n") == 1 and "the manifest says" in done.stderr
    assert len(keys_in(symbols)) == 3


def test_no_report_for_the_bucket_is_refused(cli, buckets, inventory):
    by_inventory(cli, buckets, inventory, inbox_report=False)
    done = prune_cmd(cli, "run")
    assert done.returncode == 5  # the work ran and failed (exit-codes.md)
    assert f"inventory s3://{inventory}/inv/" in done.stderr
    assert "refused: no inventory configuration there" in done.stderr


def test_deletes_are_paced_per_prefix(cli, buckets, inventory):
    """deletes_per_second=250: 1,000 keys go in 4 chunks a second apart, never faster, seen
    from outside by listing the bucket while the run deletes. A key goes only once its chunk
    is sent, and the k-th chunk is sent at least k - 1 seconds after the run began: so by
    any moment t, at most 250 * (floor(t - begun) + 1) keys are gone. A loaded machine only
    makes the run slower, which this allows; how near the cap it comes is a speed, measured
    by bench/bench_prune_pace.py."""
    inbox, symbols = buckets
    by_inventory(cli, buckets, inventory, deletes_per_second=250)
    keys = [f"{REPORTS}{i:04d}.csv" for i in range(1000)]
    put_many(symbols, keys)
    write_inventory(s3_client(), inventory, "inv", symbols, listing(s3_client(), symbols))
    time.sleep(1.2)
    samples: list[tuple[float, int]] = []  # (when the listing ended, keys left)
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            left = len(keys_in(symbols))
            samples.append((time.monotonic(), left))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    begun = time.monotonic()
    watcher.start()
    try:
        done = prune_cmd(cli, "run")
    finally:
        took = time.monotonic() - begun
        stop.set()
        watcher.join()
    assert done.returncode == 0, done.stderr
    assert keys_in(symbols) == set()
    assert took >= 3.0  # the 4th chunk went at least 3 s after the 1st
    gone = [(t - begun, 1000 - left) for t, left in samples]
    over = [(since, keys) for since, keys in gone if keys > 250 * (int(since) + 1)]
    assert not over, (over, samples)  # (seconds since the start, keys gone) faster than the cap
    # seen going in steps over the seconds, not at once (paced: about 3 s; a loaded machine
    # only stretches it, unless a listing took the best part of a second)
    partly = [t for t, left in samples if 0 < left < 1000]
    assert partly and partly[-1] - partly[0] >= 1.5, samples
