"""The checks of a run (issue #34 item 3): rules over its duration and the metrics it returned
(:class:`crontabber.base.Summary`), judged against the job's earlier good runs, and what a
breach does (``on_breach``: a ``breach`` alert, or that and a pause).

Per job, in ``[[class-X]]``:

- ``min_duration = 30`` (seconds, or ``5m``): a run that succeeded faster than this is suspicious
(it did nothing);
- ``slower_than = 3 x p95(20)``: a run that succeeded slower than 3 times the 95th percentile
  of the durations of the job's last 20 good (succeeded) runs before it;
- ``check = keys_deleted < 5 x median(10)``: an assertion on a metric, against the same
  aggregate of it over the last good runs that returned it (``median``, ``mean``, ``p95``,
  ``min``, ``max``), or against a number (``keys_deleted <= 100000``); several are separated
  by ``;``. A run without the metric, or a history of fewer than 3 runs, is not judged;
- ``on_breach = alert | pause``: a ``breach`` alert (once across the fleet: its subject names
  the run and the rule), and with ``pause`` the job is paused until someone resumes it, the
  reason naming the breach.

Judged by the tick that ran the job, once its run is recorded (never by an idle tick: nothing
ran). :func:`parse_checks` and :func:`breaches` are pure; :func:`check_runs` carries them out.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import operator
import re
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..errors import ConfigurationError
from ..formats import took
from ..scheduling import parse_duration
from .rules import Event

if TYPE_CHECKING:
    from ..config.catalog import Job
    from ..config.settings import Settings
    from ..records import RunRecord
    from ..store import StateStore

logger = logging.getLogger("crontabber.alerts")

#: The fewest earlier good runs a relative rule needs before it judges a run.
MIN_HISTORY = 3
#: The option names of the checks, in ``[[class-X]]``.
OPTIONS = ("min_duration", "slower_than", "check", "on_breach")

_NUMBER = r"(\d+(?:\.\d+)?)"
_AGGREGATE = rf"(?:{_NUMBER}\s*[x*]\s*)?(median|mean|p95|min|max)\((\d+)\)"
_SLOWER = re.compile(rf"^\s*{_NUMBER}\s*[x*]\s*p95\((\d+)\)\s*$")
_CHECK = re.compile(rf"^\s*([a-z][a-z0-9_]*)\s*(<=|>=|<|>)\s*(?:{_AGGREGATE}|{_NUMBER})\s*$")
_OPERATORS: Mapping[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class CheckOptionError(ValueError):
    """A check option whose value does not parse: ``option`` names it, ``problem`` says why
    (``str()``: ``option: problem``)."""

    def __init__(self, option: str, problem: str) -> None:
        self.option = option
        self.problem = problem
        super().__init__(f"{option}: {problem}")


@dataclass(frozen=True)
class MetricCheck:
    """``metric OP [factor x] aggregate(runs)`` or ``metric OP number``."""

    text: str
    metric: str
    op: str
    factor: float = 1.0
    aggregate: str = ""  # '' : against ``number``
    runs: int = 0
    number: float = 0.0


@dataclass(frozen=True)
class Checks:
    """One job's checks; all off by default."""

    min_duration: dt.timedelta = dt.timedelta(0)
    slower_factor: float = 0.0  # 0: no slower_than
    slower_runs: int = 0
    metric_checks: tuple[MetricCheck, ...] = ()
    on_breach: str = "alert"

    @property
    def history(self) -> int:
        """How many earlier runs the rules need (0: none)."""
        return max([self.slower_runs, *(c.runs for c in self.metric_checks)], default=0)

    def __bool__(self) -> bool:
        return bool(self.min_duration or self.slower_factor or self.metric_checks)


def parse_checks(values: Mapping[str, Any]) -> Checks:
    """The checks of a job's option ``values`` (see the module docstring).

    Raises:
        CheckOptionError: a value that does not parse, naming the option.
    """
    on_breach = str(values.get("on_breach") or "alert").strip()
    if on_breach not in ("alert", "pause"):
        raise CheckOptionError("on_breach", f"{on_breach!r} is not alert or pause")
    slower = str(values.get("slower_than") or "").strip()
    factor, runs = 0.0, 0
    if slower:
        match = _SLOWER.match(slower)
        if match is None:
            raise CheckOptionError("slower_than", f"{slower!r} is not K x p95(N) (3 x p95(20))")
        factor, runs = float(match[1]), int(match[2])
        if runs < 1:
            raise CheckOptionError("slower_than", f"{slower!r}: N must be at least 1 run")
    checks = tuple(
        _metric_check(text) for text in str(values.get("check") or "").split(";") if text.strip()
    )
    minimum = values.get("min_duration") or dt.timedelta(0)
    try:
        if not isinstance(minimum, dt.timedelta):  # converted already when read from the INI
            minimum = parse_duration(str(minimum))
    except ValueError as exc:
        raise CheckOptionError("min_duration", str(exc)) from None
    return Checks(minimum, factor, runs, checks, on_breach)


