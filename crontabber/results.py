"""What a runner says of each job it attempted (:class:`JobResult`): ran, failed, skipped,
held elsewhere, fenced off or paused; what the tick counts, the checks judge and the command
line turns into an exit code."""

from __future__ import annotations

import datetime as dt
import enum

from .errors import JobLockError, LeaseLost
from .frozen import Frozen


class Status(enum.Enum):
    RAN = "ran"
    FAILED = "failed"
    SKIPPED = "skipped"
    LOCKED = "locked"
    ONGOING = "ongoing"
    FENCED = "fenced"
    PAUSED = "paused"


class JobResult(Frozen):
    """What happened to one job in one invocation."""

    app_name: str
    status: Status
    detail: str = ""
    error: JobLockError | LeaseLost | None = None
    run_id: int | None = None
    # The job's one-line summary of each successful unit (interval, summary or None).
    summaries: tuple[tuple[dt.datetime, str | None], ...] = ()

    @property
    def summary(self) -> str | None:
        """The run's summary: its last unit's."""
        return next((text for _, text in reversed(self.summaries) if text), None)


def first_fenced(results: list[JobResult]) -> LeaseLost | None:
    """The first run of a tick that was fenced off (it makes the tick exit 4). A job held by
    another runner (its row locked that moment, or a live run on another host) is not one:
    in a fleet that is every tick's normal case, and the tick exits 0."""
    return next((r.error for r in results if isinstance(r.error, LeaseLost)), None)
