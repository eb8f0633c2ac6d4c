"""What names a host in the fleet (issue #44, item 1; docs/deploy.md, "What names a host"):
``CRONTABBER_HOST_NAME``, else the OS host name. Containers share or randomise their OS host
names, so a fleet names its hosts itself; the name goes into the fleet record, the markers and
the audit trail, and a dead run of "this host" is judged by it. (``CRONTABBER_HOST`` is taken:
it is the database option ``crontabber.host``, crontabber 0.18's.)"""

from __future__ import annotations

from tests.fixtures.runs import slow_job
from tests.fixtures.waiting import wait_for


def test_the_fleet_the_markers_and_the_audit_use_crontabber_host(cli):
    crontab = cli.crontab
    cli.env["CRONTABBER_HOST_NAME"] = " cron-7 "  # surrounding blanks dropped
    slow_job(cli, 30)
    holder = cli.spawn(host="os-name-a")
    wait_for(lambda: crontab.calls("slow-job"))
    assert crontab.state("slow-job").ongoing_by == f"cron-7:{holder.pid}"
    assert {row["host"] for row in crontab.sql("SELECT host FROM crontabber_host")} == {"cron-7"}
    holder.kill()
    holder.communicate(timeout=20)
    slow_job(cli, 0)
    # another OS host name, the same fleet name: this host's dead run, taken over at once
    # (the default lease is 120 s: only the same-host rule can take it now)
    done = cli.run(host="os-name-b")
    assert done.returncode == 0, done.stderr
    assert f"cron-7:{holder.pid} (run " in done.stderr, done.stderr
    assert "matches no option" not in done.stderr
    assert "that process no longer exists" in done.stderr
    assert len(crontab.calls("slow-job")) == 2 and crontab.state("slow-job").ongoing is None
    done = cli.run("--pause", "slow-job", "--reason", "host identity")
    assert done.returncode == 0, done.stderr
    (audit,) = crontab.sql("SELECT actor FROM crontabber_audit WHERE action = 'pause'")
    assert audit["actor"].endswith("@cron-7"), audit


def test_without_crontabber_host_the_os_host_name_names_the_host(cli):
    cli.env["CRONTABBER_HOST_NAME"] = "  "  # blank: not set
    cli.crontab.configure(["BasicJob|1d"])
    done = cli.run(host="os-name-c")
    assert done.returncode == 0, done.stderr
    assert [row["host"] for row in cli.crontab.sql("SELECT host FROM crontabber_host")] == [
        "os-name-c"
    ]


def test_a_host_name_with_a_blank_is_refused_in_one_line(cli):
    cli.env["CRONTABBER_HOST_NAME"] = "cron 7"
    cli.crontab.configure(["BasicJob|1d"])
    done = cli.run()
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "crontabber: configuration error in CRONTABBER_HOST_NAME: 'cron 7' is no host name"
        " (no blanks or control characters, at most 253 characters)"
    ], done.stderr
    assert not cli.crontab.calls() and not cli.crontab.sql("SELECT host FROM crontabber_host")
