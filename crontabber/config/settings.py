"""The runner's settings: ``crontabber.ini`` in crontabber's layout, overridable by the
environment and the command line, read by sources of our own that follow everett's
rules (a tick does not import everett).

Precedence is crontabber's: command line, then environment, then the INI
file, then defaults. An option ``crontabber.class-Foo.bucket`` is

- on the command line: ``--crontabber.class-Foo.bucket=VALUE``;
- in the environment: ``CRONTABBER_CLASS_FOO_BUCKET`` (everett's upper-case
  form, dashes as underscores), ``CRONTABBER_CLASS-FOO_BUCKET``, or
  crontabber's dotted name ``crontabber.class-Foo.bucket`` (set with ``env``);
- in the INI file: ``bucket=VALUE`` under ``[crontabber]`` / ``[[class-Foo]]``.

Secrets (options whose name says password, secret, dsn...) are meant to come
from the environment; they are masked wherever options are shown.

The INI file must exist (see :func:`resolve_conf_path`) and parse
(:mod:`crontabber.config.inifile`); the names it and the command line use are checked
once the jobs are known (:mod:`crontabber.config.names`).
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import warnings

from ..errors import ConfigurationError
from ..frozen import Frozen
from ..overrides import given_options
from ..placement import parse_tags
from ..schedule import JobEntry, check_zone, parse_job_entry, split_jobs_list
from .database import DATABASE_OPTIONS, DatabaseSettings, database_settings
from .inifile import IniFile, IniSource
from .options import NO_VALUE, Namespace, Option

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator, Mapping

    from .targets import SmtpSettings, Target

DEFAULT_CONF_PATHS = ("config/crontabber.ini", "crontabber.ini")
MASK = "*" * 8
NOT_SET = "(not set)"  # a secret without a value: nothing to hide, and it says so


#: ``max_parallel_jobs``' default, chosen by measurement (docs/deploy.md, "Due jobs side by side"):
#: one tick over 100 due no-op jobs on the 2-core development machine took 1.28 / 0.84 / 0.91 /
#: 1.00 s (median of 5) at 1 / 2 / 4 / 8; 1.83 / 1.48 / 1.74 / 1.59 s and 1.09 / 0.85 / 0.79 /
#: 0.82 s in two more series: 2 fastest twice, within the noise of 4 once.
MAX_PARALLEL_JOBS = 2


def runner_options() -> Namespace:
    """The runner's own options (a job's options live under ``crontabber.class-X``)."""
    root = Namespace()
    cron = root.namespace("crontabber")
    cron.add_option(
        "jobs",
        "",
        "the job list: module.Class|FREQ[|HH:MM] or module.Class|CRON EXPRESSION, one per line",
    )
    _retry_options(cron)
    _schedule_options(cron)
    _run_options(cron)
    _operator_options(cron)
    _host_options(cron)
    _monitor_options(cron)
    _alert_options(cron, root.namespace("alerts"))
    _database_options(cron, root)
    _sentry_and_logging_options(root)
    return root


def _retry_options(cron: Namespace) -> None:
    """The retry wait after a failure: the defaults of each job's own options."""
    cron.add_option("error_retry_time", 300, "seconds after a failed attempt before a retry")
    cron.add_option(
        "error_backoff",
        1.0,
        "multiply the retry wait by this after each further failure in a row (1: constant, as "
        "crontabber)",
    )
    cron.add_option(
        "error_retry_max",
        86400,
        "the longest wait before a retry, in seconds (with error_backoff > 1)",
    )


def _run_options(cron: Namespace) -> None:
    """How a run is watched and bounded (its marker, heartbeat, lease, timeout and kill), and
    how many run at once and how often a runner looks for due jobs."""
    cron.add_option(
        "max_ongoing_age_hours",
        12.0,
        "a marker without heartbeat (a crontabber 0.18 runner's) older than this is ignored",
    )
    cron.add_option("heartbeat_seconds", 30.0, "how often a running job's lease is renewed")
    cron.add_option(
        "lease_seconds",
        120.0,
        "a running job whose lease was not renewed for this long is taken over",
    )
    cron.add_option(
        "default_timeout_seconds",
        0.0,
        "seconds a job may run before it is stopped (0: no limit); per job: [[class-X]] timeout "
        "(formerly default_timeout: deprecated, still read)",
        formerly="default_timeout",
    )
    cron.add_option(
        "kill_grace_seconds", 30.0, "after SIGTERM (timeout, lost lease), seconds before SIGKILL"
    )
    cron.add_option(
        "max_parallel_jobs",
        MAX_PARALLEL_JOBS,
        "how many due jobs this host's tick runs at once, each in its own process (1: one "
        "after another, crontabber's serial tick); a job waits for its parents due in the "
        "same tick, and a job class with parallel = False runs alone. Default measured: 100 "
        "due no-op jobs on 2 cores took 1.28 / 0.84 / 0.91 / 1.00 s at 1 / 2 / 4 / 8 "
        "(docs/deploy.md)",
    )
    cron.add_option(
        "tick_seconds",
        60.0,
        "how often --serve looks for due jobs, and how often a tick with runs in flight looks "
        "again (the jobs that fell due start beside them; sub-minute allowed)",
    )


