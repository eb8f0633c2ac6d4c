"""A rolling deploy across two hosts (network namespaces): the first host upgraded to a newer
release migrates the schema; the host still on this release's code refuses to claim jobs in
one line (exit 8), records its tick with the migration it lacks, is named by --nagios and the
dashboard's fleet view, and raises one ``old-code`` alert; once upgraded it claims again.

The newer release is this checkout's code with one more migration, an expand step (a column
this release never reads), as docs/deploy.md asks of every migration."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.dashboard_data import dashboard  # noqa: F401 - the fixture
from tests.fixtures.netns import on_host
from tests.fixtures.receiver import Receiver
from tests.fixtures.tcp_proxy import TcpProxy
from tests.helpers import REPO

NEWER = 9001  # the newer release's migration: more than any of this one's


def newer_release(root: Path) -> Path:
    """This checkout's code plus one migration: the release after this one."""
    keep = shutil.ignore_patterns(
        ".git", ".venv", ".services", "__pycache__", "docs", "bench", "node_modules", "*.pyc"
    )
    for part in ("crontabber", "jobs", "sql", "tests"):
        shutil.copytree(REPO / part, root / part, ignore=keep)
    (root / "sql" / "crontabber" / "migrations" / f"{NEWER}_newer_release.sql").write_text(
        "-- The next release's expand step: a column this release never reads.\n"
        "ALTER TABLE crontabber ADD COLUMN IF NOT EXISTS next_release_note text;\n"
    )
    return root


