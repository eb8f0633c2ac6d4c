"""Differential check: our runner against the original crontabber 0.18.1 (Python 2.7).

    .venv/bin/python scripts/differential/run.py [--keep] [SCENARIO ...]

Each scenario (an ini, jobs from ``jobs_py2and3.py``, steps) runs on both
implementations, each with a fresh database (time zone UTC). Steps are CLI
invocations, or SQL run on both databases that winds the state's clock back.
Each invocation step starts on both implementations at once; then both
databases are observed (see ``observe``) and compared: times as ages and gaps,
with tolerances (grown by the invocations' durations), since absolute times
differ. A scenario is PASS (no difference), DIFF (only differences it
declares, citing the spec section of the bug we fixed) or FAIL (anything else,
or a declared difference that did not happen); the exit status is 1 if any
scenario FAILs, and on a set-up error (one line on stderr). README.md beside this file has the
details. The original is
installed once (pip --target, the pins of ``requirements-py27.txt``) into
``.services/cache/py2crontabber`` and run by pyenv's Python 2.7.18. The
PostgreSQL is the one ``RESOURCE_POSTGRESQL_*`` names (``.services/env``), by
default 127.0.0.1:54329. ``tests/cli/test_differential.py`` runs this in
``make test``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
import devservices  # noqa: E402

SERVICES = devservices.current()
CACHE = SERVICES.cache_dir / "py2crontabber"
REQUIREMENTS = HERE / "requirements-py27.txt"
PYTHON27 = "2.7.18"
PG = {k: v for k, v in SERVICES.database().items() if k != "dbname"}
JOBS_MODULE = "jobs_py2and3"
# Tolerances, in seconds, on top of the scenario's skew (see Outcome.skew):
AGE_TOL = 5.0  # ages of the same value in the two databases
DELTA_TOL = 1.0  # gaps between two columns of one row
TIMESTAMPS = ("next_run", "first_run", "last_run", "last_success", "ongoing")
ABSENT = "(absent)"


# --------------------------------------------------------------- scenarios ---


@dataclass(frozen=True)
class Step:
    """A CLI invocation (``args``) or, when ``sql`` is set, a statement run on both databases."""

    label: str
    args: tuple[str, ...] = ()
    sql: str | None = None


def run(label: str, *args: str) -> Step:
    return Step(label, args)


def sql(statement: str) -> Step:
    return Step("sql", sql=statement)


def wind(interval: str) -> Step:
    """Move every state timestamp back by ``interval``, as if that much time had passed."""
    sets = ", ".join(f"{col} = {col} - interval '{interval}'" for col in TIMESTAMPS)
    return sql(f"UPDATE crontabber SET {sets}")


@dataclass(frozen=True)
class Expected:
    """Differences a step may show because we fixed a bug: the spec sections,
    why, and the prefixes of the observation keys that may differ."""

    ref: str
    why: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Scenario:
    name: str
    jobs: tuple[str, ...]
    steps: tuple[Step, ...]
    error_retry_time: int = 300
    extra_ini: str = ""  # lines inside [crontabber], e.g. a [[class-X]] section
    expected: dict[str, Expected] = field(default_factory=dict)


#: --job that ran nothing (not due, blocked, nothing to backfill)
NOT_RUN = Expected(
    "§5.2, §6.7",
    "the original exits 0 when --job ran nothing; ours exits 7 "
    "(ExitCode.NOT_RUN) so a script can tell that nothing ran",
    ("exit",),
)


def scenarios() -> list[Scenario]:
    utc = dt.datetime.now(dt.timezone.utc)
    yesterday = (utc - dt.timedelta(days=1)).strftime("%Y-%m-%d")
    past, future = ((utc + dt.timedelta(minutes=m)).strftime("%H:%M") for m in (-2, 3))
    marker = (
        "UPDATE crontabber SET next_run = now() - interval '1 second', ongoing = now() - interval "
        "'{}'"
    )
    held = (
        "UPDATE crontabber SET next_run = now() - interval '1 second', ongoing = "
        "CASE WHEN app_name = 'basic-job' THEN now() - interval '1 second' END"
    )
    return [
        Scenario(
            "basic-rerun",
            ("BasicJob|7d",),
            (
                run("first run"),
                run("immediate rerun: nothing due"),
                run("--nagios: OK", "--nagios"),
                run("--job basic-job --force: runs again", "--job=basic-job", "--force"),
            ),
        ),
        Scenario(
            "dependency-chain",
            ("FooJob|3d", "BarJob|4d"),
            (
                run("first run: foo then bar"),
                run("immediate rerun: nothing due"),
                wind("3 days"),
                run("3 days later: foo only"),
                wind("4 days"),
                run("--job bar while foo is overdue: skipped", "--job=bar"),
            ),
            expected={"--job bar while foo is overdue: skipped": NOT_RUN},
        ),
        Scenario(
            "failing-and-blocked",
            ("TroubleJob|1d", "SadJob|1d", "BasicJob|1d"),
            (
                run("trouble fails, sad blocked (no row)"),
                run("--nagios: CRITICAL", "--nagios"),
                run("immediate rerun: nothing due"),
                wind("101 seconds"),
                run("past error_retry_time: trouble retried, fails again"),
                run("--job sad: still blocked", "--job=sad"),
                run("--job sad --force: runs", "--job=sad", "--force"),
            ),
            error_retry_time=100,
            expected={"--job sad: still blocked": NOT_RUN},
        ),
        Scenario(
            "backfill",
            ("FooBackfillJob|1d",),
            (
                run("first run: 1 call"),
                wind("3 days"),
                run("3 days later: 3 calls"),
                run("immediate rerun: nothing due"),
                run("--job --force, no interval due: no call", "--job=foo-backfill", "--force"),
            ),
            expected={"--job --force, no interval due: no call": NOT_RUN},
        ),
        Scenario(
            "backfill-failing-midway",
            ("FailingBackfillJob|1d",),
            (
                run("first run: 1 call"),
                wind("3 days"),
                run("3 days later: ok, then fails on yesterday"),
                run("--nagios: WARNING (first backfill failure)", "--nagios"),
                wind("301 seconds"),
                run("retry: fails again on the same date"),
                run("--nagios: CRITICAL (second failure)", "--nagios"),
            ),
            extra_ini=f"    [[class-FailingBackfillJob]]\n        fail_on={yesterday}\n",
        ),
        Scenario(
            "timed-forced",
            ("BasicJob|1d|03:00",),
            (
                run("--job --force: next_run at 03:00", "--job=basic-job", "--force"),
                run("rerun: not due"),
            ),
        ),
        Scenario(
            "timed-first-run",
            (f"BasicJob|1d|{past}", f"FooJob|1d|{future}", f"FooBackfillJob|1d|{past}"),
            (
                run(f"first run: jobs at {past} run, at {future} not"),
                wind("3 days"),
                run(f"3 days later: backfill anchored at {past}, 3 calls"),
            ),
            expected={
                f"first run: jobs at {past} run, at {future} not": Expected(
                    "§1.2",
                    "a timed backfill job's first interval: the original's is now (case 3), "
                    f"ours its time of day ({past} today), as each later one (issue #42 item 13)",
                    (
                        "log:foo-backfill:1.age.success",
                        "row:foo-backfill:age.last_success",
                        "row:foo-backfill:last_success-last_run",
                    ),
                ),
                f"3 days later: backfill anchored at {past}, 3 calls": Expected(
                    "§1.2",
                    "the first run's log row keeps its interval (as above)",
                    ("log:foo-backfill:1.age.success",),
                ),
            },
        ),
        Scenario(
            "reset-job",
            ("BasicJob|7d",),
            (
                run("first run"),
                run("--reset-job: row deleted, log kept", "--reset-job=basic-job"),
                run("--reset-job again: already reset", "--reset-job=basic-job"),
                run("run after reset: runs as new"),
            ),
        ),
        Scenario(
            "reset-ghost",
            ("BasicJob|7d",),
            (
                run("first run"),
                sql(
                    "INSERT INTO crontabber (app_name, error_count, depends_on, last_error) "
                    "VALUES ('ghost', 0, '{}', '{}')"
                ),
                run("--audit-ghosts: lists it", "--audit-ghosts"),
                run("--reset-job ghost", "--reset-job=ghost"),
            ),
            expected={
                "--reset-job ghost": Expected(
                    "§6.4",
                    "the original resets configured jobs only (JobNotFoundError, exit 1), "
                    "so a ghost cannot be cleared; ours deletes the ghost's row, exit 0",
                    ("exit", "row:ghost"),
                )
            },
        ),
        Scenario(
            "ongoing-marker",
            ("BasicJob|7d",),
            (
                run("first run"),
                sql(marker.format("1 second")),
                run("marker 1 s old: no run"),
                sql(marker.format("13 hours")),
                run("marker 13 h old: stale, runs"),
            ),
            expected={
                "marker 1 s old: no run": Expected(
                    "§8.1.4",
                    "the original's tick exits 3 when a job runs elsewhere; ours exits 0: "
                    "in a fleet that is most ticks, not a failure (issue #32 item 13)",
                    ("exit",),
                ),
                "marker 13 h old: stale, runs": Expected(
                    "§5.1",
                    "the run that takes over a stale marker records the dead run in the log "
                    "(a RunAbandoned row: issue #23); the original leaves no trace of it",
                    ("log:basic-job:",),
                ),
            },
        ),
        Scenario(
            "ongoing-marker-25h",
            ("BasicJob|7d",),
            (
                run("first run"),
                sql(marker.format("25 hours")),
                run("marker 25 h old"),
            ),
            expected={
                "marker 25 h old": Expected(
                    "§5.1, §8.1.1",
                    "the original takes the marker's age from timedelta.seconds "
                    "(25 h counts as 1 h) and exits 3; ours counts whole days, finds it stale, "
                    "runs",
                    ("exit", "row:basic-job", "log:basic-job:"),
                )
            },
        ),
        Scenario(
            "ongoing-other-jobs",
            ("BasicJob|7d", "FooJob|7d"),
            (
                run("first run"),
                sql(held),
                run("--job basic-job while held", "--job=basic-job"),
                run("basic-job held, foo due"),
            ),
            expected={
                "--job basic-job while held": Expected(
                    "§6.7, §8.1.5",
                    "under --job the original lets OngoingJobError escape "
                    "(traceback, exit 1); ours exits 3 as in run-all mode",
                    ("exit",),
                ),
                "basic-job held, foo due": Expected(
                    "§4.3, §8.1.4",
                    "one held job aborts the original's whole run (foo is "
                    "not run, exit 3); ours reports it, still runs foo and exits 0 (a job held "
                    "elsewhere is no failure of a tick: issue #32 item 13)",
                    ("exit", "row:foo", "log:foo:"),
                ),
            },
        ),
    ]


# ---------------------------------------------------------- implementations ---


@dataclass(frozen=True)
class Impl:
    name: str
    command: tuple[str, ...]
    pythonpath: tuple[Path, ...]
    settings: tuple[tuple[str, str], ...] = ()

    def env(self) -> dict[str, str]:
        """The environment for this implementation: clean_environ() + its path and settings."""
        env = clean_environ()
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in self.pythonpath)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(self.settings)
        return env


def clean_environ() -> dict[str, str]:
    """The environment minus anything either implementation (or a Python) reads as configuration."""
    skip = ("CRONTABBER", "RESOURCE", "SENTRY", "SECRETS", "LOGGING", "PYTHON", "PYENV")
    return {k: v for k, v in os.environ.items() if not k.upper().startswith(skip)}


def python27() -> str:
    """pyenv's Python 2.7.18 (part of the machine, as Python 3.11 is).

    Raises SystemExit with one line if it cannot be found."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    python = root / "versions" / PYTHON27 / "bin" / "python"
    if python.is_file():
        return str(python)
    try:  # a pyenv installed elsewhere
        prefix = subprocess.run(
            ["pyenv", "prefix", PYTHON27], check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(
            f"differential: no Python {PYTHON27}: not at {python}, and `pyenv prefix {PYTHON27}` "
            f"failed ({exc})"
        ) from None
    return str(Path(prefix) / "bin" / "python")


def ensure_original(python: str) -> None:
    """Install crontabber 0.18.1 and its Python 2 dependencies into CACHE, once.

    Installs into a temporary sibling directory and renames it, so that an
    interrupted install is never taken for a finished one. Raises SystemExit
    with one line (and pip's last lines) if pip fails."""
    wanted = REQUIREMENTS.read_text()
    stamp = CACHE / ".requirements"
    if stamp.is_file() and stamp.read_text() == wanted:
        return
    print(f"installing the original into {CACHE} ...", file=sys.stderr, flush=True)
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".py2crontabber-", dir=CACHE.parent))
    # Python 2.7's pip (19.2) knows no --no-python-version-warning: its
    # deprecation notice is captured with the rest and shown only on failure.
    done = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
            str(tmp),
            "-r",
            str(REQUIREMENTS),
        ],
        capture_output=True,
        text=True,
        env=clean_environ(),
    )
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-10:])
        raise SystemExit(
            f"{tail}\ndifferential: pip could not install {REQUIREMENTS.name} with {python} (exit "
            f"{done.returncode})"
        )
    (tmp / ".requirements").write_text(wanted)
    shutil.rmtree(CACHE, ignore_errors=True)
    tmp.rename(CACHE)


