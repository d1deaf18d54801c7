"""Shared inputs of the rightsizing models (gpu_count, gpu_type, quantization).

The heavy part (per-hour rollups, quantiles over weeks of hourly rows) runs in DuckDB
(``warehouse.queries.rightsizing_*``); this module turns those small per-resource frames into what
the models reason about: the lookback window, evidence quality, tags (workload, precision), the
catalogue of what is offered in each region, and the ``[models]`` settings.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

import duckdb
import polars as pl

from gpufinops.kernel import ranges
from gpufinops.kernel.options import option
from gpufinops.models import frames, run_reads
from gpufinops.models.recommendation import Recommendation, money, stable_id
from gpufinops.warehouse import gpu_charges, queries

T = TypeVar("T")

DAYS_PER_MONTH = Decimal("30.4375")


def setting(default: Any, range: ranges.Range = ranges.NON_NEGATIVE, doc: str = "") -> Any:
    """A numeric ``[models]`` setting: ``kernel.options.option`` with the range its values must fall in."""
    return option(default, doc, range=range)


@dataclass(frozen=True)
class ModelSettings:
    """The ``[models]`` section parsed once (at config load): each model's settings instance, by its class."""

    by_class: tuple[tuple[type, Any], ...] = ()

    def of(self, cls: type[T]) -> T:
        """The settings of one model (its defaults when the section set none of its keys)."""
        for klass, settings in self.by_class:
            if klass is cls:
                return settings
        return cls.from_config(None)  # type: ignore[attr-defined]  # every settings class has it


def choice(*choices: str) -> Any:
    """A ``check``: one of ``choices`` (any case)."""

    def check(value: Any, key: str) -> str:
        if not isinstance(value, str) or value.lower() not in choices:
            raise ValueError(f"{key} must be one of {', '.join(choices)} (got {value!r})")
        return value.lower()

    return check


@dataclass(frozen=True)
class RightsizingSettings:
    """The ``[models]`` config section (every key optional; defaults follow AWS Compute Optimizer)."""

    lookback_days: int = option(14, "the window the percentiles are taken over, days", range=ranges.at_least(1))
    min_days: float = option(7.0, "fewer measured days than this: withheld")
    min_coverage: float = option(0.6, "measured / billed hours below this: withheld", range=ranges.SHARE)
    idle_util_pct: float = option(5.0, "p95 below this is idle_gpu's finding, not a resize", range=ranges.PERCENT)
    spare_gpu_util_pct: float = option(
        10.0, "gpu_count: a GPU whose p95 stays under this is spare …", range=ranges.PERCENT
    )
    spare_gpu_mem_fraction: float = option(0.10, "… and holds less than this share of its memory", range=ranges.SHARE)
    memory_headroom: float = option(1.2, "peak memory × this must fit the target GPU", range=ranges.at_least(1.0))
    max_target_util_pct: float = option(60.0, "predicted p95 on the target must stay under this", range=ranges.PERCENT)
    underused_util_pct: float = option(
        40.0, "p95 under this, no finding: withheld, naming each refused target", range=ranges.PERCENT
    )
    min_savings_fraction: float = option(0.25, "a move must cut the cost by at least this share", range=ranges.SHARE)
    min_monthly_savings_usd: float = option(25.0, "a move must save at least this, USD a month")
    quantization_precisions: tuple[str, ...] = option(("fp16",), 'the precisions proposed (add "int8"/"fp8")')
    inference_workloads: tuple[str, ...] = option(
        ("online_inference", "batch_inference", "inference", "serving"), "the workload tags that serve inference"
    )
    # "selected" (gpu_type's choice) or one of gpu_type.PREDICTORS; the default is the one whose findings
    # scored best (models.quantization.PREDICTOR)
    quantization_predictor: str = option(
        "no_change_baseline",
        "the throughput predictor that prices quantization's steps",
        check=choice("selected", "fleet_regression", "spec_ratio_baseline", "no_change_baseline"),
    )

    @classmethod
    def from_config(cls, section: dict[str, Any] | None) -> RightsizingSettings:
        """Validated settings from the ``[models]`` section; a bad value of one of these keys is a clear error."""
        return cls(**parse_settings(cls, section))


def parse_settings(cls: Any, section: dict[str, Any] | None) -> dict[str, Any]:
    """The values of a settings dataclass's own keys found in the ``[models]`` section, checked by their
    declarations (``kernel.options.option``): a ``check`` where declared, numbers within their range
    (else non-negative), lists lists of strings (lower-cased). Keys of other models are theirs."""
    declared = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, value in (section or {}).items():
        if key not in declared:
            continue
        default, metadata = getattr(cls, key), declared[key].metadata
        if metadata.get("check") is not None:
            values[key] = metadata["check"](value, f"[models] {key}")
        elif isinstance(default, tuple):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"[models] {key} must be a list of strings (got {value!r})")
            values[key] = tuple(v.lower() for v in value)
        elif problem := ranges.declared(metadata).problem(value):
            raise ValueError(f"[models] {key} {problem}")
        else:
            values[key] = type(default)(value)
    return values


