"""The CUR 2.0 (AWS Data Exports) delivery format: its Parquet schema, layout and manifest.

AWS publishes no CUR 2.0 sample file, so the tests, the demo and the bench write exports in this
format with :func:`write_delivery`: the CUR 2.0 table's columns and types (``product``,
``resource_tags`` and ``cost_category`` as ``map<string,string>``, ``discount`` as
``map<string,double>``, money and quantities as ``double``, dates as ``timestamp``, the EKS
``split_line_item_*`` columns), one folder per billing period, and the manifest beside it::

    <export>/data/BILLING_PERIOD=YYYY-MM/<export>-00001.snappy.parquet
    <export>/metadata/BILLING_PERIOD=YYYY-MM/<export>-Manifest.json
"""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

_STRING_MAP = pa.map_(pa.string(), pa.string())
_TIMESTAMPS = (
    "bill_billing_period_end_date",
    "bill_billing_period_start_date",
    "line_item_usage_end_date",
    "line_item_usage_start_date",
)
_DOUBLES = (
    "discount_bundled_discount",
    "discount_total_discount",
    "line_item_blended_cost",
    "line_item_blended_rate",
    "line_item_net_unblended_cost",
    "line_item_net_unblended_rate",
    "line_item_normalization_factor",
    "line_item_normalized_usage_amount",
    "line_item_unblended_cost",
    "line_item_unblended_rate",
    "line_item_usage_amount",
    "pricing_public_on_demand_cost",
    "pricing_public_on_demand_rate",
    "reservation_amortized_upfront_cost_for_usage",
    "reservation_amortized_upfront_fee_for_billing_period",
    "reservation_effective_cost",
    "reservation_net_amortized_upfront_cost_for_usage",
    "reservation_net_amortized_upfront_fee_for_billing_period",
    "reservation_net_effective_cost",
    "reservation_net_recurring_fee_for_usage",
    "reservation_net_unused_amortized_upfront_fee_for_billing_period",
    "reservation_net_unused_recurring_fee",
    "reservation_net_upfront_value",
    "reservation_recurring_fee_for_usage",
    "reservation_unused_amortized_upfront_fee_for_billing_period",
    "reservation_unused_recurring_fee",
    "reservation_upfront_value",
    "savings_plan_amortized_upfront_commitment_for_billing_period",
    "savings_plan_net_amortized_upfront_commitment_for_billing_period",
    "savings_plan_net_recurring_commitment_for_billing_period",
    "savings_plan_net_savings_plan_effective_cost",
    "savings_plan_recurring_commitment_for_billing_period",
    "savings_plan_savings_plan_effective_cost",
    "savings_plan_savings_plan_rate",
    "savings_plan_total_commitment_to_date",
    "savings_plan_used_commitment",
    "split_line_item_actual_usage",
    "split_line_item_net_split_cost",
    "split_line_item_net_unused_cost",
    "split_line_item_public_on_demand_split_cost",
    "split_line_item_public_on_demand_unused_cost",
    "split_line_item_reserved_usage",
    "split_line_item_split_cost",
    "split_line_item_split_usage",
    "split_line_item_split_usage_ratio",
    "split_line_item_unused_cost",
)
_STRINGS = (
    "bill_bill_type",
    "bill_billing_entity",
    "bill_invoice_id",
    "bill_invoicing_entity",
    "bill_payer_account_id",
    "bill_payer_account_name",
    "identity_line_item_id",
    "identity_time_interval",
    "line_item_availability_zone",
    "line_item_currency_code",
    "line_item_legal_entity",
    "line_item_line_item_description",
    "line_item_line_item_type",
    "line_item_operation",
    "line_item_product_code",
    "line_item_resource_id",
    "line_item_tax_type",
    "line_item_usage_account_id",
    "line_item_usage_account_name",
    "line_item_usage_type",
    "pricing_currency",
    "pricing_lease_contract_length",
    "pricing_offering_class",
    "pricing_purchase_option",
    "pricing_rate_code",
    "pricing_rate_id",
    "pricing_term",
    "pricing_unit",
    "product_comment",
    "product_fee_code",
    "product_fee_description",
    "product_from_location",
    "product_from_location_type",
    "product_from_region_code",
    "product_instance_family",
    "product_instance_type",
    "product_instancesku",
    "product_location",
    "product_location_type",
    "product_operation",
    "product_pricing_unit",
    "product_product_family",
    "product_region_code",
    "product_servicecode",
    "product_sku",
    "product_to_location",
    "product_to_location_type",
    "product_to_region_code",
    "product_usagetype",
    "reservation_availability_zone",
    "reservation_end_time",
    "reservation_modification_status",
    "reservation_normalized_units_per_reservation",
    "reservation_number_of_reservations",
    "reservation_reservation_a_r_n",
    "reservation_start_time",
    "reservation_subscription_id",
    "reservation_total_reserved_normalized_units",
    "reservation_total_reserved_units",
    "reservation_units_per_reservation",
    "reservation_unused_normalized_unit_quantity",
    "reservation_unused_quantity",
    "savings_plan_end_time",
    "savings_plan_instance_type_family",
    "savings_plan_offering_type",
    "savings_plan_payment_option",
    "savings_plan_purchase_term",
    "savings_plan_region",
    "savings_plan_savings_plan_a_r_n",
    "savings_plan_start_time",
    "split_line_item_parent_resource_id",
)
_MAPS = {
    "cost_category": _STRING_MAP,
    "discount": pa.map_(pa.string(), pa.float64()),
    "product": _STRING_MAP,
    "resource_tags": _STRING_MAP,
}


