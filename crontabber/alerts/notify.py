"""Sending one notice to an alert target (the targets themselves, declared in ``[alerts]
targets``, are :mod:`crontabber.config.targets`'s).

One target per line, ``NAME KIND ADDRESS [OPTION=VALUE ...]``::

    [alerts]
        targets = '''
            ops-slack  webhook  env:OPS_SLACK_URL        format=slack
            pagerduty  webhook  https://events.pagerduty.com/v2/enqueue  format=pagerduty
            routing_key_env=PD_KEY
            ops-hook   webhook  https://ops.example.net/crontabber  secret_env=OPS_HOOK_SECRET
            oncall     email    oncall@example.net,symbols-dev@example.net
        '''
        smtp_host = mail.example.net

An e-mail goes through the SMTP server of ``[alerts] smtp_*`` (STARTTLS or TLS, a login when
a user is set), one message per notice: ``Message-ID`` made from the notice (a retry is the same
message), a recovery ``In-Reply-To`` its failure's first message (mail clients thread them).

A webhook POSTs JSON (``format=json``: the alert as data; ``slack``: Slack's incoming-webhook
``{"text": ...}``; ``pagerduty``: an Events API v2 event, ``trigger`` or ``resolve`` by the same
``dedup_key``: a ``recovered`` or ``superseded`` notice resolves its alert's incident, and a
``test`` is a ``trigger`` followed at once by its ``resolve``, so it leaves no incident open).
Secrets never sit in the INI file: ``env:NAME`` as the address, ``secret_env`` and
``routing_key_env`` name environment variables. With a secret, each request carries
``X-Crontabber-Signature: sha256=HEX``, the HMAC-SHA256 of ``TIMESTAMP.BODY`` with the secret,
and ``X-Crontabber-Timestamp`` (a receiver refuses old timestamps: no replay).
``X-Crontabber-Notice`` (``ALERT.NOTICE``) is the same on every retry of one notice; the signature
does not cover it, so a receiver that drops repeats (a host killed after sending, before recording
it) dedupes on the body's ``alert`` and ``notice``, which it does cover. A webhook follows no
redirect, and a failure keeps the answer's status line only (:func:`status_line`). A whole
delivery, webhook or e-mail, has one deadline (``alerts.timeout_seconds``,
:mod:`.deadline`), not a timeout per read.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple

from ..config.targets import DeliveryError, SmtpSettings, Target

if TYPE_CHECKING:
    from .deadline import Deadline

# What sending needs (json, hmac, urllib, smtplib) is imported by the functions that send, and
# the records are NamedTuples (a frozen dataclass costs a tick about 1 ms to define).

#: The kinds of notice that end an earlier alert's incident (``detail.resolves`` names it).
RESOLVING = ("recovered", "superseded")


class Notice(NamedTuple):
    """One notification of one alert, as a target receives it."""

    alert_id: int
    notice: int
    app_name: str
    kind: str
    subject: str
    message: str
    opened_at: str
    opened_by: str
    detail: Mapping[str, Any]
    sent_by: str

    @property
    def key(self) -> str:
        """``ALERT.NOTICE``: the same on every retry of this notice (idempotency)."""
        return f"{self.alert_id}.{self.notice}"

    @property
    def dedup_key(self) -> str:
        """The incident an alert is about: a recovery resolves its failure's."""
        resolves = self.detail.get("resolves") if isinstance(self.detail, Mapping) else None
        if self.kind in RESOLVING and isinstance(resolves, Mapping):
            return f"crontabber/{self.app_name}/{resolves.get('kind')}/{resolves.get('subject')}"
        return f"crontabber/{self.app_name}/{self.kind}/{self.subject}"

    def document(self) -> dict[str, Any]:
        return {
            "alert": self.alert_id,
            "notice": self.notice,
            "job": self.app_name,
            "kind": self.kind,
            "subject": self.subject,
            "message": self.message,
            "opened_at": self.opened_at,
            "opened_by": self.opened_by,
            "detail": dict(self.detail),
            "sent_by": self.sent_by,
        }


