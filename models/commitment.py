"""commitment: Savings Plans / CUD coverage for the steady GPU baseline, with break-even utilisation.

Per (provider, region, instance type, team), the number of on-demand machines that are billed *and
busy* in each hour of the lookback (an hour whose GPUs all stay under ``commit_idle_util_pct`` is
idle_gpu's finding, not a baseline; where utilisation is not reported, as on MIG instances, their engine
activity decides; an hour without either counts as used) gives an hourly usage
series; its low percentile (default p10, rounded down to whole machines) is the baseline a 1-year
commitment covers. Workloads that spot_mix moves to spot are left out (spot beats a commitment).

Prices, never invented: the commitment's $/h is the catalogue's (``price_history`` commit_1y /
commit_3y, e.g. the GCP CUD prices loaded by ``gcp_price_history`` / ``gcp_catalog``, Azure's Reservations by
``azure_prices``, whose savings-plan rates, savings_plan_1y / _3y, the evidence prices too); where the
catalogue has none, the rate the fleet's own commitments on the same machine type and region pay
against list (``cost_line_items`` PricingCategory = 'Committed', e.g. an AWS Reserved Instance or
Savings Plan). With neither, the group is withheld as unpriced. The saving over the lookback is
``sum over hours of min(usage, baseline) x on-demand rate - baseline x hours x commitment rate``
(hours the commitment sits unused cost it), scaled to a month; break-even utilisation is
commitment rate / on-demand rate, the share of hours the covered capacity must run to pay off.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import duckdb
import numpy as np
import polars as pl

from gpufinops.kernel import providers
from gpufinops.kernel.labels import team_label
from gpufinops.kernel.ranges import PERCENT
from gpufinops.models import features, recommendation, run_reads, spot_mix
from gpufinops.models.features import setting
from gpufinops.models.frames import as_datetime, as_float, provider_codes
from gpufinops.models.recommendation import Findings, Recommendation, Withheld, money, provider_code, stable_id
from gpufinops.warehouse import gpu_charges, queries

HOURS_PER_MONTH = 730.5
GROUP = ["provider", "region", "instance_type", "team"]
# what a group's assessment reads of its resource-hours, and what picks the busy on-demand ones
USAGE_COLUMNS = [
    *GROUP,
    "hour",
    "resource_id",
    "effective_cost",
    "gpu_model",
    "gpu_count",
    "pricing_category",
    "util_max",
    "sm_active_max",
]


@dataclass(frozen=True)
class CommitmentSettings:
    """The ``[models]`` keys this model reads (prefixed ``commit_``)."""

    commit_lookback_days: int = setting(30, doc="the window the baseline is read from, days")
    commit_min_days: float = setting(14.0, doc="less history: withheld (a baseline needs weeks)")
    commit_baseline_percentile: float = setting(10.0, PERCENT, "the usage percentile the commitment covers")
    commit_idle_util_pct: float = setting(5.0, PERCENT, "hours below this utilisation are not committed")
    commit_min_monthly_savings_usd: float = setting(25.0, doc="a commitment must save at least this, USD a month")

    @classmethod
    def from_config(cls, section: dict[str, Any] | None) -> CommitmentSettings:
        values = features.parse_settings(cls, section)
        if values.get("commit_baseline_percentile", 10.0) > 100:
            raise ValueError("[models] commit_baseline_percentile must be between 0 and 100")
        return cls(**values)


def baseline(usage: np.ndarray, percentile: float) -> int:
    """Whole machines busy in at least (100 - percentile) % of the hours."""
    if len(usage) == 0:
        return 0
    return int(math.floor(float(np.percentile(usage, percentile, method="lower")) + 1e-9))


def savings_over_window(usage: np.ndarray, covered: int, on_demand_rate: float, commit_rate: float) -> float:
    """On-demand spend the commitment replaces minus what the commitment costs, over the window."""
    return float(np.minimum(usage, covered).sum()) * on_demand_rate - covered * len(usage) * commit_rate


def recommend(
    con: duckdb.DuckDBPyConnection, settings: dict | CommitmentSettings | None = None, now: datetime | None = None
) -> tuple[list[Recommendation], list[Withheld]]:
    """(recommendations, withheld) for every group with a steady on-demand baseline."""
    return recommendation.from_warehouse(
        con, settings, CommitmentSettings, load, lambda inputs, s: findings(inputs, s, now)
    )


@dataclass(frozen=True)
class CommitmentInputs:
    """What commitment reads: the busy on-demand cloud resource-hours over the lookback (without what
    spot_mix moves to spot), the catalogue's commitment prices and the fleet's own commitment rates."""

    hours: pl.DataFrame
    catalogue: pl.DataFrame
    fleet: pl.DataFrame


def load(con: duckdb.DuckDBPyConnection, settings: CommitmentSettings) -> CommitmentInputs:
    hours = _usage_hours(con, settings)
    if hours.is_empty():
        return CommitmentInputs(hours, pl.DataFrame(), pl.DataFrame())
    return CommitmentInputs(
        hours,
        queries.commitment_prices(con),
        queries.fleet_commitment_ratios(con, start=as_datetime(hours["hour"].min())),
    )


def findings(inputs: CommitmentInputs, settings: CommitmentSettings, now: datetime | None = None) -> Findings:
    """The recommend step: each group's baseline, its price and saving; no connection."""
    hours = inputs.hours
    if hours.is_empty():
        return Findings()
    first, last = as_datetime(hours["hour"].min()), as_datetime(hours["hour"].max())
    grid = pl.DataFrame({"hour": pl.datetime_range(first, last, "1h", eager=True, time_zone="UTC")})
    catalogue = {(r["provider"], r["region"], r["instance_type"]): r for r in inputs.catalogue.iter_rows(named=True)}
    fleet = {
        (provider_code(r["provider_name"]), r["region"], r["instance_type"]): r
        for r in inputs.fleet.iter_rows(named=True)
    }
    recs, withheld = [], []
    for key, part in hours.group_by(GROUP, maintain_order=True):
        group = dict(zip(GROUP, key))
        per_hour = part.group_by("hour").agg(pl.len().alias("machines"))
        usage = grid.join(per_hour, on="hour", how="left")["machines"].fill_null(0).to_numpy()
        rec, reason = _assess(group, part, usage, catalogue, fleet, settings, now)
        if rec is not None:
            recs.append(rec)
        elif reason is not None:
            withheld.append(_withheld(group, reason, len(usage) / 24, settings))
    return Findings(sorted(recs, key=lambda r: (-r.monthly_savings_usd, r.id)), withheld)


