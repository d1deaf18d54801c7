"""Every number in the weekly report, gathered for one week and one scope.

All figures come from the shared warehouse queries with the scope's team filter, so a lead's
report cannot contain another team's spend, idle cost, recommendation or forecast. Money stays
Decimal here; the charts get floats.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, cast
from zoneinfo import ZoneInfo

import duckdb
import polars as pl

from gpufinops.derived import unit_costs
from gpufinops.jobs.report.weeks import Week, parse_week, week_of
from gpufinops.kernel.labels import NO_TEAM, label
from gpufinops.models import kind_coverage, plans
from gpufinops.warehouse import allocation_queries, coverage, freshness, inputs, queries
from gpufinops.warehouse.scope import Scope

TREND_WEEKS = 8
TOP_RECOMMENDATIONS = 10
ZERO = Decimal("0")


@dataclass
class TeamLine:
    team: str
    spend: Decimal
    previous_spend: Decimal
    gpu_spend: Decimal
    idle_cost: Decimal
    open_savings: Decimal
    comparable: bool = True
    allocated_gpu: Decimal = ZERO  # its workloads' share of shared GPUs (in spend and gpu_spend)
    unallocated_gpu: Decimal = ZERO  # idle capacity of shared GPUs it carries (in spend and gpu_spend)
    unknown_kinds: list[Any] = field(default_factory=list)  # kind_coverage.KindsUnknown over its GPU-hours

    @property
    def change_pct(self) -> float | None:
        return _change(self.spend, self.previous_spend) if self.comparable else None


@dataclass
class WeekFigures:
    week: Week
    scope: Scope
    tz: str
    spend: Decimal = ZERO
    previous_spend: Decimal = ZERO
    gpu_spend: Decimal = ZERO
    idle_cost: Decimal = ZERO
    idle_gpu_hours: int = 0
    allocated_gpu: Decimal = ZERO  # shared GPUs: charged to the workloads that ran on them
    unallocated_gpu: Decimal = ZERO  # shared GPUs: idle capacity (its own line for finance)
    data_through: datetime | None = None
    billed: bool = True  # False: no cost data in scope up to the week's end (spend is unknown, not $0)
    teams: list[TeamLine] = field(default_factory=list)
    providers: list[dict[str, Any]] = field(default_factory=list)
    open_recommendations: list[dict[str, Any]] = field(default_factory=list)
    spend_trend: list[dict[str, Any]] = field(default_factory=list)  # week, provider, usd (float)
    idle_trend: list[dict[str, Any]] = field(default_factory=list)  # week, team, usd (float)
    forecast: dict[str, Any] | None = None
    previous_complete: bool = True  # False: the data starts inside the week before, no fair comparison
    withheld: list[dict[str, Any]] = field(default_factory=list)  # reason, findings, kinds
    stale_sources: list[dict[str, Any]] = field(default_factory=list)  # source, message (warehouse.freshness)
    onprem: list[dict[str, Any]] = field(default_factory=list)  # the on-prem comparison: facts, not savings
    carbon: list[dict[str, Any]] = field(default_factory=list)  # team, kwh, kg_co2e, per GPU-hour, withheld hours
    carbon_sources: list[dict[str, Any]] = field(default_factory=list)  # intensity and PUE behind them

    @property
    def carbon_withheld_gpu_hours(self) -> float:
        return sum(float(c["withheld_gpu_hours"] or 0) for c in self.carbon)

    unit_costs: list[dict[str, Any]] = field(default_factory=list)  # serving: $ per 1M tokens per model, the week
    # figure -> warehouse.coverage.Coverage over the week and scope: an unknown figure reads "unknown", never $0
    coverage: dict[str, Any] = field(default_factory=dict)
    unknown_kinds: list[Any] = field(
        default_factory=list
    )  # models.kind_coverage.KindsUnknown: kinds that could not look

    @property
    def withheld_total(self) -> int:
        return sum(int(w["findings"]) for w in self.withheld)

    @property
    def change_pct(self) -> float | None:
        return _change(self.spend, self.previous_spend) if self.previous_complete else None

    @property
    def gpu_share_pct(self) -> float | None:
        return float(self.gpu_spend / self.spend * 100) if self.spend else None

    @property
    def open_savings(self) -> Decimal:
        return open_savings(self.open_recommendations)

    @property
    def planned_recommendations(self) -> list[dict[str, Any]]:
        """The open primary and step objects: what the total counts (alternatives are in the CSV)."""
        return [r for r in self.open_recommendations if plans.counted(r)]

    @property
    def top_recommendations(self) -> list[dict[str, Any]]:
        saving = [r for r in self.planned_recommendations if Decimal(str(r["monthly_savings_usd"])) > 0]
        return saving[:TOP_RECOMMENDATIONS]

    @property
    def no_bill(self) -> str:
        """Why the week's spend is unknown ("" where a bill is loaded): never $0 for a bill nobody loaded."""
        if self.billed:
            return ""
        bill = inputs.INPUTS["bill"]
        return f"unknown: no bill loaded yet ({bill.hint('one')})"

    @property
    def partial(self) -> bool:
        """The data ends before the week does: its figures are incomplete."""
        return self.data_through is not None and self.data_through < self.week.end(ZoneInfo(self.tz))


