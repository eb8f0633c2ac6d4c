"""``ProcessUploadsCronApp``: the crontabber job that drains the symbol-upload queue."""

from __future__ import annotations

from crontabber.base import BaseCronApp, Summary
from crontabber.config.options import Namespace
from crontabber.mixins import using_postgres
from jobs import SQL_DIR

from .options import CONVERTERS, OPTIONS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _options() -> Namespace:
    """The options of :mod:`.options`, declared to the runner."""
    ns = Namespace()
    for name, default, doc in OPTIONS:
        ns.add_option(name, default=default, doc=doc, from_string_converter=CONVERTERS.get(name))
    return ns


@using_postgres()
class ProcessUploadsCronApp(BaseCronApp):
    """Drain pending symbol uploads: validate each archive, publish its files to S3.

    Several hosts may run it at once; uploads are claimed row by row
    (``FOR UPDATE SKIP LOCKED``) with a lease. A failed upload does not fail the
    job (it is recorded on its row); an unexpected error does, after being recorded.
    """

    schema_dir = SQL_DIR  # its tables: sql/jobs/schema.sql

    app_name = "process-uploads"
    metric_names = ("uploads_done", "uploads_not_done", "files_published")  # run()'s Summary
    app_description = "publish queued symbol archives to the symbols bucket"
    required_config = _options()

    database_connection_factory: Any  # set by @using_postgres()

    def run(self) -> Summary:
        """Returns the run's summary and metrics (crontabber.base): uploads done and not
        done, symbol files published."""
        from .records import UploadStatus
        from .worker import Worker

        with self.database_connection_factory() as connection:
            outcomes = Worker.from_config(self.config, connection).drain(
                keep_going=self.holds_lease
            )
        failed = [o for o in outcomes if o.status is not UploadStatus.DONE]
        done = len(outcomes) - len(failed)
        return Summary(
            f"{len(outcomes)} uploads: {done} done, {len(failed)} not done",
            uploads_done=done,
            uploads_not_done=len(failed),
            files_published=sum(o.files for o in outcomes),
        )