def settings_of(settings: RightsizingSettings | dict | None) -> RightsizingSettings:
    if isinstance(settings, RightsizingSettings):
        return settings
    return RightsizingSettings.from_config(settings)


def window_start(con: duckdb.DuckDBPyConnection, lookback_days: int) -> datetime | None:
    """The lookback ends at the newest GPU usage hour in the warehouse (not the clock: a replayed or
    delayed export is judged on its own last weeks)."""
    return gpu_charges.window_start(con, lookback_days)


def tag(tags_json: str | None, key: str) -> str | None:
    """A tag's value whether the export wrote it as ``key``, ``user_key`` (CUR 2.0) or ``user:key``."""
    if not tags_json:
        return None
    try:
        tags = json.loads(tags_json)
    except ValueError:
        return None
    if not isinstance(tags, dict):
        return None
    for name in (key, f"user_{key}", f"user:{key}", f"k8s_label_{key}"):
        if tags.get(name) not in (None, ""):
            return str(tags[name]).lower()
    return None


def resources(con: duckdb.DuckDBPyConnection, settings: RightsizingSettings) -> pl.DataFrame:
    """Per-resource frame over the lookback, with window days, coverage, tags and provider code.
    gpu_count, gpu_type and quantization read the same frame: read once per run (models/run_reads.py)."""
    start = window_start(con, settings.lookback_days)
    if start is None:
        return pl.DataFrame()
    return run_reads.shared(con, "rightsizing_resources", start, lambda: _resources(con, start))


def _resources(con: duckdb.DuckDBPyConnection, start: datetime) -> pl.DataFrame:
    frame = queries.rightsizing_resources(con, start)
    return frame if frame.is_empty() else with_peaks(enrich(frame), daily_peaks(con, start))


def enrich(frame: pl.DataFrame) -> pl.DataFrame:
    """Adds window_days, metric coverage, workload/precision tags and the provider code."""
    from gpufinops.models.recommendation import provider_code

    return frame.with_columns(
        ((pl.col("last_hour") - pl.col("first_hour")).dt.total_hours() + 1).truediv(24).alias("window_days"),
        (pl.col("measured_hours") / pl.col("billed_hours")).alias("coverage"),
        pl.col("tags").map_elements(lambda t: tag(t, "workload"), return_dtype=pl.Utf8).alias("workload"),
        pl.col("tags").map_elements(lambda t: tag(t, "precision"), return_dtype=pl.Utf8).alias("precision"),
        pl.col("provider").map_elements(provider_code, return_dtype=pl.Utf8).alias("provider_code"),
    )


RECENT_DAYS = 2  # the days a ramp-up is read from, and how recent a resource's last bill must be


def daily_peaks(con: duckdb.DuckDBPyConnection, start: datetime) -> pl.DataFrame:
    """Per resource and day since ``start``: the busiest hour's p95 of its busiest GPU (a short daily peak
    the p95 over all hours can miss: a 1-hour peak is 4 % of the hours)."""
    return queries.fragments.frame(
        con,
        "SELECT resource_id, date_trunc('day', hour) AS day, max(util_p95) AS peak FROM gpu_metrics_hourly "
        "WHERE resource_id IS NOT NULL AND hour >= ? AND util_p95 IS NOT NULL GROUP BY 1, 2",
        [start],
    )


def with_peaks(res: pl.DataFrame, peaks: pl.DataFrame) -> pl.DataFrame:
    """Adds ``util_peak_daily`` (the median day's peak hour), ``util_recent_peak`` (the peak of the last
    :data:`RECENT_DAYS` measured days) and ``active`` (billed within :data:`RECENT_DAYS` of the fleet's
    newest hour: a resource terminated mid-window saves nothing more)."""
    newest = res["last_hour"].max()
    active = pl.col("last_hour") >= pl.lit(newest) - pl.duration(days=RECENT_DAYS)
    if peaks.is_empty():
        return res.with_columns(
            pl.lit(None, pl.Float64).alias("util_peak_daily"),
            pl.lit(None, pl.Float64).alias("util_recent_peak"),
            active.alias("active"),
        )
    per = (
        peaks.sort("day")
        .group_by("resource_id")
        .agg(
            pl.col("peak").median().alias("util_peak_daily"),
            pl.col("peak").tail(RECENT_DAYS).max().alias("util_recent_peak"),
        )
    )
    return res.join(per, on="resource_id", how="left").with_columns(active.alias("active"))


def sizing_util(row: dict) -> float:
    """The utilisation a resize must carry: the window's p95, or the median day's peak hour when higher."""
    return max(row["util_p95"], row.get("util_peak_daily") or 0.0)


def ramping(row: dict) -> str | None:
    """Why a resource's recent days say more than its window (a ramp-up after a deploy), or None."""
    recent, p95 = row.get("util_recent_peak"), row["util_p95"]
    if recent is not None and p95 and recent > max(1.25 * sizing_util(row), sizing_util(row) + 10):
        return (
            f"utilisation is ramping up: the last {RECENT_DAYS} days peak at {recent:.0f} % against "
            f"{sizing_util(row):.0f} % over the window; wait until the lookback holds the new level"
        )
    return None


