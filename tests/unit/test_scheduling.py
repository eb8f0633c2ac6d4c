"""Pure scheduling rules, with "now" passed in."""

import datetime as dt

import pytest

from crontabber.errors import ConfigurationError
from crontabber.scheduling import (
    Schedule,
    TimeOfDay,
    backfill_dates,
    dependency_block,
    dependency_order,
    first_due_at,
    is_due,
    never_ran,
    next_run_after,
    normalize_depends_on,
    parse_frequency,
    parse_job_entry,
    parse_schedule,
    parse_time,
    split_jobs_list,
)
from crontabber.state import JobState

UTC = dt.timezone.utc


def at(text):
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("5m", 300),
        ("1h", 3600),
        ("1d", 86400),
        ("7d", 7 * 86400),
        (" 3d ", 3 * 86400),
        ("1m", 60),
        ("366d", 366 * 86400),
        ("8784h", 366 * 86400),
    ],
)
def test_parse_frequency(text, seconds):
    assert parse_frequency(text) == seconds


@pytest.mark.parametrize(
    "text",
    [
        "5",
        "10",
        "1D",
        "3e",
        "1d2h",
        "m",
        "",
        "1w",
        "-1d",
        "1 d x",
        "0m",
        "0d",
        "00h",
        "367d",
        "8785h",
        "99999999999d",
    ],
)
def test_parse_frequency_rejects(text):
    with pytest.raises(ValueError, match="bad frequency"):
        parse_frequency(text)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1:1", TimeOfDay(1, 1)),
        ("01:05", TimeOfDay(1, 5)),
        ("23:59", TimeOfDay(23, 59)),
        ("00:00", TimeOfDay(0, 0)),
    ],
)
def test_parse_time(text, expected):
    assert parse_time(text) == expected
    assert str(expected) == f"{expected.hour:02d}:{expected.minute:02d}"


@pytest.mark.parametrize("text", ["24:00", "23:60", "25:00", "24:59", "1", "a:b", "1:2:3", ""])
def test_parse_time_rejects(text):
    with pytest.raises(ValueError, match="bad time"):
        parse_time(text)


def test_time_needs_a_frequency_of_a_day():
    with pytest.raises(ValueError, match="at least 1d"):
        parse_schedule("3h", "23:59")
    assert str(parse_schedule("7d", "03:00")) == "7d @ 03:00"


def test_split_jobs_list_is_sloppy_like_crontabber():
    text = ",\n,;,\n\n,Foo|3d ; \nBar|4d,\n  # Baz|1d\n\tQux|1h  "
    assert split_jobs_list(text) == ["Foo|3d", "Bar|4d", "Qux|1h"]
    assert split_jobs_list("") == []


def test_parse_job_entry_forms():
    assert parse_job_entry("a.B|5m") == parse_job_entry("a.B|5m")
    entry = parse_job_entry("pkg.mod.Cls | 7d | 03:00")
    assert (entry.class_path, entry.frequency, entry.time) == ("pkg.mod.Cls", "7d", "03:00")
    only_time = parse_job_entry("pkg.Foo|1:45")
    assert (only_time.frequency, only_time.time) == ("1d", "1:45")
    assert entry.class_name == "Cls"


@pytest.mark.parametrize(
    "text,problem",
    [
        ("pkg.Cls", "no frequency"),
        ("pkg.Cls|", "no frequency"),
        ("pkg.Cls|1d|10:00|x", "too many"),
        ("pkg.Cls|5", "bad frequency"),
        ("pkg.Cls|1d|25:00", "bad time"),
        ("pkg.Cls|3h|23:59", "at least 1d"),
        ("Cls|1d", "not a dotted"),
        ("pkg/x.Cls|1d", "not a dotted"),
    ],
)
def test_parse_job_entry_errors_name_the_entry(text, problem):
    with pytest.raises(ConfigurationError) as info:
        parse_job_entry(text)
    assert problem in str(info.value)
    assert repr(text) in str(info.value)


