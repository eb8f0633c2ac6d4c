"""Where the jobs' data lives when crontabber.ini says nothing: one declaration per place.

Several jobs meet at the same place in S3 (``enqueue`` stores archives where the prune job
deletes finished ones; the missing-symbols job writes reports where prune expires them), so
each place's default is declared once, here, and every job's option refers to it: two
copies drifted once (prune looked under ``uploads/`` while archives were stored
under ``inbox/``). Plain constants: the runner imports every job module on each tick, and
this costs it nothing.
"""

from __future__ import annotations

#: The bucket of uploaded archives and missing-symbol batches.
INBOX_BUCKET = "symbols-inbox"
#: Archives stored by ``python -m jobs.uploads enqueue`` (and pruned once finished).
UPLOADS_PREFIX = "inbox/"
#: Missing-symbol batches (msgpack), consumed by ``missing-symbols``.
MISSING_PREFIX = "missing/"
#: The bucket of symbol files and reports.
SYMBOLS_BUCKET = "symbols"
#: Symbol files: ``<prefix><debug_file>/<DEBUG_ID>/<file>``; never pruned unless a rule names it.
SYMBOLS_PREFIX = "v1/"
#: Daily missing-symbols reports.
REPORTS_PREFIX = "reports/missing-symbols/"
