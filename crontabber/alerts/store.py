"""The alert store: every query on the alert tables (``crontabber_alert``, ``crontabber_notice``,
``crontabber_mute``; SQL in ``sql/crontabber/alerts.sql``) but the tick's sweep, run over the
state store's connection (:meth:`crontabber.store.StateStore.in_transaction`: one transaction
each, retried and translated as the state store's own). The sweep's one statement is
:func:`crontabber.alerts.sweep.sweep`'s, so that an idle tick imports nothing of this module.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Sequence

from .. import jsonout
from ..store import StateStore, audit_json, rows_of
from .sweep import queries, sweep_params

if TYPE_CHECKING:
    from ..records import AuditEntry


class MuteWindow(NamedTuple):
    """A maintenance window in force (``--mute``): its scope (an app name, or ``*``), until
    when, who opened it, why and when."""

    scope: str
    until: dt.datetime
    muted_by: str
    reason: str
    at: dt.datetime

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> MuteWindow:
        return cls(row["scope"], row["until"], row["muted_by"], row["reason"], row["at"])


class AlertStore:
    """The alert tables' queries over the connection of ``state`` (a
    :class:`~crontabber.store.StateStore`): each method one transaction."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    def _rows(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        def work(cur: Any) -> list[dict[str, Any]]:
            cur.execute(queries()[name], params)
            return rows_of(cur)

        return self.state.in_transaction(work)

    def mute(
        self, scope: str, until: dt.datetime, audit: AuditEntry, replace: bool = False
    ) -> bool:
        """Mute the alerts of ``scope`` (an app name, or ``*``) until ``until``, audited; True
        if muted. A window of ``scope`` still in force stays (False, nothing audited) unless
        ``replace``."""

        def work(cur: Any) -> bool:
            params = {
                "scope": scope,
                "until": until,
                "replace": replace,
                "audit": audit_json(audit),
            }
            cur.execute(queries()["mute"], params)
            return bool(cur.fetchone()[0])

        return self.state.in_transaction(work, "mute")

    def unmute(self, scope: str, audit: AuditEntry) -> bool:
        """End the window of ``scope`` now; False (nothing audited) when none was in force."""

        def work(cur: Any) -> bool:
            cur.execute(queries()["unmute"], {"scope": scope, "audit": audit_json(audit)})
            return bool(cur.fetchone()[0])

        return self.state.in_transaction(work, "unmute")

    def mutes(self, scope: str | None = None) -> list[MuteWindow]:
        """The windows in force (those that cover ``scope``: its own and ``*``)."""
        return [MuteWindow.from_row(row) for row in self._rows("mutes", {"scope": scope})]

    def notices_claim(
        self, host: str, claim_seconds: float, alert_ids: Sequence[int]
    ) -> list[dict[str, Any]]:
        """Claim the pending notices of ``alert_ids`` (those no other host holds): the sweep's
        claim, for these alerts only."""
        rows = self._rows(
            "alerts_sweep", sweep_params(host, claim_seconds, None, alert_ids=alert_ids)
        )
        return [r for r in rows if r["row_kind"] == "notice"]

    def alert_open(
        self,
        app_name: str,
        kind: str,
        subject: str,
        message: str,
        detail: Mapping[str, Any],
        host: str,
        realert_seconds: float,
        targets: Sequence[str],
    ) -> int | None:
        """Open an alert with a notice per target: its id, or None when any host had
        opened it (the unique key (app_name, kind, subject) decides)."""
        rows = self._rows(
            "alert_open",
            {
                "app_name": app_name,
                "kind": kind,
                "subject": subject,
                "message": message,
                "detail": _detail_json(detail),
                "host": host,
                "realert_seconds": realert_seconds,
                "targets": list(targets),
            },
        )
        return rows[0]["id"] if rows else None

    def open_of(self, app_name: str, kind: str) -> list[dict[str, Any]]:
        """The open alerts of ``app_name`` of ``kind``, oldest first (rows of
        :class:`~crontabber.alerts.rules.OpenAlert`)."""
        return self._rows("alerts_open_of", {"app_name": app_name, "kind": kind})

    def alert_resolve(
        self, alert_id: int, recovery: Mapping[str, Any] | None = None
    ) -> tuple[bool, int | None]:
        """End an open alert and, for the one caller that ended it, open ``recovery`` (the
        parameters of :meth:`alert_open`) in the same transaction, so a host that dies in
        between ends neither: (whether this caller ended it, the recovery's id or None)."""

        def work(cur: Any) -> tuple[bool, int | None]:
            cur.execute(queries()["alert_resolve"], {"id": alert_id})
            if cur.fetchone() is None:
                return False, None
            if recovery is None:
                return True, None
            cur.execute(queries()["alert_open"], _alert_params(recovery))
            row = cur.fetchone()
            return True, row[0] if row else None

        return self.state.in_transaction(work)

    def alert_supersede(
        self,
        old_id: int,
        new: Mapping[str, Any],
        notice_of: Callable[[int | None], Mapping[str, Any] | None],
    ) -> tuple[bool, int | None, int | None]:
        """End open alert ``old_id`` and open ``new`` (the parameters of :meth:`alert_open`)
        in one transaction, with ``notice_of(new alert's id)`` (an alert's parameters, or
        None for no notice) opened between the new alert and its notices, so its notices
        come first (they are sent in the order they were made): (whether this caller ended
        ``old_id``, the new alert's id, the notice alert's id). Nothing is written when
        another caller had ended ``old_id``."""

        def work(cur: Any) -> tuple[bool, int | None, int | None]:
            sql = queries()
            cur.execute(sql["alert_resolve"], {"id": old_id})
            if cur.fetchone() is None:
                return False, None, None
            cur.execute(sql["alert_insert"], _alert_params(new))
            row = cur.fetchone()
            new_id = row[0] if row else None
            notice_id = None
            between = notice_of(new_id)
            if between is not None:
                cur.execute(sql["alert_open"], _alert_params(between))
                row = cur.fetchone()
                notice_id = row[0] if row else None
            if new_id is not None:
                cur.execute(sql["notices_insert"], {"id": new_id, "targets": list(new["targets"])})
            return True, new_id, notice_id

        return self.state.in_transaction(work)

    def alert_refresh(self, alert_id: int, message: str, detail: Mapping[str, Any]) -> None:
        """Give open alert ``alert_id`` its condition's current text (``message``, and
        ``detail`` merged into its own): a longer streak's count. Any host may: the same
        state gives the same text."""
        self._rows(
            "alert_refresh", {"id": alert_id, "message": message, "detail": _detail_json(detail)}
        )

    def alert_realert(
        self, alert_id: int, realert_seconds: float, targets: Sequence[str]
    ) -> int | None:
        """Notify an open alert again if its next notice is due: the notice's number for
        the one caller that did, else None."""
        rows = self._rows(
            "alert_realert",
            {"id": alert_id, "realert_seconds": realert_seconds, "targets": list(targets)},
        )
        return rows[0]["notified"] if rows else None

    def notice_sent(self, notice_id: int, host: str) -> None:
        """Record a delivered notice."""
        self._rows("notice_sent", {"id": notice_id, "host": host})

    def notice_failed(
        self, notice_id: int, host: str, error: str, retry_seconds: float, max_attempts: int
    ) -> bool:
        """Record a failed attempt (retried after ``retry_seconds``); True when it was the
        last attempt (the notice is given up)."""
        rows = self._rows(
            "notice_failed",
            {
                "id": notice_id,
                "host": host,
                "error": error[:500],
                "retry_seconds": retry_seconds,
                "max_attempts": max_attempts,
            },
        )
        return bool(rows and rows[0]["given_up"])

    def alerts(self, app_name: str | None, limit: int) -> list[dict[str, Any]]:
        """Alerts newest first, each with its notices (``--alerts``), times as datetimes."""
        rows = self._rows("alerts_list", {"app_name": app_name, "limit": limit})
        for row in rows:  # json_agg gives the notices' times as text
            for notice in row["notices"]:
                for key in ("created_at", "sent_at", "next_attempt", "claim_until"):
                    if notice[key] is not None:
                        notice[key] = dt.datetime.fromisoformat(notice[key])
        return rows


def _alert_params(opening: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of ``alert_open``/``alert_insert`` from an opening's (detail as JSON)."""
    return {
        **opening,
        "detail": _detail_json(opening["detail"]),
        "targets": list(opening["targets"]),
    }


def _detail_json(detail: Mapping[str, Any]) -> str:
    """An alert's ``detail`` as JSON, times as ``--json`` writes them (ISO 8601 UTC, ``Z``):
    receivers read this JSON as it is stored."""
    return jsonout.stored(dict(detail))
