"""The runner at fleet scale (issue #45 item 5): M no-op jobs due at once, H runners started
together, directly and through PgBouncer.

Each scenario (M jobs x H hosts x path x mode) has its own database, a copy of a template
holding the runner's schema, with M hourly no-op jobs (:mod:`bench.fleet_jobs`) whose state
rows say they ran an hour ago. A round makes every job due (``next_run`` set to the
database's ``now()`` by hand, as the issue's figures were taken), starts H runners at once
(cron ticks: ``python -m crontabber --admin.conf=INI``, each in a UTS namespace with a host
name of its own), waits for them, then starts H idle ticks (nothing is due any more).
Measured per round:

- executions/s of the fleet (runs / first start to last exit) and per host (the median
  over the hosts of a host's runs / its own wall time, interpreter start included);
- transactions per execution and per idle pass (directly ``pg_stat_database``, through
  PgBouncer its ``SHOW STATS``), queries (PgBouncer's, pooled path only) and rows read
  (PostgreSQL's, direct path only) per execution and per idle pass: how they are counted is
  in :mod:`bench.fleet`; the busy figures include the H ticks' own statements;
- lateness of a due job: its run's ``started`` in the ledger minus the instant it fell due
  (p99 of the round's runs);
- runs twice (a job with two ledger runs in one round), jobs not run, runs not succeeded,
  runner exits other than 0: all must be 0.

Beside it, measured in the same run and interleaved with the rounds: the machine's limit on
runs as processes (forks + exits of a no-op child of a process that has imported the
runner, per second), and the floor of what a run must write (every job claimed and ended by
two statements in two transactions over one connection of the scenario's path). The 1-minute
load average is recorded at the start and end of each scenario (the machine is shared).

``--serve`` runners (issue #45 item 2) are measured only when the runner's ``--help`` has
that mode, otherwise the results say "not available": per round H of them are started with
``tick_seconds=1`` in their INI, serve idle for ``--idle-seconds``, then every job falls due
and the round ends when each has run; SIGTERM stops them. Idle passes are counted as the
window over ``tick_seconds`` per runner (an estimate), and the busy span's counts have the
idle passes it held taken out at the idle rate. Until the mode exists this path is unproven
against it: a serving runner that exits by itself is reported ("runner died", its last
line), never taken for a result.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .fleet import (
    PATHS,
    TICK_SECONDS,
    FleetDatabase,
    Servers,
    drop_database,
    fork_rate,
    load_average,
    make_template,
    serve_available,
)
from .harness import Comparison, Report, Sample

ROUNDS = 3
JOBS = (10, 100, 1000)
HOSTS = (1, 4, 8)
MODES = ("cron", "serve")
BIG = 1000  # scenarios with this many jobs or more take --big-rounds rounds (default 1: long)


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        message = f"not a comma-separated list of numbers: {text!r}"
        raise argparse.ArgumentTypeError(message) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"numbers of at least 1 expected: {text!r}")
    return values


def _names(allowed: tuple[str, ...]):
    def parse(text: str) -> tuple[str, ...]:
        values = tuple(text.split(","))
        unknown = [value for value in values if value not in allowed]
        if unknown:
            message = f"{', '.join(unknown)}: not one of {', '.join(allowed)}"
            raise argparse.ArgumentTypeError(message)
        return values

    return parse


def options(argv: list[str]) -> argparse.Namespace:
    """This bench's own options (``python -m bench fleet --jobs 10,100 --hosts 1,4``)."""
    parser = argparse.ArgumentParser(prog="python -m bench fleet")
    add = parser.add_argument
    add("--jobs", type=_ints, default=JOBS, help="M: no-op jobs due at once (default 10,100,1000)")
    add("--hosts", type=_ints, default=HOSTS, help="H: runners started together (default 1,4,8)")
    add("--paths", type=_names(PATHS), default=PATHS, help="direct,pgbouncer (default both)")
    add("--modes", type=_names(MODES), default=MODES, help="cron,serve (default both)")
    add("--big-rounds", type=int, default=1, help=f"rounds of scenarios of {BIG}+ jobs (1)")
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=10.0,
        help="--serve: seconds of serving with nothing due, per round",
    )
    add("--skip", default="", help="MxH scenarios left out, comma-separated (1000x8)")
    return parser.parse_args(argv)


