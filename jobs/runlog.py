"""Trim ``crontabber_log`` (crontabber appends a row per run and never deletes any), the
run ledger ``crontabber_run`` and the alerts (``crontabber_alert``, with their notices)."""

from __future__ import annotations

from crontabber import sqlfiles
from crontabber.base import BaseCronApp
from crontabber.config.options import Namespace
from crontabber.mixins import using_postgres
from jobs import SQL_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from crontabber.transaction_executor import TransactionExecutor


@using_postgres()
class PruneRunLogCronApp(BaseCronApp):
    """Delete run-log rows older than ``keep_days``, ``batch_size`` rows per transaction
    (short transactions keep locks and WAL bursts small on a busy database). The run log and
    the run ledger are trimmed through the schema's functions (migration 0030), which refuse a
    ``keep_days`` under 7: the runner login may not delete there itself."""

    app_name = "prune-run-log"
    app_description = (
        "delete crontabber_log rows, crontabber_run runs and ended alerts older than keep_days"
    )
    required_config = Namespace()
    required_config.add_option(
        "keep_days", default=90, doc="keep log rows this many days (at least 7)"
    )
    required_config.add_option("batch_size", default=10000, doc="rows deleted per transaction")

    database_transaction_executor: TransactionExecutor  # set by @using_postgres()

    def run(self) -> str:
        """Returns the run's one-line summary."""
        rows, runs = self._delete_all("delete_batch"), self._delete_all("delete_run_batch")
        alerts = self._delete_all("delete_alert_batch")
        return (
            f"deleted {rows} crontabber_log rows, {runs} crontabber_run runs and {alerts} "
            f"alerts older than {self.config.keep_days} days"
        )

    def _delete_all(self, query: str) -> int:
        total = 0
        while True:
            deleted = self.database_transaction_executor(self._delete_batch, query)
            total += deleted
            if deleted < self.config.batch_size:
                return total

    def _delete_batch(self, connection: Any, query: str) -> int:
        with connection.cursor() as cur:
            cur.execute(
                sqlfiles.load("runlog.sql", SQL_DIR)[query],
                {"keep_days": self.config.keep_days, "batch_size": self.config.batch_size},
            )
            if cur.description is None:  # a DELETE (the alerts)
                return int(cur.rowcount)
            # the run log and ledger: a function's count (migration 0030)
            return int(cur.fetchone()[0])
