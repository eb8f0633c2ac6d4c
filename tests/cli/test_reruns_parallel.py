"""Reruns v2 (issue #34 item 2), continued, through the real entry point: ``--parallel N``
(several runs of one rerun, each claiming the next free interval while fewer than N are
held), ``--downstream`` (the dependants for the same days, parents first), the dry run of
both, and kills (SIGKILL) in the middle: a killed worker's interval is taken over at once on
its host, and ``--resume-run`` continues where the rerun stopped. Across network-namespace
hosts: tests/cli/test_reruns_hosts.py."""

from __future__ import annotations

import datetime as dt
import os
import signal

from tests.fixtures.reruns import (
    CLASSES,
    DAY,
    JOBS,
    SLOW,
    calls,
    configure,
    day,
    days_back,
    group_done,
    hold_in_interval,
    most_at_once,
    never_twice_at_once,
)
from tests.fixtures.waiting import wait_for


def test_parallel_is_refused_for_a_job_that_does_not_declare_it(cli):
    configure(cli, 0)
    (first,) = days_back(cli, 3, 3)
    done = cli.run(
        "--rerun", "serial-grandchild", "--reason", "t", "--parallel", "2", "--date", day(first)
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "crontabber: --parallel: serial-grandchild does not declare parallel_reruns = True (its "
        "intervals may "
        "depend on each other): it reruns one interval at a time; leave out --parallel"
    ]
    for option in (
        ("--parallel", "2"),
        ("--downstream",),
        ("--only", "failed"),
        ("--newest-first",),
    ):
        mixed = cli.run(
            "--rerun", "parallel-backfill", "--reason", "t", "--resume-run", "1", *option
        )
        assert mixed.returncode == 1 and f"leave out {option[0]}" in mixed.stderr
    assert (
        cli.run("--rerun", "parallel-backfill", "--parallel", "0", "--date", day(first)).returncode
        == 1
    )
    assert cli.run("--list-jobs", "--downstream").returncode == 1  # it belongs to --rerun
    assert calls(cli) == []


def test_the_dry_run_shows_the_jobs_the_order_and_the_parallelism(cli):
    configure(cli, 0, [*JOBS, "PlainDependantJob|1d"])
    first, second, third = days_back(cli, 4, 2)
    dry = cli.run(
        "--rerun",
        "parallel-backfill",
        "--parallel",
        "3",
        "--downstream",
        "--newest-first",
        "--dry-run",
        "--date",
        day(first),
        "--to",
        day(third),
    )
    assert dry.returncode == 0, dry.stderr
    stamp = "%Y-%m-%d %H:%M UTC"
    newest = [f"  {when:{stamp}}" for when in (third, second, first)]
    assert dry.stdout.splitlines() == [
        "parallel-backfill: --rerun would run 3 interval(s), newest first, up to 3 at once (more "
        "runs join it "
        "with --rerun parallel-backfill --resume-run RUN, on this host or others) (nothing ran):",
        *newest,
        "then, with --downstream, its dependants for the same days, each after the one before has "
        "done every "
        "interval (3):",
        "parallel-dependant: --rerun would run 3 interval(s), by day as above, up to 3 at once:",
        *newest,
        "plain-dependant: not rerun: not a backfill job (--job plain-dependant --force runs it "
        "once)",
        "serial-grandchild: --rerun would run 3 interval(s), by day as above, one at a time (it "
        "does not "
        "declare parallel_reruns):",
        *newest,
    ]
    assert cli.crontab.sql("SELECT 1 FROM crontabber_run") == [] and calls(cli) == []


