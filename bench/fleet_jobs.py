"""No-op jobs for ``python -m bench fleet``: as many as a crontabber.ini names.

``bench.fleet_jobs.Noop0042`` is a job class whose ``app_name`` is ``noop-0042`` and whose
``run()`` does nothing: built on first access (PEP 562's module ``__getattr__``), so an INI
can list 10,000 of them without 10,000 class statements. The runner imports them by dotted
path like any job; only the bench uses them.
"""

from __future__ import annotations

import functools
import re

from crontabber.base import BaseCronApp

NAME = re.compile(r"Noop(\d{4,})")


def class_name(index: int) -> str:
    """The class name of no-op job ``index`` (``Noop0042``)."""
    return f"Noop{index:04d}"


def app_name(index: int) -> str:
    """The app name of no-op job ``index`` (``noop-0042``)."""
    return f"noop-{index:04d}"


class NoopJob(BaseCronApp):
    """A job that does nothing: what a run costs the runner, without the job's own work."""

    app_name = "noop"

    def run(self) -> None:
        return None


@functools.cache
def _job(name: str) -> type[NoopJob]:
    index = int(name.removeprefix("Noop"))
    return type(name, (NoopJob,), {"app_name": app_name(index), "__module__": __name__})


def __getattr__(name: str) -> type[NoopJob]:
    if NAME.fullmatch(name):
        return _job(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
