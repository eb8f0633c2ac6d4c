"""The traced figures: ``python scripts/trace_paths.py [--repo DIR] [--runs N] [--list]``.

Runs two commands for real, in this process, against the local PostgreSQL (a temporary
database made and dropped by ``tests/helpers.py``'s :func:`fresh_database`, with the schema
and the sample jobs' tables the tests use), and prints for each how many ``crontabber/`` files
its call path enters and how many times it returns to a file it had left:

- a cron tick (``python -m crontabber`` with no mode) whose one job, ``basic-job``, is due
  (a new job: never run);
- ``--rerun parallel-backfill --parallel 2`` over two days (the reruns' tests' sample job).

**The tracing.** :func:`sys.setprofile` records each call of a Python function whose code is
in the repository's ``crontabber/`` (imports' module bodies left out: loading a module is not
a step of the path; the jobs, the libraries and the standard library left out), as the
sequence of the files entered. The runner's main thread is traced, and so is every process it
forks (a job's child, and a child's own forks): each records its own sequence from the fork
on, and the path is read as the runner's sequence with each child's spliced in where it was
forked. Threads other than each process's main thread (a child's lease watchdog, the test
helpers' database thread) are not traced. The figures are :func:`count_path`'s over that one
sequence: distinct files, and entries into a file already entered and left since. Two figures
each: the command's path (from its mode's function, ``cli/run.py`` ``run_all`` and
``cli/rerun.py`` ``rerun``, where the style reviews' traces start: the parsing and the
loading of the configuration before it left out) and the whole process's (from
``crontabber.cli.main`` on: the interpreter's start and the imports left out).

Each command runs ``--runs`` times (5), each in a new process as a cron tick is: how many
turns the runner's wait loop takes while a child works (``runloop.py``, ``supervisor.py``,
``capture.py``: about five returns a turn) depends on the machine's timing, and only adds
returns, so the run with the fewest is printed (the same from run to run on a quiet
machine), with the range of any figure that varied.

``--repo DIR`` measures another checkout (a ``git worktree add`` of an older commit, with the
same ``.services`` symlink): its ``crontabber/``, ``tests/helpers.py`` and sample jobs are the
ones imported and traced. ``python scripts/metrics.py --traced`` prints the same lines
after its own.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

HERE = Path(__file__).resolve().parent.parent
#: The marks of a path where its command's function is entered and left (:func:`section`).
ENTER, LEAVE = ">", "<"
JOBS = "tests.fixtures.sample_jobs"
#: Where each command's path starts: the function its mode calls (``file, function``).
TICK = ("crontabber/cli/run.py", "run_all")
RERUN = ("crontabber/cli/rerun.py", "rerun")


def count_path(files: Iterable[str]) -> tuple[int, int]:
    """``(distinct files, returns)`` of a call path given as the files entered, in order: a
    return is an entry into a file that was entered before and left since (staying in one
    file, however many calls, is one visit)."""
    seen: set[str] = set()
    previous: str | None = None
    returns = 0
    for name in files:
        if name == previous:
            continue
        returns += name in seen
        seen.add(name)
        previous = name
    return len(seen), returns


def spliced(paths: dict[int, list[str]], forks: dict[int, tuple[int, int]], root: int) -> list[str]:
    """The path of process ``root`` with each forked child's path put in where it was forked:
    ``paths[pid]`` is a process's files, ``forks[child] = (parent, how many of the parent's
    files were recorded at the fork)``."""
    children = sorted((at, child) for child, (parent, at) in forks.items() if parent == root)
    out: list[str] = []
    start = 0
    for at, child in children:
        out += paths[root][start:at]
        out += spliced(paths, forks, child)
        start = at
    return out + paths[root][start:]


def section(path: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(the command's path, the whole process's)``: the files between :data:`ENTER` and
    :data:`LEAVE` (the first such span), and all the files, the marks left out."""
    whole = [name for name in path if name not in (ENTER, LEAVE)]
    if ENTER not in path:
        return [], whole
    start = path.index(ENTER) + 1
    end = path.index(LEAVE, start) if LEAVE in path[start:] else len(path)
    return [name for name in path[start:end] if name != ENTER], whole