def implementations(py27: str) -> list[Impl]:
    venv = ROOT / ".venv" / "bin" / "python"
    ours = str(venv) if venv.exists() else sys.executable
    return [
        Impl(
            "original",
            (py27, "-c", "from crontabber.app import local_main; local_main()"),
            (CACHE, HERE),
        ),
        # crontabber 0.18 has no --reason; ours requires one for --reset-job unless told not
        # to, as a site moving from crontabber would until its scripts give one
        Impl(
            "ours",
            (ours, "-m", "crontabber"),
            (ROOT, HERE),
            (("CRONTABBER_REQUIRE_REASON", "False"),),
        ),
    ]


# ----------------------------------------------------------------- database ---


def connect(dbname: str) -> Any:
    conn = psycopg2.connect(dbname=dbname, **PG)
    conn.autocommit = True
    return conn


def recreate_database(dbname: str, drop_only: bool = False) -> None:
    admin = connect("postgres")
    try:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{dbname}"')
            if not drop_only:
                cur.execute(f'CREATE DATABASE "{dbname}"')
                cur.execute(f"ALTER DATABASE \"{dbname}\" SET TIMEZONE TO 'UTC'")
    finally:
        admin.close()


def write_ini(path: Path, dbname: str, sc: Scenario) -> None:
    jobs = "\n".join(f"    {JOBS_MODULE}.{job}" for job in sc.jobs)
    db = "\n".join(f"        {k}={v}" for k, v in {**PG, "dbname": dbname}.items())
    path.write_text(
        f"[crontabber]\n    error_retry_time={sc.error_retry_time}\n"
        f"    jobs='''\n{jobs}\n    '''\n{sc.extra_ini}"
        f"[resource]\n    [[postgresql]]\n{db}\n"
    )


