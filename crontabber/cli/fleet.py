"""The operator commands on hosts: ``--drain HOST --reason TEXT [--until WHEN]`` and
``--undrain HOST``. Each is audited (action ``drain``/``undrain``, the job column
``host:HOST``). A drained host's ticks claim nothing new; its running runs finish
(:mod:`crontabber.placement`).
"""

from __future__ import annotations

from ..command import ExitCode
from ..errors import ConfigurationError, DrainInForce, HostNotFound
from ..formats import minute_text
from ..placement import drain_text, drains_of, no_live_host
from ..scheduling import parse_until
from .common import Context


def audit_name(host: str) -> str:
    """What the audit trail's job column says for a host (``--audit --audit-job host:NAME``)."""
    return f"host:{host}"


def drain(ctx: Context) -> int:
    """``--drain HOST --reason TEXT [--until WHEN]``: the host claims nothing new until
    ``--until`` (default: until ``--undrain``); a drain in force is replaced only with
    ``--replace``. Names the placed jobs the drain leaves without a live host.

    Raises:
        HostNotFound: no host of that name ever ticked (nothing is written).
        DrainInForce: the host is drained already and ``--replace`` was not given.
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
        found = next((row for row in store.hosts() if row.host == host), None)
        if found is None:
            raise HostNotFound(host, [row.host for row in store.fleet(0)])
        raise DrainInForce(host, found.drain_until, found.drained_by, found.drain_reason)
    state = drain_text(host, store.states())
    ends = f"until {minute_text(until)}" if until else f"until --undrain {host}"
    print(
        f"{host}: {state} ({ends}{'; replaced the drain in force' if replaced else ''}): its "
        "ticks claim nothing new; its running runs finish; --list-jobs shows when none is left",
        file=ctx.out,
    )
    for line in stranded(ctx, host):
        print(f"  {line}", file=ctx.out)
    return ExitCode.OK


def stranded(ctx: Context, host: str) -> list[str]:
    """The placed jobs that no live, undrained host may run now that ``host`` is drained,
    each with its verdict (which tag, which hosts carry it) and the way back."""
    fleet = ctx.store.fleet(ctx.settings.monitor.silence_critical_minutes * 60)
    drains = drains_of(ctx.store.hosts())
    return [
        f"{job.app_name}: stranded: {verdict} (--undrain {host}, or give another host the tag)"
        for job in ctx.jobs
        if job.hosts and (verdict := no_live_host(job.hosts, fleet, drains))
    ]


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
