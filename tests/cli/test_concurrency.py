"""Many runner processes started together: every due job runs exactly once."""

import collections
import datetime as dt

JOBS = ["BasicJob|1d", "FooJob|1d", "BarJob|1d", "FooBackfillJob|1d", "SlowJob|1d"]
PROCESSES = 20
ROUNDS = 3


def test_twenty_runners_at_once_run_each_due_job_exactly_once(cli):
    crontab = cli.crontab
    crontab.configure(JOBS, extra="    [[class-SlowJob]]\n        sleep=0.5\n")
    for round_number in range(1, ROUNDS + 1):
        procs = [cli.spawn() for _ in range(PROCESSES)]
        codes = collections.Counter(proc.wait(timeout=120) for proc in procs)
        for proc in procs:
            proc.communicate()
        assert set(codes) <= {0, 2, 3}, codes
        print("exit codes", dict(codes))
        counts = collections.Counter(call["app_name"] for call in crontab.calls())
        assert counts == {
            name: round_number for name in ("basic-job", "foo", "bar", "foo-backfill", "slow-job")
        }, counts
        for name in counts:
            state = crontab.state(name)
            assert state.ongoing is None and state.error_count == 0, state
        crontab.wind(dt.timedelta(days=1, seconds=1))
