"""``onprem``: a private GPU cluster's costs, modelled hour by hour into ``cost_line_items``.

The cluster is described in the config (node groups: nodes, GPU model and count per node, purchase
prices, amortisation, power, PUE, energy price, facility and operations cost; see
:mod:`ingest.onprem.onprem_cost`). Every configured GPU gets FOCUS line items for every hour of the
cluster's metrics window (the first to the last hour in which ``gpu_metrics_hourly`` holds a row for
one of its nodes), priced by :func:`ingest.onprem.onprem_cost.hourly_gpu_cost` from that hour's measured
power, else its utilisation (the TDP model), else the idle draw — the line's Tags say which.

FOCUS semantics, per GPU-hour (``ProviderName = PublisherName = InvoiceIssuerName = 'onprem'``: the
organisation runs, builds and charges back its own capacity, so no third party is paid through these
lines; ``InvoiceId`` = ``<cluster>-YYYY-MM``, the month's chargeback statement; ``ServiceCategory``
Compute / ``Other (Compute)`` (FOCUS 1.2 has no bare-metal subcategory); ``ChargeCategory = 'Usage'``,
``PricingCategory = 'Committed'``: owned capacity costs whether used or not; ``ConsumedQuantity`` 1,
``ConsumedUnit = 'Hours'``, ``x_GpuCount = 1``, ``ResourceId`` = the node, ``ResourceName`` =
``<node>/gpu<slot>``), up to three lines told apart by ``SkuId`` ``<cluster>/<group>/<component>``:

* ``hardware``: the amortised purchase. ``EffectiveCost`` is the hour's share; ``BilledCost`` is 0,
  as on the usage lines of an all-upfront reservation: the purchase was invoiced once, up front.
* ``energy``: GPU + host share of the draw × PUE × price; ``BilledCost = EffectiveCost`` (paid as used).
* ``facility``: facility + operations per node-month (only when configured); ``BilledCost = EffectiveCost``.

The team is the scheduler's label on the GPU-hour (``gpu_metrics_hourly.team``), else
``node_teams``, else the node group's ``team``. Incremental: each day of the window is one slice;
a day is re-costed when its metrics were reloaded (a per-day fingerprint of the metric rows' ingest
runs) or the window's first/last hour moved into or out of it, and every day when the cluster's
config changed. A re-run with nothing new is skipped and changes nothing. The lines themselves are
built by ``onprem_lines.py``.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import duckdb

from gpufinops.derived import attribution
from gpufinops.ingest.core import registry
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import SourceOptions, option
from gpufinops.ingest.metrics import metrics_attribution
from gpufinops.ingest.onprem import doctor
from gpufinops.ingest.onprem.onprem_cost import Cluster, OnpremConfigError, parse_cluster, specs_from_rows
from gpufinops.ingest.onprem.onprem_lines import build_lines

log = logging.getLogger(__name__)

_DAY_SQL = "CAST(CAST({col} AS DATE) AS VARCHAR)"


Number = float | str  # an amount: a TOML number, or its exact decimal text ("0.1125")


@dataclass(frozen=True, kw_only=True)
class OnpremOptions(SourceOptions):
    """The cluster's cost model. Types are checked here; amounts, node groups and GPU models (against
    the warehouse's gpu_specs) by ``onprem_cost.parse_cluster`` when the source runs."""

    node_groups: list[dict[str, Any]] = option(
        doc="[[node_groups]]: name, nodes, gpu_model, gpus_per_node, server_price_usd, … (below)"
    )
    pue: Number = option(doc="facility power / IT power (at least 1)")
    energy_usd_per_kwh: Number = option(doc="the energy price")
    amortisation_months: Number | None = option(None, "the hardware's amortisation period (or per node group)")
    amortisation_years: Number | None = option(None, "the same in years")
    facility_usd_per_node_month: Number | None = option(None, "facility cost per node and month (0)")
    operations_usd_per_node_month: Number | None = option(None, "operations cost per node and month (0)")
    host_power_w: Number | None = option(None, "a node's non-GPU draw, W (0)")
    idle_power_fraction: Number | None = option(None, "an idle GPU's draw as a share of its TDP (0.1)")
    node_teams: dict[str, str] | None = option(None, "node → team, when the scheduler's labels don't say")
    node_tags: dict[str, dict[str, Any]] | None = option(None, "node → tags copied into Tags")
    metrics_source: str | None = option(None, "cost only this utilisation source's GPU-hours")
    cluster: str | None = option(None, "the cluster's name (default: the source's)")
    region: str | None = option(None, "RegionId of the lines (default: the cluster's name)")
    billing_account_id: str | None = option(None, "BillingAccountId of the lines (onprem)")
    billing_account_name: str | None = option(None, "BillingAccountName of the lines (the cluster's name)")
    service_name: str | None = option(None, "ServiceName of the lines (On-prem GPU cluster)")

    def cluster_table(self) -> dict[str, Any]:
        """The keys the config set, as ``parse_cluster`` reads a ``[sources.<name>]`` table."""
        return {k: v for k, v in self.given().items() if v is not None}