@dataclass
class Rounds:
    """One scenario's measurements, one value per round (lists) or summed over them."""

    fleet_rate: list[float] = field(default_factory=list)
    host_rate: list[float] = field(default_factory=list)
    xacts_per_run: list[float] = field(default_factory=list)
    rows_per_run: list[float] = field(default_factory=list)  # direct path: pg_stat_database
    idle_rows: list[float] = field(default_factory=list)
    queries_per_run: list[float] = field(default_factory=list)
    idle_xacts: list[float] = field(default_factory=list)
    idle_queries: list[float] = field(default_factory=list)
    idle_seconds: list[float] = field(default_factory=list)
    p99_late: list[float] = field(default_factory=list)
    floor_rate: list[float] = field(default_factory=list)
    floor_xacts: list[float] = field(default_factory=list)
    floor_queries: list[float] = field(default_factory=list)
    twice: int = 0
    not_run: int = 0
    not_succeeded: int = 0
    bad_exits: int = 0
    load: list[str] = field(default_factory=list)
    died: list[str] = field(default_factory=list)  # serving runners that exited by themselves


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def cron_round(db: FleetDatabase, hosts: int, tag: str, into: Rounds) -> None:
    """One round of cron ticks on ``db``: H busy ticks over every job due, H idle ticks,
    then the floor of the same runs."""
    db.vacuum()
    before_id = db.last_run_id()
    start = db.counts()
    due = db.make_due()  # just before the runners start: lateness is theirs alone
    ticks = db.ticks(hosts, tag)
    after = db.counts()
    idle = db.ticks(hosts, tag)
    busy, idle_counts = after - start - db.own, db.counts() - after
    runs = db.runs_since(before_id)
    per_job = Counter(app for app, _, _, _ in runs)
    into.twice += sum(n - 1 for n in per_job.values())
    into.not_run += db.jobs - len(per_job)
    into.not_succeeded += sum(status != "succeeded" for _, _, status, _ in runs)
    into.bad_exits += sum(t.code != 0 for t in ticks + idle)
    by_host = Counter(host for _, host, _, _ in runs)
    into.fleet_rate.append(len(runs) / (max(t.end for t in ticks) - min(t.start for t in ticks)))
    into.host_rate.append(statistics.median(by_host[t.host] / t.seconds for t in ticks))
    into.xacts_per_run.append(busy.transactions / max(1, len(runs)))
    if busy.rows is not None and idle_counts.rows is not None:
        into.rows_per_run.append(busy.rows / max(1, len(runs)))
        into.idle_rows.append(idle_counts.rows / hosts)
    into.idle_xacts.append(idle_counts.transactions / hosts)
    into.idle_seconds.append(statistics.median(t.seconds for t in idle))
    into.p99_late.append(p99([(started - due).total_seconds() for _, _, _, started in runs]))
    if busy.queries is not None and idle_counts.queries is not None:
        into.queries_per_run.append(busy.queries / max(1, len(runs)))
        into.idle_queries.append(idle_counts.queries / hosts)
    rate, floor = db.floor()
    into.floor_rate.append(rate)
    into.floor_xacts.append(floor.transactions / db.jobs)
    if floor.queries is not None:
        into.floor_queries.append(floor.queries / db.jobs)


def serve_round(
    db: FleetDatabase,
    hosts: int,
    tag: str,
    workdir: Path,
    idle_seconds: float,
    into: Rounds,
) -> None:
    """One round of ``hosts`` serving runners started on ``db``: an idle window, then every
    job due at once until each has run (or a timeout), then SIGTERM. Idle passes are counted
    as the window over ``tick_seconds`` per runner; the busy span's count has the idle passes
    it held taken out at that rate."""
    servers = Servers(db, hosts, tag, workdir)
    try:
        _serve(db, servers, idle_seconds, into)
    finally:
        into.died += servers.died()  # before the stop: those that exited by themselves
        into.bad_exits += sum(code != 0 for code in servers.stop())