def open_savings(recs: list[dict[str, Any]]) -> Decimal:
    """Monthly savings of open (and accepted) recommendations: the one total (models.plans.total), each resource's plan
    counted once (primary and steps); alternatives for a resource cannot both be taken and never add up."""
    return plans.total(recs)


def _change(now: Decimal, before: Decimal) -> float | None:
    return float((now - before) / before * 100) if before else None


def _dec(value: Any) -> Decimal:
    return ZERO if value is None else Decimal(str(value))


def collect(con: duckdb.DuckDBPyConnection, week: Week, scope: Scope, tz: str) -> WeekFigures:
    """The week's figures for one scope (its teams in every number)."""
    zone = ZoneInfo(tz)
    teams = scope.team_filter
    figures = WeekFigures(week, scope, tz)
    first = week.shift(-(TREND_WEEKS - 1))
    daily = allocation_queries.report_team_spend_daily(
        con, team=teams, start=first.start(zone), end=week.end(zone), tz=tz
    )
    daily = daily.with_columns(
        pl.col("day").map_elements(lambda d: str(week_of(d)), return_dtype=pl.Utf8).alias("week")
    )
    this, before = str(week), str(week.shift(-1))
    figures.spend = _dec(daily.filter(pl.col("week") == this)["effective_cost"].sum())
    figures.previous_spend = _dec(daily.filter(pl.col("week") == before)["effective_cost"].sum())
    figures.gpu_spend = _dec(daily.filter(pl.col("week") == this)["gpu_cost"].sum())
    figures.allocated_gpu = _dec(daily.filter(pl.col("week") == this)["allocated_gpu_cost"].sum())
    figures.unallocated_gpu = _dec(daily.filter(pl.col("week") == this)["unallocated_gpu_cost"].sum())
    figures.spend_trend = _weekly(daily, "provider", "effective_cost")
    figures.providers = _providers(daily, this, before)
    totals = queries.cost_totals(con, team=teams, end=week.end(zone))
    # last_charge and first_charge are TIMESTAMPTZ columns: their max and min are datetimes
    figures.billed = not totals.is_empty()
    # without a bill, how far the GPU metrics reach (a metrics-only week says where its data ends)
    figures.data_through = cast(datetime, totals["last_charge"].max()) if figures.billed else data_span(con)[1]
    if not totals.is_empty():  # a week the data only partly covers would read as a dip: leave it out
        first_day = cast(datetime, totals["first_charge"].min()).astimezone(zone).date()
        figures.previous_complete = week.shift(-1).monday >= first_day
        figures.spend_trend = [
            r for r in figures.spend_trend if parse_week(r["week"]).monday >= first_day or r["week"] == this
        ]
    idle = _idle_hours(con, teams, first.start(zone), week.end(zone), tz)
    figures.idle_trend = [
        r for r in _weekly(idle, "team", "effective_cost") if r["week"] in {t["week"] for t in figures.spend_trend}
    ]
    this_idle = idle.filter(pl.col("week") == this)
    figures.idle_cost = _dec(this_idle["effective_cost"].sum())
    figures.idle_gpu_hours = int(this_idle["gpu_hours"].sum() or 0)
    figures.open_recommendations = _open_recommendations(con, scope)
    figures.teams = _team_lines(daily, idle, figures.open_recommendations, this, before)
    for line in figures.teams:
        line.comparable = figures.previous_complete
    if not figures.previous_complete:
        for row in figures.providers:
            row["change_pct"] = None
    figures.forecast = _forecast(con, scope, week.end(zone))
    figures.withheld = queries.withheld_counts(con, team=teams).to_dicts()
    figures.carbon, figures.carbon_sources = _carbon(con, teams, week.start(zone), week.end(zone))
    figures.stale_sources = freshness.stale_sources(con).select("source", "message").to_dicts()
    figures.onprem = [
        r
        for r in queries.onprem_comparison(con, team=teams).to_dicts()
        if r["team"] is None and teams is None or scope.allows(r["team"])
    ]
    figures.unit_costs = _unit_costs(con, teams, week.start(zone), week.end(zone))
    figures.coverage = coverage.measure(con, team=teams, start=week.start(zone), end=week.end(zone))
    figures.unknown_kinds = kind_coverage.unknown_kinds(con, team=teams, start=week.start(zone), end=week.end(zone))
    _teams_blind(con, figures, week.start(zone), week.end(zone))
    return figures


