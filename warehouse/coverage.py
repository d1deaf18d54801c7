"""Coverage: which inputs each derived figure needs, and how much of its scope they cover.

A bill without GPU metrics cannot say a GPU was idle or busy; a GPU-hour without a power reading has no
emissions; unit costs need the servers' token counters. So every derived figure is declared here once
(``FIGURES`` in ``warehouse/inputs.py``: the inputs it needs) and every model kind declares its ``needs`` on its spec
(``models/kind_spec.py``); ``measure`` reads the warehouse and says, per figure, how many of the scope's
GPU-hours (resources, days) its inputs cover. A surface prints ``Coverage.sentence()``: *unknown* and why
(naming the source types that would provide the input and what is affected) where nothing covers the figure,
"measured for 420 of 1,872 GPU-hours" where part does, and nothing where all does. Missing is never zero.

"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from gpufinops.warehouse.inputs import FIGURES, HOURLY_INPUTS, INPUTS, Input
from gpufinops.warehouse.queries.fragments import GPU_USAGE, filters


@dataclass(frozen=True)
class Coverage:
    """How much of a figure's scope its inputs cover."""

    figure: str
    label: str
    needs: tuple[Input, ...]
    unit: str  # "GPU-hours"
    covered: float
    total: float
    missing: tuple[tuple[Input, float], ...]  # each input that misses part of the scope, and how much it misses
    resources: int  # the resources of the scope the figure cannot see (all of them where it is unknown)
    days: int  # the days of the scope

    @property
    def state(self) -> str:
        """``complete``, ``partial``, ``unknown`` (nothing covered) or ``empty`` (no scope at all: no data)."""
        if self.total <= 0:
            return "empty"
        if not self.missing or self.covered >= self.total:
            return "complete"
        return "unknown" if self.covered <= 0 else "partial"

    @property
    def known(self) -> bool:
        return self.state in ("complete", "partial")

    def why(self) -> str:
        """Which input is missing, what it affects and which source would provide it."""
        parts = []
        for source, amount in self.missing:
            whole = not amount or amount >= self.total
            affected = "" if whole else f" for {amount:,.0f} {self.unit}"
            parts.append(f"no {source.label}{affected} ({source.hint()})")
        return "; ".join(parts)

    def measured(self) -> str:
        """ "measured for 420 of 1,872 GPU-hours"."""
        return f"measured for {self.covered:,.0f} of {self.total:,.0f} {self.unit}"

    def scope(self) -> str:
        """ "1,872 GPU-hours on 24 resources over 14 days" (a figure of whole-scope inputs: "14 days")."""
        days = f"{self.days:,} day{'s' if self.days != 1 else ''}"
        if self.unit == "days":
            return days
        plural = "s" if self.resources != 1 else ""
        return f"{self.total:,.0f} {self.unit} on {self.resources:,} resource{plural} over {days}"

    def detail(self) -> str:
        """The sentence without the figure's label: "unknown for all …: no … (…)", or "measured for 420 of …"."""
        state = self.state
        if state == "complete":
            return ""
        if state == "empty":
            hints = "; ".join(f"{i.label}: {i.hint()}" for i in self.needs)
            return f"unknown, no data in the window ({hints})"
        if state == "unknown":
            return f"unknown for all {self.scope()}: {self.why()}"
        return f"{self.measured()} ({self.why()})"

    def sentence(self) -> str:
        """What a surface prints beside (or instead of) the figure; empty where the figure is complete."""
        detail = self.detail()
        return f"{self.label}: {detail}" if detail else ""

    def value_or_unknown(self, text: str) -> str:
        """The figure's printed value where its inputs cover any of the scope, else ``unknown``."""
        return text if self.known else "unknown"


