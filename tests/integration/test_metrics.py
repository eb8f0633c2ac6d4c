"""``--metrics-file``: a Prometheus text file written atomically by each tick,
read back with prometheus_client's own parser and checked against the database."""

import datetime as dt
import os
import stat

import pytest
from prometheus_client.parser import text_string_to_metric_families

from crontabber.metrics import HOST_METRICS, JOB_METRICS
from crontabber.version import recorded

# what a tick records: the build's version, or a checkout's commit (0+unbuilt.g<commit>), never
# git's
TICK_VERSION = recorded()

DAY = dt.timedelta(days=1)


def parse(path):
    """``{family: {(label values...): value}}`` and ``{family: (type, help)}``."""
    families = list(text_string_to_metric_families(path.read_text()))
    values = {f.name: {tuple(s.labels.values()): s.value for s in f.samples} for f in families}
    return values, {f.name: (f.type, f.documentation) for f in families}


def ts(value):
    return value.timestamp() if value is not None else None


def test_the_metrics_file_holds_what_the_database_holds(crontab, tmp_path):
    crontab.configure(["TroubleJob|1d", "BasicJob|1d", "FooBackfillJob|1d"])
    path = tmp_path / "crontabber.prom"
    assert crontab.run(f"--metrics-file={path}")[0] == 0
    crontab.wind(3 * DAY, "foo-backfill")
    crontab.sql(
        "UPDATE crontabber SET paused_until = clock_timestamp() + interval '1 hour',"
        " paused_reason = 'x', paused_by = 'y' WHERE app_name = 'trouble'"
    )
    crontab.sql(
        "UPDATE crontabber SET ongoing = clock_timestamp(), ongoing_by = 'web-1:7',"
        " heartbeat = clock_timestamp() WHERE app_name = 'basic-job'"
    )
    assert crontab.run(f"--metrics-file={path}")[0] == 0  # foo-backfill: 3 intervals in one run
    values, kinds = parse(path)
    assert set(kinds) == {name for name, _, _ in (*JOB_METRICS, *HOST_METRICS)} | {
        "crontabber_metrics_timestamp_seconds",
        "crontabber_job_run_metric",
    }
    assert all(kind == "gauge" and text for kind, text in kinds.values())
    for name in ("trouble", "basic-job", "foo-backfill"):
        state = crontab.state(name)
        key = (name,)
        success = values["crontabber_job_last_success_timestamp_seconds"]
        if state.last_success is None:
            assert key not in success
        else:
            assert success[key] == pytest.approx(ts(state.last_success))
        assert values["crontabber_job_last_run_timestamp_seconds"][key] == pytest.approx(
            ts(state.last_run)
        )
        assert values["crontabber_job_next_run_timestamp_seconds"][key] == pytest.approx(
            ts(state.next_run)
        )
        assert values["crontabber_job_error_count"][key] == state.error_count
        assert values["crontabber_job_ongoing"][key] == (state.ongoing is not None)
        (last,) = crontab.sql(
            "SELECT sum(duration) AS took FROM crontabber_log WHERE app_name = %s AND run_id ="
            " (SELECT run_id FROM crontabber_log WHERE app_name = %s ORDER BY id DESC LIMIT 1)",
            (name, name),
        )
        assert values["crontabber_job_last_duration_seconds"][key] == pytest.approx(
            last["took"].total_seconds()
        )
    assert "trouble" not in [k[0] for k in values["crontabber_job_last_success_timestamp_seconds"]]
    assert values["crontabber_job_error_count"][("trouble",)] == 1
    assert values["crontabber_job_paused"] == {
        ("trouble",): 1,
        ("basic-job",): 0,
        ("foo-backfill",): 0,
    }
    assert values["crontabber_job_ongoing"][("basic-job",)] == 1
    assert len(crontab.log("foo-backfill")) == 4  # 1 + 3 intervals: the duration summed 3 rows
    (host,) = crontab.sql("SELECT * FROM crontabber_host")
    assert values["crontabber_host_last_tick_timestamp_seconds"] == {
        (host["host"],): pytest.approx(ts(host["last_tick"]))
    }
    assert values["crontabber_host_clock_skew_seconds"] == {
        (host["host"],): pytest.approx(host["skew_seconds"])
    }
    assert values["crontabber_host_info"] == {(host["host"], TICK_VERSION): 1}
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # node_exporter runs as its own user
    assert sorted(os.listdir(tmp_path)) == ["crontabber.ini", "crontabber.prom"]  # no temp left


def test_a_jobs_run_metrics_are_its_last_successful_runs(crontab, tmp_path):
    """A run's metrics (crontabber.base.Summary) are samples of crontabber_job_run_metric; a
    failed run after it does not take them away."""
    crontab.configure(
        ["MeasuringJob|1d"],
        extra="    [[class-MeasuringJob]]\n        metrics=keys_deleted=12,ratio=0.5\n",
    )
    path = tmp_path / "crontabber.prom"
    assert crontab.run(f"--metrics-file={path}")[0] == 0
    values, kinds = parse(path)
    assert kinds["crontabber_job_run_metric"][0] == "gauge"
    assert values["crontabber_job_run_metric"] == {
        ("measuring", "keys_deleted"): 12,
        ("measuring", "ratio"): 0.5,
    }
    crontab.configure(["MeasuringJob|1d"], extra="    [[class-MeasuringJob]]\n        fail=True\n")
    crontab.wind(DAY, "measuring")
    assert crontab.run(f"--metrics-file={path}")[0] == 0
    assert crontab.sql("SELECT status FROM crontabber_run ORDER BY run_id DESC LIMIT 1") == [
        {"status": "failed"}
    ]
    assert parse(path)[0]["crontabber_job_run_metric"][("measuring", "keys_deleted")] == 12


def test_label_values_are_escaped(crontab, tmp_path):
    crontab.configure(["BasicJob|1d"])
    crontab.sql(
        "INSERT INTO crontabber_host (host, version, last_tick, skew_seconds) VALUES (%s, %s, "
        "clock_timestamp(), 0)",
        ('we"b\\1\nx', '1\\"2'),
    )
    path = tmp_path / "m.prom"
    crontab.run(f"--metrics-file={path}")
    values, _ = parse(path)
    assert ('we"b\\1\nx', '1\\"2') in values["crontabber_host_info"]


def test_the_option_sets_the_file_and_the_flag_needs_a_tick(crontab, tmp_path):
    path = tmp_path / "opt.prom"
    crontab.configure(["BasicJob|1d"], extra=f"    metrics_file={path}\n")
    assert crontab.run()[0] == 0 and path.is_file()
    code, out = crontab.run("--list-jobs", f"--metrics-file={path}")
    assert code == 1 and out == (
        "crontabber: --metrics-file: only means something with a tick (no mode option) or --serve\n"
    )


def test_a_metrics_file_that_cannot_be_written_is_one_line_and_the_tick_is_kept(crontab, tmp_path):
    crontab.configure(["BasicJob|1d"])
    target = tmp_path / "missing" / "m.prom"
    code, out = crontab.run(f"--metrics-file={target}")
    assert code == 1
    assert out == f"crontabber: cannot write the metrics file {target}: No such file or directory\n"
    assert len(crontab.calls("basic-job")) == 1