def _operator_options(cron: Namespace) -> None:
    """The guards on operator actions: ``rerun_confirm_over`` and ``require_reason``."""
    cron.add_option(
        "rerun_confirm_over",
        31,
        "--rerun of more intervals than this needs --yes (a typo of a year reran 692 days)",
    )
    cron.add_option(
        "require_reason",
        True,
        "--rerun, --mark-success, --release, --reset-job and --pause refuse to run "
        "without --reason (the audit trail's why); False makes it optional (crontabber "
        "0.18 had no --reason; --pause always needs one)",
    )


def _host_options(cron: Namespace) -> None:
    """This host's own options: its tags, whether it is a production host, and how much of
    each run's output it keeps."""
    cron.add_option(
        "host_tags",
        "",
        "this host's tags (comma-separated, e.g. spool,es; environment: "
        "CRONTABBER_HOST_TAGS): a job with hosts = TAG is claimed only by hosts "
        "carrying that tag",
    )
    cron.add_option(
        "production",
        False,
        "a production host: --configtest refuses what still points at the development "
        "services (scripts/services.sh's PostgreSQL, PgBouncer, Elasticsearch and S3 "
        "addresses, its S3 keys)",
    )
    cron.add_option(
        "output_tail_bytes",
        65536,
        "each run keeps the last this many bytes of what its job logged and "
        "printed in the run ledger (--logs); 0 keeps nothing",
    )


def _sentry_and_logging_options(root: Namespace) -> None:
    """The ``sentry`` and ``logging`` sections."""
    root.namespace("sentry").add_option(
        "dsn",
        "",
        "Sentry DSN; job errors are reported when set",
        reference_value_from="secrets.sentry",
    )
    root.namespace("sentry").add_option(
        "crons",
        False,
        "with a DSN: a Sentry Crons check-in when each run starts and ends "
        "(in_progress, ok, error), the monitor made from the job's schedule",
    )
    logging_ns = root.namespace("logging")
    logging_ns.add_option("level", "INFO", "log level on stderr (DEBUG, INFO, WARNING...)")
    logging_ns.add_option(
        "format", "%(asctime)s %(levelname)s %(name)s - %(message)s", "log line format"
    )


def _monitor_options(cron: Namespace) -> None:
    """The options of ``--nagios`` and ``--metrics-file`` (see :class:`MonitorSettings`)."""
    cron.add_option(
        "overdue_warning_seconds",
        1800.0,
        "--nagios: a job whose next run is this late is a WARNING",
    )
    cron.add_option(
        "overdue_critical_seconds",
        7200.0,
        "--nagios: a job whose next run is this late is CRITICAL",
    )
    cron.add_option(
        "silence_critical_minutes",
        15.0,
        "--nagios: no tick from any host for this long is CRITICAL",
    )
    cron.add_option(
        "max_skew_seconds",
        30.0,
        "--nagios: a host whose clock is this far from the database's is a WARNING",
    )
    cron.add_option(
        "paused_warning_percent",
        100.0,
        "--nagios: this share of the configured jobs paused (100: every one) is a "
        "WARNING (a forgotten --pause all runs nothing)",
    )
    cron.add_option(
        "metrics_file", "", "write a Prometheus text file here after each tick (--metrics-file)"
    )


def _database_options(cron: Namespace, root: Namespace) -> None:
    """The state database: ``crontabber.host`` ..., taking crontabber's
    ``resource.postgresql.*`` values."""
    for name, default, doc, parse in DATABASE_OPTIONS:
        cron.add_option(name, default, doc, parse, reference_value_from="resource.postgresql")
        root.namespace("resource").namespace("postgresql").add_option(name, default, doc, parse)


