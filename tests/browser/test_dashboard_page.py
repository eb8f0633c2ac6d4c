"""The dashboard page in a real browser (headless chromium) against the real
services with real job state: every job, a failing job marked and its
traceback one click away, paused and running jobs, the pipeline numbers the
database holds, the history page, the refresh in place."""

from __future__ import annotations

import datetime as dt
import re

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from crontabber.views import JobStatus
from dashboard.page import ATTENTION
from tests.fixtures.dashboard_data import pipeline_fleet

WAIT = 15


def rows(browser):
    return browser.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr")


def row(browser, name):
    return browser.find_element(By.CSS_SELECTOR, f'table.jobs tr[data-job="{name}"]')


def value(browser, key):
    return browser.find_element(By.CSS_SELECTOR, f'[data-k="{key}"]').get_attribute("textContent")


def number(browser, key):
    return int(value(browser, key).replace(",", ""))


def test_every_job_with_its_status_paused_and_running_shown(
    dashboard, browser, shot, s3_bucket, es_index
):
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    browser.get(dashboard.start(refresh_seconds=60))
    _, _, api = dashboard.get("/api/jobs")
    shown = [(r.get_attribute("data-job"), r.get_attribute("data-status")) for r in rows(browser)]
    assert sorted(shown) == sorted((job["name"], job["status"]) for job in api["jobs"])
    # those that need someone first (issue #42 item 13), by how urgent; then the rest
    ranks = [ATTENTION.get(JobStatus(status), len(ATTENTION)) for _, status in shown]
    assert ranks == sorted(ranks) and shown[0][1] == "failing", shown
    assert len(api["jobs"]) == 7
    shot("overview")
    paused = row(browser, "prune-s3")
    assert paused.find_element(By.CSS_SELECTOR, ".badge").text == "paused"
    assert "S3 bucket migration INC-4711" in paused.text and "alice@ops-laptop-7" in paused.text
    # 5 hours from the fixture's clock: "in 4h" a moment later, "in 5h" read within its second
    assert "until 20" in paused.text and re.search(r"\(in [45]h\)", paused.text), paused.text
    shot("paused", paused)
    running = row(browser, "process-uploads")
    assert running.find_element(By.CSS_SELECTOR, ".badge").text == "running"
    assert "since" in running.text and "(7m ago)" in running.text
    assert "symbols-cron-2.prod.example.net:31337 (run 812)" in running.text
    assert "last heartbeat" in running.text
    shot("running", running)
    orphaned = row(browser, "rebuild-search-index")
    assert orphaned.find_element(By.CSS_SELECTOR, ".badge").text == "orphaned"
    assert "expired: since" in orphaned.text
    # the duration chart: process-uploads' five logged runs, the failed one marked, and the run now
    spark = running.find_element(By.CSS_SELECTOR, "svg.spark")
    assert (spark.get_attribute("data-runs"), spark.get_attribute("data-failed")) == ("6", "1")
    assert len(spark.find_elements(By.CSS_SELECTOR, "circle.mark")) == 1
    # the page fits the laptop screen's width
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 1366
    # the overall health is the first thing on the page, on screen without scrolling
    health = browser.find_element(By.CSS_SELECTOR, '[data-k="health.status"]')
    assert health.text == value(browser, "check.status") == "CRITICAL"
    top = browser.execute_script("return arguments[0].getBoundingClientRect().bottom", health)
    assert 0 < top <= browser.execute_script("return window.innerHeight") / 4
    assert value(browser, "health.paused").startswith("1 paused")
    assert value(browser, "health.orphaned").startswith("1 orphaned")


