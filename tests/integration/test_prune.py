"""jobs.prune against the real S3 server and PostgreSQL."""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import devservices
from crontabber.store import connect
from jobs.prune.rules import Kind, Protection, Rule
from jobs.prune.runs import PruneOptions, run_prune
from jobs.prune.store import PruneStore
from jobs.s3 import make_s3_client
from tests.fixtures.prune_buckets import DAY, OFFSET, by_rule, prune, symbols_bucket
from tests.helpers import REPO, SERVICES, keys_in, put_many, s3_client


def test_each_rule_deletes_only_what_it_may(prune):
    inbox = [
        "uploads/done-old.zip",
        "uploads/failed-old.zip",
        "uploads/done-new.zip",
        "uploads/pending-old.zip",
        "uploads/processing-old.zip",
        "uploads/unknown.zip",
        "missing/ok-old.msgpack",
        "missing/quarantined-old.msgpack",
        "missing/unknown.msgpack",
        "missing/ok-new.msgpack",
        "elsewhere/file.bin",
    ]
    symbols = ["reports/missing-symbols/2026-01-01.csv", "v1/xul.pdb/ABC/xul.sym", "other/keep.txt"]
    put_many(prune.inbox, inbox)
    put_many(prune.symbols, symbols)
    for key, status, age in (
        ("done-old", "done", 200),
        ("failed-old", "failed", 200),
        ("done-new", "done", 1),
        ("pending-old", "pending", 200),
        ("processing-old", "processing", 200),
    ):
        prune.upload(f"uploads/{key}.zip", status, age)
    # the same archive uploaded twice: one upload done long ago, one pending now -> keep it
    prune.upload("uploads/done-old.zip", "done", 300)
    for key, status, age in (
        ("ok-old", "ok", 200),
        ("quarantined-old", "quarantined", 200),
        ("ok-new", "ok", 1),
    ):
        prune.batch(f"missing/{key}.msgpack", status, age)
    report = prune.run()
    assert by_rule(report) == {"uploads": (2, 20, 0), "batches": (1, 10, 0), "reports": (1, 10, 0)}
    assert keys_in(prune.inbox) == set(inbox) - {
        "uploads/done-old.zip",
        "uploads/failed-old.zip",
        "missing/ok-old.msgpack",
    }
    assert keys_in(prune.symbols) == {"v1/xul.pdb/ABC/xul.sym", "other/keep.txt"}


def test_objects_younger_than_the_rule_stay(prune):
    put_many(prune.symbols, ["reports/missing-symbols/a.csv"])
    assert by_rule(prune.run(now_offset=DAY * 89)) == {
        "uploads": (0, 0, 0),
        "batches": (0, 0, 0),
        "reports": (0, 0, 0),
    }
    assert keys_in(prune.symbols) == {"reports/missing-symbols/a.csv"}


def test_pending_archive_stays_even_when_another_upload_of_it_is_done(prune):
    put_many(prune.inbox, ["uploads/same.zip"])
    prune.upload("uploads/same.zip", "done", 200)
    prune.upload("uploads/same.zip", "pending", 200)
    prune.run()
    assert keys_in(prune.inbox) == {"uploads/same.zip"}


def test_extra_rules_never_touch_symbol_files_unless_named(prune):
    from jobs.prune.rules import parse_extra_rules

    put_many(prune.symbols, ["v1/a/1/a.sym", "v1/old/1/old.sym", "tmp/x", "tmp/y"])
    whole_bucket = parse_extra_rules(f"{prune.symbols}/|1")
    report = prune.run(extra=whole_bucket)
    assert keys_in(prune.symbols) == {"v1/a/1/a.sym", "v1/old/1/old.sym"}
    assert by_rule(report)[f"extra:{prune.symbols}/"] == (2, 20, 0)
    named = parse_extra_rules(f"{prune.symbols}/v1/old/|1")
    prune.run(extra=named)
    assert keys_in(prune.symbols) == {"v1/a/1/a.sym"}


def test_dry_run_deletes_nothing_and_predicts_the_real_run(prune):
    put_many(prune.symbols, [f"reports/missing-symbols/{i}.csv" for i in range(25)])
    put_many(prune.inbox, ["uploads/a.zip", "uploads/b.zip", "missing/m1"])
    prune.upload("uploads/a.zip", "done", 100)
    prune.batch("missing/m1", "ok", 100)
    before = keys_in(prune.symbols) | keys_in(prune.inbox)
    dry = prune.run(dry_run=True)
    assert keys_in(prune.symbols) | keys_in(prune.inbox) == before
    real = prune.run()
    assert (
        by_rule(dry)
        == by_rule(real)
        == {"uploads": (1, 10, 0), "batches": (1, 10, 0), "reports": (25, 250, 0)}
    )


