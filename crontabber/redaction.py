"""Secrets out of everything the runner logs, stores or shows: the values of secret settings,
passwords in URLs, signed-URL parameters; and log lines safe for a terminal.

Where secrets come from: the environment and the command line (``--crontabber.password=``,
``CRONTABBER_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``, an ``ES_URL`` with ``user:password@``, a
Sentry DSN). :func:`secret_values` collects them by name (the words of
:data:`SECRET_WORDS`, and the password of any URL-valued setting), and
:class:`RedactingFormatter` replaces them, and anything shaped like a secret, in every
formatted log line, traceback included, whatever library logged it. A value shorter than
four characters, or equal to a setting that is not secret (a password equal to the user name),
is not replaced by value (it would mask ordinary words); its shape still is.

What a run stores goes through :func:`masked` once, where it is made: a job's failure (its
message, traceback and one-line summary: :class:`crontabber.supervisor.Failure`) and the tail
of its output (:class:`crontabber.capture.OutputTail`). Everything that shows them later (the
commands, ``--json``, the dashboard, the alerts and their receivers) reads the masked text.

:class:`RedactingFormatter` also escapes control characters (:func:`crontabber.formats.printable`)
in a log line's message, and in its traceback all but the line breaks: a job's error quoting a
hostile file name cannot retitle or clear the terminal of whoever reads the log.
"""

from __future__ import annotations

import logging
import re
import time

from .formats import printable, printable_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Mapping

MASK = "***"
#: An option or variable whose name holds one of these words is secret (its value masked).
SECRET_WORDS = ("password", "secret", "dsn", "access_key", "token")

# ``scheme://user:password@host``: the password (userinfo without a password is kept)
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'\"]*:)[^@\s/'\"]+@")
_URL_PASSWORD_VALUE = re.compile(r"://[^/\s:@]*:([^@\s/]+)@")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
# ``password=...``, ``X-Amz-Signature=...`` in query strings, DSNs and libpq strings, and
# ``'password': ...`` in a printed dict (not ``password:`` in prose: it would mask a word)
_SECRET_PARAMETER = re.compile(
    r"(?P<head>\b(?:password|passwd|pwd|secret|token|access_token|api_key|apikey|signature|"
    r"sig|x-amz-signature|x-amz-credential|x-amz-security-token|sentry_key)"
    r"(?:\s*=\s*|['\"]\s*:\s*))"
    r"(?P<value>'[^']*'|\"[^\"]*\"|[^&\s,'\"}]+)",
    re.IGNORECASE,
)
# names of environment variables / options that hold a secret
_SECRET_NAME = re.compile("|".join(SECRET_WORDS) + r"|secret_key|_key$|^key$", re.IGNORECASE)
_SHORTEST = 4


def is_secret_name(name: str) -> bool:
    """Whether a setting or environment variable called ``name`` holds a secret (an
    ``..._ID`` does not: ``AWS_ACCESS_KEY_ID`` names the key, it is no secret)."""
    return bool(_SECRET_NAME.search(name)) and not name.lower().endswith("_id")


def secret_values(*sources: Mapping[str, str]) -> set[str]:
    """The secrets in ``sources`` (the environment, the command line's overrides): values
    of secret-named settings, and the password of every URL among the values."""
    found: set[str] = set()
    public: set[str] = set()
    for source in sources:
        for name, value in source.items():
            if not isinstance(value, str) or not value:
                continue
            (found if is_secret_name(name) else public).add(value)
            for password in _URL_PASSWORD_VALUE.findall(value):
                found.update((password, _percent_decoded(password)))

    # A password equal to a public value (the local services' user, database and password
    # are all "crontabber") is printed under that name anyway; masking it by value would mask
    # every logger name. Its shapes (``password=...``, ``user:...@``) are still masked.
    return {value for value in found - public if len(value) >= _SHORTEST}


def _percent_decoded(text: str) -> str:
    # not urllib.parse.unquote: an idle tick does not import urllib.parse (its own test)
    return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), text)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` and anything shaped like a secret masked."""
    for value in sorted(secrets, key=len, reverse=True):  # a longer one may contain another
        if value in text:
            text = text.replace(value, MASK)
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK + "@", text)
    return _SECRET_PARAMETER.sub(lambda m: m.group("head") + MASK, text)


class RedactingFormatter(logging.Formatter):
    """A formatter whose every line (message, arguments, traceback) goes through
    :func:`redact`, with the message's control characters escaped (one record, one line) and
    the traceback's, line breaks excepted. Its times (``%(asctime)s``) are UTC, as every time
    the commands print, whatever the host's zone (``TZ``, ``/etc/localtime``)."""

    @staticmethod
    def converter(seconds: float | None = None) -> time.struct_time:
        """``%(asctime)s``'s clock: UTC (logging's default is the host's local time)."""
        return time.gmtime(seconds)

    def __init__(self, fmt: str | None = None, secrets: Iterable[str] = ()) -> None:
        super().__init__(fmt)
        self.secrets = frozenset(secrets)

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record), self.secrets)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return printable(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's name
        return printable_lines(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802 - logging's name
        return printable_lines(super().formatStack(stack_info))


def redact_handlers(secrets: Iterable[str], fmt: str) -> None:
    """Make every handler of the root logger format through :class:`RedactingFormatter`."""
    formatter = RedactingFormatter(fmt, secrets)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)


def installed_secrets() -> frozenset[str]:
    """The secrets :func:`redact_handlers` gave the root logger's handlers (empty when
    logging was not set up through it): what a runner masks in what it stores."""
    found: set[str] = set()
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, RedactingFormatter):
            found |= handler.formatter.secrets
    return frozenset(found)


def masked(text: str) -> str:
    """``text`` with the secrets this process's logging masks (:func:`installed_secrets`) and
    anything shaped like a secret masked: what a runner stores of a run (its error, its output)
    goes through this once, before it is stored, printed, logged or alerted."""
    return redact(text, installed_secrets())


_URL_PATH = re.compile(
    r"(?P<origin>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s'\"?#]+)(?P<rest>[/?#][^\s'\"\\]*)"
)


def redact_url_paths(text: str) -> str:
    """``text`` with each URL's path, query and fragment shown as ``/***`` (an inline webhook
    address whose path is its token: ``https://hooks.slack.com/services/T0/B0/XYZ`` ->
    ``https://hooks.slack.com/***``); a URL without any stays as it is. A URL ends at a
    space, a quote or a backslash (in a ``repr``, the ``\\n`` between two lines)."""
    return _URL_PATH.sub(
        lambda m: m["origin"] + ("/" + MASK if m["rest"] not in ("/", "") else m["rest"]), text
    )
