"""The read-only operator dashboard: every job's state, its run history, the
pipeline's health and the fleet, as a web page and as JSON (the command
line's ``--json`` shapes). ``python -m dashboard`` serves it
(:mod:`dashboard.server`); ``dashboard.app:application`` is the WSGI
application for gunicorn (:mod:`dashboard.app`).

It reads the runner through its public surface only (:mod:`crontabber.inspection`,
besides what every job may import: docs/architecture.md, "The public surface") and, for
the pipeline panels, the jobs' own helpers; nothing imports it.
"""
