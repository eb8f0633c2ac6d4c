"""The rerun's plan (crontabber.reruns.plan): which intervals, in which order, which skipped
and why."""

from __future__ import annotations

import datetime as dt

import pytest

from crontabber.reruns.plan import (
    IntervalRecord,
    RerunRecord,
    parse_only,
    plan_steps,
    step_lines,
    to_run,
)

DAY = dt.timedelta(days=1)
D0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
DATES = [D0 + i * DAY for i in range(5)]
RECORDS = {
    DATES[0]: IntervalRecord(DATES[0], "succeeded", 3, "scheduled", "cron-1:1"),
    DATES[1]: IntervalRecord(DATES[1], "failed", 4, "scheduled", "cron-1:1"),
    DATES[2]: IntervalRecord(DATES[2], None, logged=True),  # an older release's success
    DATES[3]: IntervalRecord(DATES[3], "running", 9, "scheduled", "cron-2:7", expired=True),
    # DATES[4]: never run
}


def test_every_interval_oldest_first_by_default_and_newest_first_when_asked():
    assert to_run(plan_steps(DATES, RECORDS)) == DATES
    assert to_run(plan_steps(DATES, RECORDS, newest_first=True)) == DATES[::-1]


def test_only_failed_takes_failed_and_dead_claims_only_missing_the_never_run():
    failed = plan_steps(DATES, RECORDS, parse_only("failed"))
    assert to_run(failed) == [DATES[1], DATES[3]]
    skips = {step.when: step.skip for step in failed}
    assert skips[DATES[0]] == "its last unit succeeded (run 3)"
    assert skips[DATES[2]] == "its last unit succeeded"
    assert skips[DATES[4]] == "no unit recorded; --only failed leaves it"
    missing = plan_steps(DATES, RECORDS, parse_only("missing"))
    assert to_run(missing) == [DATES[4]]
    assert {s.when: s.skip for s in missing}[
        DATES[1]
    ] == "its last unit failed (failed, run 4); --only missing leaves it"
    assert to_run(plan_steps(DATES, RECORDS, parse_only("failed,missing"), True)) == [
        DATES[4],
        DATES[3],
        DATES[1],
    ]


def test_a_resume_skips_what_the_stopped_run_finished_in_its_order():
    stopped = RerunRecord(
        12, "x", "rerun", "cron-1:5", "abandoned", tuple(DATES[::-1]), True, frozenset(DATES[3:])
    )
    steps = plan_steps(list(stopped.plan), RECORDS, done_by=stopped)
    assert to_run(steps) == [DATES[2], DATES[1], DATES[0]]
    assert steps[0].skip == "done by run 12 before it stopped"


def test_a_held_interval_is_run_after_a_wait_and_the_dry_run_says_so():
    held = {DATES[0]: IntervalRecord(DATES[0], "running", 8, "scheduled", "cron-2:7")}
    steps = plan_steps(DATES[:2], held)
    assert to_run(steps) == DATES[:2]
    lines = step_lines(steps, lambda when: f"would write {when:%d}")
    assert lines == [
        "2026-11-01 00:00 UTC: would write 01; held now by run 8 (scheduled) on cron-2:7: waits "
        "for it",
        "2026-11-02 00:00 UTC: would write 02",
    ]
    only = plan_steps(DATES[:1], held, parse_only("failed"))
    assert step_lines(only) == [
        "2026-11-01 00:00 UTC: skipped: running now (run 8, scheduled, on cron-2:7)"
    ]


def test_only_refuses_other_values():
    with pytest.raises(ValueError, match="'done' is not one of failed, missing"):
        parse_only("failed,done")
    assert parse_only("") == frozenset()


def _row(when, **kw):
    from crontabber.reruns.plan import PlanRow

    return PlanRow(when, **kw)


SINCE = D0 + 30 * DAY
RUNNING = {"status": "running", "run_status": "running", "kind": "rerun"}


def test_pick_next_takes_the_first_free_interval_while_fewer_than_n_are_held():
    from crontabber.reruns.plan import Pick, pick_next

    rows = [
        _row(DATES[0], done=True),
        _row(DATES[1], run_id=5, holder="a:1", in_group=True, **RUNNING),
        _row(DATES[2], run_id=9, holder="b:1", **{**RUNNING, "kind": "scheduled"}),
        _row(DATES[3]),
        _row(DATES[4]),
    ]
    never = lambda holder: False  # noqa: E731
    assert pick_next(rows, 2, False, SINCE, never) == Pick(when=DATES[3])
    assert (
        pick_next(rows, 1, False, SINCE, never).wait
        == "1 interval(s) of the rerun are running, at most 1 at once"
    )
    # strictly in order: the first left is held, so it waits for it
    assert (
        pick_next(rows, 1, True, SINCE, never).wait
        == "2026-11-02 00:00 UTC: held by run 5 (rerun) on a:1"
    )
    # a holder of this host whose pid is gone is abandoned first
    assert pick_next(rows, 2, True, SINCE, lambda holder: holder == "a:1") == Pick(gone=(5,))
    # expired claims and claims of runs no longer running are free
    free = [_row(DATES[1], run_id=5, holder="a:1", expired=True, **RUNNING)]
    free.append(_row(DATES[2], run_id=6, holder="a:2", **{**RUNNING, "run_status": "abandoned"}))
    assert pick_next(free, 1, True, SINCE, never) == Pick(when=DATES[1])
    assert pick_next(free[1:], 1, True, SINCE, never) == Pick(when=DATES[2])


def test_pick_next_leaves_what_failed_in_the_group_since_it_started_and_ends_when_nothing_is_left():
    from crontabber.reruns.plan import Pick, pick_next

    failed = {"status": "failed", "run_id": 5, "in_group": True, "run_status": "failed"}
    rows = [_row(DATES[0], done=True), _row(DATES[1], ended=SINCE + DAY, **failed)]
    assert pick_next(rows, 2, False, SINCE, lambda h: False) == Pick()  # nothing left for it
    # a run started after that failure (a resume) tries it again
    assert pick_next(rows, 2, False, SINCE + 2 * DAY, lambda h: False) == Pick(when=DATES[1])
    # what other runs hold is waited for, not left: a peer may still die holding it
    held = [
        _row(DATES[0], done=True),
        _row(DATES[1], run_id=7, holder="c:1", in_group=True, **RUNNING),
    ]
    assert pick_next(held, 3, False, SINCE, lambda h: False).wait.startswith(
        "the 1 interval(s) left are running"
    )


def test_dependants_parents_first_and_their_intervals_on_the_same_days():
    from crontabber.reruns.plan import dependants, same_days

    graph = {"a": (), "b": ("a",), "c": ("b",), "d": ("a", "c"), "e": (), "f": ("e",)}
    assert dependants(graph, "a") == ["b", "c", "d"]
    assert dependants(graph, "c") == ["d"] and dependants(graph, "d") == []

    def hourly(day: dt.date) -> list[dt.datetime]:
        return [dt.datetime.combine(day, dt.time(h, tzinfo=dt.timezone.utc)) for h in (0, 12)]

    newest_first = [DATES[2] + dt.timedelta(hours=3), DATES[0] + dt.timedelta(hours=3)]
    assert same_days(newest_first, hourly) == [*hourly(DATES[2].date()), *hourly(DATES[0].date())]
