"""One prune run: its rules applied in order within a cap, recorded as it goes, reported.

:func:`run_prune` is the whole logic of a run; the cron job (``PruneS3CronApp``) and
``python -m jobs.prune run`` only build its :class:`PruneOptions` and a client. What a run
did is counted in one place, :meth:`RuleResult.add` (:mod:`.engine`), once per batch;
everything that follows a run (its record in ``prune_run``/``prune_rule_result``, a
progress bar) is a :class:`Listener` told about each rule and batch through named hooks,
as dramatiq's middleware is.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as dt
import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from crontabber.config.options import DotDict
from crontabber.errors import ConfigurationError
from crontabber.failures import first_line
from jobs.s3 import is_not_found

from .engine import Batch, Budget, Check, ListSource, RuleResult, Scope, Source, deleted_batches
from .inventory import InventoryLocation, InventorySource, Manifest
from .rules import Kind, Protection, Rule, parse_extra_rules
from .store import Intent, PruneStore, Settled

logger = logging.getLogger(__name__)

#: Seconds after which what was deleted is written even if no next batch's intent carries it.
PROGRESS_SECONDS = 1.0
#: A run's lease is renewed this many times per lease by its heartbeat.
RENEWALS_PER_LEASE = 4


#: Where a run's keys come from (the ``source`` option).
SOURCES = ("list", "inventory")


@dataclass(frozen=True)
class PruneOptions:
    """What a run applies: its rules (in order), the protected symbol files, the cap on
    deletions, whether it only reports, the threads deleting, the seconds of its lease
    (how long after a dead run's last renewal the next run reconciles its batches), the
    keys a rule may delete a second (0: no limit), and where the keys come from: listing
    each rule's prefix, or (``inventory`` set) the newest S3 Inventory report of its bucket."""

    rules: list[Rule]
    protection: Protection
    cap: int
    dry_run: bool
    threads: int
    lease_seconds: float = 60.0
    rate: float = 0.0
    inventory: InventoryLocation | None = None

    @classmethod
    def from_config(cls, config: DotDict) -> PruneOptions:
        """The options of a ``PruneS3CronApp`` config: the enabled rules, built-in first.

        Raises:
            ConfigurationError: a bad ``extra_rules`` line.
        """
        rules = [
            Rule(
                "uploads",
                Kind.UPLOADS,
                config.inbox_bucket,
                config.uploads_prefix,
                config.upload_days,
            ),
            Rule(
                "batches",
                Kind.BATCHES,
                config.inbox_bucket,
                config.missing_prefix,
                config.batch_days,
            ),
            Rule(
                "reports",
                Kind.AGE,
                config.symbols_bucket,
                config.reports_prefix,
                config.report_days,
            ),
            *parse_extra_rules(config.extra_rules),
        ]
        lease = float(config.lease_seconds)
        if lease <= 0:
            raise ConfigurationError("prune-s3.lease_seconds", f"must be positive, not {lease:g}")
        rate = float(config.deletes_per_second)
        if rate < 0:
            raise ConfigurationError(
                "prune-s3.deletes_per_second", f"must be 0 (no limit) or positive, not {rate:g}"
            )
        return cls(
            [rule for rule in rules if rule.max_age_days > 0],
            Protection(config.symbols_bucket, config.symbols_prefix),
            int(config.cap),
            bool(config.dry_run),
            int(config.threads),
            lease,
            rate,
            _inventory(config),
        )


def _inventory(config: DotDict) -> InventoryLocation | None:
    """Where the inventory reports are, with ``source=inventory``; None with ``list``.

    Raises:
        ConfigurationError: another source, no ``inventory_bucket``, a bad maximum age.
    """
    source = str(config.source).strip().lower()
    if source not in SOURCES:
        raise ConfigurationError("prune-s3.source", f"{source!r}: expected list or inventory")
    if source == "list":
        return None
    if not config.inventory_bucket:
        raise ConfigurationError(
            "prune-s3.inventory_bucket", "source=inventory needs the bucket S3 Inventory writes to"
        )
    hours = float(config.inventory_max_age_hours)
    if hours <= 0:
        raise ConfigurationError(
            "prune-s3.inventory_max_age_hours", f"must be positive, not {hours:g}"
        )
    return InventoryLocation(
        config.inventory_bucket,
        config.inventory_prefix,
        config.inventory_id,
        dt.timedelta(hours=hours),
    )


@dataclass(frozen=True)
class PruneReport:
    """What a run did (or, dry, would do), per rule; ``capped``: it stopped at ``cap``."""

    run_id: int
    dry_run: bool
    results: list[RuleResult]
    capped: bool
    cap: int


class Listener:
    """Hooks a run calls as it goes; each does nothing unless overridden. Called on the
    run's own thread, in order: ``rule_started``, ``batch_done`` after each batch deleted
    (or, dry, selected), ``rule_ended`` (also when the rule failed: the result holds
    what was done before)."""

    def rule_started(self, rule: Rule) -> None:
        """The run starts applying ``rule``."""

    def batch_done(self, result: RuleResult, batch: Batch) -> None:
        """``batch`` was deleted; ``result`` already counts it."""

    def rule_ended(self, result: RuleResult) -> None:
        """The rule is over (done, capped or failed)."""


@dataclass
class RunRecorder(Listener):
    """Writes a rule's record so that it always equals what was deleted, a killed run's too.

    Before each batch is sent to ``delete_objects`` (:meth:`intend`), its keys and sizes are
    written (``prune_intent``); a batch S3 answered is counted and its intent deleted in one
    transaction. To keep one commit per batch, those counts ride with the next batch's intent
    (or are written on their own after ``interval`` seconds without one, and at the rule's
    end). A run killed in between leaves intents, which the next run reconciles against S3
    (:func:`reconcile`). The errors sampled are those of each write's stretch (up to 5)."""

    store: PruneStore
    run_id: int
    interval: float = PROGRESS_SECONDS
    clock: Callable[[], float] = time.monotonic
    _rule: Rule | None = None
    _settled: Settled = field(default_factory=Settled)
    _last: float = float("-inf")

    def rule_started(self, rule: Rule) -> None:
        self.store.add_rule(self.run_id, rule.name)
        self._rule, self._settled, self._last = rule, Settled(), float("-inf")

    def intend(self, batch: list[tuple[str, int]]) -> int | None:
        """Record ``batch`` (and what was settled since the last write) before it is sent."""
        assert self._rule is not None, "intend() outside a rule"
        return self._write(Intent(self._rule.bucket, batch))

    def batch_done(self, result: RuleResult, batch: Batch) -> None:
        settled = self._settled
        if batch.intent is not None:
            settled.intents.append(batch.intent)
        settled.keys += batch.keys
        settled.bytes += batch.size
        settled.errors += len(batch.errors)
        settled.error_sample = (settled.error_sample + batch.errors)[:5]
        if self.clock() - self._last >= self.interval:
            self._write(None)

    def rule_ended(self, result: RuleResult) -> None:
        self._write(None)

    def _write(self, intent: Intent | None) -> int | None:
        assert self._rule is not None
        intent_id = self.store.record(self.run_id, self._rule.name, self._settled, intent)
        self._settled, self._last = Settled(), self.clock()
        return intent_id


class Heartbeat:
    """Renews a run's lease from a thread of its own, ``RENEWALS_PER_LEASE`` times a lease,
    while the run lives (``with Heartbeat(store, run_id):``). A renewal the database refuses
    or cannot take is logged; the run learns of a lost lease at its next batch's intent
    (:meth:`PruneStore.record`), which is the fence: no batch is sent without one."""

    def __init__(self, store: PruneStore, run_id: int) -> None:
        self._store, self._run_id = store, run_id
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name=f"prune-lease-{run_id}", daemon=True
        )

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self._store.lease_seconds / RENEWALS_PER_LEASE):
            try:
                if not self._store.renew(self._run_id):
                    logger.error(
                        "prune: run %d lost its lease; it stops at its next batch", self._run_id
                    )
                    return
            except Exception as exc:  # the database away for a moment: the next beat retries
                logger.warning(
                    "prune: run %d: could not renew its lease: %s", self._run_id, first_line(exc)
                )


