"""kill -9 of a runner during each job (issue #15).

For each job (`faults.scenarios.SCENARIOS`): seed a round's work, start a real runner
(`python -m crontabber --job NAME --force`, or `--rerun` for the report), wait until it has
forked the job's process, and at a random point of the job's run (uniform over the lifetime
of its process in the shortest of three unkilled runs, measured first) kill -9 the runner and
the job's process group, the runner alone (the job must die with it), or the job's process
group alone (the runner must record the failure), in turn. Then rerun the job until it
succeeds and its work is settled (the same host takes a dead runner's job over at once:
docs/leases.md), and check the job's invariants by brute force (`faults.scenarios`). A kill
that came after the job's process ended is not counted (it is thrown again).
"""

from __future__ import annotations

import collections
import random
import statistics
import time

from faults import harness
from faults.result import FaultResult
from faults.scenarios import SCENARIOS, Scenario

KILLS = 50  # of each job at scale 1.0
LIFETIME_RUNS = 3


def run(scale: float) -> list[FaultResult]:
    rng = random.Random(15)
    count = max(1, round(KILLS * scale))
    return [kill_rounds(kind(rng), count, rng) for kind in SCENARIOS]


def kill_rounds(scenario: Scenario, count: int, rng: random.Random) -> FaultResult:
    start = time.monotonic()
    # unkilled runs: the job's lifetime (the kills' window) and the state rounds start from.
    # The shortest of three: in the 11-23 run the index's first build alone set the window
    # (2.89 s) and 150 of 198 kills came after the job had ended: later builds are shorter.
    lifetimes: list[float] = []
    notes: list[str] = []
    for _ in range(LIFETIME_RUNS):
        scenario.seed()
        lifetimes.append(harness.job_lifetime(scenario.command()))
        baseline = scenario.check()
        if not baseline.clean and not notes:
            notes.append(f"before any kill: {'; '.join(baseline.problems[:3])}")
    window = min(lifetimes)
    thrown = converged = lost = duplicated = missed = orphaned = tracebacks = 0
    reruns: list[int] = []
    modes: collections.Counter[str] = collections.Counter()
    setup = time.monotonic() - start
    rounds: list[float] = []  # seconds per landed kill (its missed rounds included)
    began = time.monotonic()
    while thrown < count and missed < 3 * count:
        scenario.seed()
        mode = harness.KILL_MODES[thrown % len(harness.KILL_MODES)]
        seen: list = []

        def between(seen: list = seen, scenario: Scenario = scenario) -> None:
            seen.append(scenario.during())

        kill = harness.kill_during(
            scenario.command(), mode, rng.uniform(0, 0.8 * window), between=between
        )
        if not kill.landed:
            missed += 1
            ok, _, _ = harness.converge(scenario.command(), scenario.settled)
            scenario.check()
            continue
        thrown += 1
        modes[mode] += 1
        ok, runs, errors = harness.converge(scenario.command(), scenario.settled)
        reruns.append(runs)
        tracebacks += harness.tracebacks(errors)
        check = scenario.check()
        problems = list(check.problems) + [p for c in seen for p in c.problems]
        if kill.orphans:
            orphaned += 1
            problems.append(
                f"{len(kill.orphans)} processes of the job left running after kill -9 ({mode})"
            )
            for pid in kill.orphans:
                _kill(pid)
        lost += check.lost
        duplicated += check.duplicated
        rounds.append(time.monotonic() - began)
        began = time.monotonic()
        if ok and not problems and not check.lost and not check.duplicated:
            converged += 1
        elif len(notes) < 5:
            notes.append(
                f"kill {thrown} ({mode}, {kill.after:.2f} s in): converged={ok}; "
                + "; ".join(problems[:3])
            )
    figures = {
        "job lifetime": (
            f"{window:.2f} s (shortest of " + ", ".join(f"{t:.2f}" for t in lifetimes) + ")"
        ),
        "modes": ", ".join(f"{m} {n}" for m, n in sorted(modes.items())),
        "reruns to converge": (
            f"median {statistics.median(reruns):g}, max {max(reruns)}" if reruns else "-"
        ),
        "kills after the job ended (rethrown)": str(missed),
        "orphaned job processes": str(orphaned),
        "rerun tracebacks": str(tracebacks),
        "seconds": f"{time.monotonic() - start:.0f}",
        "seconds per kill": (
            f"median {statistics.median(rounds):.1f}, mean "
            f"{statistics.mean(rounds):.1f} (+ {setup:.0f} s to seed and time "
            "the unkilled runs)"
            if rounds
            else "-"
        ),
    }
    return FaultResult(
        f"kill -9 during {scenario.app}", thrown, converged, lost, duplicated, figures, notes
    )


def _kill(pid: int) -> None:
    import os
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
