"""The daily report: one CSV per UTC day in the symbols bucket.

``reports/missing-symbols/YYYY-MM-DD.csv``, header
``debug_file,debug_id,code_file,code_id,count``, one row per symbol missed that
day with that day's count, by count descending (ties by the fields, so a
rebuilt report is byte-identical).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any, Iterable

from jobs.defaults import REPORTS_PREFIX

from .store import MissingSymbolStore

HEADER = ("debug_file", "debug_id", "code_file", "code_id", "count")


def report_key(day: dt.date, prefix: str = REPORTS_PREFIX) -> str:
    return f"{prefix}{day:%Y-%m-%d}.csv"


def write_csv(rows: Iterable[tuple[Any, ...]], out: Any) -> int:
    """Write the header and ``rows`` to the text stream ``out``; return the row count."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    count = 0
    for row in rows:
        writer.writerow(row)
        count += 1
    return count


def publish_report(store: MissingSymbolStore, s3_client: Any, bucket: str, day: dt.date,
                   prefix: str = REPORTS_PREFIX) -> tuple[str, int]:
    """Build ``day``'s report and upload it (overwriting an earlier one); return
    (key, rows). The CSV is spooled to a temporary file past 16 MiB.

    Raises:
        botocore.exceptions.ClientError: S3 refused the upload.
    """
    import tempfile

    key = report_key(day, prefix)
    with tempfile.SpooledTemporaryFile(max_size=16 << 20) as spool:
        text = io.TextIOWrapper(spool, encoding="utf-8", newline="")
        rows = write_csv(store.report_rows(day), text)
        text.flush()
        text.detach()  # the spool stays open for the upload
        spool.seek(0)
        s3_client.upload_fileobj(spool, bucket, key,
                                 ExtraArgs={"ContentType": "text/csv; charset=utf-8"})
    return key, rows
