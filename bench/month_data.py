"""The month bench_month measures: a fleet's CUR 2.0 month and its DCGM sample store, generated in DuckDB.

Cached under ``bench/.cache/month/<gpus>gpus-<days>d/``: the CUR Parquet (``cur/``, its own ``COMPLETE``
marker) and the sample store (``store-v<N>/``, ``COMPLETE``), so a re-run measures only the product and a
change of the samples' generator regenerates the samples alone.

* the CUR month: GPU instances (p4d/p5 with 8 GPUs, g5.12xlarge with 4, g6.xlarge with 1) among the
  account's CPU instances, each instance-hour one compute line and five data-transfer lines, the
  ``product`` map without GPU attributes (the GPU counts come from the shipped inventory);
* one-minute DCGM samples of every GPU, each naming its instance in the ``instance_id`` label. The
  8-GPU instances are shared Kubernetes nodes: every GPU of theirs runs a team's pods, one pod per
  six hours after a ten-minute gap with no pod (the samples carry the pod's namespace, pod and
  container), so the shared-GPU allocation divides their GPU-hours among workloads.
"""

from __future__ import annotations

import os
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness import REPO_ROOT, write_sample_day

CACHE_DIR = REPO_ROOT / "bench" / ".cache" / "month"
SAMPLES_VERSION = 2  # bump when _samples_sql changes: the samples are regenerated, the CUR kept
START = datetime(2026, 10, 1, tzinfo=UTC)
PERIOD, EXPORT, CUR_SOURCE, GPU_SOURCE = "2026-10", "cur2", "cur", "gpus"
LINES_PER_HOUR = 6
LINES_PER_GPU_MONTH = 5_000  # 50M line items for 10,000 GPUs (the account's other instances included)
GPU_MIX = (
    ("p4d.24xlarge", 21.957642, 8, 0.40),
    ("p5.48xlarge", 55.04, 8, 0.20),
    ("g5.12xlarge", 5.672, 4, 0.20),
    ("g6.xlarge", 0.8048, 1, 0.20),
)  # type, $/h, GPUs, share of GPUs
CPU_TYPE = ("m7i.4xlarge", 0.8064)
TEAMS = ("research", "vision", "nlp", "platform", "ml-prod")
TAGS = ("team", "user_team")


def fleet(gpus: int) -> list[tuple[str, float, int, int]]:
    """(instance type, $/h, GPUs each, instances) of the GPU fleet."""
    return [(t, rate, per, max(1, round(gpus * share / per))) for t, rate, per, share in GPU_MIX]


def home_of(gpus: int, days: int) -> Path:
    return CACHE_DIR / f"{gpus}gpus-{days}d"


def store_of(home: Path) -> Path:
    return home / f"store-v{SAMPLES_VERSION}"


def _cur_sql(fleet_: list, first: int, last: int, hours: int) -> str:
    """CUR 2.0 line items of instances [first, last): GPU instances first, then CPU ones."""
    from bench.bench_pushdown import cur2_columns, sql_list

    bounds, types, rates = [], [], []
    for t, rate, _, count in fleet_:
        bounds.append(count)
        types.append(t)
        rates.append(rate)
    cum = [sum(bounds[: i + 1]) for i in range(len(bounds))]
    type_case = " ".join(f"WHEN inst < {c} THEN {i}" for i, c in enumerate(cum))
    names, rate_list = sql_list(types + [CPU_TYPE[0]]), sql_list(rates + [CPU_TYPE[1]])
    columns = cur2_columns(
        {
            "bill_invoicing_entity": "'Amazon Web Services, Inc.'",
            "bill_invoice_id": "'EUINUS26-1001'",
            "line_item_usage_account_id": "'004455667788'",
            "line_item_legal_entity": "'Amazon Web Services, Inc.'",
            "line_item_usage_type": (
                f"CASE WHEN compute THEN 'USE1-BoxUsage:' || {names}[type_idx + 1] "
                "ELSE 'USE1-DataTransfer-Out-Bytes' END"
            ),
            "line_item_unblended_rate": "CASE WHEN compute THEN rate ELSE 0.09 END",
            "pricing_public_on_demand_cost": "cost",
            "pricing_public_on_demand_rate": "CASE WHEN compute THEN rate ELSE 0.09 END",
            "pricing_term": "'OnDemand'",
            "product_instance_type": f"CASE WHEN compute THEN {names}[type_idx + 1] END",
            # no `gpu` attribute in the product map: the inventory supplies the GPU counts
            "product": (
                f"CASE WHEN compute THEN MAP {{'product_name': 'Amazon Elastic Compute Cloud', "
                f"'region': 'us-east-1', 'instance_type': {names}[type_idx + 1]}} "
                f"ELSE MAP {{'product_name': 'Amazon Elastic Compute Cloud', 'region': 'us-east-1'}} END"
            ),
        }
    )
    return f"""
        WITH base AS (
            SELECT inst, h, line, CASE {type_case} ELSE {len(types)} END AS type_idx, line = 0 AS compute,
                   round(0.1 + (hash(inst, h, line) % 499000) / 10000.0, 6) AS gb
            FROM range({first}, {last}) i(inst), range({hours}) hh(h), range({LINES_PER_HOUR}) ll(line)),
        priced AS (
            SELECT *, {rate_list}[type_idx + 1] AS rate,
                   CASE WHEN compute THEN {rate_list}[type_idx + 1] ELSE round(gb * 0.09, 8) END AS cost FROM base)
        SELECT {columns} FROM priced ORDER BY inst, h, line"""


