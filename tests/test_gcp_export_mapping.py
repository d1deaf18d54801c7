"""The export → FOCUS mapping on GPU rows: SKU descriptions, pricing categories, labels, teams, machines.

SKU descriptions come from Cyclenerd's sku_mapping.csv (the Catalog's own wording, `%` wildcards
filled in) and the real opencost SKU page; expected GPU models come from warehouse.gpu_models'
normaliser, a separate implementation from the mapping's SQL.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.gcp.gcp_billing_export import GcpBillingExport
from gpufinops.ingest.gcp.gcp_export_files import to_jsonl
from gpufinops.warehouse.gpu_models import CANONICAL_GPU_MODELS, normalize_gpu_model
from tests.conftest import DATA, query

SKU_MAPPING = DATA / "gcp-pricing-cyclenerd" / "sku_mapping.csv"


def _row(
    n: int,
    description: str,
    *,
    cost: str = "2.5",
    credits: list | None = None,
    labels: dict | None = None,
    project_labels: dict | None = None,
    system_labels: dict | None = None,
    resource: str | None = None,
) -> dict:
    kv = lambda d: [{"key": k, "value": v} for k, v in (d or {}).items()]  # noqa: E731
    return {
        "billing_account_id": "01A2B3-C4D5E6-F7A8B9",
        "service": {"id": "6F81-5844-456A", "description": "Compute Engine"},
        "sku": {"id": f"SKU-{n:04d}", "description": description},
        "usage_start_time": f"2026-10-0{1 + n % 3} {n % 24:02d}:00:00 UTC",
        "usage_end_time": f"2026-10-0{1 + n % 3} {n % 24:02d}:59:59 UTC",
        "project": {"id": "ml-prod-4821", "name": "ml-prod", "labels": kv(project_labels)},
        "labels": kv(labels),
        "system_labels": kv(system_labels),
        "location": {"location": "us-central1", "country": "US", "region": "us-central1", "zone": "us-central1-a"},
        "resource": {"name": resource, "global_name": resource} if resource else None,
        "export_time": "2026-10-04 06:00:00 UTC",
        "cost": float(cost),
        "currency": "USD",
        "usage": {"amount": 3600.0, "unit": "seconds", "amount_in_pricing_units": 1.0, "pricing_unit": "hour"},
        "credits": credits or [],
        "invoice": {"month": "202610"},
        "cost_type": "regular",
        "cost_at_list": float(cost) * 2,
    }


def _descriptions() -> list[tuple[str, str]]:
    """(a SKU description, the mapping id) for every GPU pattern of sku_mapping.csv."""
    out = []
    with open(SKU_MAPPING, newline="") as f:
        for row in csv.DictReader(f):
            if row["GROUP"] != "GPU":
                continue
            pattern = row["SKU_DESCRIPTION"]
            if pattern.startswith("Commitment"):
                head = pattern.split("%", 1)[0]
                filler = " in Americas for " if head.endswith("GPU") else " GPU in Americas for "
                text = pattern.replace("%", filler, 1).replace("%", "")
            elif "attached" in pattern:
                text = pattern.replace("%", " to Spot Preemptible VMs running in Americas")
            else:
                text = pattern.replace("%", " in Americas")
            out.append((" ".join(text.split()), row["MAPPING"]))
    return out


def _load(tmp_path: Path, rows: list[dict], tag_keys=("team",)) -> Path:
    (tmp_path / "export.json").write_bytes(to_jsonl(rows))
    registry = Registry()
    registry.register(GcpBillingExport)
    warehouse = tmp_path / "wh.duckdb"
    result = run_source(
        registry, warehouse, "gcp", "gcp_billing_export", {"path": str(tmp_path / "*.json")}, team_tag_keys=tag_keys
    )
    assert result.status == "succeeded", result.error
    return warehouse


def test_every_gpu_sku_pattern_maps_to_its_model_and_pricing_category(tmp_path):
    descriptions = _descriptions()
    assert len(descriptions) >= 40
    warehouse = _load(tmp_path, [_row(i, d) for i, (d, _) in enumerate(descriptions)])
    got = {
        d: (m, p)
        for d, m, p in query(
            warehouse,
            """SELECT "ChargeDescription", "x_GpuModel", "PricingCategory"
                                                        FROM cost_line_items""",
        )
    }
    for description, mapping in descriptions:
        model, category = got[description]
        expected = {"spot": "Dynamic", "1y": "Committed", "3y": "Committed"}.get(mapping.rsplit(".", 1)[-1], "Standard")
        assert category == expected, description
        assert model is not None, description
        reference = normalize_gpu_model(description)
        if reference in CANONICAL_GPU_MODELS:
            assert model == reference, description


def test_credits_list_cost_resource_labels_and_team(tmp_path):
    rows = [
        _row(
            1,
            "Nvidia Tesla A100 GPU running in Americas",
            cost="10.25",
            credits=[
                {"name": "SUD", "amount": -1.5, "type": "SUSTAINED_USAGE_DISCOUNT"},
                {"name": "Promo", "amount": -0.25, "type": "PROMOTION"},
            ],
            labels={"team": "vision", "workload": "training"},
            project_labels={"team": "platform", "env": "prod"},
            system_labels={"compute.googleapis.com/machine_spec": "a2-highgpu-4g", "goog-k8s-cluster-name": "c1"},
            resource="//compute.googleapis.com/projects/ml-prod-4821/zones/us-central1-a/instances/train-1",
        ),
        _row(
            2,
            "A2 Instance Core running in Americas",
            cost="1.00",
            project_labels={"team": "platform"},
            system_labels={"compute.googleapis.com/machine_spec": "g2-standard-48"},
        ),
        _row(3, "Network Internet Egress from Americas to EMEA", cost="0.40"),
        _row(4, "Balanced PD Capacity", cost="0.10"),
    ]
    warehouse = _load(tmp_path, rows)
    got = query(
        warehouse,
        """SELECT "ChargeDescription", "BilledCost", "EffectiveCost", "ListCost", "ResourceId",
                                     "Tags", "x_Team", "x_InstanceType", "x_GpuModel", "x_GpuCount", "ServiceCategory",
                                     "BillingPeriodStart", "ProviderName"
                              FROM cost_line_items ORDER BY "SkuId" """,
    )
    a100, core, egress, disk = got
    assert a100[1:4] == (pytest.approx(10.25), pytest.approx(8.5), pytest.approx(20.5))
    assert str(a100[2]) == "8.500000000000000"
    assert a100[4].endswith("/instances/train-1")
    tags = json.loads(a100[5])
    assert tags["team"] == "vision" and tags["env"] == "prod" and tags["goog-k8s-cluster-name"] == "c1"
    assert a100[6:10] == ("vision", "a2-highgpu-4g", "A100-40GB", 4)
    assert core[6:10] == ("platform", "g2-standard-48", "L4", 4)  # project label as the team
    # FOCUS 1.2: one ServiceCategory per ServiceName, so Compute Engine's egress and disk SKUs are Compute
    # like its VMs (they were Networking / Storage from the SKU description before)
    assert (egress[10], disk[10], a100[10]) == ("Compute", "Compute", "Compute")
    assert a100[11].isoformat() == "2026-10-01T00:00:00+00:00" and a100[12] == "Google Cloud"
