"""The job page after the runbook's drill (issue #42, done when): a ``--parallel 2`` rerun
killed with -9 on two hosts (tests/fixtures/reruns.py), then continued. In a real browser
(headless chromium), the page shows what ran: the rerun whole (its outcome, how many of its
intervals are done, each run of it with its host and what it did, what is left and the command
that continues it), each killed run as what it was (never ``ok``, never a blue ``running``) with
the interval it finished; after the resume, the rerun done and the killed runs abandoned."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.fixtures.reruns import group_done, killed_on_two_hosts
from tests.fixtures.runner_cli import Cli
from tests.fixtures.waiting import wait_for

JOB = "parallel-backfill"


@pytest.fixture
def cli(crontab):
    made = Cli(crontab)
    yield made
    made.close()


def history_rows(browser) -> dict[str, str]:
    """The job page's history rows by run id: each row's text."""
    found = {}
    for row in browser.find_elements(By.CSS_SELECTOR, "#history tbody tr"):
        cells = row.find_elements(By.TAG_NAME, "td")
        found[cells[3].text] = row.text
    return found


def test_the_job_page_after_a_rerun_killed_on_two_hosts_shows_what_ran(
    cli, dashboard, browser, shot
):
    dates, pids = killed_on_two_hosts(cli)
    root = min(r["run_id"] for r in cli.crontab.sql("SELECT run_id FROM crontabber_run"))
    wait_for(  # both killed runs past their lease (the dashboard's host is neither)
        lambda: cli.crontab.sql(
            "SELECT bool_and(heartbeat < clock_timestamp() - interval '3 seconds') AS past"
            " FROM crontabber_run WHERE status = 'running'"
        )[0]["past"],
        what="the lease to run out",
    )
    done = group_done(cli, root)
    browser.get(dashboard.start(refresh_seconds=60) + f"/jobs/{JOB}")
    rerun = browser.find_element(By.CSS_SELECTOR, f'[data-k="rerun.{root}"]')
    text = rerun.text
    assert f"rerun {root} of {JOB}: stopped: {len(done)} of 6 interval(s) done" in text, text
    assert f"run {root} (first run) on cron-a:{pids['cron-a']}: running (its lease expired" in text
    assert f"(joined) on cron-b:{pids['cron-b']}: running (its lease expired" in text
    assert f"left: {6 - len(done)} interval(s); --rerun {JOB} --resume-run {root} continues it" in (
        text
    )
    assert rerun.find_element(By.CSS_SELECTOR, ".badge").text == "stopped"
    rows = history_rows(browser)
    killed = [rows[str(root)], *(t for run, t in rows.items() if run != str(root))]
    assert len(killed) == 2 and all("orphaned (expired)" in t for t in killed), rows
    assert all(" ok" not in t and "running" not in t for t in killed), rows
    finished = browser.find_elements(By.CSS_SELECTOR, '#history [data-k="run.intervals"]')
    assert sum(1 for _ in finished) >= 1  # the interval(s) the killed runs finished, shown
    assert f"{dates[0]:%Y-%m-%d}" in rows[str(root)]  # the first run did the first interval
    badge = browser.find_element(By.CSS_SELECTOR, '#history [data-k="run.orphaned"]')
    assert badge.value_of_css_property("background-color") != "rgba(9, 105, 218, 1)"  # not blue
    output = browser.find_element(By.CSS_SELECTOR, "#output h2").text
    assert "orphaned (expired), rerun, on cron-" in output, output  # not "running"
    bars = browser.find_elements(By.CSS_SELECTOR, "#history svg.spark rect.bar")
    assert [b.get_attribute("class") for b in bars] == ["bar orphaned"] * 2  # orange, not blue
    shot("rerun-killed", browser.find_element(By.ID, "reruns"))
    shot("rerun-killed-page")
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 1366

    resumed = cli.run("--rerun", JOB, "--resume-run", str(root), "--reason", "drill", host="cron-b")
    assert resumed.returncode == 0, resumed.stderr
    browser.get(dashboard.url + f"/jobs/{JOB}")
    text = browser.find_element(By.CSS_SELECTOR, f'[data-k="rerun.{root}"]').text
    assert f"rerun {root} of {JOB}: done: 6 of 6 interval(s) done" in text, text
    assert text.count("abandoned") == 2 and "succeeded" in text and "left:" not in text
    rows = history_rows(browser)
    assert sum("abandoned" in t for t in rows.values()) == 2
    assert sum(" ok" in t for t in rows.values()) == 1, rows
    shot("rerun-resumed", browser.find_element(By.ID, "reruns"))
