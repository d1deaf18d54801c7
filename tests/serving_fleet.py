"""A small serving fleet for the unit-cost tests: bills, GPU-hours, pods and the pods' serving counters.

Resource ``i-h100`` (one GPU, $4.00 an hour) runs the vLLM pod ``llm/vllm-0`` with workload labels, so the
shared-GPU chargeback allocates it; resource ``i-l4`` ($2.00 an hour) has GPU metrics from host ``node-b``
but no workload labels, so its two TGI pods are charged the whole resource, half each. Every figure is
chosen so the expected unit costs can be worked out by hand in the tests.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pyarrow as pa

from gpufinops.derived import allocation
from gpufinops.warehouse import db, metrics_schema
from tests.allocation_fleet import START, Fleet, GpuHour, Line, Work

H100_HOUR = Decimal("4.00")
L4_HOUR = Decimal("2.00")
# (hour, server, model, namespace, pod, host, input, output, requests, prefill_s, decode_s)
SERVING = [
    (0, "vllm", "llama-3.1-8b", "llm", "vllm-0", "node-a", 1_000_000.0, 250_000.0, 1000.0, 600.0, 2400.0),
    (1, "vllm", "llama-3.1-8b", "llm", "vllm-0", "node-a", 3_000_000.0, 500_000.0, 2000.0, None, None),
    (0, "tgi", "mistral-7b", "chat", "tgi-0", "node-b", 200_000.0, 100_000.0, 400.0, None, None),
    (0, "tgi", "mistral-7b", "chat", "tgi-1", "node-b", 600_000.0, 300_000.0, 600.0, None, None),
]


def build(con) -> None:
    """The fleet's rows, allocated as a load would."""
    fleet = Fleet()
    for hour in (0, 1):
        fleet.lines.append(Line("i-h100", hour, H100_HOUR, team="search", gpu_model="H100"))
        fleet.gpu_hours.append(GpuHour("i-h100", hour, "GPU-h100", gpu_model="H100"))
        fleet.work.append(Work(hour, "GPU-h100", "llm", "vllm-0"))
    fleet.lines.append(Line("i-l4", 0, L4_HOUR, team="support", gpu_model="L4"))
    fleet.gpu_hours.append(GpuHour("i-l4", 0, "GPU-l4", host="node-b", gpu_model="L4"))
    fleet.insert(con)
    insert_serving(con, SERVING)
    allocation.reallocate_all(con, allocation.AllocationSettings())


def insert_serving(con, rows: list[tuple]) -> None:
    names = (
        "hour",
        "server",
        "model",
        "namespace",
        "pod",
        "host",
        "input_tokens",
        "output_tokens",
        "requests",
        "prefill_seconds",
        "decode_seconds",
    )
    data = [
        dict(zip(names, (START + timedelta(hours=r[0]), *r[1:])))
        | {"source": "serving", "counter_resets": 0, "samples": 60}
        for r in rows
    ]
    table = pa.Table.from_pylist(data, schema=metrics_schema.SERVING_METRICS_HOURLY)
    con.register("_serving_rows", table)
    con.execute("INSERT INTO serving_metrics_hourly BY NAME SELECT * FROM _serving_rows")
    con.unregister("_serving_rows")


def warehouse_with_fleet(path) -> None:
    with db.writer(path) as con:
        build(con)
