"""Simple baselines each model is scored beside in ``gpufinops evaluate`` (on the same warehouse, the same truth),
chosen by the kind's spec: its throughput ``predictor``, else its ``export`` action (``BY_ACTION``):

* ``release_or_schedule`` (``idle_gpu``) — *p95 < 5 % over the whole window*: a resource whose hourly p95 utilisation has a
  95th percentile under 5 % is idle, and all of its cost is the saving.
* ``resize`` without a predictor (``gpu_count``) — *any GPU with p95 < 10 % is spare* (no memory check), priced per GPU.
* a ``predictor`` (``gpu_type`` / ``quantization``) — the model's own rules with each throughput predictor forced:
  the spec-ratio scaling, "no change", and the fleet regression, each for every step (quantization's
  ``quantization_predictor`` forced to it too); :mod:`jobs.eval_choice` picks quantization's from these.
* ``spot_share`` (``spot_mix``) — *every on-demand, non-notebook resource to spot* at the best spot price evidence
  (no rules, no rework).
* ``commit`` (``commitment``) — *commit every machine billed on-demand in ≥ 95 % of the last 30 days' hours* at the
  catalogue's 1-year price.

A baseline finding is a :class:`Finding` (what :func:`jobs.evaluate.score` reads of a recommendation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

import duckdb
import polars as pl

from gpufinops.models import features, gpu_type, quantization, registry, spot_mix
from gpufinops.models.recommendation import money, provider_code
from gpufinops.warehouse import queries

DAYS_PER_MONTH = Decimal("30.4375")


@dataclass
class Finding:
    kind: str
    resource_id: str
    monthly_savings_usd: Decimal
    proposed: dict = field(default_factory=dict)
    evidence: dict = field(default_factory=dict)


def _monthly(cost, hours: int) -> Decimal:
    return Decimal(str(cost)) / (Decimal(hours) / 24) * DAYS_PER_MONTH


def idle_p95(con: duckdb.DuckDBPyConnection, kind: str) -> list[Finding]:
    hours = queries.gpu_resource_hours(con)
    per = (
        hours.filter(pl.col("util_p95").is_not_null())
        .group_by("resource_id")
        .agg(pl.col("util_p95").quantile(0.95).alias("p95"))
    )
    cost = hours.group_by("resource_id").agg(
        pl.col("effective_cost").sum().alias("cost"),
        ((pl.col("hour").max() - pl.col("hour").min()).dt.total_hours() + 1).alias("hours"),
    )
    rows = per.filter(pl.col("p95") < 5).join(cost, on="resource_id")
    return [Finding(kind, r["resource_id"], money(_monthly(r["cost"], r["hours"]))) for r in rows.iter_rows(named=True)]


def gpu_count_low_gpus(con: duckdb.DuckDBPyConnection, kind: str) -> list[Finding]:
    s = features.RightsizingSettings()
    res = features.resources(con, s)
    start = features.window_start(con, s.lookback_days)
    if res.is_empty() or start is None:
        return []
    spare = (
        queries.rightsizing_gpus(con, start)
        .group_by("resource_id")
        .agg((pl.col("util_p95") < s.spare_gpu_util_pct).sum().alias("spare"), pl.len().alias("gpus"))
    )
    out = []
    for r in (
        res.join(spare, on="resource_id")
        .filter((pl.col("spare") > 0) & (pl.col("spare") < pl.col("gpus")) & (pl.col("gpu_count") > 1))
        .iter_rows(named=True)
    ):
        spare_monthly = features.monthly(r["cost_usd"], r["window_days"]) * r["spare"] / r["gpu_count"]
        out.append(Finding(kind, r["resource_id"], money(spare_monthly)))
    return out


def with_predictors(con: duckdb.DuckDBPyConnection) -> dict[str, list]:
    """gpu_type's and quantization's findings under each throughput predictor, forced."""
    s = features.RightsizingSettings()
    res, spec = features.resources(con, s), features.specs(con)
    if res.is_empty():
        return {}
    model = gpu_type.fit(gpu_type.observations(res, spec, s.idle_util_pct))
    offers = features.catalogue(con)
    out = {}
    for predictor in gpu_type.PREDICTORS:
        if predictor == gpu_type.REGRESSION and model.fitted is None:
            continue
        forced = dataclasses.replace(model, predictor=predictor)
        quantized = dataclasses.replace(s, quantization_predictor=predictor)
        out[predictor] = (
            gpu_type.recommend(res, offers, spec, forced, s)[0]
            + quantization.recommend(res, offers, spec, forced, quantized)[0]
        )
    return out


def spot_everything(con: duckdb.DuckDBPyConnection, kind: str) -> list[Finding]:
    s = spot_mix.SpotMixSettings()
    last = con.execute(f'SELECT max("ChargePeriodStart") FROM cost_line_items c WHERE {queries.GPU_USAGE}').fetchall()[
        0
    ][0]
    if last is None:
        return []
    start = last - timedelta(days=s.spot_lookback_days)
    usage = queries.spot_mix_usage(con, start=start)
    prices = spot_mix.spot_prices(con, start)
    out = []
    for r in usage.iter_rows(named=True):
        provider = provider_code(r["provider_name"])
        price = prices.get((provider, r["region"], r["instance_type"]))
        if price is None or features.tag(r["tags"], "workload") in spot_mix.INTERACTIVE:
            continue
        hours = (r["last_hour"] - r["first_hour"]).total_seconds() / 3600 + 1
        out.append(
            Finding(
                kind,
                r["resource_id"],
                money(_monthly(r["cost_usd"], int(hours)) * Decimal(str(1 - price["ratio"]))),
            )
        )
    return out


def commit_always_on(con: duckdb.DuckDBPyConnection, kind: str) -> list[Finding]:
    last = con.execute(f'SELECT max("ChargePeriodStart") FROM cost_line_items c WHERE {queries.GPU_USAGE}').fetchall()[
        0
    ][0]
    if last is None:
        return []
    start = last - timedelta(days=30)
    hours = queries.gpu_resource_hours(con, start=start).filter(pl.col("pricing_category") == "Standard")
    window = hours["hour"].n_unique()
    catalogue = {
        (r["provider"], r["region"], r["instance_type"]): r
        for r in queries.commitment_prices(con).iter_rows(named=True)
    }
    groups: dict[tuple, list[dict]] = {}
    for r in (
        hours.group_by("resource_id")
        .agg(
            pl.len().alias("n"),
            pl.col("effective_cost").mean().alias("rate"),
            *[pl.col(c).first() for c in ("provider", "region", "instance_type", "team")],
        )
        .iter_rows(named=True)
    ):
        price = catalogue.get((provider_code(r["provider"]), r["region"], r["instance_type"]))
        if r["n"] >= 0.95 * window and price and price["commit_1y_usd"] and price["on_demand_usd"]:
            groups.setdefault((r["provider"], r["region"], r["instance_type"], r["team"]), []).append(
                {**r, "ratio": price["commit_1y_usd"] / price["on_demand_usd"]}
            )
    return [
        Finding(
            kind,
            min(m["resource_id"] for m in members),
            money(sum(Decimal(str(float(m["rate"]) * (1 - m["ratio"]) * 730.5)) for m in members)),
        )
        for members in groups.values()
    ]


# The simple rule each action is scored beside, by what a scored kind's spec says its finding does (its `export`
# action), never by its name: a kind added with one of these actions is scored beside that action's baseline.
BY_ACTION: dict[str, tuple[str, Callable[[duckdb.DuckDBPyConnection, str], list[Finding]]]] = {
    "release_or_schedule": ("p95 < 5 % over the window", idle_p95),
    "resize": ("any GPU p95 < 10 % is spare", gpu_count_low_gpus),
    "spot_share": ("every on-demand non-notebook to spot", spot_everything),
    "commit": ("commit every machine on ≥ 95 % of hours", commit_always_on),
}


def all_baselines(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, list]]:
    """kind -> baseline name -> findings: each scored kind without a throughput predictor beside its action's
    baseline (``BY_ACTION``), then each kind with one forced to every throughput predictor, in run order."""
    scored = [s for s in registry.MODELS if isinstance(s.truth, registry.Scored)]
    out = {}
    for spec in scored:
        if spec.predictor is None and spec.export in BY_ACTION:
            name, baseline = BY_ACTION[spec.export]
            out[spec.kind] = {name: baseline(con, spec.kind)}
    predictors = with_predictors(con)
    for kind in registry.predictor_kinds():
        out[kind] = {f"predictor {p}": [r for r in recs if r.kind == kind] for p, recs in predictors.items()}
    return out
