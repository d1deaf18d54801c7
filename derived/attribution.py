"""Attribution of measured GPU-hours to billed resources and teams, whatever order the data arrives in.

GPU metrics stream in minutes; bills arrive hours later and are restated for weeks. So a GPU-hour
keeps the *hints* its exporter gave (``resource_hint`` — the ``resource_label`` value —, ``host``,
the Kubernetes node's ``provider_id``, ``namespace``) and its ``resource_id`` / ``team`` are derived
from them by one function, :func:`resolve_sql`, which is re-run inside the transaction of every load
that can change its answer:

* a metrics load resolves the hours it inserted;
* a cost load resolves every GPU-hour whose hints or current resource name a ResourceId of the
  slices it replaced (the old rows' ids, captured before the delete, and the new rows' ids);
* a change of a source's rules (``resource_map``, ``namespace_teams``, an on-prem ``node_teams``)
  resolves the rows those rules apply to.

So the stored attribution is always what :func:`resolve_sql` gives over the current warehouse: the
same for every arrival order and however often a bill is restated (tests/test_attribution_order.py).

The rules (``resource_map``, ``namespace_teams`` of a metrics source; ``host_teams`` of an on-prem
source, from its ``node_teams`` and node groups) live in the table ``attribution_rules`` so that a
cost load, which does not know the metrics sources' config, resolves with them too.

Resolution, in order (docs/sources/utilisation.md, *Attribution*):

* ``resource_id``: the ``resource_hint`` when it is a billed ResourceId; else the host when it is
  one; else the source's ``resource_map[host]``; else the node's provider id (``aws:///zone/i-…`` →
  ``i-…``, ``gce://project/zone/name`` → the Compute Engine resource path, ``azure:///subscriptions/…`` → the
  ARM id lower-cased: an AKS node's scale-set instance) when billed.
* ``team``: the source's ``namespace_teams[namespace]`` (the scheduler's label); else the host's
  on-prem team (``node_teams``, else its node group's ``team``: exactly what the on-prem cost lines
  use); else the billed resource's latest ``x_Team`` (ties broken by the larger name, so the answer
  never depends on row order).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import duckdb
import pyarrow as pa

from gpufinops.derived.spec import Change
from gpufinops.derived.spec import Touched as Load
from gpufinops.warehouse import allocation_schema

log = logging.getLogger(__name__)

RULE_KINDS = ("resource_map", "namespace_teams", "host_teams")
# Tables holding GPU-hours with attribution: (table, has the Kubernetes / label hints).
ATTRIBUTED_TABLES = {"gpu_metrics_hourly": True, "gpu_processes_hourly": False}


def provider_resource_sql(col: str) -> str:
    """SQL: a Kubernetes node providerID as the ResourceId its cloud bills under (NULL when empty)."""
    parts = f"string_split(trim(substr({col}, 7), '/'), '/')"
    return (
        f"CASE WHEN {col} IS NULL OR {col} = '' THEN NULL "
        f"WHEN starts_with({col}, 'aws://') THEN nullif(regexp_extract(rtrim({col}, '/'), '[^/]*$'), '') "
        f"WHEN starts_with({col}, 'gce://') AND len({parts}) = 3 THEN "
        f"'//compute.googleapis.com/projects/' || {parts}[1] || '/zones/' || {parts}[2] || '/instances/' || {parts}[3] "
        # Azure: the ARM id, lower-cased (ARM ids compare case-insensitively; azure_cost_export lower-cases the
        # scale-set instance ids it builds)
        f"WHEN starts_with({col}, 'azure://') THEN nullif(rtrim(lower(substr({col}, 9)), '/'), '') "
        f"ELSE {col} END"
    )


def rules_table(
    source: str,
    resource_map: dict[str, str] | None = None,
    namespace_teams: dict[str, str] | None = None,
    host_teams: dict[str, str] | None = None,
) -> pa.Table:
    """The ``attribution_rules`` rows of one source (ATTRIBUTION_RULES schema)."""
    rows = [
        (kind, key, value)
        for kind, mapping in (
            ("resource_map", resource_map),
            ("namespace_teams", namespace_teams),
            ("host_teams", host_teams),
        )
        for key, value in sorted((mapping or {}).items())
    ]
    return pa.table(
        {
            "source": [source] * len(rows),
            "kind": [r[0] for r in rows],
            "key": [r[1] for r in rows],
            "value": [r[2] for r in rows],
        },
        schema=allocation_schema.ATTRIBUTION_RULES,
    )


def stored_rules(con: duckdb.DuckDBPyConnection, source: str) -> list[tuple[str, str, str]]:
    return [
        tuple(r)
        for r in con.execute(
            "SELECT kind, key, value FROM attribution_rules WHERE source = ? ORDER BY 1, 2, 3", [source]
        ).fetchall()
    ]


def rules_changed(con: duckdb.DuckDBPyConnection, source: str, rules: pa.Table) -> bool:
    """Whether ``rules`` (the source's, possibly none) differ from what the warehouse holds for it."""
    new = sorted(
        zip(rules.column("kind").to_pylist(), rules.column("key").to_pylist(), rules.column("value").to_pylist())
    )
    return new != stored_rules(con, source)


def resolve_sql(rows: str, *, hints: bool = True) -> str:
    """SELECT ``rid``, ``resource_id``, ``team`` for a relation of GPU-hours.

    ``rows`` must have the columns ``rid`` (any key the caller joins back on), ``source``, ``host``
    and, with ``hints``, ``resource_hint``, ``provider_id``, ``namespace``.
    """
    hint = "resource_hint" if hints else "CAST(NULL AS VARCHAR)"
    provider = provider_resource_sql("provider_id") if hints else "CAST(NULL AS VARCHAR)"
    namespace = "namespace" if hints else "CAST(NULL AS VARCHAR)"
    return f"""
WITH r AS (SELECT rid, source, host, {hint} AS resource_hint, {provider} AS provider_resource,
                  {namespace} AS namespace FROM {rows}),
mapped AS (SELECT source, key AS host, value AS resource_id FROM attribution_rules WHERE kind = 'resource_map'),
keys AS (SELECT DISTINCT v FROM (
           SELECT resource_hint AS v FROM r UNION ALL SELECT host FROM r UNION ALL SELECT provider_resource FROM r
           UNION ALL SELECT resource_id FROM mapped) WHERE v IS NOT NULL),
billed AS (
  SELECT "ResourceId" AS resource_id,
         arg_max("x_Team", ("ChargePeriodStart", "x_Team")) FILTER (WHERE "x_Team" IS NOT NULL) AS team
  FROM cost_line_items WHERE "ResourceId" IN (SELECT v FROM keys) GROUP BY 1),
matched AS (
  SELECT r.rid, r.source, r.host, r.namespace,
         COALESCE(bh.resource_id, bo.resource_id, m.resource_id, bp.resource_id) AS resource_id
  FROM r
  LEFT JOIN billed bh ON bh.resource_id = r.resource_hint
  LEFT JOIN billed bo ON bo.resource_id = r.host
  LEFT JOIN mapped m ON m.source = r.source AND m.host = r.host
  LEFT JOIN billed bp ON bp.resource_id = r.provider_resource)
SELECT x.rid, x.resource_id, COALESCE(nt.value, ht.value, b.team) AS team
FROM matched x
LEFT JOIN attribution_rules nt ON nt.kind = 'namespace_teams' AND nt.source = x.source AND nt.key = x.namespace
LEFT JOIN (SELECT key, max(value) AS value FROM attribution_rules WHERE kind = 'host_teams' GROUP BY key) ht
       ON ht.key = x.host
LEFT JOIN billed b ON b.resource_id = x.resource_id"""


def label_team_sql(alias: str = "m") -> str:
    """SQL: the team the scheduler's labels give a GPU-hour row ``alias`` (its source's namespace_teams)."""
    return (
        f"(SELECT value FROM attribution_rules ar WHERE ar.kind = 'namespace_teams' "
        f"AND ar.source = {alias}.source AND ar.key = {alias}.namespace)"
    )


def _update(con: duckdb.DuckDBPyConnection, table: str, where: str, params: list) -> int:
    """Re-resolve the rows of ``table`` matching ``where``; returns the rows whose answer changed.

    Resolution is done once per distinct (hints, stored answer) in scope, not per GPU-hour: a fleet's
    month is millions of GPU-hours but a few thousand such tuples (one per GPU and workload, roughly),
    so the joins against the bill and the rules see thousands of rows; only the rows of the tuples
    whose answer changed are then updated, through one join on the tuple."""
    hints = ATTRIBUTED_TABLES[table]
    cols = ("source", "host") + (("resource_hint", "provider_id", "namespace") if hints else ())
    stored = cols + ("resource_id", "team")
    keys, temp = f"_gpufinops_hint_keys_{table}", f"_gpufinops_resolved_{table}"
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {keys} AS SELECT row_number() OVER () AS rid, "
        f"{', '.join(f'{c} AS k_{c}' for c in stored)} FROM (SELECT DISTINCT {', '.join(stored)} FROM {table} "
        f"WHERE {where})",
        params,
    )
    try:
        scoped = f"(SELECT rid, {', '.join(f'k_{c} AS {c}' for c in cols)} FROM {keys})"
        changed_keys = con.execute(
            f"CREATE OR REPLACE TEMP TABLE {temp} AS SELECT k.*, x.resource_id AS new_resource_id, x.team AS new_team "
            f"FROM {keys} k JOIN ({resolve_sql(scoped, hints=hints)}) x ON x.rid = k.rid "
            f"WHERE k.k_resource_id IS DISTINCT FROM x.resource_id OR k.k_team IS DISTINCT FROM x.team"
        ).fetchall()[0][0]
        if not changed_keys:
            return 0
        match = " AND ".join(f"t.{c} IS NOT DISTINCT FROM x.k_{c}" for c in stored)
        changed = con.execute(
            f"UPDATE {table} AS t SET resource_id = x.new_resource_id, team = x.new_team FROM {temp} x "
            f"WHERE {match} AND ({where})",
            params,
        ).fetchall()[0][0]
    finally:
        con.execute(f"DROP TABLE IF EXISTS {temp}")
        con.execute(f"DROP TABLE IF EXISTS {keys}")
    return int(changed)


