"""The job contract: :class:`BaseCronApp`.

A job is a class with ``app_name`` and ``run()``. The runner constructs it
with ``(config, job_information)`` and iterates :meth:`BaseCronApp.main`; each
value ``main`` yields is a successful unit, saved at once. ``run`` may raise
anything: the attempt is then recorded as failed (``error_count``,
``last_error``, a ``crontabber_log`` row, Sentry) and the other jobs go on.
``KeyboardInterrupt`` and SIGTERM are recorded too, then stop the run.

Class attributes the runner reads:

- ``app_name`` (required): the state row's key and the name used by
  ``depends_on``, ``--job`` and ``--reset-job``;
- ``depends_on``: an app name or a list of them;
- ``required_config``: a :class:`~crontabber.config.options.Namespace` of options,
  read from the ini section ``[crontabber] [[class-<ClassName>]]``;
- ``app_description``, ``app_version``: shown by ``--list-jobs``;
- ``parallel`` (default True): False makes the job run alone on its runner, nothing
  else of that runner beside it (``max_parallel_jobs``).

Each run happens in a child process of the runner, which keeps the run's
lease meanwhile. What the run is (its claim time, run id, lease, and where its units come
from) is one frozen :class:`RunContext` the child serves (:func:`serve`) before it builds the
job; the job reads it (:attr:`BaseCronApp.context`, and ``started_at``, ``run_id``,
:meth:`BaseCronApp.holds_lease` from it) and the runner sets nothing on the instance.
A job with much work to do checks :meth:`BaseCronApp.holds_lease` between units of work
and stops taking new ones when it returns False. The
options ``timeout``, ``error_retry_time``, ``error_backoff`` and
``error_retry_max`` of ``[[class-<ClassName>]]`` are the runner's, per job.

``run`` may return a one-line summary of what it did (``"wrote the report of 2026-11-20:
1,204 rows to s3://..."``): the runner prints it, logs it and stores it with the unit in
``crontabber_log`` and with the run in the run ledger (``--history``, ``--logs``). Anything
but a string is ignored, as crontabber did. A :class:`Summary` carries named numbers with the
line (``Summary("deleted 12 keys", keys_deleted=12, bytes_freed=40960)``): the run keeps them
(the run ledger's ``metrics``), ``--history``, ``--logs`` and the metrics file show them, and
the job's checks (``min_duration``, ``slower_than``, ``check``) judge them.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re

from .config.options import DotDict, Namespace, RequiredConfig
from .frozen import Frozen
from .schedule import parse_schedule, with_delay
from .scheduling import backfill_dates

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator, Mapping

__all__ = ["BaseCronApp", "Namespace", "RunContext", "Summary", "UnitResult"]

logger = logging.getLogger(__name__)

#: A metric's name: what a Prometheus label value and a ``check`` expression can both hold.
METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
#: The most metrics one run keeps (the rest are dropped, with a warning).
MAX_METRICS = 20


class Summary:
    """What a run did: its one-line ``text`` and named numbers (``metrics``), returned by
    ``run()`` instead of a plain string. A name is lower case, ``[a-z][a-z0-9_]*``; a value
    a finite int or float (not a bool). A metric that is neither is dropped with a warning
    (a job's bad number never fails its run); at most :data:`MAX_METRICS` are kept."""

    __slots__ = ("text", "metrics")

    def __init__(self, text: str, /, **metrics: float) -> None:
        self.text = text
        self.metrics: dict[str, float] = clean_metrics(metrics)

    def __repr__(self) -> str:
        return f"Summary({self.text!r}, {self.metrics!r})"


def clean_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The metrics worth keeping of ``metrics``: valid names, finite numbers, the first
    :data:`MAX_METRICS`; each dropped one is logged."""
    kept: dict[str, float] = {}
    for name, value in metrics.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if (
            not (isinstance(name, str) and METRIC_NAME.match(name))
            or not number
            or not math.isfinite(value)
            or len(kept) >= MAX_METRICS
        ):
            logger.warning(
                "metric %r = %r dropped: a name [a-z][a-z0-9_]*, a finite number, at most %s "
                "metrics",
                name,
                value,
                MAX_METRICS,
            )
            continue
        kept[name] = value
    return kept


class RunContext(Frozen):
    """The run a job's process serves: the database time of its claim (``started_at``), its
    run id (the fencing token), its lease (``holds()``), and where its units come from:
    ``dates``, the intervals a rerun's runner picks for it one by one (None: the job's own,
    from its schedule and last success), and ``gate``, a backfill run's claim of each interval
    before it runs it (returns once this run holds it; None: nothing to claim)."""

    started_at: dt.datetime | None = None
    run_id: int | None = None
    lease: Any = None
    dates: Iterable[dt.datetime] | None = None
    gate: Callable[[dt.datetime], None] | None = None


#: An instance built outside the runner (a test, a job's command): no claim, no lease, its
#: own units.
NO_RUN = RunContext()
_serving = NO_RUN


def serve(context: RunContext) -> None:
    """Make ``context`` the run this process serves: the runner's child calls it once, before
    it builds the job (one run per child; its threads see it too)."""
    global _serving
    _serving = context


class UnitResult(Frozen):
    """A successful unit as :meth:`BaseCronApp.units` gives it back: its interval (or the
    attempt's start) and what ``run`` returned for it (its one-line summary and metrics)."""

    when: dt.datetime
    summary: str | None
    metrics: dict[str, float] | None


def units_of(app: Any) -> Iterator[UnitResult]:
    """Each successful unit of ``app``'s run: :meth:`BaseCronApp.units`, or for a class that
    only has crontabber's ``main()`` (not derived from :class:`BaseCronApp`) each time it
    yields, without a summary."""
    if isinstance(app, BaseCronApp):
        return app.units()
    return (UnitResult(when, None, None) for when in app.main())


class BaseCronApp(RequiredConfig):
    """Base class of jobs. Subclasses implement ``run(self)``, or
    ``run(self, date)`` when decorated with ``@as_backfill_cron_app``."""

    app_name: str
    app_description: str = ""
    app_version: str = ""
    depends_on: Any = None
    required_config: Namespace = Namespace()
    # A schema directory (``schema.sql`` and ``migrations/``) holding the job's own tables,
    # applied with the runner's when the job is configured (crontabber.schema); None: the
    # job has no tables of its own (crontabber's apps).
    schema_dir: str | None = None
    # A backfill job whose run for date D processes the data of another interval says how far
    # from D that interval starts (the missing-symbols report's run for D reports the day
    # before: ``-1 day``); ``--history`` and ``--logs`` show the intervals really processed.
    data_offset: dt.timedelta = dt.timedelta(0)
    # The names of the metrics run() returns with its Summary, when the job declares them:
    # --configtest then refuses a ``check`` over any other name (it would never judge a run).
    # None: not declared, any name is accepted.
    metric_names: tuple[str, ...] | None = None
    # A backfill job whose intervals do not depend on each other (each reads and writes its
    # own interval's data only) declares it: ``--rerun NAME --parallel N`` may then run N of
    # them at once, on one host or several. Without it a rerun takes them in order, one at a time.
    parallel_reruns: bool = False
    # A job that must not run beside the runner's other jobs (it needs the host's memory or
    # disk to itself, or touches what they touch) says ``parallel = False``: a tick with
    # max_parallel_jobs > 1 starts it only when nothing else of the runner runs (the others
    # pass it meanwhile), and nothing beside it until it ends. Other hosts' runs go on.
    parallel: bool = True

    @classmethod
    def config_problems(cls, config: DotDict) -> tuple[str, ...]:
        """What ``--configtest`` refuses in this job's resolved options (``config``, as its
        runs get them), one line each: a service the job needs has no address (the search
        jobs' Elasticsearch). None by default."""
        return ()

    def __init__(self, config: DotDict, job_information: dict[str, Any] | None) -> None:
        self.config = config
        self.job_information = job_information
        # What the last call of run() returned, when a string: its summary (one line).
        self.last_summary: str | None = None
        # The named numbers it returned with it (a Summary's metrics; None: none).
        self.last_metrics: dict[str, float] | None = None

    @property
    def context(self) -> RunContext:
        """The run this instance serves (:func:`serve`; :data:`NO_RUN` outside the runner)."""
        return _serving

    @property
    def started_at(self) -> dt.datetime | None:
        """The database time at which the runner claimed this run (None: outside one)."""
        return self.context.started_at

    @property
    def run_id(self) -> int | None:
        """This run's id, its fencing token (None: outside the runner)."""
        return self.context.run_id

    def holds_lease(self) -> bool:
        """Whether this run still holds its job.

        False once the runner could not renew the lease for ``lease_seconds -
        heartbeat_seconds`` (the database is away, the runner was stopped) or
        found another run holding the job: a job with a queue to drain should
        stop taking new work, since another runner may start the job soon.
        Always True for an instance run outside the runner.
        """
        lease = self.context.lease
        return lease is None or bool(lease.holds())

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement run()")

    def _run_proxy(self, *args: Any, **kwargs: Any) -> Any:
        """The call mixins replace to inject arguments (a connection); returns what
        ``run`` returned."""
        return self.run(*args, **kwargs)

    def plan(self, date: dt.datetime) -> str | None:
        """What a run of this backfill job for ``date`` would read and write, in one line
        (``--rerun --dry-run`` prints it per interval); None: the job does not say."""
        return None

    def _now(self) -> dt.datetime:
        return self.started_at or dt.datetime.now(dt.timezone.utc)

    def main(
        self, function: Callable[..., Any] | None = None, once: bool = True
    ) -> Iterator[dt.datetime]:
        """Run the job; yield one timestamp per successful unit.

        An ordinary job runs once and yields the attempt's start time. A
        backfill job (``once=False``) runs once per whole interval missed
        since ``last_success``, oldest first, yielding each date after its run.
        """
        function = function or self._run_proxy
        now = self._now()
        if once:
            self._summarise(function())
            yield now
            return
        schedule = with_delay(
            parse_schedule(
                self.config["frequency"],
                self.config.get("time"),
                self.config.get("time_zone") or "UTC",
            ),
            self.config,
            self.app_name,
        )
        last_success = (self.job_information or {}).get("last_success")
        dates, gate = self.context.dates, self.context.gate
        if dates is None:
            dates = backfill_dates(last_success, schedule, now)
        for when in dates:
            if gate is not None:
                gate(when)
            self._summarise(function(when))
            yield when

    def units(self) -> Iterator[UnitResult]:
        """Run the job (:meth:`main`, which a crontabber 0.18 app may override) and give back
        each successful unit as a value, with what ``run`` returned for it: what the runner's
        child sends the runner."""
        for when in self.main():
            yield UnitResult(when, self.last_summary, self.last_metrics)

    def _summarise(self, result: Any) -> None:
        """Keep ``run``'s result as the unit's summary: a string (or a :class:`Summary`'s
        text, its metrics kept as ``last_metrics``), masked (:func:`~.redaction.masked`), on
        one line, at most 500 characters; anything else is no summary."""
        self.last_summary = None
        self.last_metrics = None
        if isinstance(result, Summary):
            self.last_metrics = dict(result.metrics) or None
            result = result.text
            undeclared = sorted(set(self.last_metrics or ()) - set(self.metric_names or ()))
            if self.metric_names is not None and undeclared:  # kept: its checks are refused
                logger.warning(
                    "%s returned metrics its metric_names lacks: %s",
                    self.app_name,
                    ", ".join(undeclared),
                )
        if isinstance(result, str) and result.strip():
            from .redaction import masked  # (as a failure is: it is stored, printed and shown)

            line = " ".join(masked(result).split())
            self.last_summary = line if len(line) <= 500 else line[:499] + "…"