_SLACK_ICONS = {
    "failing": ":red_circle:",
    "silent": ":hourglass:",
    "takeover": ":warning:",
    "recovered": ":large_green_circle:",
    "superseded": ":repeat:",
    "test": ":information_source:",
    "old-code": ":construction:",
    "late": ":alarm_clock:",
    "no-host": ":no_entry:",
    "breach": ":chart_with_upwards_trend:",
    "broken-entry": ":x:",
}


def payloads(target: Target, notice: Notice, environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """The JSON documents a webhook target receives for one notice, in order: one, or for a
    ``test`` to PagerDuty its ``trigger`` then its ``resolve`` (no incident stays open)."""
    first = payload(target, notice, environ)
    if notice.kind == "test" and target.options.get("format") == "pagerduty":
        return [first, {**first, "event_action": "resolve"}]
    return [first]


def payload(target: Target, notice: Notice, environ: Mapping[str, str]) -> dict[str, Any]:
    """The JSON a webhook target receives."""
    form = target.options.get("format", "json")
    if form == "slack":
        return {"text": f"{_SLACK_ICONS.get(notice.kind, '')} {slack_text(notice.message)}".strip()}
    if form == "pagerduty":
        resolve = notice.kind in RESOLVING
        link = notice.detail.get("link") if isinstance(notice.detail, Mapping) else None
        links = [{"href": link, "text": f"{notice.app_name} on the dashboard"}] if link else []
        return {
            "routing_key": target.secret("routing_key_env", environ),
            **({"links": links} if links else {}),
            "event_action": "resolve" if resolve else "trigger",
            "dedup_key": notice.dedup_key,
            "payload": {
                "summary": notice.message[:1024],
                "source": notice.sent_by,
                "severity": "info" if notice.kind in ("test", *RESOLVING) else "error",
                "component": notice.app_name,
                "group": "crontabber",
                "class": notice.kind,
                "custom_details": notice.document(),
            },
        }
    return notice.document()


def slack_text(text: str) -> str:
    """``text`` as Slack shows it literally: ``&``, ``<`` and ``>`` escaped as Slack's
    message formatting asks, so an error quoting ``<!channel>`` or ``<https://x|see runbook>``
    pings nobody and links nowhere."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=HEX``: HMAC-SHA256 of ``TIMESTAMP.BODY`` (how a receiver checks a request)."""
    import hashlib
    import hmac

    mac = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def send(
    target: Target,
    notice: Notice,
    timeout: float,
    user_agent: str,
    environ: Mapping[str, str] = os.environ,
    smtp: SmtpSettings | None = None,
) -> None:
    """Deliver ``notice`` to ``target``, within ``timeout`` seconds in all (a
    :class:`~.deadline.Deadline`: a receiver trickling its answer cannot hold the tick).

    Raises:
        DeliveryError: why not, in one line.
    """
    if target.kind == "email":
        send_email(target, notice, smtp or SmtpSettings(), timeout)
    else:
        send_webhook(target, notice, timeout, user_agent, environ)


def message_id(alert_id: int, notice: int, sender: str) -> str:
    """The ``Message-ID`` of a notice's e-mail (the same on every retry)."""
    return f"<crontabber.{alert_id}.{notice}@{sender.rpartition('@')[2] or 'localhost'}>"


def email_message(target: Target, notice: Notice, sender: str) -> Any:
    """The e-mail of a notice: the alert's message as subject line and first paragraph, its
    facts below."""
    from email.message import EmailMessage
    from email.utils import formatdate

    message = EmailMessage()
    message["Subject"] = f"[crontabber] {notice.kind}: {notice.app_name}: {notice.message}"[:200]
    message["From"] = sender
    message["To"] = ", ".join(part.strip() for part in target.address.split(","))
    message["Date"] = formatdate(usegmt=True)
    message["Message-ID"] = message_id(notice.alert_id, notice.notice, sender)
    message["X-Crontabber-Notice"] = notice.key
    resolves = notice.detail.get("resolves") if isinstance(notice.detail, Mapping) else None
    if notice.kind in RESOLVING and isinstance(resolves, Mapping) and resolves.get("id"):
        first = message_id(int(resolves["id"]), 1, sender)
        message["In-Reply-To"] = first
        message["References"] = first
    facts = "\n".join(
        f"{key}: {value}"
        for key, value in notice.document().items()
        if key not in ("message", "detail")
    )
    details = "\n".join(f"  {key}: {value}" for key, value in dict(notice.detail).items())
    message.set_content(
        f"{notice.message}\n\n{facts}\n" + (f"detail:\n{details}\n" if details else "")
    )
    return message


def send_email(target: Target, notice: Notice, smtp: SmtpSettings, timeout: float) -> None:
    """Send a notice's e-mail through ``smtp``: accepted by the server is delivered.

    Raises:
        DeliveryError: the server refused it or could not be reached (one line).
    """
    from .deadline import Deadline

    if not smtp.host:
        raise DeliveryError("no SMTP server: set smtp_host in [alerts]")
    message = email_message(target, notice, smtp.sender)
    deadline = Deadline(timeout)
    try:
        with (
            deadline,
            _smtp_class(smtp.tls, deadline)(smtp.host, smtp.port, timeout=timeout) as client,
        ):
            if smtp.starttls and not smtp.tls:
                client.starttls()
            if smtp.user:
                client.login(smtp.user, smtp.password)
            refused = client.send_message(message)
    except Exception as exc:
        if deadline.expired:
            raise DeliveryError(
                f"SMTP server {smtp.host}:{smtp.port}: {deadline.message}"
            ) from None
        raise _smtp_error(exc, smtp) from None
    if refused:  # the others have it: a retry would send it to them again
        import logging

        logging.getLogger("crontabber.alerts").warning(
            "alert %s to %s: the SMTP server refused %s",
            notice.key,
            target.name,
            ", ".join(refused),
        )


def _smtp_class(tls: bool, deadline: Deadline) -> Any:
    """smtplib's client (``SMTP_SSL`` when ``tls``) whose connection ``deadline`` watches."""
    import smtplib

    class Watched(smtplib.SMTP):
        def _get_socket(self, host: str, port: int, timeout: float) -> Any:
            return deadline.watch(super()._get_socket(host, port, timeout))  # type: ignore[misc]

    class WatchedSSL(smtplib.SMTP_SSL, Watched):  # (SMTP_SSL wraps what Watched gives it)
        pass

    return WatchedSSL if tls else Watched


def _smtp_error(exc: Exception, smtp: SmtpSettings) -> Exception:
    """The :class:`DeliveryError` of smtplib's error ``exc`` (anything else: itself)."""
    import smtplib

    if isinstance(exc, smtplib.SMTPResponseException):
        text = (
            exc.smtp_error.decode("utf-8", "replace")
            if isinstance(exc.smtp_error, bytes)
            else str(exc.smtp_error)
        )
        return DeliveryError(f"SMTP {exc.smtp_code}: {' '.join(text.split())[:200]}")
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return DeliveryError(f"SMTP refused every recipient: {', '.join(exc.recipients)}")
    if isinstance(exc, (smtplib.SMTPException, OSError)):
        return DeliveryError(f"SMTP server {smtp.host}:{smtp.port}: {exc or type(exc).__name__}")
    return exc


def send_webhook(
    target: Target,
    notice: Notice,
    timeout: float,
    user_agent: str,
    environ: Mapping[str, str] = os.environ,
) -> None:
    """POST ``notice`` to a webhook ``target`` (each of its :func:`payloads`, in order): a
    2xx answer to each is delivered.

    Raises:
        DeliveryError: anything else, in one line (see :func:`post`).
    """
    from .deadline import Deadline

    with Deadline(timeout) as deadline:
        for document in payloads(target, notice, environ):
            post(target, notice, document, deadline, user_agent, environ)


def post(
    target: Target,
    notice: Notice,
    document: Mapping[str, Any],
    deadline: Deadline,
    user_agent: str,
    environ: Mapping[str, str] = os.environ,
) -> None:
    """POST one JSON ``document`` of ``notice`` to a webhook ``target``: a 2xx status line is
    delivered (the answer's headers are read, its body never: nothing of it is kept). A
    redirect is not followed (it could send the fleet's requests to any address, an internal
    one included): it fails like an error status. The connection is cut when ``deadline``
    passes.

    Raises:
        DeliveryError: anything else, in one line: the status code and its reason phrase
            (:func:`status_line`: short, escaped; never the answer's body, which whoever
            answers chooses), or the connection's error; never the address (it may hold a
            secret). Whatever the address or the answer, nothing else is raised.
    """
    import json
    import urllib.error

    body = json.dumps(document, default=str).encode("utf-8")
    headers = _webhook_headers(target, notice, body, user_agent, environ)
    url = target.url(environ)
    try:
        with _opener(deadline).open(
            _request(url, body, headers), timeout=deadline.seconds
        ) as answer:
            if deadline.expired:  # (cut in the headers: http.client takes the end for theirs)
                raise DeliveryError(deadline.message)
            if not 200 <= answer.status < 300:
                raise DeliveryError(status_line(answer.status, answer.reason))
    except urllib.error.HTTPError as exc:
        raise DeliveryError(status_line(exc.code, exc.reason)) from None
    except urllib.error.URLError as exc:
        if deadline.expired:
            raise DeliveryError(deadline.message) from None
        raise DeliveryError(f"no answer: {_one_line(str(exc.reason), url)}") from None
    except DeliveryError:
        raise
    # http.client's InvalidURL, a bad answer...: this target's error, never the tick's
    except Exception as exc:  # noqa: BLE001
        if deadline.expired:
            raise DeliveryError(deadline.message) from None
        raise DeliveryError(
            f"no answer: {type(exc).__name__}: {_one_line(str(exc), url)}"
        ) from None


def _webhook_headers(
    target: Target, notice: Notice, body: bytes, user_agent: str, environ: Mapping[str, str]
) -> dict[str, str]:
    """The headers of a webhook POST of ``body``: JSON, ``user_agent``, the notice's key and
    the time (seconds since the epoch); signed (:func:`signature` of the time and ``body``)
    when the target's ``secret_env`` names a secret set in ``environ``."""
    import time

    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": user_agent,
        "X-Crontabber-Notice": notice.key,
        "X-Crontabber-Timestamp": timestamp,
    }
    secret = target.secret("secret_env", environ)
    if secret:
        headers["X-Crontabber-Signature"] = signature(secret, timestamp, body)
    return headers


