"""Due jobs side by side (``max_parallel_jobs``): runs overlap, dependency order holds, a job
with ``parallel = False`` runs alone, 1 is crontabber's serial tick, a signal stops every run,
a timeout stops only its own, and ticks started together run each due job once. Every claim
is proved by the order of events the jobs and the ledger recorded, never by a duration."""

from __future__ import annotations

import collections
import signal
import time

from tests.fixtures import fleet_jobs
from tests.fixtures.fleet_jobs import FLEET_JOBS

FLEET = FLEET_JOBS


def parallel(n: int, extra: str = "") -> str:
    return f"    max_parallel_jobs={n}\n{extra}"


def sections(classes: str, **options: object) -> str:
    """The ini sections giving each class of ``classes`` (space-separated) ``options``."""
    values = "".join(f"        {name}={value}\n" for name, value in options.items())
    return "".join(f"    [[class-{name}]]\n{values}" for name in classes.split())


def runs(crontab) -> dict[str, dict]:
    """Each job's newest run in the ledger, by app name."""
    rows = crontab.sql(
        "SELECT app_name, run_id, started, ended, status FROM crontabber_run ORDER BY run_id"
    )
    return {row["app_name"]: row for row in rows}


def overlap(a: dict, b: dict) -> bool:
    """Whether two ledger runs were in flight at once (each started before the other ended)."""
    return a["started"] < b["ended"] and b["started"] < a["ended"]


def test_runs_overlap_up_to_max_parallel_jobs_each_with_its_own_output(cli):
    crontab = cli.crontab
    jobs = [f"{FLEET}.MeetA|1d", f"{FLEET}.MeetB|1d", f"{FLEET}.MeetC|1d"]
    crontab.configure(jobs, extra=parallel(3, sections("MeetA MeetB MeetC", meet=3)))
    tick = cli.run()  # the real command: the jobs' stdout and stderr are the runner's pipes
    assert tick.returncode == 0, tick.stderr
    done = runs(crontab)
    assert [done[name]["status"] for name in ("meet-a", "meet-b", "meet-c")] == ["succeeded"] * 3
    calls = {
        c["app_name"]: c
        for c in crontab.sql("SELECT app_name, at, finished_at FROM test_job_calls")
    }
    for a in calls.values():  # each started before any ended: all three at once
        assert all(a["at"] < b["finished_at"] for b in calls.values())
    assert overlap(done["meet-a"], done["meet-c"])
    for name in ("meet-a", "meet-b", "meet-c"):  # each run's output is its own
        output = crontab.sql("SELECT output FROM crontabber_run WHERE app_name = %s", (name,))[0][
            "output"
        ]
        assert (
            f"{name} is here" in output
            and f"{name} met the others" in output
            and f"{name} logs" in output
        )
        assert not any(other in output for other in ("meet-a", "meet-b", "meet-c") if other != name)
        logs = cli.run("--logs", name)
        assert logs.returncode == 0 and f"{name} met the others" in logs.stdout
    for line in tick.stderr.splitlines():  # the runner's log lines name their job
        if " is here" in line or " logs" in line:
            name = line.split()[0]
            assert name.startswith("meet-") or "crontabber.job.meet-" in line, line


def test_parents_due_in_the_same_pass_end_before_their_children_start(crontab):
    sample = "tests.fixtures.sample_jobs"
    jobs = ["FooBarJob|1d", "BarJob|1d", "FooJob|1d", "BasicJob|1d", "TroubleJob|1d", "SadJob|1d"]
    crontab.configure([f"{sample}.{job}" for job in jobs], extra=parallel(4))
    assert crontab.run()[0] == 0
    done = runs(crontab)
    assert done["bar"]["started"] >= done["foo"]["ended"]
    assert done["foobar"]["started"] >= max(done["foo"]["ended"], done["bar"]["ended"])
    assert done["trouble"]["status"] == "failed"
    assert "sad" not in done and crontab.state("sad") is None  # blocked: its parent failed
    assert {c["app_name"] for c in crontab.calls()} == {
        "foo",
        "bar",
        "foobar",
        "basic-job",
        "trouble",
    }


