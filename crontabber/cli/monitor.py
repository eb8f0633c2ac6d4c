"""The commands of monitoring: ``--nagios`` (text or ``--json``), the fleet record of a
tick and ``--metrics-file``. Parse, call, print: the checks are
:func:`crontabber.nagios.nagios_check`, the file's text :func:`crontabber.metrics.render_textfile`.

nagios and metrics are imported where used: an idle cron tick without a metrics file needs
neither.
"""

from __future__ import annotations

import os
from typing import Any, TextIO

from .. import __version__
from ..catalog import Job
from ..config.settings import Settings
from ..runner import Runner, this_host
from ..state import Tick
from ..store import StateStore
from .common import Context


def fleet_tick() -> Tick:
    """What this invocation records in ``crontabber_host`` when it runs as a cron tick."""
    return Tick(this_host(), __version__, os.getpid())


def nagios(ctx: Context) -> int:
    """``--nagios``: print the check (text, or one JSON object with ``--json``); return its
    code."""
    from .. import jsonout
    from ..nagios import nagios_check

    overview = ctx.store.overview()
    runner = Runner(ctx.settings, ctx.jobs, ctx.store)
    result = nagios_check(ctx.jobs, overview.states, overview.hosts, overview.now,
                          lambda state: runner.marker(state, overview.now), ctx.settings.monitor)
    if ctx.args.json:
        jsonout.emit(result.as_json(), ctx.out)
    else:
        print("\n".join(result.lines), file=ctx.out)
    return result.code


def nagios_failure(exc: BaseException, args: Any, out: TextIO) -> int:
    """A check that could not be made (bad configuration, no database) is CRITICAL,
    in the format asked for; never a traceback."""
    from .. import jsonout
    from ..nagios import NAGIOS_CRITICAL

    problem = str(exc) or type(exc).__name__
    if getattr(args, "json", False):
        jsonout.emit({"status": "CRITICAL", "code": NAGIOS_CRITICAL,
                      "summary": f"CRITICAL - {problem}",
                      "entries": [{"level": "CRITICAL", "kind": "error", "subject": "",
                                   "text": problem}],
                      "perfdata": {}}, out)
    else:
        print(f"CRITICAL - {problem}", file=out)
    return NAGIOS_CRITICAL


def metrics_path(settings: Settings, args: Any) -> str:
    """Where to write the metrics file: ``--metrics-file``, else ``crontabber.metrics_file``
    ('' for nowhere)."""
    return str(getattr(args, "metrics_file", "") or settings.monitor.metrics_file)


def write_metrics(settings: Settings, jobs: list[Job], store: StateStore, args: Any) -> None:
    """After a tick: read the state once more (the jobs it ran changed it) and
    replace the metrics file, if one is configured.

    Raises:
        MetricsFileNotWritten: the file could not be written.
        DatabaseUnavailable: the state could not be read.
    """
    path = metrics_path(settings, args)
    if not path:
        return
    from ..metrics import render_textfile, write_atomically

    write_atomically(path, render_textfile(jobs, store.overview([job.app_name for job in jobs])))
