"""The dashboard's job page shows the job's state now above its runs, and the health line
shows error types (issue #32, item 14). The dashboard served over the test's real PostgreSQL;
the job runs through the runner's own entry point."""

from __future__ import annotations

from tests.fixtures.dashboard_data import dashboard  # noqa: F401 - the fixture
from tests.fixtures.runs import DEADLINE_RULES, past_its_deadline


def cell(page: str, key: str) -> str:
    start = page.index(f'data-k="job.{key}">') + len(f'data-k="job.{key}">')
    return page[start : page.index("</td>", start)]


def test_the_job_page_shows_its_state_above_its_runs(dashboard):  # noqa: F811
    crontab = dashboard.crontab
    crontab.configure(["TroubleJob|1d", "SadJob|1h", "BasicJob|1d"], extra=DEADLINE_RULES)
    assert crontab.run("--job", "trouble")[0] == 5
    past_its_deadline(crontab)
    assert crontab.run("--pause", "basic-job", "--reason", "INC-5 <disk>", "--until", "2h")[0] == 0
    dashboard.start()
    status, _, page = dashboard.get("/jobs/trouble")
    assert status == 200
    assert page.index('id="state"') < page.index('id="history"')
    assert 'data-status="failing"' not in page  # (a job row's attribute: not on this page)
    assert ">failing</span>" in cell(page, "status")
    assert cell(page, "errors") == "1 in a row; last: NameError: Trouble!!"
    assert "<time" in cell(page, "next_run") and "not paused" in cell(page, "pause")
    assert "none missed" in cell(page, "deadline")
    page = dashboard.get("/jobs/basic-job")[2]
    assert ">paused</span>" in cell(page, "status")
    assert "INC-5 &lt;disk&gt;" in cell(page, "pause")
    page = dashboard.get("/jobs/sad")[2]
    assert "missed <time" in cell(page, "deadline") and "is not done" in cell(page, "deadline")
    assert cell(page, "depends_on") == "trouble"
    status, _, body = dashboard.get("/jobs/sad?panels")
    assert status == 200 and list(body["panels"]) == ["state", "history", "output"]


def test_a_ghost_page_says_it_is_not_configured(dashboard):  # noqa: F811
    crontab = dashboard.crontab
    crontab.configure(["TroubleJob|1d", "BasicJob|1d"])
    assert crontab.run("--job", "trouble")[0] == 5
    crontab.configure(["BasicJob|1d"])
    dashboard.start()
    status, _, page = dashboard.get("/jobs/trouble")
    assert status == 200 and 'data-k="job.ghost">not configured: a ghost' in page


def test_the_health_line_names_error_types_not_python_reprs(dashboard):  # noqa: F811
    crontab = dashboard.crontab
    crontab.configure(["TroubleJob|1d", "BasicJob|1d"])
    assert crontab.run()[0] == 0  # a tick: trouble fails
    dashboard.start()
    page = dashboard.get("/")[2]
    line = page[page.index('<span class="line">') :]
    line = line[: line.index("</span>")]
    assert "CRITICAL - trouble: NameError: Trouble!!" in line, line
    assert "&lt;class" not in line and "TroubleJob" not in line