def _withheld(group: dict, reason: str, window_days: float, s: CommitmentSettings) -> Withheld:
    """A short history is fixed by time alone: its hint says how many more days (not a source to add)."""
    if window_days >= s.commit_min_days:
        return Withheld.from_detail("commitment", group, reason, resource_id=_group_id(group))
    more = math.ceil(s.commit_min_days - window_days - 1e-9)
    w = Withheld.of("commitment", group, "short_history", reason, resource_id=_group_id(group))
    return dataclasses.replace(w, source_hint=f"{more} more day{'s' if more != 1 else ''} of history")


def _usage_hours(con: duckdb.DuckDBPyConnection, s: CommitmentSettings) -> pl.DataFrame:
    """Busy on-demand cloud resource-hours over the lookback, without the workloads spot_mix moves
    (spot_mix at its default settings, as before the registry). In a run both reads are the run's own
    (models/run_reads.py): the resource-hours idle_gpu read, and the inputs spot_mix read."""
    start = gpu_charges.window_start(con, s.commit_lookback_days)
    if start is None:
        return pl.DataFrame()
    rows = run_reads.resource_hours(con, start=start)
    if rows.is_empty():
        return rows
    to_spot = {r.resource_id for r in spot_mix.recommend(con)[0]}
    # only the columns the commitment reads: the run's frame has every column of the resource-hours, and
    # the filter and the per-group split below copy what they keep (at 10,000 GPUs about 1 GB more).
    rows = rows.select(USAGE_COLUMNS).with_columns(provider_codes(rows, "provider"))
    return rows.filter(
        (pl.col("pricing_category") == "Standard")
        & pl.col("provider").is_in(list(providers.cloud_codes()))
        & ~pl.col("resource_id").is_in(list(to_spot))
        & (_busy_pct().is_null() | (_busy_pct() >= s.commit_idle_util_pct))
    )