DAILY = parse_schedule("1d", None)
DAILY_10 = parse_schedule("1d", "10:00")


def test_never_run_job_is_due():
    assert is_due(None, DAILY, at("2026-01-01 00:00"))


def test_never_run_timed_job_waits_for_its_time():
    assert not is_due(None, DAILY_10, at("2026-01-01 09:00"))
    assert is_due(None, DAILY_10, at("2026-01-01 10:00"))
    assert is_due(None, DAILY_10, at("2026-01-01 10:30"))
    assert is_due(None, DAILY_10, at("2026-01-01 23:59"))


def test_due_when_next_run_has_passed_strictly():
    state = JobState("x", next_run=at("2026-01-01 10:00"))
    assert not is_due(state, DAILY, at("2026-01-01 09:59"))
    assert not is_due(state, DAILY, at("2026-01-01 10:00"))
    assert is_due(state, DAILY, at("2026-01-01 10:00:01"))


def test_first_run_in_progress_is_due_so_the_runner_reports_the_lock():
    now = at("2026-01-01 10:00")
    assert is_due(JobState("x", ongoing=now), DAILY, now)


def test_a_row_without_next_run_or_marker_is_due_by_the_first_run_rule():
    """A job paused before its first tick, or whose first run died and was released
    (issue #23: such a job stayed never due, with --nagios silent)."""
    assert is_due(JobState("x"), DAILY, at("2026-01-01 10:00"))
    assert not is_due(JobState("x"), DAILY_10, at("2026-01-01 09:59"))
    assert is_due(JobState("x"), DAILY_10, at("2026-01-01 10:00"))
    assert never_ran(None) and never_ran(JobState("x"))
    assert not never_ran(JobState("x", ongoing=at("2026-01-01 10:00")))


def test_first_due_at_is_todays_time_of_day_once_reached():
    assert first_due_at(DAILY_10, at("2026-01-01 09:59")) is None
    assert first_due_at(DAILY_10, at("2026-01-01 10:30")) == at("2026-01-01 10:00")
    assert first_due_at(DAILY, at("2026-01-01 10:30")) is None


def test_next_run_after_success_and_failure():
    start = at("2026-01-01 04:04:57.752785")
    five = parse_schedule("5m", None)
    assert next_run_after(start, five, True, 300) == at("2026-01-01 04:09:57.752785")
    assert next_run_after(start, five, False, 100) == start + dt.timedelta(seconds=100)
    # With a time of day: the date of start + frequency, at that time.
    assert next_run_after(at("2026-01-01 23:00"), parse_schedule("1d", "00:30"), True, 1) == at(
        "2026-01-02 00:30"
    )
    assert next_run_after(at("2026-01-01 10:30"), DAILY_10, True, 1) == at("2026-01-02 10:00")
    assert next_run_after(at("2026-01-01 09:00"), DAILY_10, True, 1) == at("2026-01-02 10:00")
    # a failure ignores the time of day
    assert next_run_after(at("2026-01-01 09:00"), DAILY_10, False, 60) == at("2026-01-01 09:01")
    assert next_run_after(at("2026-01-01 04:00"), parse_schedule("7d", "03:00"), True, 1) == at(
        "2026-01-08 03:00"
    )


def test_backfill_without_success_runs_once_now():
    now = at("2026-01-05 11:00")
    assert backfill_dates(None, DAILY, now) == [now]


def test_a_backfill_jobs_first_interval_is_its_time_of_day():
    # issue #42 item 13: a `1d|00:10` job first run at 07:14 does the interval of 00:10 today,
    # as each later one; before 00:10 (a delay, a zone), yesterday's
    at_ten_past = parse_schedule("1d", "00:10")
    assert backfill_dates(None, at_ten_past, at("2026-11-28 07:14")) == [at("2026-11-28 00:10")]
    assert backfill_dates(None, at_ten_past, at("2026-11-28 00:10")) == [at("2026-11-28 00:10")]
    assert backfill_dates(None, at_ten_past, at("2026-11-28 00:05")) == [at("2026-11-27 00:10")]
    berlin = parse_schedule("1d", "06:00", "Europe/Berlin")  # 05:00 UTC in winter
    assert backfill_dates(None, berlin, at("2026-11-28 07:14")) == [at("2026-11-28 05:00")]


