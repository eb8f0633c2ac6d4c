"""Running out of memory while consuming batches: what counts as it, where it happened, and
the reason a batch is quarantined for it.

Memory runs out as a ``MemoryError`` (Python's allocator) or as an ``OSError`` with
``ENOMEM`` (a C library call's ``malloc``, e.g. ``opendir`` while importing), in a decoding
worker (past ``worker_memory_mb``) or in the job's own process. Every one of them, at every
stage of a batch's life, is turned into :class:`OutOfMemory`, which the job handles by
reading each batch of the group alone (see consume.py): the batch that runs out alone is
quarantined with :func:`reason`, the others are counted.
"""

from __future__ import annotations

import errno

from crontabber.errors import CrontabberError

# The stages of a batch's life, as a reason names them ("out of memory: <stage> alone ...").
#: Streaming a batch and counting its events by their bytes (in a worker).
DECODING = "decoding it"
#: Decoding, validating and folding its distinct events into counts (in a worker when its
#: pending events reach the bound; in the job's process for the merged group).
SETTLING = "settling its events"
#: Pickling a worker's result to send it to the job (in the worker).
RETURNING = "returning its events to the job"
#: Unpickling a worker's result (in the job's process).
RECEIVING = "receiving its events from the worker"
#: Merging the workers' results (in the job's process).
MERGING = "merging its events"


class OutOfMemory(CrontabberError):
    """Memory ran out while ``stage`` (one of this module's stages), in a decoding worker
    or (``in_job``) in the job's own process. What was being built must be discarded."""

    def __init__(self, stage: str, in_job: bool = False) -> None:
        self.stage = stage
        self.in_job = in_job
        where = "the job's process" if in_job else "a decoding worker"
        super().__init__(f"out of memory in {where}: {stage}")

    def __reduce__(self) -> tuple[type, tuple[str, bool]]:
        # a worker returns it to the job: pickled by its fields, not by its message
        return (OutOfMemory, (self.stage, self.in_job))


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is memory running out: a MemoryError or an ENOMEM OSError."""
    return isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM)


def remote_out_of_memory(text: str) -> bool:
    """Whether a remote traceback's ``text`` (how ``concurrent.futures`` reports an
    exception of its result-reading thread) ends in a MemoryError or an ENOMEM OSError."""
    lines = [line for line in text.strip().strip("'").splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last.startswith("MemoryError") or (
        last.startswith("OSError") and f"[Errno {errno.ENOMEM}]" in last
    )


def reason(failure: OutOfMemory, worker_memory_mb: int) -> str:
    """The quarantine reason of a batch that ran out of memory alone: names the stage, and
    the limit (``worker_memory_mb``) or the job's process."""
    if failure.in_job:
        return (
            f"out of memory: {failure.stage} alone needed more memory than the job's process could "
            "get"
        )
    return (
        f"out of memory: {failure.stage} alone needed more than worker_memory_mb "
        f"({worker_memory_mb} MiB)"
    )