def _schedule_options(cron: Namespace) -> None:
    """When the jobs start against their time: the defaults of each job's own options."""
    cron.add_option(
        "time_zone",
        "UTC",
        "the zone whose clocks the jobs' cron expressions and HH:MM read, an IANA name "
        "(Europe/Berlin); each job may set its own",
        check_zone,
    )
    cron.add_option(
        "settle_lag",
        "0",
        "how long after an interval's time a backfill job runs it (its data arrives "
        "late): seconds, or 30m, 6h, 1d; each job may set its own; settle_lag + "
        "jitter must be shorter than the job's frequency",
    )
    cron.add_option(
        "jitter",
        "0",
        "spread the jobs' starts over this much (seconds, or 10m, 1h): each job "
        "starts a fixed offset after its time, derived from its name; each job may "
        "set its own (0: off)",
    )


def _alert_options(cron: Namespace, alerts: Namespace) -> None:
    """The alert rules' defaults (each job may set its own in ``[[class-X]]``) and the targets
    (see :mod:`crontabber.alerts.rules` and :mod:`crontabber.alerts.notify`)."""
    _alert_rule_options(cron)
    _alert_target_options(alerts)


def _alert_rule_options(cron: Namespace) -> None:
    """The alert rules' defaults, each job's own ``alert_*`` and ``deadline`` options."""
    cron.add_option(
        "alert_after_failures", 2, "alert when a job failed this many times in a row (0: never)"
    )
    cron.add_option("alert_on_recovery", True, "alert when a job that was alerted about recovers")
    cron.add_option(
        "alert_silence",
        "1h",
        "alert when a job has not run this long after it was due (0: never); seconds, or 30m, 2h",
    )
    cron.add_option(
        "alert_realert",
        "4h",
        "alert again this often while a job stays failing or silent (0: once)",
    )
    cron.add_option(
        "alert_on_takeover", True, "alert when a run of a job was taken over from a host that died"
    )
    cron.add_option(
        "alert_to",
        "",
        "the targets of a job's alerts, by name, comma-separated (empty: every target)",
    )
    cron.add_option(
        "deadline",
        "0",
        "alert when a job's interval has not succeeded this long after the "
        "interval's time (0: none; usually set per job); seconds, or 30m, 6h, 1d",
    )


def _alert_target_options(alerts: Namespace) -> None:
    """The ``alerts`` section: the targets, how a notice is claimed and delivered, and the
    SMTP server of e-mail targets."""
    alerts.add_option(
        "targets",
        "",
        "where alerts go, one per line: NAME KIND ADDRESS [OPTION=VALUE ...] (see "
        "docs/alerts.md); empty: no alerts",
        url_paths_secret=True,
    )  # a Slack webhook's path is its token
    alerts.add_option(
        "claim_seconds",
        60.0,
        "a host that claimed a notice and did not send it within this long (it "
        "died) leaves it to the next tick of any host",
    )
    alerts.add_option(
        "max_attempts",
        10,
        "attempts to deliver one notice before giving up (retries back off from 30 s to 1 h)",
    )
    alerts.add_option("timeout_seconds", 5.0, "how long one delivery may take")
    alerts.add_option(
        "group_over",
        3,
        "when this many jobs' failing (or recovered) notices go to one target at once, they go as "
        "one grouped notice (0: never; a PagerDuty target keeps one incident per job)",
    )
    alerts.add_option(
        "dashboard_url",
        "",
        "the dashboard's address (http://HOST:PORT): a failing alert links to its job's page "
        "there (empty: no link)",
    )
    alerts.add_option("smtp_host", "", "the SMTP server of e-mail targets")
    alerts.add_option("smtp_port", 25, "its port (465 with smtp_tls, 587 with smtp_starttls)")
    alerts.add_option("smtp_from", "", "the sender of alert e-mails (default crontabber@HOST)")
    alerts.add_option("smtp_user", "", "log in as this user (empty: no login)")
    alerts.add_option(
        "smtp_password", "", "its password (use the environment: ALERTS_SMTP_PASSWORD)"
    )
    alerts.add_option("smtp_starttls", False, "STARTTLS after connecting")
    alerts.add_option("smtp_tls", False, "TLS from the start (SMTPS)")


