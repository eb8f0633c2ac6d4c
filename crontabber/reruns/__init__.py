"""Reruns (``--rerun NAME``): redo a backfill job's past intervals in a lane of their own.

- :mod:`.plan`: the pure rules: which intervals, in which order, why the others are skipped,
  which interval a run of a rerun group takes next (``now`` and the ledger's rows passed in);
- :mod:`.store`: every query of a rerun on the run ledger and the interval rows.
"""