def test_cap_stops_the_run_and_the_next_run_goes_on(prune):
    put_many(prune.symbols, [f"reports/missing-symbols/{i:02d}.csv" for i in range(10)])
    first = prune.run(cap=4)
    assert first.capped and sum(r.keys for r in first.results) == 4
    assert len(keys_in(prune.symbols)) == 6
    second = prune.run(cap=100)
    assert not second.capped and len(keys_in(prune.symbols)) == 0
    rows = prune.sql("SELECT capped FROM prune_run ORDER BY id")
    assert rows == [(True,), (False,)]


def test_a_key_the_server_cannot_delete_is_reported_and_retried_next_run(prune):
    """The filesystem behind s3proxy refuses to remove an immutable file: the
    server fails that delete (for a batch, it fails the whole batch)."""
    keys = [f"reports/missing-symbols/{i}.csv" for i in range(5)]
    put_many(prune.symbols, keys)
    stuck = devservices.current().s3_data / prune.symbols / keys[2]
    assert stuck.is_file()
    subprocess.run(["chattr", "+i", str(stuck)], check=True)
    try:
        report = prune.run(client=make_s3_client(max_attempts=1))
        (reports,) = [r for r in report.results if r.rule == "reports"]
        assert (reports.keys, reports.errors) == (4, 1)
        assert reports.error_sample[0].startswith(keys[2] + ": ")
        assert keys_in(prune.symbols) == {keys[2]}
        recorded = prune.sql(
            "SELECT keys_deleted, errors, error_sample FROM prune_rule_result WHERE rule = "
            "'reports'"
        )
        assert recorded[0][:2] == (4, 1) and keys[2] in recorded[0][2]
    finally:
        subprocess.run(["chattr", "-i", str(stuck)], check=True)
    prune.run()
    assert keys_in(prune.symbols) == set()


def test_a_batch_is_written_before_it_is_sent_and_counted_with_the_next_one(prune):
    from jobs.prune.engine import Batch, RuleResult
    from jobs.prune.runs import RunRecorder

    store = PruneStore(prune.db)
    run_id = store.start_run(False, 10, "test")
    now = [100.0]
    recorder = RunRecorder(store, run_id, interval=1.0, clock=lambda: now[0])
    recorder.rule_started(Rule("r", Kind.AGE, "b", "p/", 1))
    result = RuleResult("r")

    def deleted(batch):  # as run_prune does: the result counts, then the hook
        result.add(batch)
        recorder.batch_done(result, batch)

    def recorded():
        return prune.sql(
            "SELECT keys_deleted, bytes_freed, errors, error_sample FROM prune_rule_result WHERE "
            "run_id = %s",
            (run_id,),
        )[0]

    def intents():
        return prune.sql(
            "SELECT id, bucket, keys, sizes FROM prune_intent WHERE run_id = %s ORDER BY id",
            (run_id,),
        )

    odd = 'p/a "quoted", {braced}\\back\nline'  # any character survives the array literal
    first = recorder.intend([(odd, 4), ("p/b", 6)])
    assert intents() == [(first, "b", [odd, "p/b"], [4, 6])]  # before delete_objects
    second = recorder.intend([("p/c", 5)])
    deleted(Batch(2, 10, [], first))
    assert recorded() == (0, 0, 0, None)  # held back: rides with the next intent
    third = recorder.intend([("p/d", 1)])
    assert recorded() == (2, 10, 0, None)
    assert [row[0] for row in intents()] == [second, third]
    now[0] += 1.1  # no intent for a while: written on its own
    deleted(Batch(0, 0, ["p/c: AccessDenied"], second))
    assert recorded() == (2, 10, 1, "p/c: AccessDenied")
    assert [row[0] for row in intents()] == [third]
    deleted(Batch(1, 1, [], third))
    recorder.rule_ended(result)  # the rule's end
    assert recorded() == (3, 11, 1, "p/c: AccessDenied")
    assert intents() == []