def test_downstream_reruns_each_dependant_after_its_parents_for_the_same_days(cli):
    configure(cli, 0.3, [*JOBS, "PlainDependantJob|1d"])
    dates = days_back(cli, 5, 2)
    done = cli.run(
        "--rerun",
        "parallel-backfill",
        "--reason",
        "test",
        "--downstream",
        "--date",
        day(dates[0]),
        "--to",
        day(dates[-1]),
        *SLOW,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "plain-dependant: not rerun: not a backfill job" in done.stdout
    order = ("parallel-backfill", "parallel-dependant", "serial-grandchild")
    by_job = {name: calls(cli, name) for name in order}
    for name in order:
        assert [c["day"] for c in by_job[name]] == dates, name
    for parent, child in zip(
        order, order[1:]
    ):  # every interval of the parent before any of the child
        assert max(c["finished_at"] for c in by_job[parent]) <= min(c["at"] for c in by_job[child])
    runs = cli.crontab.sql(
        "SELECT run_id, app_name, downstream, downstream_of, status FROM crontabber_run ORDER BY "
        "run_id"
    )
    root = runs[0]["run_id"]
    assert [(r["app_name"], r["downstream"], r["downstream_of"], r["status"]) for r in runs] == [
        ("parallel-backfill", True, None, "succeeded"),
        ("parallel-dependant", None, root, "succeeded"),
        ("serial-grandchild", None, root, "succeeded"),
    ]
    assert calls(cli, "plain-dependant") == []


def test_a_downstream_rerun_killed_in_a_dependant_is_resumed_there(cli):
    """Killed while the first dependant runs: ``--resume-run ROOT`` skips the job, whose
    intervals are done, finishes the dependant's and then runs the next dependant's."""
    configure(cli, 0.8)
    dates = days_back(cli, 4, 2)
    rerun = cli.spawn(
        "--rerun",
        "parallel-backfill",
        "--reason",
        "t",
        "--downstream",
        "--date",
        day(dates[0]),
        "--to",
        day(dates[-1]),
        *SLOW,
    )
    wait_for(
        lambda: len([c for c in calls(cli, "parallel-dependant") if c["finished_at"]]) >= 1,
        what="a dependant's interval",
    )
    os.kill(rerun.pid, signal.SIGKILL)
    rerun.wait(timeout=30)
    root = cli.crontab.sql("SELECT min(run_id) AS r FROM crontabber_run")[0]["r"]
    before = len(calls(cli, "parallel-dependant"))
    (dependant,) = cli.crontab.sql(
        "SELECT run_id FROM crontabber_run WHERE app_name = 'parallel-dependant'"
    )
    done_before = group_done(
        cli, dependant["run_id"], "parallel-dependant"
    )  # (a call cut after its end redoes)
    dry = cli.run("--rerun", "parallel-backfill", "--resume-run", str(root), "--dry-run", *SLOW)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0].startswith(
        "parallel-backfill: --rerun would run 0 interval(s), 3 skipped"
    )
    assert (
        "parallel-dependant: --rerun would run" in dry.stdout
        and "serial-grandchild: --rerun would run 3" in dry.stdout
    )
    resumed = cli.run(
        "--rerun",
        "parallel-backfill",
        "--reason",
        "t",
        "--resume-run",
        str(root),
        *SLOW,
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert [c["day"] for c in calls(cli)] == dates  # the job's intervals: not again
    again = [c["day"] for c in calls(cli, "parallel-dependant")[before:]]
    assert again == [d for d in dates if d not in done_before]
    assert [c["day"] for c in calls(cli, "serial-grandchild")] == dates
    assert (
        len(
            cli.crontab.sql(
                "SELECT 1 FROM crontabber_run WHERE app_name = 'parallel-dependant' AND "
                "resumed_from IS NULL"
            )
        )
        == 1
    )


def test_parallel_workers_on_one_host_killed_mid_interval(cli):
    """A rerun of 8 intervals, at most 2 at once, worked on by 3 runs of this host. One is
    killed (SIGKILL) in the middle of an interval: a peer takes it over at once (its pid is
    gone; the lease is 60 s). Then the others are killed; ``--resume-run`` at once on this
    host runs exactly what was left. No interval ever ran twice at once, never more than 2
    ran at once, none was missed."""
    configure(cli, 1.2)
    dates = days_back(cli, 10, 3)
    span = ("--date", day(dates[0]), "--to", day(dates[-1]))
    lead = cli.spawn(
        "--rerun", "parallel-backfill", "--reason", "t", "--parallel", "2", *span, *SLOW
    )
    root = wait_for(lambda: cli.crontab.sql("SELECT run_id FROM crontabber_run"), what="the rerun")[
        0
    ]["run_id"]
    workers = {lead.pid: lead}
    for _ in range(2):
        joined = cli.spawn(
            "--rerun", "parallel-backfill", "--reason", "t", "--resume-run", str(root), *SLOW
        )
        workers[joined.pid] = joined
    run_of = {}  # pid -> its run
    wait_for(
        lambda: (
            len(
                run_of.update(
                    {
                        r["pid"]: r["run_id"]
                        for r in cli.crontab.sql("SELECT pid, run_id FROM crontabber_run")
                    }
                )
                or run_of
            )
            == 3
        ),
        what="three runs",
    )
    ended: dict[int, dt.datetime] = {}

    def kill(pid: int) -> None:
        os.kill(pid, signal.SIGKILL)
        now = cli.crontab.now()  # before a peer, seeing the pid gone, may take its interval over
        workers[pid].wait(timeout=30)
        # Read once the process is gone: a call it began between a read and the kill is cut too.
        for call in [
            c for c in calls(cli) if c["run_id"] == run_of[pid] and c["finished_at"] is None
        ]:
            ended[call["id"]] = max(now, call["at"])

    def in_an_interval() -> int | None:
        """A joined run that started an interval less than half its length ago: still in it
        when the kill lands."""
        now = cli.crontab.now()
        rows = calls(cli)
        if len([c for c in rows if c["finished_at"]]) < 2:
            return None
        fresh = {
            c["run_id"]
            for c in rows
            if c["finished_at"] is None and (now - c["at"]).total_seconds() < 0.6
        }
        return next((pid for pid, run in run_of.items() if run in fresh and pid != lead.pid), None)

    cut = None
    while cut is None:
        victim = wait_for(in_an_interval, what="a joined run in an interval")
        cut = hold_in_interval(cli, run_of[victim])
    kill(victim)
    taken = wait_for(
        lambda: [c for c in calls(cli) if c["day"] == cut["day"] and c["id"] > cut["id"]],
        timeout=45,  # within the 60 s lease; "is gone" below proves it was for the pid
        what="the killed run's interval taken over",
    )
    assert taken[0]["run_id"] != run_of[victim]
    (abandoned,) = cli.crontab.sql(
        "SELECT status, error FROM crontabber_run WHERE run_id = %s", (run_of[victim],)
    )
    assert abandoned["status"] == "abandoned" and "is gone; taken over by run" in abandoned["error"]
    wait_for(lambda: len(group_done(cli, root)) >= 4, timeout=60, what="four intervals done")
    for pid in [p for p in workers if p != victim]:
        kill(pid)
    done_before = group_done(cli, root)
    assert len(done_before) < len(dates)
    before = len(calls(cli))
    # At once, on this host: the dead runs' pids are gone (their lease is live for 60 s).
    resumed = cli.run(
        "--rerun",
        "parallel-backfill",
        "--reason",
        "t",
        "--resume-run",
        str(root),
        *SLOW,
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stderr
    again = [c["day"] for c in calls(cli)[before:]]
    assert again == [
        d for d in dates if d not in done_before
    ]  # where it stopped, in the plan's order
    rows = calls(cli)
    never_twice_at_once(rows, ended)
    assert most_at_once(rows, ended) <= 2
    assert group_done(cli, root) == dates  # none missed
    statuses = cli.crontab.sql(
        "SELECT status, count(*) AS n FROM crontabber_run WHERE run_id = %s OR resumed_from = %s "
        "GROUP BY status",
        (root, root),
    )
    assert {r["status"]: r["n"] for r in statuses} == {"abandoned": 3, "succeeded": 1}


def test_downstream_with_only_covers_a_dependants_own_missing_days_and_keeps_parallel(cli):
    """Issue #42 items 3 and 4: the parent's days all succeeded, its dependants never ran
    them: ``--only failed,missing --downstream`` reruns the dependants' missing days (it took
    only the days the parent reran now: none); a resumed ``--parallel 2`` rerun's dependants
    keep running 2 at once (they fell back to one)."""
    configure(cli, 0)
    dates = days_back(cli, 4, 2)
    span = ("--date", day(dates[0]), "--to", day(dates[-1]))
    assert cli.run("--rerun", "parallel-backfill", "--reason", "t", *span, *SLOW).returncode == 0
    dry = cli.run(
        "--rerun",
        "parallel-backfill",
        "--only",
        "failed,missing",
        "--downstream",
        "--dry-run",
        *span,
        *SLOW,
    )
    assert dry.returncode == 0, dry.stderr
    head = dry.stdout.splitlines()[0]
    assert (
        head.startswith("parallel-backfill: --rerun would run 0 interval(s)")
        and "3 skipped" in head
    ), head
    assert "parallel-dependant: --rerun would run 3 interval(s)" in dry.stdout, dry.stdout
    assert "serial-grandchild: --rerun would run 3 interval(s)" in dry.stdout, dry.stdout
    # item 4: a --parallel 2 --downstream rerun killed in the parent's stage, then resumed
    configure(cli, 1.0)
    rerun = cli.spawn(
        "--rerun",
        "parallel-backfill",
        "--reason",
        "t",
        "--parallel",
        "2",
        "--downstream",
        *span,
        *SLOW,
    )
    root = wait_for(
        lambda: cli.crontab.sql("SELECT max(run_id) AS r FROM crontabber_run WHERE parallel = 2")[
            0
        ]["r"],
        what="the rerun",
    )
    wait_for(lambda: [c for c in calls(cli) if c["run_id"] == root], what="its first interval")
    os.kill(rerun.pid, signal.SIGKILL)
    rerun.wait(timeout=30)
    dry = cli.run("--rerun", "parallel-backfill", "--resume-run", str(root), "--dry-run", *SLOW)
    assert dry.returncode == 0, dry.stderr
    dependant = next(
        line for line in dry.stdout.splitlines() if line.startswith("parallel-dependant: --rerun")
    )
    assert "up to 2 at once" in dependant, dry.stdout
    configure(cli, 0)
    resumed = cli.run(
        "--rerun",
        "parallel-backfill",
        "--reason",
        "t",
        "--resume-run",
        str(root),
        *SLOW,
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stderr
    (row,) = cli.crontab.sql(
        "SELECT parallel FROM crontabber_run WHERE app_name = 'parallel-dependant' AND "
        "downstream_of = %s",
        (root,),
    )
    assert row["parallel"] == 2


def test_a_resumed_rerun_skips_what_another_run_did_since(cli):
    """Issue #42 item 3: ``--resume-run`` of a killed rerun redid the days a newer rerun had
    done since; its plan and its run skip them, naming the run that did each."""
    configure(cli, 1.0)
    dates = days_back(cli, 4, 2)
    span = ("--date", day(dates[0]), "--to", day(dates[-1]))
    first = cli.spawn("--rerun", "parallel-backfill", "--reason", "t", *span, *SLOW)
    wait_for(lambda: [c for c in calls(cli) if c["finished_at"]], what="its first interval done")
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    (old,) = cli.crontab.sql("SELECT run_id FROM crontabber_run WHERE kind = 'rerun'")
    configure(cli, 0)
    assert cli.run("--rerun", "parallel-backfill", "--reason", "t", *span, *SLOW).returncode == 0
    newer = cli.crontab.sql("SELECT max(run_id) AS r FROM crontabber_run WHERE kind = 'rerun'")[0][
        "r"
    ]
    before = len(calls(cli))
    dry = cli.run(
        "--rerun", "parallel-backfill", "--resume-run", str(old["run_id"]), "--dry-run", *SLOW
    )
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count(f"succeeded by run {newer} (rerun) since the rerun began") >= 2, (
        dry.stdout
    )
    resumed = cli.run(
        "--rerun", "parallel-backfill", "--reason", "t", "--resume-run", str(old["run_id"]), *SLOW
    )
    assert resumed.returncode == 7, resumed.stderr  # nothing ran
    assert "nothing to rerun: each of the 3 interval(s) is skipped" in resumed.stdout
    assert len(calls(cli)) == before  # nothing redone
