"""Configuration: what the runner and its jobs are told, and from where.

- :mod:`~crontabber.config.settings`: the runner's settings from ``crontabber.ini``, the
  environment and the command line (in that order of precedence, the reverse);
- :mod:`~crontabber.config.inifile`: reading ``crontabber.ini`` in configobj's format;
- :mod:`~crontabber.config.options`: declaring options (configman's ``Namespace``);
- :mod:`~crontabber.config.names`: the strict check of the option names given;
- :mod:`~crontabber.config.catalog`: importing and validating the configured jobs;
- :mod:`~crontabber.config.job`: a job's ``self.config`` for its own commands.

Nothing is imported here: each importer names the module it needs (``crontabber.config.options``
alone is what a job class needs).
"""