def _serve(db: FleetDatabase, servers: Servers, idle_seconds: float, into: Rounds) -> None:
    hosts = len(servers.hosts)
    db.vacuum()
    time.sleep(2 * TICK_SECONDS)  # every runner up and past its first pass
    start, t0 = db.counts(serving=True), time.perf_counter()
    time.sleep(idle_seconds)
    after_idle, t1 = db.counts(serving=True), time.perf_counter()
    passes = hosts * (t1 - t0) / TICK_SECONDS
    idle = after_idle - start
    into.idle_xacts.append(idle.transactions / passes)
    before_id = db.last_run_id()
    busy_start, t2 = db.counts(serving=True), time.perf_counter()
    due = db.make_due()
    deadline = time.monotonic() + 60 + db.jobs
    while (ended := db.ended_runs(before_id))[0] < db.jobs and time.monotonic() < deadline:
        if servers.died():
            break
        time.sleep(0.1)
    busy, t3 = db.counts(serving=True) - busy_start - db.own, time.perf_counter()
    busy_passes = hosts * (t3 - t2) / TICK_SECONDS
    runs = db.runs_since(before_id)
    per_job = Counter(app for app, _, _, _ in runs)
    into.twice += sum(n - 1 for n in per_job.values())
    into.not_run += db.jobs - len(per_job)
    into.not_succeeded += sum(status != "succeeded" for _, _, status, _ in runs)
    if not runs or ended[1] is None:
        return
    span = (ended[1] - due).total_seconds()
    by_host = Counter(host for _, host, _, _ in runs)
    into.fleet_rate.append(len(runs) / span)
    into.host_rate.append(statistics.median(by_host[host] / span for host in servers.hosts))
    idle_share = busy_passes / passes  # of the idle window's counts, in the busy span
    into.xacts_per_run.append((busy.transactions - idle_share * idle.transactions) / len(runs))
    into.p99_late.append(p99([(started - due).total_seconds() for _, _, _, started in runs]))
    if busy.queries is not None and idle.queries is not None:
        into.idle_queries.append(idle.queries / passes)
        into.queries_per_run.append((busy.queries - idle_share * idle.queries) / len(runs))
    if busy.rows is not None and idle.rows is not None:
        into.idle_rows.append(idle.rows / passes)
        into.rows_per_run.append((busy.rows - idle_share * idle.rows) / len(runs))


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _spread(values: list[float]) -> str:
    """``median (min-max)``, or the one value, or ``-`` for none."""
    if not values:
        return "-"
    if len(values) == 1:
        return _number(values[0])
    return f"{_number(statistics.median(values))} ({_number(min(values))}-{_number(max(values))})"


@dataclass
class Scenario:
    jobs: int
    hosts: int
    path: str
    mode: str
    rounds: Rounds = field(default_factory=Rounds)
    forks: list[float] = field(default_factory=list)  # the machine's limit, same rounds

    @property
    def name(self) -> str:
        runner = "cron ticks" if self.mode == "cron" else "--serve runners"
        return f"M={self.jobs:,} H={self.hosts} {self.path}, {runner}"

    def row(self) -> str:
        r = self.rounds
        checks = f"{r.twice} / {r.not_run} / {r.not_succeeded} / {r.bad_exits}"
        return (
            f"| {self.jobs:,} | {self.hosts} | {self.path} | {self.mode} | {len(r.fleet_rate)} | "
            f"{_spread(r.fleet_rate)} | {_spread(r.host_rate)} | {_spread(r.xacts_per_run)} | "
            f"{_spread(r.queries_per_run)} | {_spread(r.rows_per_run)} | {_spread(r.idle_xacts)} | "
            f"{_spread(r.idle_queries)} | {_spread(r.idle_rows)} | "
            f"{_spread(r.idle_seconds)} | {_spread(r.p99_late)} | {checks} | "
            f"{_spread(r.floor_rate)} | "
            f"{_spread(r.floor_xacts)} | {_spread(r.floor_queries)} | {_spread(self.forks)} | "
            f"{' '.join(r.load)} |"
        )


HEADER = [
    "| M jobs | H runners | path | mode | rounds | fleet runs/s | runs/s per host "
    "| PG transactions per run | queries per run | rows read per run "
    "| idle pass: PG transactions | idle pass: queries | idle pass: rows read | idle tick (s) "
    "| p99 lateness (s) | twice / not run / failed / exit != 0 "
    "| floor runs/s | floor transactions per run | floor queries per run | fork+exit/s "
    "| load average at each scenario's start, end |",
    "|" + "---|" * 21,
]
LEGEND = (
    "Medians over the rounds (min-max). Runs/s per host: the median host's runs over its own "
    "wall time (interpreter start included). PG transactions: directly, pg_stat_database "
    "xact_commit + xact_rollback of the scenario's own database (every client backend ended "
    "before each reading, so each has sent its counts; a connection's login counts one); "
    "through PgBouncer, its SHOW STATS total_xact_count (its pooled server connections stay "
    "open, as in production, so no login is counted). Queries: PgBouncer's total_query_count "
    "(query messages: a string of several statements counts once; BEGIN and COMMIT count), so "
    "only on the pgbouncer path (pg_stat_statements is not loaded on the shared server, which "
    "is not restarted for a benchmark). Rows read: pg_stat_database tup_returned (catalog "
    "reads of each login included), direct path only. A busy round's counts include the H "
    "ticks' own statements; the bench's own statement that makes the jobs due is taken out. "
    "Idle pass: one tick with nothing due. Lateness: a run's ledger start minus the instant "
    "its job fell due (next_run set to now() by hand just before the runners start, so it "
    "includes their start-up). Floor: every job claimed and ended by the two statements a "
    "run must write (claim + ledger start; end + state + ledger + log), over one connection of "
    "the path, serial. fork+exit/s: a process that imported the runner forks and reaps no-op "
    "children, interleaved with the rounds. The scenario databases run without autovacuum "
    "(its transactions and reads would land in the counts at random): each round VACUUM "
    "ANALYZEs the runner's tables outside the counted spans."
)