def _busy_pct() -> pl.Expr:
    """An hour's busiest utilisation in percent; where GPU utilisation is not reported (a MIG GPU's
    instances export engine activity, not DCGM_FI_DEV_GPU_UTIL), its busiest GPU or instance's mean SM /
    graphics-engine activity (0–1) in percent, so an idle MIG GPU is not taken for a steady one (and one
    busy slice beside empty ones is busy, as one busy GPU is). Null: not measured."""
    return pl.coalesce(pl.col("util_max"), pl.col("sm_active_max") * 100.0)


def _group_id(group: dict) -> str:
    """The commitment's scope; the recommendation's resource_id is the group's first resource (sorted). A group
    of no team reads as the label table's team of none, never ``None``."""
    return f"commitment/{group['provider']}/{group['region']}/{group['instance_type']}/{team_label(group['team'])}"


def _commit_price(group: dict, on_demand_rate: float, catalogue: dict, fleet: dict) -> dict | None:
    key = (group["provider"], group["region"], group["instance_type"])
    cat = catalogue.get(key)
    if cat and cat["commit_1y_usd"] and cat["on_demand_usd"]:
        ratio_1y = cat["commit_1y_usd"] / cat["on_demand_usd"]
        ratio_3y = cat["commit_3y_usd"] / cat["on_demand_usd"] if cat["commit_3y_usd"] else None
        plans = {term: cat.get(f"savings_plan_{term}_usd") for term in ("1y", "3y")}
        return {
            "ratio_1y": ratio_1y,
            "ratio_3y": ratio_3y,
            "savings_plan_ratios": {t: usd / cat["on_demand_usd"] for t, usd in plans.items() if usd},
            "source": f"catalogue price_history ({cat['source']})",
            "catalogue": True,
        }
    seen = fleet.get(key)
    if seen and 0 < seen["commit_ratio"] < 1:
        return {
            "ratio_1y": seen["commit_ratio"],
            "ratio_3y": None,
            "catalogue": False,
            "source": f"the fleet's own {seen['commitment_type'] or 'commitment'} on this type and region "
            f"({seen['hours']} h, effective / list)",
        }
    return None


