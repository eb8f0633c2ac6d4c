"""``--nagios`` (lateness, the fleet, pauses, ghosts, perfdata, ``--json``) and the
fleet record every tick writes, against the real PostgreSQL."""

import datetime as dt
import json
import os
import re
import socket

from crontabber.version import recorded

# what a tick records: the build's version, or a checkout's commit (0+unbuilt.g<commit>), never
# git's
TICK_VERSION = recorded()

MINUTE = dt.timedelta(minutes=1)
PERFDATA_LABELS = [
    "jobs_failing",
    "jobs_overdue",
    "jobs_running",
    "jobs_paused",
    "hosts",
    "max_skew_s",
    "seconds_since_last_tick",
]


def nagios(crontab, *args):
    code, out = crontab.run("--nagios", *args)
    status, *details, perfdata = out.splitlines()
    return code, status, details, perfdata


def perf(perfdata):
    """``{label: value}`` of a perfdata line (``| a=1;;;0 b=2s;30;;0``)."""
    assert perfdata.startswith("| ")
    items = dict(item.split("=", 1) for item in perfdata[2:].split())
    return {label: item.split(";")[0].rstrip("s") for label, item in items.items()}


def add_host(crontab, host, version=TICK_VERSION, ago=dt.timedelta(0), skew=0.0):
    crontab.sql(
        "INSERT INTO crontabber_host (host, version, last_tick, skew_seconds, pid)"
        " VALUES (%s, %s, clock_timestamp() - %s, %s, 4242)",
        (host, version, ago, skew),
    )


def test_a_tick_records_its_host_and_other_commands_do_not(crontab):
    crontab.configure(["BasicJob|1d"])
    assert crontab.sql("SELECT * FROM crontabber_host") == []
    crontab.run()
    (row,) = crontab.sql("SELECT *, clock_timestamp() - last_tick AS age FROM crontabber_host")
    assert row["host"] == socket.gethostname() and row["version"] == TICK_VERSION
    assert row["pid"] == os.getpid()  # the in-process CLI
    assert row["age"] < dt.timedelta(seconds=5) and abs(row["skew_seconds"]) < 1.0
    crontab.sql("UPDATE crontabber_host SET last_tick = last_tick - interval '1 hour'")
    for command in (["--nagios"], ["--list-jobs"], ["--job", "basic-job"]):
        crontab.run(*command)
    assert crontab.sql(
        "SELECT clock_timestamp() - last_tick > interval '59 minutes' AS old FROM crontabber_host"
    ) == [{"old": True}]
    crontab.configure([])  # an empty job list still ticks
    crontab.run()
    assert crontab.sql(
        "SELECT clock_timestamp() - last_tick < interval '5 seconds' AS new FROM crontabber_host"
    ) == [{"new": True}]


def test_an_overdue_job_is_a_warning_then_critical(crontab):
    crontab.configure(["BasicJob|5m", "FooJob|1d"])
    crontab.run()
    crontab.sql(
        "UPDATE crontabber SET next_run = clock_timestamp() - interval '31 minutes' WHERE app_name "
        "= 'basic-job'"
    )
    code, status, details, perfdata = nagios(crontab)
    assert code == 1 and status.startswith("WARNING - basic-job (BasicJob): overdue: its next run")
    assert "(31m ago)" in status and details == [status[len("WARNING - ") :]]
    assert perf(perfdata)["jobs_overdue"] == "1"
    crontab.sql(
        "UPDATE crontabber SET next_run = clock_timestamp() - interval '2 hours 1 minute' WHERE "
        "app_name = 'basic-job'"
    )
    code, status, _, _ = nagios(crontab)
    assert code == 2 and status.startswith("CRITICAL - basic-job (BasicJob): overdue")
    code, status, _, _ = nagios(crontab, "--crontabber.overdue_critical_seconds=86400")
    assert code == 1
    crontab.sql(
        "UPDATE crontabber SET ongoing = clock_timestamp(), heartbeat = clock_timestamp(),"
        " ongoing_by = 'web-1:1' WHERE app_name = 'basic-job'"
    )
    code, status, _, perfdata = nagios(crontab)  # running: its next run is set when it ends
    assert (code, status) == (0, "OK - All systems nominal")
    assert perf(perfdata)["jobs_running"] == "1" and perf(perfdata)["jobs_overdue"] == "0"


