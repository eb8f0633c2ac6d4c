"""The runner's one supervisor loop (crontabber.runloop) fed as a long-lived server would feed
it: a run added while another is in flight, and a wait that returns at a given time with
nothing ended (the server's next tick). Real children, real PostgreSQL."""

from __future__ import annotations

import time

from crontabber.config.catalog import find_job, load_jobs
from crontabber.config.settings import load_settings
from crontabber.runloop import RunLoop
from crontabber.runner import Runner, Status
from crontabber.store import StateStore, connect
from tests.fixtures.fleet_jobs import FLEET_JOBS


def test_a_loop_is_fed_a_run_while_another_is_in_flight(crontab):
    crontab.configure([f"{FLEET_JOBS}.MeetA|1d", f"{FLEET_JOBS}.MeetB|1d"])
    settings = load_settings(str(crontab.ini), {})  # the environment: the test database
    jobs = load_jobs(settings)
    store = StateStore(connect(crontab.database), crontab.database)
    try:
        runner = Runner(settings, jobs, store)
        loop = RunLoop()
        launches = []
        for name in ("meet-a", "meet-b"):
            job = find_job(jobs, name)
            before, claim, kind = runner._claim_job(job, force=True)
            launch = runner.launcher.launch(job, before, claim, kind)
            runner.launcher.start(loop, launch)
            launches.append(launch)
            if name == "meet-a":  # meet-a waits for meet-b: nothing ends before it is added
                early = loop.wait(until=time.monotonic() + 0.3)
                assert early == [], [e.failure.summary for _, e in early if e.failure]
                assert len(loop) == 1
        ended = []
        while len(ended) < 2:
            ended += loop.wait()
        results = [
            runner.launcher.land(next(la for la in launches if la.supervisor is run), e)
            for run, e in ended
        ]
        assert {r.status for r in results} == {Status.RAN}
    finally:
        store.close()
    calls = {
        c["app_name"]: c
        for c in crontab.sql("SELECT app_name, at, finished_at FROM test_job_calls")
    }
    assert calls["meet-b"]["at"] < calls["meet-a"]["finished_at"]  # side by side
