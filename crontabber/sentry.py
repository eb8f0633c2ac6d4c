"""Report job errors to Sentry when ``sentry.dsn`` is set.

``sentry_sdk`` is imported only when there is something to send, so a tick
with nothing due does not pay for it. Reporting never breaks the run: a
failure to send is logged at debug level, as crontabber did.
"""

from __future__ import annotations

import logging
from typing import Any

from . import __version__

logger = logging.getLogger(__name__)


class SentryReporter:
    """Callable ``(exception, job)`` that sends the exception with the job as a tag."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._sdk: Any = None

    def _client(self) -> Any:
        if self._sdk is None:
            import sentry_sdk

            sentry_sdk.init(dsn=self.dsn, release=f"crontabber@{__version__}",
                            default_integrations=False)
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
                event_id = sdk.capture_exception(exc)
            sdk.flush(timeout=5)
        except Exception:  # noqa: BLE001 - never let reporting break a run
            logger.debug("Failed to capture and send error to Sentry", exc_info=True)
            return None
        logger.info("Error captured in Sentry. Reference: %s", event_id)
        return event_id

    def send_test_message(self) -> str | None:
        """``--sentrytest``: send one message and return its event id."""
        sdk = self._client()
        event_id = sdk.capture_message("Sentry test sent from crontabber")
        sdk.flush(timeout=5)
        return event_id
