"""What names this host in the fleet: the one place the host name is taken.

The name is written into ``crontabber_host`` (the fleet: ``--list-jobs``, ``--nagios``, the
dashboard, ``--drain HOST``), into every marker and claim (``ongoing_by``, ``host:pid``, so a
dead run of this very host is taken over at once) and into the audit trail's actor
(``user@host``). It is ``CRONTABBER_HOST_NAME`` when that variable is set and not blank (a
container, whose OS host name is a random id or shared by replicas), else the OS host name
(``socket.gethostname()``). Two hosts of one fleet must not share a name: each would judge
the other's runs as its own. (Not ``CRONTABBER_HOST``: that is the database option
``crontabber.host``, crontabber 0.18's.)
"""

from __future__ import annotations

import os
import socket

from .errors import ConfigurationError
from .leases import holder_name

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported by a tick
    from typing import Mapping

#: The environment variable that names this host (docs/deploy.md, "What names a host").
HOST_VARIABLE = "CRONTABBER_HOST_NAME"

#: The longest name accepted (a DNS name's limit).
MAX_LENGTH = 253


def this_host(environ: Mapping[str, str] | None = None) -> str:
    """This host's name in the fleet: ``CRONTABBER_HOST_NAME`` (surrounding blanks dropped) when
    set and not blank, else the OS host name. ``environ``: the environment (the process's by
    default).

    Raises:
        ConfigurationError: ``CRONTABBER_HOST_NAME`` holds a blank, a control character or more
            than 253 characters (it is written into rows and printed on one line).
    """
    env = os.environ if environ is None else environ
    name = env.get(HOST_VARIABLE, "").strip()
    if not name:
        return socket.gethostname()
    if len(name) > MAX_LENGTH or any(char.isspace() or not char.isprintable() for char in name):
        raise ConfigurationError(
            HOST_VARIABLE,
            f"{name[:40]!r} is no host name (no blanks or control characters,"
            f" at most {MAX_LENGTH} characters)",
        )
    return name


def default_holder() -> str:
    """Who holds an ongoing marker or a claim made by this process: ``host:pid``."""
    return holder_name(this_host(), os.getpid())


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists and is not a zombie (a
    runner killed but not yet reaped by its parent is as dead as one reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
