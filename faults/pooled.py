"""kill -9 of a runner during each job (:mod:`faults.kills`), with every runner, job and
check connected through PgBouncer in transaction pooling mode (``scripts/services.sh``'s
``pgb``): the drills of a deployment behind a pooler.

Behind a transaction pooler nothing of a run may live in a database session: a session
advisory lock stays on a pooled server connection after its run died (prune's did; it is a
lease now). PgBouncer's own statistics (``SHOW STATS``) count each drill's transactions, a
figure of its result; a drill none of whose transactions went through it fails, so a
setting that fell back to a direct connection cannot pass for this one.
"""

from __future__ import annotations

import contextlib
import os
import random
from typing import Iterator

import devservices
from faults import kills
from faults.result import FaultResult
from faults.scenarios import SCENARIOS


def run(scale: float) -> list[FaultResult]:
    rng = random.Random(31)
    count = max(1, round(kills.KILLS * scale))
    services = devservices.current()
    results = []
    with _through_pgbouncer(services):
        for kind in SCENARIOS:
            before = _transactions(services)
            result = kills.kill_rounds(kind(rng), count, rng)
            went = _transactions(services) - before
            result.fault += " (through PgBouncer)"
            result.figures["transactions through PgBouncer"] = str(went)
            if went <= 0:
                result.converged = 0
                result.notes.insert(0, "no transaction went through PgBouncer: not this drill")
            results.append(result)
    return results


@contextlib.contextmanager
def _through_pgbouncer(services: devservices.Services) -> Iterator[None]:
    """The environment every runner, job and check of the drills inherits points at PgBouncer."""
    saved = os.environ.get("RESOURCE_POSTGRESQL_PORT")
    os.environ["RESOURCE_POSTGRESQL_PORT"] = str(services.pgb_port)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["RESOURCE_POSTGRESQL_PORT"]
        else:
            os.environ["RESOURCE_POSTGRESQL_PORT"] = saved


def _transactions(services: devservices.Services) -> int:
    """PgBouncer's count of transactions on the drills' database."""
    stats = services.pgbouncer_stats().get(services.database()["dbname"], {})
    return int(stats.get("total_xact_count", 0))
