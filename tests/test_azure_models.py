"""Azure resources priced from Azure's own prices: a FocusCost bill (tests/azure_focuscost_data.py, generated in the
documented shape), DCGM exporter expositions of its VMs, and ``azure_prices`` from the loopback Retail Prices API
(tests/azure_prices_loopback.py: real Linux pay-as-you-go prices, generated Spot, Reservation and savings-plan
prices of the two sizes below). Every expected figure is converted here by hand, in Decimal, from the loopback's
prices: a reservation's whole-term price over the term's hours, a month of 730.5 hours (commitment) or 30.4375
days (rightsizing and spot).

* an ND96isr_H100_v5 keeping 2 of its 8 H100s busy: gpu_count (an NC80adis_H100_v5, 2 H100 NVL, at Azure's price)
  and commitment (1- and 3-year Reservations, 1- and 3-year savings plans);
* an NC24ads_A100_v4 on demand that checkpoints: spot_mix at Azure's Spot price;
* an NC40ads_H100_v5 keeping its H100 NVL barely busy: gpu_type (an NC24ads_A100_v4 at Azure's price);
* the three on one AKS cluster: Karpenter NodePools for AKS node auto-provisioning; carbon with the region's grid
  figure and Microsoft's PUE.
"""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from gpufinops.derived import carbon_data
from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.models.run import analyse
from gpufinops.warehouse import db
from tests import azure_focuscost_data as az
from tests import export_checks
from tests.azure_prices_loopback import (
    A100_PRICES,
    H100,
    KARPENTER_PRICES,
    PRICES,
    RetailPrices,
    linux_on_demand,
)
from tests.k8s_crds import AKSNODECLASS_CRD, crd_schemas, validate

REGISTRY = default_registry()
AZURE_INVENTORY = Path(db.__file__).parent / "data" / "azure_gpu_sizes.csv"
DAYS = 16  # a commitment needs 14 days of history
CENT, MICRO = Decimal("0.01"), Decimal("0.000001")
EASTUS = linux_on_demand("eastus")  # the Karpenter table's real Linux pay-as-you-go prices
A100_TRAIN = az.A100_VM.replace("a100-spot-01", "a100-train-01")
H100_INFER = az.H100_VM.replace("h100-train-01", "h100-infer-01")
AKS = "aks-gpu"


def _bill(tmp: Path) -> None:
    days = az.month_days("2026-10", DAYS)
    rows = [az.vm_day("1.0r2", d, az.H100_VM, H100, Decimal(EASTUS[H100])) for d in days]
    for d in days:
        row = az.vm_day(
            "1.0r2", d, A100_TRAIN, "Standard_NC24ads_A100_v4", Decimal(A100_PRICES["linux"]), team="vision"
        )
        row["Tags"] = json.dumps({"team": "vision", "workload": "training", "checkpointing": "true"})
        rows.append(row)
        rows.append(
            az.vm_day("1.0r2", d, H100_INFER, "Standard_NC40ads_H100_v5", Decimal(EASTUS["Standard_NC40ads_H100_v5"]))
        )
    for row in rows:  # every VM a node of one AKS cluster (AKS tags its node pools' scale sets so)
        row["Tags"] = json.dumps({**json.loads(row["Tags"]), "aks-managed-cluster-name": AKS})
    az.write_run(tmp / "container", "2026-10", rows)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("azure_models")
    warehouse = tmp / "wh.duckdb"
    _bill(tmp)
    loaded = run_source(
        REGISTRY, warehouse, "azure", "azure_cost_export", {"path": str(tmp / "container")}, team_tag_keys=("team",)
    )
    assert loaded.status == "succeeded", loaded.error
    api = RetailPrices()
    try:
        prices = run_source(
            REGISTRY, warehouse, "azprices", "azure_prices", {"regions": ["eastus"], "endpoint": api.url}
        )
    finally:
        api.stop()
    assert prices.status == "succeeded", prices.error
    az.write_dcgm(tmp / "dcgm", "h100-train-01", "NVIDIA H100 80GB HBM3", 8, DAYS, busy=(2, 30.0, 30_000.0))
    az.write_dcgm(tmp / "dcgm", "a100-train-01", "NVIDIA A100 80GB PCIe", 1, DAYS, busy=(1, 55.0, 30_000.0))
    az.write_dcgm(tmp / "dcgm", "h100-infer-01", "NVIDIA H100 NVL", 1, DAYS, busy=(1, 10.0, 8_000.0))
    hosts = {"h100-train-01": az.H100_VM, "a100-train-01": A100_TRAIN, "h100-infer-01": H100_INFER}
    metrics = {"targets": [str(tmp / "dcgm" / "*.prom")], "resource_map": hosts}
    assert run_source(REGISTRY, warehouse, "gpus", "dcgm_exporter", metrics).status == "succeeded"
    with db.writer(warehouse) as con:
        return analyse(con), warehouse