def _samples_sql(gpu_rows: str, start: datetime, minutes: int) -> str:
    """One-minute samples of every GPU in ``gpu_rows`` (g, inst, per) for ``minutes`` from ``start``."""
    from gpufinops.ingest.metrics.metrics_store import SAMPLE_SCHEMA
    from gpufinops.warehouse.column_types import sql_type

    teams = "[" + ", ".join(f"'{t}'" for t in TEAMS) + "]"
    values = {
        "ts": f"TIMESTAMPTZ '{start.isoformat()}' + to_minutes(m)",
        "gpu_uuid": "printf('GPU-%08d-0000-0000-0000-000000000000', g)",
        "gpu_index": "CAST(slot AS VARCHAR)",
        "name": "model",
        "host": "printf('node-%06d', inst)",
        "resource_hint": "'i-0' || lpad(lower(to_hex(inst)), 16, '0')",
        # shared Kubernetes nodes (8 GPUs): a team's pod per GPU and six hours, none in its first ten minutes
        "namespace": f"CASE WHEN per = 8 AND (m0 + m) % 360 >= 10 THEN {teams}[inst % {len(TEAMS)} + 1] END",
        "pod": "CASE WHEN per = 8 AND (m0 + m) % 360 >= 10 THEN printf('train-%d-%d', g, (m0 + m) // 360) END",
        "container": "CASE WHEN per = 8 AND (m0 + m) % 360 >= 10 THEN 'main' END",
        # a fifth of the GPUs idle, the rest busy with noise: idle_gpu and gpu_count have work to do
        "util": "CASE WHEN g % 5 = 0 THEN CAST(hash(g, m) % 3 AS DOUBLE) ELSE CAST(30 + hash(g, m) % 61 AS DOUBLE) END",
        "sm_active": "CAST(hash(g, m) % 101 AS DOUBLE) / 110",
        "mem_used_mib": "CASE WHEN g % 5 = 0 THEN 400.0 ELSE CAST(10000 + hash(g, m // 60) % 30000 AS DOUBLE) END",
        "mem_free_mib": "CASE WHEN g % 5 = 0 THEN 40000.0 ELSE CAST(30000 - hash(g, m // 60) % 30000 AS DOUBLE) END",
        "power_w": "80 + CAST(hash(g, m) % 101 AS DOUBLE) * 3",
    }
    m0 = int((start - START).total_seconds() // 60)
    select = ", ".join(f"CAST({values.get(f.name, 'NULL')} AS {sql_type(f)}) AS {f.name}" for f in SAMPLE_SCHEMA)
    return f"SELECT {select} FROM range({minutes}) s(m), (SELECT *, {m0} AS m0 FROM ({gpu_rows})) gpus ORDER BY m, g"


def _gpu_rows(fleet_: list) -> str:
    """(g, inst, slot, model, per): every GPU of the fleet, its instance and its instance's GPU count."""
    models = {
        "p4d.24xlarge": "NVIDIA A100-SXM4-40GB",
        "p5.48xlarge": "NVIDIA H100 80GB HBM3",
        "g5.12xlarge": "NVIDIA A10G",
        "g6.xlarge": "NVIDIA L4",
    }
    parts, inst0, g0 = [], 0, 0
    for t, _, per, count in fleet_:
        parts.append(
            f"SELECT {g0} + i * {per} + s AS g, {inst0} + i AS inst, s AS slot, '{models[t]}' AS model, {per} AS per "
            f"FROM range({count}) a(i), range({per}) b(s)"
        )
        inst0, g0 = inst0 + count, g0 + count * per
    return " UNION ALL ".join(parts)


def generate(gpus: int, days: int) -> dict[str, Any]:
    """The CUR month and the sample store, each generated once and cached."""
    import duckdb

    from gpufinops.ingest.aws.aws_cur2_format import write_manifest

    fleet_ = fleet(gpus)
    home, hours = home_of(gpus, days), days * 24
    gpu_instances = sum(count for *_, count in fleet_)
    instances = max(gpu_instances, gpus * LINES_PER_GPU_MONTH * days // 30 // (hours * LINES_PER_HOUR))
    lines = instances * hours * LINES_PER_HOUR
    samples = sum(per * count for _, _, per, count in fleet_) * days * 1440
    figures = {"rows": lines + samples, "line_items": lines, "samples": samples}
    cur, store = home / "cur", store_of(home)
    if (cur / "COMPLETE").exists() and (store / "COMPLETE").exists():
        return figures
    home.mkdir(parents=True, exist_ok=True)
    if (home / "COMPLETE").exists() and (cur / EXPORT).is_dir():  # a cache of the one-marker layout: its CUR is whole
        (cur / "COMPLETE").write_text("ok\n")
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET memory_limit = '3GB'")
    con.execute(f"SET temp_directory = '{home / 'tmp'}'")  # spills beside the cache, not in the working dir
    if not (cur / "COMPLETE").exists():
        shutil.rmtree(cur, ignore_errors=True)
        data_dir = cur / EXPORT / "data" / f"BILLING_PERIOD={PERIOD}"
        data_dir.mkdir(parents=True)
        per_file = max(1, 1_000_000 // (hours * LINES_PER_HOUR))
        keys = []
        for number, first in enumerate(range(0, instances, per_file), start=1):
            name = f"{EXPORT}-{number:05d}.snappy.parquet"
            con.execute(
                f"COPY ({_cur_sql(fleet_, first, min(first + per_file, instances), hours)}) TO "
                f"'{data_dir / name}' (FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 131072)"
            )
            keys.append(f"s3://billing/{EXPORT}/data/BILLING_PERIOD={PERIOD}/{name}")
            print(f"  generated CUR file {number}", file=sys.stderr, flush=True)
        write_manifest(cur, EXPORT, PERIOD, keys, "delivery-1")
        (cur / "COMPLETE").write_text("ok\n")
    if not (store / "COMPLETE").exists():
        for old in home.glob("store-v*"):  # another generator's samples
            shutil.rmtree(old)
        for day in range(days):
            day_start = START + timedelta(days=day)
            select = _samples_sql(_gpu_rows(fleet_), day_start, 1440)
            write_sample_day(con, store, day_start, select, ", ROW_GROUP_SIZE 1000000")
            print(f"  generated samples of day {day + 1}/{days}", file=sys.stderr, flush=True)
        (store / "COMPLETE").write_text("ok\n")
    con.close()
    return figures


def warehouse(home: Path, name: str) -> Path:
    """A fresh warehouse whose sample store holds hard links to the generated samples."""
    folder = home / name
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "samples").mkdir(parents=True)
    target = folder / "samples" / GPU_SOURCE
    for day in sorted(store_of(home).glob("day=*")):
        (target / day.name).mkdir(parents=True)
        for f in day.glob("*.parquet"):
            os.link(f, target / day.name / f.name)
    return folder / "gpufinops.duckdb"


def scrape_file(home: Path) -> Path:
    """A one-sample exposition (a sample the store already holds): a scrape that adds nothing new."""
    path = home / "scrape.prom"
    ts = int(START.timestamp() * 1000)
    path.write_text(
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-00000000-0000-0000-0000-000000000000",'
        f'Hostname="node-000000",instance_id="i-00000000000000000"}} 0 {ts}\n'
    )
    return path