def _assess(
    group: dict,
    part: pl.DataFrame,
    usage: np.ndarray,
    catalogue: dict,
    fleet: dict,
    s: CommitmentSettings,
    now: datetime | None,
) -> tuple[Recommendation | None, str | None]:
    covered = baseline(usage, s.commit_baseline_percentile)
    if covered < 1:
        return None, None  # no steady baseline: nothing to commit to
    window_days = len(usage) / 24
    if window_days < s.commit_min_days:
        return None, (
            f"only {window_days:.1f} days of usage (< {s.commit_min_days:g}): too short for a 1-year commitment; "
            f"{math.ceil(s.commit_min_days - window_days - 1e-9)} more days of history"
        )
    on_demand_rate = as_float(part["effective_cost"].cast(pl.Float64).mean())
    price = _commit_price(group, on_demand_rate, catalogue, fleet)
    if price is None:
        return None, (
            f"unpriced: no commitment price for {group['instance_type']} in {group['region']} "
            "(no catalogue commit_1y/commit_3y in price_history and no commitment of the fleet on it)"
        )
    commit_rate = on_demand_rate * price["ratio_1y"]
    scale = HOURS_PER_MONTH / len(usage)
    monthly_savings = money(savings_over_window(usage, covered, on_demand_rate, commit_rate) * scale)
    if monthly_savings < Decimal(str(s.commit_min_monthly_savings_usd)):
        return None, None
    share_covered = float((usage >= covered).mean())
    confidence = (
        0.9 * min(1.0, window_days / s.commit_lookback_days) * share_covered * (1.0 if price["catalogue"] else 0.85)
    )
    gpu_model, gpu_count = part["gpu_model"].drop_nulls().first(), part["gpu_count"].max()
    busy_hours = part.group_by("resource_id").agg(pl.len().alias("n"))
    steady = sorted(
        busy_hours.filter(pl.col("n") >= len(usage) * (1 - s.commit_baseline_percentile / 100))["resource_id"].to_list()
    )  # busy in (almost) every hour: what the commitment covers
    monthly_cost = money(covered * on_demand_rate * HOURS_PER_MONTH)
    current = {
        "instance_type": group["instance_type"],
        "gpu_model": gpu_model,
        "gpu_count": gpu_count,
        "machines": covered,
        "pricing": "on_demand",
        "monthly_cost_usd": monthly_cost,
    }
    proposed = {
        **current,
        "pricing": "commit_1y",
        "action": f"commit to {covered} machine(s) for 1 year",
        "commit_usd_per_hour": round(commit_rate * covered, 6),
        "monthly_cost_usd": monthly_cost - monthly_savings,
    }
    evidence = {
        "window_days": round(window_days, 2),
        "hours": len(usage),
        "baseline_percentile": s.commit_baseline_percentile,
        "baseline_machines": covered,
        "usage_p50_machines": float(np.percentile(usage, 50)),
        "usage_max_machines": int(usage.max()),
        "hours_at_or_above_baseline": round(share_covered, 4),
        "group": _group_id(group),
        "resources": sorted(part["resource_id"].unique().to_list()),
        "steady_resources": steady,
        "on_demand_usd_per_hour": round(on_demand_rate, 6),
        "commit_1y_usd_per_hour": round(commit_rate, 6),
        "break_even_utilisation": round(price["ratio_1y"], 4),
        "commitment_price_source": price["source"],
    }
    if price["ratio_3y"]:
        rate_3y = on_demand_rate * price["ratio_3y"]
        evidence["commit_3y_usd_per_hour"] = round(rate_3y, 6)
        evidence["monthly_savings_3y_usd"] = money(savings_over_window(usage, covered, on_demand_rate, rate_3y) * scale)
        evidence["break_even_utilisation_3y"] = round(price["ratio_3y"], 4)
    for term, ratio in price.get("savings_plan_ratios", {}).items():  # the same baseline under a savings plan
        rate = on_demand_rate * ratio
        evidence[f"savings_plan_{term}_usd_per_hour"] = round(rate, 6)
        evidence[f"monthly_savings_savings_plan_{term}_usd"] = money(
            savings_over_window(usage, covered, on_demand_rate, rate) * scale
        )
    risk = (
        f"A 1-year commitment is paid every hour whether used or not: it pays off while the covered "
        f"{covered} machine(s) run at least {price['ratio_1y']:.0%} of the time. Resolve rightsizing "
        "findings on these machines first: a commitment fixes the machine type for its term."
    )
    rec = Recommendation(
        id=stable_id("commitment", group["provider"], group["region"], group["instance_type"], group["team"]),
        kind="commitment",
        team=group["team"],
        provider=group["provider"],
        resource_id=(steady or evidence["resources"])[0],
        workload=None,
        current=current,
        proposed=proposed,
        monthly_savings_usd=monthly_savings,
        confidence=round(confidence, 3),
        risk=risk,
        evidence=evidence,
    )
    if now is not None:
        rec.created_at = now
    return rec, None
