"""What an alert says (issue #32, item 15; on-call trial 4, #13): the failing alert names its
run and the next commands, and its count follows the streak (the re-alert, ``--alerts`` and
the recovery quote the current one); stored messages state times, never "ago"; the JSON's
times are ISO 8601 UTC as ``--json``'s; ``--alerts`` counts the notices sent, not made, and
says when a notice's claim belongs to a process that no longer exists. The real entry point
as a subprocess, the real PostgreSQL, a real local HTTP receiver."""

from __future__ import annotations

import json
import re
import signal
import socket

from tests.fixtures.alerting import TARGETS, configure_alerts, make_due, not_due
from tests.fixtures.receiver import receiver  # noqa: F401 - the fixture
from tests.fixtures.smtp import smtp_server  # noqa: F401 - the fixture
from tests.fixtures.waiting import wait_for
from tests.helpers import ok

HOOK = "        hook webhook {url}/hook\n"
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def test_a_failing_alert_names_its_run_and_keeps_its_count_current(cli, receiver):
    configure_alerts(
        cli,
        receiver,
        ["ChattyJob|1d"],
        "    [[class-ChattyJob]]\n        fail=True\n",
        targets=HOOK,
    )
    ok(cli.run())
    make_due(cli.crontab, "chatty")
    ok(cli.run())  # a second failure: the alert
    (first,) = receiver.at("/hook")
    run_id = cli.crontab.state("chatty").run_id
    assert first.json["message"].startswith("chatty: failed 2 times in a row; last: ")
    holder = cli.crontab.sql(
        "SELECT host || ':' || pid AS by FROM crontabber_run WHERE run_id = %s", (run_id,)
    )[0]["by"]
    assert (f"(run {run_id} on {holder}); see --show-error chatty, --logs chatty") in first.json[
        "message"
    ]  # no dashboard configured: no link
    assert first.json["detail"]["run_id"] == run_id and first.json["detail"]["by"] == holder
    make_due(cli.crontab, "chatty")
    ok(cli.run())  # a third: the alert says so, not "2 times"
    (alert,) = cli.crontab.sql("SELECT id, message, detail FROM crontabber_alert")
    assert alert["message"].startswith("chatty: failed 3 times in a row")
    assert alert["detail"]["error_count"] == 3
    assert "failed 3 times in a row" in ok(cli.run("--alerts")).stdout
    # the re-alert sends the current count
    not_due(cli.crontab, "chatty")
    cli.crontab.sql("UPDATE crontabber_alert SET next_notice = now()")
    ok(cli.run())
    assert [r.json["message"][:33] for r in receiver.at("/hook")] == [
        "chatty: failed 2 times in a row; ",
        "chatty: failed 3 times in a row; ",
    ]
    # the recovery quotes the streak as it ended
    make_due(cli.crontab, "chatty")
    ok(cli.run("--crontabber.class-ChattyJob.fail=False"))
    recovered = receiver.at("/hook")[-1].json
    assert (
        recovered["kind"] == "recovered"
        and "was: chatty: failed 3 times in a row" in recovered["message"]
    )


def test_a_failing_alert_names_its_host_what_it_blocks_and_its_dashboard_page(
    cli, receiver, smtp_server
):
    """Every payload (JSON, Slack, PagerDuty, e-mail) says who ran the failed run, which jobs
    wait for it (as --explain names them), the next commands and the job's dashboard page;
    the subject, PagerDuty's dedup key, is the streak's as before."""
    smtp = (
        f"    smtp_host=127.0.0.1\n    smtp_port={smtp_server.port}\n    "
        "dashboard_url=http://dash.example.net:8112/\n"
    )
    configure_alerts(
        cli,
        receiver,
        ["TroubleJob|1d", "SadJob|1d"],
        "    alert_after_failures=1\n",
        targets=TARGETS + "        mail email oncall@example.net\n",
    )
    cli.crontab.ini.write_text(cli.crontab.ini.read_text() + smtp)
    ok(cli.run())
    run_id = cli.crontab.state("trouble").run_id
    (holder,) = [
        row["by"]
        for row in cli.crontab.sql(
            "SELECT host || ':' || pid AS by FROM crontabber_run WHERE run_id = %s", (run_id,)
        )
    ]
    link = "http://dash.example.net:8112/jobs/trouble"
    said = (
        f"trouble: failed 1 time in a row; last: NameError: Trouble!! (run {run_id} on "
        f"{holder}); blocks sad; see --show-error trouble, --logs trouble; dashboard: {link}"
    )
    assert "  blocks sad: " in ok(cli.run("--explain", "trouble")).stdout  # the same dependents
    (hook,) = receiver.at("/hook")
    assert hook.json["message"] == said and hook.json["subject"].startswith("after never ")
    assert hook.json["detail"]["by"] == holder and hook.json["detail"]["blocks"] == ["sad"]
    assert hook.json["detail"]["link"] == link
    assert receiver.at("/slack")[0].json["text"] == f":red_circle: {said}"
    (page,) = receiver.at("/pd")
    assert page.json["payload"]["summary"] == said
    assert page.json["links"] == [{"href": link, "text": "trouble on the dashboard"}]
    assert page.json["dedup_key"] == f"crontabber/trouble/failing/{hook.json['subject']}"
    (mail,) = smtp_server.wait(1)
    assert said in mail.message.get_content() and f"  link: {link}" in mail.message.get_content()
    assert said in ok(cli.run("--alerts")).stdout