def evidence_problem(row: dict, settings: RightsizingSettings) -> str | None:
    """Why a resource's evidence is too thin to act on, or None when it is enough."""
    measured_days = (row["measured_hours"] or 0) / 24
    if measured_days < settings.min_days:
        return f"only {measured_days:.1f} measured days (need {settings.min_days:g})"
    if (row["coverage"] or 0) < settings.min_coverage:
        return f"metrics cover {row['coverage']:.0%} of billed hours (need {settings.min_coverage:.0%})"
    return None


def thin(kind: str, row: dict, problem: str, settings: RightsizingSettings):
    """The withheld record of :func:`evidence_problem`'s ``problem``: a resource billed for fewer days than
    ``min_days`` needs more days of history (how many), one billed longer needs its metrics."""
    import dataclasses

    from gpufinops.models.recommendation import Withheld

    billed_days = (row.get("billed_hours") or 0) / 24
    if billed_days >= settings.min_days or not problem.startswith("only"):
        return Withheld.from_detail(kind, row, problem)
    more = math.ceil(settings.min_days - billed_days - 1e-9)
    w = Withheld.of(kind, row, "short_history", f"{problem}; billed for {billed_days:.1f} days so far")
    return dataclasses.replace(w, source_hint=f"{more} more day{'s' if more != 1 else ''} of history")


def confidence(row: dict, settings: RightsizingSettings, base: float) -> float:
    """Base confidence scaled by how much of the lookback the metrics cover."""
    days = min(1.0, (row["measured_hours"] or 0) / 24 / settings.lookback_days)
    return round(base * min(1.0, row["coverage"] or 0) * days, 3)


def finding(
    kind: str,
    row: dict,
    current: dict,
    proposed: dict,
    savings: Decimal,
    *,
    confidence: float,
    risk: str,
    evidence: dict,
) -> Recommendation:
    """A rightsizing model's finding on one resource row; its id from the kind, the provider and the resource."""
    return Recommendation(
        id=stable_id(kind, row["provider"], row["resource_id"]),
        kind=kind,
        team=row["team"],
        provider=row["provider_code"],
        resource_id=row["resource_id"],
        workload=row["workload"],
        current=current,
        proposed=proposed,
        monthly_savings_usd=savings,
        confidence=confidence,
        risk=risk,
        evidence=evidence,
    )


def monthly(cost_usd: Decimal | float, window_days: float) -> Decimal:
    """A window's cost as a 30.4375-day month."""
    return Decimal(str(cost_usd)) / Decimal(str(window_days)) * DAYS_PER_MONTH


def pricing(category: str | None) -> str:
    return {"Dynamic": "spot", "Committed": "committed", "Standard": "on_demand"}.get(category or "", "on_demand")


def current_config(row: dict, monthly_cost: Decimal) -> dict[str, Any]:
    return {
        "instance_type": row["instance_type"],
        "gpu_model": row["gpu_model"],
        "gpu_count": row["gpu_count"],
        "pricing": pricing(row["pricing_category"]),
        "monthly_cost_usd": money(monthly_cost),
    }


def catalogue(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Offers per (provider, region, instance type) with GPU specs; see queries.rightsizing_catalogue.
    gpu_type and quantization both read it: once per run (models/run_reads.py)."""
    return run_reads.shared(con, "rightsizing_catalogue", None, lambda: queries.rightsizing_catalogue(con))


def specs(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """gpu_specs keyed by GPU model."""
    table = frames.frame(pl.from_arrow(con.sql("SELECT * FROM gpu_specs").to_arrow_table()))
    return {row["gpu_model"]: row for row in table.iter_rows(named=True)}


def list_price(
    offers: pl.DataFrame, provider: str | None, region: str | None, instance_type: str | None
) -> Decimal | None:
    """The on-demand $/h of an instance type in a region, or None when the catalogue lacks it."""
    if offers.is_empty() or instance_type is None:
        return None
    match = offers.filter(
        (pl.col("provider") == provider) & (pl.col("region") == region) & (pl.col("instance_type") == instance_type)
    )
    if match.is_empty():
        return None
    return Decimal(str(match["on_demand_usd_per_hour"][0]))


def peak_throughput(spec: dict[str, Any] | None, precision: str | None) -> float | None:
    """The GPU's peak dense throughput (TFLOPS/TOPS) at a precision; None when unknown."""
    if not spec:
        return None
    column = {
        "fp32": "fp32_tflops",
        "tf32": "fp32_tflops",
        "bf16": "bf16_tflops",
        "int8": "int8_tops",
        "fp8": "int8_tops",
    }.get(precision or "fp16", "fp16_tflops")
    value = spec.get(column) or (spec.get("fp16_tflops") if column == "bf16_tflops" else None)
    return float(value) if value and not math.isnan(float(value)) else None
