"""The on-prem GPU cost model: a cluster's config, validated, and the cost of one GPU-hour.

Pure functions of their arguments (no warehouse, no clock), so the ``onprem`` source, the demo's
ground truth and the tests all price a GPU-hour with the same code. Money is ``Decimal`` and each
cost component is quantised to :data:`MONEY` (10 fractional digits) before it is summed, so a
line's cost and any total of lines are exact.

One GPU-hour of a node group costs:

* **hardware** — ``(GPU purchase price + node price / GPUs per node) / (amortisation months × 730 h)``;
  the node price is its server, network and storage share; the GPU price defaults to
  ``gpu_specs.list_price_usd``.
* **energy** — ``(GPU draw + host draw / GPUs per node) / 1000 × PUE × energy price per kWh``. The
  GPU draw is the measured hourly mean (``gpu_metrics_hourly.power_mean_w``, DCGM
  ``DCGM_FI_DEV_POWER_USAGE`` / nvidia-smi ``power.draw``) when there is one, else the TDP model
  ``idle draw + (TDP − idle draw) × utilisation``, else (no metrics at all in that hour) the idle draw.
* **facility and operations** — ``(facility + operations per node-month) / GPUs per node / 730 h``.

Utilisation is taken to 0.01 percentage point and power to 0.01 W (what nvidia-smi prints), so the
result does not depend on float noise in the hourly means.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

from gpufinops.warehouse.gpu_models import CANONICAL_GPU_MODELS, normalize_gpu_model

MONEY = Decimal("1E-10")
HOURS_PER_MONTH = 730
UTIL_STEP = Decimal("0.01")
WATT_STEP = Decimal("0.01")
DEFAULT_IDLE_POWER_FRACTION = Decimal("0.1")  # an idle datacentre GPU draws about a tenth of its TDP

POWER_MEASURED, POWER_TDP_MODEL, POWER_IDLE_NO_METRICS = "measured", "tdp_model", "idle_no_metrics"

CLUSTER_KEYS = (
    "node_groups",
    "pue",
    "energy_usd_per_kwh",
    "amortisation_months",
    "amortisation_years",
    "facility_usd_per_node_month",
    "operations_usd_per_node_month",
    "host_power_w",
    "idle_power_fraction",
    "node_teams",
    "node_tags",
    "metrics_source",
    "cluster",
    "region",
    "billing_account_id",
    "billing_account_name",
    "service_name",
)
GROUP_KEYS = (
    "name",
    "nodes",
    "gpu_model",
    "gpus_per_node",
    "server_price_usd",
    "gpu_price_usd",
    "network_price_usd",
    "storage_price_usd",
    "amortisation_months",
    "amortisation_years",
    "host_power_w",
    "idle_power_w",
    "facility_usd_per_node_month",
    "operations_usd_per_node_month",
    "team",
    "tags",
)


class OnpremConfigError(ValueError):
    """A bad cluster description: the message names the config key at fault."""


@dataclass(frozen=True)
class GpuSpec:
    tdp_w: Decimal | None
    list_price_usd: Decimal | None


@dataclass(frozen=True)
class NodeGroup:
    """One kind of node: the figures every GPU-hour of the group is priced with."""

    name: str
    gpu_model: str
    gpus_per_node: int
    nodes: tuple[str, ...]
    gpu_price_usd: Decimal
    gpu_price_source: str  # "config" or "gpu_specs.list_price_usd"
    node_price_usd: Decimal  # server + network + storage share, per node
    amortisation_months: Decimal
    tdp_w: Decimal
    idle_w: Decimal
    host_w: Decimal  # the node's non-GPU draw
    pue: Decimal
    usd_per_kwh: Decimal
    facility_usd_per_node_month: Decimal
    operations_usd_per_node_month: Decimal
    team: str | None = None
    tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Cluster:
    source: str
    name: str
    region: str
    billing_account_id: str
    billing_account_name: str
    service_name: str
    groups: tuple[NodeGroup, ...]
    node_teams: tuple[tuple[str, str], ...] = ()
    node_tags: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    metrics_source: str | None = None

    def nodes(self) -> list[str]:
        return [n for g in self.groups for n in g.nodes]

    def fingerprint(self) -> str:
        """Changes whenever any figure that prices a line changes (then every hour is re-costed)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class GpuHourCost:
    hardware: Decimal
    energy: Decimal
    facility: Decimal
    power_w: Decimal  # the GPU's draw used (without the host share)
    power_basis: str  # measured | tdp_model | idle_no_metrics

    @property
    def total(self) -> Decimal:
        return self.hardware + self.energy + self.facility