def test_a_job_with_parallel_false_runs_alone(crontab):
    jobs = [f"{FLEET}.{name}|1d" for name in ("BusyA", "BusyB", "AloneJob", "BusyC")]
    crontab.configure(jobs, extra=parallel(4, sections("BusyA BusyB AloneJob BusyC", sleep=0.3)))
    assert crontab.run()[0] == 0
    done = runs(crontab)
    assert len(done) == 4 and {run["status"] for run in done.values()} == {"succeeded"}
    alone = done.pop("alone")
    assert not any(overlap(alone, other) for other in done.values())
    assert overlap(done["busy-a"], done["busy-b"])  # the others did run side by side


def test_one_at_a_time_is_crontabbers_serial_tick(crontab):
    sample = "tests.fixtures.sample_jobs"
    jobs = ["TroubleJob|1d", "SadJob|1d", "BasicJob|1d", "FooJob|1d", "BarJob|1d"]
    crontab.configure([f"{sample}.{job}" for job in jobs], extra=parallel(1))
    assert crontab.run()[0] == 0
    assert [c["app_name"] for c in crontab.calls()] == ["basic-job", "foo", "trouble", "bar"]
    ordered = sorted(runs(crontab).values(), key=lambda run: run["run_id"])
    assert [run["app_name"] for run in ordered] == ["basic-job", "foo", "trouble", "bar"]
    assert all(a["ended"] <= b["started"] for a, b in zip(ordered, ordered[1:]))


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_sigterm_stops_every_run_and_records_each(cli):
    crontab = cli.crontab
    jobs = [f"{FLEET}.{name}|1d" for name in ("BusyA", "BusyB", "BusyC")]
    crontab.configure(jobs, extra=parallel(3, sections("BusyA BusyB BusyC", sleep=120)))
    tick = cli.spawn()
    wait_for(lambda: len(crontab.calls()) == 3)  # all three children are in their job
    tick.send_signal(signal.SIGTERM)
    _, err = tick.communicate(timeout=60)
    assert tick.returncode == 143, err
    done = runs(crontab)
    assert {name: run["status"] for name, run in done.items()} == dict.fromkeys(
        ("busy-a", "busy-b", "busy-c"), "stopped by signal"
    )
    for name in done:
        state = crontab.state(name)
        assert state.ongoing is None and state.error_count == 0  # stopped, not failed: still due


def test_a_timeout_stops_only_its_own_run(crontab):
    jobs = [f"{FLEET}.MeetA|1d", f"{FLEET}.MeetB|1d", f"{FLEET}.BusyA|1d"]
    extra = sections("MeetA MeetB", meet=2) + sections("BusyA", sleep=120, timeout=1)
    crontab.configure(jobs, extra=parallel(3, extra))
    assert crontab.run()[0] == 0
    done = runs(crontab)
    assert done["busy-a"]["status"] == "timed out"
    assert done["meet-a"]["status"] == done["meet-b"]["status"] == "succeeded"
    assert overlap(done["busy-a"], done["meet-a"]) and overlap(done["busy-a"], done["meet-b"])


def test_four_ticks_at_once_run_each_of_200_due_jobs_exactly_once(cli):
    crontab = cli.crontab
    crontab.configure(fleet_jobs.entries(200), extra=parallel(4))
    for round_number in (1, 2):
        ticks = [cli.spawn() for _ in range(4)]
        for tick in ticks:
            _, err = tick.communicate(timeout=300)
            assert tick.returncode == 0, err
        counts = collections.Counter(
            row["app_name"]
            for row in crontab.sql("SELECT app_name FROM crontabber_run WHERE status = 'succeeded'")
        )
        assert len(counts) == 200 and set(counts.values()) == {round_number}
        assert crontab.sql("SELECT count(*) AS n FROM crontabber_run")[0]["n"] == 200 * round_number
        crontab.sql("UPDATE crontabber SET next_run = clock_timestamp() - interval '1 minute'")