#: The longest reason phrase kept of an answer's status line.
REASON_CHARACTERS = 60


def status_line(code: int, reason: Any) -> str:
    """``HTTP 500: Internal Server Error``: the status and its reason phrase, on one line,
    control characters escaped, at most :data:`REASON_CHARACTERS` of it (the reason is the
    answerer's text); a redirect says it was not followed."""
    from ..formats import one_line

    text = one_line(str(reason or ""))
    if len(text) > REASON_CHARACTERS:
        text = text[: REASON_CHARACTERS - 3] + "..."
    redirect = " (a redirect: not followed)" if 300 <= code < 400 else ""
    return f"HTTP {code}{': ' + text if text else ''}{redirect}"


def _one_line(text: str, url: str) -> str:
    """An error's text on one line, escaped, without the address (or its path and query)."""
    from urllib.parse import urlsplit

    from ..formats import one_line

    for part in {url, urlsplit(url).path, urlsplit(url).query} - {"", "/"}:
        text = text.replace(part, "(the address)")
    return one_line(text)[:200]


def _request(url: str, body: bytes, headers: Mapping[str, str]) -> Any:
    import urllib.request

    return urllib.request.Request(url, data=body, headers=dict(headers), method="POST")


def _opener(deadline: Deadline) -> Any:
    """urllib's usual opener (proxies from the environment included) with a redirect handler
    that follows nothing (a 3xx answer becomes the ``HTTPError`` it is), whose connections
    ``deadline`` watches from the moment they are made (a TLS handshake included)."""
    import http.client
    import socket
    import urllib.request

    def connect(*args: Any, **kwargs: Any) -> socket.socket:
        return deadline.watch(socket.create_connection(*args, **kwargs))

    class Http(http.client.HTTPConnection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._create_connection = connect

    class Https(http.client.HTTPSConnection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._create_connection = connect

    class HttpHandler(urllib.request.HTTPHandler):
        def http_open(self, req: Any) -> Any:
            return self.do_open(Http, req)

    class HttpsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: Any) -> Any:
            return self.do_open(Https, req, context=self._context)  # type: ignore[attr-defined]

    class NoRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return urllib.request.build_opener(HttpHandler(), HttpsHandler(), NoRedirects())
