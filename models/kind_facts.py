"""Groups of kind facts that several built-in kinds share because they load and act the same way, stated once.

A built-in kind's spec (``models/kinds/<kind>.py``) spreads a group into its ``ModelSpec``
(``ModelSpec(**kind_facts.BUSY_PROFILE, kind=...)``) and states every other fact itself; a group is only what
follows from one way of loading or acting, never a default (``ModelSpec`` has none). A kind outside these
groups states all its facts.
"""

from __future__ import annotations

from typing import Any

from gpufinops.models.kind_spec import GPU_HOURS, PRICING_ONLY, NotScored, Ref, Scored

_M = "gpufinops.models."

# Read from one pass over the DCGM profiling counters (models/busy_profile.py; the rules: models/busy_rules.py):
# idle_held, stalled_job, input_bound, no_tensor_cores, memory_bound_inference. No settings of their own; the
# busy-waste evaluation, not the generators, checks them; their change frees the pod's own GPU-hours.
BUSY_PROFILE: dict[str, Any] = {
    "settings": None,
    "load": Ref(_M + "busy_profile:load"),
    "needs": ("bill", "utilisation"),
    "plan_per_team_on": (),
    "truth": NotScored("the busy-waste evaluation (jobs/eval_busy.py) scores it on its own job phases"),
    "predictor": None,
    "carbon": GPU_HOURS,
}

# Resize a resource from its measured utilisation (models/features.py's rightsizing settings): gpu_count,
# gpu_type, quantization. The resource keeps running, smaller or cheaper: it frees GPU-hours, ends no plan.
RIGHTSIZING: dict[str, Any] = {
    "settings": Ref(_M + "features:RightsizingSettings"),
    "family": "rightsize",
    "ends_plan": (),
    "plan_per_team_on": (),
    "export": "resize",
    "carbon": GPU_HOURS,
    "needs": ("bill", "utilisation"),
}

# Buy the same GPU-hours at another price (commitment, spot_mix): priced from the bill and the price
# catalogue, scored against the generators' planted prices; the GPUs run as before.
PRICE_MIX: dict[str, Any] = {
    "family": "purchase",
    "ends_plan": (),
    "plan_per_team_on": (),
    "truth": Scored("generator_priced"),
    "predictor": None,
    "carbon": PRICING_ONLY,
    "needs": ("bill", "prices"),
}

# The storage kinds (storage_tier, storage_orphan, checkpoint_lifecycle): read the storage inventory with the
# `[models]` storage keys (models/storage_tier.py), change no GPU; the generators plant none of their truths.
STORAGE: dict[str, Any] = {
    "settings": Ref(_M + "storage_tier:StorageSettings"),
    "family": "storage",
    "ends_plan": (),
    "plan_per_team_on": (),
    "truth": NotScored(
        "the generators plant GPU waste only; the demo's storage plants (simulator/demo_storage.py) are "
        "checked by tests/test_storage_models.py"
    ),
    "predictor": None,
    "carbon": PRICING_ONLY,
    "needs": ("storage",),
}
