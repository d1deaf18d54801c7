"""The alert rules: budgets (actual and forecast), cost anomalies, idle GPUs burning money, stale data.

Each is a pure function ``(con, settings, now) -> RuleOutcome`` over the warehouse (see
models/alerts.py). The budget forecast and the anomalies are ``models.forecast``'s own (the
period-end forecast of the budget's scope, the model's expected band): the same numbers the
dashboard shows. The idle rule is the fast cousin of the ``idle_gpu`` model: it reads the hourly
rollups for the run each resource is in *now*, and prices hours the bill does not hold yet at the
resource's recent hourly rate (said so in the alert).
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

import duckdb
import polars as pl

from gpufinops.kernel.labels import team_label
from gpufinops.models import alert_stalled, forecast, outlook
from gpufinops.models.alert_records import Alert, AlertSettings, RuleOutcome
from gpufinops.models.alert_rule_enforce import enforcement_rule
from gpufinops.models.budgets import Budget, period_bounds
from gpufinops.warehouse import alerts_queries as aq

CENT = Decimal("0.01")


def usd(value: Decimal | float | None) -> str:
    if value is None:
        return "—"
    amount = Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)
    return f"-${-amount:,.2f}" if amount < 0 else f"${amount:,.2f}"


def _pct(share: float) -> str:
    return f"{share * 100:.0f} %"


def _threshold_text(threshold: float) -> str:
    return f"{Decimal(str(threshold)).normalize():f}"


def _data_day(edge: datetime) -> date:
    """The day the newest cost data falls in (an edge at midnight ends the day before)."""
    return (edge.astimezone(UTC) - timedelta(microseconds=1)).date()


# ---- budgets ------------------------------------------------------------------------------------


def budget_rule(con: duckdb.DuckDBPyConnection, settings: AlertSettings, now: datetime) -> RuleOutcome:
    """Each budget's spend in its current period (the one the newest cost data falls in) against
    each threshold; with ``forecast``, the period-end forecast too, for thresholds the spend has not
    reached yet."""
    outcome = RuleOutcome("budget", ("budget", "budget_forecast"))
    if not settings.budgets:
        outcome.notes.append("budget: no [[budgets]] configured")
        outcome.live = lambda rule, scope, period: False  # a removed budget's alerts expire, silently
        return outcome
    edge = outcome.data_edge(con, now, "budget: no cost data yet, nothing to compare with the budgets")
    if edge is None:
        return outcome
    names = aq.provider_names(con)
    current = {}
    for budget in settings.budgets:
        start, end, label = period_bounds(_data_day(edge), budget.period)
        current[budget.name] = label
        _evaluate_budget(con, budget, settings, now, edge, names, (start, end, label), outcome)
    outcome.live = lambda rule, scope, period: current.get(scope) == period
    return outcome


def _evaluate_budget(
    con,
    budget: Budget,
    settings: AlertSettings,
    now: datetime,
    edge: datetime,
    names: list[str],
    period: tuple[date, date, str],
    outcome: RuleOutcome,
) -> None:
    start, end, label = period
    scope = budget.scope
    series = outlook.scope_series(con, scope, now=now, edge=edge, names=names)
    in_period = series.filter((pl.col("day") >= start) & (pl.col("day") < end))
    spent = Decimal(str(in_period["cost"].sum())) if not in_period.is_empty() else Decimal(0)
    share = float(spent / budget.amount)
    fc = _budget_forecast(con, budget, series, start, end, edge, settings, outcome) if budget.forecast else None
    context = f"{usd(spent)} of {usd(budget.amount)} ({_pct(share)}) spent in {label}"
    if fc is not None and fc["complete"]:  # every day known: the forecast is the actual
        context += f"; forecast {usd(fc['forecast'])} (complete: every day known)"
    elif fc is not None:
        context += f"; forecast {usd(fc['forecast'])} ({usd(fc['lower'])}–{usd(fc['upper'])})"
    outcome.context[budget.name] = context
    details = {
        "budget": budget.to_dict(),
        "period_start": start.isoformat(),
        "period_end": end.isoformat(),
        "spent_usd": float(spent),
        "share": round(share, 4),
        "data_until": edge.isoformat(),
        "forecast": fc,
    }
    for threshold in budget.thresholds:
        limit = (budget.amount * Decimal(str(threshold))).quantize(CENT, rounding=ROUND_HALF_UP)
        text = _threshold_text(threshold)
        if spent >= limit:
            severity = "critical" if threshold >= 1 else ("warning" if threshold >= 0.9 else "info")
            outcome.alerts.append(
                Alert(
                    "budget",
                    budget.name,
                    label,
                    text,
                    severity,
                    title=f"Budget {budget.name}: {_pct(threshold)} reached in {label}",
                    summary=f"{usd(spent)} spent of the {usd(budget.amount)} {budget.period}ly budget "
                    f"({_pct(share)}; {scope.describe()}), past its {_pct(threshold)} threshold "
                    f"{usd(limit)}.",
                    teams=scope.teams,
                    value_usd=spent,
                    limit_usd=limit,
                    details={**details, "threshold": threshold},
                )
            )
        elif fc is not None and Decimal(str(fc["forecast"])) >= limit:
            outcome.alerts.append(
                Alert(
                    "budget_forecast",
                    budget.name,
                    label,
                    text,
                    "warning" if threshold >= 1 else "info",
                    title=f"Budget {budget.name}: forecast to pass {_pct(threshold)} in {label}",
                    summary=f"The {label} forecast is {usd(fc['forecast'])} (80 % interval {usd(fc['lower'])}–"
                    f"{usd(fc['upper'])}), past {_pct(threshold)} ({usd(limit)}) of the {usd(budget.amount)} "
                    f"budget ({scope.describe()}); {usd(spent)} spent so far.",
                    teams=scope.teams,
                    value_usd=Decimal(str(round(fc["forecast"], 2))),
                    limit_usd=limit,
                    details={**details, "threshold": threshold},
                )
            )


def _budget_forecast(
    con,
    budget: Budget,
    series: pl.DataFrame,
    start: date,
    end: date,
    edge: datetime,
    settings: AlertSettings,
    outcome: RuleOutcome,
) -> dict | None:
    """The period-end forecast of the budget's scope (``models.outlook.period_outlook``, the one every
    surface quotes: a complete period's forecast is its actual); None (with a note saying why) when the
    history is too short."""
    history_days = series.filter(pl.col("day") < edge.date())["day"].n_unique()
    if history_days < settings.forecast_min_days:
        outcome.notes.append(
            f"budget {budget.name}: forecast withheld: {history_days} day(s) of cost history "
            f"in its scope, the forecast needs {settings.forecast_min_days}"
        )
        return None
    found = outlook.period_outlook(con, budget.scope, start, end, edge=edge, series=series)
    return found.to_dict() if found is not None else None


# ---- cost anomalies -------------------------------------------------------------------------------


def anomaly_rule(con: duckdb.DuckDBPyConnection, settings: AlertSettings, now: datetime) -> RuleOutcome:
    """Days among the last ``anomaly_days`` complete days whose cost left the forecast model's band,
    per (team, provider), with the line items that moved."""
    outcome = RuleOutcome("anomaly", ("anomaly",))
    edge = outcome.data_edge(con, now, "anomaly: no cost data yet")
    if edge is None:
        return outcome
    last_day = edge.astimezone(UTC).date() - timedelta(days=1)  # the forecast drops a partial last day
    first_day = last_day - timedelta(days=settings.anomaly_days - 1)
    outcome.live = lambda rule, scope, period: period >= first_day.isoformat()
    series = aq.scope_daily_series(con, before=now, complete_until=edge).drop("cost")
    params = forecast.ForecastParams(anomaly_min_usd=settings.anomaly_min_usd)
    history = series["day"].n_unique()
    if history < params.min_season_days:
        outcome.notes.append(
            f"anomaly: withheld: {history} day(s) of cost history, the model needs "
            f"{params.min_season_days} to know what is normal"
        )
    found = forecast.cost_anomalies(con, start=first_day, end=last_day + timedelta(days=1), params=params, daily=series)
    for row in found.iter_rows(named=True):
        if row["direction"] not in settings.anomaly_directions:
            continue
        team, provider = row["team"], row["provider"]
        items = json.loads(row["top_line_items"] or "[]")
        moved = "; ".join(
            f"{i.get('resource_id') or i.get('service') or i.get('sku_id')} "
            f"{usd(i['cost_usd'])} (usually {usd(i['baseline_usd'])})"
            for i in items[:3]
        )
        word = "above" if row["direction"] == "spike" else "below"
        outcome.alerts.append(
            Alert(
                "anomaly",
                f"{team_label(team)}/{provider}",
                row["day"].isoformat(),
                row["direction"],
                "warning",
                title=f"Cost {row['direction']}: {team_label(team)} on {provider}, {row['day']:%Y-%m-%d}",
                summary=f"{usd(row['cost_usd'])} on {row['day']:%Y-%m-%d}, {word} the expected {usd(row['expected_usd'])} "
                f"(band {usd(row['lower_usd'])}–{usd(row['upper_usd'])})"
                + (f"; moved: {moved}" if moved else "")
                + ".",
                teams=(team,) if team else (),
                value_usd=Decimal(str(round(row["cost_usd"], 2))),
                limit_usd=Decimal(str(round(row["upper_usd"] if row["direction"] == "spike" else row["lower_usd"], 2))),
                details={
                    "team": team,
                    "provider": provider,
                    "day": row["day"].isoformat(),
                    "expected_usd": round(row["expected_usd"], 2),
                    "lower_usd": round(row["lower_usd"], 2),
                    "upper_usd": round(row["upper_usd"], 2),
                    "top_line_items": items,
                },
            )
        )
    return outcome


# ---- idle GPUs burning money ---------------------------------------------------------------------


def idle_burn_rule(con: duckdb.DuckDBPyConnection, settings: AlertSettings, now: datetime) -> RuleOutcome:
    """Resources idle for at least ``idle_min_hours`` right now whose idle run has cost at least
    ``idle_min_cost_usd``: billed hours at their line items' cost, hours the bill does not hold yet
    at the resource's recent hourly rate."""
    outcome = RuleOutcome("idle_burn", ("idle_burn",))
    runs = aq.idle_runs(
        con,
        idle_util_pct=settings.idle_util_pct,
        min_hours=settings.idle_min_hours,
        now=now,
        max_lag_hours=settings.idle_max_lag_hours,
    )
    threshold = f"{settings.idle_min_hours}h/{usd(settings.idle_min_cost_usd)}"
    unpriced = []
    for row in runs.iter_rows(named=True):
        billed = Decimal(str(row["billed_usd"] or 0))
        unbilled_hours = max(0, row["hours"] - (row["billed_hours"] or 0))
        rate = Decimal(str(row["rate_usd_per_hour"])) if row["rate_usd_per_hour"] is not None else None
        if unbilled_hours and rate is None:
            unpriced.append(row["resource_id"])
            continue
        cost = (billed + (rate or Decimal(0)) * unbilled_hours).quantize(CENT, rounding=ROUND_HALF_UP)
        if cost < settings.idle_min_cost_usd:
            continue
        gpus = row["gpus"] or 1
        estimated = f", {unbilled_hours} h not billed yet priced at {usd(rate)}/h" if unbilled_hours else ""
        team = row["team"]
        outcome.alerts.append(
            Alert(
                "idle_burn",
                row["resource_id"],
                row["run_start"].isoformat(),
                threshold,
                "warning",
                title=f"Idle GPUs: {row['resource_id']} ({team_label(team)}) idle for {row['hours']} h",
                summary=f"{gpus} × {row['gpu_model'] or 'GPU'} on {row['resource_id']} have been under "
                f"{settings.idle_util_pct:g} % since {row['run_start']:%Y-%m-%d %H:%M} UTC ({row['hours']} h, peak "
                f"{row['util_max']:.1f} %), costing {usd(cost)}{estimated}.",
                teams=(team,) if team else (),
                value_usd=cost,
                limit_usd=settings.idle_min_cost_usd,
                details={
                    "resource_id": row["resource_id"],
                    "team": team,
                    "provider": row["provider_name"],
                    "instance_type": row["instance_type"],
                    "gpu_model": row["gpu_model"],
                    "gpus": gpus,
                    "idle_hours": row["hours"],
                    "util_max": row["util_max"],
                    "run_start": row["run_start"].isoformat(),
                    "run_end": row["run_end"].isoformat(),
                    "billed_hours": row["billed_hours"],
                    "billed_usd": float(billed),
                    "unbilled_hours": unbilled_hours,
                    "rate_usd_per_hour": float(rate) if rate is not None else None,
                },
            )
        )
    if unpriced:
        outcome.notes.append(
            f"idle_burn: {len(unpriced)} resource(s) idle for {settings.idle_min_hours}+ h "
            f"with no GPU cost lines to price them ({', '.join(unpriced[:5])}): withheld until "
            "their bill arrives"
        )
    for row in runs.iter_rows(named=True):
        outcome.context[row["resource_id"]] = f"idle for {row['hours']} h"
    return outcome