class Recorder:
    """Records the files under ``package`` entered by each process (this one and its forks),
    one file of lines per process in ``folder``: a forked process's first line is
    ``fork PARENT AT``. Consecutive calls in one file are written once."""

    def __init__(self, package: Path, folder: Path, entry: tuple[str, str]) -> None:
        self.package = package
        self.folder = folder
        self.entry = entry
        self.entered: Any = None
        self.known: dict[str, str | None] = {}
        self.last: str | None = None
        self.count = 0
        self.fd = -1
        self.root = os.getpid()

    def _open(self, header: str = "") -> None:
        self.fd = os.open(self.folder / f"{os.getpid()}.path", os.O_WRONLY | os.O_CREAT, 0o644)
        if header:
            os.write(self.fd, header.encode())

    def _forked(self) -> None:
        parent, at = self.pid, self.count
        self.count = 0
        self._open(f"fork {parent} {at}\n")
        self.pid = os.getpid()

    def _relative(self, filename: str) -> str | None:
        path = Path(filename)
        return (
            str(path.relative_to(self.package.parent))
            if path.is_relative_to(self.package)
            else None
        )

    def _write(self, line: str) -> None:
        self.count += 1
        os.write(self.fd, f"{line}\n".encode())

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "return" and frame is self.entered:
            self.entered = None
            self._write(LEAVE)
            self.last = None
        if event != "call" or code.co_name == "<module>":
            return
        filename = code.co_filename
        if filename not in self.known:
            self.known[filename] = self._relative(filename)
        name = self.known[filename]
        if name is not None and (name, code.co_name) == self.entry and self.entered is None:
            self.entered = frame
            self._write(ENTER)
            self.last = None
        if name is None or name == self.last:
            return
        self.last = name
        self._write(name)

    def run(self, work: Callable[[], Any]) -> Any:
        """``work()`` traced; in a forked process that returns from it, the trace goes on."""
        self.pid = os.getpid()
        self._open()
        global _ACTIVE
        _ACTIVE = self
        sys.setprofile(self.profile)
        try:
            return work()
        finally:
            sys.setprofile(None)
            _ACTIVE = None
            os.close(self.fd)

    def path(self) -> list[str]:
        """The spliced path of the process that called :meth:`run`, with :data:`ENTER` and
        :data:`LEAVE` where the entry function was entered and left."""
        paths: dict[int, list[str]] = {}
        forks: dict[int, tuple[int, int]] = {}
        for found in self.folder.glob("*.path"):
            pid = int(found.stem)
            lines = found.read_text().splitlines()
            if lines and lines[0].startswith("fork "):
                _, parent, at = lines.pop(0).split()
                forks[pid] = (int(parent), int(at))
            paths[pid] = lines
        return spliced(paths, forks, self.root)


_ACTIVE: Recorder | None = None


def _in_child() -> None:
    if _ACTIVE is not None:
        _ACTIVE._forked()


def _in_parent() -> None:
    if _ACTIVE is not None:  # the child's path goes in here: the next file is written anew
        _ACTIVE.last = None


os.register_at_fork(after_in_child=_in_child, after_in_parent=_in_parent)


def _setup(repo: Path) -> Any:
    """Import the checkout at ``repo`` (its ``crontabber``, ``tests.helpers``) first."""
    sys.path.insert(0, str(repo))
    import crontabber

    if not Path(crontabber.__file__).resolve().is_relative_to(repo.resolve()):
        raise SystemExit(f"trace_paths: crontabber is imported from {crontabber.__file__}")
    from tests import helpers

    return helpers


def _database(helpers: Any) -> Any:
    """A context manager: a new database with the schema and the sample jobs' tables."""
    from crontabber.schema import ensure_schema, with_runner
    from crontabber.store import connect
    from jobs import SQL_DIR as JOBS_SQL

    class Made:
        def __enter__(self) -> Any:
            self.inner = helpers.fresh_database("trace", None, pooled=False)
            settings = self.inner.__enter__()
            self.conn = connect(settings)
            self.conn.autocommit = True
            ensure_schema(self.conn, with_runner([JOBS_SQL]))
            sample = Path(helpers.REPO) / "tests" / "fixtures" / "sample_jobs.sql"
            with self.conn.cursor() as cur:
                cur.execute(sample.read_text())
            os.environ.update(helpers.database_env(settings))
            return self

        def calls(self) -> list[tuple[str, Any]]:
            with self.conn.cursor() as cur:
                cur.execute("SELECT app_name, day FROM test_job_calls ORDER BY id")
                return [(name, day and day.astimezone(dt.timezone.utc)) for name, day in cur]

        def __exit__(self, *exc: Any) -> None:
            self.conn.close()
            self.inner.__exit__(*exc)

    return Made()