@pytest.fixture(scope="module")
def run(analysed):
    return analysed[0]


def _one(run, kind: str, resource: str) -> dict:
    found = [r.to_dict() for r in run.recommendations if r.kind == kind and r.resource_id == resource]
    assert len(found) == 1, [(r.kind, r.resource_id) for r in run.recommendations]
    return found[0]


def test_only_what_the_api_gives_no_price_for_is_withheld_as_unpriced(run):
    """The loopback answers the NC40ads_H100_v5 with its pay-as-you-go price alone: its commitment is withheld,
    naming the missing prices, never priced at zero; everything else is priced."""
    priced = ("spot_mix", "commitment", "gpu_count", "gpu_type")
    unpriced = [w for w in run.withheld if w.kind in priced and w.reason == "unpriced"]
    assert [(w.kind, w.resource_id) for w in unpriced] == [
        ("commitment", "commitment/azure/eastus/Standard_NC40ads_H100_v5/research")
    ]
    assert "Standard_NC40ads_H100_v5" in unpriced[0].detail and "commit_1y" in unpriced[0].detail
    assert unpriced[0].source_hint.startswith("the azure_prices source")  # the provider spec's price sources


def test_the_commitment_is_priced_from_azure_s_reservations_and_savings_plans(run):
    evidence = _one(run, "commitment", az.H100_VM)["evidence"]
    on_demand = Decimal(PRICES["linux"])
    hourly = {
        "commit_1y": Decimal(PRICES["reservation_1y"]) / 8760,  # the whole term's price over its hours
        "commit_3y": Decimal(PRICES["reservation_3y"]) / 26280,
        "savings_plan_1y": Decimal(PRICES["savings_1y"]),
        "savings_plan_3y": Decimal(PRICES["savings_3y"]),
    }
    assert evidence["commitment_price_source"] == "catalogue price_history (azure:retail-prices)"
    for pricing, rate in hourly.items():
        assert Decimal(str(evidence[f"{pricing}_usd_per_hour"])) == rate.quantize(MICRO), pricing
    # one machine busy every hour of the 16 days: (on-demand - committed) x 730.5 hours a month
    monthly = {pricing: ((on_demand - rate) * Decimal("730.5")).quantize(CENT) for pricing, rate in hourly.items()}
    assert Decimal(str(evidence["standalone_monthly_savings_usd"])) == monthly["commit_1y"]
    assert Decimal(str(evidence["monthly_savings_3y_usd"])) == monthly["commit_3y"]
    assert Decimal(str(evidence["monthly_savings_savings_plan_1y_usd"])) == monthly["savings_plan_1y"]
    assert Decimal(str(evidence["monthly_savings_savings_plan_3y_usd"])) == monthly["savings_plan_3y"]


def test_spot_mix_is_priced_from_azure_s_spot_price(run):
    finding = _one(run, "spot_mix", A100_TRAIN)
    evidence = finding["evidence"]
    ratio = Decimal(A100_PRICES["spot"]) / Decimal(A100_PRICES["linux"])
    assert Decimal(str(evidence["spot_ratio"])) == ratio.quantize(Decimal("0.0001"))
    assert "spot/on-demand ratio" in evidence["spot_price_source"]
    monthly = (Decimal(A100_PRICES["linux"]) * 24 * Decimal("30.4375")).quantize(CENT)
    assert Decimal(str(evidence["monthly_on_demand_cost_usd"])) == monthly
    rework = Decimal(str(evidence["rework_fraction"]))
    saving = monthly * (1 - ratio * (1 + rework))
    assert Decimal(str(finding["monthly_savings_usd"])) == pytest.approx(saving, abs=Decimal("0.02"))


