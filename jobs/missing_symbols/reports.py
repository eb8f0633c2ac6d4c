"""The daily report: one CSV per UTC day in the symbols bucket.

``reports/missing-symbols/YYYY-MM-DD.csv``, header
``debug_file,debug_id,code_file,code_id,count``, one row per symbol missed that
day with that day's count, by count descending (ties by the fields, so a
rebuilt report is byte-identical).

The names come from untrusted batch writers, and the report is opened in spreadsheets: a
cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, or with spaces
before one of those, is written with a single quote in front (OWASP's advice on CSV
injection), so no spreadsheet evaluates it as a formula; so is a cell that already begins
with a single quote. The rule for a program reading the report as data is then exact: a
text cell that begins with ``'`` had one added, strip exactly one. The count column is a
number and is written as is.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any, Iterable

from jobs.defaults import REPORTS_PREFIX

from .store import MissingSymbolStore

HEADER = ("debug_file", "debug_id", "code_file", "code_id", "count")

#: A cell beginning with one of these is a formula to a spreadsheet (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralised(cell: Any) -> Any:
    """``cell`` with a single quote in front when a spreadsheet would take it for a formula
    (spaces before it included), or when it begins with a quote already (so that stripping
    one leading quote always gives the name back); other values unchanged (the count stays a
    number)."""
    if isinstance(cell, str) and (
        cell.startswith("'") or cell.lstrip(" ").startswith(FORMULA_STARTS)
    ):
        return "'" + cell
    return cell


def report_key(day: dt.date, prefix: str = REPORTS_PREFIX) -> str:
    return f"{prefix}{day:%Y-%m-%d}.csv"


def write_csv(rows: Iterable[tuple[Any, ...]], out: Any) -> int:
    """Write the header and ``rows`` to the text stream ``out``; return the row count."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    count = 0
    for row in rows:
        writer.writerow([neutralised(cell) for cell in row])
        count += 1
    return count


def publish_report(
    store: MissingSymbolStore,
    s3_client: Any,
    bucket: str,
    day: dt.date,
    prefix: str = REPORTS_PREFIX,
) -> tuple[str, int]:
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
        s3_client.upload_fileobj(
            spool, bucket, key, ExtraArgs={"ContentType": "text/csv; charset=utf-8"}
        )
    return key, rows