@dataclass
class Touched:
    """What a load changed that attribution depends on (collected by the runner during one load)."""

    cost_sources: set[str] = field(default_factory=set)  # cost slices replaced (affected ids in a temp table)
    metric_slices: list[tuple[str, str, str, list]] = field(default_factory=list)  # (table, source, slice_expr, slices)
    rule_sources: set[str] = field(default_factory=set)  # sources whose rules were replaced
    rule_hosts: set[str] = field(default_factory=set)  # hosts named by replaced host_teams rules

    @property
    def empty(self) -> bool:
        return not (self.cost_sources or self.metric_slices or self.rule_sources)


AFFECTED = "_gpufinops_affected_resources"


def start_cost_capture(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"CREATE TEMP TABLE IF NOT EXISTS {AFFECTED} (resource_id VARCHAR)")


def capture_cost_ids(con: duckdb.DuckDBPyConnection, where: str, params: list) -> None:
    """Remember the ResourceIds of the cost rows matching ``where`` (before a delete, after an insert)."""
    start_cost_capture(con)
    con.execute(
        f'INSERT INTO {AFFECTED} SELECT DISTINCT "ResourceId" FROM cost_line_items '
        f'WHERE "ResourceId" IS NOT NULL AND {where}',
        params,
    )


def capture_rule_hosts(con: duckdb.DuckDBPyConnection, source: str, touched: Touched) -> None:
    touched.rule_sources.add(source)
    touched.rule_hosts.update(
        h
        for (h,) in con.execute(
            "SELECT key FROM attribution_rules WHERE source = ? AND kind = 'host_teams'", [source]
        ).fetchall()
    )


