"""The rerun's plan (crontabber.reruns): which intervals, in which order, which skipped and why."""

from __future__ import annotations

import datetime as dt

import pytest

from crontabber.reruns import IntervalRecord, RerunRecord, parse_only, plan_steps, step_lines, to_run

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
    assert to_run(plan_steps(DATES, RECORDS, parse_only("failed,missing"), True)) == [DATES[4], DATES[3], DATES[1]]


def test_a_resume_skips_what_the_stopped_run_finished_in_its_order():
    stopped = RerunRecord(12, "x", "rerun", "cron-1:5", "abandoned", tuple(DATES[::-1]), True, frozenset(DATES[3:]))
    steps = plan_steps(list(stopped.plan), RECORDS, done_by=stopped)
    assert to_run(steps) == [DATES[2], DATES[1], DATES[0]]
    assert steps[0].skip == "done by run 12 before it stopped"


def test_a_held_interval_is_run_after_a_wait_and_the_dry_run_says_so():
    held = {DATES[0]: IntervalRecord(DATES[0], "running", 8, "scheduled", "cron-2:7")}
    steps = plan_steps(DATES[:2], held)
    assert to_run(steps) == DATES[:2]
    lines = step_lines(steps, lambda when: f"would write {when:%d}")
    assert lines == [
        "2026-11-01 00:00 UTC: would write 01; held now by run 8 (scheduled) on cron-2:7: waits for it",
        "2026-11-02 00:00 UTC: would write 02",
    ]
    only = plan_steps(DATES[:1], held, parse_only("failed"))
    assert step_lines(only) == ["2026-11-01 00:00 UTC: skipped: running now (run 8, scheduled, on cron-2:7)"]


def test_only_refuses_other_values():
    with pytest.raises(ValueError, match="'done' is not one of failed, missing"):
        parse_only("failed,done")
    assert parse_only("") == frozenset()