def stale_data_rule(con: duckdb.DuckDBPyConnection, settings: AlertSettings, now: datetime) -> RuleOutcome:
    """Sources whose newest data is older than that kind of data normally is
    (``warehouse.freshness.source_freshness``, the function the Data health page reads). One alert
    per stale episode: its period is when the episode was first seen (an open alert keeps it), so a
    source that stays late is one alert, not one per ingest; it resolves when the data catches up."""
    from gpufinops.warehouse.freshness import source_freshness

    outcome = RuleOutcome("stale_data", ("stale_data",))
    fresh = source_freshness(con, now)
    if fresh.is_empty():
        outcome.notes.append("stale_data: no source has run yet")
        return outcome
    episodes = {r["scope"]: r["period"] for r in aq.alerts(con, status="open", rule="stale_data").iter_rows(named=True)}
    since = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0).isoformat()
    for row in fresh.iter_rows(named=True):
        outcome.context[row["source"]] = row["message"]
        if not row["stale"]:
            continue
        kind = row["kind"]
        outcome.alerts.append(
            Alert(
                "stale_data",
                row["source"],
                episodes.get(row["source"], since),
                f"{row['expected_lag_hours']:g}h",
                "warning" if kind in ("cost", "metrics") else "info",
                title=f"Stale {kind} data: {row['source']}",
                summary=f"{row['source']} ({row['source_type']}): {row['message']}; alerts, budgets and the dashboard "
                f"see nothing newer from it.",
                details={
                    "source": row["source"],
                    "source_type": row["source_type"],
                    "kind": kind,
                    "newest_data_at": row["newest_data_at"].isoformat() if row["newest_data_at"] else None,
                    "age_hours": row["age_hours"],
                    "expected_lag_hours": row["expected_lag_hours"],
                    "last_run_at": row["last_run_at"].isoformat() if row["last_run_at"] else None,
                    "last_status": row["last_status"],
                },
            )
        )
    return outcome


RULE_FUNCTIONS = {
    "budget": budget_rule,
    "budget_enforcement": enforcement_rule,
    "anomaly": anomaly_rule,
    "idle_burn": idle_burn_rule,
    "stale_data": stale_data_rule,
    "stalled_job": alert_stalled.stalled_job_rule,
}
