"""The project's jobs: crontabber apps loaded by dotted path from crontabber.ini.

Job modules import only the runner's public surface (``crontabber.base``,
``crontabber.mixins``, ``crontabber.options``, ``crontabber.errors``,
``crontabber.queries``) and import heavy libraries (boto3, elasticsearch)
inside ``run()``, so a tick with nothing due stays cheap.
"""
