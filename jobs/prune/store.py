"""The prune job's SQL (sql/jobs/prune.sql): run records, and the upload and batch
tables that say which inbox objects are finished with."""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass, field
from typing import Any

from crontabber import sqlfiles
from crontabber.errors import JobOngoing, LeaseLost
from jobs import SQL_DIR

Q = sqlfiles.load("prune.sql", SQL_DIR)


class PruneLeaseLost(LeaseLost):
    """A run's lease on its ``prune_run`` row passed before it could renew it (the database
    did not hear from it for a whole lease): another run may already take it for dead and
    reconcile its batches, so it stops before sending another one, and writes nothing more of
    what it deleted (the reconciling run counts that, from its intents). Exit 4, as a run
    fenced off."""

    def __init__(self, run_id: int, lease_seconds: float) -> None:
        self.lease_seconds = lease_seconds
        super().__init__(
            "prune-s3",
            run_id,
            f"prune run {run_id} lost its lease (not renewed within {lease_seconds:g} s); stopped "
            "before deleting more",
        )


@dataclass(frozen=True)
class Intent:
    """A batch about to be sent to ``delete_objects``: the bucket and its ``(key, size)``."""

    bucket: str
    batch: list[tuple[str, int]]


@dataclass
class Settled:
    """Batches S3 answered since the last write, summed: their intents (none in a dry run)
    and what they deleted. Empty (false) when there is nothing to write."""

    intents: list[int] = field(default_factory=list)
    keys: int = 0
    bytes: int = 0
    errors: int = 0
    error_sample: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.intents or self.keys or self.bytes or self.errors)


class PruneRunLive(JobOngoing):
    """Another prune run is still live (its lease not passed): a second one would list the
    keys of its batches in flight, delete them again and count them twice. Exit 3, as a job
    running elsewhere; a killed run stops being live ``lease_seconds`` after its last
    renewal, and the next run then reconciles it."""

    def __init__(self, run_id: int, since: dt.datetime, holder: str) -> None:
        self.run_id = run_id
        super().__init__("prune-s3", since, f"{holder} (prune run {run_id}, lease live)")


