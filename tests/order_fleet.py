"""A small AWS fleet as a real account feeds it: CUR 2.0 without GPU attributes, restated, and its GPU
metrics in each utilisation source's own format — so a test can feed them in any order.

Four instances over 8 days (one sample every 5 minutes), each found a different way:

* ``IDLE`` (g5.xlarge) names itself in the DCGM ``instance_id`` label; idle the whole window;
* ``SPARE`` (g5.12xlarge, 4 × A10G) is host ``node-b`` in ``resource_map``; one GPU busy, three spare;
* ``NS`` (g6.xlarge) is found through its Kubernetes node's providerID, its pods in namespace
  ``ml-train`` (→ team ``vision`` by ``namespace_teams``);
* ``SELF`` (g5.xlarge) is a host named like its instance id; busy.

The bill is CUR 2.0 with no ``gpu`` key in the ``product`` map (so GPU counts come from the shipped
inventory), delivered once and then restated: the restatement moves ``SPARE`` from team ``nlp`` to
``speech`` and revises every cost. nvidia-smi logs carry no labels, so that source maps every host.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from gpufinops.ingest.aws.aws_cur2_format import conform, write_delivery

START = datetime(2026, 9, 3, tzinfo=UTC)
DAYS = 8
STEP_MIN = 5
PERIOD = START.strftime("%Y-%m")
PRICES = {"g5.xlarge": Decimal("1.006"), "g5.12xlarge": Decimal("5.672"), "g6.xlarge": Decimal("0.8048")}
GPU_NAMES = {
    "g5.xlarge": ("NVIDIA A10G", 23028),
    "g5.12xlarge": ("NVIDIA A10G", 23028),
    "g6.xlarge": ("NVIDIA L4", 23034),
}


@dataclass(frozen=True)
class Box:
    resource_id: str
    instance_type: str
    host: str
    gpus: int
    busy: tuple[float, ...]  # mean utilisation per GPU
    labels: dict
    team_v1: str
    team_v2: str


IDLE = Box(
    "i-0aaaaaaaaaaaaaaa1",
    "g5.xlarge",
    "ip-10-1-0-1",
    1,
    (0.5,),
    {"instance_id": "i-0aaaaaaaaaaaaaaa1"},
    "research",
    "research",
)
SPARE = Box("i-0bbbbbbbbbbbbbbb2", "g5.12xlarge", "node-b", 4, (65.0, 0.4, 0.3, 0.2), {}, "nlp", "speech")
NS = Box(
    "i-0ccccccccccccccc3",
    "g6.xlarge",
    "ip-10-1-0-3",
    1,
    (45.0,),
    {
        "provider_id": "aws:///us-east-1a/i-0ccccccccccccccc3",
        "namespace": "ml-train",
        "pod": "trainer-0",
        "container": "main",
    },
    "platform",
    "platform",
)
SELF = Box("i-0ddddddddddddddd4", "g5.xlarge", "i-0ddddddddddddddd4", 1, (55.0,), {}, "vision", "vision")
FLEET = (IDLE, SPARE, NS, SELF)
RESOURCE_MAP = {"node-b": SPARE.resource_id}
NAMESPACE_TEAMS = {"ml-train": "vision"}
# nvidia-smi logs carry no labels: every host that is not its own instance id is mapped
SMI_RESOURCE_MAP = {IDLE.host: IDLE.resource_id, SPARE.host: SPARE.resource_id, NS.host: NS.resource_id}
# what each finished warehouse must say, whatever the order (source type -> resource -> team)
EXPECTED_TEAMS = {
    "dcgm_exporter": {
        IDLE.resource_id: "research",
        SPARE.resource_id: "speech",
        NS.resource_id: "vision",
        SELF.resource_id: "vision",
    },
    "prometheus": {
        IDLE.resource_id: "research",
        SPARE.resource_id: "speech",
        NS.resource_id: "vision",
        SELF.resource_id: "vision",
    },
    "nvidia_smi_csv": {
        IDLE.resource_id: "research",
        SPARE.resource_id: "speech",
        NS.resource_id: "platform",
        SELF.resource_id: "vision",
    },
}


def _uuid(box: Box, gpu: int) -> str:
    return f"GPU-{box.resource_id[-8:]}-{gpu:04d}-0000-0000-000000000000"


def _util(box: Box, gpu: int, step: int) -> float:
    base = box.busy[gpu]
    if base < 5:
        return float(step % 2)  # 0–1 %: idle
    return float(round(base + 10 * ((step * 7 + gpu * 3) % 5 - 2) / 2))  # base ± 10


def _mem(box: Box, gpu: int) -> float:
    return 300.0 if box.busy[gpu] < 5 else 14000.0


def samples() -> list[tuple[Box, int, datetime, float, float]]:
    """(box, gpu, time, utilisation %, memory used MiB) for every sample."""
    out = []
    steps = DAYS * 24 * 60 // STEP_MIN
    for box in FLEET:
        for gpu in range(box.gpus):
            for step in range(steps):
                out.append(
                    (box, gpu, START + timedelta(minutes=STEP_MIN * step), _util(box, gpu, step), _mem(box, gpu))
                )
    return out


def _labels(box: Box, gpu: int) -> dict[str, str]:
    name, _ = GPU_NAMES[box.instance_type]
    return {"gpu": str(gpu), "UUID": _uuid(box, gpu), "modelName": name, "Hostname": box.host, **box.labels}


def _metrics(box: Box, gpu: int, util: float, used: float) -> dict[str, float]:
    total = GPU_NAMES[box.instance_type][1]
    return {
        "DCGM_FI_DEV_GPU_UTIL": util,
        "DCGM_FI_DEV_FB_USED": used,
        "DCGM_FI_DEV_FB_FREE": total - used - 500,
        "DCGM_FI_DEV_FB_RESERVED": 500.0,
        "DCGM_FI_DEV_POWER_USAGE": round(30 + util * 1.2, 2),
    }


def _series_rows():
    for box, gpu, ts, util, used in samples():
        labels = "{" + ",".join(f'{k}="{v}"' for k, v in _labels(box, gpu).items()) + "}"
        for metric, value in _metrics(box, gpu, util, used).items():
            yield metric, labels, value, int(ts.timestamp() * 1000), box


def write_dcgm(folder: Path) -> dict:
    """One recorded exposition per host (timestamps in ms); returns the dcgm_exporter options."""
    folder.mkdir(parents=True, exist_ok=True)
    per_host: dict[str, list[str]] = {}
    for metric, labels, value, ts, box in _series_rows():
        per_host.setdefault(box.host, []).append(f"{metric}{labels} {value!r} {ts}")
    for host, lines in per_host.items():
        (folder / f"{host}.prom").write_text("\n".join(lines) + "\n")
    return {"targets": [str(folder / "*.prom")], "resource_map": RESOURCE_MAP, "namespace_teams": NAMESPACE_TEAMS}


def openmetrics() -> str:
    """Every series as OpenMetrics for ``promtool tsdb create-blocks-from openmetrics``."""
    lines, typed = [], set()
    for metric, labels, value, ts, _ in sorted(_series_rows(), key=lambda r: (r[0], r[1], r[3])):
        if metric not in typed:
            typed.add(metric)
            lines.append(f"# TYPE {metric} gauge")
        lines.append(f"{metric}{labels} {value!r} {ts / 1000:.3f}")
    return "\n".join(lines) + "\n"


def prometheus_options(url: str) -> dict:
    return {"url": url, "resource_map": RESOURCE_MAP, "namespace_teams": NAMESPACE_TEAMS}


SMI_HEADER = (
    "timestamp, name, pci.bus_id, uuid, index, utilization.gpu [%], memory.total [MiB], "
    "memory.used [MiB], power.draw [W]"
)


def write_nvidia_smi(folder: Path) -> dict:
    """``nvidia-smi --query-gpu … --format=csv -l 300`` logs, one ``<host>.csv`` per host."""
    folder.mkdir(parents=True, exist_ok=True)
    per_host: dict[str, list[str]] = {}
    for box, gpu, ts, util, used in samples():
        name, total = GPU_NAMES[box.instance_type]
        per_host.setdefault(box.host, [SMI_HEADER]).append(
            f"{ts:%Y/%m/%d %H:%M:%S}.000, {name}, 00000000:00:{0x1B + gpu:02X}.0, {_uuid(box, gpu)}, {gpu}, "
            f"{util:.0f} %, {total} MiB, {used:.0f} MiB, {30 + util * 1.2:.2f} W"
        )
    for host, lines in per_host.items():
        (folder / f"{host}.csv").write_text("\n".join(lines) + "\n")
    return {"path": str(folder / "*.csv"), "resource_map": SMI_RESOURCE_MAP}


def _cur_rows(version: int) -> list[dict]:
    start, end = START.replace(day=1, tzinfo=None), START.replace(month=START.month + 1, day=1, tzinfo=None)
    base = {
        "bill_payer_account_id": "012345678901",
        "bill_payer_account_name": "Acme",
        "bill_billing_period_start_date": start,
        "bill_billing_period_end_date": end,
        "bill_billing_entity": "AWS",
        "bill_invoicing_entity": "Amazon Web Services, Inc.",
        "bill_invoice_id": "EUINUS26-0001",
        "line_item_usage_account_id": "004455667788",
        "line_item_currency_code": "USD",
        "line_item_legal_entity": "Amazon Web Services, Inc.",
        "line_item_product_code": "AmazonEC2",
        "line_item_line_item_type": "Usage",
    }
    rows = []
    for box in FLEET:
        team = box.team_v1 if version == 1 else box.team_v2
        price = PRICES[box.instance_type] * (Decimal("1") if version == 1 else Decimal("0.97"))
        for hour in range(DAYS * 24):
            t = START.replace(tzinfo=None) + timedelta(hours=hour)
            rows.append(
                {
                    **base,
                    "line_item_usage_start_date": t,
                    "line_item_usage_end_date": t + timedelta(hours=1),
                    "identity_line_item_id": f"{box.resource_id}-{hour}",
                    "line_item_resource_id": box.resource_id,
                    "line_item_unblended_cost": float(price),
                    "line_item_unblended_rate": float(price),
                    "line_item_usage_amount": 1.0,
                    "line_item_usage_type": f"USE1-BoxUsage:{box.instance_type}",
                    "pricing_term": "OnDemand",
                    "pricing_unit": "Hrs",
                    "pricing_public_on_demand_cost": float(PRICES[box.instance_type]),
                    "pricing_public_on_demand_rate": float(PRICES[box.instance_type]),
                    "product_instance_type": box.instance_type,
                    "product_region_code": "us-east-1",
                    "product_product_family": "Compute Instance",
                    "line_item_line_item_description": f"On Demand Linux {box.instance_type} Instance Hour",
                    # no "gpu" attribute: the count comes from the inventory
                    "product": [
                        ("instance_type", box.instance_type),
                        ("region", "us-east-1"),
                        ("product_name", "Amazon Elastic Compute Cloud"),
                    ],
                    "resource_tags": [("user_team", team)],
                }
            )
    return rows


def write_cur(root: Path, version: int) -> dict:
    """Deliver (``version`` 1) or restate (2) the month's CUR 2.0 export under ``root``; aws_cur options."""
    rows = _cur_rows(version)
    columns = {name: [row[name] for row in rows] for name in rows[0]}
    write_delivery(root, "cur2", PERIOD, [conform(columns)], execution_id=f"delivery-{version}")
    return {"path": str(root), "format": "cur2"}
