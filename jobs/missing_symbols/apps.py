"""The missing-symbol crontabber apps: aggregate batches, publish daily reports, retention."""

from __future__ import annotations

import datetime as dt
import os

from crontabber.base import BaseCronApp, Summary
from crontabber.config.options import Namespace
from crontabber.mixins import as_backfill_cron_app, using_postgres
from jobs import SQL_DIR, defaults

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The work (consume, reports, store) is imported in run(): a cron tick where
# these jobs are not due must not pay for it.

# A report run for day D reports the UTC day before it (complete by then).
REPORT_OFFSET = dt.timedelta(days=-1)


class _StoreApp(BaseCronApp):
    """A job that works on the store over the job's own database connection."""

    schema_dir = SQL_DIR  # its tables: sql/jobs/schema.sql

    database_connection_factory: Any  # set by @using_postgres()

    def with_store(self, function: Any, *args: Any) -> Any:
        """Call ``function(store, *args)``; the connection is closed afterwards, so an
        interrupted transaction never outlives the run."""
        from .store import MissingSymbolStore

        with self.database_connection_factory() as connection:
            try:
                return function(MissingSymbolStore(connection), *args)
            finally:
                self.database_connection_factory.close_connection(connection, force=True)


@using_postgres()
class MissingSymbolsCronApp(_StoreApp):
    """Consume every unconsumed batch under the inbox prefix into ``missing_symbol``
    and ``missing_symbol_day``, exactly once (see jobs/missing_symbols/consume.py)."""

    app_name = "missing-symbols"
    metric_names = (
        "batches",
        "batches_quarantined",
        "events_counted",
        "lookups",
        "batches_skipped",
    )
    app_description = "aggregate missing-symbol batches (msgpack in S3) into Postgres"
    required_config = Namespace()
    required_config.add_option(
        "inbox_bucket", default=defaults.INBOX_BUCKET, doc="bucket the batches are in"
    )
    required_config.add_option(
        "prefix", default=defaults.MISSING_PREFIX, doc="key prefix of the batches"
    )
    required_config.add_option(
        "workers", default=0, doc="decoding processes (0: one per core; 1: no pool)"
    )
    required_config.add_option(
        "batches_per_transaction", default=100, doc="batches consumed per transaction"
    )
    required_config.add_option(
        "max_batch_bytes", default=64 << 20, doc="a larger batch is quarantined unread"
    )
    required_config.add_option(
        "worker_memory_mb",
        default=2048,
        doc=(
            "memory a decoding worker may use (MiB, 0: no limit); a batch needing more is "
            "quarantined"
        ),
    )

    def run(self) -> Summary:
        """Returns the run's summary and metrics (crontabber.base)."""
        from jobs.s3 import make_s3_client

        from .consume import ConsumeSettings, consume

        settings = ConsumeSettings(
            bucket=self.config.inbox_bucket,
            prefix=self.config.prefix,
            workers=self.config.workers or os.cpu_count() or 1,
            batches_per_transaction=self.config.batches_per_transaction,
            max_batch_bytes=self.config.max_batch_bytes,
            worker_memory_mb=self.config.worker_memory_mb,
        )
        report = self.with_store(consume, make_s3_client(), settings)
        return Summary(
            f"counted {report.batches} batches ({report.quarantined} quarantined): "
            f"{report.events} events, {report.lookups} lookups; {report.skipped} "
            "skipped (held by another runner)",
            batches=report.batches,
            batches_quarantined=report.quarantined,
            events_counted=report.events,
            lookups=report.lookups,
            batches_skipped=report.skipped,
        )


@using_postgres()
@as_backfill_cron_app
class MissingSymbolsReportCronApp(_StoreApp):
    """Publish the previous UTC day's report for each run date (backfill: a runner
    down for three days produces the three missing reports)."""

    app_name = "missing-symbols-report"
    metric_names = ("report_rows",)
    app_description = "daily CSV of missing symbols to the symbols bucket"
    depends_on = ["missing-symbols"]
    data_offset = REPORT_OFFSET  # --history shows the report days, not the run dates
    # each run reads one day's counts and writes that day's report: --rerun --parallel N is safe
    parallel_reruns = True
    required_config = Namespace()
    required_config.add_option(
        "symbols_bucket", default=defaults.SYMBOLS_BUCKET, doc="bucket of the reports"
    )
    required_config.add_option(
        "report_prefix", default=defaults.REPORTS_PREFIX, doc="key prefix of reports"
    )

    def plan(self, date: dt.datetime) -> str:
        """``--rerun --dry-run``: the report a run for ``date`` writes (the day before), and
        where."""
        return _planned(self, date)

    def run(self, date: dt.datetime) -> Summary:
        """Returns the interval's summary (which day's report it wrote, where, how many rows)
        and its rows as a metric."""
        from jobs.s3 import make_s3_client

        from .reports import publish_report

        day = report_day(date)
        key, rows = self.with_store(
            publish_report,
            make_s3_client(),
            self.config.symbols_bucket,
            day,
            self.config.report_prefix,
        )
        return Summary(
            f"wrote the report of {day} ({rows} rows) to s3://{self.config.symbols_bucket}/{key}",
            report_rows=rows,
        )


def _planned(app: "MissingSymbolsReportCronApp", date: dt.datetime) -> str:
    from .reports import report_key

    day = report_day(date)
    return (
        f"would write the report of {day} to "
        f"s3://{app.config.symbols_bucket}/{report_key(day, app.config.report_prefix)}"
    )


def report_day(date: dt.datetime) -> dt.date:
    """The day a run at ``date`` reports: the UTC day before it (complete by then)."""
    return (date.astimezone(dt.timezone.utc) + REPORT_OFFSET).date()


@using_postgres()
class MissingSymbolsRetentionCronApp(_StoreApp):
    """Delete symbols not seen for ``keep_days`` and per-day rows older than that,
    ``batch_size`` rows per transaction."""

    app_name = "missing-symbols-retention"
    # Its batches of deletes run on the rows the aggregation writes: never beside it on one
    # host, so that the tick's fresh counts are in before old ones go (max_parallel_jobs).
    parallel = False
    metric_names = ("symbols_deleted", "day_rows_deleted")
    app_description = "delete missing symbols not seen for keep_days"
    required_config = Namespace()
    required_config.add_option("keep_days", default=30, doc="keep this many days")
    required_config.add_option("batch_size", default=10000, doc="rows deleted per transaction")

    def run(self) -> Summary:
        symbols, days = self.with_store(
            lambda store: store.delete_old(self.config.keep_days, self.config.batch_size)
        )
        return Summary(
            f"deleted {symbols} symbols and {days} day rows older than {self.config.keep_days} "
            "days",
            symbols_deleted=symbols,
            day_rows_deleted=days,
        )
