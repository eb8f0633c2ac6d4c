"""What reads a schedule, given a cron expression or a zone: reruns' intervals, the alerts'
late rule, the Sentry monitor, the views. Expected times are worked out in the comments."""

from __future__ import annotations

import datetime as dt

import pytest

from crontabber.alerts.rules import AlertRules, Watched, late
from crontabber.config.catalog import Job
from crontabber.schedule import parse_job_entry, parse_schedule
from crontabber.scheduling import backfill_dates, next_interval, rerun_dates
from crontabber.sentry import monitor_config
from crontabber.state import JobState
from crontabber.views import job_view

UTC = dt.timezone.utc
H = dt.timedelta(hours=1)
FRIDAY, SATURDAY, MONDAY = dt.date(2026, 11, 27), dt.date(2026, 11, 28), dt.date(2026, 11, 30)
SPRING_EVE, SPRING_AFTER = dt.date(2026, 3, 7), dt.date(2026, 3, 9)  # New York's spring forward


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


MONDAY_0300 = at("2026-11-30 02:00")  # 03:00 in Berlin (CET)


def test_a_cron_jobs_rerun_intervals_are_its_fire_times_on_the_zones_days():
    # Weekdays at 03:00 in Berlin, 2026-11-27 (Friday) to 2026-11-30 (Monday): Friday's and
    # Monday's, 03:00 CET = 02:00 UTC; Saturday and Sunday have none.
    schedule = parse_schedule("0 3 * * 1-5", None, "Europe/Berlin")
    days = rerun_dates(schedule, None, FRIDAY, MONDAY, at("2026-12-05 00:00"))
    assert days == [at("2026-11-27 02:00"), at("2026-11-30 02:00")]
    # only those before now: at 01:00 UTC on Monday, Monday's has not come
    early = at("2026-11-30 01:00")
    assert rerun_dates(schedule, None, FRIDAY, MONDAY, early) == [at("2026-11-27 02:00")]
    # Berlin's day 2026-11-28 runs from 2026-11-27 23:00 UTC: a 23:30 UTC fire is on it
    late_evening = parse_schedule("30 0 * * *", None, "Europe/Berlin")
    later = at("2026-12-01 00:00")
    assert rerun_dates(late_evening, None, SATURDAY, SATURDAY, later) == [at("2026-11-27 23:30")]


def test_a_zoned_time_of_day_reruns_on_that_zones_clock_across_a_transition():
    # 1d|02:30 in New York around 2026-03-08 (spring forward): 02:30 EST = 07:30Z, then
    # 03:00 EDT = 07:00Z (02:30 skipped), then 02:30 EDT = 06:30Z
    schedule = parse_schedule("1d", "02:30", "America/New_York")
    days = rerun_dates(schedule, None, SPRING_EVE, SPRING_AFTER, at("2026-04-01 00:00"))
    assert days == [at("2026-03-07 07:30"), at("2026-03-08 07:00"), at("2026-03-09 06:30")]
    # a backfill job's own intervals step the same way from its last success
    assert backfill_dates(at("2026-03-06 07:30"), schedule, at("2026-03-09 12:00")) == days


def test_a_backfill_cron_jobs_first_run_gets_its_last_fire_time():
    # every 6 hours from midnight UTC; at 14:10 the last fire was 12:00
    schedule = parse_schedule("0 */6 * * *", None)
    assert backfill_dates(None, schedule, at("2026-11-28 14:10")) == [at("2026-11-28 12:00")]


def test_the_late_rule_counts_from_a_cron_jobs_next_fire_time():
    # a backfill job at 03:00 Berlin on weekdays whose last interval was Friday 2026-11-27
    # 02:00Z: the next is Monday 2026-11-30 02:00Z, late after its 6 h deadline (08:00Z)
    schedule = parse_schedule("0 3 * * 1-5", None, "Europe/Berlin")
    state = JobState(app_name="job", last_success=at("2026-11-27 02:00"), next_run=MONDAY_0300)
    assert next_interval(state, schedule, True) == at("2026-11-30 02:00")
    rules = AlertRules(deadline=6 * H)
    watched = Watched("job", state, rules, schedule, True)
    assert late(watched, at("2026-11-30 07:59"), lambda: "") is None
    event = late(watched, at("2026-11-30 08:00"), lambda: "")
    assert event is not None and event.subject == f"interval {at('2026-11-30 02:00').isoformat()}"
    # not a backfill job: from its last start, the next fire time
    state = JobState(app_name="job", last_success=at("2026-11-27 02:00:07"), next_run=None)
    assert next_interval(state, schedule, False) == at("2026-11-30 02:00")


def test_sentry_gets_the_expression_and_its_zone():
    cron = monitor_config(parse_schedule("@weekly", None, "Europe/Berlin"), 0, 2)
    assert cron["schedule"] == {"type": "crontab", "value": "0 0 * * 0"}
    assert cron["timezone"] == "Europe/Berlin"
    daily = monitor_config(parse_schedule("1d", "05:00", "America/New_York"), 0, 2)
    assert daily["schedule"] == {"type": "crontab", "value": "0 5 * * *"}
    assert daily["timezone"] == "America/New_York"
    assert monitor_config(parse_schedule("5m", None), 0, 2)["timezone"] == "UTC"


class Weekly:
    pass


@pytest.mark.parametrize(
    "zone,local",
    [("Europe/Berlin", "2026-11-30T03:00:00+01:00"), ("UTC", "2026-11-30T02:00:00+00:00")],
)
def test_the_view_shows_the_schedule_as_written_and_the_next_run_in_its_zone(zone, local):
    entry = parse_job_entry("tests.unit.test_zoned_readers.Weekly|0 3 * * 1-5")
    job = Job("weekly", Weekly, entry, parse_schedule(entry.frequency, None, zone), ())
    state = JobState(app_name="weekly", last_success=at("2026-11-27 02:00"), next_run=MONDAY_0300)
    now = at("2026-11-28 12:00")
    view = job_view(job, {"weekly": state}, now, lambda s: None, 1800.0).as_json()
    expected = "0 3 * * 1-5" + ("" if zone == "UTC" else f" {zone}")
    assert (view["schedule"], view["time_zone"], view["next_run_local"]) == (expected, zone, local)
