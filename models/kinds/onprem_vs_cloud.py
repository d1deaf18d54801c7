"""On-prem vs cloud: on-prem node groups against the cloud, steady cloud load to repatriate
(``models/onprem_vs_cloud.py``).

Its spec (docs/architecture.md, *Add a model kind*): ``models.registry`` finds ``MODEL_KINDS`` here."""

from __future__ import annotations

from gpufinops.models.kind_spec import PRICING_ONLY, ModelSpec, NotScored, Ref

_M = "gpufinops.models."

MODEL_KINDS = (
    ModelSpec(
        kind="onprem_vs_cloud",
        version="onprem_vs_cloud/2",
        order=50,
        settings=Ref(_M + "onprem_cost:OnpremSettings"),
        load=Ref(_M + "onprem_vs_cloud:load"),
        recommend=Ref(_M + "onprem_vs_cloud:findings"),
        summary="on-prem node groups against the cloud; steady cloud load to repatriate",
        label="On-prem vs cloud",
        family="purchase",
        ends_plan=(),
        plan_per_team_on=("onprem",),
        export="move_onprem",
        truth=NotScored(
            "no generator plants an on-prem verdict; the comparison is checked against hand-computed "
            "figures by tests/test_onprem_vs_cloud.py"
        ),
        predictor=None,
        carbon=PRICING_ONLY,
        needs=("bill", "utilisation"),
    ),
)
