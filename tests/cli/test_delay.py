"""Settle lag and jitter through the real runner: the INI options reach the schedule of the
tick and of the job's own process, --explain shows them, bad values are refused by name."""

from __future__ import annotations

import datetime as dt

from crontabber.scheduling import jitter_offset

HOUR = dt.timedelta(hours=1)


def test_a_backfill_job_with_a_settle_lag_is_called_with_the_settled_time(crontab):
    crontab.configure(
        ["FooBackfillJob|1d"], extra="    [[class-FooBackfillJob]]\n        settle_lag=6h\n"
    )
    before = crontab.now()
    code, out = crontab.run()
    assert code == 0, out
    (call,) = crontab.calls("foo-backfill")
    # its first run is "now" on the job's clock: six hours ago
    assert before - 6 * HOUR - dt.timedelta(minutes=1) < call["day"] < crontab.now() - 6 * HOUR
    assert crontab.state("foo-backfill").last_success == call["day"]


def test_a_timed_job_keeps_its_jitter_every_day(crontab):
    spread = dt.timedelta(hours=5)
    offset = jitter_offset("basic-job", spread)
    assert offset > dt.timedelta(minutes=1)
    crontab.configure(["BasicJob|1d|03:00"], extra="    jitter=5h\n")
    code, out = crontab.run("--job", "basic-job", "--force")
    assert code == 0, out
    nominal = crontab.state("basic-job").next_run.astimezone(dt.timezone.utc) - offset
    assert (nominal.hour, nominal.minute, nominal.second) == (3, 0, 0)  # 03:00 + its offset, UTC
    code, out = crontab.run("--explain", "basic-job")
    assert code == 0, out
    minutes, seconds = divmod(int(offset.total_seconds()), 60)
    hours, minutes = divmod(minutes, 60)
    shown = "".join(f"{n}{u}" for n, u in ((hours, "h"), (minutes, "m"), (seconds, "s")) if n)
    assert f"starts {shown} after its time: jitter {shown} (fixed, from its name)" in out


def test_the_explain_json_has_both(crontab):
    crontab.configure(["FooBackfillJob|1d"], extra="    settle_lag=2h\n    jitter=30m\n")
    code, out = crontab.run("--explain", "foo-backfill", "--json")
    assert code == 0, out
    assert '"settle_lag_seconds": 7200.0' in out
    assert (
        '"jitter_seconds": '
        f"{jitter_offset('foo-backfill', dt.timedelta(minutes=30)).total_seconds()}" in out
    )


def test_bad_values_are_refused_by_name(crontab):
    crontab.configure(
        ["FooBackfillJob|1d"], extra="    [[class-FooBackfillJob]]\n        settle_lag=soon\n"
    )
    code, out = crontab.run("--configtest")
    assert code == 1
    assert "crontabber.class-FooBackfillJob.settle_lag" in out and "bad duration 'soon'" in out
    crontab.configure(["BasicJob|1h"], extra="    jitter=45m\n    settle_lag=15m\n")
    code, out = crontab.run("--configtest")
    assert code == 1
    assert "must be shorter than the job's frequency (1h)" in out
