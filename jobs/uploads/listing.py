"""What ``python -m jobs.uploads list`` and ``show ID`` print: pure (rows of
:class:`~jobs.uploads.store.UploadStore` in, text lines or ``--json`` objects out).

Times are UTC in the runner's one format (``2026-11-23 12:00:00 UTC``); ages and durations
are short (``45s``, ``12m``, ``3h``, ``2d``) and counted on the database's clock (each row's
``now``). In ``--json``, times are ISO 8601 UTC and durations seconds
(:mod:`crontabber.jsonout`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping

from crontabber import one_line, printable, utc_text

Row = Mapping[str, Any]

LIST_HEADER = ("ID", "STATUS", "AGE", "FILES", "SIZE", "KEY", "ERROR")


def span(seconds: float) -> str:
    """A short duration: ``45s``, ``12m``, ``3h``, ``2d`` (rounded down)."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def size(count: int | None) -> str:
    """Bytes, short: ``812B``, ``4.1kB``, ``12.0MB``, ``1.3GB``."""
    if count is None:
        return "-"
    value = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{int(value)}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1000
    raise AssertionError("unreachable")


def _files(row: Row) -> str:
    return "-" if row["files_total"] is None else str(row["files_total"])


def list_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The ``list`` table: a header, then one line per upload (newest first), columns
    padded to their widest cell; the error, last, is never cut."""
    cells = [LIST_HEADER] + [
        (
            str(row["id"]),
            row["status"],
            span((row["now"] - row["created_at"]).total_seconds()),
            _files(row),
            size(row["size"]),
            printable(row["inbox_key"]),
            one_line(row["error"]) or "-",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(LIST_HEADER) - 1)]
    return [
        "  ".join([*(cell.ljust(width) for cell, width in zip(line, widths)), line[-1]]).rstrip()
        for line in cells
    ]


def upload_json(row: Row) -> dict[str, Any]:
    """One upload as ``list --json`` and ``show --json`` give it."""
    return {
        "id": row["id"],
        "status": row["status"],
        "key": row["inbox_key"],
        "filename": row["filename"],
        "size": row["size"],
        "uploaded_by": row["uploaded_by"],
        "attempts": row["attempts"],
        "claimed_by": row["claimed_by"],
        "files": {
            "total": row["files_total"],
            "uploaded": row["files_uploaded"],
            "skipped": row["files_skipped"],
            "ignored": row["files_ignored"],
        },
        "bytes_uploaded": row["bytes_uploaded"],
        "error": row["error"],
        "created_at": row["created_at"],
        "claimed_at": row["claimed_at"],
        "completed_at": row["completed_at"],
        "age_seconds": (row["now"] - row["created_at"]).total_seconds(),
        "duration_seconds": _duration(row),
    }


def _duration(row: Row) -> float | None:
    """From queued to completed (None until it completes)."""
    if row["completed_at"] is None:
        return None
    elapsed: dt.timedelta = row["completed_at"] - row["created_at"]
    return elapsed.total_seconds()


def show_json(row: Row, files: list[dict[str, Any]]) -> dict[str, Any]:
    """``show ID --json``: the upload, ``files_written`` and the objects listed."""
    return {
        **upload_json(row),
        "files_written": row["files_written"],
        "written": [dict(f) for f in files],
    }


def show_lines(row: Row, files: list[dict[str, Any]]) -> list[str]:
    """``show ID``: the upload's facts, one per line, then the objects listed."""
    now = row["now"]
    lines = [
        f"upload {row['id']}: {row['status']} (attempt {row['attempts']})",
        f"  key        {printable(row['inbox_key'])} ({printable(row['filename'])}, "
        f"{size(row['size'])}, by {printable(row['uploaded_by']) or 'unknown'})",
        f"  queued     {utc_text(row['created_at'])} "
        f"({span((now - row['created_at']).total_seconds())} ago)",
    ]
    if row["claimed_at"] is not None:
        lines.append(
            f"  claimed    {utc_text(row['claimed_at'])} by {printable(row['claimed_by'])} "
            "(the last claim or heartbeat)"
        )
    if row["completed_at"] is not None:
        lines.append(
            f"  completed  {utc_text(row['completed_at'])} ({span(_duration(row) or 0)} after it "
            "was queued)"
        )
    lines.append(f"  files      {_file_counts(row)}")
    lines.append(f"  error      {one_line(row['error']) or '-'}")
    if files:
        more = row["files_written"] - len(files)
        lines.append(
            "  written"
            + (
                f" (the first {len(files)} of {row['files_written']}, in key order; --files N for "
                "more)"
                if more > 0
                else ""
            )
        )
        lines += [line for f in files for line in _file_lines(f)]
    return lines


def _file_lines(row: Row) -> list[str]:
    """One object written: its key, size and flags; its code id; what it replaced."""
    lines = [
        f"    {printable(row['key'])}  {size(row['size'])}"
        f"{'  gzip' if row['compressed'] else ''}{'  replaced' if row['update'] else ''}"
    ]
    if row.get("code_id"):
        lines.append(
            f"      code id {printable(row['code_id'])}"
            + (f" ({printable(row['code_file'])})" if row.get("code_file") else "")
        )
    if row["update"]:
        by = (
            f"upload {row['previous_upload_id']}"
            if row.get("previous_upload_id") is not None
            else "an unknown upload"
        )
        was = (
            f"{size(row['previous_size'])}, MD5 {row['previous_md5']}"
            if row.get("previous_md5")
            else "size and MD5 unknown"
        )
        lines.append(f"      replaced the file of {by} ({was})")
    return lines


def _file_counts(row: Row) -> str:
    written = f"{row['files_written']} written so far"
    if row["files_total"] is None:
        return written
    counted = [f"{row['files_total']} in the archive"]
    counted += [
        f"{row[k]} {word}"
        for k, word in (
            ("files_uploaded", "uploaded"),
            ("files_skipped", "already there"),
            ("files_ignored", "ignored"),
        )
        if row[k] is not None
    ]
    return ", ".join(counted) + f"; {written}"
