"""Per-run metrics and checks (issue #34 item 3): a job returns named numbers with its
summary (``crontabber.base.Summary``); the run ledger keeps them, ``--history``, ``--logs``,
``--json`` and the metrics file show them, and the job's checks over them and over the run's
duration open a ``breach`` alert or pause the job. The real entry point as a subprocess."""
from __future__ import annotations

import json


def measuring(cli, **options):
    extra = "".join(f"        {name}={value}\n" for name, value in options.items())
    cli.crontab.configure(["MeasuringJob|1d"], extra=f"    [[class-MeasuringJob]]\n{extra}")


def runs(cli):
    return cli.crontab.sql("SELECT run_id, status, summary, metrics FROM crontabber_run "
                           "WHERE app_name = 'measuring' ORDER BY run_id")


def test_a_runs_metrics_are_stored_and_shown(cli):
    measuring(cli, metrics="keys_deleted=12,bytes_freed=40960,ratio=0.25,Bad=1,worse=x")
    done = cli.run("--job", "measuring", "--force")
    assert done.returncode == 0, done.stderr
    (run,) = runs(cli)
    # the bad name and the value that is no number are dropped, the run still succeeds
    assert run["metrics"] == {"keys_deleted": 12, "bytes_freed": 40960, "ratio": 0.25}
    assert run["summary"] == "measured 5 things" and "dropped" in done.stderr
    history = cli.run("--history", "measuring")
    assert "measured 5 things [bytes_freed=40960 " in history.stdout  # by name; cut to fit
    logs = cli.run("--logs", "measuring")
    assert "metrics: bytes_freed=40960 keys_deleted=12 ratio=0.25" in logs.stdout
    document = json.loads(cli.run("--history", "measuring", "--json").stdout)
    assert document["runs"][0]["metrics"] == {"keys_deleted": 12, "bytes_freed": 40960,
                                              "ratio": 0.25}
    logged = json.loads(cli.run("--logs", "measuring", "--json").stdout)
    assert logged["metrics"]["keys_deleted"] == 12


def test_a_plain_summary_has_no_metrics(cli):
    measuring(cli)
    assert cli.run("--job", "measuring", "--force").returncode == 0
    (run,) = runs(cli)
    assert run["metrics"] is None
    assert "metrics:" not in cli.run("--logs", "measuring").stdout
