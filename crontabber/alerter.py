"""Run a tick's alerts: one sweep statement, the plan (:mod:`crontabber.alerting`), the
claims that make each event and each notice one host's, and the delivery
(:mod:`crontabber.notify`).

Exactly once across the fleet: opening an alert is an insert that only one host's tick can
make (its unique key); so are resolving it and notifying it again (conditional updates); a
notice is sent by the host that claimed it (``FOR UPDATE SKIP LOCKED``, a claim that expires
after ``alerts.claim_seconds``). A host killed between its claim and the send loses nothing:
the claim expires and the next tick of any host sends the notice. A host killed after the
send but before recording it leaves a notice that is sent again: the receiver sees the same
``X-Crontabber-Notice`` twice and can drop the second (PagerDuty does, by ``dedup_key``).

A failed delivery is retried with backoff (30 s doubling to 1 h) up to
``alerts.max_attempts``, shown by ``--alerts``; it never fails a job or the tick.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from . import __version__
from .alerting import LASTING, AlertRules, Event, OpenAlert, Watched, plan, recovery, takeover
from .catalog import Job, alert_rules
from .config.settings import Settings
from .errors import ConfigurationError, CrontabberError
from .notify import DeliveryError, Notice, Target, send
from .scheduling import needs_attention
from .state import JobState
from .store import StateStore
from .sweep import sweep

logger = logging.getLogger("crontabber.alerts")



def notice_retry_delay(attempts: int) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones: 30 s doubling, 1 h at most."""
    return float(min(3600, 30 * 2 ** max(0, attempts - 1)))


@dataclass
class Delivery:
    """How one notice went."""

    notice_id: int
    alert_id: int
    target: str
    error: str | None = None
    given_up: bool = False


@dataclass
class AlertReport:
    """What a tick did about alerts (logged; ``--test-alert`` prints it)."""

    opened: list[int] = field(default_factory=list)
    resolved: list[int] = field(default_factory=list)
    realerted: list[int] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)