def quantity(value: float | Decimal | None, step: Decimal) -> Decimal | None:
    """A float hourly mean as an exact Decimal at ``step`` (round half even); None stays None."""
    if value is None:
        return None
    return Decimal(repr(value) if isinstance(value, float) else value).quantize(step, rounding=ROUND_HALF_EVEN)


def hourly_gpu_cost(group: NodeGroup, util_pct: Decimal | None, power_w: Decimal | None) -> GpuHourCost:
    """The cost of one GPU of ``group`` for one hour, at a measured power or utilisation."""
    n = group.gpus_per_node
    hardware = (
        (group.gpu_price_usd + group.node_price_usd / n) / (group.amortisation_months * HOURS_PER_MONTH)
    ).quantize(MONEY)
    if power_w is not None:
        basis, watts = POWER_MEASURED, power_w
    elif util_pct is not None:
        basis, watts = POWER_TDP_MODEL, group.idle_w + (group.tdp_w - group.idle_w) * util_pct / 100
    else:
        basis, watts = POWER_IDLE_NO_METRICS, group.idle_w
    energy = ((watts + group.host_w / n) / 1000 * group.pue * group.usd_per_kwh).quantize(MONEY)
    facility = (
        (group.facility_usd_per_node_month + group.operations_usd_per_node_month) / n / HOURS_PER_MONTH
    ).quantize(MONEY)
    return GpuHourCost(hardware, energy, facility, watts, basis)


# ---- config ----------------------------------------------------------------------------------------


def _key(source: str, path: str) -> str:
    return f"sources.{source}.{path}"


def _decimal(source: str, path: str, value: Any, *, positive: bool = False) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise OnpremConfigError(f"{_key(source, path)}: must be a number, not {value!r}")
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise OnpremConfigError(f"{_key(source, path)}: must be a number, not {value!r}") from None
    if not number.is_finite() or number < 0 or (positive and number == 0):
        raise OnpremConfigError(
            f"{_key(source, path)}: must be {'more than 0' if positive else 'at least 0'}, not {value!r}"
        )
    return number


def _fraction(source: str, value: Decimal) -> Decimal:
    if value > 1:
        raise OnpremConfigError(
            f"{_key(source, 'idle_power_fraction')}: must be between 0 and 1 (a share of the GPU's TDP), not {value}"
        )
    return value


def _optional(source: str, table: dict, path: str, key: str, default: Decimal) -> Decimal:
    return _decimal(source, f"{path}{key}", table[key]) if key in table else default


def _amortisation(source: str, table: dict, path: str, default: Decimal | None) -> Decimal | None:
    if "amortisation_months" in table and "amortisation_years" in table:
        raise OnpremConfigError(
            f"{_key(source, path + 'amortisation_years')}: set amortisation_months or amortisation_years, not both"
        )
    if "amortisation_months" in table:
        return _decimal(source, path + "amortisation_months", table["amortisation_months"], positive=True)
    if "amortisation_years" in table:
        return _decimal(source, path + "amortisation_years", table["amortisation_years"], positive=True) * 12
    return default


