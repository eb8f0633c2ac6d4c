"""The runbook's "A rerun was killed" (docs/operations.md), followed as written on a
``--parallel 2`` rerun killed with -9 on two hosts (issue #42, done when): what ran is read
from ``--history`` alone, the command it prints continues the rerun, and the ledger (read here
only to check what the commands said) agrees. Hosts are host names (a UTS namespace each);
the lease is 3 s for every command (the drill's INI)."""

from __future__ import annotations

import re

from tests.fixtures.reruns import calls, day, group_done, killed_on_two_hosts
from tests.fixtures.waiting import wait_for

JOB = "parallel-backfill"


def history(cli, *args: str, host: str = "cron-b") -> list[str]:
    done = cli.run("--history", JOB, *args, host=host)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def rerun_rows(lines: list[str]) -> dict[int, dict[str, str]]:
    """``--history``'s rows of rerun runs by run id, each cell by its column's name (the
    header's positions: INTERVALS and DETAIL hold spaces)."""
    header = lines[0]
    names = ["BY", "RUN", "KIND", "OUTCOME", "INTERVALS", "DETAIL"]
    starts = [header.index(name) for name in names] + [None]
    rows = {}
    for line in lines[1:]:
        cells = {n: line[a:b].strip() for n, a, b in zip(names, starts, starts[1:])}
        if cells["KIND"] == "rerun":
            rows[int(cells["RUN"])] = cells
    return rows


def count(intervals: str) -> int:
    """How many intervals an INTERVALS cell says: ``-``, one, or ``A..B (N)``."""
    if intervals == "-":
        return 0
    found = re.search(r"\((\d+)\)$", intervals)
    return int(found.group(1)) if found else 1


def test_a_rerun_killed_on_two_hosts_is_read_and_continued_from_history_alone(cli):
    dates, pids = killed_on_two_hosts(cli)

    # 1. --history NAME --limit 5: the rerun's runs, each killed one running with its verdict
    # first, none ok. From cron-b: its own run is dead (its pid is gone there), cron-a's
    # expired once its lease has run out (from cron-b its process cannot be seen)
    def both_judged() -> list[str] | None:
        found = history(cli, "--limit", "5")
        judged = [line for line in found if "dead: heartbeat" in line or "expired: heartb" in line]
        return found if len(judged) == 2 else None

    lines = wait_for(both_judged, timeout=30, what="both killed runs judged from cron-b")
    rows = rerun_rows(lines)
    by_host = {row["BY"].rsplit(":", 1)[0]: row for row in rows.values()}
    assert sorted(by_host) == ["cron-a", "cron-b"], lines
    assert {row["OUTCOME"] for row in rows.values()} == {"running"}, lines
    assert by_host["cron-b"]["DETAIL"].startswith("dead: heartbeat"), lines
    assert by_host["cron-a"]["DETAIL"].startswith("expired: heartb"), lines
    shown = {run_id: count(row["INTERVALS"]) for run_id, row in rows.items()}

    # 2. --history NAME --run RUN, any run of it: the rerun whole, and the command that goes on
    joined = max(rows)
    whole = history(cli, "--run", str(joined))
    at = next(n for n, line in enumerate(whole) if line.startswith("rerun "))
    head = re.fullmatch(
        rf"rerun (\d+) of {JOB}: stopped: (\d+) of 6 interval\(s\) done, up to 2 at once",
        whole[at],
    )
    assert head is not None, whole
    root, done_before = int(head.group(1)), int(head.group(2))
    assert root == min(rows) and done_before == sum(shown.values()) >= 1
    assert whole[at + 1].startswith(f"  run {root} (first run) on cron-a:{pids['cron-a']}: ")
    assert whole[at + 2].startswith(f"  run {joined} (joined) on cron-b:{pids['cron-b']}: ")
    left = re.fullmatch(r"  left: (\d+) interval\(s\); (--rerun .+) continues it", whole[at + 3])
    assert left is not None and int(left.group(1)) == 6 - done_before, whole
    command = left.group(2).split()
    # what --history said is what ran: the intervals the ledger has done, each by one run
    truth = group_done(cli, root)
    assert len(truth) == done_before

    # 3. the command printed, looked at first, then run (from cron-b: the lease has run out)
    dry = cli.run(*command, "--dry-run", host="cron-b")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("skipped: done by run ") == done_before, dry.stdout
    resumed = cli.run(*command, "--reason", "cron-a and cron-b were rebooted", host="cron-b")
    assert resumed.returncode == 0, resumed.stderr
    # the runbook ("Backfill a week"): each interval logged on stderr as it is done, the stdout
    # lines, one per interval it ran, when its part ends
    logged = [
        line
        for line in resumed.stderr.splitlines()
        if f"INFO crontabber.supervisor - {JOB} succeeded for " in line
    ]
    assert len(logged) == 6 - done_before, resumed.stderr
    assert resumed.stdout.count(" 03:00 UTC: ") == 6 - done_before, resumed.stdout
    after = history(cli, "--limit", "5")
    rows = rerun_rows(after)
    assert rows[root]["OUTCOME"] == rows[joined]["OUTCOME"] == "abandoned", after
    (new,) = [run_id for run_id in rows if run_id > joined]
    assert rows[new]["OUTCOME"] == "ok" and count(rows[new]["INTERVALS"]) == 6 - done_before
    whole = history(cli, "--run", str(root))
    assert f"rerun {root} of {JOB}: done: 6 of 6 interval(s) done, up to 2 at once" in whole
    assert group_done(cli, root) == dates  # every interval done, none left
    assert sorted(day(c["day"]) for c in calls(cli) if c["finished_at"]) == [
        day(d) for d in dates
    ]  # each once (the killed ones' cut intervals never finished)
