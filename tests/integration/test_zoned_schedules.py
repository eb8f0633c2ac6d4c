"""A zoned cron job and a zoned backfill job run by the real runner across a DST change.

The database's clock is the runner's clock, and cannot be set: as the leases' tests do,
the state rows are moved against it (``crontab.wind``, rows written at chosen times), and
the transition used is the one of Europe/Berlin nearest to the database's now, found with
zoneinfo, so the tests hold whatever the date they run on. Each expected time is built by
the written rule (02:30 on the zone's clocks; a skipped 02:30 is the first minute after the
gap; a repeated one is its first pass), not by the code under test.
"""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo

from tests.fixtures.crontab import crontab  # noqa: F401 - the fixture

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
UTC = dt.timezone.utc
ZONED = "    [[class-{cls}]]\n        time_zone = Europe/Berlin\n"


def transition(start: dt.datetime, step: dt.timedelta) -> dt.datetime:
    """The first instant (UTC, to the minute) after or before ``start`` (by the sign of
    ``step``) at which Berlin's offset changes."""
    when = start.replace(minute=0, second=0, microsecond=0)
    while (when + step).astimezone(BERLIN).utcoffset() == when.astimezone(BERLIN).utcoffset():
        when += step
    low, high = sorted((when, when + step))
    while high - low > dt.timedelta(minutes=1):
        middle = low + (high - low) / 2
        same = low.astimezone(BERLIN).utcoffset() == middle.astimezone(BERLIN).utcoffset()
        low, high = (middle, high) if same else (low, middle)
    return high


def at_0230(day: dt.date) -> dt.datetime:
    """02:30 on Berlin's clocks on ``day`` by the rule, in UTC."""
    local = dt.datetime.combine(day, dt.time(2, 30), tzinfo=BERLIN)  # fold 0: the first pass
    wall = local.replace(tzinfo=None)
    while local.astimezone(UTC).astimezone(BERLIN).replace(tzinfo=None) != wall:
        local += dt.timedelta(minutes=1)  # skipped: the first minute after the gap
        wall = local.replace(tzinfo=None)
    return local.astimezone(UTC)


def test_a_zoned_backfill_job_runs_each_fire_time_across_the_last_transition(crontab):
    now = crontab.now()
    changed = transition(now, -dt.timedelta(hours=1))  # the last change before now
    first = changed.astimezone(BERLIN).date() - dt.timedelta(days=3)
    crontab.configure(["FooBackfillJob|30 2 * * *"], extra=ZONED.format(cls="FooBackfillJob"))
    crontab.sql(
        "INSERT INTO crontabber (app_name, next_run, first_run, last_run, last_success,"
        " error_count, depends_on, last_error) VALUES ('foo-backfill', %(last)s, %(last)s,"
        " %(last)s, %(last)s, 0, '{}', '{}')",
        {"last": at_0230(first)},
    )
    assert crontab.run() == (0, "")
    expected = []
    day = first + dt.timedelta(days=1)
    while at_0230(day) < now:
        expected.append(at_0230(day))
        day += dt.timedelta(days=1)
    ran = crontab.calls("foo-backfill")
    days = [call["day"] for call in ran]
    assert days[: len(expected)] == expected  # one run per day, the transition's day once
    assert len(days) in (len(expected), len(expected) + 1)  # a fire passed while it ran
    assert {day.astimezone(BERLIN).time() for day in days} == {dt.time(2, 30)}
    state = crontab.state("foo-backfill")
    assert state.last_success == days[-1] and state.error_count == 0
    assert state.next_run == at_0230(days[-1].astimezone(BERLIN).date() + dt.timedelta(days=1))


def test_a_zoned_cron_job_is_due_at_its_fire_time_on_the_next_transitions_day(crontab):
    now = crontab.now()
    changed = transition(now, dt.timedelta(hours=1))  # the next change after now
    day = changed.astimezone(BERLIN).date()
    expression = f"30 2 {day.day} {day.month} *"
    crontab.configure([f"BasicJob|{expression}"], extra=ZONED.format(cls="BasicJob"))
    assert crontab.run() == (0, "")  # never ran, no fire time today: not due
    assert crontab.calls("basic-job") == []
    assert crontab.run("--job", "basic-job", "--force", "--reason", "first run")[0] == 0
    # spring: 02:30 is skipped, due at 03:00 CEST (the transition itself); autumn: the
    # first pass of 02:30, CEST, half an hour before the transition
    fire = at_0230(day)
    assert fire in (changed, changed - dt.timedelta(minutes=30))
    state = crontab.state("basic-job")
    assert state.next_run == fire
    code, out = crontab.run("--list-jobs", "basic-job", "--json")
    (view,) = json.loads(out)["jobs"]
    assert view["schedule"] == f"{expression} Europe/Berlin"
    assert view["time_zone"] == "Europe/Berlin"
    assert view["next_run_local"] == fire.astimezone(BERLIN).isoformat()
    code, out = crontab.run("--list-jobs", "basic-job", "--wide")
    local = fire.astimezone(BERLIN).strftime("%H:%M")
    assert f" = {local} Europe/Berlin" in out.splitlines()[1], out  # the next run on its clocks too
    # the job's row reaches the database's clock (the clock cannot be moved): the tick runs
    # the job once, and its next run is again the first fire time after the clock
    # (set, not wound: an interval of days moves by calendar days in the session's zone)
    crontab.sql("UPDATE crontabber SET next_run = clock_timestamp() - interval '1 second'")
    assert crontab.run() == (0, "")
    assert len(crontab.calls("basic-job")) == 2
    assert crontab.state("basic-job").next_run == fire
    assert crontab.run() == (0, "") and len(crontab.calls("basic-job")) == 2  # not due again


