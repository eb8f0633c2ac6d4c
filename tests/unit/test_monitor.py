"""The pure parts of --nagios: perfdata text and lateness (scheduling.lateness, shared with
--list-jobs)."""

import datetime as dt

from crontabber.config.settings import MonitorSettings
from crontabber.nagios import perfdata_text
from crontabber.scheduling import lateness
from crontabber.state import JobState

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)
H = dt.timedelta(hours=1)


def test_perfdata_numbers_have_no_exponent_and_unknown_is_u():
    text = perfdata_text(
        {"hosts": 3, "max_skew_s": -0.0001, "seconds_since_last_tick": 2592000.1234},
        MonitorSettings.defaults(),
    )
    assert text == "hosts=3;;;0 max_skew_s=0s;30;;0 seconds_since_last_tick=2592000.123s;;900;0"
    assert perfdata_text({"max_skew_s": None}, MonitorSettings.defaults()) == "max_skew_s=U;30;;0"


def test_lateness_counts_from_the_end_of_a_pause_and_not_while_running():
    late = JobState("a", next_run=NOW - 5 * H)
    assert lateness(late, NOW) == 5 * H
    assert lateness(JobState("a", next_run=NOW - 5 * H, paused_until=NOW - H), NOW) == H
    # a pause that ended before the run was due changes nothing
    assert lateness(JobState("a", next_run=NOW - 5 * H, paused_until=NOW - 6 * H), NOW) == 5 * H
    # --resume sets paused_until to now: not late at once
    assert lateness(JobState("a", next_run=NOW - 5 * H, paused_until=NOW), NOW) is None
    assert lateness(JobState("a", next_run=NOW - 5 * H, paused_until=NOW + H), NOW) is None
    assert lateness(JobState("a", next_run=NOW - 5 * H, ongoing=NOW - H), NOW) is None
    assert lateness(JobState("a", next_run=NOW + H), NOW) is None
    assert lateness(JobState("a"), NOW) is None
    # paused before its first tick: late from the pause's end, not never
    assert lateness(JobState("a", paused_until=NOW - H), NOW) == H