def apply(con: duckdb.DuckDBPyConnection, touched: Touched) -> int:
    """Re-resolve the GPU-hours a load's changes can affect; inside the load's transaction."""
    if touched.empty:
        return 0
    changed = 0
    touched.metric_slices[:] = merged_slices(touched.metric_slices)  # (the allocation reads them after us)
    for table, source, slice_expr, slices in touched.metric_slices:
        where, params = slice_where(slice_expr, source, slices)
        changed += _update(con, table, where, params)
    if touched.rule_sources:
        for table in ATTRIBUTED_TABLES:
            changed += _update(
                con,
                table,
                "list_contains(?::VARCHAR[], source) OR list_contains(?::VARCHAR[], host)",
                [sorted(touched.rule_sources), sorted(touched.rule_hosts)],
            )
    if touched.cost_sources:
        ids = f"(SELECT DISTINCT resource_id FROM {AFFECTED})"
        for table, hints in ATTRIBUTED_TABLES.items():
            where = f"resource_id IN {ids} OR host IN {ids}"
            if hints:
                where += f" OR resource_hint IN {ids} OR ({provider_resource_sql('provider_id')}) IN {ids}"
            where += f" OR host IN (SELECT key FROM attribution_rules WHERE kind = 'resource_map' AND value IN {ids})"
            changed += _update(con, table, where, [])
        con.execute(f"DROP TABLE IF EXISTS {AFFECTED}")
    if changed:
        log.info("attribution: %d GPU-hour rows re-resolved", changed)
    return changed


