"""Shapes the second generator does not produce, each on a real DuckDB warehouse through every rightsizing
model (gpu_type, quantization, gpu_count): none may get a finding it should not get, and an under-used
resource that gets none says which targets were considered and why each was refused."""

from __future__ import annotations

import duckdb
import pytest

from gpufinops.models import features, gpu_count, gpu_type, quantization
from gpufinops.warehouse import queries
from tests import test_gpu_type as gpu_type_tests
from tests.rightsizing_fleet import Machine, build, offer
from tests.test_gpu_type import GCP, SERVE

# gpu_type's three one-GPU offers in us-central1, and two multi-GPU A100-40GB types beside them
OFFERS = [
    *gpu_type_tests.OFFERS[:3],
    offer("a2-highgpu-8g", "A100-40GB", 8, "29.3871", "us-central1", "gcp"),
    offer("a2-highgpu-2g", "A100-40GB", 2, "7.3468", "us-central1", "gcp"),
]


def vm(rid: str, util: float, mem: float, it="a2-ultragpu-1g", model="A100-80GB", usd="5.0688", **kw) -> Machine:
    return Machine(rid, it, model, 1, usd, [util], [mem], provider=GCP, region="us-central1", tags=dict(SERVE), **kw)


def analyse(path, machines, offers=OFFERS):
    build(path, machines, offers)
    with duckdb.connect(str(path), read_only=True) as con:
        s = features.RightsizingSettings()
        inputs = gpu_type.load(con, s)
        start = features.window_start(con, s.lookback_days)
        counts = gpu_count.recommend(inputs.resources, queries.rightsizing_gpus(con, start), inputs.offers, s)
        found = [gpu_type.findings(inputs, s), quantization.findings(inputs, s)]
    recs = [r for f in found for r in f.recommendations] + counts[0]
    withheld = [w for f in found for w in f.withheld] + counts[1]
    return recs, withheld


def _mine(items, rid):
    return [x for x in items if x.resource_id == rid]


def test_serving_with_a_short_daily_peak_is_sized_for_its_peak(warehouse):
    """15 % all day but 70 % for one hour a day: the p95 over all hours (1 h is 4 % of them) reads 15 %;
    an L4 would need ~3.7× the A100's time at the peak. The median day's peak hour is what is sized."""
    peak = vm("peaky", 15, 8, shape=lambda h, _n: 70 / 15 if h % 24 == 14 else 1.0)
    recs, withheld = analyse(warehouse, [peak])
    assert _mine(recs, "peaky") == []
    (w,) = [w for w in _mine(withheld, "peaky") if w.kind == "gpu_type"]
    assert w.reason == "no_fitting_target" and "g2-standard-4 (L4): predicted p95" in w.detail
    assert "a2-highgpu-1g (A100-40GB): predicted p95" in w.detail and w.source_hint


def test_a_memory_bound_gpu_is_not_moved_to_a_smaller_one(warehouse):
    """20 % busy but holding 60 GiB: neither a 40 GB A100 nor an L4 holds it with headroom."""
    recs, withheld = analyse(warehouse, [vm("membound", 20, 60)])
    assert _mine(recs, "membound") == []
    (w,) = [w for w in _mine(withheld, "membound") if w.kind == "gpu_type"]
    assert "g2-standard-4 (L4): memory 60.0 GiB × 1.2 headroom" in w.detail
    assert "a2-highgpu-1g (A100-40GB): memory 60.0 GiB × 1.2 headroom" in w.detail


def test_a_resource_terminated_mid_window_gets_no_resize(warehouse):
    """Billed 10 days, then gone 5 days before the fleet's newest hour: a move saves nothing more."""
    gone = vm("gone", 10, 6, days=10, ended_days_ago=5)
    eight = Machine(
        "gone8", "a2-highgpu-8g", "A100-40GB", 8, "29.3871", [70.0] * 2 + [1.0] * 6, [20.0] * 2 + [0.3] * 6,
        provider=GCP, region="us-central1", days=10, ended_days_ago=5,
    )  # fmt: skip
    live = vm("live", 70, 8)  # keeps the fleet's newest hour at the end
    recs, _ = analyse(warehouse, [gone, eight, live])
    assert _mine(recs, "gone") == [] and _mine(recs, "gone8") == []


def test_a_multi_gpu_job_with_no_spare_gpu_keeps_its_gpus(warehouse):
    """Eight GPUs all between 45 and 55 %: none is spare, and a job spread over eight cannot be put on two."""
    job = Machine(
        "allbusy", "a2-highgpu-8g", "A100-40GB", 8, "29.3871", [45.0, 55.0, 50.0, 48.0, 52.0, 47.0, 53.0, 49.0],
        [30.0] * 8, provider=GCP, region="us-central1", tags={"workload": "training", "precision": "bf16"},
    )  # fmt: skip
    recs, _ = analyse(warehouse, [job])
    assert _mine(recs, "allbusy") == []


def test_a_ramp_up_after_a_deploy_is_not_sized_on_the_old_level(warehouse):
    """10 % for weeks, 45 % for the last 12 hours (a new model deployed): the p95 over the lookback still
    reads 10 %, which would fit an L4; the last days say otherwise, so the move waits."""
    ramp = vm("ramp", 10, 6, shape=lambda h, n: 4.5 if h >= n - 12 else 1.0)
    recs, withheld = analyse(warehouse, [ramp])
    assert _mine(recs, "ramp") == []
    (w,) = [w for w in _mine(withheld, "ramp") if w.kind == "gpu_type"]
    assert w.reason == "ramping" and "ramping up" in w.detail and "more days of history" in w.source_hint


@pytest.mark.parametrize("util", [float("nan"), float("inf"), -5.0])
def test_hostile_utilisation_never_yields_a_move(warehouse, util):
    recs, _ = analyse(warehouse, [vm("bad", util, 6)])
    assert _mine(recs, "bad") == []


def test_peer_replicas_refuse_a_target_the_spec_sheet_would_accept(warehouse):
    """The same service on an A100-80GB at 12 % and on an L4 at 76 %: the spec sheet says an L4 needs
    ~44 % for the A100's load; the L4 replica measures 76 %. No move, and the refusal names the peers."""
    a100 = vm("svc-a100", 12, 6)
    l4 = vm("svc-l4", 76, 6, it="g2-standard-4", model="L4", usd="0.7068")
    only_l4 = [o for o in OFFERS if o["gpu_model"] != "A100-40GB"]
    recs, withheld = analyse(warehouse, [a100, l4], offers=only_l4)
    assert [r for r in _mine(recs, "svc-a100") if r.kind == "gpu_type"] == []
    (w,) = [w for w in _mine(withheld, "svc-a100") if w.kind == "gpu_type"]
    assert "g2-standard-4 (L4): predicted p95 76 % > 60 % cap (peer replicas)" in w.detail