@pytest.mark.slow  # two hosts, a deploy, a dashboard
def test_a_host_on_old_code_claims_nothing_and_is_named_until_upgraded(
    cli, namespaces, tmp_path, dashboard
):  # noqa: F811
    crontab = cli.crontab
    receiver = Receiver(bind="0.0.0.0")  # reached from the hosts at their host-side address
    crontab.configure(
        ["FooJob|1h", "BarJob|1h", "SlowJob|1h"],
        extra=(
            "    [[class-SlowJob]]\n        sleep=3\n[alerts]\n    targets=ops webhook "
            "env:HOOK_URL\n"
        ),
    )
    new_code = newer_release(tmp_path / "newer")
    db = crontab.database
    (ns_new, address_new), (ns_old, address_old) = namespaces[:2]
    proxies = {
        address: TcpProxy((db.host, int(db.port)), bind=address)
        for address in (address_new, address_old)
    }

    def command(
        code: Path, ns: str, address: str, host: str, *args: str
    ) -> tuple[list[str], dict[str, str]]:
        env = {
            **cli.env,
            "PYTHONPATH": str(code),
            "RESOURCE_POSTGRESQL_HOST": address,
            "RESOURCE_POSTGRESQL_PORT": str(proxies[address].port),
            "HOOK_URL": f"http://{address}:{receiver.port}/hook",
        }
        argv = [sys.executable, "-m", "crontabber", f"--admin.conf={crontab.ini}", *args]
        return on_host(ns, host, argv), env

    def tick(
        code: Path, ns: str, address: str, host: str, *args: str
    ) -> subprocess.CompletedProcess:
        argv, env = command(code, ns, address, host, *args)
        return subprocess.run(argv, env=env, cwd=code, capture_output=True, text=True, timeout=120)

    try:
        # Both hosts on this release: both tick cleanly.
        assert tick(REPO, ns_old, address_old, "host-old").returncode == 0
        # host-old starts a run of slow-job; while it runs, host-new is upgraded first and its
        # tick migrates the schema: the run in flight on the old code ends and is recorded
        # (the migration is an expand step: it never breaks the code one release back).
        argv, env = command(REPO, ns_old, address_old, "host-old", "--job", "slow-job", "--force")
        in_flight = subprocess.Popen(
            argv, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 30
        while len(crontab.calls("slow-job")) < 2:  # the first tick's call, then this one
            assert time.monotonic() < deadline and in_flight.poll() is None, in_flight.stderr
            time.sleep(0.05)
        crontab.sql(
            "UPDATE crontabber SET next_run = clock_timestamp() WHERE app_name <> 'slow-job'"
        )
        upgraded = tick(new_code, ns_new, address_new, "host-new")
        assert upgraded.returncode == 0, upgraded.stderr
        _, err = in_flight.communicate(timeout=60)
        assert in_flight.returncode == 0, err
        assert crontab.sql(
            "SELECT count(*) AS runs, bool_and(exc_type IS NULL) AS ok FROM crontabber_log WHERE "
            "app_name = 'slow-job'"
        ) == [{"runs": 2, "ok": True}]  # the first tick's, and the one in flight
        assert crontab.state("slow-job").ongoing is None
        assert crontab.sql("SELECT schema FROM schema_migrations WHERE number = %s", (NEWER,)) == [
            {"schema": "crontabber"}
        ]
        calls = len(crontab.calls())
        # host-old, still on this release: one line, exit 8, claims nothing (jobs made due)
        crontab.sql("UPDATE crontabber SET next_run = clock_timestamp()")
        old = tick(REPO, ns_old, address_old, "host-old")
        assert old.returncode == 8, old.stderr
        assert [line for line in old.stderr.splitlines() if "crontabber:" in line] == [
            f"crontabber: host-old runs code older than the database's schema (it lacks "
            f"migration {NEWER}): it claims no job until it is upgraded"
        ], old.stderr
        assert "Traceback" not in old.stderr
        assert len(crontab.calls()) == calls
        forced = tick(REPO, ns_old, address_old, "host-old", "--job", "foo", "--force")
        assert forced.returncode == 8 and len(crontab.calls()) == calls
        # named: --nagios (WARNING: host-new still claims), the fleet view, one alert
        nagios = tick(REPO, ns_old, address_old, "host-old", "--nagios")
        assert nagios.returncode == 1, nagios.stdout
        assert (
            f"host host-old runs code older than the database's schema (it lacks migration {NEWER})"
            in nagios.stdout
        )
        (row,) = crontab.sql("SELECT schema_behind FROM crontabber_host WHERE host = 'host-old'")
        assert row["schema_behind"] == [NEWER]
        dashboard.start()  # this release's dashboard reads the newer schema
        status, _, fleet = dashboard.get("/api/fleet")
        assert status == 200
        assert {h["host"]: h["schema_behind"] for h in fleet["hosts"]} == {
            "host-old": [NEWER],
            "host-new": [],
        }
        _, _, page = dashboard.get("/")
        assert f"older than the schema (lacks {NEWER}): claims nothing" in page
        again = tick(REPO, ns_old, address_old, "host-old")  # a second refused tick
        assert again.returncode == 8
        alerts = crontab.sql("SELECT app_name, kind, subject FROM crontabber_alert")
        assert alerts == [
            {"app_name": "crontabber", "kind": "old-code", "subject": f"host-old: {NEWER}"}
        ]  # once, not per tick
        sent = [r.json for r in receiver.wait("/hook", 1) if r.json.get("kind") == "old-code"]
        assert [(n["job"], n["message"]) for n in sent] == [("crontabber", alerts_text(NEWER))]
        # the upgraded host runs what is due; its ticks do not end host-old's alert
        assert tick(new_code, ns_new, address_new, "host-new").returncode == 0
        assert len(crontab.calls()) > calls
        (alert,) = crontab.sql("SELECT resolved_at FROM crontabber_alert WHERE kind = 'old-code'")
        assert alert["resolved_at"] is None
        # host-old upgraded: it claims again, and nothing names it any more
        crontab.sql("UPDATE crontabber SET next_run = clock_timestamp()")
        upgraded_old = tick(new_code, ns_old, address_old, "host-old")
        assert upgraded_old.returncode == 0, upgraded_old.stderr
        (row,) = crontab.sql("SELECT schema_behind FROM crontabber_host WHERE host = 'host-old'")
        assert row["schema_behind"] == []
        healthy = tick(new_code, ns_old, address_old, "host-old", "--nagios", "--json")
        assert "old-code" not in healthy.stdout, json.loads(healthy.stdout)
        # issue #42 item 10: its old-code alert ends (a PagerDuty incident is resolved)
        (alert,) = crontab.sql("SELECT resolved_at FROM crontabber_alert WHERE kind = 'old-code'")
        assert alert["resolved_at"] is not None
        recovered = [r.json for r in receiver.wait("/hook", 2) if r.json["kind"] == "recovered"]
        assert [n["message"].split("; was: ")[0] for n in recovered] == [
            "crontabber: recovered (host-old runs code that knows the database's schema now)"
        ]
    finally:
        for proxy in proxies.values():
            proxy.close()
        receiver.close()


def alerts_text(number: int) -> str:
    return (
        f"host-old runs code older than the database's schema (it lacks migration "
        f"{number}): it claims no job until it is upgraded"
    )
