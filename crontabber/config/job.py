"""Public helper for job commands: a job's ``self.config`` outside a cron tick.

Operator commands (``python -m jobs.uploads reprocess ID``) need the same
options the job gets from ``crontabber.ini``, the environment and overrides.
"""

from __future__ import annotations

from typing import Mapping

from ..schedule import JobEntry, parse_schedule
from .catalog import Job, job_config, names_known
from .names import check_names
from .options import DotDict
from .settings import load_settings


def load_job_config(
    cls: type, conf_path: str | None = None, overrides: Mapping[str, str] | None = None
) -> DotDict:
    """The config a job of class ``cls`` would get (schedule from the jobs list
    if it is configured there, else ``1d``).

    ``overrides`` (a job command's ``--crontabber.class-X.opt=value``) are checked as
    strictly as the runner's command line: a name neither the runner nor this job
    declares is an error naming the closest known one.

    Raises:
        ConfigurationError: bad file, names or values.
    """
    settings = load_settings(conf_path, overrides or {})
    path = f"{cls.__module__}.{cls.__name__}"
    entry = next(
        (e for e in settings.entries if e.class_path == path),
        JobEntry(path, "1d", None, f"{path}|1d"),
    )
    job = Job(
        getattr(cls, "app_name", cls.__name__),
        cls,
        entry,
        parse_schedule(entry.frequency, entry.time),
        (),
    )
    check_names(names_known(settings.sources, [job]), settings.sources.cli, None)
    return job_config(job, settings.sources)