def data_span(con: duckdb.DuckDBPyConnection) -> tuple[datetime | None, datetime | None]:
    """When the warehouse's cost data starts and ends; without any, its GPU metrics' and serving counters'
    hours (an account whose first source is not its bill still has a week to report)."""
    totals = queries.cost_totals(con)
    if not totals.is_empty():  # first_charge, last_charge: TIMESTAMPTZ columns, so datetimes
        return cast(datetime, totals["first_charge"].min()), cast(datetime, totals["last_charge"].max())
    first, end = con.execute(
        "SELECT min(hour), max(hour) + INTERVAL 1 HOUR FROM "
        "(SELECT hour FROM gpu_metrics_hourly UNION ALL SELECT hour FROM serving_metrics_hourly)"
    ).fetchall()[0]
    return first, end


def _teams_blind(con: duckdb.DuckDBPyConnection, figures: WeekFigures, start: datetime, end: datetime) -> None:
    """Each team's kinds that could not look over its own GPU-hours (a team with none had nothing to see);
    the unattributed line carries the scope's, so its savings read unknown rather than $0 where kinds were blind."""
    for line in figures.teams:
        if line.team == NO_TEAM:
            line.unknown_kinds = figures.unknown_kinds
            continue
        groups = kind_coverage.unknown_kinds(con, team=line.team, start=start, end=end)
        line.unknown_kinds = [group for group in groups if group.cover.state != "empty"]


def _carbon(
    con: duckdb.DuckDBPyConnection, teams: list[str] | None, start: datetime, end: datetime
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The week's energy and emissions per team (the carbon read model's rows, months added up)."""
    from gpufinops.warehouse.queries import carbon as carbon_queries

    rows = carbon_queries.carbon_summary(con, by="team", team=teams, start=start, end=end)
    if rows.is_empty():
        return [], []
    measured = pl.col("gpu_hours") - pl.col("withheld_gpu_hours")
    per_team = (
        rows.group_by("team")
        .agg(
            pl.col("kwh").sum(),
            pl.col("kg_co2e").sum(),
            pl.col("withheld_gpu_hours").sum(),
            measured.sum().alias("measured_gpu_hours"),
        )
        .with_columns(  # a team with no measured hour has no energy, not zero (and no NaN per hour)
            [
                pl.when(pl.col("measured_gpu_hours") > 0).then(pl.col(c)).otherwise(None).alias(c)
                for c in ("kwh", "kg_co2e")
            ]
        )
        .with_columns((pl.col("kg_co2e") / pl.col("measured_gpu_hours")).alias("kg_co2e_per_gpu_hour"))
        .sort(["kg_co2e", "team"], descending=[True, False], nulls_last=True)  # ties in the team's order
    )
    sources = carbon_queries.sources(con, team=teams, start=start, end=end).head(4).to_dicts()
    return per_team.to_dicts(), sources


def _unit_costs(
    con: duckdb.DuckDBPyConnection, teams: list[str] | None, start: datetime, end: datetime
) -> list[dict[str, Any]]:
    """The week's unit costs per team, namespace and model (derived.unit_costs, the one builder)."""
    frame = unit_costs.unit_costs(con, team=teams, start=start, end=end, period=unit_costs.WHOLE)
    rows = frame.filter(pl.col("team").is_not_null()) if teams is not None else frame
    return rows.sort("gpu_cost_usd", descending=True, nulls_last=True).to_dicts()


def _weekly(frame: pl.DataFrame, by: str, value: str) -> list[dict[str, Any]]:
    if frame.is_empty():
        return []
    rolled = frame.group_by("week", by).agg(pl.col(value).sum().cast(pl.Float64).alias("usd")).sort("week", by)
    return rolled.select("week", by, "usd").to_dicts()


def _providers(daily: pl.DataFrame, this: str, before: str) -> list[dict[str, Any]]:
    rows = []
    for provider in sorted(daily["provider"].unique().to_list()):
        part = daily.filter(pl.col("provider") == provider)
        spend = _dec(part.filter(pl.col("week") == this)["effective_cost"].sum())
        previous = _dec(part.filter(pl.col("week") == before)["effective_cost"].sum())
        rows.append(
            {
                "provider": label(provider, "provider"),
                "spend": spend,
                "previous_spend": previous,
                "change_pct": _change(spend, previous),
            }
        )
    return rows


