"""Delivering a notice to real receivers on loopback, for what a receiver (or whoever answers
for its address) can do to the sender (security review 2026-11-28): one deadline for the whole
delivery (N-4)."""

from __future__ import annotations

import time

import pytest

from crontabber.alerts.notify import Notice, send
from crontabber.config.targets import DeliveryError, SmtpSettings, Target
from tests.fixtures.receiver import Receiver, receiver  # noqa: F401 - the fixture
from tests.fixtures.smtp import TricklingSmtp

NOTICE = Notice(
    7,
    1,
    "job",
    "failing",
    "after never",
    "job: failing",
    "2026-11-28T08:00:00+00:00",
    "h:1",
    {},
    "h:1",
)

#: A trickle of this many bytes, one each EVERY seconds, outlasts TIMEOUT many times over,
#: while each byte comes well within it (a per-read timeout never fires).
BYTES, EVERY, TIMEOUT = 40, 0.25, 1.0


def _wait_for(check, within: float = 30.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and check() is None:
        time.sleep(0.05)
    return check()


def test_a_webhook_trickling_its_headers_is_cut_at_the_delivery_deadline(receiver: Receiver):  # noqa: F811
    receiver.trickles["/slow-head"] = ("header", BYTES, EVERY)
    target = Target("slow", "webhook", f"{receiver.url}/slow-head")
    with pytest.raises(DeliveryError) as caught:
        send(target, NOTICE, TIMEOUT, "crontabber/test", {})
    assert str(caught.value) == "no answer within 1 s (alerts.timeout_seconds, the whole delivery)"
    sent = _wait_for(lambda: receiver.trickled.get("/slow-head"))
    assert sent is not None and sent < BYTES  # the sender hung up before the answer's end


def test_a_webhook_trickling_its_body_is_delivered_without_reading_it(receiver: Receiver):  # noqa: F811
    receiver.trickles["/slow-body"] = ("body", BYTES, EVERY)
    send(
        Target("slow", "webhook", f"{receiver.url}/slow-body"),
        NOTICE,
        TIMEOUT,
        "crontabber/test",
        {},
    )
    assert len(receiver.at("/slow-body")) == 1
    sent = _wait_for(lambda: receiver.trickled.get("/slow-body"))
    assert sent is not None and sent < BYTES  # the 2xx status line is the delivery


def test_an_smtp_server_trickling_its_greeting_is_cut_at_the_delivery_deadline():
    server = TricklingSmtp(BYTES, EVERY)
    try:
        smtp = SmtpSettings("127.0.0.1", server.port, "cron@example.net")
        with pytest.raises(DeliveryError) as caught:
            send(
                Target("mail", "email", "ops@example.net"),
                NOTICE,
                TIMEOUT,
                "crontabber/test",
                {},
                smtp,
            )
        assert str(caught.value) == (
            f"SMTP server 127.0.0.1:{server.port}: no answer within 1 s (alerts.timeout_seconds, "
            "the whole delivery)"
        )
        sent = _wait_for(lambda: server.sent)
        assert sent is not None and sent < BYTES
    finally:
        server.close()
