"""Run a tick's alerts: one sweep statement, the plan (:mod:`crontabber.alerts.rules`), the
claims that make each event and each notice one host's, and the delivery
(:mod:`crontabber.alerts.delivery`, which sends through :mod:`crontabber.alerts.notify`).

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
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..config.catalog import BrokenEntry, Job
from ..config.settings import Settings
from ..errors import ConfigurationError, CrontabberError
from ..formats import utc_iso
from ..leases import LeaseRules, Marker
from ..scheduling import needs_attention
from ..state import JobState
from ..store import StateStore
from .delivery import Courier, Delivery
from .rules import (
    LASTING,
    RUNNER,
    AlertPlan,
    AlertRules,
    Event,
    OpenAlert,
    Watched,
    alert_rules,
    breaches_passed,
    broken_entry,
    code_upgraded,
    entries_fixed,
    event_recovery,
    held_back,
    muted,
    old_code,
    plan,
    recovery,
    superseded,
    takeover,
)

if TYPE_CHECKING:
    from ..records import RunRecord
from .store import AlertStore, MuteWindow
from .sweep import Swept

logger = logging.getLogger("crontabber.alerts")


class Alerter:
    """The alerts of one runner invocation (a tick, ``--test-alert``)."""

    def __init__(
        self,
        settings: Settings,
        jobs: list[Job],
        store: StateStore,
        host: str,
        blocker: Callable[[Job, Mapping[str, JobState], dt.datetime], str] | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        """``blocker(job, states, now)``: why a late job has not run (``--explain``'s verdict,
        from the state the tick read)."""
        self.settings = settings
        self.config = settings.alerts
        self.jobs = {job.app_name: job for job in jobs}
        self.store = store
        self.alert_store = AlertStore(store)
        self.host = host
        self.blocker = blocker
        self.environ = environ
        self.courier = Courier(self.config, self.alert_store, host, environ)
        self._rules: dict[str, AlertRules] = {}

    def rules(self, app_name: str) -> AlertRules:
        """A configured job's rules (read once per invocation); defaults for a ghost."""
        if app_name not in self._rules:
            job = self.jobs.get(app_name)
            self._rules[app_name] = alert_rules(job, self.settings.sources) if job else AlertRules()
        return self._rules[app_name]

    def watched(self, app_name: str, state: JobState | None, unplaced: str = "") -> Watched:
        """The job as the plan sees it (``unplaced``: why no live host may run it); when it
        fails often enough to alert, with what its alert says besides the state
        (:func:`crontabber.alerts.rules.failing`)."""
        job = self.jobs.get(app_name)
        rules = self.rules(app_name)
        watched = Watched(
            app_name,
            state,
            rules,
            job.schedule if job else None,
            job.is_backfill if job else False,
            unplaced=unplaced,
            hosts=job.hosts if job else (),
        )
        if state is None or not rules.after_failures or state.error_count < rules.after_failures:
            return watched
        record = self._failed_run(state)
        return replace(
            watched,
            failed_by=record.by if record is not None else None,
            blocks=tuple(name for name, child in self.jobs.items() if app_name in child.depends_on),
            link=self.config.job_link(app_name),
            error_line=record.error if record is not None else None,
        )

    def _failed_run(self, state: JobState) -> RunRecord | None:
        """The job's last run (the failed one) in the run ledger: who ran it (``host:pid``)
        and its error in one plain line."""
        if state.run_id is None:
            return None
        return self.store.run_records(state.app_name, [state.run_id]).get(state.run_id)

    def targets_of(self, app_name: str) -> list[str]:
        """The target names of a job's alerts: its ``alert_to``, else every target. A name
        that is no target is logged and ignored; with none left, every target (an alert
        nobody receives is worse than one too many)."""
        names = [t.name for t in self.config.targets]
        wanted = self.rules(app_name).to
        unknown = [name for name in wanted if name not in names]
        if unknown:
            logger.error(
                "%s: alert_to names %s, which no target in alerts.targets has",
                app_name,
                ", ".join(unknown),
            )
        chosen = [name for name in wanted if name in names]
        return chosen or names

    # ----------------------------------------------------------------- a tick

    def tick(
        self,
        states: Mapping[str, JobState],
        now: dt.datetime,
        swept: Swept,
        unplaced: Mapping[str, str] | None = None,
        broken: Sequence[BrokenEntry] | None = None,
    ) -> None:
        """Evaluate the rules against ``states`` (read at ``now``) and ``unplaced`` (the jobs no
        live host may run, with why: :func:`crontabber.alerts.sweep.unplaced`), open, resolve and
        repeat alerts, end the ``broken-entry`` events whose entry is not among ``broken`` (the
        entries of the jobs list this tick loaded that do not load; None: not known, none
        ends), and deliver what is due: the claimed notices of the tick's sweep
        (:func:`crontabber.alerts.sweep.sweep`) and those this tick made. Never raises for a
        delivery; a database error propagates (the tick reports it)."""
        claimed, open_rows, mutes = swept
        rows = [OpenAlert.from_row(row) for row in open_rows]
        open_alerts = [a for a in rows if a.kind in LASTING]
        names = {a.app_name for a in open_alerts}
        names |= {name for name in self.jobs if needs_attention(states.get(name), now)}
        names |= set(unplaced or {})
        try:
            evaluated = [
                self.watched(name, states.get(name), (unplaced or {}).get(name, ""))
                for name in sorted(names)
            ]
        except ConfigurationError as exc:
            logger.error("alerts not evaluated: %s", exc)
            evaluated = []
        todo = plan(
            evaluated, open_alerts, now, lambda name: self._blocker(name, states, now), mutes
        )
        touched = self._carry_out(todo, states, now)
        here = self.host.rpartition(":")[0] or self.host
        if not muted(RUNNER, mutes, now):
            # this host's tick got past the schema check (a refused one raises before)
            touched += self._end_events(code_upgraded(rows, here))
            if broken is not None:
                fixed = entries_fixed(
                    rows, [broken_entry(b.entry.text, b.problem) for b in broken], here
                )
                touched += self._end_events(fixed)
        if touched:
            claimed = claimed + self.alert_store.notices_claim(
                self.host, self.config.claim_seconds, touched
            )
        self.courier.deliver(claimed)

    def held_back(
        self, states: Mapping[str, JobState], now: dt.datetime, windows: list[MuteWindow]
    ) -> list[Event]:
        """The conditions the maintenance windows in force (``windows``:
        :meth:`AlertStore.mutes`) keep from alerting at ``now`` (:func:`held_back`).

        Raises:
            ConfigurationError: a job's alert rules do not parse.
        """
        mutes = {window.scope: window.until for window in windows}
        names = [name for name in self.jobs if muted(name, mutes, now)]
        return held_back([self.watched(name, states.get(name)) for name in names], now, mutes)

    def _blocker(self, app_name: str, states: Mapping[str, JobState], now: dt.datetime) -> str:
        job = self.jobs.get(app_name)
        if job is None:
            return "not configured (a ghost)"
        return self.blocker(job, states, now) if self.blocker else ""

    def _carry_out(
        self, todo: AlertPlan, states: Mapping[str, JobState], now: dt.datetime
    ) -> list[int]:
        """Supersede, resolve, open, refresh and repeat, in the order the events happened (a
        streak's
        end before a new one's start); the ids of the alerts this host made notices for."""
        touched = []
        for old, event in todo.supersede:
            touched += self._supersede(old, event, states.get(old.app_name))
        for alert in todo.resolve:
            recovered = (
                recovery(alert, states.get(alert.app_name), now)
                if self.rules(alert.app_name).on_recovery
                else None
            )
            ended, alert_id = self.alert_store.alert_resolve(
                alert.id, self._opening(recovered) if recovered is not None else None
            )
            if ended:  # the recovery with it, in one transaction: a kill loses neither alone
                logger.info("%s: alert %s (%s) ended", alert.app_name, alert.id, alert.kind)
            if alert_id is not None and recovered is not None:
                logger.warning(
                    "alert %s: %s", alert_id, recovered.message, extra={"job": recovered.app_name}
                )
                touched.append(alert_id)
        for event in sorted(todo.open, key=lambda e: CAUSE_FIRST.get(e.kind, len(CAUSE_FIRST))):
            alert_id = self.open(event)
            if alert_id is not None:
                touched.append(alert_id)
        for alert, event in todo.refresh:  # before a re-alert: its notice sends the new text
            self.alert_store.alert_refresh(alert.id, event.message, event.detail)
        for alert in todo.realert:
            rules = self.rules(alert.app_name)
            if (
                self.alert_store.alert_realert(
                    alert.id, rules.realert.total_seconds(), self.targets_of(alert.app_name)
                )
                is not None
            ):
                touched.append(alert.id)
        return touched

    def _supersede(self, old: OpenAlert, event: Event, state: JobState | None) -> list[int]:
        """End failing alert ``old`` and open ``event`` (the new streak) in one transaction,
        the ``superseded`` notice of ``old`` made before the new alert's (so sent first);
        the ids of the alerts with notices. Another host that ended ``old`` first did all
        of it: then this only tries to open ``event`` (its unique key decides)."""
        tell = self.rules(old.app_name).on_recovery

        def notice_of(new_id: int | None) -> dict[str, Any] | None:
            return self._opening(superseded(old, new_id, state)) if tell else None

        ended, new_id, superseded_id = self.alert_store.alert_supersede(
            old.id, self._opening(event), notice_of
        )
        if not ended:
            alert_id = self.open(event)
            return [alert_id] if alert_id is not None else []
        logger.info(
            "%s: alert %s (%s) superseded by alert %s",
            old.app_name,
            old.id,
            old.kind,
            new_id,
            extra={"job": old.app_name},
        )
        if new_id is not None:
            logger.warning("alert %s: %s", new_id, event.message, extra={"job": event.app_name})
        return [i for i in (superseded_id, new_id) if i is not None]

    def _opening(self, event: Event) -> dict[str, Any]:
        """The store's parameters of opening ``event`` with a notice per target of its job;
        every kind links to the dashboard when it has one (its job's page; the runner's own
        alerts, the overview)."""
        realert = self.rules(event.app_name).realert if event.kind in LASTING else dt.timedelta(0)
        message, detail = event.message, dict(event.detail)
        link = (
            self.config.job_link(event.app_name)
            if event.app_name in self.jobs
            else self.config.dashboard_url
        )
        if link and "link" not in detail:
            message, detail["link"] = f"{message}; dashboard: {link}", link
        return {
            "app_name": event.app_name,
            "kind": event.kind,
            "subject": event.subject,
            "message": message,
            "detail": detail,
            "host": self.host,
            "realert_seconds": realert.total_seconds(),
            "targets": self.targets_of(event.app_name),
        }

    def open(self, event: Event) -> int | None:
        """Open ``event`` with a notice per target of its job: its id, or None when another
        host (or an earlier tick) had."""
        alert_id = self.alert_store.alert_open(**self._opening(event))
        if alert_id is not None:
            logger.warning("alert %s: %s", alert_id, event.message, extra={"job": event.app_name})
        return alert_id

    def takeover(self, job: Job, before: JobState, run_id: int) -> None:
        """A run took ``job`` over from a dead or expired one: open the ``takeover`` alert
        (if the job's rules ask for it) and send it now. Never raises: the run goes on."""
        if self.rules(job.app_name).on_takeover:
            self._send_now(takeover(job.app_name, before, run_id))

    def breach(self, event: Event) -> None:
        """A run broke one of its job's checks (:mod:`crontabber.alerts.checks`): open the
        ``breach`` alert (once across the fleet per run and rule) and send it now."""
        self._send_now(event)

    def checks_passed(self, app_name: str, run_id: int, broke: Sequence[str]) -> None:
        """Run ``run_id`` of ``app_name`` was judged and broke only the rules ``broke``: end the
        job's open ``breach`` alerts of earlier runs whose rule it passed (their cause is gone:
        a ``recovered`` notice, PagerDuty's ``resolve``), sent now; none while the job's alerts
        are muted. Never raises (the tick goes on)."""
        try:
            rows = [OpenAlert.from_row(r) for r in self.alert_store.open_of(app_name, "breach")]
            passed = breaches_passed(rows, app_name, run_id, broke)
            if not passed or self.alert_store.mutes(app_name):  # (a window: read only then)
                return
            ended = self._end_events(passed, run_id)
            if ended:
                self.courier.deliver(
                    self.alert_store.notices_claim(self.host, self.config.claim_seconds, ended)
                )
        except CrontabberError as exc:
            logger.error("%s: the breach alerts were not ended: %s", app_name, exc)

    def _end_events(self, alerts: Sequence[OpenAlert], run_id: int | None = None) -> list[int]:
        """End the open events ``alerts`` (their cause is gone; ``run_id``: the run that passed
        a breach's rule), each with its ``recovered`` notice when its job's rules tell of
        recoveries: the ids of the recoveries this host made."""
        touched = []
        for alert in alerts:
            recovered = (
                event_recovery(alert, run_id) if self.rules(alert.app_name).on_recovery else None
            )
            ended, alert_id = self.alert_store.alert_resolve(
                alert.id, self._opening(recovered) if recovered is not None else None
            )
            if ended:
                logger.info("%s: alert %s (%s) ended", alert.app_name, alert.id, alert.kind)
            if alert_id is not None and recovered is not None:
                logger.warning(
                    "alert %s: %s", alert_id, recovered.message, extra={"job": alert.app_name}
                )
                touched.append(alert_id)
        return touched

    def old_code(self, host: str, behind: tuple[int, ...]) -> None:
        """This host's code is older than the database's schema: open the ``old-code`` alert
        (once per host and set of migrations across the fleet; muted by ``--mute all``) and
        send it now. Never raises: the tick goes on to refuse."""
        self._send_now(old_code(host, behind))

    def broken_entry(self, entry: BrokenEntry) -> None:
        """A jobs entry does not load: open the ``broken-entry`` alert (once across the fleet
        per entry and error; muted by ``--mute all``) and send it now. Never raises."""
        self._send_now(broken_entry(entry.entry.text, entry.problem))

    def _send_now(self, event: Event) -> None:
        """Open an event alert (unless its job, or all, is muted) and send its notices at once,
        not at the next tick; never raises (what it interrupts goes on)."""
        try:
            if self.alert_store.mutes(event.app_name):
                return
            alert_id = self.open(event)
            if alert_id is not None:
                self.courier.deliver(
                    self.alert_store.notices_claim(self.host, self.config.claim_seconds, [alert_id])
                )
        except CrontabberError as exc:
            logger.error("%s: the %s alert was not recorded: %s", event.app_name, event.kind, exc)

    def test(self, job: Job) -> list[Delivery]:
        """``--test-alert NAME``: open a ``test`` alert of ``job`` with a notice per target
        and deliver it now, once: a notice that fails is given up (ticks never send a test;
        to PagerDuty it is resolved as soon as it is triggered,
        :func:`crontabber.alerts.notify.payloads`)."""
        now = self.store.now()
        alert_id = self.open(
            Event(
                job.app_name,
                "test",
                f"{utc_iso(now)} {self.host}",
                f"{job.app_name}: a test alert from {self.host} (--test-alert)",
                {"test": True},
            )
        )
        assert alert_id is not None  # the subject is this host's and this moment's
        return self.courier.deliver(
            self.alert_store.notices_claim(self.host, self.config.claim_seconds, [alert_id]),
            once=True,
        )


def tick_alerter(
    settings: Settings,
    jobs: list[Job],
    store: StateStore,
    holder: str,
    rules: LeaseRules,
    marker: Callable[[JobState | None, dt.datetime], Marker],
) -> Alerter:
    """The alerts of this invocation (a tick, ``--alerts``, ``--test-alert``), held by
    ``holder`` (this process, ``host:pid``): a late job's blocker is ``--explain``'s verdict
    under ``rules`` (:func:`crontabber.runner.lease_rules`), its marker read by ``marker``
    (what it means from this host: :func:`crontabber.runner.markers_from_here`, as every
    reader of a marker has it)."""
    from ..explain import explain_job

    def blocker(job: Job, states: Any, now: Any) -> str:
        held = marker(states.get(job.app_name), now)
        return f"--explain says: {explain_job(job, states, now, held, rules).verdict}"

    return Alerter(settings, jobs, store, holder, blocker)


#: The order a tick opens alerts in, cause before symptom: a job failing (or with no host to
#: run it) before the jobs it leaves silent or late (their notices go out in that order).
CAUSE_FIRST = {"failing": 0, "no-host": 1, "silent": 2, "late": 3}