def _metric_check(text: str) -> MetricCheck:
    match = _CHECK.match(text)
    if match is None:
        raise CheckOptionError(
            "check",
            f"{text.strip()!r} is not METRIC OP [K x] AGGREGATE(N) (keys_deleted < 5 x "
            "median(10)) or METRIC OP NUMBER",
        )
    metric, op, factor, aggregate, runs, number = match.groups()
    if aggregate and int(runs) < 1:
        raise CheckOptionError(
            "check", f"{text.strip()!r}: {aggregate}(N) needs N of at least 1 run"
        )
    if aggregate:
        return MetricCheck(
            " ".join(text.split()), metric, op, float(factor or 1), aggregate, int(runs)
        )
    return MetricCheck(" ".join(text.split()), metric, op, number=float(number))


@dataclass(frozen=True)
class Breach:
    """A rule a run broke: which (``rule``), and what it says."""

    rule: str
    said: str


def _took_seconds(run: "RunRecord") -> float | None:
    return (run.ended - run.started).total_seconds() if run.ended is not None else None


def _aggregate(name: str, values: Sequence[float]) -> float:
    if name == "p95":  # nearest rank
        ordered = sorted(values)
        return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    functions: dict[str, Callable[[Sequence[float]], float]] = {
        "median": statistics.median,
        "mean": statistics.fmean,
        "min": min,
        "max": max,
    }
    return float(functions[name](values))


def breaches(run: "RunRecord", earlier: Sequence["RunRecord"], checks: Checks) -> list[Breach]:
    """The rules ``run`` (succeeded) broke, judged against ``earlier``: the job's runs before
    it, newest first (only the succeeded ones that breached nothing count: a breach does not
    become the new normal)."""
    good = [
        r for r in earlier if r.status == "succeeded" and r.breach is None and r.run_id < run.run_id
    ]
    found = []
    seconds = _took_seconds(run)
    if (
        seconds is not None
        and checks.min_duration
        and seconds < checks.min_duration.total_seconds()
    ):
        found.append(
            Breach(
                f"min_duration {took(checks.min_duration)}",
                f"took {took(dt.timedelta(seconds=seconds))}, faster than min_duration "
                f"{took(checks.min_duration)}",
            )
        )
    if seconds is not None and checks.slower_factor:
        past = [s for s in (_took_seconds(r) for r in good[: checks.slower_runs]) if s is not None]
        if len(past) >= min(MIN_HISTORY, checks.slower_runs):
            bound = checks.slower_factor * _aggregate("p95", past)
            if seconds > bound:
                rule = f"slower_than {checks.slower_factor:g} x p95({checks.slower_runs})"
                found.append(
                    Breach(
                        rule,
                        f"took {took(dt.timedelta(seconds=seconds))}, over "
                        f"{took(dt.timedelta(seconds=bound))} ({rule} of "
                        f"{len(past)} good runs)",
                    )
                )
    for check in checks.metric_checks:
        breach = _judge(check, run, good)
        if breach is not None:
            found.append(breach)
    return found


def _judge(check: MetricCheck, run: "RunRecord", good: Sequence["RunRecord"]) -> Breach | None:
    value = run.metrics.get(check.metric)
    if value is None:
        return None
    bound, against = check.number, ""
    if check.aggregate:
        past = [r.metrics[check.metric] for r in good if check.metric in r.metrics][: check.runs]
        if len(past) < min(MIN_HISTORY, check.runs):
            return None
        typical = _aggregate(check.aggregate, past)
        bound = check.factor * typical
        against = f" ({check.aggregate} of {len(past)} good runs: {typical:g})"
    if _OPERATORS[check.op](value, bound):
        return None
    return Breach(
        f"check {check.text}", f"{check.metric} = {value:g}, not {check.op} {bound:g}{against}"
    )


def breach_event(run: "RunRecord", breach: Breach, on_breach: str) -> Event:
    """The ``breach`` alert of ``run``: once across the fleet per run and rule."""
    then = "; the job is paused until someone resumes it (--resume)" if on_breach == "pause" else ""
    return Event(
        run.app_name,
        "breach",
        f"run {run.run_id}: {breach.rule}",
        f"{run.app_name}: run {run.run_id} on {run.by} breached {breach.rule}: "
        f"{breach.said}{then}; "
        "it is left out of the good runs later runs are judged against; "
        f"see --history {run.app_name}, --logs {run.app_name} --run {run.run_id}",
        {
            "run_id": run.run_id,
            "by": run.by,
            "rule": breach.rule,
            "said": breach.said,
            "metrics": dict(run.metrics),
            "on_breach": on_breach,
        },
    )


