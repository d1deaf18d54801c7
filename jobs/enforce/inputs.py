"""What the budget → quota function needs, read from the warehouse: each enforced budget's spend in its
period (the same sum the budget alert quotes), the burn now, the hours left, and per team and cluster the
flavors it runs on, their $ per GPU-hour on that cluster, committed GPUs and the GPUs running now."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from gpufinops.jobs.export import clusters as clusters_mod
from gpufinops.jobs.export.settings import ExportSettings
from gpufinops.models.budget_quota import ClusterDemand, Flavor, QuotaInputs
from gpufinops.models.budget_spend import budget_spend, hours_left
from gpufinops.models.budgets import Budget
from gpufinops.warehouse import alerts_queries as aq
from gpufinops.warehouse.queries import enforcement as eq

WINDOW_DAYS = 14
HOUR = Decimal(3600)


@dataclass
class Fleet:
    """The clusters and what each team's GPUs cost on them (one read of the warehouse)."""

    clusters: clusters_mod.ClusterMap
    usage: list[dict]  # warehouse.queries.enforcement.flavor_usage rows, with the cluster added
    edge: datetime | None


def load_fleet(con, settings: ExportSettings | None = None) -> Fleet:
    from gpufinops.warehouse import queries

    settings = settings or ExportSettings()
    resources = queries.export_gpu_resources(con, tag_keys=settings.cluster_tag_keys, days=WINDOW_DAYS).to_dicts()
    cmap = clusters_mod.ClusterMap(
        resources,
        queries.export_onprem_node_groups(con, days=WINDOW_DAYS).to_dicts(),
        queries.export_team_namespaces(con, days=WINDOW_DAYS).to_dicts(),
    )
    usage = []
    for row in eq.flavor_usage(con, days=WINDOW_DAYS).to_dicts():
        cluster = cmap.of_resource.get(row["resource_id"])
        if cluster is not None:
            usage.append({**row, "cluster": cluster})
    return Fleet(cmap, usage, aq.data_edge(con))


def rates(usage: list[dict]) -> dict[tuple[str, str, str], Decimal]:
    """$ per GPU-hour per (cluster label, GPU model, capacity) over every team's lines there; committed
    lines price the on-demand flavor only where no on-demand line does."""
    cost: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    hours: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    for row in usage:
        key = (row["cluster"].label, row["gpu_model"], row["capacity"])
        cost[key] += Decimal(str(row["cost"] or 0))
        hours[key] += Decimal(str(row["gpu_hours"] or 0))
    out = {k: (cost[k] / hours[k]).quantize(Decimal("0.0001")) for k in cost if hours[k] > 0}
    for (label, model, capacity), rate in list(out.items()):
        if capacity == "committed":
            out.setdefault((label, model, "on-demand"), rate)
    return out


def team_clusters(fleet: Fleet, team: str, prices: dict[tuple[str, str, str], Decimal]) -> list[ClusterDemand]:
    """The clusters ``team`` ran GPUs on in the window, each with its flavors and its share of the team's spend."""
    mine = [r for r in fleet.usage if r["team"] == team]
    by_cluster: dict[str, list[dict]] = defaultdict(list)
    for row in mine:
        by_cluster[row["cluster"].label].append(row)
    out = []
    for label, rows in sorted(by_cluster.items()):
        cluster = rows[0]["cluster"]
        flavors: dict[tuple[str, str], dict] = {}
        for row in rows:
            capacity = "on-demand" if row["capacity"] == "committed" else row["capacity"]
            f = flavors.setdefault((row["gpu_model"], capacity), {"committed": 0, "running": 0})
            f["running"] += int(row["running_gpus"])
            if row["capacity"] == "committed":
                f["committed"] += int(row["peak_gpus"])
        built = tuple(
            Flavor(
                model,
                capacity,
                prices.get((label, model, capacity)),
                committed_gpus=f["committed"],
                capacity_gpus=cluster.capacity(model),
                running_gpus=f["running"],
            )
            for (model, capacity), f in sorted(flavors.items())
        )
        spend = sum((Decimal(str(r["cost"] or 0)) for r in rows), Decimal(0))
        out.append(ClusterDemand(cluster.name, built, spend))
    return out


def _non_gpu_burn(con, team: str, edge: datetime) -> Decimal:
    """The team's spend per hour without GPUs over the 24 hours before the data's edge."""
    return Decimal(str(eq.non_gpu_cost(con, team, edge - timedelta(days=1), edge))) / 24


def budget_inputs(con, budget: Budget, fleet: Fleet, prices: dict) -> list[QuotaInputs]:
    """One QuotaInputs per team of an enforced budget; a budget of several teams gives each team what it
    spent plus the money left in proportion to its spend (all of it to the only team)."""
    if fleet.edge is None or not budget.scope.teams:
        return []
    spent, per_team, burn = budget_spend(con, budget, fleet.edge)
    hours, label, _end = hours_left(fleet.edge, budget.period)
    remaining = budget.amount - spent
    teams = budget.scope.teams
    out = []
    for team in teams:
        team_spent = per_team.get(team, Decimal(0))
        if len(teams) == 1:
            amount, team_spent = budget.amount, spent
        else:
            exact = sum((per_team.get(t, Decimal(0)) for t in teams), Decimal(0))
            share = team_spent / exact if exact > 0 else Decimal(1) / len(teams)
            amount = team_spent + remaining * share
        team_burn = burn if len(teams) == 1 or burn is None or spent <= 0 else burn * team_spent / spent
        demand = tuple(team_clusters(fleet, team, prices))
        reserved = _non_gpu_burn(con, team, fleet.edge) * hours
        out.append(
            QuotaInputs(
                budget.name, team, budget.enforce, amount, team_spent, hours, team_burn, label, demand, reserved
            )
        )
    return out