def test_stored_messages_state_times_and_the_json_times_are_iso(cli, receiver):
    rules = (
        "    alert_after_failures=0\n    alert_silence=0\n    [[class-SadJob]]\n        "
        "deadline=30m\n"
    )
    configure_alerts(cli, receiver, ["TroubleJob|1d", "SadJob|1h"], rules, targets=HOOK)
    # sad's next interval (2 hours ago) is 90 minutes past its 30-minute deadline
    cli.crontab.sql(
        "INSERT INTO crontabber (app_name, next_run, first_run, last_run, last_success, "
        "error_count, depends_on, last_error) VALUES ('sad', now() - interval '2 hours', "
        "now() - interval '3 days', now() - interval '3 hours', now() - interval '3 hours', "
        "0, '{trouble}', '{}')"
    )
    ok(cli.run())
    (late,) = [r.json for r in receiver.at("/hook") if r.json["kind"] == "late"]
    assert "was not done by its deadline, " in late["message"]
    assert " ago" not in late["message"], late["message"]  # it is read later than written
    assert ISO_Z.match(late["opened_at"]), late["opened_at"]
    assert ISO_Z.match(late["detail"]["deadline"]) and ISO_Z.match(late["detail"]["interval"])
    (row,) = [
        a for a in json.loads(ok(cli.run("--alerts", "--json")).stdout) if a["kind"] == "late"
    ]
    assert row["detail"]["deadline"] == late["detail"]["deadline"]


def test_alerts_counts_notices_sent_and_names_a_dead_senders_claim(cli, receiver):
    """A sender killed while it delivers: its claim waits for nobody, and --alerts says so;
    "notified 1x" never stands for a notice that was not sent."""
    hole = socket.socket()  # a target that takes the request and never answers
    hole.bind(("127.0.0.1", 0))
    hole.listen(8)
    try:
        slow = f"        slow webhook http://127.0.0.1:{hole.getsockname()[1]}/slow\n"
        cli.crontab.configure(
            ["TroubleJob|1d"],
            extra=(
                "    alert_after_failures=1\n[alerts]\n    timeout_seconds=600\n    targets='''\n"
                f"{HOOK.format(url=receiver.url)}{slow}    '''\n"
            ),
        )
        tick = cli.spawn()
        # the hook's notice (made first) is sent; the slow one's is claimed and hangs
        wait_for(
            lambda: cli.crontab.sql(
                "SELECT 1 FROM crontabber_notice WHERE target = 'hook' AND sent_at IS NOT NULL"
            )
        )
        assert cli.crontab.sql("SELECT claimed_by FROM crontabber_notice WHERE target = 'slow'")[0][
            "claimed_by"
        ].endswith(f":{tick.pid}")
        tick.send_signal(signal.SIGKILL)
        tick.communicate(timeout=20)
    finally:
        hole.close()
    out = ok(cli.run("--alerts")).stdout
    assert "notices: 1 of 2 sent" in out and "notified" not in out, out
    (line,) = [line for line in out.splitlines() if "slow (notice 1)" in line]
    assert (
        f":{tick.pid} (dead: that process no longer exists); the next tick on this host sends "
        "it again, a tick on another host after " in line
    ), line
    # a tick on this host takes the dead claim over now, not when it expires (60 s)
    (notice,) = cli.crontab.sql(
        "SELECT claim_until > now() + interval '30 seconds' AS held FROM crontabber_notice WHERE "
        "target = 'slow'"
    )
    assert notice["held"]
    cli.crontab.sql("UPDATE crontabber SET next_run = now() + interval '1 day'")  # only the sweep
    ok(cli.run())
    (notice,) = cli.crontab.sql(
        "SELECT claimed_by, attempts, last_error FROM crontabber_notice WHERE target = 'slow'"
    )
    assert notice["attempts"] == 2 and notice["claimed_by"] is None, notice  # tried again: refused
    assert notice["last_error"], notice