# ----------------------------------------------------------------- carrying them out


def job_checks(job: "Job", settings: "Settings") -> Checks:
    """The checks of ``job``: its ``[[class-X]]`` options of :data:`OPTIONS`, read from the
    settings' sources (as :func:`crontabber.alerts.rules.alert_rules` reads its own), not the
    whole configuration a run of the job gets.

    Raises:
        ConfigurationError: a value that does not parse, naming the option and the job.
    """
    from ..config.catalog import job_options

    values = {
        option.name: settings.sources.value(job.namespace, option)
        for path, option in job_options(job.cls).walk(job.namespace)
        if path == job.namespace and option.name in OPTIONS
    }
    try:
        return parse_checks(values)
    except CheckOptionError as exc:
        raise ConfigurationError(
            f"crontabber.class-{job.cls.__name__}.{exc.option}", f"{job.app_name}: {exc.problem}"
        ) from None


def unknown_metric(checks: Checks, declared: Sequence[str] | None) -> str | None:
    """What is wrong with the first check of ``checks`` over a metric not in ``declared``
    (the names a job class says its runs return; None: not declared, any name goes), or
    None. Such a check would never judge a run: the metric is never there."""
    if declared is None:
        return None
    for check in checks.metric_checks:
        if check.metric not in declared:
            import difflib

            close = difflib.get_close_matches(check.metric, declared, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            return (
                f"{check.text!r}: the job returns no metric {check.metric} "
                f"(it returns {', '.join(declared) or 'none'}){hint}"
            )
    return None


def validate_checks(job: "Job", settings: "Settings") -> Checks:
    """The checks of ``job``, refused as ``--configtest`` refuses a configuration: a value that
    does not parse, or a ``check`` over a metric the job's class does not return (when it
    declares its ``metric_names``).

    Raises:
        ConfigurationError: naming the option and the job, saying what is wrong.
    """
    checks = job_checks(job, settings)
    problem = unknown_metric(checks, getattr(job.cls, "metric_names", None))
    if problem is not None:
        raise ConfigurationError(
            f"crontabber.class-{job.cls.__name__}.check", f"{job.app_name}: {problem}"
        )
    return checks


def check_runs(
    settings: "Settings",
    jobs: Sequence["Job"],
    store: "StateStore",
    ran: Mapping[str, int],
    holder: str,
    alert: Callable[[Event], None] | None,
    passed: Callable[[str, int, list[str]], None] | None = None,
) -> None:
    """Judge each run of ``ran`` ({app name: run id}, the runs that succeeded in this tick)
    against its job's checks: for each breach, ``alert(event)`` (None: no alert targets) and,
    with ``on_breach = pause``, pause the job (audited, the reason naming the breach); for each
    run judged, ``passed(app name, run id, the rules it broke)`` (the earlier breaches of the
    rules it passed end). A job without checks costs nothing; never raises for a job's bad
    options (logged)."""
    for job in jobs:
        if job.app_name not in ran:
            continue
        try:
            checks = job_checks(job, settings)
        except ConfigurationError as exc:
            logger.error("checks not evaluated: %s", exc)
            continue
        if not checks:
            continue
        records = store.recent_runs(job.app_name, checks.history + 1)
        run = next((r for r in records if r.run_id == ran[job.app_name]), None)
        if run is None:
            continue
        found = breaches(run, [r for r in records if r.run_id != run.run_id], checks)
        if found:
            store.mark_breach(job.app_name, run.run_id, [b.rule for b in found])
        if passed is not None:
            passed(job.app_name, run.run_id, [b.rule for b in found])
        for breach in found:
            event = breach_event(run, breach, checks.on_breach)
            logger.warning("%s", event.message, extra={"job": job.app_name})
            if alert is not None:
                alert(event)
        if found and checks.on_breach == "pause":
            _pause_for_breach(store, job, run, found, holder)


def _pause_for_breach(
    store: "StateStore", job: "Job", run: "RunRecord", found: Sequence[Breach], holder: str
) -> None:
    """Pause ``job`` for the breaches ``found`` of its ``run`` (``on_breach = pause``), with no
    end: until someone resumes it (PostgreSQL's infinity); audited as ``crontabber@holder``,
    the reason naming the first breach."""
    from ..records import AuditEntry

    reason = f"breach of {found[0].rule} by run {run.run_id}: {found[0].said}"
    store.breach_pause(
        job.app_name,
        job.depends_on,
        None,
        run.run_id,
        AuditEntry(
            f"crontabber@{holder}",
            "pause",
            job.app_name,
            reason,
            {"outcome": "done", "breach": [b.rule for b in found], "run_id": run.run_id},
        ),
    )