def _idle_hours(
    con: duckdb.DuckDBPyConnection, teams: list[str] | None, start: datetime, end: datetime, tz: str
) -> pl.DataFrame:
    """Idle GPU resource-hours by the idle model's own rule (threshold and minimum run)."""
    from gpufinops.models.idle import IdleParams, idle_hours

    hours = queries.gpu_resource_hours(con, team=teams, start=start, end=end)
    # dtype instances, not classes: a dict mixing both is typed dict[str, object]
    schema = {"week": pl.Utf8(), "team": pl.Utf8(), "effective_cost": pl.Decimal(38, 15), "gpu_hours": pl.Int64()}
    if hours.is_empty():
        return pl.DataFrame(schema=schema)
    idle = idle_hours(hours, IdleParams()).filter(pl.col("idle"))
    if idle.is_empty():
        return pl.DataFrame(schema=schema)
    return (
        idle.with_columns(
            pl.col("hour")
            .dt.convert_time_zone(tz)
            .dt.date()
            .map_elements(lambda d: str(week_of(d)), return_dtype=pl.Utf8)
            .alias("week"),
            pl.col("gpu_count").fill_null(1).cast(pl.Int64).alias("gpu_hours"),
        )
        .group_by("week", "team")
        .agg(pl.col("effective_cost").sum(), pl.col("gpu_hours").sum())
    )


def _open_recommendations(con: duckdb.DuckDBPyConnection, scope: Scope) -> list[dict[str, Any]]:
    """The findings still to act on (open or accepted, ``models.plans.OUTSTANDING``), through the one
    read model: a dismissed or applied finding is in no figure of the report."""
    frame = queries.recommendations(con, team=scope.team_filter)
    rows = []
    for row in frame.iter_rows(named=True):
        if not scope.allows(row["team"]) or row["status"] not in plans.OUTSTANDING:
            continue
        for key in ("current", "proposed", "evidence"):
            row[key] = json.loads(row[key]) if isinstance(row[key], str) else (row[key] or {})
        rows.append(row)
    return rows


def _team_lines(
    daily: pl.DataFrame, idle: pl.DataFrame, recs: list[dict[str, Any]], this: str, before: str
) -> list[TeamLine]:
    names = set(daily["team"].drop_nulls().to_list()) | {r["team"] for r in recs if r["team"]}
    lines = []
    for team in sorted(names):
        part = daily.filter(pl.col("team") == team)
        week_part = part.filter(pl.col("week") == this)
        lines.append(
            TeamLine(
                team=team,
                spend=_dec(week_part["effective_cost"].sum()),
                previous_spend=_dec(part.filter(pl.col("week") == before)["effective_cost"].sum()),
                gpu_spend=_dec(week_part["gpu_cost"].sum()),
                idle_cost=_dec(
                    idle.filter((pl.col("team") == team) & (pl.col("week") == this))["effective_cost"].sum()
                ),
                open_savings=open_savings([r for r in recs if r["team"] == team]),
                allocated_gpu=_dec(week_part["allocated_gpu_cost"].sum()),
                unallocated_gpu=_dec(week_part["unallocated_gpu_cost"].sum()),
            )
        )
    unallocated = daily.filter(pl.col("team").is_null())
    if not unallocated.is_empty():
        lines.append(
            TeamLine(
                NO_TEAM,
                _dec(unallocated.filter(pl.col("week") == this)["effective_cost"].sum()),
                _dec(unallocated.filter(pl.col("week") == before)["effective_cost"].sum()),
                _dec(unallocated.filter(pl.col("week") == this)["gpu_cost"].sum()),
                ZERO,
                ZERO,
            )
        )
    return sorted(lines, key=lambda line: -line.spend)


def _forecast(con: duckdb.DuckDBPyConnection, scope: Scope, as_of: datetime) -> dict[str, Any] | None:
    """The outlook of the month the week's newest data falls in (``models.outlook.month_outlook``: the
    number the budgets, the dashboard and the API quote; a complete month's forecast is its actual)."""
    try:
        from gpufinops.models.outlook import month_outlook
    except ImportError:
        return None
    found = month_outlook(con, scope.team_filter, now=as_of)
    if found is None:
        return None
    return {
        "month": f"{found.period_start:%Y-%m}",
        "actual_to_date_usd": found.actual_usd,
        "forecast_usd": found.forecast_usd,
        "lower_usd": found.lower_usd,
        "upper_usd": found.upper_usd,
        "complete": found.complete,
    }
