"""The first step of a tick's alerts, kept light: one statement that claims the notices due
and reads the open alerts and the maintenance windows. A tick whose sweep finds nothing and
whose jobs are all quiet (:func:`crontabber.scheduling.needs_attention`) stops here, without
importing the alert rules (:mod:`crontabber.alerts.alerter`, :mod:`crontabber.alerts.rules`)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from ..placement import no_live_host
from ..scheduling import needs_attention

if TYPE_CHECKING:
    from ..catalog import Job
    from ..config.settings import AlertSettings
    from ..state import FleetHost, JobState
    from ..store import StateStore

#: How many notices one tick claims at most (the rest wait for the next tick).
SWEEP_LIMIT = 50

Swept = tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dt.datetime]]


def sweep(store: "StateStore", host: str, config: "AlertSettings",
          pid_alive: Callable[[int], bool]) -> Swept:
    """Claim the notices due for ``host`` (``host:pid``); read the open alerts and the windows
    in force. A notice claimed by a process of this very host that is gone (killed while it
    sent) is claimed again at once, not after its claim's end: a second statement, only then
    (another host's claim is waited for: its process cannot be seen from here)."""
    from ..leases import holder_gone, parse_holder

    claimed, open_rows, mutes, held = store.alerts_sweep(host, config.claim_seconds, SWEEP_LIMIT)
    this_host = parse_holder(host)[0]
    dead = [holder for holder in held if holder_gone(holder, this_host, pid_alive)]
    if dead:
        claimed = claimed + store.alerts_sweep(host, config.claim_seconds,
                                               SWEEP_LIMIT - len(claimed), dead)[0]
    return claimed, open_rows, mutes


def quiet(swept: Swept, states: Mapping[str, "JobState"], names: Iterable[str], now: dt.datetime) -> bool:
    """Nothing to send, nothing open, no window, and no configured job failing, overdue or
    running: the rules need not be read."""
    return not any(swept) and not any(needs_attention(states.get(name), now) for name in names)


def unplaced(jobs: Iterable["Job"], fleet: Iterable["FleetHost"]) -> dict[str, str]:
    """The configured jobs no live host of ``fleet`` may run (their ``hosts`` tags: none
    carries one, or all that do are drained), each with the verdict saying so; {} when
    ``fleet`` is empty (not read: not a tick) or no job is placed."""
    hosts = tuple(fleet)
    if not hosts:
        return {}
    found = {job.app_name: no_live_host(job.hosts, hosts) for job in jobs if job.hosts}
    return {name: verdict for name, verdict in found.items() if verdict}
