"""Every time a command prints is UTC, whatever the zone of the host (``TZ``) and of the
database's sessions (issue #44, item 6, P12): the test databases' sessions are in
``America/St_Johns`` (tests/helpers.py, ``TEST_TIME_ZONE``), and here the process's ``TZ``
is another half-hour zone."""

from __future__ import annotations

import datetime as dt
import re

HOST_ZONE = "Asia/Kolkata"  # +05:30: a local time would be 5.5 hours off


def test_log_lines_and_audit_details_are_utc_whatever_tz_and_the_session_zone(cli):
    cli.env["TZ"] = HOST_ZONE
    cli.crontab.configure(["BasicJob|1d"])
    done = cli.run()
    assert done.returncode == 0, done.stderr
    now = cli.crontab.now().astimezone(dt.timezone.utc).replace(tzinfo=None)
    stamps = re.findall(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d{3} INFO ", done.stderr, re.M)
    assert stamps, done.stderr
    for stamp in stamps:  # within minutes of the database's UTC clock, not 5.5 hours off
        assert abs(dt.datetime.fromisoformat(stamp) - now) < dt.timedelta(minutes=30), stamp
    paused = cli.run("--pause", "basic-job", "--until", "2h", "--reason", "in UTC")
    assert paused.returncode == 0, paused.stderr
    until = cli.crontab.state("basic-job").paused_until.astimezone(dt.timezone.utc)
    audit = cli.run("--audit")
    assert f"until={until:%Y-%m-%d %H:%M:%S} UTC" in audit.stdout, audit.stdout
    assert "-03:30" not in audit.stdout and "+05:30" not in audit.stdout
