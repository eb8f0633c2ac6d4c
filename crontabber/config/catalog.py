"""Load the configured jobs: import each class, read its schedule overrides
and options, and check the whole list before anything runs.

Every problem is a :class:`ConfigurationError` naming the offending entry:
an unknown module or class, a class without ``app_name``, a duplicate
``app_name`` or namespace, a bad frequency, time or option value, a cycle,
an option or ``[[class-X]]`` section that nothing declares (:mod:`.names`).

:func:`load_jobs` refuses the file on the first problem (``--configtest``).
:func:`load_catalog` is what every other command and the dashboard use: an entry whose
class does not load (a module that no longer imports after a deploy, a class gone or
without ``app_name``) is left out as a :class:`BrokenEntry`, so the other jobs still run
and are still shown; any other problem still refuses the file.
"""

from __future__ import annotations

import functools
import importlib
import logging

from ..errors import ConfigurationError
from ..frozen import Frozen
from ..placement import parse_tags
from ..schedule import (
    JobEntry,
    Schedule,
    check_zone,
    looks_like_cron,
    parse_duration,
    parse_schedule,
    with_delay,
)
from ..scheduling import dependency_order, normalize_depends_on
from .names import KnownNames, check_names, check_sections, environment_notes, known_names
from .options import NO_VALUE, DotDict, Namespace
from .settings import Settings, Sources, renamed_message, runner_options


class Job(Frozen):
    """A configured job: its class, schedule and place in the config."""

    app_name: str
    cls: type
    entry: JobEntry
    schedule: Schedule
    depends_on: tuple[str, ...]
    hosts: tuple[str, ...] = ()  # its ``hosts`` option: the tags of the hosts that may claim it

    @property
    def class_path(self) -> str:
        return f"{self.cls.__module__}.{self.cls.__name__}"

    @property
    def namespace(self) -> tuple[str, ...]:
        """crontabber's config namespace of the job: ``crontabber.class-<ClassName>``."""
        return ("crontabber", f"class-{self.cls.__name__}")

    @property
    def is_backfill(self) -> bool:
        return bool(getattr(self.cls, "_is_backfill_app", False))

    @property
    def parallel_reruns(self) -> bool:
        """Whether the job declares that its intervals may be rerun at once (``--rerun
        --parallel N``): its class's ``parallel_reruns``."""
        return bool(getattr(self.cls, "parallel_reruns", False))

    def matches(self, name: str) -> bool:
        """Whether ``--job NAME`` means this job (app name or dotted class path)."""
        return name in (self.app_name, self.class_path, self.entry.class_path)


class BrokenEntry(Frozen):
    """A jobs entry whose class does not load, and why: a tick runs the other jobs, the
    read commands and the dashboard show it as an error row, the alerts tell of it once."""

    entry: JobEntry
    error: ConfigurationError

    @property
    def name(self) -> str:
        """What the commands call it: its class path (it has no app name it could tell)."""
        return self.entry.class_path

    @property
    def problem(self) -> str:
        """The error without the ``configuration error in ...`` prefix."""
        return self.error.problem

    def matches(self, name: str) -> bool:
        """Whether a command's NAME means this entry: its class path, its class name, or the
        entry as written."""
        return name in (self.entry.class_path, self.entry.class_name, self.entry.text)


class Catalog(Frozen):
    """The jobs that load, in config order, and the entries that do not."""

    jobs: list[Job]
    broken: list[BrokenEntry]

    def broken_entry(self, name: str) -> BrokenEntry | None:
        """The broken entry ``name`` means, if any."""
        return next((entry for entry in self.broken if entry.matches(name)), None)


