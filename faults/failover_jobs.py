"""The jobs of the failover drill (:mod:`faults.failover`): each run holds an exclusive
``flock`` on a file of its own job while it works (a second copy running at the same time
is caught: ``overlapped``), then appends one JSON line to the journal named by
``FAILOVER_JOURNAL``, outside the database that fails over: what really ran, to count against
what the database recorded."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time

from crontabber.base import BaseCronApp
from crontabber.config.options import Namespace


class WitnessJob(BaseCronApp):
    """Works ``seconds`` under its job's file lock; journals the run when it ends."""

    required_config = Namespace()
    required_config.add_option("seconds", default=0.8, doc="how long a run works")

    def run(self) -> str:
        journal = os.environ["FAILOVER_JOURNAL"]
        with open(f"{journal}.{self.app_name}.lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                alone = True
            except BlockingIOError:
                alone = False
            started = time.time()
            time.sleep(float(self.config.seconds))
            line = json.dumps(
                {
                    "app": self.app_name,
                    "run_id": self.run_id,
                    "host": socket.gethostname(),
                    "started": started,
                    "ended": time.time(),
                    "overlapped": not alone,
                }
            )
            with open(journal, "a") as out:
                out.write(line + "\n")
        return "witnessed"


class WitnessA(WitnessJob):
    app_name = "witness-a"


class WitnessB(WitnessJob):
    app_name = "witness-b"
