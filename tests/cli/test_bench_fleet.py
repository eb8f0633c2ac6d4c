"""``python -m bench fleet`` at a tiny scale, through its command line, so it cannot rot: its
results are well formed, every job ran exactly once in every scenario, and the counts it can
know exactly are exact. It asserts no speed: the figures are the benchmark's."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ENV, REPO


def test_the_fleet_bench_runs_every_job_once_and_writes_its_results(tmp_path):
    results = REPO / "bench" / "RESULTS.md"
    before = results.stat().st_mtime_ns
    argv = [
        "--jobs",
        "5",
        "--hosts",
        "2",
        "--rounds",
        "1",
        "--idle-seconds",
        "2",
        "--save-to",
        str(tmp_path),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "bench", "fleet", *argv],
        cwd=REPO,
        env={**ENV, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert results.stat().st_mtime_ns == before  # --save-to leaves RESULTS.md alone
    record = json.loads((tmp_path / "fleet.json").read_text())
    scenarios = record["data"]["scenarios"]
    serving = (
        "--serve"
        in subprocess.run(
            [sys.executable, "-m", "crontabber", "--help"],
            cwd=REPO,
            env=ENV,
            capture_output=True,
            text=True,
        ).stdout
    )
    modes = {"cron", "serve"} if serving else {"cron"}
    assert record["data"]["serve"].startswith("measured" if serving else "not available")
    expected = {(path, mode) for path in ("direct", "pgbouncer") for mode in modes}
    assert {(s["path"], s["mode"]) for s in scenarios} == expected
    for scenario in scenarios:
        rounds = scenario["rounds"]
        assert (scenario["jobs"], scenario["hosts"]) == (5, 2)
        assert (
            rounds["twice"],
            rounds["not_run"],
            rounds["not_succeeded"],
            rounds["bad_exits"],
        ) == (0, 0, 0, 0)
        assert rounds["died"] == []
        assert len(rounds["fleet_rate"]) == 1 and isinstance(rounds["fleet_rate"][0], float)
        if (scenario["path"], scenario["mode"]) != ("direct", "serve"):
            assert rounds["xacts_per_run"][0] >= 2  # a run writes at least its claim and its end
        else:  # servers stay connected: PostgreSQL may hold some of their counts back a while
            assert rounds["xacts_per_run"][0] > 0
        assert rounds["idle_xacts"][0] > 0 and rounds["p99_late"][0] > 0
        pooled = scenario["path"] == "pgbouncer"
        assert bool(rounds["queries_per_run"]) == pooled  # PgBouncer counts the queries
        assert bool(rounds["rows_per_run"]) == (not pooled)  # PostgreSQL the rows read
        if scenario["mode"] == "cron":
            # the floor: 2 transactions a run; directly, its connection's login is one more
            assert rounds["floor_xacts"] == [2.0 if pooled else 2.2]
            assert rounds["floor_queries"] == ([2.0] if pooled else [])
    runners = {"cron": "cron ticks", "serve": "--serve runners"}
    names = [f"M=5 H=2 {s['path']}, {runners[s['mode']]}" for s in scenarios]
    assert [c["name"] for c in record["comparisons"]] == names
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 5 | 2 |")]
    assert len(rows) == len(scenarios) and all(row.count("|") == 22 for row in rows)
