"""crontabber.reruns.request against a real PostgreSQL: one plan for ``--rerun``, the same
for the dry run and the run of the same request at the same ``now``, printed by ``--dry-run``
and carried out, interval for interval, by the run."""

from __future__ import annotations

import datetime as dt

import pytest

from crontabber.config.catalog import find_job, load_jobs
from crontabber.config.settings import load_settings
from crontabber.errors import ConfigurationError
from crontabber.reruns import RerunPlan, RerunRequest, plan_rerun
from crontabber.reruns.execute import plan_lines
from crontabber.store import StateStore, connect

JOBS = [
    "ParallelBackfillJob|1d|03:00",
    "ParallelDependantJob|1d|03:00",
    "SerialGrandchildJob|1d|03:00",
    "PlainDependantJob|1d",
]
WHY = ("--reason", "the test's")


def _days(crontab, first: int, last: int) -> list[dt.datetime]:
    """The 03:00 UTC intervals of ``first`` to ``last`` days ago, oldest first."""
    today = crontab.now().astimezone(dt.timezone.utc).date()
    return [
        dt.datetime.combine(today - dt.timedelta(days=n), dt.time(3, 0, tzinfo=dt.timezone.utc))
        for n in range(first, last - 1, -1)
    ]


def _plan(crontab, request_of, now=None) -> tuple[RerunPlan, list[str], dt.datetime]:
    """The plan of a request over the test database (at ``now``, else the database's clock)
    and the lines ``--dry-run`` prints of it."""
    settings = load_settings(str(crontab.ini), {})  # the environment: the test database
    jobs = load_jobs(settings)
    store = StateStore(connect(crontab.database), crontab.database)
    try:
        at = now if now is not None else store.now()
        request = request_of(find_job(jobs, "parallel-backfill"))
        plan = plan_rerun(store, jobs, settings, request, at)
        return plan, plan_lines(plan, jobs, settings), at
    finally:
        store.close()


def test_the_dry_run_prints_the_plan_the_run_carries_out(crontab):
    crontab.configure(JOBS)
    days = _days(crontab, 4, 1)
    # one day done already: --only missing skips it (its dependants' days still run: their
    # parent reruns them or they never ran)
    done = crontab.run("--rerun", "parallel-backfill", "--date", f"{days[1]:%Y-%m-%d}", *WHY)
    assert done[0] == 0, done[1]
    first, last = f"{days[0]:%Y-%m-%d}", f"{days[-1]:%Y-%m-%d}"
    options = ["--date", first, "--to", last, "--only", "missing", "--newest-first", "--downstream"]

    def request_of(job):
        return RerunRequest(
            job,
            "parallel-backfill",
            date=first,
            to=last,
            only="missing",
            newest_first=True,
            downstream=True,
        )

    plan, lines, now = _plan(crontab, request_of)
    again, _, _ = _plan(crontab, request_of, now)
    assert again == plan and again is not plan  # the same request at the same now
    assert [(s.app_name, s.dates, s.not_rerun is None) for s in plan.stages] == [
        ("parallel-backfill", [days[3], days[2], days[0]], True),  # newest first, one skipped
        ("parallel-dependant", days, True),
        ("plain-dependant", [], False),  # no backfill job
        ("serial-grandchild", days, True),
    ]

    code, printed = crontab.run("--rerun", "parallel-backfill", *options, "--dry-run")
    assert code == 0 and printed.splitlines() == [*plan.warnings, *lines]
    assert lines[3].endswith("skipped: its last unit succeeded (run 1)")

    (seen,) = crontab.sql("SELECT max(id) AS id FROM test_job_calls")
    assert crontab.run("--rerun", "parallel-backfill", *options, *WHY)[0] == 0
    ran = crontab.sql(
        "SELECT app_name, day FROM test_job_calls WHERE id > %s ORDER BY id", (seen["id"],)
    )
    assert [(row["app_name"], row["day"]) for row in ran] == [
        (stage.app_name, when) for stage in plan.stages for when in stage.dates
    ]


def test_a_bad_day_is_refused_naming_its_options(crontab):
    crontab.configure(JOBS)

    def request_of(job):
        return RerunRequest(job, "parallel-backfill", date="2026-13-01")

    with pytest.raises(ConfigurationError, match="--date/--to"):
        _plan(crontab, request_of)