def exc_name(text: str | None) -> str | None:
    """``<type 'exceptions.NameError'>`` (Python 2) and ``<class 'NameError'>`` -> ``NameError``."""
    return re.sub(r"<(?:type|class) '(?:[\w.]+\.)?(\w+)'>", r"\1", text) if text else text


def seconds(delta: dt.timedelta) -> float:
    return round(delta.total_seconds(), 3)


def observe(conn: Any) -> dict[str, Any]:
    """The comparable quantities of both state tables.

    Per ``crontabber`` row: ``error_count``, ``depends_on``, ``last_error`` (type
    name normalised, value, traceback made of frames), each timestamp's age (None when NULL), the
    gaps
    next_run/first_run/last_success - last_run, and next_run's HH:MM when it
    sits on a whole minute. Per ``crontabber_log`` row, numbered per app: ``ok``
    or the normalised ``exc_type: exc_value``, and the age of ``success``.
    """
    obs: dict[str, Any] = {}
    with conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        cur.execute("SELECT clock_timestamp() AS now")
        now = cur.fetchone()["now"]
        # crontabber 0.18's columns only: ours may add its own (ongoing_by, ...).
        cur.execute(
            "SELECT app_name, next_run, first_run, last_run, last_success, ongoing,"
            " error_count, depends_on, last_error FROM crontabber ORDER BY app_name"
        )
        for row in cur.fetchall():
            key = f"row:{row['app_name']}:"
            error = row["last_error"] or {}
            obs[key + "error_count"] = row["error_count"]
            obs[key + "depends_on"] = list(row["depends_on"] or [])
            frames = str(error.get("traceback", "")).startswith("  File ")
            obs[key + "last_error"] = (
                (exc_name(error.get("type")), error.get("value"), frames) if error else None
            )
            for col in TIMESTAMPS:
                obs[key + "age." + col] = seconds(now - row[col]) if row[col] else None
            last_run = row["last_run"]
            for col in ("next_run", "first_run", "last_success"):
                gap = seconds(row[col] - last_run) if row[col] and last_run else None
                obs[f"{key}{col}-last_run"] = gap
            nxt = row["next_run"]
            on_minute = nxt is not None and not nxt.second and not nxt.microsecond
            obs[key + "next_run.HH:MM"] = (
                nxt.astimezone(dt.timezone.utc).strftime("%H:%M") if on_minute else None
            )
        cur.execute("SELECT app_name, success, exc_type, exc_value FROM crontabber_log ORDER BY id")
        counts: dict[str, int] = {}
        for row in cur.fetchall():
            i = counts[row["app_name"]] = counts.get(row["app_name"], 0) + 1
            key = f"log:{row['app_name']}:{i}"
            # Python 2's repr of an exception ends in ",)": NameError('bla bla',)
            value = re.sub(r",\)$", ")", row["exc_value"] or "")
            failure = f"{exc_name(row['exc_type'])}: {value}"
            obs[key] = "ok" if row["success"] else failure
            obs[key + ".age.success"] = seconds(now - row["success"]) if row["success"] else None
    return obs


