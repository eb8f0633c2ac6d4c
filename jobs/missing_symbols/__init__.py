"""Missing-symbol counts: msgpack batches in S3 -> Postgres, daily CSV reports.

- :func:`write_batch`: the writer the download tier (and tests, operators) use;
- :class:`MissingSymbolsCronApp`: consumes batches exactly once;
- :class:`MissingSymbolsReportCronApp`: daily backfilled CSV reports;
- :class:`MissingSymbolsRetentionCronApp`: deletes old counts in batches.

``python -m jobs.missing_symbols write FILE.jsonl`` and ``... demo``: see cli.py.
Modules: model (fields, validation), aggregate (streaming decode and counts),
inbox (S3 and worker processes), consume (transactions), store (all SQL),
reports (CSV), writer (the batch format), apps (crontabber apps), cli.
"""

from __future__ import annotations

from .apps import MissingSymbolsCronApp, MissingSymbolsReportCronApp, MissingSymbolsRetentionCronApp

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def __getattr__(name: str) -> Any:
    """``write_batch`` is imported on first use: the runner imports this package every tick."""
    if name == "write_batch":
        from .writer import write_batch

        return write_batch
    raise AttributeError(name)


__all__ = [
    "MissingSymbolsCronApp",
    "MissingSymbolsReportCronApp",
    "MissingSymbolsRetentionCronApp",
    "write_batch",
]
