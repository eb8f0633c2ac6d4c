"""Where alerts go: the targets declared in ``[alerts] targets`` (one per line, ``NAME KIND
ADDRESS [OPTION=VALUE ...]``, see :mod:`crontabber.alerts.notify` and docs/alerts.md), the SMTP
server of e-mail targets, and what a target reads from the environment.

Settings, read at every tick of a site with alerts (:mod:`crontabber.config.settings` imports
this module only when targets are set): :mod:`crontabber.alerts.notify` sends to them. The
records are :class:`~crontabber.frozen.Frozen` (a frozen dataclass costs a tick about 1 ms to
define, and a NamedTuple the import of :mod:`typing`).
"""

from __future__ import annotations

from ..frozen import Frozen, setfield

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Mapping

KINDS = ("webhook", "email")
FORMATS = ("json", "slack", "pagerduty")
_OPTIONS: dict[str, tuple[str, ...]] = {
    "webhook": ("format", "secret_env", "routing_key_env"),
    "email": (),
}


class DeliveryError(Exception):
    """A notice could not be delivered; the message says why in one line."""


class Target(Frozen):
    """One place alerts go (see the module docstring)."""

    name: str
    kind: str
    address: str
    options: Mapping[str, str]

    def __init__(
        self, name: str, kind: str, address: str, options: Mapping[str, str] | None = None
    ) -> None:
        setfield(self, "name", name)
        setfield(self, "kind", kind)
        setfield(self, "address", address)
        setfield(self, "options", options if options is not None else {})

    def url(self, environ: Mapping[str, str]) -> str:
        """The address, read from the environment for ``env:NAME``, checked
        (:func:`url_problem`).

        Raises:
            DeliveryError: the variable is not set, or the address is no usable http(s) URL
                (said without the address: it may hold a secret).
        """
        if not self.address.startswith("env:"):
            problem = url_problem(self.address)
            if problem:
                raise DeliveryError(f"the address of {self.name} {problem}")
            return self.address
        variable = self.address[4:]
        value = environ.get(variable, "")
        problem = url_problem(value) if value else "is not set"
        if problem:
            raise DeliveryError(
                f"environment variable {variable} (the address of {self.name}) {problem}"
            )
        return value

    def variables(self) -> tuple[str, ...]:
        """The environment variables this target reads (its ``env:`` address, its ``*_env``
        options): each holds a secret, masked wherever the runner logs or stores text."""
        named = [self.address[4:]] if self.address.startswith("env:") else []
        return tuple(
            named + [value for key, value in self.options.items() if key.endswith("_env") and value]
        )

    def secret(self, option: str, environ: Mapping[str, str]) -> str:
        """The value of the environment variable an ``*_env`` option names ('' when none).

        Raises:
            DeliveryError: the option names a variable that is not set.
        """
        variable = self.options.get(option, "")
        if not variable:
            return ""
        value = environ.get(variable, "")
        if not value:
            raise DeliveryError(
                f"environment variable {variable} ({option} of {self.name}) is not set"
            )
        return value

    def missing(self, environ: Mapping[str, str]) -> list[str]:
        """What the environment lacks for this target: one line per variable it names
        (``env:`` address, ``secret_env``, ``routing_key_env``) that is not set (or, for the
        address, not an http(s) URL); empty when it has them all."""
        problems = []
        checks: tuple[Callable[[], str], ...] = (
            lambda: self.url(environ),
            lambda: self.secret("secret_env", environ),
            lambda: self.secret("routing_key_env", environ),
        )
        for check in checks:
            try:
                check()
            except DeliveryError as exc:
                problems.append(str(exc))
        return problems


def url_problem(url: str) -> str:
    """What makes ``url`` unusable as a webhook address ('' when nothing): not http(s), no
    host, a port that is no number or out of range, a control character or a space (which
    ``http.client`` refuses when sending), user info (``user:password@``: a password there
    would be sent in clear, to the DNS resolver as well, and kept in delivery errors). Never
    quotes the address: it may hold a secret."""
    from urllib.parse import urlsplit

    if not url.startswith(("http://", "https://")):
        return "is not an http(s) URL"
    if any(ord(c) <= 0x20 or 0x7F <= ord(c) <= 0x9F for c in url):
        return "holds a space or a control character"
    if has_user_info(url):
        return USER_INFO
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is no number or too big
    except ValueError as exc:
        return f"is not a valid URL ({'bad port' if 'port' in str(exc).lower() else 'malformed'})"
    return "" if parts.hostname else "has no host"


def has_user_info(url: str) -> bool:
    """Pure: whether ``url`` (``scheme://...``) has ``user[:password]@`` before its host (text
    only: every tick reads the targets, urllib is imported when one is sent)."""
    authority = url.split("://", 1)[-1]
    for end in "/?#":
        authority = authority.split(end, 1)[0]
    return "@" in authority


#: Why an address with ``user:password@`` is refused (said without the address).
USER_INFO = (
    "holds user info (user:password@ before the host), which would be sent and shown in clear: "
    "authenticate the requests with secret_env (signed) instead"
)


def parse_targets(text: str) -> tuple[Target, ...]:
    """The targets declared in ``text`` (blank lines and ``#`` comments skipped).

    Raises:
        ValueError: naming the line and what is wrong with it.
    """
    targets: list[Target] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) < 3:
            raise ValueError(f"{line.strip()!r}: expected NAME KIND ADDRESS [OPTION=VALUE ...]")
        name, kind, address, *rest = words
        if kind not in KINDS:
            raise ValueError(f"{line.strip()!r}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
        if any(t.name == name for t in targets):
            raise ValueError(f"{line.strip()!r}: the name {name!r} is used twice")
        options = {}
        for word in rest:
            key, sep, value = word.partition("=")
            if not sep or key not in _OPTIONS[kind]:
                raise ValueError(
                    f"{line.strip()!r}: unknown option {word!r} (known: "
                    f"{', '.join(_OPTIONS[kind])})"
                )
            options[key] = value
        if options.get("format", "json") not in FORMATS:
            raise ValueError(f"{line.strip()!r}: format must be one of {', '.join(FORMATS)}")
        if options.get("format") == "pagerduty" and not options.get("routing_key_env"):
            raise ValueError(f"{line.strip()!r}: format=pagerduty needs routing_key_env=VARIABLE")
        if kind == "email":
            if not all(
                "@" in part and len(part.split("@")) == 2 and all(part.split("@"))
                for part in address.split(",")
            ):
                raise ValueError(
                    f"{line.strip()!r}: the address must be e-mail addresses, comma-separated"
                )
        elif not (address.startswith(("http://", "https://")) or address.startswith("env:")):
            raise ValueError(
                f"{line.strip()!r}: the address must be an http(s) URL or env:VARIABLE"
            )
        elif not address.startswith("env:") and has_user_info(address):
            raise ValueError(
                f"target {name}: the address {USER_INFO}"
            )  # (not the line: the password)
        targets.append(Target(name, kind, address, options))
    return tuple(targets)


class SmtpSettings(Frozen):
    """The SMTP server e-mail targets go through (``[alerts] smtp_*``)."""

    host: str = ""
    port: int = 25
    sender: str = ""
    user: str = ""
    password: str = ""
    starttls: bool = False
    tls: bool = False

    def __repr__(self) -> str:  # never the password
        return f"SmtpSettings({self.host}:{self.port}, from {self.sender}, user {self.user or '-'})"
