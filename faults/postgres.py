"""PostgreSQL restarted mid-run, and stopped for longer than a run (issue #15).

Each throw seeds work for `process-uploads` or `missing-symbols` (in turn), starts a real
runner on it, waits for its job's process and for the job to have begun the round's work
(`Scenario.started`), and a random time later (a tenth to a half of an unkilled run's job
lifetime), if the job's process is still running and its work not settled, either restarts
PostgreSQL (`pg_ctl restart -m fast`) or stops it, runs a fresh tick
while it is down (it must fail with one line, exit 1, no traceback), keeps it down until the
faulted runner has ended (it retries the end of its run for up to the lease: docs/leases.md)
and starts it again. Then the job is rerun until its work is settled, and the same brute-force
checks as the kills' (`faults.scenarios`) count what was lost or doubled. pg_ctl and the data
directory are found as scripts/services.sh places them (`faults.harness.pg_data`). A fault
that would come after the job's run ended is not thrown and not counted (it is thrown again
on fresh work, as the kills' are), so every counted fault hit a job at work.
"""

from __future__ import annotations

import random
import statistics
import subprocess
import time

from faults import harness
from faults.result import FaultResult
from faults.scenarios import MissingSymbols, Scenario, Uploads

RESTARTS, STOPS = 20, 6  # at scale 1.0


def run(scale: float) -> list[FaultResult]:
    rng = random.Random(1515)
    scenarios: list[Scenario] = [Uploads(rng), MissingSymbols(rng)]
    windows = []
    for scenario in scenarios:
        scenario.seed()
        windows.append(harness.job_lifetime(scenario.command()))
        scenario.check()
    return [
        throw(scenarios, windows, "restart", max(1, round(RESTARTS * scale)), rng),
        throw(scenarios, windows, "stop", max(1, round(STOPS * scale)), rng),
    ]


def throw(
    scenarios: list[Scenario], windows: list[float], kind: str, count: int, rng: random.Random
) -> FaultResult:
    start = time.monotonic()
    thrown = missed = alive_after = failed_on_it = 0
    converged = lost = duplicated = tracebacks = 0
    lines: list[int] = []
    refusals: list[str] = []
    notes: list[str] = []
    outage: list[float] = []
    figures_seen: set[str] = set()
    while thrown < count and missed < 3 * count:
        scenario, window = scenarios[(thrown + missed) % 2], windows[(thrown + missed) % 2]
        scenario.seed()
        proc = subprocess.Popen(
            scenario.command(),
            cwd=harness.ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        if not _at_work(proc, scenario, window, rng):
            missed += 1
            proc.communicate(timeout=300)
            harness.converge(scenario.command(), scenario.settled)
            scenario.check()
            continue
        thrown += 1
        n = thrown - 1
        child = harness.children(proc.pid)
        down = time.monotonic()
        if kind == "restart":
            harness.pg_ctl("restart", "-m", "fast")
            alive_after += bool(child) and child[0] in harness.children(proc.pid)
            _, stderr = proc.communicate(timeout=300)
        else:
            harness.pg_ctl("stop", "-m", "fast")
            alive_after += bool(child) and child[0] in harness.children(proc.pid)
            tick = harness.run(harness.runner_command("--job", "prune-run-log", "--force"))
            refusals.append(f"exit {tick.returncode}: {tick.stderr.strip()}")
            if tick.returncode != 1 or len(tick.stderr.strip().splitlines()) != 1:
                notes.append(
                    f"a tick with PostgreSQL down: exit {tick.returncode}, "
                    f"{tick.stderr.strip()[:300]!r}"
                )
            _, stderr = proc.communicate(timeout=300)
            time.sleep(1.0)  # down for longer than the run
            harness.pg_ctl("start")
        harness.wait_for_database()
        outage.append(time.monotonic() - down)
        for each in scenarios:  # the outage closed the checkers' connections too
            each.db = harness.connect()
        tracebacks += harness.tracebacks([stderr])
        # the supervisor's line for a job that ended on a database error: the fault hit the job
        failed_on_it += f"{scenario.app} failed: PostgreSQL" in stderr
        lines.append(len(stderr.strip().splitlines()))
        if stderr.strip() and f"{kind} stderr" not in figures_seen:
            figures_seen.add(f"{kind} stderr")
            notes.append(
                f"the faulted runner's stderr ({scenario.app}): "
                + " | ".join(line[24:200] for line in stderr.strip().splitlines()[:6])
            )
        ok, _, errors = harness.converge(scenario.command(), scenario.settled)
        tracebacks += harness.tracebacks(errors)
        check = scenario.check()
        lost += check.lost
        duplicated += check.duplicated
        if ok and check.clean:
            converged += 1
        elif len(notes) < 5:
            notes.append(
                f"{kind} {n + 1} ({scenario.app}): converged={ok}; " + "; ".join(check.problems[:3])
            )
    figures = {
        "faults that would have come after the job's run (rethrown)": str(missed),
        "job process still running when pg_ctl returned": f"{alive_after} of {thrown}",
        "job runs that failed on the outage": f"{failed_on_it} of {thrown}",
        "faulted runner's stderr lines": (
            f"median {statistics.median(lines):g}, max {max(lines)}" if lines else "-"
        ),
        "tracebacks": str(tracebacks),
        "outage (fault to database back)": f"median {statistics.median(outage):.1f} s",
        "seconds": f"{time.monotonic() - start:.0f}",
    }
    if refusals:
        figures["a tick while down"] = refusals[0][:160]
    label = (
        "PostgreSQL restarted (pg_ctl restart -m fast) mid-run"
        if kind == "restart"
        else "PostgreSQL stopped for longer than a run"
    )
    return FaultResult(label, thrown, converged, lost, duplicated, figures, notes)


def _at_work(
    proc: subprocess.Popen[str], scenario: Scenario, window: float, rng: random.Random
) -> bool:
    """Wait for the runner's job process and for the job to have begun the round's work, then
    a random time (a tenth to a half of the job's lifetime ``window``); whether the job is
    still at work (its process running, its work not settled): the moment to throw a fault."""
    deadline = time.monotonic() + 60
    while not harness.children(proc.pid):
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    while not scenario.started():
        if not harness.children(proc.pid) or time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    # not at once: a job whose start shows nothing in the database (missing-symbols reads its
    # batches first) has then been at work for a tenth of its lifetime at least
    time.sleep(rng.uniform(0.1, 0.5) * window)
    return bool(harness.children(proc.pid)) and not scenario.settled()