def reconcile(client: Any, store: PruneStore, run_id: int, threads: int) -> None:
    """Settle what dead runs left: each intent of a run that is over (it ended, or its lease
    passed) is checked key by key (``head_object``); the keys gone were deleted by that run
    and are added to its rule's record, the others were not and are dropped with the intent
    (one statement each, which counts an intent once even if two runs reconcile it at once).
    The dead run stays as it was otherwise (unfinished, or failed). A run still going is left
    alone.

    Raises:
        whatever S3 answers other than 404 (the intent stays for the next run).
    """
    for dead in store.unsettled_runs(run_id):
        if not store.run_over(dead):
            continue  # still running somewhere: its batches may be in flight
        for intent_id, rule, bucket, keys, sizes in store.intents(dead):
            gone = _gone(client, bucket, keys, threads)
            count, size = sum(gone), sum(s for s, g in zip(sizes, gone) if g)
            store.reconcile_intent(intent_id, count, size)
            logger.warning(
                "prune: run %d died with a batch of %d keys in flight (%s): %d were deleted, now "
                "recorded",
                dead,
                len(keys),
                rule,
                count,
            )


def _gone(client: Any, bucket: str, keys: list[str], threads: int) -> list[bool]:
    """For each key, whether S3 no longer has it."""
    from botocore.exceptions import ClientError

    def gone(key: str) -> bool:
        try:
            client.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if is_not_found(exc):
                return True
            raise
        return False

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(gone, keys))


