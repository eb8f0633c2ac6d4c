"""The operator commands on hosts: ``--drain HOST --reason TEXT [--until WHEN]`` and
``--undrain HOST``. Each is audited (action ``drain``/``undrain``, the job column
``host:HOST``). A drained host's ticks claim nothing new; its running runs finish
(:mod:`crontabber.placement`).
"""

from __future__ import annotations

from ..command import ExitCode
from ..errors import ConfigurationError, HostNotFound
from ..formats import minute_text
from ..placement import drain_text
from ..scheduling import parse_until
from .common import Context


def audit_name(host: str) -> str:
    """What the audit trail's job column says for a host (``--audit --audit-job host:NAME``)."""
    return f"host:{host}"


def drain(ctx: Context) -> int:
    """``--drain HOST --reason TEXT [--until WHEN]``: the host claims nothing new until
    ``--until`` (default: until ``--undrain``); a drain in force is replaced.

    Raises:
        HostNotFound: no host of that name ever ticked (nothing is written).
        ConfigurationError: ``--until`` does not parse or is not in the future.
    """
    store, args, host = ctx.store, ctx.args, ctx.args.drain
    now = store.now()
    try:
        until = parse_until(args.until, now) if args.until else None
    except ValueError as exc:
        raise ConfigurationError("--until", str(exc)) from None
    audit = ctx.audit_entry("drain", audit_name(host), host=host, until=until)
    replaced = store.drain(host, until, audit)
    if replaced is None:
        raise HostNotFound(host, [row.host for row in store.fleet(0)])
    state = drain_text(host, store.states())
    ends = f"until {minute_text(until)}" if until else f"until --undrain {host}"
    print(
        f"{host}: {state} ({ends}{'; replaced the drain in force' if replaced else ''}): its "
        "ticks claim nothing new; its running runs finish; --list-jobs shows when none is left",
        file=ctx.out,
    )
    return ExitCode.OK


def undrain(ctx: Context) -> int:
    """``--undrain HOST``: end the host's drain now; its next tick claims jobs again.

    Raises:
        HostNotFound: no host of that name ever ticked.
    """
    store, host = ctx.store, ctx.args.undrain
    if store.undrain(host, ctx.audit_entry("undrain", audit_name(host), host=host)):
        print(f"{host}: undrained: its next tick claims jobs again", file=ctx.out)
        return ExitCode.OK
    known = [row.host for row in store.fleet(0)]
    if host not in known:
        raise HostNotFound(host, known)
    print(f"{host}: not drained", file=ctx.out)
    return ExitCode.OK
