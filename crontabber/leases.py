"""Pure rules of ``ongoing`` markers: who holds a job, and whether that
holder is still alive.

A run holds its job through the marker on the job's state row: ``ongoing``
(since when), ``ongoing_by`` (``host:pid``), ``run_id`` (its fencing token)
and ``heartbeat`` (its last renewal, on the database clock). Another runner
may take the job over when the marker is no longer live:

- **expired**: its heartbeat is older than ``lease_seconds``;
- **dead**: its holder is a process of this very host that no longer exists
  (no need to wait for the lease);
- **stale**: it has no heartbeat (set by crontabber 0.18, which shares the
  table) and is older than ``max_ongoing_age_hours``, crontabber's rule.

Nothing here touches the database, the clock or the process table: ``now``
and a ``pid_alive`` function are passed in, so these rules are tested in
milliseconds.
"""

from __future__ import annotations

import datetime as dt
import enum

from .formats import relative, utc_text
from .frozen import Frozen
from .state import JobState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


class Marker(enum.Enum):
    """What an ``ongoing`` marker means to a runner looking at it."""

    NONE = "none"  # nobody holds the job
    LIVE = "live"  # held by a run that is alive, as far as anyone can tell
    EXPIRED = "expired"  # its heartbeat is older than the lease
    DEAD = "dead"  # its holder was a process of this host that is gone
    STALE = "stale"  # no heartbeat, older than max_ongoing_age_hours (crontabber 0.18)

    @property
    def takeable(self) -> bool:
        """Whether another run may take the job over (or an operator release it)."""
        return self in (Marker.EXPIRED, Marker.DEAD, Marker.STALE)


class LeaseRules(Frozen):
    """The lease settings and the identity of the host applying them."""

    lease_seconds: float
    max_ongoing_age_hours: float
    host: str


def holder_name(host: str, pid: int) -> str:
    """The one spelling of who holds something: ``host:pid``."""
    return f"{host}:{pid}"


def parse_holder(holder: str | None) -> tuple[str, int | None]:
    """``host:pid`` split back; the pid is None when the text has none."""
    if not holder:
        return "", None
    host, sep, pid = holder.rpartition(":")
    if not sep or not pid.isdigit():
        return holder, None
    return host, int(pid)


def holder_gone(holder: str | None, host: str, pid_alive: Callable[[int], bool]) -> bool:
    """Whether ``holder`` (``host:pid``) was a process of ``host`` (this very host) that no
    longer exists: what it claimed (a job, a notice) waits for nobody."""
    claimer_host, pid = parse_holder(holder)
    return claimer_host == host and pid is not None and not pid_alive(pid)


def marker_status(
    state: JobState | None,
    now: dt.datetime,
    rules: LeaseRules,
    pid_alive: Callable[[int], bool],
) -> Marker:
    """Classify the job's ``ongoing`` marker at ``now`` (the database clock)."""
    if state is None or state.ongoing is None:
        return Marker.NONE
    if holder_gone(state.ongoing_by, rules.host, pid_alive):
        return Marker.DEAD
    if state.heartbeat is not None:
        if now - state.heartbeat > dt.timedelta(seconds=rules.lease_seconds):
            return Marker.EXPIRED
        return Marker.LIVE
    # Without a heartbeat: crontabber 0.18's bound, counting whole days.
    if now - state.ongoing >= dt.timedelta(hours=rules.max_ongoing_age_hours):
        return Marker.STALE
    return Marker.LIVE


class Beats(Frozen):
    """How often a run renews its lease (``heartbeat_seconds``) and how long a lease lasts
    without renewal (``lease_seconds``): ``[crontabber]``'s settings."""

    heartbeat_seconds: float
    lease_seconds: float


def beats_missed(heartbeat: dt.datetime | None, now: dt.datetime, beats: Beats) -> int:
    """How many renewals a live holder has missed at ``now`` (0: none, or one late,
    which is only jitter; without a heartbeat, 0): a host that died shows so before its
    lease expires."""
    if heartbeat is None or beats.heartbeat_seconds <= 0:
        return 0
    missed = int((now - heartbeat).total_seconds() // beats.heartbeat_seconds)
    return missed if missed >= 2 else 0


def lease_expiry(state: JobState, rules: LeaseRules) -> dt.datetime | None:
    """When a live marker stops being live unless renewed (None without a marker)."""
    if state.ongoing is None:
        return None
    if state.heartbeat is not None:
        return state.heartbeat + dt.timedelta(seconds=rules.lease_seconds)
    return state.ongoing + dt.timedelta(hours=rules.max_ongoing_age_hours)


def describe_marker(state: JobState, status: Marker, now: dt.datetime) -> str:
    """One line about a marker for operators: holder, since, last heartbeat, verdict."""
    since = f"since {utc_text(state.ongoing)}" if state.ongoing else ""
    beat = "no heartbeat (a crontabber 0.18 runner?)"
    if state.heartbeat is not None:
        beat = f"last heartbeat {relative(state.heartbeat, now)}"
    holder = state.ongoing_by or "an unknown runner"
    verdict = {
        Marker.LIVE: "",
        Marker.EXPIRED: "; its lease has expired",
        Marker.DEAD: "; that process no longer exists",
        Marker.STALE: "; older than max_ongoing_age_hours",
        Marker.NONE: "",
    }[status]
    run = f" (run {state.run_id})" if state.run_id is not None else ""
    return f"{holder}{run} {since}, {beat}{verdict}"


def retry_delay(errors_in_a_row: int, base: float, backoff: float, cap: float) -> float:
    """Seconds before a failed job is due again.

    ``base`` after the first failure, multiplied by ``backoff`` for each
    further failure in a row, never more than ``cap`` (a ``backoff`` of 1 or
    less keeps crontabber's constant ``error_retry_time``).
    """
    delay = base * backoff ** max(0, errors_in_a_row - 1) if backoff > 1 else base
    return min(delay, cap) if cap > 0 else delay