def test_gpu_count_offers_azure_s_own_smaller_size_at_its_price(run):
    finding = _one(run, "gpu_count", az.H100_VM)
    target = "Standard_NC80adis_H100_v5"
    assert finding["proposed"]["instance_type"] == target and finding["proposed"]["gpu_count"] == 2
    assert Decimal(str(finding["evidence"]["target_usd_per_hour"])) == Decimal(EASTUS[target])
    monthly = Decimal(EASTUS[H100]) * 24 * Decimal("30.4375")
    proposed = (monthly * Decimal(EASTUS[target]) / Decimal(EASTUS[H100])).quantize(CENT)
    assert Decimal(str(finding["proposed"]["monthly_cost_usd"])) == proposed
    assert Decimal(str(finding["evidence"]["standalone_monthly_savings_usd"])) == monthly.quantize(CENT) - proposed


def test_gpu_type_offers_an_azure_size_of_a_cheaper_gpu_at_its_price(run):
    finding = _one(run, "gpu_type", H100_INFER)
    assert finding["proposed"]["instance_type"] == "Standard_NC24ads_A100_v4"
    assert finding["proposed"]["gpu_model"] == "A100-80GB"
    monthly = Decimal(EASTUS["Standard_NC40ads_H100_v5"]) * 24 * Decimal("30.4375")
    proposed = monthly * Decimal(A100_PRICES["linux"]) / Decimal(EASTUS["Standard_NC40ads_H100_v5"])
    assert Decimal(str(finding["proposed"]["monthly_cost_usd"])) == proposed.quantize(CENT)


def _karpenter(analysed) -> list[dict]:
    from gpufinops.jobs.export import render

    with db.writer(analysed[1]) as con:
        return [d for d in yaml.safe_load_all(render(con, "karpenter")) if d]


