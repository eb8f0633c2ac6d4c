"""The first step of a tick's alerts, kept light: one statement that claims the notices due
and reads the open alerts and the maintenance windows (run here, over the state store's
connection: :meth:`crontabber.store.StateStore.alone`). A tick whose sweep finds nothing and
whose jobs are all quiet (:func:`crontabber.scheduling.needs_attention`) stops here, without
importing the alert rules (:mod:`crontabber.alerts.alerter`, :mod:`crontabber.alerts.rules`)
or the alert store (:mod:`crontabber.alerts.store`)."""

from __future__ import annotations

import datetime as dt
import functools

from .. import sqlfiles
from ..placement import drains_of, unplaced
from ..scheduling import needs_attention

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Mapping, Sequence, TypeAlias

    from ..config.catalog import BrokenEntry, Job
    from ..config.settings import AlertSettings, Settings
    from ..state import JobState
    from ..store import StateStore

#: How many notices one tick claims at most (the rest wait for the next tick).
SWEEP_LIMIT = 50

Swept: TypeAlias = "tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dt.datetime]]"


def sweep(
    store: "StateStore", host: str, config: "AlertSettings", pid_alive: Callable[[int], bool]
) -> Swept:
    """Claim the notices due for ``host`` (``host:pid``); read the open alerts and the windows
    in force. A notice claimed by a process of this very host that is gone (killed while it
    sent) is claimed again at once, not after its claim's end: a second statement, only then
    (another host's claim is waited for: its process cannot be seen from here)."""
    from ..leases import holder_gone, parse_holder

    claimed, open_rows, mutes, held = _swept(store, host, config.claim_seconds, SWEEP_LIMIT)
    this_host = parse_holder(host)[0]
    dead = [holder for holder in held if holder_gone(holder, this_host, pid_alive)]
    if dead:
        claimed = (
            claimed + _swept(store, host, config.claim_seconds, SWEEP_LIMIT - len(claimed), dead)[0]
        )
    return claimed, open_rows, mutes


def _swept(
    store: "StateStore", host: str, claim_seconds: float, limit: int, dead: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dt.datetime], list[str]]:
    """One statement per tick: claim the notices due (``host``, ``host:pid``, holds each
    for ``claim_seconds``; so are those whose holder is in ``dead``, processes of this host
    that are gone), read the open failing and silent alerts, the maintenance windows in
    force, and the holders of this host whose claims have not expired.

    Returns:
        (claimed notices with their alerts, open alerts, {scope: until} of the windows,
        the holders of this host with claims that still run).
    """
    rows = store.alone(queries()["alerts_sweep"], sweep_params(host, claim_seconds, limit, dead))
    return (
        [r for r in rows if r["row_kind"] == "notice"],
        [r for r in rows if r["row_kind"] == "open"],
        {r["app_name"]: r["next_notice"] for r in rows if r["row_kind"] == "mute"},
        [r["app_name"] for r in rows if r["row_kind"] == "held"],
    )


def sweep_params(
    host: str,
    claim_seconds: float,
    limit: int | None,
    dead: Sequence[str] = (),
    alert_ids: Sequence[int] | None = None,
) -> dict[str, Any]:
    """The parameters of ``alerts_sweep`` (the sweep's, and
    :meth:`crontabber.alerts.store.AlertStore.notices_claim`'s for some alerts only)."""
    return {
        "host": host,
        "claim_seconds": claim_seconds,
        "limit": limit,
        "dead": list(dead),
        "alert_ids": None if alert_ids is None else list(alert_ids),
        "this_host": host.rpartition(":")[0] or host,
    }


@functools.cache
def queries() -> dict[str, str]:
    """The alerts' SQL (``sql/crontabber/alerts.sql``), read when first used (a tick without
    alert targets never does)."""
    return sqlfiles.load("alerts.sql")


def quiet(
    swept: Swept, states: Mapping[str, "JobState"], names: Iterable[str], now: dt.datetime
) -> bool:
    """Nothing to send, nothing open, no window, and no configured job failing, overdue or
    running: the rules need not be read."""
    return not any(swept) and not any(needs_attention(states.get(name), now) for name in names)


class TickAlerts:
    """The alerts of a cron tick: its one sweep statement, and the alerter (the rules, their
    imports, a second look at the state for a blocker) only when the sweep or a job's state
    gives it something to do."""

    def __init__(
        self,
        settings: "Settings",
        jobs: list["Job"],
        store: "StateStore",
        holder: str,
        pid_alive: Callable[[int], bool],
        alerter: Callable[[], Any],
    ) -> None:
        """``holder``: this process (``host:pid``), who claims notices; ``pid_alive``: whether
        a process of this host lives; ``alerter()``: the alerter, called once, when needed
        (:func:`crontabber.alerts.alerter.tick_alerter`: this module does not import it)."""
        self.settings = settings
        self.jobs = jobs
        self.store = store
        self.holder = holder
        self.pid_alive = pid_alive
        self._make_alerter = alerter
        self._alerter: Any = None  # an Alerter (not imported here: it imports this module)
        self._broken: list[BrokenEntry] | None = None  # None: this pass did not say

    def alerter(self) -> Any:
        if self._alerter is None:
            self._alerter = self._make_alerter()
        return self._alerter

    def takeover(self, job: "Job", before: Any, run_id: int) -> None:
        self.alerter().takeover(job, before, run_id)

    def old_code(self, host: str, behind: tuple[int, ...]) -> None:
        self.alerter().old_code(host, behind)

    def broken(self, entries: list["BrokenEntry"]) -> None:
        """The jobs entries of this pass's jobs list that do not load (none: every one
        loads): each one's ``broken-entry`` alert opened, and at the end of the pass
        (:meth:`tick`) the open ones of entries not among them ended."""
        self._broken = list(entries)
        for entry in entries:
            self.alerter().broken_entry(entry)

    def checks_passed(self, app_name: str, run_id: int, broke: Sequence[str]) -> None:
        """A judged run broke only ``broke``: the job's open breach alerts it passed end
        (:meth:`crontabber.alerts.alerter.Alerter.checks_passed`)."""
        self.alerter().checks_passed(app_name, run_id, broke)

    def tick(self, states: Any, now: Any, fleet: Any = ()) -> None:
        """``fleet``: the hosts as the tick's first read saw them (the ``no-host`` alert)."""
        swept = sweep(self.store, self.holder, self.settings.alerts, self.pid_alive)
        homeless = unplaced(self.jobs, fleet)
        if homeless and any(host.drained for host in fleet):  # (a drain named: one read more)
            homeless = unplaced(self.jobs, fleet, drains_of(self.store.hosts()))
        if homeless or not quiet(swept, states, (job.app_name for job in self.jobs), now):
            self.alerter().tick(states, now, swept, homeless, self._broken)