def _strings(source: str, path: str, value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, float, bool)) for v in value.values()):
        raise OnpremConfigError(f"{_key(source, path)}: must be a table of strings")
    return tuple(sorted((str(k), str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()))


def gpu_model_of(source: str, path: str, value: Any) -> str:
    """The canonical model of a configured GPU name; an unknown one is a config error naming the key."""
    model = normalize_gpu_model(value) if isinstance(value, str) else None
    if model is None or model not in CANONICAL_GPU_MODELS:
        raise OnpremConfigError(
            f"{_key(source, path)}: unknown GPU model {value!r} (known: {', '.join(CANONICAL_GPU_MODELS)})"
        )
    return str(model)


def _check_group_shape(source: str, i: int, table: Any) -> None:
    """A node group is a table of known keys holding the required ones: a name, node names, GPUs per node."""
    path = f"node_groups[{i}]."
    if not isinstance(table, dict):
        raise OnpremConfigError(f"{_key(source, f'node_groups[{i}]')}: must be a table")
    for key in table:
        if key not in GROUP_KEYS:
            raise OnpremConfigError(f"{_key(source, path + key)}: unknown key (allowed: {', '.join(GROUP_KEYS)})")
    for key in ("name", "nodes", "gpu_model", "gpus_per_node", "server_price_usd"):
        if key not in table:
            what = "missing price (the purchase price of one node's server)" if key == "server_price_usd" else "missing"
            raise OnpremConfigError(f"{_key(source, path + key)}: {what}")
    name, nodes, gpus = table["name"], table["nodes"], table["gpus_per_node"]
    if not isinstance(name, str) or not name:
        raise OnpremConfigError(f"{_key(source, path + 'name')}: must be a non-empty string")
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) and n for n in nodes):
        raise OnpremConfigError(f"{_key(source, path + 'nodes')}: must be a non-empty list of node names")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise OnpremConfigError(f"{_key(source, path + 'gpus_per_node')}: must be a whole number of at least 1")


def _group(source: str, i: int, table: Any, cluster: dict, specs: dict[str, GpuSpec]) -> NodeGroup:
    _check_group_shape(source, i, table)
    path = f"node_groups[{i}]."
    name, nodes, gpus = table["name"], table["nodes"], table["gpus_per_node"]
    model = gpu_model_of(source, path + "gpu_model", table["gpu_model"])
    spec = specs.get(model, GpuSpec(None, None))
    if "gpu_price_usd" in table:
        gpu_price, price_source = _decimal(source, path + "gpu_price_usd", table["gpu_price_usd"]), "config"
    elif spec.list_price_usd is not None:
        gpu_price, price_source = spec.list_price_usd, "gpu_specs.list_price_usd"
    else:
        raise OnpremConfigError(
            f"{_key(source, path + 'gpu_price_usd')}: missing price (gpu_specs has no list price for {model})"
        )
    if spec.tdp_w is None:
        raise OnpremConfigError(f"{_key(source, path + 'gpu_model')}: gpu_specs has no TDP for {model}")
    amortisation = _amortisation(source, table, path, cluster["amortisation_months"])
    if amortisation is None:
        raise OnpremConfigError(
            f"{_key(source, 'amortisation_months')}: missing (set amortisation_months or "
            f"amortisation_years for the cluster or for node_groups[{i}])"
        )
    node_price = (
        _decimal(source, path + "server_price_usd", table["server_price_usd"])
        + _optional(source, table, path, "network_price_usd", Decimal(0))
        + _optional(source, table, path, "storage_price_usd", Decimal(0))
    )
    team = table.get("team")
    if team is not None and not isinstance(team, str):
        raise OnpremConfigError(f"{_key(source, path + 'team')}: must be a string")
    return NodeGroup(
        name=name,
        gpu_model=model,
        gpus_per_node=gpus,
        nodes=tuple(nodes),
        gpu_price_usd=gpu_price,
        gpu_price_source=price_source,
        node_price_usd=node_price,
        amortisation_months=amortisation,
        tdp_w=spec.tdp_w,
        idle_w=_optional(source, table, path, "idle_power_w", spec.tdp_w * cluster["idle_power_fraction"]),
        host_w=_optional(source, table, path, "host_power_w", cluster["host_power_w"]),
        pue=cluster["pue"],
        usd_per_kwh=cluster["usd_per_kwh"],
        facility_usd_per_node_month=_optional(source, table, path, "facility_usd_per_node_month", cluster["facility"]),
        operations_usd_per_node_month=_optional(
            source, table, path, "operations_usd_per_node_month", cluster["operations"]
        ),
        team=team,
        tags=_strings(source, path + "tags", table.get("tags", {})),
    )


