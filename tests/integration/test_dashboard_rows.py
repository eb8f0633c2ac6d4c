"""The overview's job rows (issue #42 item 13): the jobs that need someone come first (a failing
job is never below the fold behind healthy ones), and a paused job's next run is when its pause
ends, never a passed time shown as "(now)". The dashboard served over the test's real
PostgreSQL; the jobs run through the runner's own entry point."""

from __future__ import annotations

import re

from tests.fixtures.dashboard_data import dashboard  # noqa: F401 - the fixture


def rows(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<tr class="st-[a-z-]+" data-job="([^"]+)" data-status="([^"]+)"', page)


def row(page: str, name: str) -> str:
    start = page.index(f'data-job="{name}"')
    return page[start : page.index("</tr>", start)]


def test_failing_rows_come_first_and_a_paused_row_runs_when_its_pause_ends(dashboard):  # noqa: F811
    crontab = dashboard.crontab
    crontab.configure(["BasicJob|1d", "FooJob|1d", "TroubleJob|1d", "SadJob|1d"])
    assert crontab.run()[0] == 0  # a tick: trouble fails; the others succeed (sad waits)
    assert crontab.run("--pause", "foo", "--reason", "INC-9", "--until", "2h")[0] == 0
    crontab.sql(
        "UPDATE crontabber SET next_run = now() - interval '5 minutes' WHERE app_name = 'foo'"
    )
    dashboard.start()
    page = dashboard.get("/")[2]
    shown = rows(page)
    assert shown[0] == ("trouble", "failing"), shown
    assert [status for _, status in shown].index("paused") < [n for n, _ in shown].index(
        "basic-job"
    )  # an operator's pause before the healthy rows
    assert sorted(shown) == sorted(
        (job["name"], job["status"]) for job in dashboard.get("/api/jobs")[2]["jobs"]
    )
    paused = row(page, "foo")
    (until,) = crontab.sql("SELECT paused_until FROM crontabber WHERE app_name = 'foo'")
    assert f'<time datetime="{until["paused_until"].strftime("%Y-%m-%dT%H:%M:%S")}' in paused
    assert 'data-k="next.paused">when the pause ends</div>' in paused and "(now)" not in paused
    job_page = dashboard.get("/jobs/foo")[2]
    assert "when the pause ends" in job_page and "(now)" not in job_page