_HOURS_SQL = """
WITH billed AS (
    SELECT c."ResourceId" AS rid, epoch_us(c."ChargePeriodStart") // 3600000000 AS hour_n,
           greatest(max(c."x_GpuCount"), 1) AS gpus
    FROM cost_line_items c
    WHERE c."ChargeCategory" = 'Usage' AND c."ResourceId" IS NOT NULL AND {gpu} AND {where} GROUP BY 1, 2),
measured AS (
    SELECT coalesce(resource_id, host) AS rid, epoch_us(hour) // 3600000000 AS hour_n,
           count(DISTINCT gpu_uuid) AS gpus, bool_or(power_mean_w IS NOT NULL) AS powered
    FROM gpu_metrics_hourly WHERE {mwhere} GROUP BY 1, 2),
hours AS (
    SELECT coalesce(b.rid, m.rid) AS rid, coalesce(b.hour_n, m.hour_n) AS hour_n,
           coalesce(b.gpus, m.gpus) AS gpus, b.rid IS NOT NULL AS billed, m.rid IS NOT NULL AS measured,
           coalesce(m.powered, FALSE) AS powered
    FROM billed b FULL JOIN measured m ON b.rid = m.rid AND b.hour_n = m.hour_n)
SELECT coalesce(sum(gpus), 0), coalesce(sum(gpus) FILTER (WHERE billed), 0),
       coalesce(sum(gpus) FILTER (WHERE measured), 0), coalesce(sum(gpus) FILTER (WHERE powered), 0),
       coalesce(sum(gpus) FILTER (WHERE billed AND measured), 0),
       coalesce(sum(gpus) FILTER (WHERE billed AND powered), 0),
       count(DISTINCT rid), count(DISTINCT rid) FILTER (WHERE NOT measured), count(DISTINCT rid) FILTER (WHERE NOT billed),
       count(DISTINCT rid) FILTER (WHERE NOT powered), count(DISTINCT hour_n // 24)
FROM hours"""


@dataclass(frozen=True)
class GpuHours:
    """The scope's GPU-hours (billed or measured) and which inputs cover which."""

    total: float
    by_input: dict[str, float]  # bill, utilisation, power: the GPU-hours each covers
    both: dict[tuple[str, ...], float]  # needs -> the GPU-hours every one of them covers
    resources: int
    uncovered_resources: dict[str, int]  # input -> resources it never covers
    days: int
    present: frozenset[str]  # the whole-scope inputs with any row (serving, prices, storage)


