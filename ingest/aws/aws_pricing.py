"""``aws_pricing``: GPU instance types (EC2 DescribeInstanceTypes) priced by the Pricing API → ``instance_types``.

For every configured region: every instance type with ``GpuInfo`` (plus any listed in
``instance_types``) with its GPU model, GPU count, GPU memory, vCPUs and memory, and its Linux,
shared-tenancy, on-demand $/h from Pricing ``GetProducts``. When the Pricing API is unreachable, or
has no price for a type, the price comes from the bundled offline catalogue (karpenter's generated
us-east-1 price list, ``warehouse/data/aws_ondemand_karpenter.csv``) and the row's ``source`` says
so. When EC2 itself is unreachable the run fails: a catalogue without GPU facts is not a catalogue.
A run replaces the regions' rows; a catalogue identical to the last one loaded is skipped.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa

from gpufinops.ingest.aws import aws_common, doctor
from gpufinops.ingest.aws.aws_spot_prices import AwsRegionsOptions, gpu_instance_types
from gpufinops.ingest.core import paging, registry, spec_facts
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.warehouse import reference, reference_schema
from gpufinops.warehouse.gpu_models import normalize_gpu_model

log = logging.getLogger(__name__)

OFFLINE_CATALOGUE = reference.KARPENTER_PRICES_PATH  # the shipped Karpenter price list
OFFLINE_SOURCE = "offline:karpenter-2026-07-20"
API_SOURCE = "aws:pricing-api"
PRICING_REGION = "us-east-1"  # the Pricing API's endpoint region


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def offline_prices() -> dict[tuple[str, str], tuple[Decimal, datetime]]:
    """(region, type) -> ($/h, when the catalogue was generated)."""
    with open(OFFLINE_CATALOGUE, newline="") as f:
        return {
            (r["region"], r["instance_type"]): (Decimal(r["ondemand_usd_per_hour"]), _utc(r["generated_at"]))
            for r in csv.DictReader(f)
        }


def _price_from_product(item: str | dict) -> tuple[Decimal | None, dict, datetime | None]:
    """(on-demand $/h, product attributes, when the price took effect) of one PriceList entry."""
    product = json.loads(item) if isinstance(item, str) else item
    attributes = product.get("product", {}).get("attributes", {})
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if usd is not None and dimension.get("unit", "Hrs") in ("Hrs", "Hours"):
                when = term.get("effectiveDate") or product.get("publicationDate")
                return Decimal(usd), attributes, _utc(when) if when else None
    return None, attributes, None


def _api_price(
    pricing: Any, source: str, region: str, instance_type: str
) -> tuple[Decimal | None, dict, datetime | None]:
    filters = [
        {"Type": "TERM_MATCH", "Field": k, "Value": v}
        for k, v in (
            ("instanceType", instance_type),
            ("regionCode", region),
            ("operatingSystem", "Linux"),
            ("tenancy", "Shared"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),
        )
    ]
    try:
        pages = paging.Pages(source, f"Pricing GetProducts for {instance_type} in {region}")
        for page in pages.each(
            pricing.get_paginator("get_products").paginate(
                ServiceCode="AmazonEC2", Filters=filters, FormatVersion="aws_v1"
            )
        ):
            for item in page.get("PriceList", []):
                price, attributes, when = _price_from_product(item)
                if price is not None and attributes.get("instanceType", instance_type) == instance_type:
                    return price, attributes, when
    except Exception as exc:
        if aws_common.is_client_error(exc):
            raise aws_common.describe_error(
                source, f"Pricing GetProducts for {instance_type} in {region}", exc
            ) from None
        raise
    return None, {}, None


def _gib(text: str | None) -> float | None:
    if not text:
        return None
    number = text.replace(",", "").split()[0]
    try:
        return float(number)
    except ValueError:
        return None


def _row(
    region: str,
    name: str,
    described: dict | None,
    attributes: dict,
    price: Decimal | None,
    source: str,
    updated_at: datetime | None,
) -> dict:
    gpus = (described or {}).get("GpuInfo", {}).get("Gpus", [])
    gpu = gpus[0] if gpus else {}
    memory_mib = gpu.get("MemoryInfo", {}).get("SizeInMiB")
    vcpus = (described or {}).get("VCpuInfo", {}).get("DefaultVCpus") or (
        int(attributes["vcpu"]) if attributes.get("vcpu") else None
    )
    memory = (described or {}).get("MemoryInfo", {}).get("SizeInMiB")
    return {
        "provider": "aws",
        "region": region,
        "instance_type": name,
        "gpu_model": normalize_gpu_model(gpu.get("Name"), memory_mib) if gpu else None,
        "gpu_count": sum(int(g.get("Count", 0)) for g in gpus) or None,
        "gpu_memory_gib": memory_mib / 1024 if memory_mib else None,
        "vcpus": vcpus,
        "memory_gib": memory / 1024 if memory else _gib(attributes.get("memory")),
        "on_demand_usd_per_hour": price,
        "source": source,
        "updated_at": updated_at,
    }


@dataclass(frozen=True, kw_only=True)
class AwsPricingOptions(AwsRegionsOptions):
    pass


class AwsPricing:
    meta = registry.IngestorMeta(
        **spec_facts.AWS_API,
        **spec_facts.PRICE_CATALOGUE,
        name="aws_pricing",
        target_table="instance_types",
        key=("provider", "region", "instance_type"),
        default_schedule="0 3 * * *",
        options=AwsPricingOptions,
        description="EC2 `DescribeInstanceTypes` (GPU types) + Pricing `GetProducts` (Linux, shared tenancy, "
        "on-demand)",
        doctor=doctor.aws_pricing,
        init=("aws_cur_bucket", "aws_cur_path"),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        options: AwsPricingOptions = ctx.options
        offline = offline_prices()
        pricing = aws_common.client("pricing", ctx.source, options, region=PRICING_REGION)
        pricing_down: str | None = None
        rows = []
        for region in options.region_names():
            ec2 = aws_common.client("ec2", ctx.source, options, region=region)
            described = {t["InstanceType"]: t for t in gpu_instance_types(ec2, ctx.source, region)}
            extra = [t for t in options.instance_types or [] if t not in described]
            for name in sorted([*described, *extra]):
                attributes: dict[str, Any] = {}
                price, when, source = None, None, API_SOURCE
                if pricing_down is None:
                    try:
                        price, attributes, when = _api_price(pricing, ctx.source, region, name)
                    except IngestError as exc:
                        pricing_down = str(exc)
                        log.warning("%s; using the offline catalogue (%s)", exc, OFFLINE_SOURCE)
                if price is None:
                    price, when = offline.get((region, name), (None, None))
                    source = OFFLINE_SOURCE
                rows.append(_row(region, name, described.get(name), attributes, price, source, when))
        if not rows:
            raise IngestError(f"{ctx.source}: no GPU instance type found in {', '.join(options.region_names())}")
        content = json.dumps([{k: str(v) for k, v in r.items()} for r in rows], sort_keys=True)
        digest = hashlib.sha256(content.encode()).hexdigest()
        offline_count = sum(1 for r in rows if r["source"] == OFFLINE_SOURCE)
        watermark = f"{len(rows)} types, {offline_count} priced offline"
        if digest == ctx.state.get("digest") and not ctx.window.full_refresh:
            return FetchResult.unchanged(ctx.state, "catalogue unchanged")
        table = pa.Table.from_pylist(rows, schema=reference_schema.INSTANCE_TYPES)
        slices = sorted({f"aws|{r}" for r in options.region_names()})
        return FetchResult(
            [Batch("instance_types", table, slices)], {"digest": digest, "watermark": watermark}, watermark=watermark
        )


INGESTORS = [AwsPricing]