# The slice of the hourly metrics sources (the ingestors' metrics_store.HOUR_SLICE_SQL): one UTC hour.
HOUR_SLICE = "strftime(\"hour\" AT TIME ZONE 'UTC', '%Y-%m-%dT%H')"
US_PER_HOUR = 3_600_000_000


def slice_hours(values: Iterable) -> list[int]:
    """Hourly slice values (``2026-10-01T05``) as UTC hours since the epoch, sorted; [] when one is not an hour."""
    try:
        return sorted(
            {int(datetime.strptime(str(v), "%Y-%m-%dT%H").replace(tzinfo=UTC).timestamp()) // 3600 for v in values}
        )
    except ValueError:
        return []


def hours_range_sql(hours: list[int]) -> str:
    """``hour`` within the span of ``hours`` (UTC hours since the epoch), so a scan reads only their row groups."""
    return f"hour >= make_timestamptz({hours[0] * US_PER_HOUR}) AND hour < make_timestamptz({(hours[-1] + 1) * US_PER_HOUR})"


def slice_where(slice_expr: str, source: str, slices: list) -> tuple[str, list]:
    """The WHERE (and its parameters) of a source's replaced slices. Hourly slices compare each row's hour
    as a number (its UTC hour since the epoch) within their span, instead of formatting every row's hour of
    the source as a string (a cost that grew with the table); the rows matched are the same."""
    hours = slice_hours(slices) if slice_expr == HOUR_SLICE and slices else []
    if hours:
        numbers = ", ".join(str(h) for h in hours)
        return f"source = ? AND {hours_range_sql(hours)} AND epoch_us(hour) // {US_PER_HOUR} IN ({numbers})", [source]
    placeholders = ", ".join("?" for _ in slices)
    return (f"source = ? AND ({slice_expr}) IN ({placeholders})" if slices else "source = ?"), [source, *slices]


def merged_slices(slices: list[tuple[str, str, str, list]]) -> list[tuple[str, str, str, list]]:
    """A load's metric slices, one entry per (table, source, slice expression): a month rolled up day by
    day is 30 batches of one table, re-resolved (and re-allocated) in one pass instead of 30. An entry
    without slices (the whole source) absorbs the others of its key."""
    merged: dict[tuple[str, str, str], dict | None] = {}
    for table, source, slice_expr, values in slices:
        key = (table, source, slice_expr)
        if not values:
            merged[key] = None
        elif key not in merged or merged[key] is not None:
            merged.setdefault(key, {}).update(dict.fromkeys(values))  # type: ignore[union-attr]
    return [(table, source, expr, list(values or ())) for (table, source, expr), values in merged.items()]


def reattribute_all(con: duckdb.DuckDBPyConnection) -> int:
    """Re-resolve every GPU-hour (a migration, or a repair after editing the warehouse by hand)."""
    return sum(_update(con, table, "TRUE", []) for table in ATTRIBUTED_TABLES)


def sources_with_rules(con: duckdb.DuckDBPyConnection) -> Iterable[str]:
    return [s for (s,) in con.execute("SELECT DISTINCT source FROM attribution_rules ORDER BY 1").fetchall()]


def notes(touched: Load) -> Touched:
    """This load's attribution notes (the allocation reads them after us)."""
    return touched.note("attribution", Touched)


def capture_change(con: duckdb.DuckDBPyConnection, change: Change, touched: Load) -> None:
    """The registry's capture (derived/registry.py): what a batch of a followed table changed."""
    mine = notes(touched)
    if change.table == "cost_line_items" and change.where is not None:
        mine.cost_sources.add(change.source)  # the resources whose GPU-hours this load may re-attribute
        capture_cost_ids(con, change.where, change.params)
    elif change.table == "attribution_rules":
        capture_rule_hosts(con, change.source, mine)
    elif change.table in ATTRIBUTED_TABLES and change.inserted:
        mine.metric_slices.append((change.table, change.source, change.slice_expr, list(change.slices)))


def apply_load(con: duckdb.DuckDBPyConnection, touched: Load) -> int:
    return apply(con, notes(touched))
