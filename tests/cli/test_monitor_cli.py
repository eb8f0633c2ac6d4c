"""The fleet, ``--nagios`` and ``--metrics-file`` through the real entry point:
ticks from hosts with their own host names (UTS namespaces), then the check."""

import json

from prometheus_client.parser import text_string_to_metric_families

from crontabber.version import recorded

# what a tick records: the build's version, or a checkout's commit (0+unbuilt.g<commit>), never
# git's
TICK_VERSION = recorded()


def test_ticks_from_two_hosts_make_the_fleet_and_nagios_sees_it(cli):
    cli.crontab.configure(["BasicJob|5m"])
    pids = {}
    for host in ("cron-a", "cron-b"):
        proc = cli.spawn(host=host)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        pids[host] = proc.pid  # unshare and sh exec: the runner keeps the pid
    rows = cli.crontab.sql(
        "SELECT host, version, pid, abs(skew_seconds) < 1 AS synced,"
        " clock_timestamp() - last_tick < interval '1 minute' AS recent"
        " FROM crontabber_host ORDER BY host"
    )
    assert rows == [
        {"host": h, "version": TICK_VERSION, "pid": pids[h], "synced": True, "recent": True}
        for h in ("cron-a", "cron-b")
    ]
    done = cli.run("--nagios")
    assert done.returncode == 0 and done.stderr == ""
    status, perfdata = done.stdout.splitlines()
    assert status == "OK - All systems nominal" and " hosts=2;;;0 " in perfdata
    cli.crontab.sql("UPDATE crontabber SET next_run = clock_timestamp() - interval '45 minutes'")
    done = cli.run("--nagios", "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == 1 and doc["status"] == "WARNING"
    assert [(e["kind"], e["subject"]) for e in doc["entries"]] == [("overdue", "basic-job")]
    cli.crontab.sql("UPDATE crontabber_host SET last_tick = last_tick - interval '1 hour'")
    done = cli.run("--nagios")
    assert done.returncode == 2
    assert done.stdout.startswith("CRITICAL - no tick from any host for 1h ")


def test_a_tick_writes_the_metrics_file(cli, tmp_path):
    cli.crontab.configure(["BasicJob|1d", "TroubleJob|1d"])
    path = tmp_path / "crontabber.prom"
    done = cli.run(f"--metrics-file={path}", host="cron-m")
    assert done.returncode == 0, done.stderr
    families = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    errors = {s.labels["job"]: s.value for s in families["crontabber_job_error_count"].samples}
    assert errors == {"basic-job": 0, "trouble": 1}
    (tick,) = families["crontabber_host_last_tick_timestamp_seconds"].samples
    assert tick.labels == {"host": "cron-m"}
    done = cli.run(f"--metrics-file={tmp_path}/nowhere/x.prom")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.endswith(
        f"crontabber: cannot write the metrics file {tmp_path}/nowhere/x.prom: No such file or "
        "directory\n"
    )


def test_a_job_just_resumed_is_not_overdue_until_no_tick_runs_it(cli):
    crontab = cli.crontab
    crontab.configure(["BasicJob|5m"])
    assert cli.run().returncode == 0  # a tick: the fleet is alive, the job ran
    assert cli.run("--pause", "basic-job", "--reason", "INC-7").returncode == 0
    # paused all day: its next run has been due for 5 hours
    crontab.sql("UPDATE crontabber SET next_run = clock_timestamp() - interval '5 hours'")
    done = cli.run("--resume", "basic-job")
    assert done.returncode == 0 and done.stdout.startswith("basic-job: resumed")
    done = cli.run("--nagios")
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, "OK - All systems nominal")
    [job] = json.loads(cli.run("--list-jobs", "--json").stdout)["jobs"]
    assert job["status"] == "due" and job["late_seconds"] < 60, job
    # 45 minutes after the resume and still no tick ran it: overdue again
    crontab.sql("UPDATE crontabber SET paused_until = paused_until - interval '45 minutes'")
    crontab.sql("UPDATE crontabber_host SET last_tick = clock_timestamp()")
    doc = json.loads(cli.run("--nagios", "--json").stdout)
    assert [(e["kind"], e["subject"]) for e in doc["entries"]] == [("overdue", "basic-job")]
