"""The alert storm's grouping (crontabber.alerts.alerter.storm_groups), a pure rule."""

from __future__ import annotations

import datetime as dt

from crontabber.alerts.delivery import group_notice, storm_groups
from crontabber.config.targets import parse_targets


def _row(n: int, app: str, kind: str = "failing", target: str = "hook") -> dict:
    return {
        "notice_id": n,
        "id": 100 + n,
        "notice": 1,
        "target": target,
        "app_name": app,
        "kind": kind,
        "subject": "s",
        "message": f"{app}: {kind}",
        "opened_at": dt.datetime(2026, 11, 28, tzinfo=dt.timezone.utc),
        "opened_by": "h:1",
        "detail": {"link": f"http://d/jobs/{app}"},
        "attempts": 0,
    }


TARGETS = {
    t.name: t
    for t in parse_targets(
        "hook webhook http://127.0.0.1:9/h\npd webhook http://127.0.0.1:9/p format=pagerduty "
        "routing_key_env=K"
    )
}


def test_a_storm_per_target_and_kind_groups_and_pagerduty_never():
    rows = [
        _row(1, "a"),
        _row(2, "b"),
        _row(3, "c", "late"),
        _row(4, "a", target="pd"),
        _row(5, "b", target="pd"),
    ]
    storms, alone = storm_groups(rows, TARGETS, 2)
    assert [[r["notice_id"] for r in storm] for storm in storms] == [[1, 2]]
    assert [r["notice_id"] for r in alone] == [3, 4, 5]
    assert storm_groups(rows, TARGETS, 0) == ([], rows)
    assert storm_groups(rows, TARGETS, 3)[0] == []  # two jobs: under the threshold


def test_one_job_twice_is_no_storm_and_the_notice_names_every_alert():
    rows = [_row(1, "a"), _row(2, "a")]
    assert storm_groups(rows, TARGETS, 2)[0] == []
    notice = group_notice([_row(1, "a"), _row(2, "b")], "h:2")
    assert notice.message == "2 jobs failing: a: failing; b: failing"
    assert notice.detail["alerts"] == [101, 102] and notice.detail["links"] == [
        "http://d/jobs/a",
        "http://d/jobs/b",
    ]
    assert notice.key == "101.1"  # a retry of the same storm is the same notice
