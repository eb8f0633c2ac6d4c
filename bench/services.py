"""The local services for benchmarks: a database's settings, a fresh database (both from
:mod:`devservices.databases`), s3proxy's pid and a process's CPU time. Addresses and places
come from :mod:`devservices`."""

from __future__ import annotations

import os
from pathlib import Path

import devservices
from devservices.databases import database, fresh_database

__all__ = ["cpu_seconds", "database", "fresh_database", "s3proxy_pid"]


def cpu_seconds(pid: int | str) -> float:
    """User + system CPU seconds of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def s3proxy_pid() -> int | None:
    """The local s3proxy's pid (scripts/services.sh writes it), or None."""
    try:
        return int(devservices.current().s3proxy_pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
