"""Schema version 18, frozen as it shipped: never edit it.

DCGM's profiling fields rolled up per GPU (and MIG slice) hour: the engine's, the pipes' and the memory
interface's activity, PCIe and NVLink rates, and the minute-level shape of the engine's activity (minutes
holding memory while idle, the longest idle run, the drops to idle and back) that the busy-waste kinds
read. Hours loaded before this version keep NULLs: not measured, never zero.
"""

VERSION = 19

_DOUBLES = (
    "gr_active_mean",
    "gr_active_p95",
    "sm_occupancy_mean",
    "fp16_active_mean",
    "fp32_active_mean",
    "fp64_active_mean",
    "dram_active_mean",
    "dram_active_p95",
    "pcie_tx_mean_bps",
    "pcie_rx_mean_bps",
    "nvlink_tx_mean_bps",
    "nvlink_rx_mean_bps",
    "pcie_rx_idle_bps",
    "held_idle_minutes",
    "idle_streak_minutes",
)

STATEMENTS: tuple[str, ...] = (
    *(f'ALTER TABLE gpu_metrics_hourly ADD COLUMN IF NOT EXISTS "{c}" DOUBLE' for c in _DOUBLES),
    'ALTER TABLE gpu_metrics_hourly ADD COLUMN IF NOT EXISTS "idle_dips" INTEGER',
)
