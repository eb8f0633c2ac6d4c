"""Reruns (``--rerun NAME``): redo a backfill job's past intervals in a lane of their own.

- :mod:`.plan`: the pure rules: which intervals, in which order, why the others are skipped,
  which interval a run of a rerun group takes next (``now`` and the ledger's rows passed in);
- :mod:`.store`: every query of a rerun on the run ledger and the interval rows;
- :mod:`.request`: :func:`plan_rerun`, a command's request checked and planned over the ledger:
  the one :class:`RerunPlan` that ``--dry-run`` prints and the run executes;
- :mod:`.execute`: that plan shown (the dry run's lines) or carried out, part after part.

Not imported by a cron tick.
"""

from __future__ import annotations

from .request import RerunPlan, RerunRequest, plan_rerun

__all__ = ["RerunPlan", "RerunRequest", "plan_rerun"]
