"""A job reads its run from one frozen context (crontabber.base.RunContext) that the runner's
child serves before it builds the job: the runner sets nothing on the instance (issue #41,
item 3), and crontabber 0.18's contract (``self.config``, ``self.job_information``,
``run()``) is unchanged."""

from __future__ import annotations

import datetime as dt

from crontabber.base import NO_RUN, BaseCronApp, RunContext, UnitResult, serve, units_of
from crontabber.config.options import DotDict


def test_a_job_sees_its_claim_and_nothing_is_set_on_it(crontab):
    crontab.configure(["ContextJob|1d"])
    code, out = crontab.run()
    assert code == 0, out
    (row,) = crontab.sql(
        "SELECT run_id, started, summary FROM crontabber_run WHERE app_name = 'context-job'"
    )
    fields = dict(part.split("=", 1) for part in row["summary"].split())
    assert fields["run_id"] == str(row["run_id"])
    assert dt.datetime.fromisoformat(fields["started_at"]) == row["started"]
    assert fields["holds"] == "True"
    # only what BaseCronApp.__init__ sets from the job's own arguments and its run() results
    assert fields["attributes"] == "config,job_information,last_metrics,last_summary"


class _Lease:
    def __init__(self, holds: bool) -> None:
        self._holds = holds

    def holds(self) -> bool:
        return self._holds


class _Daily(BaseCronApp):
    app_name = "daily"

    def run(self) -> str:
        return "did it"


def test_outside_the_runner_a_job_serves_no_run():
    job = _Daily(DotDict(), None)
    assert job.context is NO_RUN
    assert (job.run_id, job.started_at, job.holds_lease()) == (None, None, True)


def test_the_served_context_is_what_the_job_reads():
    claimed = dt.datetime(2026, 11, 28, 6, tzinfo=dt.timezone.utc)
    job = _Daily(DotDict(), None)
    try:
        serve(RunContext(started_at=claimed, run_id=41, lease=_Lease(False)))
        assert (job.run_id, job.started_at, job.holds_lease()) == (41, claimed, False)
        assert list(units_of(job)) == [UnitResult(claimed, "did it", None)]
    finally:
        serve(NO_RUN)


def test_a_class_with_only_crontabbers_main_still_gives_its_units():
    when = dt.datetime(2026, 11, 28, tzinfo=dt.timezone.utc)

    class Old:
        def main(self):
            yield when

    assert list(units_of(Old())) == [UnitResult(when, None, None)]
