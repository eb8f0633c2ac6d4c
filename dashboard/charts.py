"""The job page's metric charts: each named number the job's runs returned with their summary
(``crontabber.base.Summary``, the run ledger's ``metrics``) drawn over its last runs as an
inline SVG line, oldest left, with the newest value, min, median and max as text and a table
of the values beside it (for whoever cannot see the chart). Drawn on the server: no script,
no style attribute (the page's Content-Security-Policy allows neither inline), every name and
number escaped. Pure functions of the ledger's records.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from crontabber.formats import stamp

from .page import esc

CHART_WIDTH, CHART_HEIGHT, CHART_PAD = 300, 48, 4
#: The most charts a job page draws (a run keeps at most 20 metrics; names may change over runs).
MAX_CHARTS = 20


@dataclass(frozen=True)
class Point:
    """One run's value of a metric."""

    run_id: int
    started: dt.datetime
    value: float


def metric_value(value: float) -> str:
    """A value as the page shows it: a whole number with thousands separators, another with
    4 significant digits."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.4g}"


def _number(value: Any) -> float | None:
    """``value`` if it is a finite number (the ledger's jsonb may hold anything written to it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def series(records: Sequence[Any]) -> dict[str, list[Point]]:
    """Each metric's values over ``records`` (run ledger rows, newest first), oldest first; a
    run without the metric, or with a value that is no finite number, has no point."""
    found: dict[str, list[Point]] = {}
    for record in reversed(records):
        metrics: Mapping[Any, Any] = record.metrics if isinstance(record.metrics, Mapping) else {}
        for name, raw in metrics.items():
            value = _number(raw)
            if value is not None:
                found.setdefault(str(name), []).append(Point(record.run_id, record.started, value))
    return dict(sorted(found.items()))


def _label(name: str, point: Point) -> str:
    return f"{name} = {metric_value(point.value)}: run {point.run_id}, {stamp(point.started)} UTC"


def chart_svg(name: str, points: Sequence[Point]) -> str:
    """The line of ``points`` (at least one), scaled to the chart: the lowest value at the
    bottom, the highest at the top (a flat line in the middle when they are equal); each
    point a circle whose title says the run and the value."""
    low, high = min(p.value for p in points), max(p.value for p in points)
    inner_w, inner_h = CHART_WIDTH - 2 * CHART_PAD, CHART_HEIGHT - 2 * CHART_PAD
    step = inner_w / (len(points) - 1) if len(points) > 1 else 0.0
    coords = []
    for index, point in enumerate(points):
        x = CHART_PAD + (index * step if len(points) > 1 else inner_w / 2)
        share = (point.value - low) / (high - low) if high > low else 0.5
        coords.append((x, CHART_PAD + inner_h * (1 - share)))
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    dots = "".join(
        f'<circle class="pt" cx="{x:.1f}" cy="{y:.1f}" '
        f'r="2"><title>{esc(_label(name, point))}</title></circle>'
        for (x, y), point in zip(coords, points)
    )
    return (
        f'<svg class="mchart" width="{CHART_WIDTH}" height="{CHART_HEIGHT}" '
        f'viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" role="img" data-points="{len(points)}" '
        f'aria-label="{esc(name)} over {len(points)} runs: from {esc(metric_value(low))} to '
        f'{esc(metric_value(high))}, newest {esc(metric_value(points[-1].value))}">'
        f'<polyline class="line" points="{line}"/>{dots}</svg>'
    )


def _stats(points: Sequence[Point]) -> str:
    values = [p.value for p in points]
    parts = [
        ("newest", points[-1].value),
        ("min", min(values)),
        ("median", statistics.median(values)),
        ("max", max(values)),
    ]
    return " · ".join(
        f'{label} <b class="num" data-k="metric.{label}">{esc(metric_value(value))}</b>'
        for label, value in parts
    )


def _values_table(points: Sequence[Point]) -> str:
    rows = "".join(
        f"<tr><td>{esc(p.run_id)}</td><td>{esc(stamp(p.started))}</td>"
        f"<td>{esc(metric_value(p.value))}</td></tr>"
        for p in reversed(points)
    )
    return (
        '<details class="values"><summary>values, newest first</summary><table class="small '
        'metric-values">'
        "<thead><tr><th>run</th><th>started "
        f"(UTC)</th><th>value</th></tr></thead><tbody>{rows}</tbody>"
        "</table></details>"
    )


def metric_chart(name: str, points: Sequence[Point]) -> str:
    """One metric: its name, the newest value, min, median and max, the chart, the table."""
    return (
        f'<div class="metric" data-metric="{esc(name)}"><h3>{esc(name)} '
        f"<small>{len(points)} runs</small></h3><p>{_stats(points)}</p>"
        f"{chart_svg(name, points)}{_values_table(points)}</div>"
    )


def metrics_panel(app_name: str, records: Sequence[Any], limit: int) -> str | None:
    """The job page's metrics panel over ``records`` (its last ``limit`` runs in the ledger,
    newest first), or None when none of them returned a metric (the page then has no such
    panel)."""
    found = series(records)
    if not found:
        return None
    drawn = list(found.items())[:MAX_CHARTS]
    more = (
        f'<p class="none">{len(found) - MAX_CHARTS} more metrics not drawn</p>'
        if len(found) > MAX_CHARTS
        else ""
    )
    return (
        f"<h2>Metrics of {esc(app_name)} <small>what its last {limit} runs returned, oldest "
        "left</small></h2>"
        '<div class="metrics">'
        + "".join(metric_chart(name, points) for name, points in drawn)
        + f"</div>{more}"
    )