def uppercase_key(key: str, namespace: list[str] | None = None) -> str:
    """everett's ``generate_uppercase_key``: ``["crontabber", "class-Foo"], "bucket"`` is
    ``CRONTABBER_CLASS-FOO_BUCKET`` (empty namespace parts left out)."""
    return "_".join([*(part for part in namespace or () if part), key]).upper()


class CommandLineSource:
    """everett's ``ConfigDictEnv`` over the command line's overrides: ``--a.b.c=v`` is found
    as ``A_B_C`` (any case)."""

    def __init__(self, cli: Mapping[str, str]) -> None:
        self._values = {dotted.replace(".", "_").upper(): v for dotted, v in cli.items()}

    def get(self, key: str, namespace: list[str] | None = None) -> Any:
        return self._values.get(uppercase_key(key, namespace), NO_VALUE)


class EnvironSource:
    """everett source over the process environment, accepting three spellings."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        # a plain copy: a tick looks up ~750 names, and os.environ encodes each one
        self._environ = dict(environ)

    def get(self, key: str, namespace: list[str] | None = None) -> Any:
        name = self.variable(key, namespace)
        return self._environ[name] if name is not None else NO_VALUE

    def variable(self, key: str, namespace: list[str] | None = None) -> str | None:
        """The name of the environment variable that sets ``key``, or None."""
        upper = uppercase_key(key, namespace)
        dotted = ".".join([*(namespace or []), key])
        for name in (upper.replace("-", "_"), upper, dotted):
            if name in self._environ:
                return name
        return None


class Sources:
    """The stacked value sources: command line, environment, INI file."""

    def __init__(
        self,
        conf_path: str | None,
        cli: Mapping[str, str],
        environ: Mapping[str, str],
        ini_cache: bool = True,
    ) -> None:
        self.conf_path = resolve_conf_path(conf_path)
        self.ini = IniFile(self.conf_path, ini_cache)
        self.cli = dict(cli)
        #: The command line's overrides as a run and the audit trail record them, secrets
        #: masked (:func:`crontabber.overrides.given_options`): read once, here.
        self.given = tuple(given_options(self.cli))
        self.environ = environ
        self._sources = (CommandLineSource(cli), EnvironSource(environ), IniSource(self.ini))
        #: The old names of renamed options this configuration sets: old dotted name -> new.
        self.renamed: dict[str, str] = {}
        # raw_value's answers: the sources do not change, and a run builds its job's
        # configuration again (each run's config is ~60 lookups through three sources)
        self._raw_values: dict[tuple[Any, ...], Any] = {}

    def raw(self, path: tuple[str, ...], name: str) -> Any:
        """The raw string set for ``path.name`` anywhere, or ``NO_VALUE``.

        The first source that has it wins, as in everett's ``ConfigManager``
        (with ``raw_value=True``, ``default_if_empty=False``), asked directly:
        a tick resolves ~250 values and the manager's call cost 16 ms of them.
        """
        namespace = list(path)
        for source in self._sources:
            value = source.get(name, namespace=namespace)
            if value is not NO_VALUE:
                return value
        return NO_VALUE

    def origin(self, path: tuple[str, ...], option: Option, follow: bool = True) -> str:
        """Where ``path.option``'s effective value comes from: ``command line``,
        ``environment VARIABLE``, ``INI file PATH`` or ``default`` (following
        ``reference_value_from`` as :meth:`value` does, unless not ``follow``)."""
        cli, environ, ini = self._sources
        for where, name in _spellings(path, option, follow):
            namespace = list(where)
            dotted = ".".join([*where, name])
            if cli.get(name, namespace=namespace) is not NO_VALUE:
                return f"command line (--{dotted})"
            variable = environ.variable(name, namespace)
            if variable is not None:
                return f"environment {variable}"
            if ini.get(name, namespace=namespace) is not NO_VALUE:
                return f"INI file {self.conf_path}" + (
                    f" (as {dotted})" if name != option.name else ""
                )
        return "default"

    def ini_value(self, path: tuple[str, ...], option: Option) -> Any:
        """The raw value the INI file gives ``path.option`` (following
        ``reference_value_from``), or ``NO_VALUE``: what an environment variable or the
        command line may have overridden."""
        ini = self._sources[2]
        for where, name in _spellings(path, option):
            raw = ini.get(name, namespace=list(where))
            if raw is not NO_VALUE:
                return raw
        return NO_VALUE

    def raw_value(self, path: tuple[str, ...], option: Option) -> Any:
        """The raw string that sets ``path.option`` (following ``reference_value_from``),
        or ``NO_VALUE``; kept once read (a string: nothing can change it)."""
        key = (path, option.name, option.formerly, option.reference_value_from)
        if key in self._raw_values:
            return self._raw_values[key]
        raw = self.raw(path, option.name)
        if option.formerly:  # the old name warns when set, even when the new one wins
            old = self._formerly(path, option.formerly, option.name)
            raw = old if raw is NO_VALUE else raw
        if raw is NO_VALUE and option.reference_value_from:
            raw = self.raw(tuple(option.reference_value_from.split(".")), option.name)
        self._raw_values[key] = raw
        return raw

    def _formerly(self, path: tuple[str, ...], old: str, new: str) -> Any:
        """The raw string set under a renamed option's old name, or ``NO_VALUE``; the first
        use warns (``DeprecationWarning``, :func:`renamed_message`) and is kept in
        :attr:`renamed` (the command line logs it, ``--configtest`` lists it)."""
        raw = self.raw(path, old)
        if raw is not NO_VALUE:
            dotted_old, dotted_new = ".".join([*path, old]), ".".join([*path, new])
            if dotted_old not in self.renamed:
                self.renamed[dotted_old] = dotted_new
                warnings.warn(
                    renamed_message(dotted_old, dotted_new), DeprecationWarning, stacklevel=2
                )
        return raw

    def value(self, path: tuple[str, ...], option: Option) -> Any:
        """The parsed value of an option, following ``reference_value_from``.

        Raises:
            ConfigurationError: naming the option when its value does not parse.
        """
        raw = self.raw_value(path, option)
        if raw is NO_VALUE:
            return option.default
        try:
            return option.parse(raw)
        except Exception as exc:  # noqa: BLE001 - a parser's bad value, whatever it raises for it
            if not _bad_value(exc):
                raise
            raise ConfigurationError(
                ".".join([*path, option.name]), f"bad value {raw!r}: {exc}"
            ) from None


def _bad_value(exc: Exception) -> bool:
    """``exc`` is a parser's "bad value": ValueError or TypeError, or everett's
    InvalidValueError (a parser written for everett raises it; only a process that imported
    everett can, so a tick does not import it to check)."""
    everett = sys.modules.get("everett")
    return isinstance(exc, (ValueError, TypeError)) or (
        everett is not None and isinstance(exc, everett.InvalidValueError)
    )


def _spellings(
    path: tuple[str, ...], option: Option, follow: bool = True
) -> Iterator[tuple[tuple[str, ...], str]]:
    """Where ``path.option`` may be set, first to last: its name, its old name (a renamed
    option), then (with ``follow``) the option it takes its value from."""
    yield path, option.name
    if option.formerly:
        yield path, option.formerly
    if option.reference_value_from and follow:
        yield tuple(option.reference_value_from.split(".")), option.name


def renamed_message(old: str, new: str) -> str:
    """The one line that says a renamed option's old name was used (docs/conventions.md,
    "Deprecation policy")."""
    return (
        f"{old} is deprecated: it is renamed {new}; the old name is read until the next major "
        "release"
    )


def resolve_conf_path(conf_path: str | None) -> str:
    """The INI file to read: the given one (which must exist) or a default.

    A missing file is an error, not an empty configuration: run from the wrong
    directory, crontabber would otherwise report ``no jobs`` and exit 0.

    Raises:
        ConfigurationError: when the named file does not exist, or none is
            named and no default file exists.
    """
    if conf_path:
        if not os.path.isfile(conf_path):
            raise ConfigurationError("--admin.conf", f"no such file: {conf_path}")
        return os.path.realpath(conf_path)
    for candidate in DEFAULT_CONF_PATHS:
        if os.path.isfile(candidate):
            return os.path.realpath(candidate)
    raise ConfigurationError(
        "--admin.conf",
        f"no configuration file: none given and no {' or '.join(DEFAULT_CONF_PATHS)} in "
        f"{os.getcwd()}",
    )


class RunLimits(Frozen):
    """Time limits of one run: lease renewal, lease length, timeout (0: none),
    and the grace between SIGTERM and SIGKILL (what :mod:`crontabber.supervisor` enforces)."""

    heartbeat_seconds: float
    lease_seconds: float
    timeout: float
    kill_grace_seconds: float

    @property
    def hold_seconds(self) -> float:
        """How long after its last renewal a run still counts its lease as held
        (``holds_lease()`` turns False then)."""
        return self.lease_seconds - self.heartbeat_seconds

    @property
    def stop_grace_seconds(self) -> float:
        """How long after ``hold_seconds`` a job that polls ``holds_lease()`` has
        to stop by itself before it is stopped; still before the lease expires."""
        return self.heartbeat_seconds / 2


class MonitorSettings(Frozen):
    """The thresholds of ``--nagios`` and where ``--metrics-file`` writes (see
    :func:`runner_options` for their meaning and docs/reference/cli.md's ``--nagios``)."""

    overdue_warning_seconds: float
    overdue_critical_seconds: float
    silence_critical_minutes: float
    max_skew_seconds: float
    metrics_file: str
    paused_warning_percent: float = 100.0

    @classmethod
    def defaults(cls) -> "MonitorSettings":
        """The settings when nothing is configured (the defaults are declared
        once, in :func:`runner_options`)."""
        return _monitor_settings(
            {
                ".".join([*path, option.name]): option.default
                for path, option in runner_options().walk()
            }
        )


class AlertSettings(Frozen):
    """Where alerts go and how hard to try (``[alerts]``; the rules are per job)."""

    targets: tuple[Target, ...]
    claim_seconds: float
    max_attempts: int
    timeout_seconds: float
    smtp: SmtpSettings | None  # None: no e-mail target
    dashboard_url: str = ""  # without a trailing "/"; empty: alerts link nowhere
    group_over: int = 3  # this many jobs' notices to one target at once go as one (0: never)

    def job_link(self, app_name: str) -> str:
        """The dashboard's page of job ``app_name`` (empty without ``dashboard_url``)."""
        from urllib.parse import quote

        return f"{self.dashboard_url}/jobs/{quote(app_name)}" if self.dashboard_url else ""

    @property
    def enabled(self) -> bool:
        """Alerts are evaluated only when there is somewhere to send them."""
        return bool(self.targets)


class Settings(Frozen):
    """The runner's resolved settings (the repr leaves out the Sentry DSN and the sources;
    equality ignores the sources)."""

    _hidden = frozenset({"sentry_dsn", "sources"})
    _uncompared = frozenset({"sources"})
    entries: tuple[JobEntry, ...]
    error_retry_time: int
    max_ongoing_age_hours: float
    heartbeat_seconds: float
    lease_seconds: float
    default_timeout_seconds: float
    kill_grace_seconds: float
    database: DatabaseSettings
    rerun_confirm_over: int
    output_tail_bytes: int
    require_reason: bool
    sentry_dsn: str
    sentry_crons: bool
    log_level: str
    log_format: str
    sources: Sources
    monitor: MonitorSettings
    alerts: AlertSettings
    host_tags: tuple[str, ...] = ()
    max_parallel_jobs: int = MAX_PARALLEL_JOBS
    tick_seconds: float = 60.0  # --serve's tick, and a busy tick's new look at the due jobs
    production: bool = False  # --configtest refuses the development services' addresses and keys

    def limits_for(self, job_config: Mapping[str, Any]) -> RunLimits:
        """The time limits of one run of a job, given its resolved options."""

        timeout = job_config.get("timeout")
        return RunLimits(
            heartbeat_seconds=self.heartbeat_seconds,
            lease_seconds=self.lease_seconds,
            timeout=self.default_timeout_seconds
            if timeout is None or timeout == ""
            else float(timeout),
            kill_grace_seconds=self.kill_grace_seconds,
        )


#: The fields of :class:`Settings` that are the value of an option outside ``[crontabber]``
#: (one there gives the field of its name).
_OTHER_FIELDS = {
    "sentry.dsn": "sentry_dsn",
    "sentry.crons": "sentry_crons",
    "logging.level": "log_level",
    "logging.format": "log_format",
}


def load_settings(
    conf_path: str | None,
    cli: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
    ini_cache: bool = True,
) -> Settings:
    """Read the runner's settings (``ini_cache``: a kept parse of the INI file may stand for
    it, :mod:`.inicache`; ``--configtest`` says False).

    Raises:
        ConfigurationError: a missing file, a bad value or a bad jobs entry.
    """
    sources = Sources(conf_path, cli, os.environ if environ is None else environ, ini_cache)
    values = {
        ".".join([*path, opt.name]): sources.value(path, opt)
        for path, opt in runner_options().walk()
    }
    entries = tuple(parse_job_entry(text) for text in split_jobs_list(values["crontabber.jobs"]))
    database = database_settings(
        {name: values[f"crontabber.{name}"] for name, *_ in DATABASE_OPTIONS}, "crontabber"
    )
    heartbeat, lease = values["crontabber.heartbeat_seconds"], values["crontabber.lease_seconds"]
    if heartbeat <= 0 or lease < 2 * heartbeat:
        raise ConfigurationError(
            "crontabber.lease_seconds",
            f"must be at least twice heartbeat_seconds (> 0): {lease:g} vs {heartbeat:g}",
        )
    if values["crontabber.max_parallel_jobs"] < 1:
        raise ConfigurationError("crontabber.max_parallel_jobs", "must be at least 1")
    if values["crontabber.tick_seconds"] < 1:
        raise ConfigurationError("crontabber.tick_seconds", "must be at least 1 (a second)")
    for name in ("default_timeout_seconds", "kill_grace_seconds", "output_tail_bytes"):
        if values[f"crontabber.{name}"] < 0:
            raise ConfigurationError(f"crontabber.{name}", "must not be negative")
    fields = {
        name: values[f"crontabber.{name}"]
        for name in Settings._fields
        if f"crontabber.{name}" in values
    }  # an option's value as it is, by its name
    fields.update({field: values[option] for option, field in _OTHER_FIELDS.items()})
    fields.update(
        entries=entries,
        database=database,
        sources=sources,
        log_level=str(fields["log_level"]).upper(),
        host_tags=parse_tags(fields["host_tags"]),
        monitor=_monitor_settings(values),
        alerts=_alert_settings(values),
    )
    return Settings(**fields)


def _alert_settings(values: Mapping[str, Any]) -> AlertSettings:
    """The targets and delivery limits, checked.

    Raises:
        ConfigurationError: a target line that does not parse, a limit that is not positive.
    """
    targets: tuple[Target, ...] = ()
    smtp = None
    if str(values["alerts.targets"]).strip():  # else not even imported: every tick reads this
        from .targets import SmtpSettings, parse_targets

        try:
            targets = parse_targets(str(values["alerts.targets"]))
        except ValueError as exc:
            raise ConfigurationError("alerts.targets", str(exc)) from None
        mailed = [t.name for t in targets if t.kind == "email"]
        if mailed:
            import socket  # getfqdn may ask DNS: only for a sender not given

            if not values["alerts.smtp_host"]:
                raise ConfigurationError(
                    "alerts.smtp_host", f"the e-mail target {mailed[0]} needs an SMTP server"
                )
            smtp = SmtpSettings(
                str(values["alerts.smtp_host"]),
                int(values["alerts.smtp_port"]),
                str(values["alerts.smtp_from"]) or f"crontabber@{socket.getfqdn()}",
                str(values["alerts.smtp_user"]),
                str(values["alerts.smtp_password"]),
                bool(values["alerts.smtp_starttls"]),
                bool(values["alerts.smtp_tls"]),
            )
    for name in ("claim_seconds", "max_attempts", "timeout_seconds"):
        if values[f"alerts.{name}"] <= 0:
            raise ConfigurationError(f"alerts.{name}", "must be positive")
    if int(values["alerts.group_over"]) < 0 or int(values["alerts.group_over"]) == 1:
        raise ConfigurationError("alerts.group_over", "must be 0 (never group) or 2 or more")
    return AlertSettings(
        targets,
        float(values["alerts.claim_seconds"]),
        int(values["alerts.max_attempts"]),
        float(values["alerts.timeout_seconds"]),
        smtp,
        str(values["alerts.dashboard_url"] or "").strip().rstrip("/"),
        int(values["alerts.group_over"]),
    )


def _monitor_settings(values: Mapping[str, Any]) -> MonitorSettings:
    """The monitoring options, checked.

    Raises:
        ConfigurationError: a threshold that is not positive, or a critical
            overdue threshold below the warning one.
    """
    monitor = MonitorSettings(
        **{
            name: values[f"crontabber.{name}"]
            for name in (
                "overdue_warning_seconds",
                "overdue_critical_seconds",
                "silence_critical_minutes",
                "max_skew_seconds",
                "metrics_file",
                "paused_warning_percent",
            )
        }
    )
    for name in (
        "overdue_warning_seconds",
        "overdue_critical_seconds",
        "silence_critical_minutes",
        "max_skew_seconds",
    ):
        if getattr(monitor, name) <= 0:
            raise ConfigurationError(f"crontabber.{name}", "must be positive")
    if not 0 < monitor.paused_warning_percent <= 100:
        raise ConfigurationError(
            "crontabber.paused_warning_percent",
            f"must be above 0 and at most 100, not {monitor.paused_warning_percent:g}",
        )
    if monitor.overdue_critical_seconds < monitor.overdue_warning_seconds:
        raise ConfigurationError(
            "crontabber.overdue_critical_seconds",
            f"must not be below overdue_warning_seconds: {monitor.overdue_critical_seconds:g} "
            f"vs {monitor.overdue_warning_seconds:g}",
        )
    return monitor


def effective_lines(
    namespace: Namespace, prefix: tuple[str, ...], sources: Sources, defaults: bool = True
) -> Iterator[tuple[str, str, str]]:
    """``(dotted name, effective value, where it came from)`` for every option (secrets
    masked, URLs' passwords redacted); where it came from names the INI file's value it
    overrode, if any (``environment RESOURCE_POSTGRESQL_DBNAME, over 'crontabber' in the INI
    file``). Without ``defaults``, only the options set for their own name (not only
    through the option they take their value from, listed once under its own name)."""
    for path, option in namespace.walk(prefix):
        if not defaults and sources.origin(path, option, follow=False) == "default":
            continue
        yield (
            ".".join([*path, option.name]),
            _shown(sources, path, option),
            _origin_text(sources, path, option),
        )


def shared_lines(
    namespaces: list[tuple[Namespace, tuple[str, ...]]], sources: Sources, listed: set[str]
) -> Iterator[tuple[str, str, str]]:
    """:func:`effective_lines` of the options the ``namespaces``' options take their value
    from (``reference_value_from``: ``resource.elasticsearch.es_url``), once each under its
    own name, when set and not in ``listed``: what a job's own lines, without defaults, leave
    out, although it is the value the job uses."""
    seen = set(listed)
    for namespace, prefix in namespaces:
        for path, option in namespace.walk(prefix):
            name = f"{option.reference_value_from}.{option.name}"
            if (
                not option.reference_value_from
                or name in seen
                or sources.origin(path, option, follow=False) != "default"
                or sources.origin(path, option) == "default"
            ):
                continue
            seen.add(name)
            yield name, _shown(sources, path, option), _origin_text(sources, path, option)


def _shown(sources: Sources, path: tuple[str, ...], option: Option) -> str:
    """``path.option``'s effective value as listed: secrets masked, URLs' passwords redacted."""
    from ..redaction import redact, redact_url_paths

    value = sources.value(path, option)
    shown = (MASK if value else NOT_SET) if option.secret else redact(repr(_as_written(value)))
    return redact_url_paths(shown) if option.url_paths_secret else shown


def _origin_text(sources: Sources, path: tuple[str, ...], option: Option) -> str:
    """:meth:`Sources.origin`, with the INI file's value it overrode when it did."""
    from ..redaction import redact

    origin = sources.origin(path, option)
    ini = sources.ini_value(path, option)
    if ini is NO_VALUE or origin.startswith("INI file") or ini == sources.raw_value(path, option):
        return origin
    overrode = "a value" if option.secret else redact(repr(ini))
    return f"{origin}, over {overrode} in the INI file"


def _as_written(value: Any) -> Any:
    """A value as one would write it in the INI: a span in its largest whole unit (``'1h'``,
    ``'0'``), not Python's ``datetime.timedelta(seconds=3600)``; anything else as it is."""
    if not isinstance(value, dt.timedelta):
        return value
    seconds = int(value.total_seconds())
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return str(seconds)


def iter_option_lines(
    namespace: Namespace, prefix: tuple[str, ...], sources: Sources | None
) -> Iterator[tuple[str, str, str]]:
    """``(dotted name, shown value, doc)`` for every option; secrets masked.

    With ``sources`` the shown value is the effective one, else the default.
    """
    for path, option in namespace.walk(prefix):
        value = sources.value(path, option) if sources else option.default
        if option.secret:
            shown = MASK if value else NOT_SET
        else:  # a URL's password, a signed URL's parameters (crontabber.redaction)
            from ..redaction import redact, redact_url_paths

            shown = redact(repr(_as_written(value)))
            if option.url_paths_secret:
                shown = redact_url_paths(shown)
        yield ".".join([*path, option.name]), shown, option.doc
