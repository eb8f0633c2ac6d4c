"""Prune S3 safely (issue #7): ``jobs.prune.PruneS3CronApp``.

Rules (options of the job in crontabber.ini):

- ``uploads``: inbox archives (``inbox_bucket/uploads_prefix``) of uploads that are
  ``done`` or ``failed`` and finished more than ``upload_days`` ago; never the
  archive of a ``pending`` or ``processing`` upload, nor one the table does not know;
- ``batches``: missing-symbol batches (``inbox_bucket/missing_prefix``) consumed
  (status ``ok``) more than ``batch_days`` ago; quarantined batches are kept;
- ``reports``: objects under ``symbols_bucket/reports_prefix`` older than ``report_days``;
- ``extra_rules``: ``BUCKET/PREFIX|DAYS`` lines.

A rule with a non-positive number of days is off. Nothing under
``symbols_bucket/symbols_prefix`` is deleted unless a rule's prefix is inside it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from crontabber.base import BaseCronApp
from crontabber.mixins import using_postgres
from crontabber.options import DotDict, Namespace

if TYPE_CHECKING:  # imported where used: an idle cron tick skips threads and SQL files
    from .engine import RuleResult
    from .rules import Protection, Rule
    from .store import PruneStore

logger = logging.getLogger(__name__)


def rules_from(config: DotDict) -> list[Rule]:
    """The enabled rules of a job config, built-in ones first."""
    from .rules import Kind, Rule, parse_extra_rules

    rules = [
        Rule("uploads", Kind.UPLOADS, config.inbox_bucket, config.uploads_prefix, config.upload_days),
        Rule("batches", Kind.BATCHES, config.inbox_bucket, config.missing_prefix, config.batch_days),
        Rule("reports", Kind.AGE, config.symbols_bucket, config.reports_prefix, config.report_days),
        *parse_extra_rules(config.extra_rules),
    ]
    return [rule for rule in rules if rule.max_age_days > 0]


@dataclass(frozen=True)
class PruneReport:
    run_id: int
    dry_run: bool
    results: list[RuleResult]
    capped: bool
    cap: int


#: Seconds between two writes of a rule's progress to its run record.
PROGRESS_SECONDS = 1.0


@dataclass
class ProgressRecorder:
    """Adds a rule's deletions to its run record: the first batch at once, then
    at most every ``interval`` seconds, and on :meth:`flush` (the rule's end). A commit per 1,000-key batch
    cost the main thread, which also feeds the deleting threads, ~25 ms a batch
    (a third of the run); a killed run's record misses at most ``interval``
    seconds of deletions (the objects are gone either way)."""

    store: PruneStore
    run_id: int
    rule: str
    interval: float = PROGRESS_SECONDS
    clock: Callable[[], float] = time.monotonic
    keys: int = 0
    size: int = 0
    errors: int = 0
    sample: list[str] = field(default_factory=list)
    last: float = float("-inf")

    def add(self, keys: int, size: int, errors: list[str]) -> None:
        self.keys += keys
        self.size += size
        self.errors += len(errors)
        self.sample = (self.sample + errors)[:5]
        if self.clock() - self.last >= self.interval:
            self.flush()

    def flush(self) -> None:
        if self.keys or self.size or self.errors:
            self.store.add_progress(self.run_id, self.rule, self.keys, self.size, self.errors,
                                    self.sample)
        self.keys = self.size = self.errors = 0
        self.sample = []
        self.last = self.clock()


def run_prune(
    client: Any, store: PruneStore, rules: list[Rule], protection: Protection, now: dt.datetime,
    cap: int, dry_run: bool, threads: int, progress: Callable[[int], None] | None = None,
) -> PruneReport:
    """Apply ``rules`` in order, recording the run; stop selecting at ``cap`` keys."""
    from .engine import Budget, prune_rule
    from .rules import Kind

    holder = f"{socket.gethostname()}:{os.getpid()}"
    run_id = store.start_run(dry_run, cap, holder)
    budget = Budget(cap)
    checks: dict[Kind, Callable[[Rule, list[str], dt.datetime], set[str]]] = {
        Kind.UPLOADS: lambda rule, keys, now: store.finished_uploads(keys, rule.cutoff(now)),
        Kind.BATCHES: lambda rule, keys, now: store.consumed_batches(keys, rule.cutoff(now)),
    }
    results = []
    for rule in rules:
        if budget.exhausted:
            break
        store.add_rule(run_id, rule.name)
        recorder = ProgressRecorder(store, run_id, rule.name)

        def on_batch(result: RuleResult, keys: int, size: int, errors: list[str],
                     recorder: ProgressRecorder = recorder) -> None:
            recorder.add(keys, size, errors)
            if progress:
                progress(keys + len(errors))

        try:
            results.append(prune_rule(client, rule, now, protection, checks.get(rule.kind),
                                      budget, dry_run, threads, on_batch))
        finally:
            recorder.flush()  # what was deleted is recorded even if the rule failed
    store.finish_run(run_id, budget.exhausted)
    if budget.exhausted:
        logger.warning("prune: stopped at the cap of %d keys; the rest waits for the next run", cap)
    return PruneReport(run_id, dry_run, results, budget.exhausted, cap)


def format_report(report: PruneReport) -> list[str]:
    verb = "would delete" if report.dry_run else "deleted"
    lines = [f"{r.rule}: {verb} {r.keys} keys, {r.bytes} bytes, {r.errors} errors"
             + (f" (e.g. {r.error_sample[0]})" if r.error_sample else "") for r in report.results]
    if report.capped:
        lines.append(f"stopped at the cap of {report.cap} keys: the rest waits for the next run")
    return lines


@using_postgres()
class PruneS3CronApp(BaseCronApp):
    """Delete what the retention rules allow from the inbox and symbols buckets."""

    app_name = "prune-s3"
    app_description = "delete expired inbox archives, consumed batches and old reports from S3"
    required_config = Namespace()
    add = required_config.add_option
    add("inbox_bucket", default="symbols-inbox", doc="bucket of uploaded archives and batches")
    add("uploads_prefix", default="uploads/", doc="prefix of uploaded archives in the inbox")
    add("upload_days", default=30.0, doc="keep archives of finished uploads this many days (0: off)")
    add("missing_prefix", default="missing/", doc="prefix of missing-symbol batches in the inbox")
    add("batch_days", default=30.0, doc="keep consumed batches this many days (0: off)")
    add("symbols_bucket", default="symbols", doc="bucket of symbol files and reports")
    add("symbols_prefix", default="v1/", doc="symbol files: never pruned unless a rule names it")
    add("reports_prefix", default="reports/missing-symbols/", doc="prefix of daily reports")
    add("report_days", default=90.0, doc="keep reports this many days (0: off)")
    add("extra_rules", default="", doc="more rules, BUCKET/PREFIX|DAYS per line")
    add("cap", default=100000, doc="at most this many deletions per run")
    add("threads", default=4, doc="threads calling delete_objects")
    add("dry_run", default=False, doc="only report what would be deleted")
    del add

    database_connection_factory: Any  # set by @using_postgres()

    def run(self) -> None:
        from jobs.s3 import make_s3_client

        from .rules import Protection
        from .store import PruneStore

        config = self.config
        client = make_s3_client(max_pool_connections=config.threads + 1)
        protection = Protection(config.symbols_bucket, config.symbols_prefix)
        with self.database_connection_factory() as connection:
            try:
                report = run_prune(client, PruneStore(connection), rules_from(config), protection,
                                   self._now(), config.cap, config.dry_run, config.threads,
                                   _progress_bar())
            finally:
                self.database_connection_factory.close_connection(connection, force=True)
        for line in format_report(report):
            logger.info("prune: %s", line)


def _progress_bar() -> Callable[[int], None] | None:
    """A tqdm counter of keys on a terminal; nothing otherwise."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    bar = tqdm(unit="key", desc="prune", file=sys.stderr)
    return bar.update