def load_cluster(con: duckdb.DuckDBPyConnection, source: str, options: OnpremOptions) -> Cluster:
    """The source's cluster, validated against the warehouse's ``gpu_specs``; IngestError naming the key."""
    rows = con.execute("SELECT gpu_model, tdp_w, list_price_usd FROM gpu_specs").fetchall()
    try:
        return parse_cluster(source, options.cluster_table(), specs_from_rows(rows))
    except OnpremConfigError as exc:
        raise IngestError(f"{source}: config error: {exc}") from None


def _metric_filter(cluster: Cluster) -> tuple[str, list[Any]]:
    nodes = cluster.nodes()
    where = "mig_instance IS NULL AND (list_contains(?::VARCHAR[], host) OR list_contains(?::VARCHAR[], resource_id))"
    params: list[Any] = [nodes, nodes]
    if cluster.metrics_source:
        where += " AND source = ?"
        params.append(cluster.metrics_source)
    return where, params


def metric_days(con: duckdb.DuckDBPyConnection, cluster: Cluster) -> dict[str, tuple[str, datetime, datetime]]:
    """Per UTC day with metrics for the cluster's nodes: (fingerprint of its rows' loads, first, last hour)."""
    where, params = _metric_filter(cluster)
    rows = con.execute(
        f"""
        SELECT {_DAY_SQL.format(col="hour")} AS day,
               count(*) || ':' || md5(string_agg(DISTINCT coalesce(ingest_run_id, ''), ',' ORDER BY coalesce(ingest_run_id, ''))),
               min(hour), max(hour)
        FROM gpu_metrics_hourly WHERE {where} GROUP BY 1""",
        params,
    ).fetchall()
    return {day: (fp, first.astimezone(UTC), last.astimezone(UTC)) for day, fp, first, last in rows}


def _gpu_metrics(con: duckdb.DuckDBPyConnection, cluster: Cluster, days: list[str]) -> dict[tuple[str, datetime], list]:
    """(node, hour) -> [(gpu_uuid, util_mean, power_mean_w, team)] sorted by gpu_uuid; the team is the one
    the scheduler's labels give (the metrics source's namespace_teams), never one derived from a bill."""
    where, params = _metric_filter(cluster)
    rows = con.execute(
        f"""
        SELECT CASE WHEN list_contains(?::VARCHAR[], host) THEN host ELSE resource_id END AS node, hour, gpu_uuid,
               avg(util_mean), avg(power_mean_w), min({attribution.label_team_sql("m")})
        FROM gpu_metrics_hourly m
        WHERE {where} AND {_DAY_SQL.format(col="hour")} IN (SELECT unnest(?::VARCHAR[]))
        GROUP BY ALL ORDER BY 1, 2, 3""",
        [cluster.nodes(), *params, days],
    ).fetchall()
    out: dict[tuple[str, datetime], list] = {}
    for node, hour, uuid, util, power, team in rows:
        out.setdefault((node, hour.astimezone(UTC)), []).append((uuid, util, power, team))
    return out


def _day(ts: datetime) -> str:
    return ts.astimezone(UTC).date().isoformat()


def _touches(day: str, since: datetime | None, until: datetime | None) -> bool:
    start = datetime.combine(date.fromisoformat(day), datetime.min.time(), UTC)
    return (since is None or start + timedelta(days=1) > since) and (until is None or start < until)


def _all_days(first: datetime, last: datetime) -> list[str]:
    count = (last.date() - first.date()).days + 1
    return [(first.date() + timedelta(days=i)).isoformat() for i in range(count)]


def _days_to_cost(state: dict[str, Any], config: str, fps: dict[str, str], first: datetime, last: datetime) -> set[str]:
    """Days whose lines must be (re)written or withdrawn since the state was saved."""
    old: dict[str, str] = state.get("days", {})
    if state.get("config") != config:
        return set(fps) | set(old)
    todo = {d for d, fp in fps.items() if old.get(d) != fp} | (set(old) - set(fps))
    for key, now in (("first_hour", first), ("last_hour", last)):
        if state.get(key) != now.isoformat():
            todo.add(_day(now))
            if state.get(key):
                todo.add(_day(datetime.fromisoformat(state[key])))
    return todo


