"""The cost of an on-prem GPU-hour, shared by onprem_vs_cloud (the verdicts) and repatriation (the moves).

An on-prem GPU-hour costs ``c(u) = F + V·u`` at utilisation ``u``: ``F`` the amortised hardware,
facility and operations and the idle and host draw; ``V`` the extra energy of a busy GPU (TDP model).
Also the ``[models]`` key these models read and their parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpufinops.kernel.ranges import SHARE
from gpufinops.models.features import parse_settings, setting

HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class OnpremSettings:
    """This model's `[models]` keys (validated with the others by models.run.validate_settings)."""

    onprem_target_utilisation: float = setting(0.85, SHARE, "an on-prem group is full at this busy share")

    @classmethod
    def from_config(cls, section: dict[str, Any] | None) -> OnpremSettings:
        values = parse_settings(cls, section)
        target = values.get("onprem_target_utilisation", cls.onprem_target_utilisation)
        if not 0 < target <= 1:
            raise ValueError(f"[models] onprem_target_utilisation must be in (0, 1] (got {target!r})")
        return cls(**values)


@dataclass(frozen=True)
class OnpremVsCloudParams:
    spot_overhead: Decimal = Decimal("0.15")  # rework, restarts and capacity waits of interrupted spot work
    burst_saturated_share: float = 0.05  # hours with the group at >= 90 % busy that make peaks worth bursting
    steady_billed_share: float = 0.9  # share of the window a cloud resource must be billed to be steady
    min_monthly_savings_usd: Decimal = Decimal("25")
    onprem_target_utilisation: float = 0.85  # a group is full at this busy share: repatriations must fit under it

    @classmethod
    def from_config(cls, section: dict[str, Any] | None) -> OnpremVsCloudParams:
        return cls(onprem_target_utilisation=OnpremSettings.from_config(section).onprem_target_utilisation)


def as_decimal(value: Any) -> Decimal:
    return Decimal(0) if value is None else Decimal(str(value))


def used_gpu_hours(row: dict[str, Any]) -> Decimal:
    """GPU-hours × measured utilisation (the busy share); unmeasured hours count at the measured mean."""
    if not row["measured_gpu_hours"]:
        return Decimal(0)
    return as_decimal(row["util_pct_sum"]) / 100 * row["gpu_hours"] / row["measured_gpu_hours"]


@dataclass(frozen=True)
class OnpremCost:
    fixed: Decimal  # F: $ per GPU-hour whatever the utilisation
    variable: Decimal  # V: $ per GPU-hour more at 100 % than at 0 %

    def at(self, util: Decimal) -> Decimal:
        return self.fixed + self.variable * util

    def break_even(self, price_per_used_hour: Decimal) -> Decimal | None:
        """u* with F + V·u* = p·u*; None when the cloud price never covers the busy draw (p <= V)."""
        if price_per_used_hour <= self.variable:
            return None
        return self.fixed / (price_per_used_hour - self.variable)


def onprem_cost(row: dict[str, Any]) -> OnpremCost:
    """The group's F and V, from its lines' cost and the cost-model figures in their Tags."""
    per_kwh = as_decimal(row["pue"]) * as_decimal(row["usd_per_kwh"]) / 1000
    hours = Decimal(row["gpu_hours"])
    fixed = (as_decimal(row["hardware_usd"]) + as_decimal(row["facility_usd"])) / hours + (
        as_decimal(row["idle_w"]) + as_decimal(row["host_w_per_gpu"])
    ) * per_kwh
    return OnpremCost(fixed, (as_decimal(row["tdp_w"]) - as_decimal(row["idle_w"])) * per_kwh)


def pct(value: Decimal | None) -> float | None:
    """A share as a percentage with two decimals (None stays None)."""
    return None if value is None else round(float(value * 100), 2)
