"""The dashboard's job page shows the job's state now above its runs, and the health line
shows error types (issue #32, item 14). The dashboard served over the test's real PostgreSQL;
the job runs through the runner's own entry point."""

from __future__ import annotations

import json
import re

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


def measured(crontab, *values: str) -> None:
    """A run of the measuring job per item of ``values`` (its ``metrics`` option: ``a=1,b=2``;
    empty: a run that returns none), through the runner's entry point."""
    for metrics in values:
        crontab.configure(
            ["MeasuringJob|1d"], extra=f"    [[class-MeasuringJob]]\n        metrics={metrics}\n"
        )
        assert crontab.run("--job", "measuring", "--force")[0] == 0


def chart(page: str, name: str) -> str:
    """The chart of metric ``name`` on a job page: its heading, numbers, SVG and table."""
    start = page.index(f'<div class="metric" data-metric="{name}">')
    return page[start : page.index("</details></div>", start)]


def test_the_job_page_charts_each_metric_over_the_last_runs(dashboard):  # noqa: F811
    crontab = dashboard.crontab
    measured(
        crontab, "keys_deleted=10,ratio=0.5", "keys_deleted=30", "", "keys_deleted=20,ratio=0.25"
    )
    dashboard.start()
    status, _, page = dashboard.get("/jobs/measuring")
    assert status == 200 and page.index('id="state"') < page.index('id="metrics"') < page.index(
        'id="history"'
    )
    keys = chart(page, "keys_deleted")
    svg = keys[keys.index("<svg") : keys.index("</svg>")]
    assert (
        'data-points="3"' in svg and svg.count("<circle") == 3
    )  # the run without metrics: no point
    points = re.search(r'<polyline class="line" points="([^"]+)"', svg)[1].split()
    heights = [float(point.split(",")[1]) for point in points]
    assert heights[1] < heights[2] < heights[0]  # 10, 30, 20 oldest first: 30 highest (smallest y)
    for label, value in (("newest", "20"), ("min", "10"), ("median", "20"), ("max", "30")):
        assert f'data-k="metric.{label}">{value}</b>' in keys
    assert "keys_deleted = 30: run " in svg  # each point's title: the value and its run
    assert keys.count("<tr><td>") == 3  # the table beside it, newest first
    assert keys.index("<td>20</td>") < keys.index("<td>30</td>") < keys.index("<td>10</td>")
    ratio = chart(page, "ratio")
    assert 'data-points="2"' in ratio and 'data-k="metric.newest">0.25</b>' in ratio
    body = dashboard.get("/jobs/measuring?panels")[2]
    assert list(body["panels"]) == ["state", "metrics", "history", "output"]


def test_a_job_without_metrics_has_no_chart_section(dashboard):  # noqa: F811
    crontab = dashboard.crontab
    measured(crontab, "", "")
    dashboard.start()
    page = dashboard.get("/jobs/measuring")[2]
    assert 'id="metrics"' not in page and "mchart" not in page
    assert list(dashboard.get("/jobs/measuring?panels")[2]["panels"]) == [
        "state",
        "history",
        "output",
    ]


def test_hostile_metric_names_and_values_are_escaped(dashboard):  # noqa: F811
    """A name the runner would drop, written into the ledger by hand: text, never markup."""
    crontab = dashboard.crontab
    measured(crontab, "keys_deleted=1")
    hostile = {
        "<script>alert(1)</script>": 5,
        '" onmouseover="alert(2)': 7,
        "x": "<b>9</b>",
        "y": True,
    }
    crontab.sql(
        "UPDATE crontabber_run SET metrics = %s::jsonb WHERE app_name = 'measuring'",
        (json.dumps(hostile),),
    )
    dashboard.start()
    page = dashboard.get("/jobs/measuring")[2]
    assert "<script>alert" not in page and '" onmouseover="' not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'data-metric="&quot; onmouseover=&quot;alert(2)"' in page
    assert 'data-metric="x"' not in page and 'data-metric="y"' not in page  # no number: no chart
    assert page.count('<svg class="mchart"') == 2


def test_a_breach_pause_shows_until_resumed(dashboard):  # noqa: F811
    crontab = dashboard.crontab
    measured(crontab, "keys_deleted=1")
    crontab.sql(
        "UPDATE crontabber SET paused_until = 'infinity', paused_by = 'crontabber@h:1',"
        " paused_reason = 'breach of min_duration 1h00m by run 1: took 0.04s' WHERE app_name = "
        "'measuring'"
    )
    dashboard.start()
    pause = cell(dashboard.get("/jobs/measuring")[2], "pause")
    assert pause.startswith('<span class="until-resumed">until resumed</span> by crontabber@h:1: ')
    assert "breach of min_duration" in pause and "9999" not in pause
    row = dashboard.get("/")[2]
    row = row[row.index('data-job="measuring"') :]
    assert "until resumed</span> by crontabber@h:1" in row[: row.index("</tr>")]
    assert dashboard.get("/api/jobs")[2]["jobs"][0]["paused"]["until"] is None
