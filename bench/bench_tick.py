"""A cron tick with nothing due: ``python -m crontabber`` vs ``python -c "import psycopg2"``.

cron starts the runner on every host every few minutes, so an idle tick must
be cheap. Goal: wall time at most 2x the baseline (issue #36, item 4; 3x before, issue #3),
peak memory at most 3x (issue #3).
The tick uses the repository's real ``crontabber.ini`` (so every configured
job's module is imported, as in production) on its own database, after one
run that leaves nothing due.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from crontabber.config.database import DatabaseSettings
from crontabber.schema import ensure_schema
from crontabber.store import connect

from .harness import Comparison, Sample, interleave
from .services import fresh_database

ROUNDS = 20
TIME = "/usr/bin/time"  # Debian package `time`
REPO = Path(__file__).resolve().parent.parent


def _wall(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one child process (posix_spawn: no fork of this big process)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    start = time.perf_counter()
    pid = os.posix_spawn(
        argv[0],
        argv,
        env,
        file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)],
    )
    _, status, _ = os.wait4(pid, 0)
    elapsed = time.perf_counter() - start
    os.close(devnull)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv} failed")
    return elapsed


def _peak_rss(argv: list[str], env: dict[str, str]) -> float:
    """Peak RSS (MiB) of one child, as GNU time reports it.

    Not this process's own wait4: a child forked from it counts the pages it
    shared with this (large) parent before exec in its peak.
    """
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run(
            [TIME, "-o", out.name, "-f", "%M", *argv],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return int(out.read().split()[-1]) / 1024


def _mark_all_jobs_just_run(db: DatabaseSettings) -> None:
    """State rows saying every configured job just ran (running them for real would
    touch the shared S3 and Elasticsearch)."""
    from crontabber.config.catalog import load_jobs
    from crontabber.config.settings import load_settings

    conn = connect(db)
    ensure_schema(conn)
    with conn, conn.cursor() as cur:
        for job in load_jobs(load_settings(str(REPO / "crontabber.ini"), {}, {})):
            cur.execute(
                "INSERT INTO crontabber (app_name, next_run, first_run, last_run, last_success,"
                " error_count, depends_on, last_error) VALUES (%s, now() + interval '1 day',"
                " now(), now(), now(), 0, '{}', '{}')",
                (job.app_name,),
            )
    conn.close()


def run(rounds: int) -> list[Comparison]:
    # Bytecode as a deployed runner has it after its first tick (PYTHONDONTWRITEBYTECODE may be
    # set).
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "crontabber", "jobs", "search", "configman"],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    db = fresh_database("bench_tick")
    _mark_all_jobs_just_run(db)
    # With an alert target configured, as a fleet that alerts runs: an idle tick then sends
    # one statement more (claim due notices, read open alerts) and sends nothing.
    env = {
        **os.environ,
        "RESOURCE_POSTGRESQL_DBNAME": db.dbname,
        "PYTHONPATH": str(REPO),
        "ALERTS_TARGETS": "ops webhook http://127.0.0.1:9/unused",
    }
    tick = [sys.executable, "-m", "crontabber", f"--admin.conf={REPO / 'crontabber.ini'}"]
    baseline = [sys.executable, "-c", "import psycopg2"]
    memory: dict[str, list[float]] = {"ours": [], "baseline": []}

    def side(argv: list[str], key: str):
        def measure() -> float:
            memory[key].append(_peak_rss(argv, env))
            return _wall(argv, env)

        return measure

    ours_t, base_t = interleave(side(tick, "ours"), side(baseline, "baseline"), rounds)
    skip = len(memory["ours"]) - rounds  # drop the warm-up rounds' memory too
    label = 'python -c "import psycopg2"'
    notes = [
        "the tick imports every configured job's module (7 jobs; their heavy imports wait "
        "for run()), reads crontabber.ini (its parse kept between ticks since 2026-11-27), "
        "connects (SCRAM login), checks the "
        "schema version (one query), then reads the clock and the state table and records "
        "the host's tick in crontabber_host (two statements; since 2026-11-26 each its own "
        "round trip, without psycopg2's BEGIN and COMMIT). everett is "
        "pinned to 3.3.0: 3.5.0 is the same code but imports "
        "importlib.metadata to find its version, which cost ~18 ms a tick. Peak RSS is "
        "GNU time's %M of each child. The run ledger (2026-11-25) adds no statement to an "
        "idle tick: only a claim writes it; its redaction and output capture load only when "
        "a job runs. Since 2026-11-25 the tick runs with an alert target configured "
        "(ALERTS_TARGETS): one statement more (it claims due notices and reads the open "
        "alerts and maintenance windows), no alert rule imported or read while no job fails, "
        "is overdue or runs, nothing sent; paired whole-process runs on the same machine put "
        "it at about 1.04x the same tick without targets, and the tick without targets at "
        "0.99x the tick of the session before (the cli/ and config/ packages cost nothing "
        "measurable). Take the figure with Elasticsearch and s3proxy stopped (the tick needs "
        "only PostgreSQL; their JVMs' background work moves the ratio by a few hundredths).",
        "Issue #36 item 4 (2026-11-26; goal 2x, ratio >= 0.5), paired runs on a loaded 2-core "
        "machine (medians of 15, interleaved): the tick 111 -> ~97 ms wall and 100 -> ~85 ms "
        "CPU, psycopg2 36 ms (ratio 0.32 -> ~0.38); take the table's figure from a quiet "
        "machine. What changed: (1) no garbage collection while the tick starts and exits "
        "(crontabber/__main__.py turns it off, the dispatcher freezes what was built and turns "
        "it on before the mode's handler, __main__ freezes again before the exit): the "
        "collector's passes over the start-up's long-lived objects, and the interpreter's at "
        "exit, were ~15 ms (the exit alone 16 -> 5 ms); (2) a plain tick's command line "
        "(--admin.conf FILE) is read without argparse, gettext and locale (crontabber.parsing "
        "holds argparse's side; any other command line goes to argparse as before): ~4 ms; "
        "(3) everett.manager is not imported (parse_bool, the upper-case key and the command "
        "line's source are local, tested against everett's) and the environment is copied "
        "once instead of 1,420 os.environ look-ups. Counts (python -X importtime, min of 7 "
        "runs; sys.modules at exit): 167 -> 162 modules (python -c 'import psycopg2': 82), "
        "regexes compiled 54 -> 45, dataclasses built 23 -> 23, sum of the modules' own import "
        "time 72.6 -> 64.6 ms; top cumulative before: crontabber.cli 47.8, catalog 43.1, "
        "config.settings 32.2, store 20.6, psycopg2 16.9, crontabber (the package, with "
        "crontabber.command) 16.3, dataclasses 5.9, logging 5.9, scheduling 5.7, inspect 5.2, "
        "argparse 4.8, state 3.6, runpy 3.6 ms; after: argparse gone, everett.manager gone, "
        "inspect still there through dataclasses (5.0 + 4.2 ms); the package's own line drops "
        "to 5.9 ms only because its exports now load lazily (crontabber.command is imported "
        "by crontabber.cli instead). A rough python -m bench tick --rounds 10 on the loaded "
        "machine: 0.118 s vs 0.041 s, ratio 0.35. Not "
        "done yet, in order of size: the 23 dataclasses built at import (~5 ms of building and "
        "the inspect import they bring), configobj's import-time regexes (~2.5 ms, its own "
        "class body), logging's import (jobs use it at module top), and the four statements "
        "of an idle tick (schema version; clock and state; the host's tick; the alerts).",
        "Issue #36 item 4, second session (2026-11-26, tick36b; same loaded machine, so counts "
        "rather than wall time). (1) No dataclass on an idle tick's path: the 23 classes "
        "(state, scheduling, config options/names/inifile/settings, store, catalog, leases, "
        "runner, cli.common) are crontabber.frozen.Frozen records (__slots__, a hand-written "
        "__init__; repr, equality, hash, FrozenError, pickling and .replace() from the base; "
        "~6 us to build a class instead of ~460 us), so dataclasses, inspect, ast, dis and "
        "copy are no longer imported (tests/cli/test_cli.py NOT_ON_THE_TICK says so). "
        "(2) The idle tick's round trips after the login, 10 -> 4: its four statements "
        "(schema version; clock; the host's tick with the state rows; the alerts sweep) each "
        "go as their own transaction (crontabber.schema.round_trip_cursor: autocommit, the "
        "tick's SET LOCAL synchronous_commit in the same query string, PostgreSQL's implicit "
        "transaction block), where psycopg2 had sent a BEGIN and a COMMIT around each of "
        "three transactions (strace: sendto 15 -> 9, the login's 4 and the goodbye included). "
        "Counts (python -X importtime, min of 7-9 runs; sys.modules at exit): modules 162 -> "
        "155 (importtime's lines 146 -> 136; python -c 'import psycopg2': 74 lines, 28.1 ms), "
        "dataclasses built 23 -> 0, sum of the modules' own import time 71.8 -> 50.7 ms "
        "(crontabber.cli cumulative 53.8 -> 33.4 ms). importtime does not see the job "
        "modules the catalog loads with importlib.import_module (jobs.runlog...), only what "
        "they import with import statements. Not done: configobj's 12 regexes compiled in "
        "its class bodies at import (~1.7 ms of its ~2.3 ms) cannot be avoided without "
        "changing configobj (vendoring a patched copy) or not importing it (a cache of the "
        "parsed INI keyed by path, size and mtime, which needs a writable place on every "
        "host); logging's import (~1.5 ms own, jobs use it at module top); psycopg2 with "
        "ssl (~15 ms, the baseline's own cost too).",
        "Issue #36 item 4, third session (2026-11-27): 0.49 -> 0.54 on a quiet machine "
        "(python -m bench tick --rounds 40, Elasticsearch and s3proxy stopped). (1) No typing "
        "on the tick's path (~2.5 ms: everett imported it, and 33 modules did): typing names "
        "are imported under a module-level TYPE_CHECKING = False, TypeVars inside it, type "
        "aliases as TypeAlias strings; NamedTuples on the path (RunLimits, Migration, the "
        "search index job's Snapshot/Window/Watermark, the alert Target and SmtpSettings) are "
        "Frozen records; everett's NO_VALUE is crontabber.config.options.NO_VALUE. (2) The "
        "INI file's parse kept between ticks (crontabber.config.inicache: ~/.cache/crontabber, "
        "mode 0600, used while the file's inode, size, mtime and ctime are unchanged): no "
        "configobj import or parse, ~4 ms. (3) A job class's options built once, not twice. "
        "Paired runs, medians of 30 (bench_tick's database, a target configured): the tick "
        "75.7 -> 70.8 ms after (1)+(2) and the targets' typing, psycopg2 38-40 ms. "
        "tests/cli/test_cli.py lists every module a warm idle tick imports beyond psycopg2's; "
        "a new one fails it.",
    ]
    return [
        Comparison(
            "idle tick",
            "wall time",
            "s",
            Sample("ours", ours_t),
            Sample(label, base_t),
            higher_is_better=False,
            goal="ours <= 2x baseline (ratio >= 0.5)",
            notes=notes,
        ),
        Comparison(
            "idle tick",
            "peak RSS",
            "MiB",
            Sample("ours", memory["ours"][skip:]),
            Sample(label, memory["baseline"][skip:]),
            higher_is_better=False,
            goal="ours <= 3x baseline (ratio >= 0.33)",
        ),
    ]