# ---------------------------------------------------------------- comparing ---


def entity(key: str) -> str:
    """``row:APP`` or ``log:APP:N``: the row a key describes."""
    return key.split(".", 1)[0] if key.startswith("log:") else ":".join(key.split(":")[:2])


def differences(
    a: dict[str, Any], b: dict[str, Any], skew: float = 0.0
) -> list[tuple[str, Any, Any]]:
    """Keys whose values differ (numbers within tolerance are equal); a row
    present on one side only is one difference.

    ``skew`` bounds how far apart in time the two implementations wrote the
    same timestamp: an age may be off by that much, a gap between two
    timestamps (written in two steps) by twice that."""
    found, ents_a, ents_b = [], {entity(k) for k in a}, {entity(k) for k in b}
    for ent in sorted(ents_a ^ ents_b):
        found.append(
            (ent, "present" if ent in ents_a else ABSENT, "present" if ent in ents_b else ABSENT)
        )
    for key in sorted(k for k in a.keys() & b.keys()):
        x, y = a[key], b[key]
        if isinstance(x, float) and isinstance(y, float):
            is_age = ".age." in key or ":age." in key
            if abs(x - y) <= (AGE_TOL + skew if is_age else DELTA_TOL + 2 * skew):
                continue
        elif x == y:
            continue
        found.append((key, x, y))
    return found


