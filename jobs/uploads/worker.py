"""Drain the upload queue: claim, process, record the outcome; one upload at a time."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from crontabber.database import default_holder

from .errors import (
    ClaimLost,
    DiskFull,
    S3Unavailable,
    StorageFailed,
    UploadError,
    UploadNotFound,
    VersioningOff,
    is_disk_full,
)
from .options import DEFAULTS
from .process import process
from .records import Progress, Upload, UploadSettings, UploadStatus
from .store import UploadStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Policy:
    """Queue behaviour (the job's options; their meaning and defaults in :mod:`.options`)."""

    max_attempts: int = DEFAULTS["max_attempts"]
    lease_seconds: float = DEFAULTS["lease_seconds"]
    retry_delay_seconds: float = DEFAULTS["retry_delay_seconds"]
    heartbeat_seconds: float = DEFAULTS["heartbeat_seconds"]
    max_uploads_per_run: int = DEFAULTS["max_uploads_per_run"]  # 0: until the queue is empty

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Policy:
        """The queue behaviour held by the job's options."""
        return cls(
            int(config["max_attempts"]),
            float(config["lease_seconds"]),
            float(config["retry_delay_seconds"]),
            float(config["heartbeat_seconds"]),
            int(config["max_uploads_per_run"]),
        )


@dataclass(frozen=True)
class UploadOutcome:
    """What happened to one upload in this run."""

    upload_id: int
    status: UploadStatus
    error: str | None = None
    unavailable: bool = False  # S3 itself failed it (see StorageFailed.unavailable)
    failure: StorageFailed | None = None  # S3's failure (maybe about this upload's key only)
    files: int = 0  # the symbol files it published (done)


class Worker:
    """Processes uploads with one S3 client and one database connection."""

    def __init__(
        self,
        store: UploadStore,
        settings: UploadSettings,
        client: Any,
        policy: Policy,
        name: str | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.client = client
        self.policy = policy
        self.name = name or default_holder()

    @classmethod
    def from_config(cls, config: Mapping[str, Any], connection: Any) -> Worker:
        """The job's worker: its options, its one S3 client, the queue on ``connection``."""
        from .storage import make_client

        settings = UploadSettings.from_config(config)
        return cls(
            UploadStore(connection),
            settings,
            make_client(settings.concurrency),
            Policy.from_config(config),
        )

    def drain(
        self, keep_going: Callable[[], bool] = lambda: True, progress: Progress | None = None
    ) -> list[UploadOutcome]:
        """Process claimable uploads until none is left (or ``max_uploads_per_run``),
        claiming another only while ``keep_going()`` (the cron job's
        ``holds_lease``: a run that lost its lease claims nothing more).

        ``progress`` (``python -m jobs.uploads drain`` on a terminal) is told the number of
        uploads claimable at the start (at most ``max_uploads_per_run``), then each upload
        once, when it has been handled.

        An upload tried in this run is not claimed again in it (its retry waits for a
        later run). Raises whatever unexpected error an upload met, after recording it.

        Raises:
            DiskFull: the spool's disk is full (the upload was recorded as failed for
                this attempt; the drain stops, as for S3Unavailable).
            S3Unavailable: an upload failed because S3 itself did (unreachable, timing
                out, 503, or another 5xx while a HEAD of the bucket fails too): recorded on
                its row, then the drain stops, so an outage costs one upload's attempt and
                fails the run, instead of every queued upload's retries in turn (~75 s each)
                and a run recorded as a success. A 5xx about one upload's key while the
                bucket answers is that upload's failure only: the drain goes on.
            VersioningOff: ``overwrite = versioned`` on a bucket without versions.
        """
        self.check_overwrite()
        self._abandon_expired()
        outcomes: list[UploadOutcome] = []
        tried: list[int] = []
        if progress is not None:
            self._start_progress(progress)
        while not self.policy.max_uploads_per_run or len(tried) < self.policy.max_uploads_per_run:
            if not keep_going():
                logger.warning(
                    "the job no longer holds its lease: no more uploads claimed (%d processed)",
                    len(tried),
                )
                break
            upload = self._claim_next(tried)
            if upload is None:
                break
            tried.append(upload.id)
            outcome = self.handle(upload)
            outcomes.append(outcome)
            if progress is not None:
                progress.advance(1)
            if outcome.unavailable and not self._only_this_upload(outcome):
                raise S3Unavailable(_endpoint(self.client), outcome.upload_id, outcome.error or "")
        return outcomes

    def _abandon_expired(self) -> None:
        """Record as abandoned each upload whose worker died on its last attempt (its lease
        expired), with a warning each."""
        for upload_id in self.store.abandon_expired(
            self.policy.max_attempts, self.policy.lease_seconds
        ):
            logger.warning("upload %d: abandoned, its worker died on the last attempt", upload_id)

    def _start_progress(self, progress: Progress) -> None:
        """Tell ``progress`` how many uploads this drain will handle at most: the claimable
        ones now, at most ``max_uploads_per_run`` (0: no limit)."""
        total = self.store.claimable(
            self.policy.max_attempts, self.policy.lease_seconds, self.policy.retry_delay_seconds
        )
        limit = self.policy.max_uploads_per_run
        progress.start(min(total, limit) if limit else total)

    def _claim_next(self, tried: list[int]) -> Upload | None:
        """Claim the next claimable upload for this worker, none of ``tried`` (each upload is
        tried once a run); None when none is left."""
        return self.store.claim_next(
            self.name,
            self.policy.max_attempts,
            self.policy.lease_seconds,
            self.policy.retry_delay_seconds,
            tried,
        )

    def reprocess(self, upload_id: int, progress: Progress | None = None) -> UploadOutcome:
        """Claim one upload whatever its status (unless a live worker holds it) and process it.

        Raises:
            UploadNotFound: no such upload, or another worker is processing it.
            VersioningOff: ``overwrite = versioned`` on a bucket without versions.
        """
        self.check_overwrite()
        upload = self.store.claim_id(upload_id, self.name, self.policy.lease_seconds)
        if upload is None:
            raise UploadNotFound(upload_id)
        return self.handle(upload, progress)

    def handle(self, upload: Upload, progress: Progress | None = None) -> UploadOutcome:
        """Process one claimed upload and record how it ended."""
        extra = {"app_name": "process-uploads", "upload_id": upload.id}
        recorder = self.store.recorder(upload.id, self.name, self.policy.heartbeat_seconds)
        try:
            counts = process(upload, self.settings, self.client, recorder, progress)
            self.store.finish_done(upload.id, self.name, counts)
        except ClaimLost as exc:
            logger.warning("%s", exc, extra=extra)
            return UploadOutcome(upload.id, UploadStatus.PROCESSING, str(exc))
        except UploadError as exc:
            status = self._failed(upload, str(exc), exc.permanent)
            logger.warning(
                "upload %d (attempt %d): %s -> %s",
                upload.id,
                upload.attempts,
                exc,
                status.value,
                extra=extra,
            )
            return UploadOutcome(
                upload.id,
                status,
                str(exc),
                unavailable=getattr(exc, "unavailable", False),
                failure=exc if isinstance(exc, StorageFailed) else None,
            )
        except BaseException as exc:  # a bug, the database, SIGTERM: record, then re-raise
            try:
                self._failed(upload, f"{type(exc).__name__}: {exc}", permanent=False)
            except Exception as unrecorded:  # the database itself may be what failed
                logger.error(
                    "upload %d: could not record the failure: %s",
                    upload.id,
                    unrecorded,
                    extra=extra,
                )
            if is_disk_full(exc):
                raise DiskFull(upload.id, exc) from None
            raise
        logger.info("upload %d done: %d files", upload.id, counts.total, extra=extra)
        return UploadOutcome(upload.id, UploadStatus.DONE, files=counts.total)

    def check_overwrite(self) -> None:
        """``overwrite = versioned`` needs a bucket that keeps versions: checked before
        anything is claimed.

        Raises:
            VersioningOff: it does not.
            StorageFailed: S3 failed after retries.
        """
        from .records import Overwrite
        from .storage import versioning

        if self.settings.overwrite is Overwrite.VERSIONED:
            status = versioning(self.client, self.settings.symbols_bucket)
            if status != "Enabled":
                raise VersioningOff(self.settings.symbols_bucket, status)

    def _only_this_upload(self, outcome: UploadOutcome) -> bool:
        """Whether an upload that S3 failed with a 5xx failed alone: S3 answered (not 503)
        and still does the same kind of request for another key (:func:`.storage.answers`),
        so the error was about that upload's keys (a back end refusing a name), and the
        drain goes on with the next upload."""
        from .storage import answers

        failure = outcome.failure
        if failure is None or not failure.maybe_this_key or not answers(self.client, failure):
            return False
        logger.warning(
            "upload %d: S3 failed it but answers: the drain goes on (%s)",
            outcome.upload_id,
            outcome.error,
            extra={"app_name": "process-uploads", "upload_id": outcome.upload_id},
        )
        return True

    def _failed(self, upload: Upload, error: str, permanent: bool) -> UploadStatus:
        try:
            return self.store.finish_error(
                upload.id, self.name, error, permanent, self.policy.max_attempts, None
            )
        except ClaimLost:
            return UploadStatus.PROCESSING


def _endpoint(client: Any) -> str:
    """The S3 client's endpoint (``http://127.0.0.1:9444``), for the one line of an outage."""
    return str(getattr(getattr(client, "meta", None), "endpoint_url", None) or "?")
