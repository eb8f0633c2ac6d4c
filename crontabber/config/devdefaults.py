"""What a production host must not point at: the development services that
``scripts/services.sh`` starts (Elasticsearch on port 9201, s3proxy on 9444, PostgreSQL on
54329 and PgBouncer on 54339 of the loopback address; the S3 keys ``symbols`` and
``symbols-secret``). A configuration copied from a development machine, or a job falling back
on what development exports, would reach them (or nothing) in production; ``--configtest`` of
a host with ``[crontabber] production = true`` refuses each such value in one line
(:func:`development_values`).

``tests/unit/test_devdefaults.py`` checks that these are ``devservices``' defaults (the
development services' layout, not shipped with the package).
"""

from __future__ import annotations

from typing import Iterable, Mapping
from urllib.parse import urlsplit

#: The development services' ports (``devservices.DEFAULT_PORTS``).
DEVELOPMENT_PORTS = {
    "Elasticsearch": 9201,
    "S3 (s3proxy)": 9444,
    "PostgreSQL": 54329,
    "PgBouncer": 54339,
}
#: The development S3 keys (``devservices.DEFAULT_S3_KEYS``).
DEVELOPMENT_S3_KEYS = ("symbols", "symbols-secret")
LOOPBACK = ("localhost", "::1")


def _development_service(url: str) -> str | None:
    """The development service one of ``url``'s nodes (comma-separated) is, or None."""
    for part in url.split(","):
        try:
            parts = urlsplit(part.strip())
            host, port = parts.hostname or "", parts.port
        except ValueError:
            continue
        loopback = host in LOOPBACK or host.startswith("127.")
        for service, development_port in DEVELOPMENT_PORTS.items():
            if loopback and port == development_port:
                return service
    return None


def development_values(
    environ: Mapping[str, str], options: Iterable[tuple[str, object]]
) -> list[str]:
    """One line for each value that points at a development service: the environment's
    ``ES_URL`` and ``AWS_ENDPOINT_URL_S3``, the S3 keys, and each of ``options`` (``(where it
    is set, its effective value)``: the jobs' addresses, such as the search jobs' ``es_url``)."""
    named = [(f"environment {name}", environ.get(name, "")) for name in ("ES_URL",)]
    named.append(("environment AWS_ENDPOINT_URL_S3", environ.get("AWS_ENDPOINT_URL_S3", "")))
    named += [(name, str(value or "")) for name, value in options]
    lines: list[str] = []
    for name, value in named:
        service = _development_service(value) if value else None
        if service is not None:
            line = f"{name} is the development {service} ({value.strip()}): name the production one"
            lines += [line] if line not in lines else []
    keys = (environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY"))
    if keys[0] == DEVELOPMENT_S3_KEYS[0] or keys[1] == DEVELOPMENT_S3_KEYS[1]:
        lines.append(
            "environment AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY hold the development S3 keys:"
            " set the production ones"
        )
    return lines


def database_urls(host: str, port: object) -> str:
    """libpq's multi-host ``host`` and ``port`` (one port, or one per host) as URLs,
    comma-separated, for :func:`development_values`."""
    hosts = [part.strip() for part in host.split(",")]
    ports = [part.strip() for part in str(port).split(",")]
    ports = ports * len(hosts) if len(ports) == 1 else ports
    return ",".join(f"postgresql://{h}:{p}" for h, p in zip(hosts, ports))
