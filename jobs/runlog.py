"""Trim ``crontabber_log``: crontabber appends a row per run and never deletes any."""

from __future__ import annotations

import logging
from typing import Any

from crontabber import queries
from crontabber.base import BaseCronApp
from crontabber.mixins import using_postgres
from crontabber.options import Namespace

logger = logging.getLogger(__name__)


@using_postgres()
class PruneRunLogCronApp(BaseCronApp):
    """Delete run-log rows older than ``keep_days``, ``batch_size`` rows per transaction
    (short transactions keep locks and WAL bursts small on a busy database)."""

    app_name = "prune-run-log"
    app_description = "delete crontabber_log rows older than keep_days"
    required_config = Namespace()
    required_config.add_option("keep_days", default=90, doc="keep log rows this many days")
    required_config.add_option("batch_size", default=10000, doc="rows deleted per transaction")

    database_transaction_executor: Any  # set by @using_postgres()

    def run(self) -> None:
        total = 0
        while True:
            deleted = self.database_transaction_executor(self._delete_batch)
            total += deleted
            if deleted < self.config.batch_size:
                break
        logger.info("prune-run-log: deleted %d rows older than %d days", total, self.config.keep_days)

    def _delete_batch(self, connection: Any) -> int:
        with connection.cursor() as cur:
            cur.execute(
                queries.load("runlog.sql")["delete_batch"],
                {"keep_days": self.config.keep_days, "batch_size": self.config.batch_size},
            )
            return cur.rowcount