class PruneStore:
    """One connection, one short transaction per call (``with self._conn``); calls from two
    threads (a run and its lease's heartbeat) take turns, never share a transaction.

    No session state: a run's hold on its row is a lease (``lease_until``), so the store
    works through a transaction pooler. ``lease_seconds`` is the lease every call that
    takes or renews one gives."""

    def __init__(self, connection: Any, lease_seconds: float = 60.0) -> None:
        self._conn = connection
        self.lease_seconds = lease_seconds
        self._turn = threading.Lock()

    def _run(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        with self._turn, self._conn, self._conn.cursor() as cur:
            cur.execute(Q[name], params)
            return cur.fetchall() if cur.description else []

    def start_run(self, dry_run: bool, cap: int, holder: str) -> int:
        """A new run's id, holding a lease of ``lease_seconds``: until it passes unrenewed
        (:meth:`renew`) or the run ends, the run may have deletions in flight, so its intents
        are not reconciled.

        Raises:
            PruneRunLive: another run is still live (runs never overlap: the check and the
                insert are one transaction, under a transaction-scoped lock).
        """
        with self._turn, self._conn, self._conn.cursor() as cur:
            cur.execute(Q["start_lock"])
            cur.execute(Q["live_runs"])
            live = cur.fetchone()
            if live is not None:
                raise PruneRunLive(live[0], live[1], live[2])
            cur.execute(
                Q["start_run"],
                {"dry_run": dry_run, "cap": cap, "holder": holder, "lease": self.lease_seconds},
            )
            return int(cur.fetchone()[0])

    def renew(self, run_id: int) -> bool:
        """Move the run's lease on; False if it had already passed (it is lost for good)."""
        return bool(self._run("renew", {"run_id": run_id, "lease": self.lease_seconds}))

    def run_over(self, run_id: int) -> bool:
        """Whether run ``run_id`` can have nothing in flight: it ended, or its lease passed
        (a dead process), or, started by the release before 0015, its session is gone."""
        return bool(self._run("run_over", {"run_id": run_id})[0][0])

    def add_rule(self, run_id: int, rule: str) -> None:
        self._run("add_rule", {"run_id": run_id, "rule": rule})

    def record(self, run_id: int, rule: str, settled: Settled, intent: Intent | None) -> int | None:
        """In one transaction: count the batches S3 answered (``settled``: their intents go,
        their counts are added to the rule's; ``error_sample``, if any, replaces the stored
        one), then, if ``intent``, write the next batch's keys and sizes before it is sent;
        that intent's id. The transaction first renews the run's lease, so the batch is sent
        with a whole lease ahead of it, and nothing is written by a run whose lease passed:
        another run may have reconciled its intents already (counting them again would count
        twice).

        Raises:
            PruneLeaseLost: the run's lease had passed: nothing is written (the batch must not
                be sent; what was settled is counted by the run that reconciles the intents).
        """
        with self._turn, self._conn, self._conn.cursor() as cur:
            cur.execute(Q["renew"], {"run_id": run_id, "lease": self.lease_seconds})
            if cur.fetchone() is None:
                raise PruneLeaseLost(run_id, self.lease_seconds)  # rolls the transaction back
            if settled:
                cur.execute(
                    Q["settle"],
                    {
                        "run_id": run_id,
                        "rule": rule,
                        "intents": settled.intents,
                        "keys": settled.keys,
                        "bytes": settled.bytes,
                        "errors": settled.errors,
                        "error_sample": "\n".join(settled.error_sample[:5]) or None,
                    },
                )
            if intent is None:
                return None
            # one array literal each: 1,000 keys as a Python list (ARRAY['..', ...]) cost
            # ~11 ms a batch to send and parse, as a literal ~3 ms
            cur.execute(
                Q["intend"],
                {
                    "run_id": run_id,
                    "rule": rule,
                    "bucket": intent.bucket,
                    "keys": _text_array([key for key, _ in intent.batch]),
                    "sizes": "{" + ",".join(str(size) for _, size in intent.batch) + "}",
                },
            )
            return int(cur.fetchone()[0])

    def unsettled_runs(self, run_id: int) -> list[int]:
        """Runs other than ``run_id`` with intents never settled (dead, or still running)."""
        return [row[0] for row in self._run("unsettled_runs", {"run_id": run_id})]

    def intents(self, run_id: int) -> list[tuple[int, str, str, list[str], list[int]]]:
        """The run's unsettled intents: ``(id, rule, bucket, keys, sizes)``."""
        return [
            (row[0], row[1], row[2], list(row[3]), [int(s) for s in row[4]])
            for row in self._run("intents", {"run_id": run_id})
        ]

    def reconcile_intent(self, intent_id: int, keys: int, size: int) -> None:
        """A dead run's intent checked against S3: ``keys`` of it (``size`` bytes) were gone,
        so its run deleted them; add them to the run's rule, drop the intent."""
        self._run("reconcile_intent", {"id": intent_id, "keys": keys, "bytes": size})

    def rule_inventory(self, run_id: int, rule: str, inventory: str) -> None:
        """Rule ``rule`` of the run deletes by the inventory report ``inventory`` (an
        ``s3://`` address of its manifest)."""
        self._run("rule_inventory", {"run_id": run_id, "rule": rule, "inventory": inventory})

    def finish_run(self, run_id: int, capped: bool) -> None:
        self._run("finish_run", {"run_id": run_id, "capped": capped})

    def fail_run(self, run_id: int, error: str) -> None:
        """The run ended with ``error`` (one line)."""
        self._run("fail_run", {"run_id": run_id, "error": error})

    def finished_uploads(self, keys: list[str], cutoff: dt.datetime) -> set[str]:
        return {row[0] for row in self._run("finished_uploads", {"keys": keys, "cutoff": cutoff})}

    def consumed_batches(self, keys: list[str], cutoff: dt.datetime) -> set[str]:
        return {row[0] for row in self._run("consumed_batches", {"keys": keys, "cutoff": cutoff})}

    def history(self, limit: int) -> list[dict[str, Any]]:
        names = (
            "id",
            "started_at",
            "finished_at",
            "dry_run",
            "cap",
            "capped",
            "holder",
            "error",
            "rule",
            "keys_deleted",
            "bytes_freed",
            "errors",
            "error_sample",
            "inventory",
            "running",
        )
        return [dict(zip(names, row)) for row in self._run("history", {"limit": limit})]


def _text_array(items: list[str]) -> str:
    """PostgreSQL's literal of a ``text[]`` holding ``items`` (any characters: each element is
    double-quoted, with ``\\`` and ``"`` escaped)."""
    return (
        "{"
        + ",".join('"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"' for item in items)
        + "}"
    )
