"""A ``--rerun --parallel 2`` worked on from two hosts (network namespaces, each reaching
PostgreSQL through a TCP forwarder, each with a host name of its own), with SIGKILLs in the
middle of intervals (issue #34 item 2):

- a run killed on host-2 while a peer of host-2 runs: its interval is taken over at once
  there (the pid is gone on that host), not after the lease;
- the rerun's first run, killed on host-1: its interval waits for the lease on host-2 (from
  there the process may be alive), then is taken over;
- every run killed: ``--resume-run`` from host-2 continues where the rerun stopped.

Then: no interval ran twice at once, never more than 2 at once, none was missed, and both
hosts worked on it."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess

from tests.fixtures.reruns import (
    calls,
    configure,
    day,
    days_back,
    group_done,
    hold_in_interval,
    most_at_once,
    never_twice_at_once,
)
from tests.fixtures.tcp_proxy import TcpProxy
from tests.fixtures.waiting import wait_for
from tests.helpers import REPO

LEASE, BEAT = 6.0, 1.0
TIMES = (f"--crontabber.heartbeat_seconds={BEAT}", f"--crontabber.lease_seconds={LEASE}")


def test_a_parallel_rerun_across_two_hosts_with_kills(cli, namespaces):
    crontab = cli.crontab
    configure(cli, 1.5)
    dates = days_back(cli, 18, 3)  # 16 intervals
    db = crontab.database
    hosts = namespaces[:2]
    proxies = [TcpProxy((db.host, int(db.port)), bind=address) for _, address in hosts]
    procs: dict[int, subprocess.Popen] = {}

    def spawn(n: int, *args: str) -> subprocess.Popen:
        ns, address = hosts[n - 1]
        env = {
            **cli.env,
            "RESOURCE_POSTGRESQL_HOST": address,
            "RESOURCE_POSTGRESQL_PORT": str(proxies[n - 1].port),
        }
        argv = [
            "ip",
            "netns",
            "exec",
            ns,
            *cli.argv(
                "--rerun", "parallel-backfill", "--reason", "t", *args, *TIMES, host=f"host-{n}"
            ),
        ]
        proc = subprocess.Popen(
            argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        procs[proc.pid] = proc
        return proc

    def runs() -> dict[int, dict]:
        return {r["pid"]: r for r in crontab.sql("SELECT run_id, pid, host FROM crontabber_run")}

    ended: dict[int, dt.datetime] = {}

    def kill(proc: subprocess.Popen) -> list[dict]:
        run_id = runs()[proc.pid]["run_id"]
        os.kill(proc.pid, signal.SIGKILL)
        now = crontab.now()  # before a peer, seeing the pid gone, may take its interval over
        proc.wait(timeout=30)
        cut = [c for c in calls(cli) if c["run_id"] == run_id and c["finished_at"] is None]
        for call in cut:
            ended[call["id"]] = max(now, call["at"])
        return cut

    def busy(proc: subprocess.Popen) -> bool:
        """In an interval it started less than half its length ago: still in it when killed."""
        run = runs().get(proc.pid)
        now = crontab.now()
        return run is not None and any(
            c["run_id"] == run["run_id"]
            and c["finished_at"] is None
            and (now - c["at"]).total_seconds() < 0.7
            for c in calls(cli)
        )

    def held(proc: subprocess.Popen) -> bool:
        """:func:`busy`, and its job stopped in that interval (``hold_in_interval``) until the
        kill."""
        return busy(proc) and hold_in_interval(cli, runs()[proc.pid]["run_id"]) is not None

    try:
        lead = spawn(1, "--parallel", "2", "--date", day(dates[0]), "--to", day(dates[-1]))
        wait_for(lambda: lead.pid in runs(), what="the rerun on host-1")
        root = runs()[lead.pid]["run_id"]
        second = spawn(2, "--resume-run", str(root))
        third = spawn(2, "--resume-run", str(root))
        wait_for(lambda: len(runs()) == 3, what="two runs joining from host-2")
        assert {r["host"] for r in runs().values()} == {"host-1", "host-2"}

        # host-2: a run killed mid-interval while its peer there waits (2 at once at most)
        victim = wait_for(
            lambda: next(
                (p for p in (second, third) if len(group_done(cli, root)) >= 2 and held(p)), None
            ),
            timeout=60,
            what="a host-2 run in an interval",
        )
        (cut,) = kill(victim)
        taken = wait_for(
            lambda: [c for c in calls(cli) if c["day"] == cut["day"] and c["id"] > cut["id"]],
            timeout=30,
            what="host-2's killed interval taken over",
        )
        # by a run of host-2, for the pid gone there (recorded on the killed run) or once the
        # lease ran out, or later by one of host-1: an order of events, not a wall-clock bound
        (killed,) = crontab.sql(
            "SELECT error, heartbeat FROM crontabber_run WHERE pid = %s", (victim.pid,)
        )
        for_the_pid = "is gone; taken over by run" in (killed["error"] or "")
        after_lease = (taken[0]["at"] - killed["heartbeat"]).total_seconds() >= LEASE
        assert taken[0]["host"] == "host-1" or for_the_pid or after_lease, (killed, taken)

        # host-1: the first run, killed mid-interval: host-2 must wait out its lease
        wait_for(lambda: held(lead), timeout=60, what="host-1's run in an interval")
        (lead_cut,) = kill(lead)
        lead_taken = wait_for(
            lambda: [
                c for c in calls(cli) if c["day"] == lead_cut["day"] and c["id"] > lead_cut["id"]
            ],
            timeout=60,
            what="host-1's killed interval taken over by host-2",
        )
        assert lead_taken[0]["host"] == "host-2"
        (beat,) = crontab.sql("SELECT heartbeat FROM crontabber_run WHERE pid = %s", (lead.pid,))
        assert (
            lead_taken[0]["at"] - beat["heartbeat"]
        ).total_seconds() >= LEASE  # not before its lease ran out

        # every run killed, mid-interval: --resume-run from host-2 continues where it stopped
        survivor = next(p for p in (second, third) if p is not victim)
        wait_for(lambda: held(survivor), timeout=60, what="the last run in an interval")
        kill(survivor)
        done_before = group_done(cli, root)
        assert len(done_before) < len(dates)
        before = len(calls(cli))
        resumed = spawn(2, "--resume-run", str(root))
        out, err = resumed.communicate(timeout=120)
        ledger = crontab.sql(
            "SELECT run_id, kind, host, pid, status, error, started, ended FROM crontabber_run"
        )
        claims = crontab.sql("SELECT * FROM crontabber_interval ORDER BY starts")
        assert resumed.returncode == 0, (out, err, ledger, claims)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)  # its pipes closed here, not left to the garbage collector
        for proxy in proxies:
            proxy.close()

    again = [c["day"] for c in calls(cli)[before:]]
    assert again == [d for d in dates if d not in done_before]  # the rest, in the plan's order
    rows = calls(cli)
    never_twice_at_once(rows, ended)
    assert most_at_once(rows, ended) <= 2
    assert group_done(cli, root) == dates  # none missed
    assert {c["host"] for c in rows} == {"host-1", "host-2"}
    statuses = crontab.sql(
        "SELECT status, count(*) AS n FROM crontabber_run WHERE run_id = %s OR resumed_from = %s "
        "GROUP BY status",
        (root, root),
    )
    assert {r["status"]: r["n"] for r in statuses} == {"abandoned": 3, "succeeded": 1}
