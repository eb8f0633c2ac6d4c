"""The project's jobs: crontabber apps loaded by dotted path from crontabber.ini.

Job modules import only the runner's public surface (``crontabber.base``,
``crontabber.mixins``, ``crontabber.config.options``, ``crontabber.errors``,
``crontabber.sqlfiles``) and import heavy libraries (boto3, elasticsearch)
inside ``run()``, so a tick with nothing due stays cheap.
"""

from crontabber import sqlfiles

#: The jobs' SQL and schema (``sql/jobs/``: ``schema.sql``, ``migrations/``). A job whose tables
#: are here says so with ``schema_dir = SQL_DIR``: the runner applies this schema only when such
#: a job is configured (crontabber.schema).
SQL_DIR = sqlfiles.directory("jobs")