def traced(
    helpers: Any, jobs: list[str], entry: tuple[str, str], args: Sequence[str]
) -> tuple[list[str], Any]:
    """Run ``python -m crontabber ARGS`` in this process, over a new database whose
    crontabber.ini lists ``jobs`` (sample jobs, ``Class|frequency[|time]``), traced: the
    spliced path (``entry``, the command's function, marked) and the jobs' recorded calls."""
    from crontabber import cli

    package = Path(helpers.REPO) / "crontabber"
    with tempfile.TemporaryDirectory(prefix="trace-") as tmp, _database(helpers) as db:
        ini = Path(tmp) / "crontabber.ini"
        lines = "\n".join(f"    {JOBS}.{job}" for job in jobs)
        ini.write_text(f"[crontabber]\n    jobs='''\n{lines}\n    '''\n")
        folder = Path(tmp) / "paths"
        folder.mkdir()
        recorder = Recorder(package, folder, entry)
        out = io.StringIO()
        code = recorder.run(
            lambda: cli.main([f"--admin.conf={ini}", *args], stdout=out, stderr=out)
        )
        if os.getpid() != recorder.root:  # a forked child that returned instead of exiting
            os._exit(70)
        if code != 0:
            raise SystemExit(
                f"trace_paths: {' '.join(args) or 'the tick'} exited {code}: {out.getvalue()}"
            )
        return recorder.path(), db.calls()


def tick(helpers: Any) -> list[str]:
    """The traced path of a cron tick running one due job (``basic-job``, never run yet)."""
    path, calls = traced(helpers, ["BasicJob|1d"], TICK, [])
    if [name for name, _ in calls] != ["basic-job"]:
        raise SystemExit(f"trace_paths: the tick ran {calls}, not basic-job once")
    return path


def rerun(helpers: Any) -> list[str]:
    """The traced path of ``--rerun parallel-backfill --parallel 2`` over the two days before
    yesterday."""
    today = dt.datetime.now(dt.timezone.utc).date()
    first, last = today - dt.timedelta(days=3), today - dt.timedelta(days=2)
    jobs = [
        "ParallelBackfillJob|1d|03:00",
        "ParallelDependantJob|1d|03:00",
        "SerialGrandchildJob|1d|03:00",
    ]
    args = [
        "--rerun",
        "parallel-backfill",
        "--reason",
        "traced",
        "--parallel",
        "2",
        "--date",
        f"{first:%Y-%m-%d}",
        "--to",
        f"{last:%Y-%m-%d}",
    ]
    path, calls = traced(helpers, jobs, RERUN, args)
    if sorted(day.date() for _, day in calls) != [first, last]:
        raise SystemExit(f"trace_paths: the rerun ran {calls}, not {first} and {last}")
    return path


def figures(counts: Sequence[tuple[int, int]]) -> str:
    """``N files, M returns`` of several runs' ``(files, returns)``: the run with the fewest
    returns (then files), with the range of each figure that differed between the runs."""
    files, returns = min(counts, key=lambda c: (c[1], c[0]))
    text = f"{files} files, {returns} returns"
    spread = [
        f"{what} {min(c[i] for c in counts)}-{max(c[i] for c in counts)}"
        for i, what in enumerate(("files", "returns"))
        if len({c[i] for c in counts}) > 1
    ]
    if len(counts) > 1:
        text += f" (fewest of {len(counts)} runs" + "".join(f"; {s}" for s in spread) + ")"
    return text


COMMANDS = {
    "tick": ("cron tick running one due job", tick),
    "rerun": ("--rerun NAME --parallel 2", rerun),
}


def one_path(repo: Path, command: str) -> list[str]:
    """The marked path of one run of ``command`` (a key of :data:`COMMANDS`), in a new
    process, as a cron tick's is: no module loaded, no cache filled before it."""
    done = subprocess.run(
        [sys.executable, __file__, "--repo", str(repo), "--path", command],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"{done.stderr}trace_paths: {command} failed")
    return done.stdout.splitlines()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/trace_paths.py")
    parser.add_argument("--repo", type=Path, default=HERE, help="the checkout to trace")
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    parser.add_argument("--list", action="store_true", help="print each path, file by file")
    parser.add_argument("--path", choices=COMMANDS, help=argparse.SUPPRESS)  # one run's path
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs: at least 1")
    repo = args.repo.resolve()
    if args.path:
        helpers = _setup(repo)
        try:
            path = COMMANDS[args.path][1](helpers)
        finally:
            helpers.DATABASES.settle()
        print("\n".join(path))
        return 0
    for command, (label, _) in COMMANDS.items():
        paths = [section(one_path(repo, command)) for _ in range(args.runs)]
        if not all(path for path, _ in paths):
            raise SystemExit(f"trace_paths: {label}: its command's function never ran")
        print(f"traced {label}: {figures([count_path(p) for p, _ in paths])}")
        print(f"traced {label}, whole process: {figures([count_path(w) for _, w in paths])}")
        sys.stdout.flush()
        if args.list:
            for name in paths[0][0]:
                print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