def test_karpenter_on_aks_writes_nodepools_by_sku_name_valid_against_the_crd(analysed):
    """AKS node auto-provisioning (Karpenter's Azure provider): per team, GPU model and capacity type a NodePool
    selecting Azure VM sizes by karpenter.azure.com/sku-name (the sizes the plan leaves the GPUs on), the
    capacity type spot / on-demand, and a reference to the AKSNodeClass written first."""
    docs = _karpenter(analysed)
    assert [d["kind"] for d in docs][0] == "AKSNodeClass"
    node_class = docs[0]
    assert node_class["apiVersion"] == "karpenter.azure.com/v1beta1"
    pools = {d["metadata"]["name"]: d for d in docs if d["kind"] == "NodePool"}
    schemas = crd_schemas()
    for pool in pools.values():
        validate(pool, schemas)
        ref = pool["spec"]["template"]["spec"]["nodeClassRef"]
        assert ref == {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": node_class["metadata"]["name"]}
    requirements = {
        name: {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
        for name, pool in pools.items()
    }
    # the gpu_count plan's 2 H100 NVL on demand; the spot_mix plan's A100 on spot (NC24ads_A100_v4: 1 GPU)
    assert requirements["gpufinops-research-h100-pcie-on-demand"] == {
        "karpenter.sh/capacity-type": ["on-demand"],
        "karpenter.azure.com/sku-name": ["Standard_NC80adis_H100_v5"],
    }
    assert requirements["gpufinops-vision-a100-80gb-spot"] == {
        "karpenter.sh/capacity-type": ["spot"],
        "karpenter.azure.com/sku-name": ["Standard_NC24ads_A100_v4"],
    }
    types = export_checks.inventory(AZURE_INVENTORY)
    assert export_checks.check_nodepools(list(pools.values()), types) == []  # whole nodes of Azure sizes


def test_the_aksnodeclass_validates_against_its_crd(analysed):
    if not AKSNODECLASS_CRD.is_file():
        pytest.skip(
            f"{AKSNODECLASS_CRD.name} is not vendored: Azure/karpenter-provider-azure @ 352646f, pkg/apis/crds/ "
            "(Apache-2.0), into tests/data/k8s-crds/"
        )
    node_class = _karpenter(analysed)[0]
    validate(node_class, crd_schemas())


def test_carbon_on_azure_rows_is_computed_with_the_region_s_grid_and_microsoft_s_pue(analysed):
    """The VMs' measured draw (DCGM) × (1 + the node share) × Microsoft's PUE × eastus's grid (Virginia's eGRID rate)."""
    with db.writer(analysed[1]) as con:
        rows = con.execute(
            "SELECT energy_basis, pue, pue_source, intensity_source, grid_g_co2e_per_kwh, sum(kwh), sum(kg_co2e), "
            "count(*) FROM carbon_hourly WHERE resource_id = ? GROUP BY ALL",
            [az.H100_VM],
        ).fetchall()
    assert len(rows) == 1, rows
    basis, pue, pue_source, source, grid, kwh, kg, hours = rows[0]
    assert (basis, pue, hours) == ("measured", 1.18, DAYS * 24)
    assert "datacenters.microsoft.com" in pue_source and "virginia (azure eastus)" in source
    assert grid == carbon_data.us_states()["virginia"] and kg == pytest.approx(kwh * grid / 1000)


def test_every_region_azure_prices_a_gpu_size_in_has_its_own_grid_figure():
    """Azure's Karpenter provider's price table names 52 regions with GPU sizes: each resolves to its place (a US
    state's eGRID rate, else its country's energy mix), never the world-average default."""
    with KARPENTER_PRICES.open(encoding="utf-8", newline="") as fh:
        regions = sorted({row["region"] for row in csv.DictReader(fh)})
    assert len(regions) == 52
    unplaced = [r for r in regions if "world average" in carbon_data.intensity("azure", r, {}).source]
    assert unplaced == []
    # by hand, from Microsoft's regions list: a state, and countries outside the first regions listed
    expected = {
        "westcentralus": carbon_data.us_states()["wyoming"],
        "japanwest": carbon_data.countries()["JPN"][0],
        "eastasia": carbon_data.countries()["HKG"][0],
        "southafricanorth": carbon_data.countries()["ZAF"][0],
        "norwayeast": carbon_data.countries()["NOR"][0],
    }
    assert {r: carbon_data.intensity("azure", r, {}).g_co2e_per_kwh for r in expected} == expected


def test_budget_quotas_on_aks_are_nodepools_by_sku_name_valid_against_the_crd(analysed):
    """``export budgets --format karpenter`` on the AKS cluster: the team's quota as NodePools of Azure VM sizes,
    rounded down to whole nodes, after the AKSNodeClass they reference."""
    from gpufinops.derived import rollups
    from gpufinops.jobs.enforce import build
    from gpufinops.jobs.export.settings import ExportSettings
    from gpufinops.models.budgets import Budget, BudgetScope

    budget = Budget("research-gpu", Decimal("10000000"), scope=BudgetScope(teams=("research",)), enforce="cap")
    with db.writer(analysed[1]) as con:
        rollups.refresh_cost_daily(con)
        text = build.render(con, "karpenter", (budget,), ExportSettings())
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert docs and docs[0]["kind"] == "AKSNodeClass", text[:2000]
    pools = [d for d in docs if d["kind"] == "NodePool"]
    schemas = crd_schemas()
    for pool in pools:
        validate(pool, schemas)
        keys = {r["key"] for r in pool["spec"]["template"]["spec"]["requirements"]}
        assert keys == {"karpenter.sh/capacity-type", "karpenter.azure.com/sku-name"}
        assert pool["spec"]["template"]["spec"]["nodeClassRef"]["kind"] == "AKSNodeClass"
    assert pools and export_checks.check_nodepools(pools, export_checks.inventory(AZURE_INVENTORY)) == []
    from gpufinops.jobs.enforce import kube

    # what `enforce` applies it through: the AKSNodeClass's own API path (karpenter.azure.com, cluster-scoped)
    assert kube.object_path(docs[0]) == "/apis/karpenter.azure.com/v1beta1/aksnodeclasses/default"
