"""``gcp_price_history``: a GCP GPU machine price history file → ``price_history`` and ``spot_prices``.

Reads Cyclenerd's ``gcp_gpu_machine_price_changes.csv`` (``path``; derived from the weekly revisions
of google-cloud-pricing-cost-calculator's pricing.yml, which is built from the Cloud Billing Catalog):
one row per (machine type, region) whenever one of its prices changed, with the on-demand and Spot
$/hour and the 1-/3-year commitment $/month. Each non-empty price becomes a ``price_history`` row
(``on_demand``, ``spot``, ``commit_1y``, ``commit_3y``) effective from the revision's ``commit_date``;
commitments are stored per hour (the file's month is 730 hours, Cyclenerd's convention) so every
pricing compares. Each Spot price is also a ``spot_prices`` point (provider ``gcp``, product
``compute``, zone = region: GCP Spot prices are regional). Prices are rounded half-even to the
tables' 8 decimals.

A changed file (or a full refresh) replaces every (gcp, region, machine type) slice the file holds, in
both tables, so a re-run never duplicates; an unchanged file is skipped. ``gcp_catalog`` re-adds its
own points for those machine types on its next run.
"""

from __future__ import annotations

import csv
import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path

import pyarrow as pa

from gpufinops.ingest.core import registry
from gpufinops.ingest.core.files import fingerprint
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import SourceOptions, choices_problem, option
from gpufinops.ingest.gcp import doctor
from gpufinops.warehouse import reference_schema

log = logging.getLogger(__name__)

COLUMNS = (
    "commit_date",
    "machine_type",
    "region",
    "hour_ondemand_usd",
    "hour_spot_usd",
    "month_1y_cud_usd",
    "month_3y_cud_usd",
)
PRICINGS = {
    "hour_ondemand_usd": ("on_demand", 1),
    "hour_spot_usd": ("spot", 1),
    "month_1y_cud_usd": ("commit_1y", 730),
    "month_3y_cud_usd": ("commit_3y", 730),
}
EIGHT = Decimal("1E-8")
SOURCE = "cyclenerd:gcp_gpu_machine_price_changes"
OUTPUTS = ("price_history", "spot_prices")


def _price(path: str, line: int, column: str, text: str, per: int) -> Decimal | None:
    if not text.strip():
        return None
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise IngestError(f"file {path} line {line}: {column} {text!r} is not a number") from None
    if value < 0:
        raise IngestError(f"file {path} line {line}: {column} {text!r} is negative")
    return (value / per).quantize(EIGHT, rounding=ROUND_HALF_EVEN)


def read_changes(path: str, run_id: str) -> tuple[list[dict], list[dict]]:
    """(price_history rows, spot_prices rows) of the file; one clear error for a bad line."""
    history, spot = [], []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise IngestError(f"file {path}: not a GCP GPU price-change file: missing column(s) {', '.join(missing)}")
        for line, row in enumerate(reader, start=2):
            try:
                when = datetime.fromisoformat(row["commit_date"]).astimezone(UTC)
            except ValueError:
                raise IngestError(
                    f"file {path} line {line}: commit_date {row['commit_date']!r} is not a date"
                ) from None
            machine, region = row["machine_type"].strip(), row["region"].strip()
            if not machine or not region:
                raise IngestError(f"file {path} line {line}: machine_type and region must be set")
            for column, (pricing, per) in PRICINGS.items():
                price = _price(path, line, column, row[column] or "", per)
                if price is None:
                    continue
                history.append(
                    {
                        "provider": "gcp",
                        "region": region,
                        "instance_type": machine,
                        "pricing": pricing,
                        "effective_from": when,
                        "price": price,
                        "currency": "USD",
                        "source": SOURCE,
                        "ingest_run_id": run_id,
                    }
                )
                if pricing == "spot":
                    spot.append(
                        {
                            "provider": "gcp",
                            "region": region,
                            "zone": region,
                            "instance_type": machine,
                            "product": "compute",
                            "ts": when,
                            "price_usd": price,
                        }
                    )
    return history, spot


@dataclass(frozen=True, kw_only=True)
class GcpPriceHistoryOptions(SourceOptions):
    path: str = option(doc="the price-change CSV (Cyclenerd's format)")
    outputs: str | list[str] = option(list(OUTPUTS), f"the tables to fill, some of {', '.join(OUTPUTS)}")

    def validate(self) -> None:
        problem = choices_problem("outputs", self.outputs, OUTPUTS)
        if problem:
            raise problem


class GcpPriceHistory:
    meta = registry.IngestorMeta(
        name="gcp_price_history",
        target_table="price_history",
        key=("provider", "region", "instance_type", "pricing", "effective_from", "source"),
        slice_expr="provider || '|' || region || '|' || instance_type",
        source_column=None,  # reference tables: a load replaces the file's (gcp, region, machine type) slices
        cursor=registry.Cursor(remembers="the file's size and modification time", resume_item=None),
        lookback=timedelta(0),
        default_schedule="0 5 * * 1",
        options=GcpPriceHistoryOptions,
        description="a GPU machine price-change file (Cyclenerd's format; also `spot_prices`)",
        time_range=False,
        provider="gcp",
        extra=None,
        transport=None,
        freshness=registry.Freshness(kind="prices", lag_hours=720.0),
        doctor=doctor.gcp_price_history,
        init=None,
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        options: GcpPriceHistoryOptions = ctx.options
        path = Path(options.path).expanduser()
        if ctx.base_dir and not path.is_absolute():
            path = Path(ctx.base_dir) / path
        if not path.is_file():
            raise IngestError(f"{ctx.source}: path {str(path)!r} does not exist")
        outputs = [options.outputs] if isinstance(options.outputs, str) else list(options.outputs)
        mark = hashlib.sha256(repr((str(path), fingerprint(str(path)), sorted(outputs))).encode()).hexdigest()
        if mark == ctx.state.get("file") and not ctx.window.full_refresh:
            return FetchResult.unchanged(ctx.state, "file unchanged")
        try:
            history, spot = read_changes(str(path), ctx.run_id)
        except IngestError as exc:
            raise IngestError(f"{ctx.source}: {exc}") from None
        if not history:
            raise IngestError(f"{ctx.source}: file {path} holds no price")
        slices = sorted({f"gcp|{r['region']}|{r['instance_type']}" for r in history})
        newest = max(r["effective_from"] for r in history).isoformat()
        watermark = f"{len(history)} prices, {len(spot)} spot points, newest {newest}"
        log.info("%s: %s", ctx.source, watermark)
        batches = []
        if "price_history" in outputs:
            batches.append(
                Batch("price_history", pa.Table.from_pylist(history, schema=reference_schema.PRICE_HISTORY), slices)
            )
        if "spot_prices" in outputs:
            batches.append(
                Batch("spot_prices", pa.Table.from_pylist(spot, schema=reference_schema.SPOT_PRICES), slices)
            )
        return FetchResult(batches, {"file": mark, "watermark": watermark}, watermark=watermark)


INGESTORS = [GcpPriceHistory]
