"""Which due job of a pass may start now, beside the runs in flight: the pure rule of
``max_parallel_jobs`` (:meth:`crontabber.runner.Runner.run_all`).

- At most ``cap`` runs at once (``1``: crontabber's serial pass, in its order).
- A job waits for its parents of the same pass: one still waiting or running holds it back
  (once they ended, the job's own checks judge it by their new rows: a parent that failed
  blocks it with the dependency reason, as ever).
- A job whose class says ``parallel = False`` runs alone: it starts only when nothing else
  runs, and nothing starts beside it. The jobs after it do not wait for it meanwhile (a
  5-minute job is never held behind an hour-long run); a pass attempts each job once, so
  the job runs at the latest once the others have ended.
- Otherwise jobs start in the pass's order (parents first, alphabetical within a layer).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Collection, Iterator, Sequence

    from .config.catalog import Job


def runs_alone(job: Job) -> bool:
    """Whether the job's class says it runs alone (``parallel = False``; a class without the
    attribute, a crontabber 0.18 app's, runs beside others)."""
    return getattr(job.cls, "parallel", True) is False


def may_start(
    waiting: Sequence[Job], running: Collection[str], alone_running: bool, cap: int
) -> Iterator[Job]:
    """Each job of ``waiting`` (the pass's jobs not yet attempted, in its order) that may
    start now beside ``running`` (the app names of the runs in flight; ``alone_running``: one
    of them runs alone), in that order: the candidates of the pass's next claim, of which it
    starts the first that no other runner has taken (none: wait for a run to end)."""
    if len(running) >= cap or alone_running:
        return
    before: set[str] = set()
    for job in waiting:
        held = any(parent in running or parent in before for parent in job.depends_on)
        before.add(job.app_name)
        if held:
            continue
        if runs_alone(job) and running:
            continue
        yield job


def next_to_start(
    waiting: Sequence[Job], running: Collection[str], alone_running: bool, cap: int
) -> Job | None:
    """The first job of :func:`may_start`; None: none may start, wait for a run to end."""
    return next(may_start(waiting, running, alone_running, cap), None)