def test_a_dead_claim_of_another_host_waits_for_its_end(cli, receiver):
    """Only this host can see that a pid of its own is gone: another host's claim, whatever
    its pid, is waited for; this host's dead claim is taken over at once. Claims written
    through the real tables; the tick is the real entry point."""
    cli.crontab.configure(
        ["TroubleJob|1d"],
        extra=(
            "    alert_after_failures=1\n[alerts]\n    "
            f"targets='''\n{HOOK.format(url=receiver.url)}    '''\n"
        ),
    )
    alert = cli.crontab.sql(
        "INSERT INTO crontabber_alert (app_name, kind, subject, opened_by, "
        "message, detail) VALUES ('trouble', 'takeover', 'x', 'far:1', "
        "'trouble: taken over', '{}') RETURNING id"
    )[0]["id"]
    gone = 2**22 + 1  # above pid_max's default: no process of this host has it
    for number, host in enumerate(("elsewhere.example.net", socket.gethostname()), 1):
        cli.crontab.sql(
            "INSERT INTO crontabber_notice (alert_id, notice, target, claimed_by, "
            "claim_until, attempts) VALUES (%s, %s, 'hook', %s, "
            "now() + interval '1 hour', 1)",
            (alert, number, f"{host}:{gone}"),
        )
    out = ok(cli.run("--alerts")).stdout
    assert f"being sent by elsewhere.example.net:{gone} (its claim lasts until " in out, out
    assert f"{socket.gethostname()}:{gone} (dead: that process no longer exists)" in out, out
    cli.crontab.sql("UPDATE crontabber SET next_run = now() + interval '1 day'")
    ok(cli.run())
    rows = cli.crontab.sql(
        "SELECT notice, sent_at IS NOT NULL AS sent FROM crontabber_notice WHERE alert_id = %s "
        "ORDER BY notice",
        (alert,),
    )
    assert [row["sent"] for row in rows] == [False, True]  # this host's dead claim only
    assert [r.json["notice"] for r in receiver.at("/hook") if r.json["alert"] == alert] == [2]


def test_an_alert_storm_is_one_notice_per_target_and_every_kind_links(cli, receiver):
    """Issue #42 item 10: two jobs failing in one tick (group_over = 2) are one grouped notice
    to the hook and to Slack, one incident per job to PagerDuty, each linking to its job's
    dashboard page."""
    jobs = ["TroubleJob|1d", "ChattyJob|1d", "BasicJob|1d"]
    rules = (
        "    alert_after_failures = 1\n    [[class-ChattyJob]]\n        fail=True\n"
        "[alerts]\n    group_over = 2\n    dashboard_url = http://dash.example:8000\n"
    )
    cli.crontab.configure(
        jobs, extra=rules + "    targets='''\n" + TARGETS.format(url=receiver.url) + "    '''\n"
    )
    cli.env["PD_KEY"] = "pd-routing-key"
    done = cli.run()
    assert done.returncode == 0, done.stderr
    assert len(receiver.at("/hook")) == 1, [r.json["message"] for r in receiver.at("/hook")]
    (hook,) = receiver.at("/hook")
    assert hook.json["detail"]["group"] is True and len(hook.json["detail"]["alerts"]) == 2
    assert hook.json["message"].startswith("2 jobs failing: ")
    for name in ("trouble", "chatty"):
        assert f"{name}: failed 1 time in a row" in hook.json["message"]
        assert f"http://dash.example:8000/jobs/{name}" in hook.json["detail"]["links"]
    (slack,) = receiver.at("/slack")
    assert slack.json["text"].startswith(":red_circle: 2 jobs failing: ")
    assert sorted(r.json["payload"]["component"] for r in receiver.at("/pd")) == [
        "chatty",
        "trouble",
    ]
    sent = cli.crontab.sql("SELECT count(*) AS n FROM crontabber_notice WHERE sent_at IS NOT NULL")
    assert sent[0]["n"] == 6  # every notice recorded as sent
    assert "basic-job" not in hook.json["message"]
