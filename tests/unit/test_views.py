"""The inspection views and their text, pure: statuses, error records, runs
from log rows, short times, the width limit."""

import datetime as dt

import pytest

from crontabber.config.catalog import Job
from crontabber.formats import relative, short_span, took
from crontabber.leases import Marker
from crontabber.records import LogEntry
from crontabber.render import fit, short_host
from crontabber.scheduling import parse_job_entry, parse_schedule
from crontabber.state import JobState
from crontabber.views import (
    ErrorInfo,
    JobStatus,
    Outcome,
    group_runs,
    job_view,
    type_name,
    value_from_repr,
)

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
MIN = dt.timedelta(minutes=1)


class Parent:
    pass


class Child:
    pass


def job(cls, name, freq="1h", time=None, depends_on=()):
    entry = parse_job_entry(f"tests.unit.test_views.{cls.__name__}|{freq}")
    return Job(name, cls, entry, parse_schedule(freq, time), tuple(depends_on))


def status(state, marker=Marker.NONE, states=None, overdue=1800.0, the_job=None):
    the_job = the_job or job(Child, "child")
    states = {**(states or {}), **({the_job.app_name: state} if state else {})}
    return job_view(the_job, states, NOW, lambda s: marker, overdue).status


def ran(**changes):
    base = dict(
        app_name="child",
        last_run=NOW - 10 * MIN,
        last_success=NOW - 10 * MIN,
        next_run=NOW + 50 * MIN,
    )
    return JobState(**{**base, **changes})


def test_status_words_and_their_precedence():
    assert status(ran()) is JobStatus.OK
    assert status(None) is JobStatus.DUE
    assert status(None, the_job=job(Child, "child", "1d", "23:59")) is JobStatus.NEW
    assert status(ran(next_run=NOW - 10 * MIN)) is JobStatus.DUE
    assert status(ran(next_run=NOW - 31 * MIN)) is JobStatus.OVERDUE
    assert status(ran(next_run=NOW - 31 * MIN), overdue=3600) is JobStatus.DUE
    failing = ran(error_count=2, last_error={"type": "<class 'OSError'>", "value": "x"})
    assert status(failing) is JobStatus.FAILING
    paused = ran(error_count=2, paused_until=NOW + MIN, paused_by="a@b", paused_reason="r")
    assert status(paused) is JobStatus.PAUSED
    assert status(ran(paused_until=NOW - MIN)) is JobStatus.OK  # a pause that ended
    running = ran(ongoing=NOW - MIN, ongoing_by="h:1", error_count=1, paused_until=NOW + MIN)
    assert status(running, Marker.LIVE) is JobStatus.RUNNING
    assert status(running, Marker.EXPIRED) is JobStatus.ORPHANED
    child = job(Child, "child", depends_on=["parent"])
    assert status(None, the_job=child) is JobStatus.WAITING
    parent = JobState("parent", last_run=NOW, next_run=NOW + MIN)
    assert status(None, states={"parent": parent}, the_job=child) is JobStatus.DUE


def test_lateness_after_a_pause_counts_from_its_end():
    state = ran(next_run=NOW - 120 * MIN, paused_until=NOW - 5 * MIN)
    view = job_view(job(Child, "child"), {"child": state}, NOW, lambda s: Marker.NONE, 1800)
    assert view.status is JobStatus.DUE and view.late == 5 * MIN


@pytest.mark.parametrize(
    "raw, name",
    [
        ("<class 'NameError'>", "NameError"),
        ("<class 'psycopg2.errors.UndefinedTable'>", "psycopg2.errors.UndefinedTable"),
        ("<type 'exceptions.ValueError'>", "ValueError"),
        ("<class 'builtins.OSError'>", "OSError"),
        ("weird", "weird"),
    ],
)
def test_type_name(raw, name):
    assert type_name(raw) == name


@pytest.mark.parametrize(
    "text, kind, value",
    [
        ("NameError('Trouble!!')", "NameError", "Trouble!!"),
        ('ValueError("it\'s\\nbad")', "ValueError", "it's\nbad"),
        ("KeyError('a', 'b')", "KeyError", "'a', 'b'"),
        ("OSError()", "OSError", ""),
        ("Other('x')", "NameError", "Other('x')"),
        (
            "NameError(__import__('os'))",
            "NameError",
            "NameError(__import__('os'))",
        ),  # not evaluated
    ],
)
def test_value_from_repr(text, kind, value):
    assert value_from_repr(text, kind) == value


