"""The alert rules as pure functions, and the targets' parsing and payloads."""

import datetime as dt

import pytest

from crontabber.alerts.notify import (
    Notice,
    email_message,
    payload,
    payloads,
    signature,
)
from crontabber.alerts.rules import (
    AlertRules,
    OpenAlert,
    Watched,
    failing,
    late,
    muted,
    plan,
    recovery,
    superseded,
)
from crontabber.config.targets import Target, parse_targets
from crontabber.scheduling import next_interval, parse_schedule
from crontabber.state import JobState

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
H = dt.timedelta(hours=1)


def state(**fields):
    base = {
        "app_name": "job",
        "next_run": NOW + H,
        "first_run": NOW - 100 * H,
        "last_run": NOW - H,
        "last_success": NOW - 2 * H,
        "ongoing": None,
        "error_count": 0,
        "depends_on": [],
        "last_error": {},
    }
    return JobState.from_row({**base, **fields})


def test_failing_needs_the_count_and_names_the_streak():
    rules = AlertRules(after_failures=2)
    assert failing("job", state(error_count=1), rules) is None
    event = failing(
        "job",
        state(error_count=2, last_error={"type": "<class 'ValueError'>", "value": "bad\nmore"}),
        rules,
    )
    assert event is not None and "failed 2 times in a row; last: ValueError: bad" in event.message
    later = failing("job", state(error_count=3), rules)
    assert later is not None and later.subject == event.subject  # the same streak
    new = failing("job", state(error_count=2, last_success=NOW - H), rules)
    assert new is not None and new.subject != event.subject  # a success in between: a new one
    assert failing("job", state(error_count=9), AlertRules(after_failures=0)) is None


def test_a_failing_alert_says_who_failed_what_it_blocks_and_where_to_look():
    rules = AlertRules(after_failures=1)
    bare = failing("job", state(error_count=1, run_id=7), rules)
    told = failing(
        "job",
        state(error_count=1, run_id=7),
        rules,
        failed_by="cron-2:4242",
        blocks=("child", "report"),
        link="http://dash/jobs/job",
    )
    assert bare is not None and told is not None and told.subject == bare.subject  # the key
    assert bare.message.endswith(" (run 7); see --show-error job, --logs job")
    assert told.message.endswith(
        " (run 7 on cron-2:4242); blocks child, report; see "
        "--show-error job, --logs job; dashboard: http://dash/jobs/job"
    )
    assert (
        told.detail["blocks"] == ["child", "report"]
        and told.detail["link"] == "http://dash/jobs/job"
    )
    assert "link" not in bare.detail


def test_the_plan_opens_repeats_and_resolves():
    rules = AlertRules(after_failures=1, realert=4 * H)
    bad = Watched("job", state(error_count=1), rules)
    (event,) = plan([bad], [], NOW, lambda name: "").open
    opened = OpenAlert(1, "job", "failing", event.subject, event.message, NOW + H)
    assert not plan([bad], [opened], NOW, lambda name: "")  # open, re-alert not due yet
    due = OpenAlert(
        1, "job", "failing", event.subject, event.message, NOW - dt.timedelta(seconds=1)
    )
    assert plan([bad], [due], NOW, lambda name: "").realert == [due]
    good = Watched("job", state(error_count=0), rules)
    assert plan([good], [due], NOW, lambda name: "").resolve == [due]
    paused = Watched("job", state(error_count=0, paused_until=NOW + H), rules)
    assert not plan([paused], [due], NOW, lambda name: "")  # muted: not even resolved


def test_maintenance_windows():
    assert muted("job", {"job": NOW + H}, NOW) and muted("job", {"*": NOW + H}, NOW)
    assert not muted("job", {"other": NOW + H, "*": NOW - H}, NOW)
    bad = Watched("job", state(error_count=5), AlertRules(after_failures=1))
    assert not plan([bad], [], NOW, lambda name: "", {"*": NOW + H})


def test_next_interval_and_deadline():
    daily = parse_schedule("1d", "00:30")
    backfill = state(last_success=dt.datetime(2026, 11, 23, 0, 30, tzinfo=UTC))
    assert next_interval(backfill, daily, True) == dt.datetime(2026, 11, 24, 0, 30, tzinfo=UTC)
    rules = AlertRules(
        deadline=dt.timedelta(hours=30)
    )  # the interval of the 24th by 06:30 on the 25th
    assert late(Watched("job", backfill, rules, daily, True), NOW, lambda: "x") is not None
    on_time = AlertRules(deadline=dt.timedelta(hours=36))
    assert late(Watched("job", backfill, on_time, daily, True), NOW, lambda: "x") is None
    hourly = parse_schedule("1h", None)
    ran = state(last_success=NOW - 2 * H)
    assert next_interval(ran, hourly, False) == NOW - H
    event = late(
        Watched("job", ran, AlertRules(deadline=dt.timedelta(minutes=30)), hourly),
        NOW,
        lambda: "why",
    )
    assert event is not None and event.subject == f"interval {(NOW - H).isoformat()}"
    assert event.message.endswith("deadline, 2026-11-25 11:30 UTC; why")  # no "ago": stored


@pytest.mark.parametrize(
    "line, problem",
    [
        ("a webhook", "expected NAME KIND ADDRESS"),
        ("a pager https://x", "unknown kind 'pager'"),
        ("a webhook ftp://x", r"http\(s\) URL or env:VARIABLE"),
        ("a webhook https://x colour=red", "unknown option 'colour=red'"),
        ("a webhook https://x format=xml", "format must be one of"),
        ("a email not-an-address", "e-mail addresses"),
    ],
)
def test_bad_target_lines(line, problem):
    with pytest.raises(ValueError, match=problem):
        parse_targets(line)


