"""The demo fleet's price, account and region tables (hard-coded: the demo runs from a fresh clone
without ``shared/``; each table names the reference file it was copied from).

Money is ``Decimal`` quantised to 10 fractional digits (:func:`money`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

MONEY = Decimal("1E-10")
HOURS_PER_MONTH = 730

# us-east-1 Linux on-demand $/h, from shared/data/aws-ondemand-karpenter/
# aws_ondemand_linux_prices_us-east-1_karpenter.csv (karpenter, generated 2026-07-20). us-west-2
# is billed at the same rates (these types have the same list price there).
AWS_ON_DEMAND_USD = {
    "p4d.24xlarge": "21.957642",
    "p4de.24xlarge": "27.44705",
    "p5.48xlarge": "55.04",
    "g5.xlarge": "1.006",
    "g5.12xlarge": "5.672",
    "g5.48xlarge": "16.288",
    "g6.xlarge": "0.8048",
    "g6.12xlarge": "4.6016",
    "g4dn.xlarge": "0.526",
    "g4dn.12xlarge": "3.912",
}
AWS_RI_1Y_RATE = Decimal("0.62")  # assumed 1-year no-upfront reserved rate / on-demand (not in the data)
# (machine type, region) -> ($/h on-demand, $/h spot, $/month 1-year CUD) from
# Cyclenerd's GCP pricing.yml at fd66b26 (compute.instance.<type>.cost.<region>; tests/data/gcp-pricing-cyclenerd/SOURCE.md).
GCP_PRICES: dict[tuple[str, str], tuple[str, str, str | None]] = {
    ("a2-highgpu-1g", "us-central1"): ("3.673385", "1.92802", "1689.3711392"),
    ("a2-highgpu-4g", "us-central1"): ("14.69354", "7.71208", "6757.4845568"),
    ("a2-highgpu-8g", "us-central1"): ("29.38708", "15.42416", "13514.9691136"),
    ("a2-ultragpu-1g", "us-central1"): ("5.06879789041096", "2.75954630136986", None),
    ("a3-highgpu-8g", "us-central1"): ("88.4899999025753", "50.6095408219178", "44810.08066464"),
    ("g2-standard-4", "us-central1"): ("0.706832255", "0.397336", "325.07215214"),
    ("g2-standard-4", "europe-west4"): ("0.742916046", "0.38986", "341.6671049"),
    ("g2-standard-48", "europe-west4"): ("4.205950264", "2.20712", "1934.3166532"),
}
# The on-prem cluster as an `onprem` source (assumed figures; GPU prices default to gpu_specs' list
# price): cluster-wide keys, and per node type (x_InstanceType) its node price and idle GPU draw.
ONPREM_SOURCE = "onprem"
ONPREM_OPTIONS = {
    "cluster": "dc1",
    "region": "dc1",
    "billing_account_name": "Acme datacentre",
    "amortisation_months": 36,
    "pue": Decimal("1.5"),
    "energy_usd_per_kwh": Decimal("0.12"),
    "host_power_w": 1000,
    "facility_usd_per_node_month": 250,
    "operations_usd_per_node_month": 400,
}
ONPREM_NODE_TYPES = {
    "onprem-a40x4": {
        "server_price_usd": 22000,
        "network_price_usd": 3000,
        "storage_price_usd": 3000,
        "idle_power_w": 30,
    },
    "onprem-a100x8": {
        "server_price_usd": 60000,
        "network_price_usd": 12000,
        "storage_price_usd": 8000,
        "idle_power_w": 60,
    },
}
# AWS Spot Instance Advisor, Linux: (region, type) -> (saving over on-demand "s" %, interruption band "r"),
# from the Spot Instance Advisor feed of 2025-06 (spot-advisor-data.json), with that feed's band ranges.
# The demo writes them as reference/aws/spot-advisor-data.json (the feed's format) for `aws_spot_advisor`.
AWS_SPOT_ADVISOR = {
    ("us-east-1", "p4d.24xlarge"): (67, 2),
    ("us-east-1", "p4de.24xlarge"): (65, 0),
    ("us-east-1", "p5.48xlarge"): (52, 4),
    ("us-east-1", "g5.xlarge"): (59, 4),
    ("us-east-1", "g5.12xlarge"): (58, 4),
    ("us-east-1", "g5.48xlarge"): (71, 4),
    ("us-east-1", "g6.xlarge"): (49, 4),
    ("us-east-1", "g6.12xlarge"): (59, 4),
    ("us-east-1", "g4dn.xlarge"): (64, 3),
    ("us-east-1", "g4dn.12xlarge"): (64, 2),
    ("us-west-2", "p4d.24xlarge"): (53, 4),
    ("us-west-2", "p4de.24xlarge"): (67, 3),
    ("us-west-2", "p5.48xlarge"): (46, 1),
    ("us-west-2", "g5.xlarge"): (63, 4),
    ("us-west-2", "g5.12xlarge"): (70, 4),
    ("us-west-2", "g5.48xlarge"): (72, 4),
    ("us-west-2", "g6.xlarge"): (47, 4),
    ("us-west-2", "g6.12xlarge"): (62, 4),
    ("us-west-2", "g4dn.xlarge"): (64, 4),
    ("us-west-2", "g4dn.12xlarge"): (63, 2),
}
SPOT_ADVISOR_RANGES: list[dict[str, Any]] = [
    {"index": 0, "label": "<5%", "dots": 0, "max": 5},
    {"index": 1, "label": "5-10%", "dots": 1, "max": 11},
    {"index": 2, "label": "10-15%", "dots": 2, "max": 16},
    {"index": 3, "label": "15-20%", "dots": 3, "max": 22},
    {"index": 4, "label": ">20%", "dots": 4, "max": 100},
]
# The spot_mix truth prices an interruption with the spot model's documented defaults (the demo tags no
# checkpoint interval): half a 60-minute checkpoint interval redone plus a 20-minute restart.
SPOT_LOST_HOURS_PER_INTERRUPTION = Decimal(30 + 20) / 60
# Public list prices of the non-GPU lines (AWS / Google Cloud pricing pages).
STORAGE_USD_PER_GB_MONTH = {"aws": Decimal("0.08"), "gcp": Decimal("0.10")}
EGRESS_USD_PER_GB = {"aws": Decimal("0.09"), "gcp": Decimal("0.12")}

REGION_NAMES = {
    "us-east-1": "US East (N. Virginia)",
    "us-west-2": "US West (Oregon)",
    "us-central1": "Iowa",
    "europe-west4": "Netherlands",
    "dc1": "Datacentre 1",
}
PROVIDER_NAMES = {
    "aws": ("AWS", "Amazon Web Services, Inc."),
    "gcp": ("Google Cloud", "Google Cloud"),
    "onprem": ("onprem", "onprem"),
}
SERVICE_NAMES = {"aws": "Amazon Elastic Compute Cloud", "gcp": "Compute Engine", "onprem": "On-prem GPU cluster"}
ACCOUNTS = {  # provider -> (billing account id, name, {team: (sub-account id, name)}, default team key)
    "aws": ("012345678901", "Acme ML", {"research": ("023456789012", "research"), "*": ("004455667788", "ml-prod")}),
    "gcp": (
        "01A2B3-C4D5E6-F7A8B9",
        "Acme ML GCP",
        {"research": ("research-sbx-1177", "research-sbx"), "*": ("ml-prod-4821", "ml-prod")},
    ),
    "onprem": ("onprem", "Acme datacentre", {"*": ("dc1", "dc1")}),
}


def money(value: Decimal) -> Decimal:
    return value.quantize(MONEY)


# Where the demo and the evaluation write their price references (relative to the home), the header of
# Cyclenerd's GCP price history, and the config sources that load both (the spot and commitment models read them).
SPOT_ADVISOR_FILE = "reference/aws/spot-advisor-data.json"
GCP_PRICES_FILE = "reference/gcp/gcp_gpu_machine_price_changes.csv"
GCP_PRICES_HEADER = (
    "commit,commit_date,generated,machine_type,gpu_model,gpu_count,region,hour_ondemand_usd,hour_spot_usd,"
    "month_1y_cud_usd,month_3y_cud_usd,change_kind"
)
PRICE_REFERENCE_CONFIG = [
    "[sources.aws_spot_advisor]",
    'type = "aws_spot_advisor"',
    f'path = "{SPOT_ADVISOR_FILE}"',
    "",
    "[sources.gcp_prices]",
    'type = "gcp_price_history"',
    f'path = "{GCP_PRICES_FILE}"',
    "",
]
