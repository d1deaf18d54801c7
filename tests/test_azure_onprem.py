"""On-prem vs cloud offers Azure: the Helios *Earth* VCs as an on-prem cluster (tests/onprem_data.py, real occupancy)
against Azure's prices from the loopback Retail Prices API (tests/azure_prices_loopback.py), nothing else. Each
Azure option's $ per GPU-hour is converted here by hand from the loopback's prices: a VM's price over its GPUs, a
Reservation's whole-term price over the term's hours."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.models import onprem_vs_cloud as ovc
from gpufinops.warehouse import db
from tests import onprem_data as hd
from tests.azure_prices_loopback import A100, A100_PRICES, H100, PRICES, RetailPrices

MICRO = Decimal("0.000001")


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("azure_onprem")
    path = tmp / "wh" / "gpufinops.duckdb"
    hd.load_metrics(path, tmp, hd.START, hd.START + timedelta(days=2))
    assert run_source(hd.registry(), path, "earth", "onprem", hd.cluster_options()).status == "succeeded"
    api = RetailPrices()
    try:
        options = {"regions": ["eastus"], "endpoint": api.url}
        assert run_source(default_registry(), path, "azp", "azure_prices", options).status == "succeeded"
    finally:
        api.stop()
    with db.writer(path) as con:
        return [r.to_dict() for r in ovc.analyse_warehouse(con)[2]]


def test_the_on_prem_comparison_offers_azure_sizes_at_azure_s_prices(verdicts):
    options = {o["option"]: o for v in verdicts for o in v["evidence"]["options"]}
    hand = {
        f"Azure {A100} spot (eastus)": Decimal(A100_PRICES["spot"]),
        f"Azure {A100} 1-year commitment (eastus)": Decimal(A100_PRICES["reservation_1y"]) / 8760,
        f"Azure {A100} 3-year commitment (eastus)": Decimal(A100_PRICES["reservation_3y"]) / 26280,
        f"Azure {H100} spot (eastus)": Decimal(PRICES["spot"]) / 8,  # 8 H100s
    }
    for name, per_gpu_hour in hand.items():
        assert name in options, sorted(options)[:10]
        assert Decimal(str(options[name]["usd_per_gpu_hour"])) == per_gpu_hour.quantize(MICRO), name
    # the V100 VCs' cheapest fitting cloud option is an Azure one: no other cloud is priced here
    assert all(v["evidence"]["cheapest_cloud_option"].startswith("Azure ") for v in verdicts)