def run_with_intent(prune, database, batch, lease):
    """A run (of another process) that wrote a batch's intent and holds a lease of ``lease``."""
    from jobs.prune.store import Intent, Settled

    conn = connect(database)
    conn.autocommit = True
    store = PruneStore(conn, lease_seconds=lease)
    run_id = store.start_run(False, 10, "other")
    store.add_rule(run_id, "reports")
    store.record(run_id, "reports", Settled(), Intent(prune.symbols, batch))
    return conn, run_id


def test_a_dead_runs_batches_are_reconciled_with_s3(prune, database):
    put_many(prune.symbols, ["keep/gone", "keep/there"])
    dead_conn, dead = run_with_intent(prune, database, [("keep/gone", 7), ("keep/there", 10)], 1.0)
    s3_client().delete_object(
        Bucket=prune.symbols, Key="keep/gone"
    )  # its delete_objects went through
    dead_conn.close()  # then it died: nothing renews its lease
    wait_until_lease_passed(prune, dead)
    prune.run()
    assert prune.sql(
        "SELECT run_id, keys_deleted, bytes_freed FROM prune_rule_result WHERE run_id = %s", (dead,)
    ) == [(dead, 1, 7)]
    assert prune.sql("SELECT run_id, keys FROM prune_intent") == []
    assert prune.sql("SELECT finished_at FROM prune_run WHERE id = %s", (dead,)) == [(None,)]
    assert keys_in(prune.symbols) == {"keep/there"}


def test_a_run_never_starts_while_another_is_live(prune, database):
    """Runs never overlap: a second run would list the keys of the first one's batches in
    flight, delete them again and count them twice (the kill drills through PgBouncer found
    it: a run killed, the next one deleting its batch's keys before the lease passed, then a
    third reconciling the dead run's intent and counting them again). Refused: exit 3."""
    from crontabber.command import ExitCode, exit_code_for
    from jobs.prune.store import PruneRunLive

    put_many(prune.symbols, ["reports/missing-symbols/a.csv", "keep/live"])
    live_conn, live = run_with_intent(prune, database, [("keep/live", 10)], 60.0)
    try:
        with pytest.raises(PruneRunLive, match=f"prune run {live}, lease live") as refused:
            prune.run()
        assert exit_code_for(refused.value) == ExitCode.ONGOING
        assert prune.sql("SELECT count(*) FROM prune_run") == [(1,)]  # the refused one wrote none
        assert keys_in(prune.symbols) == {"reports/missing-symbols/a.csv", "keep/live"}
        assert prune.sql("SELECT run_id, keys FROM prune_intent") == [(live, ["keep/live"])]
    finally:
        live_conn.close()


def wait_until_lease_passed(prune, run_id, seconds=10.0):
    """Until the database's clock is past the run's lease (the test's own clock may differ)."""
    deadline = time.monotonic() + seconds
    while prune.sql(
        "SELECT lease_until > clock_timestamp() FROM prune_run WHERE id = %s", (run_id,)
    ) == [(True,)]:
        assert time.monotonic() < deadline, f"run {run_id}'s lease never passed"
        time.sleep(0.1)


def test_a_run_killed_with_a_batch_in_flight_is_reconciled_only_once_its_lease_passed(
    prune, database
):
    """The lease tells a run in flight from a dead one: before it passes, the next run leaves
    the batch alone (its delete_objects may still be going); after, it reconciles it."""
    from jobs.prune.store import Intent, Settled

    put_many(prune.symbols, ["keep/a"])
    conn = connect(database)
    conn.autocommit = True
    store = PruneStore(conn, lease_seconds=5.0)
    run_id = store.start_run(False, 10, "host-a:1")
    store.add_rule(run_id, "reports")
    store.record(run_id, "reports", Settled(), Intent(prune.symbols, [("keep/a", 10)]))
    s3_client().delete_object(Bucket=prune.symbols, Key="keep/a")
    conn.close()  # killed: its lease runs out by itself
    from jobs.prune.store import PruneRunLive

    with pytest.raises(PruneRunLive):  # live as far as anyone can tell: no run starts
        prune.run()
    assert prune.sql("SELECT count(*) FROM prune_intent WHERE run_id = %s", (run_id,)) == [(1,)]
    wait_until_lease_passed(prune, run_id, seconds=30)
    prune.run()
    assert prune.sql("SELECT keys_deleted FROM prune_rule_result WHERE run_id = %s", (run_id,)) == [
        (1,)
    ]
    assert prune.sql("SELECT count(*) FROM prune_intent") == [(0,)]