def test_targets_parse_and_names_are_unique():
    (hook, mail) = parse_targets(
        "# ours\nhook webhook env:HOOK format=slack\n\nmail email a@b.c,d@e.f\n"
    )
    assert (hook.kind, hook.address, hook.options) == ("webhook", "env:HOOK", {"format": "slack"})
    assert mail.kind == "email"
    with pytest.raises(ValueError, match="used twice"):
        parse_targets("a webhook https://x\na webhook https://y")


NOTICE = Notice(
    7,
    2,
    "job",
    "recovered",
    "3",
    "job: recovered",
    "2026-11-25T12:00:00+00:00",
    "h:1",
    {"resolves": {"id": 3, "kind": "failing", "subject": "after never"}},
    "h:2",
)


def test_payloads():
    assert payload(Target("s", "webhook", "https://x", {"format": "slack"}), NOTICE, {}) == {
        "text": ":large_green_circle: job: recovered"
    }
    pd = payload(
        Target("p", "webhook", "https://x", {"format": "pagerduty", "routing_key_env": "K"}),
        NOTICE,
        {"K": "key"},
    )
    assert (pd["event_action"], pd["dedup_key"]) == (
        "resolve",
        "crontabber/job/failing/after never",
    )
    assert payload(Target("j", "webhook", "https://x"), NOTICE, {})["alert"] == 7
    assert signature("k", "1", b"{}") == signature("k", "1", b"{}") != signature("k", "2", b"{}")


def test_the_email_of_a_recovery_threads_under_its_failure():
    message = email_message(Target("m", "email", "a@b.c, d@e.f"), NOTICE, "cron@example.net")
    assert message["To"] == "a@b.c, d@e.f"
    assert message["Message-ID"] == "<crontabber.7.2@example.net>"
    assert message["In-Reply-To"] == "<crontabber.3.1@example.net>"


def test_a_new_streak_after_a_success_supersedes_the_old_alert():
    rules = AlertRules(after_failures=2)
    old_streak = failing("job", state(error_count=2), rules)
    assert old_streak is not None
    opened = OpenAlert(5, "job", "failing", old_streak.subject, old_streak.message, NOW + H)
    again = Watched("job", state(error_count=2, last_success=NOW - H), rules)  # success, 2 more
    todo = plan([again], [opened], NOW)
    assert todo.open == [] and todo.resolve == []
    ((old, new),) = todo.supersede
    assert old == opened and new.message.endswith("(supersedes alert 5)")
    assert new.detail["supersedes"] == 5
    event = superseded(opened, 6, again.state)
    assert event.kind == "superseded" and event.detail["resolves"]["id"] == 5
    assert event.message.startswith("job: alert 5 superseded by alert 6: it succeeded at ")
    assert "recovered" not in event.message


def test_a_recovery_never_contradicts_itself():
    rules = AlertRules(after_failures=2)
    streak = failing("job", state(error_count=2), rules)
    assert streak is not None
    opened = OpenAlert(5, "job", "failing", streak.subject, streak.message, None)
    once_more = recovery(opened, state(error_count=1, last_success=NOW - H), NOW)
    assert once_more.message.startswith("job: recovered (succeeded at ")
    assert "failed 1 time since, fewer than alert_after_failures" in once_more.message
    raised = recovery(opened, state(error_count=2), NOW)  # no success: the rules changed
    assert raised.message.startswith("job: alert 5 ended (2 failures in a row is below")
    marked = recovery(
        opened,
        state(
            error_count=0,
            last_success=NOW,
            success_marked_at=NOW,
            success_marked_by="op@host",
            success_marked_reason="INC-7",
        ),
        NOW,
    )
    assert "marked successful by op@host: INC-7" in marked.message
    assert marked.detail["marked"]["reason"] == "INC-7"


def test_a_pagerduty_test_is_resolved_and_a_superseded_notice_resolves():
    target = Target("p", "webhook", "https://x", {"format": "pagerduty", "routing_key_env": "K"})
    test = NOTICE._replace(kind="test", detail={})
    trigger, resolve = payloads(target, test, {"K": "key"})
    assert (trigger["event_action"], resolve["event_action"]) == ("trigger", "resolve")
    assert trigger["dedup_key"] == resolve["dedup_key"]
    assert [
        p["event_action"]
        for p in payloads(target, NOTICE._replace(kind="superseded"), {"K": "key"})
    ] == ["resolve"]


def test_a_target_says_which_variables_are_missing():
    target = Target("p", "webhook", "env:URL", {"secret_env": "S", "routing_key_env": "K"})
    assert len(target.missing({})) == 3
    assert target.missing({"URL": "ftp://x", "S": "s", "K": "k"}) == [
        "environment variable URL (the address of p) is not an http(s) URL"
    ]
    assert target.missing({"URL": "https://x", "S": "s", "K": "k"}) == []


def test_an_alerts_subject_is_the_same_text_whatever_the_sessions_zone():
    # a subject is the alert's key across the fleet and PagerDuty's dedup key: two hosts whose
    # database sessions run in different zones must write one text for one streak (issue #44,
    # P16: every time in UTC)
    st_johns = dt.timezone(dt.timedelta(hours=-3, minutes=-30))
    rules = AlertRules(after_failures=1)
    here = failing("job", state(error_count=1), rules)
    there = failing(
        "job",
        state(
            error_count=1,
            last_success=(NOW - 2 * H).astimezone(st_johns),
            first_run=(NOW - 100 * H).astimezone(st_johns),
        ),
        rules,
    )
    assert here is not None and there is not None
    assert there.subject == here.subject and "+00:00" in there.subject
