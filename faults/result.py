"""One fault kind's figures: thrown, converged, lost, duplicated."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class FaultResult:
    """The outcome of throwing one kind of fault `thrown` times.

    `converged` counts the throws after which the system reached a correct
    state by itself (reruns included); `lost` and `duplicated` count the units
    (uploads, events, documents, keys) lost or counted/published twice, summed
    over all throws; the goal is `converged == thrown` and 0 for both.
    `figures` holds fault-specific measurements (latencies, error rates, memory)
    as short label -> value text, and `notes` one line each on what was seen.
    """

    fault: str
    thrown: int
    converged: int
    lost: int = 0
    duplicated: int = 0
    figures: dict[str, str] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.converged == self.thrown and self.lost == 0 and self.duplicated == 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultResult:
        return cls(**data)
