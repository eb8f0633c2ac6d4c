"""The benchmark convention every benchmark in ``bench/`` follows.

A benchmark compares our code with a named baseline *side by side in one
run*: the two are interleaved (A B A B ...) for several rounds so drift of a
shared machine hits both alike, and we report each side's median, the ratio
of medians, and the spread (min-max). See seed 001 on micro-benchmarks.

A module ``bench/bench_<name>.py`` defines ``run(rounds: int) -> list[Comparison]`` (or a
:class:`Report`, when it has a table of its own). ``python -m bench`` runs every module (or
those named) and rewrites ``bench/RESULTS.md``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Sample:
    """The measurements of one side of a comparison, one value per round."""

    label: str
    values: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def spread(self) -> str:
        return f"{min(self.values):.4g}-{max(self.values):.4g}"


@dataclass(frozen=True)
class Comparison:
    """Ours vs a baseline on one metric.

    ``higher_is_better`` says which way the ratio reads: for times it is
    ``baseline / ours`` (how many times faster), for throughputs ``ours / baseline``.
    ``goal`` is the ratio the issue asks for, if any.
    """

    name: str
    metric: str
    unit: str
    ours: Sample
    baseline: Sample
    higher_is_better: bool
    goal: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        if self.higher_is_better:
            return self.ours.median / self.baseline.median
        return self.baseline.median / self.ours.median


@dataclass(frozen=True)
class Report:
    """What a benchmark with more to say than its comparisons returns: ``table``, markdown
    lines shown under the benchmark's own heading in RESULTS.md, and ``data``, its raw
    figures, kept in its results file (bench/results/NAME.json) for tests and later reading."""

    comparisons: list[Comparison]
    table: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


def interleave(
    ours: Callable[[], float], baseline: Callable[[], float], rounds: int, warmup: int = 1
) -> tuple[list[float], list[float]]:
    """Call ``ours`` and ``baseline`` alternately (the order flips every round).

    Each call returns its own measurement (a duration, a rate, bytes...).
    ``warmup`` rounds of each run first and are discarded.
    """
    for _ in range(warmup):
        ours()
        baseline()
    ours_values: list[float] = []
    baseline_values: list[float] = []
    for index in range(rounds):
        pair = [(ours, ours_values), (baseline, baseline_values)]
        for function, values in pair if index % 2 == 0 else reversed(pair):
            values.append(function())
    return ours_values, baseline_values


def timed(function: Callable[[], object]) -> Callable[[], float]:
    """Wrap ``function`` so calling it returns its wall time in seconds."""

    def measure() -> float:
        start = time.perf_counter()
        function()
        return time.perf_counter() - start

    return measure