def test_error_summary_is_one_line():
    error = ErrorInfo.of_state(
        {"type": "<class 'OSError'>", "value": "first\nsecond", "traceback": ""}
    )
    assert error is not None and error.summary == "OSError: first"
    assert ErrorInfo.of_state({}) is None


def entry(id, run_id, minutes_ago, ok=True, **more):
    fields = dict(
        id=id,
        app_name="job",
        log_time=NOW - minutes_ago * MIN,
        duration=dt.timedelta(seconds=30),
        run_id=run_id,
        host="h" if run_id else None,
        pid=7 if run_id else None,
    )
    if ok:
        fields["success"] = NOW - minutes_ago * MIN
    else:
        fields.update(
            exc_type="<class 'NameError'>",
            exc_value="NameError('boom')",
            exc_traceback="  File x\n",
        )
    return LogEntry(**{**fields, **more})


def test_runs_from_log_rows():
    rows = [
        entry(6, 9, 1, ok=False),
        entry(5, 9, 2),
        entry(4, 9, 3),
        entry(3, 8, 10),
        entry(2, None, 100),
        entry(1, None, 200),
    ]
    runs = group_runs(rows, None, lambda s: Marker.NONE)
    assert [(r.run_id, r.outcome, len(r.entries)) for r in runs] == [
        (9, Outcome.FAILED, 3),
        (8, Outcome.OK, 1),
        (None, Outcome.OK, 1),
        (None, Outcome.OK, 1),
    ]
    assert runs[0].started == NOW - 3 * MIN - dt.timedelta(seconds=30)
    assert runs[0].ended == NOW - MIN and runs[0].by == "h:7"
    assert runs[0].error == ErrorInfo("NameError", "boom", "  File x\n")
    fenced = entry(
        7,
        10,
        0,
        ok=False,
        exc_type="<class 'crontabber.errors.LeaseLost'>",
        exc_value="LeaseLost('run 10 was fenced off; the job succeeded')",
    )
    assert group_runs([fenced], None, lambda s: Marker.NONE)[0].outcome is Outcome.FENCED_OFF


def test_the_run_in_progress_comes_first():
    holding = JobState(
        "job", ongoing=NOW - 5 * MIN, ongoing_by="cron-1:42", run_id=9, heartbeat=NOW - MIN
    )
    runs = group_runs([entry(5, 9, 2), entry(3, 8, 10)], holding, lambda s: Marker.LIVE)
    assert [(r.run_id, r.outcome) for r in runs] == [(9, Outcome.RUNNING), (8, Outcome.OK)]
    assert runs[0].started == NOW - 5 * MIN and runs[0].ended is None
    runs = group_runs([entry(3, 8, 10)], holding, lambda s: Marker.EXPIRED)
    assert [(r.run_id, r.outcome, r.by) for r in runs] == [
        (9, Outcome.RUNNING, "cron-1:42"),
        (8, Outcome.OK, "h:7"),
    ]
    assert runs[0].ongoing is not None and runs[0].ongoing.verdict is Marker.EXPIRED


def test_short_times():
    assert [short_span(s) for s in (0, 59, 60, 3599, 3600, 47 * 3600, 48 * 3600)] == [
        "0s",
        "59s",
        "1m",
        "59m59s",
        "1h",
        "1d23h",
        "2d",
    ]
    assert relative(NOW - 3 * MIN, NOW) == "3m ago" and relative(NOW + 4 * 60 * MIN, NOW) == "in 4h"
    assert relative(NOW, NOW) == "now" and relative(None, NOW, "never") == "never"
    assert [took(dt.timedelta(seconds=s)) for s in (0.4213, 12.34, 192, 3720)] == [
        "0.42s",
        "12.3s",
        "3m12s",
        "1h02m",
    ]
    assert took(None) == "-"


def test_fit_cuts_only_the_last_column():
    rows = [["A", "B"], ["xxxx", "y" * 30]]
    assert fit(rows, 20) == ["A     B", "xxxx  " + "y" * 11 + "..."]
    assert fit(rows, None)[1] == "xxxx  " + "y" * 30


def test_short_host():
    assert short_host("symbols-cron-2.prod.example.net:31337") == "symbols-cron-2"
    assert short_host("symbols-cron-2.prod.example.net:31337", pid=True) == "symbols-cron-2:31337"
    assert short_host(None) == "unknown runner"
