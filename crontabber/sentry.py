"""Report job errors to Sentry when ``sentry.dsn`` is set.

``sentry_sdk`` is imported only when there is something to send, so a tick
with nothing due does not pay for it. Reporting never breaks the run: a
failure to send is logged at debug level, as crontabber did.

Events keep the frames' local variables (what makes a Sentry event worth reading) but no
secret: sentry-sdk's own ``EventScrubber`` masks variables and keys named like a secret
(its denylist plus the project's setting names, recursively), and every string left in the
event goes through :func:`crontabber.redaction.redact` with the secrets of the environment
and the settings, so an Elasticsearch URL with its password in a variable called ``url``, or
a crontabber-style job's config object (sent as its ``repr``) holding the database
password, is masked too.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from .redaction import redact
from .version import version

#: Names of variables and keys masked whatever their value (added to sentry-sdk's list):
#: the project's secret settings under the names jobs and configs give them.
DENYLIST = [
    "dsn",
    "sentry_dsn",
    "database_password",
    "secret_access_key",
    "aws_secret_access_key",
    "access_key",
    "secret_key",
    "es_password",
]

logger = logging.getLogger(__name__)


def monitor_slug(app_name: str) -> str:
    """A job's Sentry Crons monitor: its app name in Sentry's slug alphabet."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in app_name.lower())[:50]


def monitor_config(schedule: Any, timeout: float, failures: int) -> dict[str, Any]:
    """The Sentry Crons monitor of a job, from its schedule: a crontab for a cron expression
    (macros expanded) and for a daily job at a time of day, in the schedule's zone; an
    interval otherwise; a check-in margin that covers its jitter and settle
    lag plus a cron tick's period (5 minutes); its timeout as the longest run; an issue after
    ``failures`` failed check-ins in a row (the job's ``alert_after_failures``)."""
    seconds = int(schedule.seconds)
    if schedule.expression is not None:
        plan: dict[str, Any] = {"type": "crontab", "value": schedule.expression}
    elif schedule.time is not None and seconds == 86400:
        plan = {"type": "crontab", "value": f"{schedule.time.minute} {schedule.time.hour} * * *"}
    else:
        unit, size = next(
            (u, s) for u, s in (("day", 86400), ("hour", 3600), ("minute", 60)) if seconds % s == 0
        )
        plan = {"type": "interval", "value": seconds // size, "unit": unit}
    config: dict[str, Any] = {
        "schedule": plan,
        "timezone": schedule.zone,
        "checkin_margin": int(schedule.delay.total_seconds() // 60) + 5,
        "failure_issue_threshold": max(1, failures),
        "recovery_threshold": 1,
    }
    if timeout:
        config["max_runtime"] = max(1, -(-int(timeout) // 60))
    return config


class SentryReporter:
    """Callable ``(exception, job)`` that sends the exception with the job as a tag."""

    def __init__(self, dsn: str, secrets: Iterable[str] = ()) -> None:
        self.dsn = dsn
        self.secrets = frozenset(secrets)
        self._sdk: Any = None

    def _client(self) -> Any:
        if self._sdk is None:
            import sentry_sdk
            from sentry_sdk.scrubber import DEFAULT_DENYLIST, EventScrubber

            sentry_sdk.init(
                dsn=self.dsn,
                release=f"crontabber@{version()}",
                default_integrations=False,
                event_scrubber=EventScrubber(denylist=DEFAULT_DENYLIST + DENYLIST, recursive=True),
                before_send=lambda event, hint: self.redacted(event),
                before_breadcrumb=lambda crumb, hint: self.redacted(crumb),
            )
            self._sdk = sentry_sdk
        return self._sdk

    def __call__(self, exc: BaseException, job: Any) -> str | None:
        if not self.dsn:
            return None
        try:
            sdk = self._client()
            with sdk.new_scope() as scope:
                scope.set_tag("job", job.app_name)
                scope.set_tag("job_class", job.class_path)
                event_id: str | None = sdk.capture_exception(exc)
            sdk.flush(timeout=5)
        except Exception:  # noqa: BLE001 - never let reporting break a run
            logger.debug("Failed to capture and send error to Sentry", exc_info=True)
            return None
        logger.info("Error captured in Sentry. Reference: %s", event_id)
        return event_id

    def redacted(self, value: Any) -> Any:
        """``value`` (an event, a part of one) with every string redacted."""
        if isinstance(value, str):
            return redact(value, self.secrets)
        if isinstance(value, dict):
            return {key: self.redacted(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.redacted(item) for item in value]
        return value

    def start(self, job: Any, monitor_config: dict[str, Any]) -> str | None:
        """A Sentry Crons ``in_progress`` check-in of a run of ``job`` (its monitor created or
        updated from ``monitor_config``): the check-in id, None when it could not be sent."""
        try:
            from sentry_sdk.crons import capture_checkin

            self._client()
            checkin_id = capture_checkin(
                monitor_slug=monitor_slug(job.app_name),
                status="in_progress",
                monitor_config=monitor_config,  # type: ignore[arg-type]
            )
            self._sdk.flush(timeout=5)
            return str(checkin_id)
        except Exception:  # noqa: BLE001 - never let reporting break a run
            logger.debug("Failed to send a Sentry Crons check-in", exc_info=True)
            return None

    def finish(self, job: Any, checkin_id: str | None, ok: bool, seconds: float) -> None:
        """The run's ``ok`` or ``error`` check-in (closing ``checkin_id`` when there is one)."""
        try:
            from sentry_sdk.crons import capture_checkin

            self._client()
            capture_checkin(
                monitor_slug=monitor_slug(job.app_name),
                check_in_id=checkin_id,
                status="ok" if ok else "error",
                duration=seconds,
            )
            self._sdk.flush(timeout=5)
        except Exception:  # noqa: BLE001
            logger.debug("Failed to send a Sentry Crons check-in", exc_info=True)

    def send_test_message(self) -> str | None:
        """``--sentrytest``: send one message and return its event id."""
        sdk = self._client()
        event_id: str | None = sdk.capture_message("Sentry test sent from crontabber")
        sdk.flush(timeout=5)
        return event_id
