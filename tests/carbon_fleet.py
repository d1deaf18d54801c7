"""A small fleet with known GPU power for the carbon tests: bills with regions, GPU-hours, pods.

``build`` writes it into a warehouse and computes the allocation and ``carbon_hourly`` as a load does.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpufinops.derived import allocation, carbon
from gpufinops.derived.carbon_settings import CarbonSettings, store

START = datetime(2026, 11, 2, tzinfo=UTC)


def line(con, resource, hour, provider, region, gpus, team, tags=None):
    con.execute(
        'INSERT INTO cost_line_items ("ResourceId", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", '
        '"ProviderName", "RegionId", "x_GpuCount", "x_GpuModel", "EffectiveCost", "BilledCost", "x_Team", '
        '"x_InstanceType", "Tags", "x_Source") VALUES (?, ?, ?, \'Usage\', ?, ?, ?, \'A100-40GB\', 10, 10, ?, '
        "'p4d.24xlarge', ?, 'bills')",
        [
            resource,
            START + timedelta(hours=hour),
            START + timedelta(hours=hour + 1),
            provider,
            region,
            gpus,
            team,
            tags,
        ],
    )


def gpu(con, resource, hour, uuid, power, mig=None, source="dcgm"):
    con.execute(
        "INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, gpu_model, mig_instance, host, resource_id, samples, "
        "util_max, util_mean, util_p95, power_mean_w, source) VALUES (?, ?, 'A100-40GB', ?, 'node', ?, 60, 50, 50, 50, "
        "?, ?)",
        [START + timedelta(hours=hour), uuid, mig, resource, power, source],
    )


def pod(con, hour, uuid, namespace, name, mig=None, samples=60):
    con.execute(
        "INSERT INTO gpu_workloads_hourly (hour, gpu_uuid, mig_instance, host, namespace, pod, samples, "
        "occupied_samples, source) VALUES (?, ?, ?, 'node', ?, ?, ?, ?, 'dcgm')",
        [START + timedelta(hours=hour), uuid, mig, namespace, name, samples, samples],
    )


def build(con, settings: CarbonSettings | None = None, *, unallocated: str = "show") -> list[dict]:
    # i-aws: 2 GPUs in us-east-1; hour 0: pod ml/p1 holds GPU-A all hour, GPU-B idles; hour 1: nothing runs
    for h in (0, 1):
        line(con, "i-aws", h, "AWS", "us-east-1", 2, "ml")
        gpu(con, "i-aws", h, "GPU-A", 300.0)
        gpu(con, "i-aws", h, "GPU-B", 200.0)
    pod(con, 0, "GPU-A", "ml", "p1")
    pod(con, 0, "GPU-B", "vision", "p2", samples=30)  # half the hour
    # i-gcp: measured, never allocated (no workloads): one row per resource-hour
    line(con, "i-gcp", 0, "Google Cloud", "us-central1", 1, "vision")
    gpu(con, "i-gcp", 0, "GPU-G", 250.0)
    # i-dark: billed, no metrics at all: withheld
    line(con, "i-dark", 0, "AWS", "us-east-1", 8, "ml")
    # i-noregion: a bill without a region
    line(con, "i-noregion", 0, "AWS", None, 1, "ml")
    gpu(con, "i-noregion", 0, "GPU-N", 100.0)
    if settings is not None:
        store(con, settings)
    allocation.reallocate_all(con, allocation.AllocationSettings(unallocated=unallocated))
    carbon.recompute_all(con)  # also the resource-days only a bill names (a cost load's scope holds them)
    cur = con.execute("SELECT * FROM carbon_hourly ORDER BY resource_id, hour, gpu_uuid, namespace, allocation_basis")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]
