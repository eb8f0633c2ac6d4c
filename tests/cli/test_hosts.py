"""Several hosts sharing one PostgreSQL, with random kills (issue #12).

Four hosts, each a network namespace (``ip netns``, reaching PostgreSQL over
a veth pair through a TCP forwarder) with a host name of its own (``unshare
--uts``), each starting the runner 50 times in a row, killing about one tick
in four with SIGKILL at a random moment. Two jobs that hold a file lock
while they run (a second copy running at the same time records
``overlapped``) are made due again as soon as each run is recorded. Then:

- no double run: no two copies of a job ever ran at once, and no due run was
  recorded as done twice;
- no missed run: every time a job was made due, a run of it was recorded as
  done (after a settling phase in which the hosts keep ticking);
- every run killed mid-job was taken over no later than the first tick (of
  any host) that started after its lease ran out had ended: the ticks' own
  record, not a wall-clock figure that a slow machine stretches.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.fixtures.netns import on_host
from tests.fixtures.tcp_proxy import TcpProxy
from tests.helpers import REPO

HOSTS = 4  # the namespaces fixture (tests/cli/conftest.py)
TICKS = 50
KILL_PROBABILITY = 0.4
# The defaults' proportions (lease 120 s, heartbeat 30 s), scaled down: a runner stops its job
# when renewals have failed for lease - heartbeat/2, half a heartbeat before another host may
# take over; at 3.0/0.5 that left 0.25 s for a starved runner on a loaded 2-core machine to
# stop its job, and a CI run saw one overlap; at 4.0/1.0 CI runs saw another, and calls left
# unfinished with no kill. All were one race, not a thin margin: a runner killed right after
# forking its job, before the job set its death signal, left the job running unsupervised
# (the child compared its parent with a pid it had read itself: already the reaper's).
# tests/unit/test_supervisor_child.py holds the fix; 4.0/1.0 then passed 4 of 4 under load.
LEASE, BEAT = 4.0, 1.0
JOBS = ("exclusive-a", "exclusive-b")
CLOCK_SLACK = 0.2  # the database's clock_timestamp() against the hosts' time.time()


def _make_due(crontab, expected: dict[str, int], stop: threading.Event) -> None:
    """Make each job due again as soon as its last run is recorded as done."""
    while not stop.wait(0.3):
        for row in crontab.sql(
            "UPDATE crontabber SET next_run = clock_timestamp() "
            "WHERE next_run > clock_timestamp() AND ongoing IS NULL RETURNING app_name"
        ):
            expected[row["app_name"]] += 1


def _takeover_due_by(killed_at: float, ticks: list[dict]) -> float:
    """When a run killed at ``killed_at`` must have been taken over: by the end of the first
    unkilled tick, of any host, that started after its lease ran out (it was last renewed
    before the kill). A killed tick may take a run over too, but bounds nothing: it may have
    died first. The killed host's own next tick usually takes it over at once (its runner's
    pid is gone: the median below); that is not asserted here, because a CI run saw the
    host's next tick, started 0.25 s after the kill, run the other job and leave this one
    to the tick after it (2.0 s after the kill, within the lease)."""
    able = [t["end"] for t in ticks if t["killed_at"] is None and t["start"] > killed_at + LEASE]
    # None at the very end of the hosts' loops: a tick killed in its turn took it over.
    return min(able, default=float("inf"))


def _settled(crontab) -> bool:
    rows = crontab.sql(
        "SELECT count(*) AS n FROM crontabber WHERE next_run > clock_timestamp() AND ongoing IS "
        "NULL"
    )
    return rows[0]["n"] == len(JOBS)


@pytest.mark.slow  # four hosts, fifty ticks each, kill -9s
def test_four_hosts_fifty_ticks_each_with_random_kills(cli, namespaces, tmp_path, capsys):
    crontab = cli.crontab
    crontab.configure(
        ["ExclusiveA|1d", "ExclusiveB|1d"],
        extra=(
            "    [[class-ExclusiveA]]\n        sleep=1.2\n    [[class-ExclusiveB]]\n        "
            "sleep=1.2\n"
        ),
    )
    db = crontab.database
    proxies = [TcpProxy((db.host, int(db.port)), bind=address) for _, address in namespaces]
    expected = {job: 1 for job in JOBS}  # the first run of each
    stop = threading.Event()
    driver = threading.Thread(target=_make_due, args=(crontab, expected, stop), daemon=True)
    events = tmp_path / "events.jsonl"
    settling: list[dict] = []  # the settling phase's ticks, in the events' form
    hosts = []
    try:
        driver.start()
        for n, ((ns, address), proxy) in enumerate(zip(namespaces, proxies), start=1):
            env = {
                **cli.env,
                "RESOURCE_POSTGRESQL_HOST": address,
                "RESOURCE_POSTGRESQL_PORT": str(proxy.port),
            }
            loop = [
                sys.executable,
                str(REPO / "tests/fixtures/host_loop.py"),
                "--ticks",
                str(TICKS),
                "--kill-probability",
                str(KILL_PROBABILITY),
                "--events",
                str(events),
                "--seed",
                str(n),
                "--",
                "-m",
                "crontabber",
                f"--admin.conf={crontab.ini}",
                f"--crontabber.heartbeat_seconds={BEAT}",
                f"--crontabber.lease_seconds={LEASE}",
            ]
            hosts.append(
                subprocess.Popen(
                    on_host(ns, f"host-{n}", loop),
                    env=env,
                    cwd=REPO,
                )
            )
        for host in hosts:
            assert host.wait(timeout=600) == 0
        stop.set()
        driver.join()
        # Settle: ticks (no kills) until every job's last due run is recorded.
        deadline = time.monotonic() + 60
        while not _settled(crontab):
            assert time.monotonic() < deadline, crontab.sql("SELECT * FROM crontabber")
            ns, address = namespaces[0]
            started = time.time()
            subprocess.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    *cli.argv(
                        f"--crontabber.heartbeat_seconds={BEAT}",
                        f"--crontabber.lease_seconds={LEASE}",
                    ),
                ],
                env={
                    **cli.env,
                    "RESOURCE_POSTGRESQL_HOST": address,
                    "RESOURCE_POSTGRESQL_PORT": str(proxies[0].port),
                },
                cwd=REPO,
                capture_output=True,
                timeout=60,
            )
            settling.append(
                {"host": "settling", "start": started, "end": time.time(), "killed_at": None}
            )
            time.sleep(0.2)
    finally:
        stop.set()
        for host in hosts:
            if host.poll() is None:
                host.kill()
        for proxy in proxies:
            proxy.close()

    ticks = [json.loads(line) for line in events.read_text().splitlines()]
    kills = [t for t in ticks if t["killed_at"] is not None]
    unexpected = [t for t in ticks if t["code"] not in (0, 2, 3, -9)]
    calls = crontab.sql("SELECT * FROM test_job_calls ORDER BY at")
    done = {
        job: len(
            crontab.sql(
                "SELECT 1 FROM crontabber_log WHERE app_name = %s AND success IS NOT NULL", (job,)
            )
        )
        for job in JOBS
    }
    # The ledger, kept beside the test's files for whoever reads a failure.
    for name, rows in (
        ("calls", calls),
        ("ticks", ticks),
        ("log", crontab.sql("SELECT * FROM crontabber_log ORDER BY id")),
    ):
        (tmp_path / f"{name}.json").write_text(json.dumps(rows, default=str, indent=1))
    overlapped = [c for c in calls if c["overlapped"]]
    killed_mid_job = [c for c in calls if c["finished_at"] is None]
    delays, late = [], []
    for call in killed_mid_job:
        start = call["at"].timestamp()
        kill = min(
            (
                t["killed_at"]
                for t in kills
                if t["host"] == call["host"] and t["killed_at"] >= start
            ),
            default=None,
        )
        following = [
            c["at"].timestamp()
            for c in calls
            if c["app_name"] == call["app_name"] and c["at"].timestamp() > start
        ]
        assert kill is not None and following, call
        delays.append(min(following) - kill)
        due_by = _takeover_due_by(kill, ticks + settling)
        if min(following) > due_by + CLOCK_SLACK:
            late.append({"call": call, "killed_at": kill, "due_by": due_by})
    report = {
        "hosts": HOSTS,
        "ticks": len(ticks),
        "kills": len(kills),
        "kills_mid_job": len(killed_mid_job),
        "made_due": dict(expected),
        "recorded_done": done,
        "executions": len(calls),
        "overlapped": len(overlapped),
        "takeover_s": {
            "median": round(statistics.median(delays), 2) if delays else None,
            "max": round(max(delays), 2) if delays else None,
        },
        "exit_codes": {
            str(c): sum(t["code"] == c for t in ticks) for c in sorted({t["code"] for t in ticks})
        },
    }
    with capsys.disabled():
        print("\nmulti-host figures:", json.dumps(report))
    assert len(ticks) == HOSTS * TICKS and not unexpected, unexpected[:3]
    # The test's power: enough kills landed, enough of them in the middle of a job. About 80
    # kills are scheduled (seeded), each inside a tick's lifetime on this machine
    # (tests/fixtures/host_loop.py), so most land whatever the machine's speed.
    assert len(kills) >= 15 and len(killed_mid_job) >= 5
    assert overlapped == []  # no double run: never two copies at once
    assert done == expected  # every due run recorded done once: none missed, none twice
    assert late == []  # every dead holder taken over by the first tick that could
