"""crontabber.reruns.store against a real PostgreSQL: a rerun's run is a ledger row fenced by its
own status (the job's row is never touched), each method one transaction over the state
store's connection."""

import datetime as dt

from crontabber.reruns.store import RerunStore
from crontabber.state import RunEnd, RunStatus
from crontabber.store import StateStore, connect

DAY = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def test_a_rerun_found_abandoned_that_comes_back_is_fenced_off(database, db_conn):
    store = StateStore(connect(database), database)
    try:
        reruns = RerunStore(store)
        claim, root, cap = reruns.start_rerun("x", ("cron-1", 811), [DAY])
        assert (root, cap) == (claim.run_id, 1)
        assert reruns.abandon_run(claim.run_id, "its lease expired") is True
        assert reruns.abandon_run(claim.run_id, "again") is False  # no longer running
        assert reruns.finish_lane(claim, RunEnd(RunStatus.SUCCEEDED)) is False
    finally:
        store.close()
    with db_conn.cursor() as cur:
        cur.execute("SELECT status FROM crontabber_run WHERE run_id = %s", (claim.run_id,))
        assert cur.fetchall() == [(RunStatus.FENCED_OFF.value,)]
        cur.execute("SELECT exc_value FROM crontabber_log WHERE run_id = %s", (claim.run_id,))
        (logged,) = cur.fetchall()
        assert logged[0].startswith(
            f"LeaseLost('run {claim.run_id} was fenced off; the job succeeded"
        )
        cur.execute("SELECT count(*) FROM crontabber WHERE app_name = 'x'")
        assert cur.fetchone() == (0,)  # the lane never writes the job's row


def test_a_second_run_joins_the_rerun_it_names(database):
    store = StateStore(connect(database), database)
    try:
        reruns = RerunStore(store)
        first, root, cap = reruns.start_rerun(
            "x", ("cron-1", 811), [DAY, DAY + dt.timedelta(days=1)], parallel=2
        )
        second, joined, joined_cap = reruns.start_rerun(
            "x", ("cron-2", 90), [], resumed_from=first.run_id
        )
        assert (root, cap) == (first.run_id, 2) and (joined, joined_cap) == (first.run_id, 2)
        record = reruns.rerun_record(second.run_id, 300)
        assert (
            record is not None
            and record.run_id == first.run_id
            and list(record.plan)
            == [
                DAY,
                DAY + dt.timedelta(days=1),
            ]
        )
    finally:
        store.close()
