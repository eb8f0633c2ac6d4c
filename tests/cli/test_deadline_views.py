"""A missed deadline is shown where on-call looks, not only in the alert (issue #32, item 9):
``--list-jobs`` (text and ``--json``), ``--explain`` (text and ``--json``) and the dashboard's
rows and health line, through the real entry points and the real PostgreSQL."""

from __future__ import annotations

import json
import re

from tests.fixtures.dashboard_data import dashboard  # noqa: F401 - the fixture
from tests.fixtures.runs import DEADLINE_RULES, past_its_deadline


def test_a_missed_deadline_shows_in_list_jobs_and_explain(cli):
    crontab = cli.crontab
    crontab.configure(["TroubleJob|1d", "SadJob|1h", "BasicJob|1d"], extra=DEADLINE_RULES)
    assert cli.run("--job", "trouble").returncode == 5
    past_its_deadline(crontab)
    done = cli.run("--list-jobs", "sad", "--wide")
    assert done.returncode == 0, done.stderr
    done = cli.run("--list-jobs", "sad")
    row = done.stdout.splitlines()[1]
    assert re.match(r"sad +1h +late ", row), row
    assert "deadline missed 1h30m ago; waiting: 'trouble' errored" in row
    (view,) = json.loads(cli.run("--list-jobs", "sad", "--json").stdout)["jobs"]
    assert view["status"] == "late" and view["deadline_missed"]["due"].endswith("Z")
    (basic,) = json.loads(cli.run("--list-jobs", "basic-job", "--json").stdout)["jobs"]
    assert basic["deadline_missed"] is None

    out = cli.run("--explain", "sad").stdout
    line = next(line for line in out.splitlines() if "deadline" in line)
    assert (
        line.startswith("  deadline 30m: MISSED: the interval of ") and " was not done by " in line
    )
    assert "(1h ago)" in line
    facts = json.loads(cli.run("--explain", "sad", "--json").stdout)
    assert facts["deadline"]["missed"] is True and facts["deadline"]["seconds"] == 1800
    assert json.loads(cli.run("--explain", "basic-job", "--json").stdout)["deadline"] is None

    crontab.sql(
        "UPDATE crontabber SET last_success = now(), next_run = now() + interval '1 hour' WHERE "
        "app_name = 'sad'"
    )
    out = cli.run("--explain", "sad").stdout
    assert "  deadline 30m: the interval of " in out and " is to be done by " in out
    assert "late" not in cli.run("--list-jobs", "sad").stdout.splitlines()[1]


def test_a_missed_deadline_shows_in_the_dashboard_rows_and_health(cli, dashboard):  # noqa: F811
    crontab = cli.crontab
    crontab.configure(["TroubleJob|1d", "SadJob|1h"], extra=DEADLINE_RULES)
    assert cli.run("--job", "trouble").returncode == 5
    past_its_deadline(crontab)
    dashboard.start()
    status, _, page = dashboard.get("/")
    assert status == 200
    row = page[page.index('data-job="sad"') :]
    row = row[: row.index("</tr>")]
    assert 'data-status="late"' in row and "deadline missed" in row
    assert 'data-k="health.late">1 late<' in page
