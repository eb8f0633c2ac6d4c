"""The rules of overriding (crontabber/overrides.py): pure, milliseconds."""

from __future__ import annotations

import datetime as dt

import pytest

from crontabber.errors import JobPaused, PauseOverrideNeedsReason
from crontabber.overrides import check_pause, given_options
from crontabber.state import JobState

NOW = dt.datetime(2026, 11, 26, 14, 0, tzinfo=dt.timezone.utc)
PAUSED = JobState(
    "prune-s3", paused_until=NOW + dt.timedelta(hours=1), paused_by="ops@vm", paused_reason="INC-9"
)


def check(state, force, reason=None):
    return check_pause(
        "prune-s3",
        state,
        NOW,
        "run it",
        force=force,
        reason=reason,
        override="--force --reason TEXT runs it anyway",
    )


def test_a_pause_is_overridden_only_with_force_and_a_reason():
    with pytest.raises(JobPaused, match="refusing to run it: paused until .* by ops@vm: INC-9"):
        check(PAUSED, force=False, reason="why")
    for reason in (None, "", "  "):
        with pytest.raises(
            PauseOverrideNeedsReason,
            match=r"\(until .* by ops@vm: INC-9\) only "
            "with --reason TEXT",
        ):
            check(PAUSED, force=True, reason=reason)
    assert check(PAUSED, force=True, reason="cleanup") is True


def test_no_pause_needs_no_reason():
    ended = JobState("prune-s3", paused_until=NOW - dt.timedelta(seconds=1))
    for state in (None, JobState("prune-s3"), ended):
        assert check(state, force=False) is False and check(state, force=True) is False


def test_the_recorded_overrides_mask_secrets():
    assert given_options(
        {
            "crontabber.class-MissingSymbolsCronApp.inbox_bucket": "no-such-bucket",
            "resource.postgresql.password": "hunter22",
            "crontabber.class-X.es_url": "http://elastic:s3cr3t-pw@es:9200/",
        }
    ) == [
        "--crontabber.class-MissingSymbolsCronApp.inbox_bucket=no-such-bucket",
        "--resource.postgresql.password=***",
        "--crontabber.class-X.es_url=http://elastic:***@es:9200/",
    ]