class ProgressBar(Listener):
    """A tqdm counter of the keys handled (deleted or failed), on stderr."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self._bar = tqdm(unit="key", desc="prune", file=sys.stderr)

    def batch_done(self, result: RuleResult, batch: Batch) -> None:
        self._bar.update(batch.keys + len(batch.errors))


def terminal_listeners() -> list[Listener]:
    """A progress bar when stderr is a terminal; none otherwise (quiet logs)."""
    return [ProgressBar()] if sys.stderr.isatty() else []


def run_prune(
    client: Any,
    store: PruneStore,
    options: PruneOptions,
    now: dt.datetime,
    listeners: Sequence[Listener] = (),
) -> PruneReport:
    """Apply the rules in order, recording the run; stop selecting at ``options.cap`` keys.

    ``now`` is the database's clock (every host agrees on ages). The run is recorded by a
    :class:`RunRecorder`, told first, then ``listeners``.

    Raises:
        whatever a rule met (S3 after botocore's retries, the database); what was deleted
        before is recorded.
    """
    from crontabber.database import default_holder

    run_id = store.start_run(options.dry_run, options.cap, default_holder())
    recorder = RunRecorder(store, run_id)
    budget = Budget(options.cap)
    scope = Scope(now, options.protection, budget, options.dry_run, options.threads, options.rate)
    try:
        with Heartbeat(store, run_id):  # stopped before the end is written (a beat after it
            # would find the run finished and say its lease was lost)
            reconcile(client, store, run_id, options.threads)  # before this run deletes anything
            results = _apply_rules(client, store, options, scope, recorder, [recorder, *listeners])
    except BaseException as exc:  # recorded, so `history` shows why, then re-raised
        _record_failure(store, run_id, exc)
        raise
    store.finish_run(run_id, budget.exhausted)
    if budget.exhausted:
        logger.warning(
            "prune: stopped at the cap of %d keys; the rest waits for the next run", options.cap
        )
    return PruneReport(run_id, options.dry_run, results, budget.exhausted, options.cap)


def _apply_rules(
    client: Any,
    store: PruneStore,
    options: PruneOptions,
    scope: Scope,
    recorder: RunRecorder,
    told: Sequence[Listener],
) -> list[RuleResult]:
    """Each rule in order until the budget is spent; what each did."""
    results = []
    for rule in options.rules:
        if scope.budget.exhausted:
            break
        result = RuleResult(rule.name)
        for listener in told:
            listener.rule_started(rule)
        try:
            # closing: on an error, the batches in flight end before the run is recorded as over
            source = _source(client, store, recorder.run_id, rule, scope, options.inventory)
            with contextlib.closing(
                deleted_batches(client, rule, source, scope, recorder.intend)
            ) as batches:
                for batch in batches:
                    result.add(batch)
                    for listener in told:
                        listener.batch_done(result, batch)
        finally:
            for listener in told:
                listener.rule_ended(result)  # what was deleted is recorded even if it failed
        results.append(result)
    return results


def _record_failure(store: PruneStore, run_id: int, exc: BaseException) -> None:
    """Write the run's error in one line naming the service (the database may be what
    failed: then the run stays unfinished, and dead once its lease passes, as a killed one)."""
    from crontabber import describe_failure

    try:
        store.fail_run(run_id, describe_failure(exc))
    except Exception as unrecorded:
        logger.error("prune: run %d: could not record its failure: %s", run_id, unrecorded)


def _source(
    client: Any,
    store: PruneStore,
    run_id: int,
    rule: Rule,
    scope: Scope,
    inventory: InventoryLocation | None,
) -> Source:
    """Where the rule's keys come from: its listing, or its bucket's newest inventory report
    (recorded with the rule once located)."""
    check = _check(store, rule)
    if inventory is None:
        return ListSource(client, rule, scope, check)

    def seen(manifest: Manifest) -> None:
        store.rule_inventory(run_id, rule.name, manifest.address)

    return InventorySource(client, rule, scope, check, inventory, seen)


def _check(store: PruneStore, rule: Rule) -> Check | None:
    """The database's say on a page of keys, for the rules that need it."""
    if rule.kind is Kind.UPLOADS:
        return lambda rule, keys, now: store.finished_uploads(keys, rule.cutoff(now))
    if rule.kind is Kind.BATCHES:
        return lambda rule, keys, now: store.consumed_batches(keys, rule.cutoff(now))
    return None


def format_report(report: PruneReport) -> list[str]:
    """One line per rule (and one if the run was capped), for logs and the command."""
    verb = "would delete" if report.dry_run else "deleted"
    lines = [
        f"{r.rule}: {verb} {r.keys} keys, {r.bytes} bytes, {r.errors} errors"
        + (f" (e.g. {r.error_sample[0]})" if r.error_sample else "")
        for r in report.results
    ]
    if report.capped:
        lines.append(f"stopped at the cap of {report.cap} keys: the rest waits for the next run")
    return lines
