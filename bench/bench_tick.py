"""A cron tick with nothing due: ``python -m crontabber`` vs ``python -c "import psycopg2"``.

cron starts the runner on every host every few minutes, so an idle tick must
be cheap. Goal (issue #3): wall time and peak memory at most 3x the baseline.
The tick uses the repository's real ``crontabber.ini`` (so every configured
job's module is imported, as in production) on its own database, after one
run that leaves nothing due.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from .harness import Comparison, Sample, interleave
from .services import fresh_database

ROUNDS = 20
REPO = Path(__file__).resolve().parent.parent


def _measure(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}")
    return elapsed, usage.ru_maxrss / 1024


def run(rounds: int) -> list[Comparison]:
    # Bytecode as a deployed runner has it after its first tick (PYTHONDONTWRITEBYTECODE may be set).
    subprocess.run([sys.executable, "-m", "compileall", "-q", "crontabber", "jobs"], cwd=REPO,
                   check=True, stdout=subprocess.DEVNULL)
    db = fresh_database("bench_tick")
    env = {**os.environ, "RESOURCE_POSTGRESQL_DBNAME": db.dbname, "PYTHONPATH": str(REPO)}
    tick = [sys.executable, "-m", "crontabber", "--admin.conf=crontabber.ini"]
    subprocess.run(tick, env=env, cwd=REPO, check=True, capture_output=True)  # now nothing is due
    baseline = [sys.executable, "-c", "import psycopg2"]
    memory: dict[str, list[float]] = {"ours": [], "baseline": []}

    def side(argv: list[str], key: str):
        def measure() -> float:
            elapsed, rss = _measure(argv, env)
            memory[key].append(rss)
            return elapsed
        return measure

    ours_t, base_t = interleave(side(tick, "ours"), side(baseline, "baseline"), rounds)
    skip = len(memory["ours"]) - rounds  # drop the warm-up rounds' memory too
    label = 'python -c "import psycopg2"'
    notes = [
        "the tick imports every configured job's module, reads crontabber.ini through "
        "everett, connects (SCRAM login), checks the schema version (one query) and reads the "
        "state table (two queries). By `python -X importtime`, everett's own import of "
        "importlib.metadata is the largest single cost over the baseline (about 20-25 ms); "
        "the connection and queries about 10 ms.",
    ]
    return [
        Comparison("idle tick", "wall time", "s", Sample("ours", ours_t), Sample(label, base_t),
                   higher_is_better=False, goal="ours <= 3x baseline (ratio >= 0.33)",
                   notes=notes),
        Comparison("idle tick", "peak RSS", "MiB", Sample("ours", memory["ours"][skip:]),
                   Sample(label, memory["baseline"][skip:]), higher_is_better=False,
                   goal="ours <= 3x baseline (ratio >= 0.33)"),
    ]
