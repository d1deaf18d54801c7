"""The export and API tests' fleet: hourly GPU cost lines of two AWS regions, one Google Cloud project
and an on-prem cluster (:func:`insert_cost_lines`), and one realistic finding of every kind
(:func:`realistic_recommendations`), shaped as the models write them. tests/conftest.py builds the
``feed_template`` / ``feed_warehouse`` fixtures from them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from gpufinops.models.recommendation import Recommendation, stable_id

# --- the fleet: (team, provider name, region, resource, instance type, GPU model, GPUs, pricing, $/hour)
FLEET = [
    ("vision", "AWS", "us-east-1", "i-0vision0001", "p4d.24xlarge", "A100-40GB", 8, "Standard", "21.96"),
    ("vision", "AWS", "us-east-1", "i-0vision0002", "p4d.24xlarge", "A100-40GB", 8, "Standard", "21.96"),
    ("vision", "Google Cloud", "us-central1", "vision-serve-1", "a2-highgpu-1g", "A100-40GB", 1, "Standard", "3.67"),
    *[
        ("vision", "AWS", "us-east-1", f"i-0visionapi0{n}", "g6.xlarge", "L4", 1, "Standard", "0.8048")
        for n in (1, 2, 3)
    ],
    ("nlp", "AWS", "us-west-2", "i-0nlp000001", "g5.48xlarge", "A10G", 8, "Standard", "16.288"),
    ("nlp", "AWS", "us-west-2", "i-0nlp000002", "g5.12xlarge", "A10G", 4, "Dynamic", "2.27"),
    ("search", "AWS", "us-east-1", "i-0search0001", "p4de.24xlarge", "A100-80GB", 8, "Standard", "27.45"),
    ("search", "AWS", "us-east-1", "i-0search0002", "p5.48xlarge", "H100-SXM", 8, "Standard", "55.04"),
]
HOURS = 48
START = datetime(2026, 11, 1, tzinfo=UTC)
CREATED = datetime(2026, 11, 3, 6, tzinfo=UTC)
ACCOUNTS = {"AWS": "111122223333", "Google Cloud": "vision-prod-1234"}
AWS_EAST, AWS_WEST, GCP_CENTRAL = (
    "aws/us-east-1/111122223333",
    "aws/us-west-2/111122223333",
    "gcp/us-central1/vision-prod-1234",
)
# the on-prem cluster dc1: one node group of 2 nodes x 8 H100s (16 GPUs), each node's GPUs billed to a team
ONPREM = [("search", "h100-node-1"), ("nlp", "h100-node-2")]
ONPREM_GROUP, ONPREM_GPUS_PER_NODE = "onprem-h100x8", 8


class NodeGroup(NamedTuple):
    """An on-prem node group: its name (the lines' instance type), its GPU model and GPUs per node."""

    name: str
    gpu_model: str
    gpus_per_node: int


def insert_cost_lines(con) -> None:
    """HOURS hourly usage lines per resource of FLEET (GPU instances, as an ingestor writes them) and per
    GPU slot of the on-prem nodes (as the onprem source writes them)."""
    for team, provider, region, resource, itype, model, gpus, pricing, rate in FLEET:
        con.execute(
            """INSERT INTO cost_line_items ("ProviderName", "RegionId", "SubAccountId", "ResourceId",
            "x_InstanceType", "x_GpuModel", "x_GpuCount", "PricingCategory", "ChargeCategory", "ServiceName",
            "ChargePeriodStart", "ChargePeriodEnd", "BilledCost", "EffectiveCost", "ListCost", "BillingCurrency", "x_Team")
            SELECT ?, ?, ?, ?, ?, ?, ?, ?, 'Usage', 'Compute', h, h + INTERVAL 1 HOUR, ?, ?, ?, 'USD', ?
            FROM (SELECT unnest(range(?::TIMESTAMPTZ, ?::TIMESTAMPTZ, INTERVAL 1 HOUR)) AS h)""",
            [
                provider,
                region,
                ACCOUNTS[provider],
                resource,
                itype,
                model,
                gpus,
                pricing,
                Decimal(rate),
                Decimal(rate),
                Decimal(rate),
                team,
                START,
                START + timedelta(hours=HOURS),
            ],
        )
    onprem = [(node, team) for team, node in ONPREM]
    extra = {"SubAccountName": "dc1", "ServiceName": "On-prem GPU cluster"}
    group = NodeGroup(ONPREM_GROUP, "H100-SXM", ONPREM_GPUS_PER_NODE)
    insert_onprem_slot_lines(con, onprem, group, Decimal("1.1"), extra)


def insert_onprem_slot_lines(
    con,
    nodes: Sequence[tuple[str, str | None]],
    group: NodeGroup,
    rate: Decimal,
    extra: dict[str, str],
    start: datetime = START,
    hours: int = HOURS,
) -> None:
    """``hours`` hourly lines from ``start`` per GPU slot of each on-prem (node, team) of cluster dc1, as the
    onprem source writes them: the node as resource, ``node/gpuN`` as name, its ``group``'s name as instance
    type, one of the group's GPUs, Committed, billed 0 and ``rate`` effective and list per slot-hour;
    ``extra``: more columns, each with its one value."""
    columns = "".join(f', "{name}"' for name in extra)
    window = [start, start + timedelta(hours=hours), group.gpus_per_node]
    for node, team in nodes:
        con.execute(
            f"""INSERT INTO cost_line_items ("ProviderName", "RegionId", "SubAccountId", "ResourceId",
            "ResourceName", "x_InstanceType", "x_GpuModel", "x_GpuCount", "PricingCategory", "ChargeCategory",
            "ChargePeriodStart", "ChargePeriodEnd", "BilledCost", "EffectiveCost", "ListCost", "BillingCurrency",
            "x_Team"{columns})
            SELECT 'onprem', 'dc1', 'dc1', ?, ? || '/gpu' || slot, ?, ?, 1, 'Committed', 'Usage',
                   h, h + INTERVAL 1 HOUR, 0, ?, ?, 'USD', ?{", ?" * len(extra)}
            FROM (SELECT unnest(range(?::TIMESTAMPTZ, ?::TIMESTAMPTZ, INTERVAL 1 HOUR)) AS h),
                 (SELECT unnest(range(?)) AS slot)""",
            [node, node, group.name, group.gpu_model, rate, rate, team, *extra.values(), *window],
        )


# the current shape of two on-demand instances, as the models write a finding's `current`
P4D = {
    "instance_type": "p4d.24xlarge",
    "gpu_model": "A100-40GB",
    "gpu_count": 8,
    "pricing": "on_demand",
    "monthly_cost_usd": 16030.80,
}
L4 = {
    "instance_type": "g6.xlarge",
    "gpu_model": "L4",
    "gpu_count": 1,
    "pricing": "on_demand",
    "monthly_cost_usd": 587.50,
}


class Subject(NamedTuple):
    """What a finding is about: the team, the provider code, the resource and the workload (None: not one)."""

    team: str
    provider: str
    resource: str | None
    workload: str | None


def _rec(
    kind: str,
    subject: Subject,
    current: dict,
    proposed: dict,
    savings: str,
    evidence: dict,
    risk: str = "low",
    *,
    id_parts: tuple[str, ...] = (),
) -> Recommendation:
    """A finding as the models write it; ``id_parts``: what else tells it from another on the same subject."""
    team, provider, resource, workload = subject
    return Recommendation(
        id=stable_id(kind, provider, resource, workload, *id_parts),
        kind=kind,
        team=team,
        provider=provider,
        resource_id=resource,
        workload=workload,
        current=current,
        proposed=proposed,
        monthly_savings_usd=Decimal(savings),
        confidence=0.8,
        risk=risk,
        evidence=evidence,
        created_at=CREATED,
    )


def realistic_recommendations() -> list[Recommendation]:
    """One finding of every kind, shaped as the models write them (current/proposed/evidence)."""
    p4d, l4 = P4D, L4
    return [
        _rec(
            "idle_gpu",
            Subject("vision", "aws", "i-0vision0001", None),
            p4d,
            {**p4d, "gpu_count": 0, "state": "stopped", "action": "stop the instance", "monthly_cost_usd": 0.0},
            "16030.80",
            {"pattern": "always_idle", "util_p95": 0.4, "mem_max_gib": 0.5, "window_days": 14},
        ),
        _rec(
            "spot_mix",
            Subject("vision", "aws", "i-0vision0002", "vision-train"),
            p4d,
            {**p4d, "pricing": "spot", "spot_share": 1.0, "on_demand_share": 0.0, "monthly_cost_usd": 6412.32},
            "9618.48",
            {
                "checkpointing": True,
                "latency_critical": False,
                "replicas": 1,
                "interruption_band": "<5%",
                "spot_ratio": 0.4,
                "window_days": 14,
            },
            risk="medium",
        ),
        *[
            _rec(
                "spot_mix",
                Subject("vision", "aws", f"i-0visionapi0{n}", "vision-api"),
                l4,
                {
                    **l4,
                    "pricing": "spot_mix",
                    "spot_share": 0.6667,
                    "on_demand_share": 0.3333,
                    "monthly_cost_usd": 355.93,
                },
                "231.58",
                {
                    "checkpointing": False,
                    "latency_critical": True,
                    "replicas": 3,
                    "interruption_band": "5-10%",
                    "spot_ratio": 0.42,
                    "window_days": 14,
                },
                risk="medium",
            )
            for n in (1, 2, 3)
        ],
        _rec(
            "gpu_type",
            Subject("vision", "gcp", "vision-serve-1", "vision-serving"),
            {
                "instance_type": "a2-highgpu-1g",
                "gpu_model": "A100-40GB",
                "gpu_count": 1,
                "pricing": "on_demand",
                "monthly_cost_usd": 2679.10,
            },
            {
                "instance_type": "g2-standard-8",
                "gpu_model": "L4",
                "gpu_count": 1,
                "pricing": "on_demand",
                "monthly_cost_usd": 623.42,
            },
            "2055.68",
            {"util_p95": 21.0, "mem_max_gib": 14.2, "window_days": 14, "fits_on": ["L4", "A10G"]},
        ),
        _rec(
            "gpu_count",
            Subject("nlp", "aws", "i-0nlp000001", "nlp-finetune"),
            {
                "instance_type": "g5.48xlarge",
                "gpu_model": "A10G",
                "gpu_count": 8,
                "pricing": "on_demand",
                "monthly_cost_usd": 11890.24,
            },
            {
                "instance_type": "g5.12xlarge",
                "gpu_model": "A10G",
                "gpu_count": 4,
                "pricing": "on_demand",
                "monthly_cost_usd": 4135.52,
            },
            "7754.72",
            {"util_p95": 38.0, "gpus_busy_p95": 3.2, "window_days": 14},
        ),
        _rec(
            "commitment",
            Subject("nlp", "aws", None, None),
            {"pricing": "on_demand", "monthly_cost_usd": 4135.52},
            {"pricing": "committed", "term": "1y", "hourly_commitment_usd": 3.9, "monthly_cost_usd": 2847.00},
            "1288.52",
            {"baseline_gpu_hours_p10": 2880, "window_days": 60},
        ),
        _rec(
            "quantization",
            Subject("search", "aws", "i-0search0001", "search-ranker"),
            {
                "instance_type": "p4de.24xlarge",
                "gpu_model": "A100-80GB",
                "gpu_count": 8,
                "pricing": "on_demand",
                "monthly_cost_usd": 20038.50,
                "precision": "fp16",
            },
            {
                "instance_type": "g6e.12xlarge",
                "gpu_model": "L40S",
                "gpu_count": 4,
                "pricing": "on_demand",
                "monthly_cost_usd": 7630.00,
                "precision": "int8",
            },
            "12408.50",
            {"model_params_b": 13, "mem_max_gib": 210.0, "int8_mem_gib": 105.0, "window_days": 14},
            risk="medium",
        ),
        _rec(
            "onprem_vs_cloud",
            Subject("search", "aws", "i-0search0002", "search-embed"),
            {
                "instance_type": "p5.48xlarge",
                "gpu_model": "H100-SXM",
                "gpu_count": 8,
                "pricing": "on_demand",
                "monthly_cost_usd": 40179.20,
            },
            {
                "provider": "onprem",
                "cluster": "dc1",
                "instance_type": ONPREM_GROUP,
                "gpu_model": "H100-SXM",
                "gpu_count": 8,
                "pricing": "owned",
                "monthly_cost_usd": 14212.00,
            },
            "25967.20",
            {"pattern": "repatriate", "util_mean": 71.0, "months_to_break_even": 11.5, "window_days": 60},
            risk="high",
        ),
    ]