def test_a_job_waiting_for_a_failing_parent_is_not_overdue(crontab):
    crontab.configure(["TroubleJob|1d", "SadJob|1d"])
    crontab.run()  # trouble fails; sad is blocked and gets no row
    crontab.sql(
        "INSERT INTO crontabber (app_name, next_run, last_run, error_count, last_error)"
        " VALUES ('sad', clock_timestamp() - interval '3 hours',"
        " clock_timestamp() - interval '1 day', 0, '{}')"
    )
    code, status, details, perfdata = nagios(crontab)
    assert (
        code == 2 and status == "CRITICAL - trouble (TroubleJob) | <class 'NameError'> | Trouble!!"
    )
    assert details[0] == "trouble (TroubleJob): NameError: Trouble!!"
    assert details[1].startswith("sad (SadJob): waiting for its parents: 'trouble' errored last")
    assert perf(perfdata)["jobs_overdue"] == "0" and perf(perfdata)["jobs_failing"] == "1"


def test_a_silent_fleet_is_critical(crontab):
    crontab.configure(["BasicJob|1d"])
    crontab.run()
    crontab.sql("UPDATE crontabber_host SET last_tick = clock_timestamp() - interval '20 minutes'")
    code, status, _, perfdata = nagios(crontab)
    assert code == 2 and status.startswith("CRITICAL - no tick from any host for 20m ")
    assert socket.gethostname() in status and "is cron running crontabber?" in status
    assert perf(perfdata)["hosts"] == "0"
    assert 1200 <= float(perf(perfdata)["seconds_since_last_tick"]) < 1260
    code, status, _, _ = nagios(crontab, "--crontabber.silence_critical_minutes=30")
    assert code == 0
    crontab.sql("DELETE FROM crontabber_host")
    code, status, _, perfdata = nagios(crontab)
    assert code == 2 and "no host has ever recorded a tick" in status
    assert perf(perfdata)["seconds_since_last_tick"] == "U"


def test_a_skewed_host_is_a_warning_while_it_ticks(crontab):
    crontab.configure(["BasicJob|1d"])
    crontab.run()
    add_host(crontab, "web-9", skew=-45.25)
    code, status, details, perfdata = nagios(crontab)
    assert code == 1
    assert status == (
        "WARNING - host web-9: its clock is -45.2 s off the database's (max_skew_seconds 30)"
    )
    assert perf(perfdata)["max_skew_s"] == "45.25" and perf(perfdata)["hosts"] == "2"
    crontab.sql(
        "UPDATE crontabber_host SET last_tick = last_tick - interval '16 minutes' WHERE host = "
        "'web-9'"
    )
    code, status, _, perfdata = nagios(crontab)  # gone quiet: no longer counted
    assert code == 0 and perf(perfdata)["hosts"] == "1"


def test_hosts_on_two_versions_are_a_warning(crontab):
    crontab.configure(["BasicJob|1d"])
    crontab.run()
    add_host(crontab, "web-8", version="0.9.0", ago=MINUTE)
    code, status, _, _ = nagios(crontab)
    assert code == 1
    listed = sorted([("0.9.0", "web-8"), (TICK_VERSION, socket.gethostname())])  # by version
    assert status == "WARNING - hosts run different versions: " + "; ".join(
        f"{v} on {h}" for v, h in listed
    )
    crontab.sql(
        "UPDATE crontabber_host SET last_tick = last_tick - interval '1 hour' WHERE host = 'web-8'"
    )
    assert nagios(crontab)[0] == 0  # an old host that stopped ticking is not the fleet