def import_class(entry: JobEntry) -> type:
    """Import the class an entry names.

    Raises:
        ConfigurationError: naming the entry and why the import failed.
    """
    module_name, _, class_name = entry.class_path.rpartition(".")
    where = f"jobs entry {entry.text!r}"
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(where, f"cannot import module {module_name!r}: {exc}") from None
    except Exception as exc:  # a job module that raises on import: report, don't crash
        raise ConfigurationError(
            where, f"importing {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise ConfigurationError(where, f"module {module_name!r} has no class {class_name!r}")
    return cls


@functools.cache
def job_options(cls: type) -> Namespace:
    """The options of a job: ``frequency``, ``time`` and its ``required_config``; built once
    per class (a tick reads them twice per job: its values, then the names in use), and
    never changed by its readers."""
    base = Namespace()
    _add_schedule_options(base)
    _add_retry_options(base)
    _add_alert_options(base)
    _add_check_options(base)
    required = getattr(cls, "required_config", None)
    return base.merged(required) if isinstance(required, Namespace) else base


def _add_schedule_options(base: Namespace) -> None:
    """Add to ``base`` when a job runs: ``frequency``, ``time``, ``time_zone``, ``timeout``."""
    base.add_option(
        "frequency",
        "",
        "how often the job runs (from the jobs list): 5m, 1d, or a cron expression (0 3 * * 1-5)",
    )
    base.add_option("time", "", "time of day HH:MM, in the job's time_zone (from the jobs list)")
    base.add_option(
        "time_zone",
        "UTC",
        "the zone whose clocks its cron expression or HH:MM reads (IANA name: Europe/Berlin)",
        reference_value_from="crontabber",
        from_string_converter=check_zone,
    )
    base.add_option(
        "timeout",
        "",
        "seconds the job may run (0: no limit; empty: crontabber.default_timeout_seconds)",
        from_string_converter=_seconds,
    )


def _add_retry_options(base: Namespace) -> None:
    """Add to ``base`` what follows a failure or a late interval: the retry wait
    (``error_retry_time``, ``error_backoff``, ``error_retry_max``), ``settle_lag``, ``jitter``."""
    base.add_option(
        "error_retry_time",
        300,
        "seconds after a failure before a retry",
        reference_value_from="crontabber",
    )
    base.add_option(
        "error_backoff",
        1.0,
        "retry wait multiplier per further failure in a row",
        reference_value_from="crontabber",
    )
    base.add_option(
        "error_retry_max",
        86400,
        "the longest retry wait, in seconds",
        reference_value_from="crontabber",
    )
    base.add_option(
        "settle_lag",
        "0",
        "run interval T only after T + this (seconds, or 30m, 6h; with jitter, shorter than the "
        "job's frequency)",
        reference_value_from="crontabber",
        from_string_converter=parse_duration,
    )
    base.add_option(
        "jitter",
        "0",
        "start a fixed offset within this after the job's time, derived from its name (seconds, "
        "or 10m)",
        reference_value_from="crontabber",
        from_string_converter=parse_duration,
    )


def _add_alert_options(base: Namespace) -> None:
    """Add to ``base`` when and to whom the job's alerts go (``alert_*``)."""
    base.add_option(
        "alert_after_failures",
        2,
        "alert after this many failures in a row (0: never)",
        reference_value_from="crontabber",
    )
    base.add_option(
        "alert_on_recovery", True, "alert when it recovers", reference_value_from="crontabber"
    )
    base.add_option(
        "alert_silence",
        "1h",
        "alert when not run this long after due (0: never)",
        reference_value_from="crontabber",
        from_string_converter=parse_duration,
    )
    base.add_option(
        "alert_realert",
        "4h",
        "alert again this often while failing or silent (0: once)",
        reference_value_from="crontabber",
        from_string_converter=parse_duration,
    )
    base.add_option(
        "alert_on_takeover",
        True,
        "alert when a dead host's run is taken over",
        reference_value_from="crontabber",
    )
    base.add_option(
        "alert_to",
        "",
        "target names, comma-separated (empty: every target)",
        reference_value_from="crontabber",
    )


def _add_check_options(base: Namespace) -> None:
    """Add to ``base`` the ``hosts`` that may claim the job and what its runs must meet: the
    interval's ``deadline``, the checks on a successful run (``min_duration``, ``slower_than``,
    ``check``) and what a breach does (``on_breach``)."""
    base.add_option(
        "hosts",
        "",
        "claimed only by hosts carrying one of these tags "
        "(comma-separated; a host's tags: crontabber.host_tags); empty: any host",
    )
    base.add_option(
        "deadline",
        "0",
        "alert when an interval has not succeeded this long after its time (0: no deadline); "
        "seconds, or 30m, 6h, 1d",
        reference_value_from="crontabber",
        from_string_converter=parse_duration,
    )
    base.add_option(
        "min_duration",
        "0",
        "a run that succeeded faster than this is a breach (0: no check); seconds, or 5m, 1h",
        from_string_converter=parse_duration,
    )
    base.add_option(
        "slower_than",
        "",
        "a run that succeeded slower than K x the p95 of the "
        "last N good runs is a breach: K x p95(N), 3 x p95(20) (empty: no check)",
    )
    base.add_option(
        "check",
        "",
        "assertions on the run's metrics, ';'-separated: METRIC OP "
        "[K x] median|mean|p95|min|max(N), or METRIC OP NUMBER (keys_deleted < 5 x "
        "median(10)); a run that breaks one is a breach (empty: none)",
    )
    base.add_option(
        "on_breach",
        "alert",
        "what a breach does: alert (a breach alert), or pause (that, and the job is paused until "
        "--resume)",
    )


def _seconds(text: str) -> float | str:
    """A timeout: a non-negative number of seconds, or empty for the default."""
    if not str(text).strip():
        return ""
    value = float(text)
    if value < 0:
        raise ValueError("must not be negative")
    return value


def _schedule_for(entry: JobEntry, cls: type, sources: Sources) -> Schedule:
    path = ("crontabber", f"class-{cls.__name__}")
    frequency = sources.raw(path, "frequency")
    time = sources.raw(path, "time")
    overridden = [
        name
        for name, value in (("frequency", frequency), ("time", time))
        if value not in (NO_VALUE, "")
    ]
    frequency = entry.frequency if frequency in (NO_VALUE, "") else frequency
    if time in (NO_VALUE, ""):
        # a cron expression set in [[class-X]] replaces the entry's schedule, time of day too
        time = None if overridden and looks_like_cron(frequency) else entry.time
    try:
        schedule = parse_schedule(frequency, time)
    except ValueError as exc:
        # Name what the operator set: the per-job override if there is one.
        where = [f"{'.'.join(path)}.{name}" for name in overridden] or [
            f"jobs entry {entry.text!r}"
        ]
        raise ConfigurationError(" and ".join(where), str(exc)) from None
    return schedule


def _load_one(entry: JobEntry, sources: Sources) -> Job:
    cls = import_class(entry)
    app_name = getattr(cls, "app_name", None)
    if not isinstance(app_name, str) or not app_name.strip():
        raise ConfigurationError(f"jobs entry {entry.text!r}", f"{cls.__name__} has no app_name")
    try:
        depends_on = normalize_depends_on(getattr(cls, "depends_on", None))
    except TypeError as exc:
        raise ConfigurationError(f"jobs entry {entry.text!r}", str(exc)) from None
    return Job(app_name, cls, entry, _schedule_for(entry, cls, sources), depends_on)


def load_jobs(settings: Settings) -> list[Job]:
    """The configured jobs in config order, all validated (``--configtest``).

    Raises:
        ConfigurationError: on the first problem found.
    """
    return _load(settings, tolerant=False).jobs


def load_catalog(settings: Settings) -> Catalog:
    """The configured jobs in config order, validated, leaving out (as a
    :class:`BrokenEntry` each) the entries whose class does not load: an import error, a
    missing class, no ``app_name``.

    Raises:
        ConfigurationError: any other problem (what :func:`load_jobs` refuses).
    """
    return _load(settings, tolerant=True)


def _load(settings: Settings, tolerant: bool) -> Catalog:
    jobs: list[Job] = []
    broken: list[BrokenEntry] = []
    by_name: dict[str, Job] = {}
    by_namespace: dict[tuple[str, ...], Job] = {}
    for entry in settings.entries:
        try:
            job = _load_one(entry, settings.sources)
        except ConfigurationError as exc:
            if not tolerant or exc.where != f"jobs entry {entry.text!r}":
                raise
            broken.append(BrokenEntry(entry, exc))
            continue
        if job.app_name in by_name:
            raise ConfigurationError(
                f"jobs entry {entry.text!r}",
                f"app_name {job.app_name!r} is already used by "
                f"{by_name[job.app_name].entry.text!r}",
            )
        if job.namespace in by_namespace:
            raise ConfigurationError(
                f"jobs entry {entry.text!r}",
                f"its options namespace {'.'.join(job.namespace)} is shared with "
                f"{by_namespace[job.namespace].entry.text!r} (same class name)",
            )
        config = job_config(job, settings.sources)  # bad option values fail now, not mid-run
        try:
            schedule = job.schedule.in_zone(config["time_zone"])
            schedule = with_delay(schedule, config, job.app_name)
            job = job.replace(schedule=schedule, hosts=parse_tags(config["hosts"]))
        except ValueError as exc:
            raise ConfigurationError(
                f"crontabber.class-{job.cls.__name__}.settle_lag/jitter", str(exc)
            ) from None
        by_name[job.app_name] = by_namespace[job.namespace] = job
        jobs.append(job)
    dependency_order({job.app_name: job.depends_on for job in jobs})
    check_names_used(settings.sources, jobs)
    return Catalog(jobs, broken)


def names_known(sources: Sources, jobs: list[Job]) -> KnownNames:
    """The option names the runner and ``jobs`` declare (see :mod:`.known`)."""
    jobs_text = sources.raw(("crontabber",), "jobs")
    ini_text = sources.ini.get(("crontabber",), "jobs")
    return known_names(
        runner_options(),
        ((job.namespace, job_options(job.cls)) for job in jobs),
        "" if jobs_text is NO_VALUE else str(jobs_text),
        "" if ini_text is NO_VALUE else str(ini_text),
    )


def check_names_used(sources: Sources, jobs: list[Job]) -> list[str]:
    """Refuse names in the INI file or on the command line that no option has.

    Returns:
        the crontabber 0.18 names used that have no effect here.

    Raises:
        ConfigurationError: naming the first unknown name and the closest known one.
    """
    known = names_known(sources, jobs)
    check_sections(known, sources.ini.sections, sources.conf_path)
    legacy = check_names(known, (value.dotted for value in sources.ini.values), sources.conf_path)
    return legacy + check_names(known, sources.cli, None)


def configuration_notes(sources: Sources, jobs: list[Job]) -> list[str]:
    """What ``--configtest`` mentions without failing: crontabber 0.18 options
    that have no effect here, the old names of renamed options in use (once their values
    were read), environment variables that match no option."""
    notes = [
        f"{name}: a crontabber 0.18 option, ignored here"
        for name in check_names_used(sources, jobs)
    ]
    notes += [renamed_message(old, new) for old, new in sources.renamed.items()]
    return notes + environment_notes(names_known(sources, jobs), sources.environ)


def run_order(jobs: list[Job]) -> list[Job]:
    """Jobs with parents first and alphabetical within a layer (crontabber's order)."""
    by_name = {job.app_name: job for job in jobs}
    return [by_name[name] for name in dependency_order({j.app_name: j.depends_on for j in jobs})]


def job_config(job: Job, sources: Sources) -> DotDict:
    """The job's ``self.config``: schedule, its options and sub-namespaces.

    Raises:
        ConfigurationError: when an option's value does not parse.
    """
    config = DotDict()
    for path, option in job_options(job.cls).walk(job.namespace):
        target = config
        for part in path[len(job.namespace) :]:
            target = target.setdefault(part, DotDict())
        target[option.name] = sources.value(path, option)
    config["frequency"] = job.schedule.frequency
    config["time"] = str(job.schedule.time) if job.schedule.time else None
    config["logger"] = logging.getLogger(f"crontabber.job.{job.app_name}")
    return config


def find_job(jobs: list[Job], name: str) -> Job | None:
    """The first job, in run order, that ``name`` means."""
    return next((job for job in run_order(jobs) if job.matches(name)), None)


def schema_dirs(jobs: list[Job]) -> list[str]:
    """The schemas the configured jobs bring (their classes' ``schema_dir``), each once, in
    the order of the jobs list: applied with the runner's (crontabber.schema)."""
    found: list[str] = []
    for job in jobs:
        directory = getattr(job.cls, "schema_dir", None)
        if directory and directory not in found:
            found.append(directory)
    return found