def test_a_failing_job_is_marked_and_its_traceback_opens(dashboard, browser, shot):
    crontab = dashboard.crontab
    crontab.configure(["TroubleJob|1d", "BasicJob|1d"])
    assert crontab.run()[0] == 0  # a real tick: trouble fails, basic-job succeeds
    browser.get(dashboard.start(refresh_seconds=1))
    failing = row(browser, "trouble")
    assert failing.get_attribute("data-status") == "failing"
    assert "st-failing" in failing.get_attribute("class")
    background = failing.value_of_css_property("background-color")
    assert background != row(browser, "basic-job").value_of_css_property("background-color")
    assert (
        failing.find_element(By.CSS_SELECTOR, ".badge").value_of_css_property("background-color")
        == "rgba(201, 37, 45, 1)"
    )  # red
    trace = failing.find_element(By.CSS_SELECTOR, "pre.traceback")
    assert not trace.is_displayed()
    failing.find_element(By.CSS_SELECTOR, "details.error summary").click()
    trace = row(browser, "trouble").find_element(By.CSS_SELECTOR, "pre.traceback")
    assert trace.is_displayed()
    assert trace.text.startswith("Traceback (most recent call last):")
    assert (
        trace.text.endswith("NameError: Trouble!!") and 'raise NameError("Trouble!!")' in trace.text
    )
    shot("failing-traceback")
    # the refresh replaces the panel in place: the page is not reloaded, the traceback stays open
    browser.execute_script("window.notReloaded = true")
    before = int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-refreshed") or 0)
    WebDriverWait(browser, WAIT).until(
        lambda b: (
            int(b.find_element(By.TAG_NAME, "body").get_attribute("data-refreshed") or 0)
            >= before + 2
        )
    )
    assert browser.execute_script("return window.notReloaded") is True
    assert row(browser, "trouble").find_element(By.CSS_SELECTOR, "pre.traceback").is_displayed()


def test_refresh_shows_a_change_without_reloading(dashboard, browser):
    crontab = dashboard.crontab
    crontab.configure(["BasicJob|1d"])
    crontab.run()
    browser.get(dashboard.start(refresh_seconds=1))
    assert row(browser, "basic-job").get_attribute("data-status") == "ok"
    browser.execute_script("window.notReloaded = true")
    crontab.sql(
        "UPDATE crontabber SET paused_until = clock_timestamp() + interval '2 hours',"
        " paused_reason = 'deploy', paused_by = 'bob@ops' WHERE app_name = 'basic-job'"
    )
    WebDriverWait(browser, WAIT).until(
        lambda b: row(b, "basic-job").get_attribute("data-status") == "paused"
    )
    assert browser.execute_script("return window.notReloaded") is True
    assert "deploy" in row(browser, "basic-job").text


def test_pipeline_panels_show_the_databases_numbers(dashboard, browser, shot, s3_bucket, es_index):
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    browser.get(dashboard.start(refresh_seconds=60))
    sql = dashboard.crontab.sql
    counts = sql(
        "SELECT count(*) FILTER (WHERE status = 'pending') AS pending,"
        " count(*) FILTER (WHERE status = 'processing') AS processing,"
        " count(*) FILTER (WHERE status = 'failed' AND completed_at > clock_timestamp()"
        "   - interval '1 day') AS failed FROM upload"
    )[0]
    assert number(browser, "uploads.pending") == counts["pending"] == 3
    assert number(browser, "uploads.processing") == counts["processing"] == 1
    assert number(browser, "uploads.queue_depth") == 4
    assert number(browser, "uploads.failed_total") == counts["failed"] == 2
    oldest = sql(
        "SELECT extract(epoch FROM clock_timestamp() - min(created_at)) AS age FROM upload WHERE "
        "status = 'pending'"
    )[0]["age"]
    shown_age = int(
        browser.find_element(By.CSS_SELECTOR, '[data-k="uploads.oldest_age"]').get_attribute(
            "data-v"
        )
    )
    assert abs(shown_age - float(oldest)) < 60
    pipeline = browser.find_element(By.ID, "pipeline")
    assert "archive too large: 9 GiB > 8 GiB" in pipeline.text
    quarantined = sql("SELECT count(*) AS n FROM missing_symbol_batch WHERE status = 'quarantined'")
    assert number(browser, "missing.quarantined") == quarantined[0]["n"] == 2
    assert number(browser, "missing.waiting") == 2  # the two S3 objects without a batch row
    today = dt.datetime.now(dt.timezone.utc).date()
    top = sql(
        "SELECT s.debug_file, d.count FROM missing_symbol_day d JOIN missing_symbol s"
        " USING (hash) WHERE d.day = %s ORDER BY d.count DESC",
        (today,),
    )
    assert [(t["debug_file"], number(browser, f"missing.top.{t['debug_file']}")) for t in top] == [
        (t["debug_file"], t["count"]) for t in top
    ]
    # a 33-character debug id stays on one line (it wrapped over five), whole in its title
    codes = browser.find_elements(By.CSS_SELECTOR, "#pipeline code.id")
    assert len(codes) == len(top) == 3
    for code in codes:
        height = browser.execute_script("return arguments[0].getBoundingClientRect().height", code)
        font = float(code.value_of_css_property("font-size").removesuffix("px"))
        assert 0 < height < font * 2, (code.get_attribute("title"), height, font)  # one line
        assert len(code.get_attribute("title")) >= 33
    assert value(browser, "search.index") == f"{es_index}-v2"
    assert number(browser, "search.documents") == 3
    assert value(browser, "search.rebuild_took") == "42.5s"
    rules = sql(
        "SELECT sum(keys_deleted) AS keys, sum(bytes_freed) AS bytes FROM prune_rule_result"
        " WHERE run_id = (SELECT max(id) FROM prune_run)"
    )[0]
    assert number(browser, "prune.keys") == rules["keys"] == 1545
    assert number(browser, "prune.bytes") == rules["bytes"]
    assert "3.0 GiB" in pipeline.text
    browser.execute_script("arguments[0].scrollIntoView()", pipeline)
    shot("pipeline")
    fleet = browser.find_element(By.ID, "fleet")
    assert value(browser, "check.status") == "CRITICAL"
    assert "symbols-cron-2" in fleet.text and "-41.5 s" in fleet.text and "silent" in fleet.text
    browser.execute_script("arguments[0].scrollIntoView()", fleet)
    shot("fleet")


