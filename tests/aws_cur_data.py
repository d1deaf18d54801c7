"""CUR 2.0 line items for the tests, in the CUR 2.0 schema, covering every line item type.

Per account and billing period: on-demand and spot GPU instance hours, Savings Plan covered usage
with its negation and recurring fee, RI discounted usage with its RI fee and upfront fee, a credit,
a refund, tax, EBS storage; optionally EKS split-cost rows. Each row's expected FOCUS values are
returned beside it, so the tests compare the warehouse with numbers written down independently.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from gpufinops.ingest.aws.aws_cur2_format import conform, write_delivery
from tests.conftest import DATA

AWS_DATA = DATA / "aws"
KOKU_LAYOUT = AWS_DATA / "koku" / "aws-cur-bucket-layout"
LEGACY_CSV = AWS_DATA / "focus-converters" / "aws-cur-legacy-anonymized-2023-11.csv"
SP_ARN = "arn:aws:savingsplans::111122223333:savingsplan/4f1c2a"
RI_ARN = "arn:aws:ec2:us-east-1:111122223333:reserved-instances/5e7d-9a"


DESCRIPTIONS = {
    "SavingsPlanCoveredUsage": "Compute Savings Plan covered usage, p4d.24xlarge Linux/UNIX instance hour",
    "SavingsPlanRecurringFee": "1 year No Upfront Compute Savings Plan recurring fee",
    "DiscountedUsage": "USD 0.0 hourly fee per Linux/UNIX (Amazon VPC), p4d.24xlarge instance",
    "RIFee": "USD 30.5 hourly fee per Linux/UNIX (Amazon VPC), p4d.24xlarge instance",
    "Usage": "$0.08 per GB-month of General Purpose SSD (gp3) provisioned storage - US East (N. Virginia)",
    "Tax": "Tax for product code AmazonEC2",
}


@dataclass
class Line:
    columns: dict
    effective: Decimal
    category: str
    pricing: str | None


def _hour(period: str, hour: int) -> datetime:
    return datetime.strptime(period, "%Y-%m") + timedelta(hours=hour)


def lines(account: str, period: str, scale: Decimal = Decimal(1), split: bool = False) -> list[Line]:
    start = datetime.strptime(period, "%Y-%m")
    end = start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    base = {
        "bill_payer_account_id": account,
        "bill_payer_account_name": f"payer {account}",
        "bill_billing_period_start_date": start,
        "bill_billing_period_end_date": end,
        "bill_billing_entity": "AWS",
        "bill_invoicing_entity": "Amazon Web Services, Inc.",
        "bill_invoice_id": f"{period.replace('-', '')}{account[-6:]}",
        "line_item_usage_account_id": "004455667788",
        "line_item_currency_code": "USD",
        "line_item_legal_entity": "Amazon Web Services, Inc.",
        "line_item_product_code": "AmazonEC2",
    }
    out: list[Line] = []

    def add(hour: int, kind: str, cost: str, effective: str, category: str, pricing: str | None, **cols) -> None:
        t = _hour(period, hour)
        row = {
            **base,
            "line_item_line_item_type": kind,
            "line_item_unblended_cost": float(Decimal(cost) * scale),
            "line_item_usage_start_date": t,
            "line_item_usage_end_date": t + timedelta(hours=1),
            "identity_line_item_id": f"{account}-{period}-{len(out)}",
            **cols,
        }
        # AWS describes every line item; where a case above gives none, a description in AWS's wording
        row.setdefault("line_item_line_item_description", DESCRIPTIONS.get(kind, kind))
        out.append(Line(row, Decimal(effective) * scale, category, pricing))

    gpu: dict[str, Any] = {
        "product": {
            "instance_type": "p4d.24xlarge",
            "region": "us-east-1",
            "gpu": "8",
            "product_name": "Amazon Elastic Compute Cloud",
        },
        "product_instance_type": "p4d.24xlarge",
        "product_region_code": "us-east-1",
        "product_product_family": "Compute Instance",
        "line_item_resource_id": "i-0aaa1111bbbb2222c",
        "pricing_unit": "Hrs",
        "line_item_usage_amount": 1.0,
        "pricing_public_on_demand_cost": 21.957642,
        "pricing_public_on_demand_rate": 21.957642,
        "resource_tags": {"user_team": "research"},
    }
    add(
        0,
        "Usage",
        "21.957642",
        "21.957642",
        "Usage",
        "Standard",
        **gpu,
        pricing_term="OnDemand",
        line_item_usage_type="USE1-BoxUsage:p4d.24xlarge",
        line_item_line_item_description="$21.957642 per On Demand Linux p4d.24xlarge Instance Hour",
    )
    spot = {
        **gpu,
        "product": {**gpu["product"], "instance_type": "g5.12xlarge", "gpu": "4"},
        "product_instance_type": "g5.12xlarge",
        "line_item_resource_id": "i-0ccc3333dddd4444e",
        "pricing_public_on_demand_cost": 5.672,
        "pricing_public_on_demand_rate": 5.672,
        "resource_tags": {"user_team": "vision"},
    }
    add(
        1,
        "Usage",
        "1.9852",
        "1.9852",
        "Usage",
        "Dynamic",
        **spot,
        pricing_term="Spot",
        line_item_usage_type="USE1-SpotUsage:g5.12xlarge",
        line_item_line_item_description="Linux/UNIX (Amazon VPC), g5.12xlarge Spot Instance-hour",
    )
    add(
        2,
        "SavingsPlanCoveredUsage",
        "21.957642",
        "13.61373804",
        "Usage",
        "Committed",
        **gpu,
        savings_plan_savings_plan_a_r_n=SP_ARN,
        savings_plan_savings_plan_effective_cost=13.61373804,
        savings_plan_savings_plan_rate=13.61373804,
        line_item_usage_type="USE1-BoxUsage:p4d.24xlarge",
    )
    add(
        2,
        "SavingsPlanNegation",
        "-21.957642",
        "0",
        "Usage",
        None,
        savings_plan_savings_plan_a_r_n=SP_ARN,
        line_item_line_item_description="SavingsPlanNegation used by AccountId : 004455667788 and UsageSku : X",
    )
    add(
        0,
        "SavingsPlanRecurringFee",
        "20",
        "6.38626196",
        "Purchase",
        None,
        savings_plan_savings_plan_a_r_n=SP_ARN,
        savings_plan_total_commitment_to_date=20.0,
        savings_plan_used_commitment=13.61373804,
        savings_plan_recurring_commitment_for_billing_period=20.0,
    )
    add(
        3,
        "DiscountedUsage",
        "0",
        "13.6137380400",
        "Usage",
        "Committed",
        **gpu,
        reservation_reservation_a_r_n=RI_ARN,
        reservation_effective_cost=13.61373804,
        line_item_usage_type="USE1-BoxUsage:p4d.24xlarge",
    )
    add(
        0,
        "RIFee",
        "30.5",
        "7.25",
        "Purchase",
        None,
        reservation_reservation_a_r_n=RI_ARN,
        reservation_unused_amortized_upfront_fee_for_billing_period=2.5,
        reservation_unused_recurring_fee=4.75,
    )
    add(
        0,
        "Fee",
        "1000",
        "0",
        "Purchase",
        None,
        reservation_reservation_a_r_n=RI_ARN,
        line_item_line_item_description="Sign up charge for subscription: 5e7d-9a, planId: 123",
    )
    add(
        4,
        "Usage",
        "0.2666666667",
        "0.2666666667",
        "Usage",
        "Standard",
        line_item_resource_id="vol-0abc",
        product={"product_name": "Amazon Elastic Compute Cloud", "region": "us-east-1"},
        product_product_family="Storage",
        pricing_unit="GB-Mo",
        line_item_usage_amount=3.3333333333,
        line_item_usage_type="USE1-EBS:VolumeUsage.gp3",
        resource_tags={"user_team": "research"},
    )
    add(0, "Credit", "-5.25", "-5.25", "Credit", None, line_item_line_item_description="AWS Activate credit")
    add(0, "Refund", "-2.10", "-2.10", "Adjustment", None, line_item_line_item_description="Refund")
    add(0, "Tax", "1.57", "1.57", "Tax", None, line_item_product_code="AmazonEC2", line_item_tax_type="Sales")
    if split:  # one p4d instance-hour shared by two pods of two teams (EKS split cost allocation)
        for pod, team, share, unused in (("train-0", "research", "15.0", "1.457642"), ("serve-1", "nlp", "5.0", "0.5")):
            add(
                5,
                "Usage",
                "21.957642",
                str(Decimal(share) + Decimal(unused)),
                "Usage",
                "Standard",
                **{
                    **gpu,
                    "line_item_resource_id": f"arn:aws:eks:us-east-1:004455667788:pod/ml/{pod}",
                    "split_line_item_parent_resource_id": "i-0aaa1111bbbb2222c",
                    "split_line_item_split_cost": float(share),
                    "split_line_item_unused_cost": float(unused),
                    "resource_tags": {"k8s_label_team": team},
                },
                line_item_usage_type="USE1-BoxUsage:p4d.24xlarge",
                line_item_line_item_description="$21.957642 per On Demand Linux p4d.24xlarge Instance Hour",
            )
    return out


def table(rows: list[Line]):
    names = sorted({k for line in rows for k in line.columns})
    columns = {}
    for name in names:
        values = [line.columns.get(name) for line in rows]
        if name in ("product", "resource_tags"):
            values = [list(v.items()) if v is not None else None for v in values]
        columns[name] = values
    return conform(columns)


def write_cur2(root: Path, deliveries: dict[str, list[Line]], export: str = "cur2", prefix: str = "") -> None:
    for period, rows in deliveries.items():
        write_delivery(root, export, period, [table(rows)], prefix=prefix)


def legacy_layout(
    root: Path,
    csv_path: Path,
    report: str = "legacy",
    period: str = "20231101-20231201",
    assembly: str = "2b8f4d1e-0c1a-4b7e-9d3e-5a6f7b8c9d0e",
    prefix: str = "",
) -> Path:
    """Put a legacy CUR file where AWS delivers it, with a manifest like koku's real one."""
    folder = root / report / period / assembly
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(csv_path, folder / f"{report}-1{''.join(csv_path.suffixes)}")
    key = "/".join(p for p in (prefix, report, period, assembly, f"{report}-1{''.join(csv_path.suffixes)}") if p)
    manifest = {
        "assemblyId": assembly,
        "account": "000000000000",
        "reportName": report,
        "billingPeriod": {"start": f"{period[:8]}T000000.000Z", "end": f"{period[9:]}T000000.000Z"},
        "bucket": "billing",
        "reportKeys": [key],
        "compression": "GZIP" if csv_path.suffix == ".gz" else "None",
        "contentType": "text/csv",
    }
    path = root / report / period / f"{report}-Manifest.json"
    path.write_text(json.dumps(manifest))
    return path
