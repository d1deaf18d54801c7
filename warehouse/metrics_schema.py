"""What the GPUs and the inference servers measured, hourly: GPU utilisation and memory, per-process
memory, the workloads seen on each GPU, and the serving counters.

Written by the metrics ingestors (``ingest/metrics``), one batch set per source and slice.
"""

from __future__ import annotations

import pyarrow as pa

from gpufinops.warehouse.column_groups import (
    EXPORTER_HINTS,
    KUBERNETES_WORKLOAD,
    LOADED_BY,
    SERVING_COUNTERS,
    SERVING_KEY,
    names,
)
from gpufinops.warehouse.column_types import UTC_TS

# What a measured row was attributed to at load (derived/attribution.py): the billed resource and its team.
_ATTRIBUTED: tuple[pa.Field, ...] = (
    pa.field("resource_id", pa.string()),
    pa.field("team", pa.string()),
)

# v19: (column, type) of the profiling means, p95s and the engine's minute-level shape in an hour
PROFILING_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("gr_active_mean", pa.float64()),  # DCGM_FI_PROF_GR_ENGINE_ACTIVE (else SM_ACTIVE), 0-1
    ("gr_active_p95", pa.float64()),
    ("sm_occupancy_mean", pa.float64()),
    ("fp16_active_mean", pa.float64()),
    ("fp32_active_mean", pa.float64()),
    ("fp64_active_mean", pa.float64()),
    ("dram_active_mean", pa.float64()),
    ("dram_active_p95", pa.float64()),
    ("pcie_tx_mean_bps", pa.float64()),  # bytes per second, as DCGM reports them
    ("pcie_rx_mean_bps", pa.float64()),
    ("nvlink_tx_mean_bps", pa.float64()),
    ("nvlink_rx_mean_bps", pa.float64()),
    ("pcie_rx_idle_bps", pa.float64()),  # host-to-device rate while the engine was idle (input in the gaps)
    ("held_idle_minutes", pa.float64()),  # minutes holding >= 1 GiB of memory with the engine idle
    ("idle_streak_minutes", pa.float64()),  # the hour's longest run of engine-idle minutes
    ("idle_dips", pa.int32()),  # times the engine dropped to idle and came back within the hour
)

GPU_METRICS_HOURLY = pa.schema(
    [
        ("hour", UTC_TS),
        ("gpu_uuid", pa.string()),
        ("gpu_model", pa.string()),
        ("mig_instance", pa.string()),
        ("host", pa.string()),
        *_ATTRIBUTED,
        ("util_mean", pa.float64()),
        ("util_p95", pa.float64()),
        ("util_max", pa.float64()),
        ("mem_used_max_mib", pa.float64()),
        ("mem_total_mib", pa.float64()),
        ("sm_active_mean", pa.float64()),
        ("tensor_active_mean", pa.float64()),
        ("power_mean_w", pa.float64()),
        ("samples", pa.int32()),
        *LOADED_BY,
        # v6: the exporter's own hints, kept so that a bill arriving later (or restated) can always be
        # matched: resource_id / team are derived from them (derived/attribution.py).
        *EXPORTER_HINTS,
        # v19: DCGM's profiling fields (DCGM_FI_PROF_*), hourly, and the minute-level shape of the engine's
        # activity the busy-waste kinds read (models/busy_*.py). NULL: the source does not export the field.
        *PROFILING_COLUMNS,
    ]
)
GPU_METRICS_HINTS = names(EXPORTER_HINTS)

# Per-process GPU memory (nvidia-smi --query-compute-apps), hourly per (host, gpu_uuid, pid, process_name).
GPU_PROCESSES_HOURLY = pa.schema(
    [
        ("hour", UTC_TS),
        ("gpu_uuid", pa.string()),
        ("host", pa.string()),
        ("pid", pa.int32()),
        ("process_name", pa.string()),
        ("mem_used_max_mib", pa.float64()),
        ("mem_used_mean_mib", pa.float64()),
        ("samples", pa.int32()),
        *_ATTRIBUTED,
        *LOADED_BY,
    ]
)

# v10: what ran on each GPU (or MIG slice) in each hour, one row per workload: a Kubernetes pod /
# namespace / container from the exporter's labels, or a process from nvidia-smi's compute-apps log.
# Written by the metrics ingestors in the same batch set (and slices) as gpu_metrics_hourly.
GPU_WORKLOADS_HOURLY = pa.schema(
    [
        ("hour", UTC_TS),
        ("gpu_uuid", pa.string()),
        ("mig_instance", pa.string()),
        ("host", pa.string()),
        *KUBERNETES_WORKLOAD,
        ("pid", pa.int32()),
        ("process", pa.string()),
        ("samples", pa.int32()),  # sample times the workload was seen on the GPU / slice in the hour
        ("occupied_samples", pa.int32()),  # sample times any workload was on it (NULL: the source can not tell)
        ("sharing", pa.string()),  # NULL | 'timeslice' | 'mps': what the source says about sharing
        ("util_mean", pa.float64()),
        ("sm_active_mean", pa.float64()),
        ("mem_used_max_mib", pa.float64()),
        *LOADED_BY,
    ]
)

# v12: what the inference servers' counters grew by, per hour, server, model and pod (ingest/metrics/serving_*.py);
# an increase between two samples belongs to the hour of the later one, a counter that fell restarted from zero.
SERVING_METRICS_HOURLY = pa.schema(
    [
        *SERVING_KEY,
        ("host", pa.string()),
        *SERVING_COUNTERS,
        ("counter_resets", pa.int32()),  # counters seen restarting in the hour (a pod restart)
        ("samples", pa.int32()),  # counter samples that ended in the hour
        *LOADED_BY,
    ]
)
