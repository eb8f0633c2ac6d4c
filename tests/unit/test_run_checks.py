"""The run checks' pure rules (crontabber.alerts.checks): parsing and judging."""

from __future__ import annotations

import datetime as dt

import pytest

from crontabber.alerts.checks import breaches, parse_checks, unknown_metric
from crontabber.records import RunRecord

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)


def run(run_id, seconds=1.0, status="succeeded", **metrics):
    return RunRecord(
        run_id,
        "job",
        "scheduled",
        "h",
        1,
        T0,
        status,
        ended=T0 + dt.timedelta(seconds=seconds),
        metrics=metrics,
    )


def test_parse_reads_each_option():
    checks = parse_checks(
        {
            "min_duration": "30",
            "slower_than": "3 x p95(20)",
            "check": "keys_deleted < 5 x median(10); bytes_freed <= 1000",
            "on_breach": "pause",
        }
    )
    assert checks.min_duration == dt.timedelta(seconds=30)
    assert (checks.slower_factor, checks.slower_runs, checks.on_breach) == (3.0, 20, "pause")
    assert [c.text for c in checks.metric_checks] == [
        "keys_deleted < 5 x median(10)",
        "bytes_freed <= 1000",
    ]
    assert checks.history == 20 and not parse_checks({})


@pytest.mark.parametrize(
    "values, says",
    [
        ({"on_breach": "page"}, "on_breach"),
        ({"slower_than": "3 x p50(20)"}, "slower_than"),
        ({"check": "keys < lots"}, "check"),
        ({"min_duration": "soon"}, "min_duration"),
    ],
)
def test_parse_refuses_what_it_cannot_read_naming_the_option(values, says):
    with pytest.raises(ValueError, match=says):
        parse_checks(values)


def test_a_metric_check_judges_against_the_good_runs_only():
    checks = parse_checks({"check": "keys < 5 x median(10)"})
    earlier = [run(3, keys=10), run(2, status="failed", keys=1000), run(1, keys=12), run(0, keys=8)]
    assert breaches(run(4, keys=49), earlier, checks) == []
    (breach,) = breaches(run(4, keys=51), earlier, checks)
    assert breach.said == "keys = 51, not < 50 (median of 3 good runs: 10)"
    assert breaches(run(4, keys=51), earlier[:2], checks) == []  # too little history
    assert breaches(run(4), earlier, checks) == []  # the run did not return the metric


def test_duration_rules():
    checks = parse_checks({"min_duration": "10", "slower_than": "2 x p95(5)"})
    earlier = [run(3, 20), run(2, 30), run(1, 25)]
    assert breaches(run(4, 40), earlier, checks) == []
    assert [b.rule for b in breaches(run(4, 5), earlier, checks)] == ["min_duration 10.0s"]
    assert [b.rule for b in breaches(run(4, 61), earlier, checks)] == ["slower_than 2 x p95(5)"]


def test_a_check_over_a_metric_the_job_does_not_declare_is_named():
    checks = parse_checks({"check": "keys_deleted < 5 x median(10); byte_freed <= 9"})
    declared = ("keys_deleted", "bytes_freed")
    assert unknown_metric(checks, declared) == (
        "'byte_freed <= 9': the job returns no metric byte_freed (it returns keys_deleted, "
        "bytes_freed); did you mean bytes_freed?"
    )
    assert unknown_metric(checks, None) is None  # not declared: any name
    assert unknown_metric(parse_checks({"check": "bytes_freed < 1"}), declared) is None


def test_a_job_returning_a_metric_it_does_not_declare_is_warned_about(caplog):
    from crontabber.base import BaseCronApp, Summary

    class Declared(BaseCronApp):
        app_name = "declared"
        metric_names = ("kept",)

    job = Declared({}, None)
    job._summarise(Summary("did it", kept=1, extra=2))
    assert job.last_metrics == {"kept": 1, "extra": 2}
    assert "declared returned metrics its metric_names lacks: extra" in caplog.text
