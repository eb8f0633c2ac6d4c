"""``ProcessUploadsCronApp``: the crontabber job that drains the symbol-upload queue."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from crontabber.base import BaseCronApp
from crontabber.mixins import using_postgres
from crontabber.options import DotDict, Namespace
from jobs import defaults

if TYPE_CHECKING:  # imported in functions: a cron tick where this job is not due skips them
    from .records import Settings
    from .worker import Policy

# records.Limits' defaults, repeated so that declaring the options imports nothing
# heavy (tests/unit/test_uploads_validation.py checks they agree).
DEFAULT_LIMITS = {"max_members": 20_000, "max_total_size": 8 * 1024**3,
                  "max_member_size": 4 * 1024**3, "max_ratio": 200.0, "ratio_min_size": 1024**2}

logger = logging.getLogger(__name__)


def _options() -> Namespace:
    ns = Namespace()
    add = ns.add_option
    add("inbox_bucket", default=defaults.INBOX_BUCKET, doc="bucket holding uploaded archives")
    add("inbox_prefix", default=defaults.UPLOADS_PREFIX, doc="key prefix of archives stored by `enqueue`")
    add("symbols_bucket", default=defaults.SYMBOLS_BUCKET, doc="bucket symbol files are written to")
    add("symbols_prefix", default=defaults.SYMBOLS_PREFIX, doc="key prefix: <prefix>/<debug_file>/<ID>/<file>")
    add("compress_extensions", default="sym", doc="comma-separated extensions stored gzipped")
    add("gzip_level", default=1,
        doc="isal deflate level (0-3) for stored members (deflated ones keep their stream)")
    add("concurrency", default=8, doc="threads (and S3 connections) per upload")
    add("multipart_threshold", default=8 * 1024**2,
        doc="objects larger than this (bytes, as stored) are written by multipart upload")
    add("part_size", default=8 * 1024**2, doc="multipart part size in bytes (S3: >= 5 MiB)")
    add("existence_check", default="auto", doc="auto, list or head (see docs/jobs/uploads.md)")
    add("max_attempts", default=3, doc="attempts before an upload stays failed")
    add("lease_seconds", default=600.0, doc="a claim not renewed for this long is taken over")
    add("retry_delay_seconds", default=300.0, doc="wait before retrying a failed attempt")
    add("heartbeat_seconds", default=30.0, doc="how often a worker renews its claim")
    add("max_uploads_per_run", default=0, doc="uploads per run (0: until the queue is empty)")
    add("max_members", default=DEFAULT_LIMITS["max_members"], doc="files an archive may hold")
    add("max_total_size", default=DEFAULT_LIMITS["max_total_size"],
        doc="uncompressed bytes per archive")
    add("max_member_size", default=DEFAULT_LIMITS["max_member_size"],
        doc="uncompressed bytes per file")
    add("max_ratio", default=DEFAULT_LIMITS["max_ratio"], doc="largest uncompressed:compressed ratio")
    add("ratio_min_size", default=DEFAULT_LIMITS["ratio_min_size"],
        doc="max_ratio applies from this size")
    return ns


def settings_from(config: DotDict | dict[str, Any]) -> "Settings":
    """The processing settings held by the job's options."""
    from .records import Limits, Settings

    limits = Limits(int(config["max_members"]), int(config["max_total_size"]),
                    int(config["max_member_size"]), float(config["max_ratio"]),
                    int(config["ratio_min_size"]))
    extensions = tuple(part.strip().lower().lstrip(".")
                       for part in str(config["compress_extensions"]).split(",") if part.strip())
    return Settings(config["inbox_bucket"], config["symbols_bucket"], config["symbols_prefix"],
                    extensions, int(config["gzip_level"]), int(config["concurrency"]),
                    config["existence_check"], limits, int(config["multipart_threshold"]),
                    int(config["part_size"]))


def policy_from(config: DotDict | dict[str, Any]) -> "Policy":
    from .worker import Policy

    return Policy(int(config["max_attempts"]), float(config["lease_seconds"]),
                  float(config["retry_delay_seconds"]), float(config["heartbeat_seconds"]),
                  int(config["max_uploads_per_run"]))


@using_postgres()
class ProcessUploadsCronApp(BaseCronApp):
    """Drain pending symbol uploads: validate each archive, publish its files to S3.

    Several hosts may run it at once; uploads are claimed row by row
    (``FOR UPDATE SKIP LOCKED``) with a lease. A failed upload does not fail the
    job (it is recorded on its row); an unexpected error does, after being recorded.
    """

    app_name = "process-uploads"
    app_description = "publish queued symbol archives to the symbols bucket"
    required_config = _options()

    database_connection_factory: Any  # set by @using_postgres()

    def run(self) -> None:
        from .storage import make_client
        from .store import UploadStore
        from .worker import Worker

        settings = settings_from(self.config)
        client = make_client(settings.concurrency)
        with self.database_connection_factory() as connection:
            worker = Worker(UploadStore(connection), settings, client, policy_from(self.config))
            outcomes = worker.drain()
        from .records import Status

        failed = [o for o in outcomes if o.status is not Status.DONE]
        logger.info("process-uploads: %d uploads, %d done, %d not done", len(outcomes),
                    len(outcomes) - len(failed), len(failed),
                    extra={"app_name": self.app_name})
