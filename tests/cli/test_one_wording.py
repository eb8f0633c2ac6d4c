"""One wording across the commands (issue #32, item 15; on-call trial 4, #16): an error reads
``Type: message`` (the class without its module, ``str(exc)``) in --list-jobs, --history,
--show-error, --explain and --nagios alike; a relative time reads one way (``in 1h57m``,
``2m19s ago``) in each. The real entry point as a subprocess, the real PostgreSQL."""

from __future__ import annotations

import json

from tests.helpers import ok

REFUSED = "URLError: <urlopen error [Errno 111] Connection refused>"


def test_an_error_reads_the_same_in_every_command(cli):
    cli.crontab.configure(["UnreachableJob|1d"])
    assert cli.run().returncode == 0
    outputs = {
        " ".join(args): cli.run(*args).stdout
        for args in (
            ("--list-jobs", "--wide"),
            ("--show-error", "unreachable"),
            ("--explain", "unreachable"),
            ("--nagios",),
        )
    }
    # the tables cut their last column to 100 columns: the same words, cut
    assert f"1x {REFUSED[:40]}" in cli.run("--list-jobs").stdout
    assert f"  failed   {REFUSED[:30]}" in cli.run("--history", "unreachable").stdout
    (run,) = json.loads(cli.run("--history", "unreachable", "--json").stdout)["runs"]
    assert run["entries"][0]["error"] == REFUSED
    for command, out in outputs.items():
        assert REFUSED in out, f"{command}:\n{out}"
        if command == "--nagios":  # its status line keeps crontabber's fields: checks parse it
            out = out.split("\n", 1)[1]
        head = out.split("Traceback")[0]  # a traceback says what Python says
        assert "URLError(" not in head and "urllib.error" not in head, out
    show = outputs["--show-error unreachable"].splitlines()
    assert REFUSED in show  # a line of its own, then the traceback as Python prints it
    assert "urllib.error.URLError: <urlopen error [Errno 111] Connection refused>" in show


def test_a_time_to_come_reads_the_same_in_the_list_and_the_nagios_check(cli):
    """A pause of 117 minutes: ``ends in 1h56m`` (the list said ``in 1h``) and ``(in 1h56m)``
    (the check said ``(in 1 hour, 56 minutes)``): one formatter, rounded down."""
    cli.crontab.configure(["TroubleJob|1d"])
    assert cli.run().returncode == 0
    ok(cli.run("--pause", "trouble", "--until", "117m", "--reason", "ES migration"))
    listed = ok(cli.run("--list-jobs")).stdout
    assert "ends in 1h56m: ES migration" in listed, listed
    checked = cli.run("--nagios").stdout
    assert "(in 1h56m) by " in checked and "failing: NameError: Trouble!!" in checked, checked