def test_backfill_each_missed_interval_oldest_first():
    last = at("2026-01-01 10:30")
    now = at("2026-01-04 11:00")
    assert backfill_dates(last, DAILY, now) == [
        at("2026-01-02 10:30"),
        at("2026-01-03 10:30"),
        at("2026-01-04 10:30"),
    ]
    # nothing whole has elapsed
    assert backfill_dates(last, DAILY, at("2026-01-02 10:30")) == []


def test_backfill_anchors_to_the_time_of_day():
    # bug 781010: a slow day-1 run at 18:02 must not push day 2 to 18:02.
    anchored = parse_schedule("1d", "18:00")
    assert backfill_dates(at("2026-01-01 18:02"), anchored, at("2026-01-02 18:01")) == [
        at("2026-01-02 18:00")
    ]


def test_backfill_anchor_is_utc_whatever_the_input_zone():
    plus2 = dt.timezone(dt.timedelta(hours=2))
    last = dt.datetime(2026, 1, 1, 12, 30, tzinfo=plus2)  # 10:30 UTC
    assert backfill_dates(last, DAILY_10, at("2026-01-02 10:01")) == [at("2026-01-02 10:00")]


def test_dependency_block_reasons_in_order():
    now = at("2026-01-01 12:00")
    ok = JobState("foo", next_run=at("2026-01-02 00:00"))
    assert dependency_block(["foo"], {"foo": ok}, now) is None
    assert "hasn't been run yet" in dependency_block(["foo"], {}, now)
    failed = JobState("foo", next_run=at("2026-01-02 00:00"), last_error={"type": "x"})
    assert "errored last time" in dependency_block(["foo"], {"foo": failed}, now)
    overdue = JobState("foo", next_run=at("2026-01-01 11:00"))
    assert "hasn't recently run" in dependency_block(["foo"], {"foo": overdue}, now)
    assert "hasn't recently run" in dependency_block(["foo"], {"foo": JobState("foo")}, now)
    assert "'bar'" in dependency_block(["foo", "bar"], {"foo": ok}, now)


def test_normalize_depends_on():
    assert normalize_depends_on(None) == ()
    assert normalize_depends_on("a") == ("a",)
    assert normalize_depends_on(("a", "b")) == ("a", "b")
    assert normalize_depends_on(["a"]) == ("a",)
    with pytest.raises(TypeError):
        normalize_depends_on(5)


def test_dependency_order_matches_crontabber():
    graph = {"A": [], "B": ["A"], "C": ["B"], "D": [], "E": ["A", "B"], "F": ["C", "D", "E"]}
    assert dependency_order(graph) == ["A", "D", "B", "C", "E", "F"]
    assert dependency_order({"C": ["B"], "B": ["A"], "A": []}) == ["A", "B", "C"]
    assert dependency_order({"A": [], "B": ["A"], "D": ["B", "C"], "C": ["B"]}) == [
        "A",
        "B",
        "C",
        "D",
    ]


def test_dependency_order_external_parents_and_empty_list():
    assert dependency_order({"bar": ["foo"]}) == ["bar"]
    assert dependency_order({}) == []


@pytest.mark.parametrize(
    "graph",
    [
        {"A": ["B"], "B": ["A"]},
        {"A": ["C"], "B": ["A"], "C": ["B"], "X": [], "Y": ["X"]},
        {"A": ["A"]},
    ],
)
def test_dependency_cycle_is_a_configuration_error(graph):
    with pytest.raises(ConfigurationError, match="dependency cycle"):
        dependency_order(graph)


def test_schedule_str_and_interval():
    assert str(Schedule("5m", 300, None)) == "5m"
    assert parse_schedule("2h", None).interval == dt.timedelta(hours=2)