def test_a_run_that_lost_its_lease_sends_no_more_batches(prune):
    """Fencing: once a run's lease has passed (the database did not hear from it for a whole
    lease, and another run may take it for dead), its next batch's intent is refused and it
    stops with PruneLeaseLost (exit 4, as a run fenced off), writing nothing more: what it
    settled since is counted by the run that reconciles its intents, not twice."""
    from crontabber.command import ExitCode, exit_code_for
    from jobs.prune.store import Intent, PruneLeaseLost, Settled

    store = PruneStore(prune.db, lease_seconds=2.0)
    run_id = store.start_run(False, 10, "host-a:1")
    store.add_rule(run_id, "reports")
    first = store.record(run_id, "reports", Settled(), Intent(prune.symbols, [("a", 1)]))
    assert first is not None and store.renew(run_id)
    wait_until_lease_passed(prune, run_id)
    assert not store.renew(run_id)  # passed: never renewed again
    with pytest.raises(PruneLeaseLost, match=f"prune run {run_id} lost its lease") as lost:
        store.record(
            run_id, "reports", Settled([first], keys=1, bytes=1), Intent(prune.symbols, [("b", 1)])
        )
    assert exit_code_for(lost.value) == ExitCode.FENCED
    with pytest.raises(PruneLeaseLost):  # the rule's end writes nothing either
        store.record(run_id, "reports", Settled([first], keys=1, bytes=1), None)
    assert prune.sql("SELECT keys_deleted FROM prune_rule_result WHERE run_id = %s", (run_id,)) == [
        (0,)
    ]
    # the first batch's intent stays for the run that reconciles it (which counts it once)
    assert prune.sql("SELECT keys FROM prune_intent WHERE run_id = %s", (run_id,)) == [(["a"],)]


def test_a_long_run_keeps_its_lease_by_its_heartbeat(prune):
    """A run that sends no batch for longer than its lease (a long listing) stays alive: its
    heartbeat renews the lease, so history says running and no other run reconciles it."""
    from jobs.prune.runs import Heartbeat

    store = PruneStore(prune.db, lease_seconds=2.0)
    run_id = store.start_run(False, 10, "host-a:1")
    with Heartbeat(store, run_id):
        time.sleep(5.0)
        assert not store.run_over(run_id)
        assert [row["running"] for row in store.history(1)] == [True]
    wait_until_lease_passed(prune, run_id)
    assert store.run_over(run_id)


def test_history_tells_a_running_run_from_a_killed_one(prune, database):
    """An unfinished run whose lease is live is running, not killed (history said
    "unfinished (killed?)" for both); once its lease passes unrenewed, it is dead."""
    live = connect(database)
    live.autocommit = True
    run_id = PruneStore(live, lease_seconds=1.0).start_run(False, 10, "host-a:1")
    reader = PruneStore(prune.db)
    try:
        assert [row["running"] for row in reader.history(5)] == [True]
        live.close()  # the process died: nothing renews the lease
        wait_until_lease_passed(prune, run_id)
        assert [(row["id"], row["running"]) for row in reader.history(5)] == [(run_id, False)]
    finally:
        if not live.closed:
            live.close()


def test_a_run_of_the_release_before_the_lease_is_judged_by_its_advisory_lock(prune, database):
    """Rolling deploy: a run started by the release before migration 0015 has no lease; while
    its session holds its advisory lock it is running (not reconciled), then dead. That release
    ran only on direct connections (behind a pooler the lock outlived the run), so its session
    is direct here in either lane."""
    old = connect(database.replace(port=SERVICES.pg_port))
    old.autocommit = True
    with old.cursor() as cur:  # what that release's start_run did
        cur.execute(
            "WITH run AS (INSERT INTO prune_run (dry_run, cap, holder)"
            " VALUES (false, 10, 'old:1') RETURNING id)"
            " SELECT id, pg_advisory_lock(hashtext('prune_run'), id::int) FROM run"
        )
        run_id = cur.fetchone()[0]
    store = PruneStore(prune.db)
    try:
        assert not store.run_over(run_id)
        assert [row["running"] for row in store.history(1)] == [True]
        old.close()
        deadline = time.monotonic() + 10  # the server ends the session a moment later
        while not store.run_over(run_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.run_over(run_id)
        assert [row["running"] for row in store.history(1)] == [False]
    finally:
        if not old.closed:
            old.close()