@dataclass
class Outcome:
    name: str
    compared: int = 0
    # The longest invocation so far. Both implementations' invocations of a
    # step start together, so each writes a timestamp within that many seconds
    # of the other (a loaded machine stretches it; the differences that matter,
    # a schedule or a retry time, are a minute or more).
    skew: float = 0.0
    expected: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "FAIL" if self.unexpected else "DIFF" if self.expected else "PASS"


def invoke(impl: Impl, ini: Path, args: tuple[str, ...], workdir: Path) -> tuple[int, str, float]:
    """Run one CLI invocation; return its exit code, stdout and duration in
    seconds. Its output goes to ``workdir/<impl>.log`` too."""
    started = time.monotonic()
    done = subprocess.run(
        [*impl.command, f"--admin.conf={ini}", *args],
        cwd=workdir,
        env=impl.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    duration = time.monotonic() - started
    with (workdir / f"{impl.name}.log").open("a") as log:
        log.write(
            f"\n===== {' '.join(args) or '(run all)'} -> exit {done.returncode}"
            f" ({duration:.2f} s)\n{done.stdout}{done.stderr}"
        )
    return done.returncode, done.stdout, duration


def observe_step(
    impls: list[Impl], conns: dict[str, Any], step: Step, workdir: Path, outcome: Outcome
) -> list[dict]:
    """Run a step's invocation on every implementation at once (each has its
    own database), then observe each database; record the step's skew."""
    seen = []
    with ThreadPoolExecutor(len(impls)) as pool:
        results = list(
            pool.map(
                lambda impl: invoke(impl, workdir / f"{impl.name}.ini", step.args, workdir), impls
            )
        )
    for code, out, duration in results:
        outcome.skew = max(outcome.skew, duration)
        obs: dict[str, Any] = {"exit": code}
        if "--nagios" in step.args:  # its status line (ours adds detail lines)
            obs["stdout"] = exc_name(out.splitlines()[0] if out else "")
        elif "--audit-ghosts" in step.args:
            obs["stdout"] = out
        seen.append(obs)
    for obs, impl in zip(seen, impls):
        obs.update(observe(conns[impl.name]))
    return seen


def judge(outcome: Outcome, step: Step, allowed: Expected | None, diffs: list) -> None:
    """Sort a step's differences into expected (declared for it) and unexpected."""
    if allowed is not None:
        outcome.refs.append(allowed.ref)
        outcome.expected.append(f"step '{step.label}' ({allowed.ref}: {allowed.why})")
        if not diffs:
            outcome.unexpected.append(f"step '{step.label}': the expected difference did not occur")
    for key, x, y in diffs:
        if allowed is not None and key.startswith(allowed.keys):
            outcome.expected.append(f"  {key}: original={x!r} ours={y!r}")
        else:
            outcome.unexpected.append(f"step '{step.label}': {key}: original={x!r} ours={y!r}")


def run_scenario(sc: Scenario, impls: list[Impl], workdir: Path, keep: bool) -> Outcome:
    """Run every step on both implementations, comparing after each invocation."""
    outcome = Outcome(sc.name)
    # The pid: two runs at once (two test sessions on one server) do not collide.
    dbs = {
        impl.name: f"crontabber_diff_{sc.name.replace('-', '_')}_{impl.name}_{os.getpid()}"
        for impl in impls
    }
    conns = {}
    for impl in impls:
        recreate_database(dbs[impl.name])
        write_ini(workdir / f"{impl.name}.ini", dbs[impl.name], sc)
        conns[impl.name] = connect(dbs[impl.name])
    try:
        for step in sc.steps:
            if step.sql is not None:
                for conn in conns.values():
                    with conn.cursor() as cur:
                        cur.execute(step.sql)
                continue
            seen = observe_step(impls, conns, step, workdir, outcome)
            outcome.compared += len(seen[0].keys() | seen[1].keys())
            judge(outcome, step, sc.expected.get(step.label), differences(*seen, outcome.skew))
    finally:
        for conn in conns.values():
            conn.close()
        if not keep:
            for db in dbs.values():
                recreate_database(db, drop_only=True)
    return outcome


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the databases and the work dir (inis, stderr logs)",
    )
    parser.add_argument("only", nargs="*", metavar="SCENARIO", help="run only these scenarios")
    args = parser.parse_args(argv)
    py27 = python27()
    ensure_original(py27)
    impls = implementations(py27)
    chosen = [sc for sc in scenarios() if not args.only or sc.name in args.only]
    if not chosen:
        parser.error(f"no scenario matches {args.only}")
    workroot = Path(tempfile.mkdtemp(prefix="crontabber-differential-"))
    print(f"{'scenario':<26} {'result':<6} {'values':>6}  notes", flush=True)
    outcomes = []
    for sc in chosen:
        (workroot / sc.name).mkdir()
        o = run_scenario(sc, impls, workroot / sc.name, args.keep)
        note = {
            "PASS": "",
            "DIFF": "expected: " + "; ".join(o.refs),
            "FAIL": "UNEXPECTED differences",
        }
        print(f"{o.name:<26} {o.status:<6} {o.compared:>6}  {note[o.status]}", flush=True)
        outcomes.append(o)
    for o in outcomes:
        for title, lines in (("expected", o.expected), ("UNEXPECTED", o.unexpected)):
            if lines:
                print(
                    f"\n{o.name}: {title} differences\n" + "".join(f"  {line}\n" for line in lines),
                    end="",
                )
    if args.keep:
        print(f"\nwork dir (inis, stderr logs): {workroot}")
    else:
        shutil.rmtree(workroot, ignore_errors=True)
    return 1 if any(o.status == "FAIL" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