class Alerter:
    """The alerts of one runner invocation (a tick, ``--test-alert``)."""

    def __init__(self, settings: Settings, jobs: list[Job], store: StateStore, host: str,
                 blocker: Callable[[str], str] | None = None,
                 environ: Mapping[str, str] = os.environ) -> None:
        """``blocker(app_name)``: why a late job has not run (``--explain``'s verdict)."""
        self.settings = settings
        self.config = settings.alerts
        self.jobs = {job.app_name: job for job in jobs}
        self.store = store
        self.host = host
        self.blocker = blocker or (lambda app_name: "")
        self.environ = environ
        self._rules: dict[str, AlertRules] = {}

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def rules(self, app_name: str) -> AlertRules:
        """A configured job's rules (read once per invocation); defaults for a ghost."""
        if app_name not in self._rules:
            job = self.jobs.get(app_name)
            self._rules[app_name] = alert_rules(job, self.settings.sources) if job else AlertRules()
        return self._rules[app_name]

    def watched(self, app_name: str, state: JobState | None) -> Watched:
        job = self.jobs.get(app_name)
        return Watched(app_name, state, self.rules(app_name), job.schedule if job else None,
                       job.is_backfill if job else False)

    def targets_of(self, app_name: str) -> list[str]:
        """The target names of a job's alerts: its ``alert_to``, else every target. A name
        that is no target is logged and ignored; with none left, every target (an alert
        nobody receives is worse than one too many)."""
        names = [t.name for t in self.config.targets]
        wanted = self.rules(app_name).to
        unknown = [name for name in wanted if name not in names]
        if unknown:
            logger.error("%s: alert_to names %s, which no target in alerts.targets has",
                         app_name, ", ".join(unknown))
        chosen = [name for name in wanted if name in names]
        return chosen or names

    # ----------------------------------------------------------------- a tick

    def tick(self, states: Mapping[str, JobState], now: dt.datetime, swept: Any = None) -> AlertReport:
        """Evaluate the rules against ``states`` (read at ``now``), open, resolve and repeat
        alerts, and deliver what is due. ``swept``: the tick's sweep (:meth:`sweep`) when the
        caller made it already. Never raises for a delivery; a database error propagates (the
        tick reports it)."""
        report = AlertReport()
        if not self.enabled:
            return report
        claimed, open_rows, mutes = swept if swept is not None else sweep(self.store, self.host,
                                                                             self.config)
        open_alerts = [OpenAlert.from_row(row) for row in open_rows]
        names = {a.app_name for a in open_alerts}
        names |= {name for name in self.jobs if needs_attention(states.get(name), now)}
        try:
            evaluated = [self.watched(name, states.get(name)) for name in sorted(names)]
        except ConfigurationError as exc:
            logger.error("alerts not evaluated: %s", exc)
            evaluated = []
        todo = plan(evaluated, open_alerts, now, self.blocker, mutes)
        touched = self._carry_out(todo, states, now, report)
        if touched:
            claimed += self.store.notices_claim(self.host, self.config.claim_seconds, touched)
        self.deliver(claimed, report)
        return report

    def _carry_out(self, todo: Any, states: Mapping[str, JobState], now: dt.datetime,
                   report: AlertReport) -> list[int]:
        """Open, resolve and repeat; the ids of the alerts this host made notices for."""
        touched = []
        for event in todo.open:
            alert_id = self.open(event)
            if alert_id is not None:
                report.opened.append(alert_id)
                touched.append(alert_id)
        for alert in todo.resolve:
            if self.store.alert_resolve(alert.id):
                report.resolved.append(alert.id)
                logger.info("%s: alert %s (%s) ended", alert.app_name, alert.id, alert.kind)
                if self.rules(alert.app_name).on_recovery:
                    alert_id = self.open(recovery(alert, states.get(alert.app_name), now))
                    if alert_id is not None:
                        touched.append(alert_id)
        for alert in todo.realert:
            rules = self.rules(alert.app_name)
            if self.store.alert_realert(alert.id, rules.realert.total_seconds(),
                                        self.targets_of(alert.app_name)) is not None:
                report.realerted.append(alert.id)
                touched.append(alert.id)
        return touched

    def open(self, event: Event) -> int | None:
        """Open ``event`` with a notice per target of its job: its id, or None when another
        host (or an earlier tick) had."""
        realert = self.rules(event.app_name).realert if event.kind in LASTING else dt.timedelta(0)
        alert_id = self.store.alert_open(event.app_name, event.kind, event.subject, event.message,
                                         event.detail, self.host, realert.total_seconds(),
                                         self.targets_of(event.app_name))
        if alert_id is not None:
            logger.warning("alert %s: %s", alert_id, event.message, extra={"job": event.app_name})
        return alert_id

    def takeover(self, job: Job, before: JobState, run_id: int) -> None:
        """A run took ``job`` over from a dead or expired one: open the ``takeover`` alert
        (if the job's rules ask for it) and send it now. Never raises: the run goes on."""
        if not self.enabled or before.ongoing is None:
            return
        try:
            if not self.rules(job.app_name).on_takeover or self.store.mutes(job.app_name):
                return
            alert_id = self.open(takeover(job.app_name, before, run_id))
            if alert_id is not None:
                report = AlertReport()
                self.deliver(self.store.notices_claim(self.host, self.config.claim_seconds, [alert_id]),
                             report)
        except CrontabberError as exc:
            logger.error("%s: the takeover alert was not recorded: %s", job.app_name, exc)

    # --------------------------------------------------------------- delivery

    def deliver(self, claimed: list[dict[str, Any]], report: AlertReport) -> None:
        """Send each claimed notice and record how it went."""
        targets: dict[str, Target] = {t.name: t for t in self.config.targets}
        agent = f"crontabber/{__version__}"
        for row in claimed:
            delivery = Delivery(row["notice_id"], row["id"], row["target"])
            target = targets.get(row["target"])
            try:
                if target is None:
                    raise DeliveryError(f"target {row['target']} is no longer in alerts.targets")
                send(target, _notice(row, self.host), self.config.timeout_seconds, agent, self.environ,
                     self.config.smtp)
            except DeliveryError as exc:
                delivery.error = str(exc)
                delivery.given_up = self.store.notice_failed(
                    row["notice_id"], self.host, str(exc), notice_retry_delay(row["attempts"]),
                    self.config.max_attempts if target is not None else 0)
                logger.warning("alert %s to %s: not delivered (attempt %s): %s%s", row["id"],
                               row["target"], row["attempts"], exc,
                               "; given up" if delivery.given_up else "")
            else:
                self.store.notice_sent(row["notice_id"], self.host)
                logger.info("alert %s to %s: delivered", row["id"], row["target"])
            report.deliveries.append(delivery)

    def test(self, job: Job) -> AlertReport:
        """``--test-alert NAME``: open a ``test`` alert of ``job`` with a notice per target
        and deliver it now."""
        now = self.store.now()
        report = AlertReport()
        alert_id = self.open(Event(job.app_name, "test", f"{now.isoformat()} {self.host}",
                                   f"{job.app_name}: a test alert from {self.host} (--test-alert)",
                                   {"test": True}))
        assert alert_id is not None  # the subject is this host's and this moment's
        report.opened.append(alert_id)
        self.deliver(self.store.notices_claim(self.host, self.config.claim_seconds, [alert_id]), report)
        return report


def missed_deadlines(jobs: list[Job], settings: Settings, states: Mapping[str, JobState],
                     now: dt.datetime) -> dict[str, str]:
    """The jobs past a deadline at ``now`` (``deadline`` set, next interval not done by it),
    with the line that says so: what ``--nagios``, the metrics file and the dashboard show.
    A job whose rules do not load is left out (``--configtest`` names the option)."""
    from .alerting import late

    missed = {}
    for job in jobs:
        try:
            rules = alert_rules(job, settings.sources)
        except ConfigurationError:
            continue
        event = late(Watched(job.app_name, states.get(job.app_name), rules, job.schedule,
                             job.is_backfill), now, "")
        if event is not None:
            missed[job.app_name] = event.message.rstrip("; ")
    return missed


def _notice(row: Mapping[str, Any], host: str) -> Notice:
    detail = row["detail"] if isinstance(row["detail"], Mapping) else {}
    return Notice(row["id"], row["notice"], row["app_name"], row["kind"], row["subject"],
                  row["message"], row["opened_at"].isoformat(), row["opened_by"], detail, host)
