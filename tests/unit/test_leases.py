"""Pure rules of ongoing markers and retries (crontabber/leases.py), "now" passed in."""

import datetime as dt

import pytest

from crontabber.leases import (
    LeaseRules,
    Marker,
    describe_marker,
    holder_name,
    lease_expiry,
    marker_status,
    parse_holder,
    retry_delay,
)
from crontabber.state import JobState

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)
RULES = LeaseRules(lease_seconds=120, max_ongoing_age_hours=12.0, host="cron-1")
S = dt.timedelta(seconds=1)


def marker(by="cron-2:77", ongoing_ago=600 * S, beat_ago=None, run_id=9):
    return JobState(
        "job",
        ongoing=NOW - ongoing_ago,
        ongoing_by=by,
        run_id=run_id,
        heartbeat=None if beat_ago is None else NOW - beat_ago,
    )


def status(state, alive=True):
    return marker_status(state, NOW, RULES, lambda pid: alive)


def test_no_marker():
    assert status(None) is Marker.NONE
    assert status(JobState("job")) is Marker.NONE


def test_heartbeat_decides_within_and_past_the_lease():
    assert status(marker(beat_ago=119 * S)) is Marker.LIVE
    assert status(marker(beat_ago=120 * S)) is Marker.LIVE
    assert status(marker(beat_ago=121 * S)) is Marker.EXPIRED
    # the marker's own age does not matter while the heartbeat is fresh
    assert status(marker(ongoing_ago=dt.timedelta(days=3), beat_ago=5 * S)) is Marker.LIVE


def test_a_dead_pid_of_this_host_is_dead_at_once_another_hosts_pid_is_not_checked():
    assert status(marker(by="cron-1:77", beat_ago=1 * S), alive=False) is Marker.DEAD
    assert status(marker(by="cron-1:77", beat_ago=1 * S), alive=True) is Marker.LIVE
    checked = []
    state = marker(by="cron-2:77", beat_ago=1 * S)
    assert marker_status(state, NOW, RULES, lambda pid: checked.append(pid) or False) is Marker.LIVE
    assert checked == []


def test_without_heartbeat_crontabber_018s_age_bound_counting_whole_days():
    assert status(marker(ongoing_ago=dt.timedelta(hours=11, minutes=59))) is Marker.LIVE
    assert status(marker(ongoing_ago=dt.timedelta(hours=12))) is Marker.STALE
    # crontabber's .seconds bug made a 25-hour-old marker look 1 hour old
    assert status(marker(ongoing_ago=dt.timedelta(hours=25))) is Marker.STALE
    assert status(marker(ongoing_ago=dt.timedelta(days=3))) is Marker.STALE


def test_only_dead_expired_and_stale_markers_can_be_taken_over():
    assert {m for m in Marker if m.takeable} == {Marker.EXPIRED, Marker.DEAD, Marker.STALE}


def test_holder_names_round_trip():
    assert holder_name("web-3", 4242) == "web-3:4242"
    assert parse_holder("web-3:4242") == ("web-3", 4242)
    assert parse_holder("host:with:colons:12") == ("host:with:colons", 12)
    assert parse_holder("legacy") == ("legacy", None)
    assert parse_holder(None) == ("", None)


def test_lease_expiry():
    assert lease_expiry(marker(beat_ago=20 * S), RULES) == NOW + 100 * S
    assert lease_expiry(marker(ongoing_ago=dt.timedelta(hours=1)), RULES) == NOW + dt.timedelta(
        hours=11
    )
    assert lease_expiry(JobState("job"), RULES) is None


def test_describe_marker_names_holder_run_heartbeat_and_verdict():
    text = describe_marker(marker(beat_ago=130 * S), Marker.EXPIRED, NOW)
    assert text == (
        "cron-2:77 (run 9) since 2026-11-23 11:50:00 UTC, last heartbeat 2m10s ago; its lease has "
        "expired"
    )
    assert "no heartbeat" in describe_marker(marker(run_id=None), Marker.LIVE, NOW)


@pytest.mark.parametrize("errors, expected", [(1, 60), (2, 120), (3, 240), (4, 300), (9, 300)])
def test_retry_delay_backs_off_exponentially_up_to_the_cap(errors, expected):
    assert retry_delay(errors, base=60, backoff=2, cap=300) == expected


def test_retry_delay_is_crontabbers_constant_without_backoff():
    assert [retry_delay(n, 300, 1.0, 86400) for n in (1, 2, 10)] == [300, 300, 300]
    assert retry_delay(5, 300, 1.0, 0) == 300  # no cap
