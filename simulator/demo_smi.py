"""The demo hosts' nvidia-smi logs: ``nvidia-smi --query-gpu=… --format=csv -l 900`` as the hosts write it,
with the PCI bus ids and GPU UUIDs the platforms give their GPUs."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import numpy as np

from gpufinops.simulator.demo_profiles import SAMPLES_PER_HOUR, Clock, Samples
from gpufinops.simulator.demo_workloads import GPU_HARDWARE

SMI_HEADER = (
    "timestamp, name, pci.bus_id, uuid, index, utilization.gpu [%], utilization.memory [%], "
    "memory.total [MiB], memory.used [MiB], power.draw [W]"
)

# PCI bus ids as the platforms number their GPUs (p4d/p5 and DGX-style nodes, single-GPU VMs).
_BUS_AWS_8 = ("10:1C.0", "10:1D.0", "20:1C.0", "20:1D.0", "90:1C.0", "90:1D.0", "A0:1C.0", "A0:1D.0")
_BUS_AWS_SMALL = ("00:1B.0", "00:1C.0", "00:1D.0", "00:1E.0")
_BUS_ONPREM = ("07:00.0", "0F:00.0", "47:00.0", "4E:00.0", "87:00.0", "90:00.0", "B7:00.0", "BD:00.0")


def bus_ids(provider: str, gpu_count: int) -> list[str]:
    ids: tuple[str, ...]
    if provider == "aws":
        ids = _BUS_AWS_8 if gpu_count > 4 else (_BUS_AWS_SMALL[-1:] if gpu_count == 1 else _BUS_AWS_SMALL)
    elif provider == "gcp":
        ids = tuple(f"00:{4 + i:02X}.0" for i in range(gpu_count))
    else:
        ids = _BUS_ONPREM
    return [f"00000000:{b}" for b in ids[:gpu_count]]


def sample_stamps(clock: Clock) -> list[str]:
    """nvidia-smi's timestamp of every sample of the window (UTC)."""
    return [
        (clock.start + timedelta(minutes=15 * i)).strftime("%Y/%m/%d %H:%M:%S.000")
        for i in range(clock.hours * SAMPLES_PER_HOUR)
    ]


def gpu_uuid(seed: int, host: str, index: int) -> str:
    h = hashlib.sha256(f"gpu|{seed}|{host}|{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def smi_log(
    provider: str,
    host: str,
    gpu_model: str,
    gpu_count: int,
    running: np.ndarray,
    samples: Samples,
    stamps: list[str],
    seed: int,
) -> tuple[bytes, int]:
    """The host's ``nvidia-smi --query-gpu=… --format=csv -l 900`` log: (bytes, data rows).

    One row per GPU per sample of every running hour, GPUs in index order within a sample.
    """
    hw = GPU_HARDWARE[gpu_model]
    prefix = [
        f", {hw.smi_name}, {bus}, {gpu_uuid(seed, host, i)}, {i}, "
        for i, bus in enumerate(bus_ids(provider, gpu_count))
    ]
    total = f"{hw.memory_total_mib} MiB"
    keep = np.flatnonzero(np.repeat(running, SAMPLES_PER_HOUR))
    util, mem_util = samples.util[keep].tolist(), samples.mem_util[keep].tolist()
    mem, power = samples.mem_used[keep].tolist(), samples.power[keep].tolist()
    lines = [SMI_HEADER]
    for row, sample in enumerate(keep.tolist()):
        ts = stamps[sample]
        for g in range(gpu_count):
            lines.append(
                f"{ts}{prefix[g]}{util[row][g]} %, {mem_util[row][g]} %, {total}, "
                f"{mem[row][g]} MiB, {power[row][g]:.2f} W"
            )
    return ("\n".join(lines) + "\n").encode(), len(lines) - 1