def _type(name: str) -> pa.DataType:
    if name in _MAPS:
        return _MAPS[name]
    if name in _TIMESTAMPS:
        return pa.timestamp("ms")
    return pa.float64() if name in _DOUBLES else pa.string()


CUR2_SCHEMA = pa.schema([(name, _type(name)) for name in sorted((*_TIMESTAMPS, *_DOUBLES, *_STRINGS, *_MAPS))])


def conform(columns: dict[str, pa.Array | list]) -> pa.Table:
    """A table in the CUR 2.0 schema from the given columns (the others null)."""
    length = len(next(iter(columns.values())))
    unknown = set(columns) - set(CUR2_SCHEMA.names)
    if unknown:
        raise ValueError(f"not CUR 2.0 columns: {sorted(unknown)}")
    arrays = []
    for field in CUR2_SCHEMA:
        value = columns.get(field.name)
        if value is None:
            arrays.append(pa.nulls(length, field.type))
        elif isinstance(value, (pa.Array, pa.ChunkedArray)):
            arrays.append(value.cast(field.type))
        else:
            arrays.append(pa.array(value, type=field.type))
    return pa.Table.from_arrays(arrays, schema=CUR2_SCHEMA)


def write_delivery(
    root: Path,
    export: str,
    period: str,
    tables: Iterable[pa.Table],
    *,
    bucket: str = "billing",
    prefix: str = "",
    execution_id: str | None = None,
    row_group_size: int = 131_072,
) -> Path:
    """Write one delivery of a billing period (``YYYY-MM``) under ``root``; returns the manifest path.

    The period's files are replaced (Data Exports overwrite a period on each delivery); a file whose
    bytes would not change is left alone. The execution id is derived from the content unless given.
    """
    data_dir = root / export / "data" / f"BILLING_PERIOD={period}"
    meta_dir = root / export / "metadata" / f"BILLING_PERIOD={period}"
    data_dir.mkdir(parents=True, exist_ok=True)
    meta_dir.mkdir(parents=True, exist_ok=True)
    keys, digest = [], hashlib.sha256()
    wanted = set()
    for number, table in enumerate(tables, start=1):
        name = f"{export}-{number:05d}.snappy.parquet"
        wanted.add(name)
        path = data_dir / name
        sink = io.BytesIO()
        pq.write_table(table.cast(CUR2_SCHEMA), sink, compression="snappy", row_group_size=row_group_size)
        data = sink.getvalue()
        if not path.exists() or path.stat().st_size != len(data) or path.read_bytes() != data:
            path.write_bytes(data)  # an unchanged delivery keeps its files untouched
        digest.update(data)
        key = "/".join(p for p in (prefix, export, "data", f"BILLING_PERIOD={period}", name) if p)
        keys.append(f"s3://{bucket}/{key}")
    for stale in data_dir.glob("*.parquet"):
        if stale.name not in wanted:
            stale.unlink()
    return write_manifest(
        root, export, period, keys, execution_id or str(uuid.UUID(digest.hexdigest()[:32])), bucket=bucket
    )


def write_manifest(
    root: Path, export: str, period: str, keys: list[str], execution_id: str, *, bucket: str = "billing"
) -> Path:
    """The period's ``<export>-Manifest.json`` listing ``keys`` (s3:// URIs of its data files)."""
    meta_dir = root / export / "metadata" / f"BILLING_PERIOD={period}"
    meta_dir.mkdir(parents=True, exist_ok=True)
    start = datetime.strptime(period, "%Y-%m")
    end = start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    manifest = {
        "version": "1.0",
        "exportName": export,
        "exportArn": f"arn:aws:bcm-data-exports:us-east-1:000000000000:export/{export}",
        "executionId": execution_id,
        "billingPeriod": {
            "start": start.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "end": end.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        },
        "bucket": bucket,
        "dataFiles": keys,
        "columns": [{"name": f.name, "type": str(f.type)} for f in CUR2_SCHEMA],
    }
    path = meta_dir / f"{export}-Manifest.json"
    text = json.dumps(manifest, indent=2) + "\n"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def period_start(period: str) -> datetime:
    """The start of a CUR billing period named ``YYYY-MM`` (a manifest's or an Athena partition's)."""
    return datetime.strptime(period, "%Y-%m").replace(tzinfo=UTC)
