"""The lane a run goes through: where its units come from, how each is recorded, how its
lease is kept and how its end is written. A scheduled (or forced) run's lane is the job's row
(:class:`ScheduledLane`, over :class:`crontabber.store.StateStore`); a rerun's is its own
group of runs (:class:`RerunLane`, over :class:`crontabber.reruns.store.RerunStore`), which
leaves the job's row to the schedule. The supervisor (:mod:`crontabber.supervisor`) and the
runner's end of a run ask the lane and never which one it is.

Every write is conditional on the run's id (fencing): a run that lost the job writes nothing.
"""

from __future__ import annotations

import enum

TYPE_CHECKING = False
if TYPE_CHECKING:
    import datetime as dt
    from typing import Callable, Mapping, Protocol, Sequence

    from .reruns.store import RerunStore
    from .state import Claim, FinishRecord, JobState, RunEnd, RunKind, Unit
    from .store import StateStore

    #: ``(duration, last_error record, exception repr)`` of a failed run, for its log row.
    Logged = tuple[dt.timedelta, Mapping[str, str], str]
    #: What an end wrote: whether the run still held what it ended, the job's row as the end
    #: left it and the database's clock then (None, None: not known, or not the job's row).
    Ended = tuple[bool, JobState | None, dt.datetime | None]


class Units(enum.Enum):
    """Where a run's units come from."""

    OWN = "own"  # an ordinary job's one unit, written with the end of the run (one commit)
    CLAIMED = "claimed"  # a scheduled backfill's own intervals, each claimed before it runs
    PICKED = "picked"  # a rerun's: the lane picks (and claims) each next interval


if TYPE_CHECKING:

    class Lane(Protocol):
        """What a supervised run needs of where it runs."""

        @property
        def units(self) -> Units: ...

        def next_unit(self, proposed: dt.datetime | None) -> tuple[dt.datetime | None, str | None]:
            """The next unit, claimed for the run: ``(when, None)``; ``(None, why)``: the job
            waits (``why``: who holds it, or for what); ``(None, None)``: nothing left.
            ``proposed``: the interval the job itself would run next (:attr:`Units.CLAIMED`)."""
            ...

        def record(self, unit: Unit) -> bool:
            """Write one successful unit; False (nothing written) when the run lost the job."""
            ...

        def beat(self, output: tuple[str, int] | None) -> dt.datetime | None:
            """Renew the lease (saving the captured output when given); None when fenced off."""
            ...

        def finish(
            self,
            outcome: FinishRecord,
            end: RunEnd,
            failure: Logged | None,
            deferred: Sequence[Unit],
        ) -> Ended:
            """Write the end of the run (with the units not written yet)."""
            ...


class ScheduledLane:
    """A scheduled or forced run: the job's row holds its marker, its units and its end."""

    def __init__(
        self,
        store: StateStore,
        claim: Claim,
        kind: RunKind,
        depends_on: tuple[str, ...],
        backfill: bool,
        lease_seconds: float,
        gone_here: Callable[[str], bool],
    ) -> None:
        self.store, self.claim, self.kind, self.depends_on = store, claim, kind, depends_on
        self.units = Units.CLAIMED if backfill else Units.OWN
        self.lease_seconds, self.gone_here = lease_seconds, gone_here

    def next_unit(self, proposed: dt.datetime | None) -> tuple[dt.datetime | None, str | None]:
        if proposed is None:
            return None, None
        holder = self.store.claim_interval(
            self.claim, self.kind, proposed, self.lease_seconds, self.gone_here
        )
        return (proposed, None) if holder is None else (None, holder)

    def record(self, unit: Unit) -> bool:
        return self.store.record_success(self.claim, *unit)

    def beat(self, output: tuple[str, int] | None) -> dt.datetime | None:
        return self.store.heartbeat(self.claim, output)

    def finish(
        self, outcome: FinishRecord, end: RunEnd, failure: Logged | None, deferred: Sequence[Unit]
    ) -> Ended:
        return self.store.finish(
            self.claim,
            outcome,
            self.depends_on,
            failure=failure,
            units=deferred,
            end=end,
            ordinary=self.units is Units.OWN,
        )


class RerunLane:
    """A rerun's run: its group (first run ``root``) plans the intervals, ``parallel`` at once,
    strictly in order unless the job declares ``parallel_reruns``; the job's row is left alone."""

    units = Units.PICKED

    def __init__(
        self,
        reruns: RerunStore,
        claim: Claim,
        root: int,
        parallel: int,
        strict: bool,
        lease_seconds: float,
        gone_here: Callable[[str], bool],
    ) -> None:
        self.reruns, self.claim, self.root, self.parallel, self.strict = (
            reruns,
            claim,
            root,
            parallel,
            strict,
        )
        self.lease_seconds, self.gone_here = lease_seconds, gone_here

    def next_unit(self, proposed: dt.datetime | None) -> tuple[dt.datetime | None, str | None]:
        pick = self.reruns.next_interval(
            self.claim, self.root, self.lease_seconds, self.parallel, self.strict, self.gone_here
        )
        return pick.when, pick.wait

    def record(self, unit: Unit) -> bool:
        return self.reruns.record_lane_unit(self.claim, *unit)

    def beat(self, output: tuple[str, int] | None) -> dt.datetime | None:
        return self.reruns.lane_heartbeat(self.claim, output)

    def finish(
        self, outcome: FinishRecord, end: RunEnd, failure: Logged | None, deferred: Sequence[Unit]
    ) -> Ended:
        return self.reruns.finish_lane(self.claim, end, failure), None, None
