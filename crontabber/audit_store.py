"""The audit trail's store: writing an operator action to ``crontabber_audit`` as its own
transaction, listing the actions and checking the trail's hash chain (migration 0025; SQL in
``sql/crontabber/crontabber.sql``). Run over the state store's connection
(:meth:`crontabber.store.StateStore.in_transaction`: one transaction each, retried and
translated as the state store's own). The operator actions the state store makes (pause,
release, drain...) are audited by their own SQL functions, in their own transaction
(:func:`crontabber.store.audit_json`), not here. Not imported by an idle cron tick.
"""

from __future__ import annotations

import json
from typing import Any

from . import sqlfiles
from .records import AuditCheck, AuditEntry
from .store import StateStore, rows_of

Q = sqlfiles.load("crontabber.sql")


class AuditStore:
    """The audit trail's queries over the connection of ``state`` (a
    :class:`~crontabber.store.StateStore`): each method one transaction."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    def audit(self, entry: AuditEntry) -> int:
        """Record one operator action; its row's id.

        Raises:
            NotPermitted: the database user may not write the audit trail.
        """
        return self.state.in_transaction(lambda cur: write_audit(cur, entry), "audit")

    def audit_entries(self, app_name: str | None, limit: int) -> list[AuditEntry]:
        """Operator actions, newest first (one job's, or everyone's)."""

        def work(cur: Any) -> list[AuditEntry]:
            cur.execute(Q["audit_list"], {"app_name": app_name, "limit": limit})
            return [AuditEntry.from_row(row) for row in rows_of(cur)]

        return self.state.in_transaction(work, "audit_entries")

    def verify_audit(self) -> AuditCheck:
        """Check the audit trail's hash chain (migration 0025), in one snapshot."""

        def work(cur: Any) -> AuditCheck:
            cur.execute(Q["audit_verify"])
            rows = rows_of(cur)
            assert rows
            return AuditCheck.from_rows(rows)

        return self.state.in_transaction(work, "verify_audit")


def write_audit(cur: Any, entry: AuditEntry) -> int:
    """Record ``entry`` in the audit trail, in the transaction of ``cur``; its row's id."""
    cur.execute(
        Q["audit"],
        {
            "actor": entry.actor,
            "action": entry.action,
            "app_name": entry.app_name,
            "reason": entry.reason,
            "detail": json.dumps(dict(entry.detail), default=str),
        },
    )
    row_id: int = cur.fetchone()[0]
    return row_id