def test_a_paused_job_is_listed_and_its_failure_waits_for_the_pause_to_end(crontab):
    crontab.configure(["TroubleJob|1d", "BasicJob|1d"])
    crontab.run()
    crontab.sql(
        "UPDATE crontabber SET paused_until = clock_timestamp() + interval '2 hours',"
        " paused_reason = 'ES migration', paused_by = 'alice@laptop',"
        " next_run = clock_timestamp() - interval '5 hours' WHERE app_name = 'trouble'"
    )
    code, status, details, perfdata = nagios(crontab)
    assert (code, status) == (0, "OK - All systems nominal; paused: trouble")
    assert re.fullmatch(
        r"trouble \(TroubleJob\): paused until \S+ \S+ \(in 1h59m\) by "
        r"alice@laptop: ES migration; failing: NameError: Trouble!!",
        details[0],
    ), details[0]
    assert perf(perfdata)["jobs_paused"] == "1" and perf(perfdata)["jobs_failing"] == "0"
    # Ended a minute ago: failing again, but not overdue (lateness counts from the pause's end).
    crontab.sql("UPDATE crontabber SET paused_until = clock_timestamp() - interval '1 minute'")
    code, status, _, perfdata = nagios(crontab)
    assert code == 2 and status.startswith("CRITICAL - trouble (TroubleJob) | ")
    assert perf(perfdata)["jobs_overdue"] == "0" and perf(perfdata)["jobs_paused"] == "0"


def test_a_job_taken_out_of_the_jobs_list_is_a_warning(crontab):
    crontab.configure(["FooJob|1d", "BasicJob|1d"])
    crontab.run()
    crontab.configure(["FooJob|1d"])
    code, status, _, _ = nagios(crontab)
    assert code == 1 and status.startswith("WARNING - basic-job: has a state row but no configured")
    assert "--reset-job basic-job" in status


def test_perfdata_is_in_the_plugin_format(crontab):
    crontab.configure(["TroubleJob|1d", "BasicJob|1d"])
    crontab.run()
    add_host(crontab, "web-2", skew=1.5)
    code, out = crontab.run("--nagios")
    lines = out.splitlines()
    # Only the status line (crontabber's words) and the last line hold a "|".
    assert [line.count("|") for line in lines] == [2, 0, 1]
    item = r"(\w+)=(U|-?\d+(?:\.\d+)?)(s?);([\d.]*);([\d.]*);0"
    assert re.fullmatch(rf"\| {item}(?: {item})*", lines[-1]), lines[-1]
    found = re.findall(item, lines[-1])
    assert [f[0] for f in found] == PERFDATA_LABELS
    values = {label: (value, unit, warn, crit) for label, value, unit, warn, crit in found}
    assert values["jobs_failing"] == ("1", "", "", "") and values["hosts"] == ("2", "", "", "")
    assert values["max_skew_s"] == ("1.5", "s", "30", "")
    assert values["seconds_since_last_tick"][1:] == ("s", "", "900")


def test_nagios_json_is_the_same_check(crontab):
    crontab.configure(["TroubleJob|1d", "BasicJob|1d"])
    crontab.run()
    add_host(crontab, "web-3", version="0.9.0")
    text_code, status, details, perfdata = nagios(crontab)
    code, out = crontab.run("--nagios", "--json")
    doc = json.loads(out)
    assert code == text_code == doc["code"] == 2 and doc["status"] == "CRITICAL"
    assert doc["summary"] == status
    assert [(e["level"], e["kind"], e["subject"]) for e in doc["entries"]] == [
        ("CRITICAL", "failing", "trouble"),
        ("WARNING", "versions", ""),
    ]
    assert [e["text"] for e in doc["entries"]] == details
    assert list(doc["perfdata"]) == PERFDATA_LABELS
    assert doc["perfdata"]["jobs_failing"] == 1 and doc["perfdata"]["hosts"] == 2
    assert doc["perfdata"]["seconds_since_last_tick"] < 60


def test_nagios_json_when_the_database_is_down(crontab, monkeypatch):
    crontab.configure(["BasicJob|1d"])
    monkeypatch.setenv("RESOURCE_POSTGRESQL_PORT", "1")
    code, out = crontab.run("--nagios", "--json")
    doc = json.loads(out)
    assert code == 2 and doc["status"] == "CRITICAL" and doc["code"] == 2
    assert doc["summary"].startswith("CRITICAL - cannot use the state database")


def test_monitoring_thresholds_are_checked(crontab):
    crontab.configure(["BasicJob|1d"])
    code, out = crontab.run("--nagios", "--crontabber.overdue_critical_seconds=60")
    assert code == 2 and out.startswith(
        "CRITICAL - configuration error in crontabber.overdue_critical_seconds: must not be below"
    )
    code, out = crontab.run("--crontabber.max_skew_seconds=0")
    assert code == 1 and "crontabber.max_skew_seconds: must be positive" in out