def test_the_metrics_file_shows_each_schedule_as_written_and_its_zone(crontab, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    jobs = ["BasicJob|0 3 * * 1-5", "FooJob|1d|05:00"]
    crontab.configure(jobs, extra=ZONED.format(cls="BasicJob"))
    path = tmp_path / "crontabber.prom"
    assert crontab.run(f"--metrics-file={path}")[0] == 0
    families = text_string_to_metric_families(path.read_text())
    (family,) = [f for f in families if f.name == "crontabber_job_schedule_info"]
    keys = ("job", "schedule", "time_zone")
    samples = [(*(s.labels[key] for key in keys), s.value) for s in family.samples]
    assert sorted(samples) == [
        ("basic-job", "0 3 * * 1-5", "Europe/Berlin", 1),
        ("foo", "1d|05:00", "UTC", 1),
    ]


def at_0300_after(when: dt.datetime, zone: zoneinfo.ZoneInfo) -> dt.datetime:
    """The first 03:00 on ``zone``'s clocks after ``when`` (03:00 exists on every day of the
    zones used here around now: none of them changes its clocks at 03:00 in November)."""
    day = when.astimezone(zone).date()
    while (fire := dt.datetime.combine(day, dt.time(3, 0), tzinfo=zone).astimezone(UTC)) <= when:
        day += dt.timedelta(days=1)
    return fire


def schedule_rows(crontab):
    return crontab.sql(
        "SELECT reason, detail FROM crontabber_audit WHERE action = %s ORDER BY id",
        ("schedule",),
    )


def test_a_schedule_change_recomputes_the_next_run_once_and_audits_it(crontab):
    crontab.configure(["BasicJob|1d|05:00"])
    assert crontab.run("--job", "basic-job", "--force", "--reason", "first")[0] == 0
    ran = crontab.state("basic-job")
    assert schedule_rows(crontab) == []  # crontabber's form in UTC: nothing to record
    # to a cron expression in Berlin: next run recomputed from the last start, audited once
    crontab.configure(["BasicJob|0 3 * * *"], extra=ZONED.format(cls="BasicJob"))
    assert crontab.run() == (0, "")
    assert crontab.state("basic-job").next_run == at_0300_after(ran.last_run, BERLIN)
    (row,) = schedule_rows(crontab)
    assert row["detail"]["schedule"] == "0 3 * * * Europe/Berlin"
    assert row["detail"]["previous"] is None
    change = "crontabber's form in UTC -> 0 3 * * * Europe/Berlin"
    assert row["reason"] == f"schedule {change}: next run recomputed"
    assert row["detail"]["next_run_before"] == ran.next_run.isoformat()
    assert crontab.run() == (0, "") and len(schedule_rows(crontab)) == 1  # once
    # its zone changes: recomputed again
    crontab.configure(
        ["BasicJob|0 3 * * *"],
        extra="    [[class-BasicJob]]\n        time_zone = America/New_York\n",
    )
    assert crontab.run() == (0, "")
    new_york = zoneinfo.ZoneInfo("America/New_York")
    assert crontab.state("basic-job").next_run == at_0300_after(ran.last_run, new_york)
    assert [r["detail"]["previous"] for r in schedule_rows(crontab)] == [
        None,
        "0 3 * * * Europe/Berlin",
    ]
    # and back to crontabber's form in UTC (looked at while another job has a cron
    # expression): 05:00 UTC after the last start, as it first was
    crontab.configure(["BasicJob|1d|05:00", "FooJob|@yearly"])
    assert crontab.run() == (0, "")
    assert crontab.state("basic-job").next_run == ran.next_run
    assert [r["detail"].get("schedule") for r in schedule_rows(crontab)[-2:]] == [None, "@yearly"]
    assert len(crontab.calls("basic-job")) == 1  # no fire time was missed: it did not run


def test_a_new_cron_jobs_schedule_is_recorded_before_its_first_run(crontab):
    crontab.configure(["BasicJob|0 3 * * 1-5"], extra=ZONED.format(cls="BasicJob"))
    assert crontab.run() == (0, "")
    (row,) = schedule_rows(crontab)
    assert row["reason"] == "schedule 0 3 * * 1-5 Europe/Berlin: not run yet"
    assert "next_run" not in row["detail"]


def test_a_rerun_of_a_zoned_cron_backfill_job_takes_the_fire_times_of_those_days(crontab):
    # 02:30 in Berlin from 2026-10-24 to 2026-10-26: 02:30 CEST (00:30Z) on the 24th, once at
    # its first pass on the 25th (clocks back at 03:00 CEST), 02:30 CET (01:30Z) on the 26th
    crontab.configure(["FooBackfillJob|30 2 * * *"], extra=ZONED.format(cls="FooBackfillJob"))
    assert crontab.run()[0] == 0  # its first run: today's fire time
    days = ["--date", "2026-10-24", "--to", "2026-10-26"]
    code, out = crontab.run("--rerun", "foo-backfill", *days, "--dry-run")
    assert code == 0, out
    assert out.splitlines()[1:4] == [
        "  2026-10-24 00:30 UTC",
        "  2026-10-25 00:30 UTC",
        "  2026-10-26 01:30 UTC",
    ]
    assert crontab.run("--rerun", "foo-backfill", *days, "--reason", "zoned")[0] == 0
    reran = [call["day"] for call in crontab.calls("foo-backfill")][1:]
    assert reran == [at("2026-10-24 00:30"), at("2026-10-25 00:30"), at("2026-10-26 01:30")]


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)