def host_team_rules(ctx: IngestContext, cluster: Cluster) -> list[Batch]:
    """The cluster's node -> team (node_teams, else the node group's team) as attribution rules, so the
    nodes' GPU-hours take exactly the team their cost lines do; none when unchanged."""
    teams = dict(cluster.node_teams)
    host_teams = {node: teams.get(node, group.team) for group in cluster.groups for node in group.nodes}
    rules = attribution.rules_table(ctx.source, host_teams={n: t for n, t in host_teams.items() if t})
    if not attribution.rules_changed(ctx.con, ctx.source, rules):
        return []
    return [metrics_attribution.rules_batch(ctx.source, rules)]


def label_rules_fingerprint(con: duckdb.DuckDBPyConnection) -> str:
    """A digest of every metrics source's namespace -> team rules: the lines' teams follow them."""
    rows = con.execute(
        "SELECT source, key, value FROM attribution_rules WHERE kind = 'namespace_teams' ORDER BY 1, 2, 3"
    ).fetchall()
    return hashlib.sha1(repr(rows).encode()).hexdigest()[:12]


class Onprem:
    meta = registry.IngestorMeta(
        name="onprem",
        target_table="cost_line_items",
        key=("x_Source", "ChargePeriodStart", "ResourceId", "ResourceName", "SkuId"),
        slice_expr=_DAY_SQL.format(col='"ChargePeriodStart"'),
        source_column="x_Source",
        cursor=registry.Cursor(
            remembers="per-day fingerprints of the cluster's gpu_metrics_hourly rows, and the cluster config's",
            resume_item=None,
        ),
        lookback=timedelta(0),
        default_schedule="40 * * * *",  # after the utilisation sources' hourly rollups
        options=OnpremOptions,
        time_range=True,
        description="a private GPU cluster's cost model (hardware price, amortisation, power, PUE, energy price, "
        "operations) over its measured GPU-hours (`ProviderName = PublisherName = InvoiceIssuerName = 'onprem'`); "
        "see below",
        provider="onprem",
        extra=None,
        transport=None,
        freshness=registry.Freshness(kind="cost", lag_hours=3.0),
        doctor=doctor.onprem,
        init=("onprem_group",),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        cluster = load_cluster(ctx.con, ctx.source, ctx.options)
        rules = host_team_rules(ctx, cluster)
        found = metric_days(ctx.con, cluster)
        if not found:
            return FetchResult(
                rules,
                ctx.state,
                watermark=ctx.state.get("watermark"),
                skipped_reason=f"no GPU metrics for the cluster's nodes yet (the cost window follows "
                f"gpu_metrics_hourly): {', '.join(cluster.nodes()[:5])}",
            )
        first = min(v[1] for v in found.values())
        last = max(v[2] for v in found.values())
        fps = {d: found[d][0] if d in found else "none" for d in _all_days(first, last)}
        config = cluster.fingerprint() + ":" + label_rules_fingerprint(ctx.con)
        ranged = ctx.window.ranged
        if ranged:  # --since/--until: re-cost the whole days the range touches, leaving the cursor alone
            todo = {d for d in fps if _touches(d, ctx.window.since, ctx.window.until)}
        else:
            todo = _days_to_cost(ctx.state, config, fps, first, last)
        if not todo:
            return FetchResult.unchanged(ctx.state, "no new GPU metrics and no change to the cluster's config", rules)
        days = sorted(d for d in todo if d in fps)
        metrics = _gpu_metrics(ctx.con, cluster, days) if days else {}
        data = build_lines(cluster, days, first, last, metrics, ctx.run_id) if days else None
        log.info(
            "%s: %d line items for %d day(s) of %d GPUs",
            ctx.source,
            0 if data is None else data.num_rows,
            len(days),
            sum(g.gpus_per_node * len(g.nodes) for g in cluster.groups),
        )
        batch = Batch(table="cost_line_items", data=data, slices=sorted(todo))
        watermark = last.isoformat()
        if ranged:
            return FetchResult(rules + [batch], ctx.state, watermark=ctx.state.get("watermark"))
        state = {
            "config": config,
            "days": fps,
            "first_hour": first.isoformat(),
            "last_hour": watermark,
            "watermark": watermark,
        }
        return FetchResult(rules + [batch], state, watermark=watermark)


INGESTORS = [Onprem]
