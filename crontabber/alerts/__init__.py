"""Alerts: what a tick tells people, once across the fleet ([Alerts](docs/alerts.md)).

- :mod:`~crontabber.alerts.sweep`: the tick's alert step, starting with its one light
  statement (claim the notices due, read the open alerts and the windows); the only module
  of this package an idle tick imports (this file imports none, so importing the sweep
  does not pull in the rest);
- :mod:`~crontabber.alerts.rules`: the rules, pure (conditions and the plan of a tick);
- :mod:`~crontabber.alerts.alerter`: carrying the plan out once across the fleet;
- :mod:`~crontabber.alerts.delivery`: sending the claimed notices (a storm as one) and
  recording how each went;
- :mod:`~crontabber.alerts.notify`: the targets and the sending of one notice;
- :mod:`~crontabber.alerts.store`: the alert tables' queries, over the state store's connection.
"""
