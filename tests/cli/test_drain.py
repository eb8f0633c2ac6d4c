"""Drain and placement across hosts (issue #34 item 1): hosts are network namespaces with host
names of their own (tests/fixtures/netns.py), each reaching PostgreSQL through a TCP forwarder.

- a drained host's ticks claim nothing while another host runs the jobs; a run it had going
  finishes and is recorded; ``--undrain`` lets it claim again; ``--until`` ends a drain;
- a job with ``hosts = TAG`` runs only on a host carrying the tag;
- a job no live host may run opens the ``no-host`` alert, and ``--explain`` says why.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from typing import Any

import pytest

from tests.fixtures.netns import on_host
from tests.fixtures.receiver import Receiver
from tests.fixtures.tcp_proxy import TcpProxy
from tests.helpers import REPO


class Fleet:
    """Hosts ``host-a``, ``host-b``...: each a namespace and a host name; a host's tags from
    the environment (CRONTABBER_HOST_TAGS), as each machine would set its own."""

    def __init__(self, cli: Any, namespaces: list[tuple[str, str]]) -> None:
        self.cli = cli
        db = cli.crontab.database
        self.namespaces = namespaces
        self.proxies = [
            TcpProxy((db.host, int(db.port)), bind=address) for _, address in namespaces
        ]
        self.tags: dict[str, str] = {}

    def _argv_env(self, host: str, args: tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
        n = ord(host[-1]) - ord("a") + 1  # host-a is the fixture's second namespace
        ns, address = self.namespaces[n]
        env = {
            **self.cli.env,
            "RESOURCE_POSTGRESQL_HOST": address,
            "RESOURCE_POSTGRESQL_PORT": str(self.proxies[n].port),
            "CRONTABBER_HOST_TAGS": self.tags.get(host, ""),
        }
        return on_host(ns, host, self.cli.argv(*args)), env

    def tick(self, host: str, *args: str) -> subprocess.CompletedProcess:
        argv, env = self._argv_env(host, args)
        return subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=60)

    def spawn(self, host: str) -> subprocess.Popen:
        argv, env = self._argv_env(host, ())
        return subprocess.Popen(
            argv, env=env, cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def close(self) -> None:
        for proxy in self.proxies:
            proxy.cut()


@pytest.fixture
def fleet(cli, namespaces):
    made = Fleet(cli, namespaces)
    yield made
    made.close()


def runs(crontab) -> list[tuple[str, str, str]]:
    """(job, host, status) of every run, oldest first."""
    return [
        (r["app_name"], r["host"], r["status"])
        for r in crontab.sql("SELECT app_name, host, status FROM crontabber_run ORDER BY run_id")
    ]


def make_due(crontab, *names: str) -> None:
    crontab.sql(
        "UPDATE crontabber SET next_run = clock_timestamp() - interval '1 second' WHERE app_name "
        "= ANY(%s)",
        (list(names),),
    )


def not_due(crontab, *names: str) -> None:
    for name in names:
        crontab.sql(
            "INSERT INTO crontabber (app_name, next_run, error_count, depends_on, last_error)"
            " VALUES (%s, now() + interval '1 day', 0, '{}', '{}')",
            (name,),
        )


def wait_for(check, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_drained_host_claims_nothing_and_its_running_run_finishes(cli, fleet):
    crontab = cli.crontab
    # one job at a time: trouble, due when the tick began, is claimed after slow-job's run
    extra = "    max_parallel_jobs=1\n    [[class-SlowJob]]\n        sleep=4\n"
    crontab.configure(["SlowJob|1d", "BasicJob|1d", "TroubleJob|1d"], extra=extra)
    not_due(crontab, "slow-job", "basic-job", "trouble")
    assert fleet.tick("host-b").returncode == 0  # host-b is in the fleet, idle
    make_due(crontab, "slow-job", "trouble")
    running = fleet.spawn("host-a")  # claims slow-job, runs it 4 s
    wait_for(lambda: running.poll() is not None or crontab.state("slow-job").ongoing is not None)
    assert running.poll() is None, running.communicate()
    code, out = crontab.run("--drain", "host-a")
    assert code == 1 and "--drain: needs --reason TEXT" in out
    code, out = crontab.run("--drain", "host-a", "--reason", "kernel patch")
    assert code == 0, out
    assert "host-a: draining: 1 run left (until --undrain host-a)" in out
    code, out = crontab.run("--list-jobs")
    assert "host host-a: draining: 1 run left (until --undrain by " in out and "kernel patch" in out
    code, out = crontab.run("--nagios")
    assert code == 0 and "host-a draining: 1 run left" in out.splitlines()[0]
    make_due(crontab, "basic-job")  # due while host-a's tick still runs slow-job
    stdout, stderr = running.communicate(timeout=60)
    assert running.returncode == 0, stderr
    assert runs(crontab) == [("slow-job", "host-a", "succeeded")]  # trouble not claimed after
    assert crontab.state("slow-job").last_success is not None
    assert "this host (host-a) is drained" in stderr
    assert fleet.tick("host-a").returncode == 0  # drained: claims nothing though two are due
    assert len(runs(crontab)) == 1
    code, out = crontab.run("--list-jobs")
    assert "host host-a: drained (until --undrain by " in out
    assert fleet.tick("host-b").returncode == 0  # the other host runs them
    assert sorted(runs(crontab)[1:]) == [
        ("basic-job", "host-b", "succeeded"),
        ("trouble", "host-b", "failed"),
    ]
    code, out = crontab.run("--undrain", "host-a")
    assert code == 0 and "host-a: undrained: its next tick claims jobs again" in out
    code, out = crontab.run("--undrain", "host-a")
    assert "host-a: not drained" in out
    make_due(crontab, "basic-job")
    assert fleet.tick("host-a").returncode == 0
    assert runs(crontab)[-1] == ("basic-job", "host-a", "succeeded")
    assert "drain" not in crontab.run("--list-jobs")[1]
    audit = crontab.sql("SELECT action, app_name, reason, detail FROM crontabber_audit ORDER BY id")
    done = [
        (a["action"], a["app_name"], a["reason"])
        for a in audit
        if a["detail"].get("outcome") == "done"
    ]
    assert ("drain", "host:host-a", "kernel patch") in done
    assert ("undrain", "host:host-a", None) in done


def test_until_ends_a_drain_and_an_unknown_host_is_refused(cli, fleet):
    crontab = cli.crontab
    crontab.configure(["BasicJob|1d"])
    not_due(crontab, "basic-job")
    assert fleet.tick("host-a").returncode == 0
    code, out = crontab.run("--drain", "host-x", "--reason", "typo")
    assert code == 1 and "no host called 'host-x' has ticked; hosts: host-a" in out
    now = crontab.sql("SELECT clock_timestamp() AS now")[0]["now"].astimezone(dt.timezone.utc)
    until = (now + dt.timedelta(seconds=8)).strftime("%Y-%m-%dT%H:%M:%S")
    code, out = crontab.run("--drain", "host-a", "--reason", "reboot", "--until", until)
    assert code == 0 and "host-a: drained (until " in out
    make_due(crontab, "basic-job")
    assert fleet.tick("host-a").returncode == 0
    assert runs(crontab) == []
    time.sleep(max(0.0, 8.5 - (dt.datetime.now(dt.timezone.utc) - now).total_seconds()))
    assert fleet.tick("host-a").returncode == 0  # the drain ran out
    assert runs(crontab) == [("basic-job", "host-a", "succeeded")]


def test_a_tagged_job_runs_only_on_a_host_with_the_tag(cli, fleet):
    crontab = cli.crontab
    crontab.configure(
        ["BasicJob|1d", "FooJob|1d"], extra="    [[class-BasicJob]]\n        hosts=spool\n"
    )
    fleet.tags = {"host-b": "spool,es"}
    assert fleet.tick("host-a").returncode == 0
    assert runs(crontab) == [("foo", "host-a", "succeeded")]  # not basic-job: placed on spool
    code, out = crontab.run("--job", "basic-job")  # this host has no tag either
    assert code == 7 and "placed on hosts tagged spool" in out
    assert fleet.tick("host-b").returncode == 0
    assert runs(crontab)[1:] == [("basic-job", "host-b", "succeeded")]
    tags = {r["host"]: r["tags"] for r in crontab.sql("SELECT host, tags FROM crontabber_host")}
    assert tags == {"host-a": [], "host-b": ["spool", "es"]}


def test_a_job_no_live_host_may_run_alerts_and_explain_says_why(cli, fleet):
    crontab = cli.crontab
    receiver = Receiver(bind="0.0.0.0")
    url = f"http://{fleet.namespaces[1][1]}:{receiver.port}/h"
    targets = f"[alerts]\n    targets='''\n        hook webhook {url}\n    '''\n"
    crontab.configure(
        ["BasicJob|1d"], extra="    [[class-BasicJob]]\n        hosts=spool\n" + targets
    )
    try:
        assert fleet.tick("host-a").returncode == 0
        (alert,) = crontab.sql("SELECT kind, message, resolved_at FROM crontabber_alert")
        assert alert["kind"] == "no-host" and alert["resolved_at"] is None
        assert alert["message"].startswith(
            "basic-job: no live host may run it: needs tag spool; hosts with it: none"
        )
        code, out = crontab.run("--explain", "basic-job")
        assert (
            "basic-job: a tick now would skip it: no live host may run it: needs tag spool; hosts "
            "with it: none"
        ) in out
        assert fleet.tick("host-a").returncode == 0  # still open: not opened twice
        assert len(crontab.sql("SELECT 1 FROM crontabber_alert WHERE kind = 'no-host'")) == 1
        fleet.tags = {"host-b": "spool"}
        assert fleet.tick("host-b").returncode == 0  # it may: runs the job, ends the alert
        assert runs(crontab) == [("basic-job", "host-b", "succeeded")]
        kinds = [
            (r["kind"], r["resolved_at"] is not None)
            for r in crontab.sql("SELECT kind, resolved_at FROM crontabber_alert ORDER BY id")
        ]
        assert kinds == [("no-host", True), ("recovered", False)]
        assert crontab.run("--drain", "host-b", "--reason", "kernel patch")[0] == 0
        (by,) = crontab.sql("SELECT drained_by FROM crontabber_host WHERE host = 'host-b'")
        # issue #42 item 5: the line names the drain that stranded the job: when it ends, who, why
        drain = f"host-b (drained until --undrain by {by['drained_by']}: kernel patch)"
        code, out = crontab.run("--explain", "basic-job")
        assert f"no live host may run it: needs tag spool; hosts with it: {drain}" in out
        assert fleet.tick("host-a").returncode == 0
        (again,) = crontab.sql(
            "SELECT message FROM crontabber_alert WHERE kind = 'no-host' AND resolved_at IS NULL"
        )
        assert f"hosts with it: {drain}; it runs nowhere until" in again["message"]
    finally:
        receiver.close()


def test_a_second_drain_needs_replace_and_a_drain_names_the_jobs_it_strands(cli, fleet):
    """Issue #42 item 6: ``--drain`` refuses to replace another operator's drain without
    ``--replace`` (exit 6, naming it, audited as refused), as ``--pause`` and ``--mute`` do;
    draining the last live host of a tag names the jobs it leaves without one."""
    crontab = cli.crontab
    crontab.configure(
        ["BasicJob|1d", "FooJob|1d"], extra="    [[class-BasicJob]]\n        hosts=spool\n"
    )
    not_due(crontab, "basic-job", "foo")
    fleet.tags = {"host-b": "spool"}
    assert fleet.tick("host-a").returncode == 0 and fleet.tick("host-b").returncode == 0
    code, out = crontab.run("--list-jobs", "basic-job")
    assert code == 0 and "no-host" not in out, out
    code, out = crontab.run("--drain", "host-b", "--reason", "kernel patch CHG-97", "--until", "1h")
    assert code == 0 and "host-b: drained (until " in out and "replaced" not in out
    stranded = [line.strip() for line in out.splitlines() if "stranded" in line]
    (by,) = crontab.sql("SELECT drained_by, drain_until FROM crontabber_host WHERE host = 'host-b'")
    until = by["drain_until"].strftime("%Y-%m-%d %H:%M UTC")
    drain = f"host-b (drained until {until} by {by['drained_by']}: kernel patch CHG-97)"
    assert stranded == [
        f"basic-job: stranded: no live host may run it: needs tag spool; hosts with it: {drain} "
        "(--undrain host-b, or give another host the tag)"
    ]
    # issue #42 item 5: a job no live host may run is not "ok" anywhere
    code, out = crontab.run("--list-jobs", "basic-job")
    assert code == 0 and "no-host" in out.splitlines()[1], out
    assert "  no live host may run it" in out.splitlines()[1]  # DETAIL, cut to the terminal's width
    code, out = crontab.run("--list-jobs", "--json")
    (shown,) = [job for job in json.loads(out)["jobs"] if job["name"] == "basic-job"]
    assert shown["status"] == "no-host"
    assert shown["no_host"] == f"no live host may run it: needs tag spool; hosts with it: {drain}"
    code, out = crontab.run("--nagios")
    assert code == 1, out
    assert out.startswith(
        f"WARNING - basic-job: no live host may run it: needs tag spool; hosts with it: {drain}"
    )
    code, out = crontab.run(
        "--drain", "host-b", "--reason", "someone else CHG-98", "--until", "10m"
    )
    assert code == 6, out
    assert "host-b: refusing to drain it again: drained until " in out
    assert "kernel patch CHG-97; --drain host-b --replace replaces that drain" in out
    (host,) = crontab.sql("SELECT drain_reason FROM crontabber_host WHERE host = 'host-b'")
    assert host["drain_reason"] == "kernel patch CHG-97"
    code, out = crontab.run("--drain", "host-b", "--reason", "someone else CHG-98", "--replace")
    assert code == 0 and "replaced the drain in force" in out and "until --undrain host-b" in out
    code, out = crontab.run("--drain", "host-a", "--reason", "a host without the tag")
    assert code == 0 and "stranded" in out  # basic-job is still stranded by host-b's drain
    outcomes = [
        a["outcome"]
        for a in crontab.sql(
            "SELECT detail->>'outcome' AS outcome FROM crontabber_audit WHERE action = 'drain' "
            "ORDER BY id"
        )
    ]
    assert outcomes == ["done", "refused (exit 6)", "done", "done"]
    # issue #42 item 7: the runbook's --audit --audit-job host:NAME
    code, out = crontab.run("--audit", "--audit-job", "host:host-b", "--json")
    assert code == 0, out
    assert [(e["action"], e["job"]) for e in json.loads(out)] == [("drain", "host:host-b")] * 3
