"""Deliver claimed notices: send each to its target (:mod:`crontabber.alerts.notify`), an
alert storm grouped into one notice, and record in the outbox how each went (sent, or failed
with its retry: 30 s doubling to 1 h, up to ``alerts.max_attempts``, then given up).

Never raises for a failed send (it is recorded and logged); a database error propagates.
Imported only with :mod:`crontabber.alerts.alerter` (an idle tick imports neither).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping

from .. import jsonout
from ..config.settings import AlertSettings
from ..config.targets import DeliveryError, Target
from ..redaction import masked
from ..version import version
from .notify import Notice, send
from .store import AlertStore

logger = logging.getLogger("crontabber.alerts")


def notice_retry_delay(attempts: int) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones: 30 s doubling, 1 h at
    most."""
    return float(min(3600, 30 * 2 ** max(0, attempts - 1)))


@dataclass
class Delivery:
    """How one notice went."""

    notice_id: int
    alert_id: int
    target: str
    error: str | None = None
    given_up: bool = False


class Courier:
    """Delivers the notices one host claimed (a tick's, an alert sent at once, a test)."""

    def __init__(
        self,
        config: AlertSettings,
        alert_store: AlertStore,
        host: str,
        environ: Mapping[str, str],
    ) -> None:
        """``host``: who sends (``host:pid``, recorded with each notice); ``environ``: where
        a target's secrets are read from."""
        self.config = config
        self.alert_store = alert_store
        self.host = host
        self.environ = environ

    def deliver(self, claimed: list[dict[str, Any]], once: bool = False) -> list[Delivery]:
        """Send each claimed notice, record how it went, and say so. ``once``: a failed
        notice is given up at once (a test is tried once, never re-sent by a later tick)."""
        deliveries = []
        targets: dict[str, Target] = {t.name: t for t in self.config.targets}
        agent = f"crontabber/{version()}"
        ordered = sorted(claimed, key=lambda r: r["notice_id"])  # in the order they were made
        grouped, alone = storm_groups(ordered, targets, self.config.group_over)
        for rows in grouped:
            deliveries += self._deliver_group(targets[rows[0]["target"]], rows, agent, once)
        for row in alone:
            delivery = Delivery(row["notice_id"], row["id"], row["target"])
            target = targets.get(row["target"])
            try:
                if target is None:
                    raise DeliveryError(f"target {row['target']} is no longer in alerts.targets")
                self._send(target, _notice(row, self.host), agent)
            except DeliveryError as exc:
                delivery.error = masked(str(exc))  # (as a failure is: it is stored and shown)
                delivery.given_up = self.alert_store.notice_failed(
                    row["notice_id"],
                    self.host,
                    delivery.error,
                    notice_retry_delay(row["attempts"]),
                    self.config.max_attempts if target is not None and not once else 0,
                )
                logger.warning(
                    "alert %s to %s: not delivered (attempt %s): %s%s",
                    row["id"],
                    row["target"],
                    row["attempts"],
                    exc,
                    "; given up" if delivery.given_up else "",
                )
            else:
                self.alert_store.notice_sent(row["notice_id"], self.host)
                logger.info("alert %s to %s: delivered", row["id"], row["target"])
            deliveries.append(delivery)
        return deliveries

    def _send(self, target: Target, notice: Notice, agent: str) -> None:
        """:func:`~.notify.send` of one notice, with this courier's timeout, environment and
        SMTP server."""
        send(target, notice, self.config.timeout_seconds, agent, self.environ, self.config.smtp)

    def _deliver_group(
        self, target: Target, rows: list[dict[str, Any]], agent: str, once: bool
    ) -> list[Delivery]:
        """Send the notices ``rows`` (several jobs' failing or recovered notices to ``target``:
        an alert storm) as one grouped notice, recording each as sent, or each as failed with
        its own retry (a retry goes alone, or grouped again with what is due then)."""
        deliveries = [Delivery(row["notice_id"], row["id"], row["target"]) for row in rows]
        try:
            self._send(target, group_notice(rows, self.host), agent)
        except DeliveryError as exc:
            error = masked(str(exc))
            for row, delivery in zip(rows, deliveries):
                delivery.error = error
                delivery.given_up = self.alert_store.notice_failed(
                    row["notice_id"],
                    self.host,
                    error,
                    notice_retry_delay(row["attempts"]),
                    self.config.max_attempts if not once else 0,
                )
            logger.warning(
                "alerts %s to %s: not delivered: %s",
                ", ".join(str(r["id"]) for r in rows),
                target.name,
                exc,
            )
            return deliveries
        for row in rows:
            self.alert_store.notice_sent(row["notice_id"], self.host)
        logger.info(
            "alerts %s to %s: delivered as one", ", ".join(str(r["id"]) for r in rows), target.name
        )
        return deliveries


#: The kinds of notice an alert storm groups (several jobs failing, or recovering, at once).
GROUPED = ("failing", "recovered")


def storm_groups(
    rows: list[dict[str, Any]], targets: Mapping[str, Target], group_over: int
) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """The claimed notice ``rows`` (in order) split into storms and the rest: per target and
    kind of :data:`GROUPED`, ``group_over`` or more notices of distinct jobs go as one (0:
    never), except to a PagerDuty target (one incident per job, each resolved by its job's
    recovery). Pure."""
    if group_over <= 0:
        return [], rows
    buckets: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        target = targets.get(row["target"])
        if (
            row["kind"] in GROUPED
            and target is not None
            and target.options.get("format") != "pagerduty"
        ):
            buckets.setdefault((row["target"], row["kind"]), []).append(row)
    storms = [
        bucket for bucket in buckets.values() if len({r["app_name"] for r in bucket}) >= group_over
    ]
    stormed = {row["notice_id"] for bucket in storms for row in bucket}
    return storms, [row for row in rows if row["notice_id"] not in stormed]


def group_notice(rows: list[dict[str, Any]], host: str) -> Notice:
    """One notice for an alert storm: ``5 jobs failing: a: ...; b: ...`` (each job's own
    message, in the order they were made), its detail naming every alert; keyed by its first
    notice (a retry of the same storm is the same notice)."""
    first = rows[0]
    kind = first["kind"]
    names = sorted({row["app_name"] for row in rows})
    what = "failing" if kind == "failing" else "recovered"
    message = f"{len(names)} jobs {what}: " + "; ".join(str(row["message"]) for row in rows)
    detail = {
        "group": True,
        "alerts": [row["id"] for row in rows],
        "jobs": names,
        "links": [link for row in rows if (link := _detail(row).get("link"))],
    }
    return Notice(
        first["id"],
        first["notice"],
        "crontabber",
        kind,
        f"{len(names)} jobs {what}",
        message,
        jsonout.time_text(first["opened_at"]),
        first["opened_by"],
        detail,
        host,
    )


def _detail(row: Mapping[str, Any]) -> Mapping[str, Any]:
    return row["detail"] if isinstance(row["detail"], Mapping) else {}


def _notice(row: Mapping[str, Any], host: str) -> Notice:
    detail = row["detail"] if isinstance(row["detail"], Mapping) else {}
    return Notice(
        row["id"],
        row["notice"],
        row["app_name"],
        row["kind"],
        row["subject"],
        row["message"],
        jsonout.time_text(row["opened_at"]),
        row["opened_by"],
        detail,
        host,
    )
