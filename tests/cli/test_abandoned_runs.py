"""A run killed with -9 is a record (issue #23, section 1): whoever takes the job over,
releases it or resets it writes the dead run into the log, with its run id, host:pid and last
heartbeat, so --history, --show-error, /api/jobs/NAME/history and the dashboard page show it.
Before, the only trace was one WARNING on the stderr of the host that took over."""

from __future__ import annotations

import json
import re

import pytest

from tests.fixtures.dashboard_data import Dashboard
from tests.fixtures.runs import killed_run, slow_job
from tests.fixtures.waiting import wait_for


def abandoned_runs(cli):
    done = cli.run("--history", "slow-job", "--json")
    assert done.returncode == 0, done.stderr
    return [run for run in json.loads(done.stdout)["runs"] if run["outcome"] == "abandoned"]


@pytest.mark.parametrize(
    "found_by, action",
    [
        ("taken over by", ()),
        ("released by", ("--release", "slow-job", "--reason", "test")),
        ("reset by", ("--reset-job", "slow-job", "--reason", "test")),
    ],
)
def test_a_killed_run_is_in_the_history_whoever_finds_it(cli, found_by, action):
    run_id, pid = killed_run(cli)
    done = cli.run(*action)  # a tick takes it over at once: its process is gone
    assert done.returncode == 0, done.stderr
    (run,) = abandoned_runs(cli)
    assert run["run_id"] == run_id and run["pid"] == pid and run["host"]
    error = run["error"]["value"]
    assert f"run {run_id} on {run['host']}:{pid}" in error and "last heartbeat 20" in error
    assert found_by in error
    again = cli.run(*action)  # nothing is recorded twice
    assert again.returncode == 0 and len(abandoned_runs(cli)) == 1


def test_a_killed_run_shows_in_show_error_the_api_and_the_dashboard(cli):
    run_id, pid = killed_run(cli)
    assert cli.run().returncode == 0  # the takeover; the new run succeeds
    shown = cli.run("--show-error", "slow-job")
    assert shown.returncode == 0, shown.stderr
    assert re.search(
        rf"slow-job: run {run_id} was abandoned .* on \S+:{pid} after ", shown.stdout
    ), shown.stdout
    assert "last heartbeat" in shown.stdout and "taken over by" in shown.stdout
    dashboard = Dashboard(cli.crontab)
    dashboard.start()
    try:
        status, _, history = dashboard.get("/api/jobs/slow-job/history")
        assert status == 200
        (run,) = [r for r in history["runs"] if r["run_id"] == run_id]
        assert run["outcome"] == "abandoned" and run["pid"] == pid
        status, _, page = dashboard.get("/jobs/slow-job")
        assert status == 200 and "abandoned" in page and f":{pid}" in page
    finally:
        dashboard.stop()


def test_show_error_right_after_release_says_the_newest_run_was_abandoned(cli):
    """Issue #42 item 13: ``--show-error`` after ``--release`` of a killed run calls it the
    job's newest run, abandoned (no failure of the job), not "an older failure", and shows no
    exception repr."""
    run_id, pid = killed_run(cli)
    assert cli.run("--release", "slow-job", "--reason", "test").returncode == 0
    shown = cli.run("--show-error", "slow-job")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"slow-job: run {run_id} was abandoned "), shown.stdout
    assert "an older failure" not in shown.stdout and "RunAbandoned('" not in shown.stdout
    assert (
        "note: the job's newest run, abandoned (its holder died): no failure of the job; its "
        "error count is 0"
    ) in shown.stdout
    assert "superseded:" not in shown.stdout
    document = json.loads(cli.run("--show-error", "slow-job", "--json").stdout)
    assert document["superseded"] is None and "no failure of the job" in document["note"]
    assert shown.stdout.count(f"run {run_id} on ") == 1, shown.stdout  # its error said once
    assert cli.run().returncode == 0  # a later run succeeds: the abandoned one is history now
    shown = cli.run("--show-error", "slow-job")
    assert "the job has no error now (an older failure); its last run: " in shown.stdout


def test_the_dashboard_shows_a_dead_run_orphaned_and_an_abandoned_one_at_least(cli):
    """Issue #42 item 13: the job page's row of a run whose holder is dead is ``orphaned
    (dead)``, as the job's status, not a blue ``running``; once released, its TOOK has the ``+``
    of ``--history`` (it ran at least that long)."""
    run_id, pid = killed_run(cli)
    dashboard = Dashboard(cli.crontab)
    dashboard.start()
    try:
        page = dashboard.get("/jobs/slow-job")[2]
        history = page[page.index('id="history"') :]
        assert 'data-k="run.orphaned">orphaned (dead)</span>' in history, history
        assert '<span class="badge running">' not in history
        assert cli.run("--release", "slow-job", "--reason", "test").returncode == 0
        page = dashboard.get("/jobs/slow-job")[2]
        history = page[page.index('id="history"') :]
        row = history[: history.index('<span class="badge abandoned">')]
        took = re.findall(r"<td>([0-9.]+[a-z]+\+?)</td>", row)[-1]
        assert took.endswith("+"), row
        shown = cli.run("--history", "slow-job").stdout.splitlines()[1].split()[2]
        assert took == shown  # the same "at least" as --history
    finally:
        dashboard.stop()
