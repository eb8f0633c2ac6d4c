"""Drain and placement rules (pure): which hosts may claim a job (its ``hosts`` tags against
a host's ``crontabber.host_tags``), whether any live host of the fleet may run it, and how a
drained host stands ("draining: N runs left", "drained").

A host drained by an operator (``--drain HOST``) claims nothing new; its running runs finish.
A job with ``hosts = TAG[, TAG...]`` is claimed only by a host carrying one of those tags; a
job without it, by any host.
"""

from __future__ import annotations

from .state import FleetHost, JobState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Mapping, Protocol, Sequence

    from .records import HostState

    class Placed(Protocol):
        """A job as placement reads it (:class:`crontabber.config.catalog.Job`, without
        importing the catalog, which imports this module)."""

        @property
        def app_name(self) -> str: ...

        @property
        def hosts(self) -> tuple[str, ...]: ...


def parse_tags(text: object) -> tuple[str, ...]:
    """Tags from ``spool, es`` (commas or spaces), each once, in the order given."""
    found: list[str] = []
    for tag in str(text or "").replace(",", " ").split():
        if tag not in found:
            found.append(tag)
    return tuple(found)


def may_claim(wanted: Sequence[str], tags: Iterable[str]) -> bool:
    """Whether a host carrying ``tags`` may claim a job placed on ``wanted`` (empty: any)."""
    return not wanted or bool(set(wanted) & set(tags))


def placement_text(wanted: Sequence[str], tags: Sequence[str]) -> str:
    """Why this host skips a job placed elsewhere."""
    return (
        f"placed on hosts tagged {' or '.join(wanted)} (hosts = {', '.join(wanted)}); "
        f"this host's tags: {', '.join(tags) or 'none'}"
    )


def no_live_host(
    wanted: Sequence[str], fleet: Sequence[FleetHost], drains: Mapping[str, str] | None = None
) -> str | None:
    """The verdict when no live, undrained host carries a tag of ``wanted``: "no live host
    may run it: needs tag X; hosts with it: none" (or the hosts, drained: with their drain's
    end, who and why when ``drains`` has them, :func:`drains_of`); None when one may (or the
    job is not placed)."""
    if not wanted:
        return None
    carrying = [host for host in fleet if host.live and may_claim(wanted, host.tags)]
    if any(not host.drained for host in carrying):
        return None
    terms = drains or {}
    listed = (
        ", ".join(
            f"{host.host} (drained {terms[host.host]})"
            if host.host in terms
            else f"{host.host} (drained)"
            for host in carrying
        )
        or "none"
    )
    needs = " or ".join(wanted)
    return f"no live host may run it: needs tag {needs}; hosts with it: {listed}"


def unplaced(
    jobs: Iterable[Placed], fleet: Iterable[FleetHost], drains: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The configured jobs no live host of ``fleet`` may run (their ``hosts`` tags: none
    carries one, or all that do are drained), each with the verdict saying so (naming each
    drain of ``drains``: :func:`drains_of`); {} when ``fleet`` is empty (not read: not a
    tick) or no job is placed."""
    hosts = tuple(fleet)
    if not hosts:
        return {}
    found = {job.app_name: no_live_host(job.hosts, hosts, drains) for job in jobs if job.hosts}
    return {name: verdict for name, verdict in found.items() if verdict}


def fleet_of(hosts: Sequence[HostState], live: Sequence[HostState]) -> tuple[FleetHost, ...]:
    """``hosts`` as placement sees them, ``live`` those that ticked recently enough (the
    views' and ``--nagios``'s reading of the fleet, as a tick's is read with its states)."""
    recent = {host.host for host in live}
    return tuple(FleetHost(h.host, h.tags, h.host in recent, h.drained) for h in hosts)


def runs_on(host: str, states: Mapping[str, JobState]) -> int:
    """How many runs ``host`` holds now (its ``ongoing`` markers: ``host:pid``)."""
    return sum(
        1
        for state in states.values()
        if state.ongoing is not None and (state.ongoing_by or "").rpartition(":")[0] == host
    )


def drain_text(host: str, states: Mapping[str, JobState]) -> str:
    """A drained host as the views show it: ``draining: N runs left`` while its runs go on,
    then ``drained``."""
    left = runs_on(host, states)
    if not left:
        return "drained"
    return f"draining: {left} run{'s' if left != 1 else ''} left"


def drain_line(host: "HostState", states: Mapping[str, JobState]) -> str:
    """``host web-1: draining: 2 runs left (until 2026-11-24 06:00 UTC by ops@bastion:
    kernel patch)``: what ``--list-jobs``, ``--nagios`` and the dashboard say of a drained
    host."""
    return f"host {host.host}: {drain_text(host.host, states)} ({drain_terms(host)})"


def drain_terms(host: "HostState") -> str:
    """A drain's end, who and why: ``until 2026-11-24 06:00 UTC by ops@bastion: kernel
    patch`` (``until --undrain`` when it has no end)."""
    from .formats import minute_text

    until = f"until {minute_text(host.drain_until)}" if host.drain_until else "until --undrain"
    return (
        f"{until} by {host.drained_by or 'an operator'}: {host.drain_reason or 'no reason given'}"
    )


def drains_of(hosts: Iterable["HostState"]) -> dict[str, str]:
    """The drains in force among ``hosts`` (``crontabber_host`` rows), by host: their
    :func:`drain_terms`, which the ``no-host`` verdict names (:func:`no_live_host`)."""
    return {host.host: drain_terms(host) for host in hosts if host.drained}