def run_scenarios(
    opts: argparse.Namespace,
    rounds: int,
    workdir: Path,
    serve: bool,
) -> list[Scenario]:
    """Every scenario of ``opts`` (the serve ones only when ``serve``): for each M x H, its
    paths and modes interleaved round by round, the fork limit measured between them."""
    template = make_template(f"bench_fleet_{os.getpid()}_template")
    skip = {part.strip() for part in opts.skip.split(",") if part.strip()}
    modes = tuple(mode for mode in opts.modes if mode == "cron" or serve)
    done: list[Scenario] = []
    try:
        for jobs in opts.jobs:
            for hosts in opts.hosts:
                if f"{jobs}x{hosts}" in skip or not modes:
                    continue
                count = opts.big_rounds if jobs >= BIG else rounds
                done += _interleaved(jobs, hosts, opts, modes, count, template, workdir)
    finally:
        drop_database(template)
    return done


def _database(
    key: tuple[str, str],
    prefix: str,
    template: str,
    jobs: int,
    work: Path,
) -> FleetDatabase:
    mode, path = key
    return FleetDatabase(f"{prefix}_{path}_{mode}", template, jobs, path, work)


def _interleaved(
    jobs: int,
    hosts: int,
    opts: argparse.Namespace,
    modes: tuple[str, ...],
    rounds: int,
    template: str,
    workdir: Path,
) -> list[Scenario]:
    keys = [(mode, path) for mode in modes for path in opts.paths]
    scenarios = {key: Scenario(jobs, hosts, key[1], key[0]) for key in keys}
    prefix = f"bench_fleet_{os.getpid()}_{jobs}_{hosts}"
    dbs = {key: _database(key, prefix, template, jobs, workdir) for key in keys}
    forks: list[float] = []
    tag = f"{jobs}-{hosts}"
    try:
        for db in dbs.values():
            db.ticks(hosts, "warm")  # the INI's parse cached, PgBouncer's pool opened
        for scenario in scenarios.values():
            scenario.rounds.load.append(load_average())
        for index in range(rounds):
            if index % 2 == 0:
                forks.append(fork_rate())
            for key in keys if index % 2 == 0 else reversed(keys):
                if key[0] == "serve":
                    idle = opts.idle_seconds
                    serve_round(dbs[key], hosts, tag, workdir, idle, scenarios[key].rounds)
                else:
                    cron_round(dbs[key], hosts, tag, scenarios[key].rounds)
            if index % 2 == 1:
                forks.append(fork_rate())
        for scenario in scenarios.values():
            scenario.rounds.load.append(load_average())
            scenario.forks = forks
            print(f"   {scenario.row()}", file=sys.stderr, flush=True)  # a long run's progress
    finally:
        for db in dbs.values():
            db.drop()
    return list(scenarios.values())


def _notes(serve: str) -> list[str]:
    return [
        "the machine limit (baseline) is forks + exits of a no-op child per second from a "
        "process that imported the runner, measured between the rounds; the ratio is the share "
        "of it the fleet reaches. Every figure of each scenario is in the fleet table below.",
        f"--serve runners: {serve}",
    ]


def run(rounds: int, opts: argparse.Namespace | None = None) -> Report:
    opts = opts or options([])
    available = serve_available()
    if "serve" not in opts.modes:
        serve = "not asked for (--modes)"
    elif available:
        serve = f"measured (python -m crontabber --serve, tick_seconds={TICK_SECONDS:g})"
    else:
        serve = "not available (python -m crontabber --help has no --serve)"
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as workdir:
        scenarios = run_scenarios(opts, rounds, Path(workdir), available)
    comparisons = [
        Comparison(
            s.name,
            "fleet executions",
            "runs/s",
            Sample("ours", s.rounds.fleet_rate),
            Sample("fork+exit of a no-op child", s.forks),
            higher_is_better=True,
            notes=_notes(serve) if index == 0 else [],
        )
        for index, s in enumerate(scenarios)
    ]
    table = [*HEADER, *(s.row() for s in scenarios), "", LEGEND, "", f"`--serve` runners: {serve}."]
    table += [f"- {s.name}: runner died: {line}" for s in scenarios for line in s.rounds.died]
    data = {"serve": serve, "scenarios": [dataclasses.asdict(s) for s in scenarios]}
    return Report(comparisons, table, data)
