"""A mitmproxy addon (run by mitmdump, in mitmproxy's own venv): answers a share of the
requests itself with an S3 error, as AWS S3 does under load, instead of passing them on.

The share and the status are read from the JSON file named by $FAULTS_MITM_CONTROL
(``{"share": 0.2, "status": 503}``) at each request, so the fault module changes them
while the proxy runs; the count of injected answers is written beside it (``.count``).
503 is S3's ``SlowDown``, 500 its ``InternalError``, with S3's XML error body.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from mitmproxy import http

BODIES = {
    500: ("InternalError", "We encountered an internal error. Please try again."),
    503: ("SlowDown", "Please reduce your request rate."),
}


class S3Errors:
    def __init__(self) -> None:
        self.control = Path(os.environ["FAULTS_MITM_CONTROL"])
        self.injected = 0

    def request(self, flow: http.HTTPFlow) -> None:
        try:
            settings = json.loads(self.control.read_text())
        except (OSError, ValueError):
            return
        if random.random() >= float(settings.get("share", 0)):
            return
        status = int(settings.get("status", 503))
        code, message = BODIES.get(status, BODIES[503])
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message><Resource>{flow.request.path}</Resource>"
            f"<RequestId>faults-{self.injected}</RequestId></Error>"
        ).encode()
        flow.response = http.Response.make(status, body, {"Content-Type": "application/xml"})
        self.injected += 1
        tmp = self.control.with_suffix(".count.tmp")
        tmp.write_text(json.dumps({"injected": self.injected}))
        tmp.replace(self.control.with_suffix(".count"))


addons = [S3Errors()]