def gpu_hours(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> GpuHours:
    """Read the scope's GPU-hours and what covers them (one query over the bill and the metrics)."""
    where, params = filters(team, start, end)
    mwhere, mparams = filters(team, start, end, team_col="team", time_col="hour")
    row = con.execute(_HOURS_SQL.format(gpu=GPU_USAGE, where=where, mwhere=mwhere), params + mparams).fetchall()[0]
    assert row is not None  # an aggregate returns one row
    (
        total,
        billed,
        measured,
        powered,
        billed_measured,
        billed_powered,
        resources,
        unmeasured,
        unbilled,
        unpowered,
        days,
    ) = row
    serving_where, serving_params = filters(None, start, end, time_col="hour")
    present = {
        name
        for name, sql, args in (
            ("serving", f"SELECT 1 FROM serving_metrics_hourly WHERE {serving_where} LIMIT 1", serving_params),
            (
                "prices",
                "SELECT 1 FROM (SELECT 1 FROM price_catalog UNION ALL SELECT 1 FROM instance_types "
                "UNION ALL SELECT 1 FROM spot_prices UNION ALL SELECT 1 FROM price_history) LIMIT 1",
                [],
            ),
            ("storage", "SELECT 1 FROM storage_volumes LIMIT 1", []),
        )
        if con.execute(sql, args).fetchall()
    }
    return GpuHours(
        total=float(total),
        by_input={"bill": float(billed), "utilisation": float(measured), "power": float(powered)},
        both={("bill", "utilisation"): float(billed_measured), ("bill", "power"): float(billed_powered)},
        resources=int(resources),
        uncovered_resources={"bill": int(unbilled), "utilisation": int(unmeasured), "power": int(unpowered)},
        days=int(days),
        present=frozenset(present),
    )


def of(hours: GpuHours, figure: str, needs: tuple[str, ...] | None = None, label: str | None = None) -> Coverage:
    """The coverage of one figure (or of a model kind's ``needs``) over the scope ``hours`` measured."""
    spec = FIGURES.get(figure)
    needs = needs if needs is not None else (spec.needs if spec else ())
    unknown = [n for n in needs if n not in INPUTS]
    if unknown:
        raise ValueError(f"{figure}: needs {', '.join(unknown)}, which are none of {', '.join(INPUTS)}")
    hourly = tuple(n for n in needs if n in HOURLY_INPUTS)
    absent = [INPUTS[n] for n in needs if n not in HOURLY_INPUTS and n not in hours.present]
    if not hourly:  # a figure of whole-scope inputs (a storage inventory): present or absent, over the days
        return Coverage(
            figure=figure,
            label=label or (spec.label if spec else figure),
            needs=tuple(INPUTS[n] for n in needs),
            unit="days",
            covered=0.0 if absent else float(hours.days),
            total=float(hours.days),
            missing=tuple((i, 0.0) for i in absent),
            resources=hours.resources if absent else 0,
            days=hours.days,
        )
    if len(hourly) == 1:
        covered = hours.by_input[hourly[0]]
    else:
        covered = hours.both.get(hourly, min(hours.by_input[n] for n in hourly))
    missing: list[tuple[Input, float]] = [
        (INPUTS[n], hours.total - hours.by_input[n]) for n in hourly if hours.by_input[n] < hours.total
    ]
    missing += [(i, 0.0) for i in absent]
    if absent:
        covered = 0.0  # a whole-scope input that is absent: nothing of the figure is known
    blind = max((hours.uncovered_resources.get(n, hours.resources) for n in needs), default=0)
    return Coverage(
        figure=figure,
        label=label or (spec.label if spec else figure),
        needs=tuple(INPUTS[n] for n in needs),
        unit="GPU-hours",
        covered=covered,
        total=hours.total,
        missing=tuple(missing),
        resources=blind,
        days=hours.days,
    )


def measure(
    con: duckdb.DuckDBPyConnection,
    figures: tuple[str, ...] = tuple(FIGURES),
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> dict[str, Coverage]:
    """Each figure's coverage over the scope (team filter, window [start, end))."""
    return figures_of(gpu_hours(con, team=team, start=start, end=end), figures)


def figures_of(hours: GpuHours, figures: tuple[str, ...] = tuple(FIGURES)) -> dict[str, Coverage]:
    """Each figure's coverage over a scope already read (a page reads ``gpu_hours`` once, cached)."""
    return {name: of(hours, name) for name in figures}


def no_bill(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None) -> str:
    """Where GPU metrics are loaded and no bill is: what the metrics cover and which sources load a bill, in
    a sentence for an empty spend page or command ("" where a bill is loaded, or nothing at all is)."""
    idle = of(gpu_hours(con, team=team), "idle_cost")
    if idle.state != "unknown" or INPUTS["bill"] not in (i for i, _ in idle.missing):
        return ""
    return (
        f"no bill loaded yet: GPU metrics cover {idle.scope()}, but spend, idle cost and savings need a bill "
        f"({INPUTS['bill'].hint('one')}: add it to the config and run gpufinops ingest)"
    )


def of_row(figure: str, total: float, unmeasured: float, resources: int, days: int) -> Coverage:
    """The coverage of one row of a figure of one hourly input (a carbon row: its GPU-hours, those without
    a power reading, the resources and days they fall on)."""
    spec = FIGURES[figure]
    needs = tuple(INPUTS[n] for n in spec.needs)
    missing = tuple((i, float(unmeasured)) for i in needs) if unmeasured > 0 else ()
    return Coverage(
        figure=figure,
        label=spec.label,
        needs=needs,
        unit="GPU-hours",
        covered=float(total) - float(unmeasured),
        total=float(total),
        missing=missing,
        resources=int(resources),
        days=int(days),
    )
