"""One broken ``jobs`` entry (a module that no longer imports after a deploy) does not stop the
fleet (issue #32, item 6): the healthy jobs run, every read command works and shows the entry as
an error row, the fleet is told once, and ``--configtest`` still refuses the file. Through the
real entry points (``python -m crontabber``, the dashboard) and the real PostgreSQL."""

from __future__ import annotations

import json
import re

from tests.fixtures.alerting import alerts_ini
from tests.fixtures.dashboard_data import dashboard  # noqa: F401 - the fixture
from tests.fixtures.receiver import receiver  # noqa: F401 - the fixture

BROKEN = "no_such_module_after_deploy.BrokenApp"


def configure(crontab, receiver) -> None:  # noqa: F811
    targets = f"        hook webhook {receiver.url}/hook\n"
    crontab.configure(
        ["BasicJob|1d", f"{BROKEN}|10m", "TroubleJob|1d"],
        extra="    [[class-BrokenApp]]\n        timeout=60\n"
        + alerts_ini(receiver, targets=targets),
    )


def test_the_healthy_jobs_run_and_the_fleet_is_told_once(cli, receiver):  # noqa: F811
    crontab = cli.crontab
    configure(crontab, receiver)
    done = cli.run()
    assert done.returncode == 1, done.stderr  # a bad configuration, though the others ran
    assert (
        f"jobs entry '{BROKEN}|10m': cannot import module 'no_such_module_after_deploy'"
        in done.stderr
        and "the other jobs go on without it" in done.stderr
    )
    assert sorted(c["app_name"] for c in crontab.calls()) == ["basic-job", "trouble"], done.stderr
    (hook,) = receiver.wait("/hook", 1)
    assert hook.json["kind"] == "broken-entry" and hook.json["job"] == "crontabber"
    assert f"jobs entry '{BROKEN}|10m' does not load: cannot import module" in hook.json["message"]
    assert cli.run().returncode == 1  # another tick (any host): the same alert, not again
    assert cli.run(host="cron-b").returncode == 1
    alerts = crontab.sql("SELECT kind FROM crontabber_alert WHERE kind = 'broken-entry'")
    assert len(alerts) == 1 and len(receiver.at("/hook")) == 1


def test_every_read_command_works_and_shows_the_entry(cli, receiver):  # noqa: F811
    crontab = cli.crontab
    configure(crontab, receiver)
    done = cli.run("--list-jobs")
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()[:-1]
    assert [row.split()[0] for row in rows[1:]] == ["basic-job", "trouble", BROKEN]
    assert re.match(rf"{BROKEN} +10m +broken +never +- +does not load: cannot", rows[-1])
    jobs = json.loads(cli.run("--list-jobs", "--json").stdout)["jobs"]
    assert jobs[-1]["status"] == "broken" and jobs[-1]["last_error"]["type"] == "ConfigurationError"
    assert cli.run("--list-jobs", "BrokenApp").stdout.splitlines()[1].startswith(BROKEN)
    assert cli.run("--list-jobs", "basic-job").returncode == 0

    done = cli.run("--explain", "basic-job")
    assert done.returncode == 0 and done.stdout.startswith("basic-job: a tick now would run it")
    done = cli.run("--explain", BROKEN)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        f"{BROKEN}: a tick skips it: its jobs entry does not load: cannot import module"
    )
    facts = json.loads(cli.run("--explain", "BrokenApp", "--json").stdout)
    assert facts["broken"] is True and facts["would_run"] is False

    done = cli.run("--nagios")
    assert done.returncode == 2
    assert done.stdout.startswith(f"CRITICAL - jobs entry {BROKEN} does not load: cannot import")
    done = cli.run("--job", "BrokenApp", "--force", "--reason", "try")
    assert done.returncode == 1 and "cannot import module" in done.stderr
    done = cli.run("--configtest")
    assert done.returncode == 1 and "configtest OK" not in done.stdout
    assert f"configuration error in jobs entry '{BROKEN}|10m'" in done.stderr


def test_the_dashboard_shows_the_entry_as_an_error_row(cli, receiver, dashboard):  # noqa: F811
    configure(cli.crontab, receiver)
    assert cli.run("--job", "basic-job").returncode == 0
    dashboard.start()
    status, _, page = dashboard.get("/")
    assert status == 200, page
    row = page[page.index(f'data-job="{BROKEN}"') :]
    assert 'data-status="broken"' in row[: row.index("</tr>")]
    assert "does not load: cannot import module" in row[: row.index("</tr>")]
    assert 'data-k="health.broken">1 broken<' in page
    status, _, body = dashboard.get("/api/jobs")
    assert status == 200 and [j["status"] for j in body["jobs"]][-1] == "broken"