def test_history_page_lists_the_runs_newest_first(dashboard, browser, shot, s3_bucket, es_index):
    pipeline_fleet(dashboard.crontab, s3_bucket, es_index)
    browser.get(dashboard.start(refresh_seconds=60))
    row(browser, "process-uploads").find_element(By.CSS_SELECTOR, "a.job").click()
    WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.CSS_SELECTOR, "table.runs"))
    assert browser.current_url.endswith("/jobs/process-uploads")
    _, _, api = dashboard.get("/api/jobs/process-uploads/history")
    shown = [
        [cell.text for cell in tr.find_elements(By.TAG_NAME, "td")]
        for tr in browser.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")
    ]
    assert [cells[3] for cells in shown] == [str(run["run_id"]) for run in api["runs"]]
    assert [cells[5] for cells in shown] == ["running", "ok", "ok", "failed", "ok", "ok"]
    assert shown[1][2] == "symbols-cron-1:4242" and shown[1][1] == "3.00s"
    failed = browser.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")[3]
    failed.find_element(By.CSS_SELECTOR, "summary").click()
    assert "client.put_object" in failed.find_element(By.CSS_SELECTOR, "pre.traceback").text
    shot("history")
    browser.get(dashboard.url + "/jobs/prune-s4")
    assert (
        "no configured job is called 'prune-s4'" in browser.find_element(By.TAG_NAME, "body").text
    )


def test_a_jobs_metric_charts_are_drawn_under_the_pages_policy(dashboard, browser, shot):
    """The charts are plain SVG styled by the page's stylesheet (the CSP allows no inline
    style): drawn, their line stroked, their values one click away."""
    crontab = dashboard.crontab
    for metrics in (
        "keys_deleted=10,bytes_freed=4096",
        "keys_deleted=30,bytes_freed=1024",
        "keys_deleted=20",
    ):
        crontab.configure(
            ["MeasuringJob|1d"], extra=f"    [[class-MeasuringJob]]\n        metrics={metrics}\n"
        )
        assert crontab.run("--job", "measuring", "--force")[0] == 0
    browser.get(dashboard.start(refresh_seconds=60) + "/jobs/measuring")
    WebDriverWait(browser, WAIT).until(lambda b: b.find_elements(By.CSS_SELECTOR, "svg.mchart"))
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.mchart")
    assert [c.get_attribute("data-points") for c in charts] == [
        "2",
        "3",
    ]  # bytes_freed, keys_deleted
    assert all(c.size == {"width": 300, "height": 48} for c in charts)
    line = charts[1].find_element(By.CSS_SELECTOR, "polyline.line")
    assert (
        line.value_of_css_property("stroke") != "none"
        and line.value_of_css_property("fill") == "none"
    )
    values = browser.find_elements(By.CSS_SELECTOR, "details.values")[1]
    values.find_element(By.TAG_NAME, "summary").click()
    assert [td.text for td in values.find_elements(By.CSS_SELECTOR, "tbody td:nth-child(3)")] == [
        "20",
        "30",
        "10",
    ]
    shot("metrics", browser.find_element(By.ID, "metrics"))
