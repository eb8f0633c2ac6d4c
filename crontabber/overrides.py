"""The rules of overriding: who may go past an operator's pause and with what, for every
command that changes data (the runner's ``--job``/``--rerun`` and the jobs' own commands),
and how a command line's ``--namespace.option=value`` overrides are recorded.

Pure: the state and the database's ``now`` come in, a refusal or a record goes out.
"""

from __future__ import annotations

import datetime as dt

from .errors import JobPaused, PauseOverrideNeedsReason
from .scheduling import pause_active
from .state import JobState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping


def check_pause(
    app_name: str,
    state: JobState | None,
    now: dt.datetime,
    action: str,
    *,
    force: bool,
    reason: str | None,
    override: str,
) -> bool:
    """The one rule of a paused job, for every command that would change its data: refused
    without ``force``; with ``force``, only with a ``reason`` (it goes to the audit trail
    beside the pause it overrides, for whoever paused the job). Returns whether the command
    overrides a pause now in force.

    ``action`` completes "refusing to ..."; ``override`` is the hint of the refusal (how to
    go past it: ``--force`` and its reason).

    Raises:
        JobPaused: the job is paused and ``force`` is not given (exit 6).
        PauseOverrideNeedsReason: it is paused, ``force`` is given, ``reason`` is empty (exit 1).
    """
    if not pause_active(state, now):
        return False
    assert state is not None
    if not force:
        raise JobPaused(
            app_name, action, state.paused_until, state.paused_by, state.paused_reason, override
        )
    if not (reason or "").strip():
        raise PauseOverrideNeedsReason(
            app_name, state.paused_until, state.paused_by, state.paused_reason
        )
    return True


def given_options(overrides: Mapping[str, str]) -> list[str]:
    """The command line's overrides as recorded with a run and in the audit trail:
    ``--name=value`` each, in the order given, a secret's value (a secret-named option, a
    password in a URL) masked: :mod:`crontabber.redaction`."""
    from .redaction import MASK, is_secret_name, redact

    return [
        f"--{name}={MASK if is_secret_name(name) else redact(value)}"
        for name, value in overrides.items()
    ]
