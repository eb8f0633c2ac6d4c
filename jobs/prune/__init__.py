"""Prune S3 safely: ``jobs.prune.PruneS3CronApp``.

Rules (options of the job in crontabber.ini):

- ``uploads``: inbox archives (``inbox_bucket/uploads_prefix``) of uploads that are
  ``done`` or ``failed`` and finished more than ``upload_days`` ago; never the
  archive of a ``pending`` or ``processing`` upload, nor one the table does not know;
- ``batches``: missing-symbol batches (``inbox_bucket/missing_prefix``) consumed
  (status ``ok``) more than ``batch_days`` ago; quarantined batches are kept;
- ``reports``: objects under ``symbols_bucket/reports_prefix`` older than ``report_days``;
- ``extra_rules``: ``BUCKET/PREFIX|DAYS`` lines.

Keys come from listing each rule's prefix (``source=list``) or from the newest S3 Inventory
report of its bucket (``source=inventory``, :mod:`.inventory`), each key confirmed by a HEAD
before it goes; ``deletes_per_second`` paces the deletions of each rule.

A rule with a non-positive number of days is off. Nothing under
``symbols_bucket/symbols_prefix`` is deleted unless a rule's prefix is inside it.

This module only declares the job (importing it must stay cheap: the runner imports every
job on each tick). A run's logic is in :mod:`.runs`, listing and deleting in :mod:`.engine`,
the rules in :mod:`.rules`, its SQL in :mod:`.store`.
"""

from __future__ import annotations

import logging

from crontabber.base import BaseCronApp, Summary
from crontabber.config.options import Namespace
from crontabber.mixins import using_postgres
from jobs import SQL_DIR, defaults

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

logger = logging.getLogger(__name__)


@using_postgres()
class PruneS3CronApp(BaseCronApp):
    """Delete what the retention rules allow from the inbox and symbols buckets."""

    schema_dir = SQL_DIR  # its tables: sql/jobs/schema.sql

    app_name = "prune-s3"
    metric_names = ("keys_deleted", "bytes_freed", "delete_errors", "capped")  # run()'s Summary
    app_description = "delete expired inbox archives, consumed batches and old reports from S3"
    required_config = Namespace()
    add = required_config.add_option
    add(
        "inbox_bucket", default=defaults.INBOX_BUCKET, doc="bucket of uploaded archives and batches"
    )
    add(
        "uploads_prefix",
        default=defaults.UPLOADS_PREFIX,
        doc="prefix of uploaded archives in the inbox (the upload job's inbox_prefix)",
    )
    add(
        "upload_days", default=30.0, doc="keep archives of finished uploads this many days (0: off)"
    )
    add(
        "missing_prefix",
        default=defaults.MISSING_PREFIX,
        doc="prefix of missing-symbol batches in the inbox",
    )
    add("batch_days", default=30.0, doc="keep consumed batches this many days (0: off)")
    add("symbols_bucket", default=defaults.SYMBOLS_BUCKET, doc="bucket of symbol files and reports")
    add(
        "symbols_prefix",
        default=defaults.SYMBOLS_PREFIX,
        doc="symbol files: never pruned unless a rule names it",
    )
    add("reports_prefix", default=defaults.REPORTS_PREFIX, doc="prefix of daily reports")
    add("report_days", default=90.0, doc="keep reports this many days (0: off)")
    add("extra_rules", default="", doc="more rules, BUCKET/PREFIX|DAYS per line")
    add("cap", default=100000, doc="at most this many deletions per run")
    add("threads", default=4, doc="threads calling delete_objects")
    add("dry_run", default=False, doc="only report what would be deleted")
    add(
        "deletes_per_second",
        default=0.0,
        doc="at most this many keys deleted a second under each rule's prefix, in chunks of "
        "a second's worth (0: no limit; S3 allows 3,500 a second per prefix)",
    )
    add(
        "source",
        default="list",
        doc="where the keys come from: list (list_objects_v2 of each rule's prefix) or "
        "inventory (the newest S3 Inventory report of each rule's bucket)",
    )
    add(
        "inventory_bucket",
        default="",
        doc="source=inventory: the bucket S3 Inventory writes its reports to",
    )
    add(
        "inventory_prefix",
        default="",
        doc="source=inventory: the reports' prefix there (<prefix>/<bucket>/<id>/<date>/)",
    )
    add(
        "inventory_id",
        default="",
        doc="source=inventory: the inventory configuration's id (empty: the only one)",
    )
    add(
        "inventory_max_age_hours",
        default=48.0,
        doc="source=inventory: a report taken longer ago than this is refused",
    )
    add(
        "lease_seconds",
        default=60.0,
        doc="a run renews its lease on its prune_run row 4 times this often; a run killed "
        "this long ago is dead, and the next run reconciles its batches in flight",
    )
    del add

    database_connection_factory: Any  # set by @using_postgres()

    def run(self) -> Summary:
        """Returns the run's summary (crontabber.base): each rule's line; its metrics are
        the run's totals (keys deleted, bytes freed, errors; a dry run's: would be)."""
        from jobs.s3 import make_s3_client

        from .runs import PruneOptions, format_report, run_prune, terminal_listeners
        from .store import PruneStore

        options = PruneOptions.from_config(self.config)
        client = make_s3_client(max_pool_connections=options.threads + 1)
        with self.database_connection_factory() as connection:
            try:
                report = run_prune(
                    client,
                    PruneStore(connection, options.lease_seconds),
                    options,
                    self._now(),
                    terminal_listeners(),
                )
            finally:
                self.database_connection_factory.close_connection(connection, force=True)
        for line in format_report(report):
            logger.info("prune: %s", line)
        return Summary(
            "; ".join(format_report(report)) or "no rules",
            keys_deleted=sum(r.keys for r in report.results),
            bytes_freed=sum(r.bytes for r in report.results),
            delete_errors=sum(r.errors for r in report.results),
            capped=int(report.capped),
        )
