"""Exact money across the whole declared domain: the allocation, unit-cost and carbon arithmetic at its edges.

The ledger declares money as a DECIMAL(38, 15) below 10^23 (warehouse/domains.py: MONEY_LIMIT); a line may
carry any amount inside it. The edges: a $10^12 GPU-hour (the issue's case: it failed with an INT128
overflow), the largest amount a line may carry, the smallest non-zero amount (1e-15 USD), the smallest
share (one sample of 60 on one GPU of 1,024), and a token count of 0.000001. Every expected figure is
worked out here with Python's Decimal from the rule it checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import ROUND_HALF_UP, Decimal, localcontext

import pytest

from gpufinops.derived import allocation, carbon, serving_costs, unit_costs
from gpufinops.derived.allocation_sql import WEIGHT_SCALE
from gpufinops.warehouse import db, domains
from tests import serving_fleet as sf
from tests.allocation_fleet import Fleet, GpuHour, Line, Work
from tests.test_allocation import allocate

LARGEST = Decimal("99999999999999999999999.999999999999999")  # the largest DECIMAL(38, 15) below 10^23
QUANTUM = Decimal("1e-15")


@pytest.fixture(autouse=True)
def precise() -> Iterator[None]:
    """Expected figures worked out with 60 significant digits (Decimal's default 28 cannot hold 10^23 to 1e-15)."""
    with localcontext() as ctx:
        ctx.prec = 60
        yield


def exact(value: Decimal) -> Decimal:
    return value.quantize(QUANTUM, rounding=ROUND_HALF_UP)


def test_the_declared_money_domain_is_what_the_ledger_holds():
    money = domains.Domain("money", low=0)
    assert domains.MONEY_LIMIT == 1e23 and money.reason(9.99e22) is None
    assert money.reason(1e23) is not None and money.reason(-1.0) is not None


@pytest.mark.parametrize("cost", [Decimal("1000000000000"), LARGEST, Decimal("-1000000000000")])
def test_a_gpu_hour_at_the_domain_edge_allocates_exactly(warehouse, cost):
    """The issue's $10^12 an hour failed: Overflow in multiplication of INT128 (1e+27 * 2882880000000)."""
    fleet = Fleet()
    fleet.lines.append(Line("i-node", 0, cost, team="platform", gpu_count=8))
    fleet.gpu_hours += [GpuHour("i-node", 0, "GPU-0"), GpuHour("i-node", 0, "GPU-1")]
    fleet.work += [Work(0, "GPU-0", "vision", "a", samples=40), Work(0, "GPU-0", "nlp", "b", samples=20)]
    rows = allocate(warehouse, fleet)
    got = {(r["gpu_uuid"], r["pod"], r["method"]): r["cost_usd"] for r in rows}
    gpu = cost / 8
    assert got[("GPU-0", "a", "presence")] == pytest.approx(gpu * 2 / 3, abs=QUANTUM)
    assert got[("GPU-0", "b", "presence")] == pytest.approx(gpu / 3, abs=QUANTUM)
    assert got[("GPU-1", None, "idle")] == exact(gpu)
    assert got[(None, None, "unmeasured")] == exact(gpu * 6)
    assert sum(r["cost_usd"] for r in rows) == cost  # to the last 1e-15 USD


def test_the_smallest_amount_and_the_smallest_share_stay_whole(warehouse):
    """1e-15 USD over three rows: one row gets it (largest remainder), the others 0, never a negative."""
    fleet = Fleet()
    fleet.lines.append(Line("i-tiny", 0, QUANTUM, team="platform", gpu_count=3))
    fleet.gpu_hours += [GpuHour("i-tiny", 0, "GPU-0")]
    fleet.work += [Work(0, "GPU-0", "vision", "a")]
    fleet.lines.append(Line("i-wide", 0, LARGEST, team="platform", gpu_count=1024))
    fleet.gpu_hours += [GpuHour("i-wide", 0, "GPU-w")]
    fleet.work += [Work(0, "GPU-w", "nlp", "p", samples=1)]  # one sample of 60 on one GPU of 1,024
    rows = allocate(warehouse, fleet)
    tiny = [r["cost_usd"] for r in rows if r["resource_id"] == "i-tiny"]
    assert sum(tiny) == QUANTUM and sorted(tiny) == [0, QUANTUM] and min(tiny) >= 0
    wide = {(r["pod"], r["method"]): r["cost_usd"] for r in rows if r["resource_id"] == "i-wide"}
    smallest = wide[("p", "presence")]
    # a row's fraction is a whole number of 1/7.2072e12 of its resource-hour (allocation_sql.WEIGHT_SCALE)
    assert smallest == pytest.approx(LARGEST / 1024 / 60, abs=LARGEST / WEIGHT_SCALE) and smallest > 0
    assert sum(wide.values()) == LARGEST


def test_unit_costs_and_carbon_of_a_trillion_dollar_hour(warehouse):
    """The unit-cost split of a pod's cost over its models multiplied DECIMAL(38, 15) by DECIMAL(18, 12),
    a DECIMAL(38, 27) that overflowed from about $1.7e11."""
    trillion = Decimal("1000000000000")
    with db.writer(warehouse) as con:
        fleet = Fleet()
        fleet.lines.append(Line("i-l4", 0, trillion, team="support", gpu_model="L4"))
        fleet.gpu_hours.append(GpuHour("i-l4", 0, "GPU-l4", host="node-b", gpu_model="L4"))
        fleet.insert(con)
        sf.insert_serving(con, [r for r in sf.SERVING if r[1] == "tgi"])  # two pods, charged half each
        allocation.reallocate_all(con, allocation.AllocationSettings())
        carbon.recompute_all(con)
        serving_costs.recompute_all(con)
    with db.reader(warehouse) as con:
        settings = unit_costs.UnitCostSettings(split="weight")
        got = unit_costs.unit_costs(con, settings=settings, by="model").to_dicts()
    (row,) = got
    assert row["gpu_cost_usd"] == trillion
    tokens_in, tokens_out = Decimal(800_000), Decimal(400_000)  # both pods: 0.25·in / (0.25·in + out) each
    input_share = Decimal("0.25") * tokens_in / (Decimal("0.25") * tokens_in + tokens_out)
    # the share is a DOUBLE (the token counts are): 15 of its decimals, so within 10^-15 of the amount
    assert row["input_cost_usd"] == pytest.approx(trillion * input_share, abs=trillion * Decimal("1e-15"))
    assert row["input_cost_usd"] + row["output_cost_usd"] == trillion
    per_million = trillion * input_share * 1_000_000 / tokens_in
    assert row["usd_per_1m_input_tokens"] == pytest.approx(per_million, rel=Decimal("1e-12"))


def test_a_rate_beside_a_count_that_rounds_to_zero_is_not_a_figure(warehouse):
    rows = [
        (0, "vllm", "tiny", "llm", "vllm-0", "node-a", 0.000001, 0.4, 0.000001, None, None),
        (0, "vllm", "one", "llm", "vllm-1", "node-a", 1.0, 2.0, 1.0, None, None),
    ]
    with db.writer(warehouse) as con:
        fleet = Fleet()
        fleet.lines.append(Line("i-h100", 0, LARGEST, team="search", gpu_model="H100", gpu_count=2))
        fleet.gpu_hours += [GpuHour("i-h100", 0, "GPU-0", gpu_model="H100"), GpuHour("i-h100", 0, "GPU-1")]
        fleet.work += [Work(0, "GPU-0", "llm", "vllm-0"), Work(0, "GPU-1", "llm", "vllm-1")]
        fleet.insert(con)
        sf.insert_serving(con, rows)
        allocation.reallocate_all(con, allocation.AllocationSettings())
        serving_costs.recompute_all(con)
    with db.reader(warehouse) as con:
        got = {r["model"]: r for r in unit_costs.unit_costs(con, period=unit_costs.WHOLE).to_dicts()}
    tiny = got["tiny"]
    assert (tiny["input_tokens"], tiny["output_tokens"], tiny["requests"]) == (0, 0, 0)
    assert tiny["usd_per_1m_input_tokens"] is None and tiny["usd_per_1m_output_tokens"] is None
    assert tiny["usd_per_1k_requests"] is None
    assert (
        tiny["gpu_cost_usd"] + got["one"]["gpu_cost_usd"] == LARGEST
    )  # the money is all there: only the rate is withheld
    assert abs(tiny["gpu_cost_usd"] - LARGEST / 2) <= QUANTUM
    one = got["one"]
    assert one["input_tokens"] == 1 and one["usd_per_1m_input_tokens"] is not None
    assert one["usd_per_1k_requests"] == pytest.approx(LARGEST / 2 * 1000, rel=Decimal("1e-12"))