def parse_cluster(source: str, options: dict[str, Any], specs: dict[str, GpuSpec]) -> Cluster:
    """The validated cluster of a ``[sources.<name>]`` table; raises OnpremConfigError naming the key."""
    for key in options:
        if key not in CLUSTER_KEYS:
            raise OnpremConfigError(f"{_key(source, key)}: unknown key (allowed: {', '.join(CLUSTER_KEYS)})")
    for key in ("node_groups", "pue", "energy_usd_per_kwh"):
        if key not in options:
            raise OnpremConfigError(
                f"{_key(source, key)}: missing {'price' if key == 'energy_usd_per_kwh' else 'required key'}"
            )
    pue = _decimal(source, "pue", options["pue"], positive=True)
    if pue < 1:
        raise OnpremConfigError(f"{_key(source, 'pue')}: must be at least 1 (facility power / IT power), not {pue}")
    cluster = {
        "pue": pue,
        "usd_per_kwh": _decimal(source, "energy_usd_per_kwh", options["energy_usd_per_kwh"]),
        "amortisation_months": _amortisation(source, options, "", None),
        "facility": _optional(source, options, "", "facility_usd_per_node_month", Decimal(0)),
        "operations": _optional(source, options, "", "operations_usd_per_node_month", Decimal(0)),
        "host_power_w": _optional(source, options, "", "host_power_w", Decimal(0)),
        "idle_power_fraction": _fraction(
            source, _optional(source, options, "", "idle_power_fraction", DEFAULT_IDLE_POWER_FRACTION)
        ),
    }
    tables = options["node_groups"]
    if not isinstance(tables, list) or not tables:
        raise OnpremConfigError(
            f"{_key(source, 'node_groups')}: must be a non-empty array of tables ([[sources.{source}.node_groups]])"
        )
    groups = tuple(_group(source, i, t, cluster, specs) for i, t in enumerate(tables))
    _check_names(source, groups)
    teams = _strings(source, "node_teams", options.get("node_teams", {}))
    node_tags_raw = options.get("node_tags", {})
    if not isinstance(node_tags_raw, dict):
        raise OnpremConfigError(f"{_key(source, 'node_tags')}: must be a table of node -> table of tags")
    node_tags = tuple(
        sorted((node, _strings(source, f"node_tags.{node}", tags)) for node, tags in node_tags_raw.items())
    )
    known = {n for g in groups for n in g.nodes}
    for key, node in [("node_teams", n) for n, _ in teams] + [("node_tags", n) for n, _ in node_tags]:
        if node not in known:
            raise OnpremConfigError(f"{_key(source, f'{key}.{node}')}: no node group lists node {node!r}")
    text = {
        k: options.get(k)
        for k in ("cluster", "region", "billing_account_id", "billing_account_name", "service_name", "metrics_source")
    }
    for key, value in text.items():
        if value is not None and (not isinstance(value, str) or not value):
            raise OnpremConfigError(f"{_key(source, key)}: must be a non-empty string")
    name = text["cluster"] or source
    return Cluster(
        source=source,
        name=name,
        region=text["region"] or name,
        billing_account_id=text["billing_account_id"] or "onprem",
        billing_account_name=text["billing_account_name"] or name,
        service_name=text["service_name"] or "On-prem GPU cluster",
        groups=groups,
        node_teams=teams,
        node_tags=node_tags,
        metrics_source=text["metrics_source"],
    )


def _check_names(source: str, groups: tuple[NodeGroup, ...]) -> None:
    seen_groups: set[str] = set()
    seen_nodes: dict[str, int] = {}
    for i, group in enumerate(groups):
        if group.name in seen_groups:
            raise OnpremConfigError(f"{_key(source, f'node_groups[{i}].name')}: {group.name!r} names two node groups")
        seen_groups.add(group.name)
        for node in group.nodes:
            if node in seen_nodes:
                raise OnpremConfigError(
                    f"{_key(source, f'node_groups[{i}].nodes')}: node {node!r} is also in "
                    f"node_groups[{seen_nodes[node]}]"
                )
            seen_nodes[node] = i


def specs_from_rows(rows: list[tuple[str, float | None, Decimal | None]]) -> dict[str, GpuSpec]:
    """``{model: GpuSpec}`` from (gpu_model, tdp_w, list_price_usd) rows of ``gpu_specs``."""
    return {
        model: GpuSpec(
            None if tdp is None else quantity(float(tdp), WATT_STEP), None if price is None else Decimal(price)
        )
        for model, tdp, price in rows
    }
