"""Sample jobs for the differential check (scripts/differential/run.py).

This one source is imported by BOTH implementations:

* the original crontabber 0.18.1 under Python 2.7 (``crontabber.base`` and
  ``crontabber.mixins`` from PyPI, options declared with configman);
* ours under Python 3 (the same import paths, options declared with
  ``crontabber.config.options.Namespace``, which mirrors configman's
  ``Namespace.add_option(name, default=None, doc=None, ...)``).

So: no f-strings, no annotations, no print. Jobs do nothing observable except
raise where they are meant to: what is compared is the state crontabber
writes (tables ``crontabber`` and ``crontabber_log``).
"""

from crontabber.base import BaseCronApp
from crontabber.mixins import as_backfill_cron_app

try:  # ours (Python 3)
    from crontabber.config.options import Namespace
except ImportError:  # the original (Python 2.7): configman
    from configman import Namespace


class BasicJob(BaseCronApp):
    app_name = "basic-job"

    def run(self):
        pass


class FooJob(BaseCronApp):
    app_name = "foo"

    def run(self):
        pass


class BarJob(BaseCronApp):
    app_name = "bar"
    depends_on = "foo"

    def run(self):
        pass


class TroubleJob(BaseCronApp):
    app_name = "trouble"

    def run(self):
        raise NameError("Trouble!!")


class SadJob(BaseCronApp):
    """Depends on ``trouble``, so it never runs while trouble fails."""

    app_name = "sad"
    depends_on = "trouble"

    def run(self):
        pass


@as_backfill_cron_app
class FooBackfillJob(BaseCronApp):
    app_name = "foo-backfill"

    def run(self, date):
        pass


@as_backfill_cron_app
class FailingBackfillJob(BaseCronApp):
    """Fails on the date (UTC, YYYY-MM-DD) given by its option ``fail_on``,
    set in the ini under ``[crontabber]`` ``[[class-FailingBackfillJob]]``."""

    app_name = "failing-backfill"
    required_config = Namespace()
    required_config.add_option("fail_on", default="", doc="YYYY-MM-DD to fail on")

    def run(self, date):
        if date.strftime("%Y-%m-%d") == self.config.fail_on:
            raise NameError("bla bla")
