"""``gcp_billing_export``: the Cloud Billing usage cost export (standard or detailed), from BigQuery or files.

Sources: the BigQuery table (``project``, ``dataset``, ``table`` — ``gcp_billing_export_v1_*`` or
``gcp_billing_export_resource_v1_*``; ``endpoint`` for an emulator) or, with ``path``, its extracts
(JSONL / Parquet / flattened CSV, see :mod:`ingest.gcp.gcp_export_files`).

Incremental on ``export_time`` with a restatement lookback: rows for a usage day keep arriving for
days (credits and corrections come late, with a later ``export_time``). Each run finds the usage
days that have rows exported since ``watermark − lookback_days`` and fingerprints each such day over
*all* its rows (row count, newest ``export_time``, total cost); a day whose fingerprint changed is
re-read whole and replaces its (source, usage day) slice in one transaction. The mapping to FOCUS
is SQL (:mod:`ingest.gcp.gcp_export_mapping`) run by DuckDB over the rows — or, with ``push_down = true``
(BigQuery only), transpiled and run by BigQuery with the hourly rollup, so that only the rollup comes
home (:mod:`ingest.gcp.gcp_pushdown`); the run's ledger note then says what BigQuery billed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from gpufinops.ingest.core import paging, registry, validate
from gpufinops.ingest.core.files import expand_paths, fingerprint, sql_literal
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import OnInvalidOptions, OptionProblem, option
from gpufinops.ingest.gcp import doctor, gcp_common, gcp_export_files, gcp_export_mapping, gcp_pushdown
from gpufinops.ingest.gcp.gcp_export_mapping import conform_select, focus_select

log = logging.getLogger(__name__)

DEFAULT_LOOKBACK_DAYS = 7
DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
PROJECT_ID = re.compile(r"^[a-z][a-z0-9.:-]{3,62}$")
DATASET_ID = re.compile(r"^[A-Za-z0-9_]{1,1024}$")
TABLE_ID = re.compile(r"^[A-Za-z0-9_$-]{1,1024}$")
# A day's fingerprint over all its rows, for the days holding rows exported after a time (BigQuery SQL,
# which DuckDB also runs: the same text serves the files and the emulator).
MARKS_SQL = (
    "SELECT CAST({day} AS STRING) AS day, COUNT(*) AS row_count, "
    "CAST(MAX(export_time) AS STRING) AS newest, CAST(SUM(cost) AS STRING) AS total_cost "
    "FROM {table} WHERE {day} IN (SELECT DISTINCT {day} FROM {table} "
    "WHERE export_time > {since}) GROUP BY day"
)


@dataclass(frozen=True, kw_only=True)
class GcpBillingExportOptions(gcp_common.GcpClientOptions, OnInvalidOptions):
    project: str | None = option(None, "BigQuery: the project holding the export's dataset")
    dataset: str | None = option(None, "BigQuery: the export's dataset")
    table: str | None = option(None, "BigQuery: the export table (gcp_billing_export_v1_… or …_resource_v1_…)")
    path: str | list[str] | None = option(None, "files instead: a glob (JSONL, Parquet, flattened CSV)")
    lookback_days: float = option(
        DEFAULT_LOOKBACK_DAYS, "days of usage re-read before the newest export_time (rows for a day keep arriving)"
    )
    push_down: bool = option(False, "BigQuery only: roll up hourly in BigQuery (see Scale past one machine)")

    def validate(self) -> None:
        bigquery = any((self.project, self.dataset, self.table))
        if bool(self.path) == bigquery:
            raise OptionProblem("path", "set either project, dataset and table (BigQuery) or path (exported files)")
        if bigquery:
            for key, pattern in (("project", PROJECT_ID), ("dataset", DATASET_ID), ("table", TABLE_ID)):
                value = getattr(self, key)
                if not isinstance(value, str) or not pattern.match(value):
                    raise OptionProblem(key, f"{value!r} is not a valid BigQuery {key} id")
        if self.lookback_days < 0:
            raise OptionProblem("lookback_days", f"must be a number of days ≥ 0, not {self.lookback_days!r}")
        if self.push_down and self.path:
            raise OptionProblem(
                "push_down",
                "push_down = true needs the BigQuery table (project, dataset, table), not exported files (path)",
            )

    def window_lookback(self, declared: timedelta) -> timedelta:
        return timedelta(days=self.lookback_days)


class _Files:
    """Exported files: every file is read on each changed run (a day may span files)."""

    def __init__(self, ctx: IngestContext):
        self.ctx = ctx
        files = [
            f
            for f in expand_paths(ctx.source, ctx.options.path, ctx.base_dir)
            if f.lower().endswith(gcp_export_files.SUFFIXES)
        ]
        if not files:
            raise IngestError(
                f"{ctx.source}: path {ctx.options.path!r} matches no export file "
                f"({', '.join(gcp_export_files.SUFFIXES)})"
            )
        self.files = files
        self.fingerprint = hashlib.sha256(repr([(f, fingerprint(f)) for f in files]).encode()).hexdigest()
        self._relations: list[tuple[str, Any]] | None = None

    def relations(self) -> list[tuple[str, Any]]:
        if self._relations is None:
            self._relations = [gcp_export_files.relation(self.ctx.con, self.ctx.source, f) for f in self.files]
        return self._relations

    def marks(self, since: datetime | None) -> dict[str, list]:
        tolerant = validate.on_invalid(self.ctx) == validate.SKIP_ROWS  # bad rows are rejected later, not here
        table = (
            "("
            + " UNION ALL ".join(f"({conform_select(r, sch, tolerant=tolerant)})" for r, sch in self.relations())
            + ")"
        )
        sql = MARKS_SQL.format(
            table=table, day="CAST(usage_start_time AS DATE)", since="TIMESTAMP '1970-01-01 00:00:00+00'"
        )
        try:
            rows = self.ctx.con.execute(sql.replace("AS STRING", "AS VARCHAR")).fetchall()
        except duckdb.Error as exc:
            parts = self.parts([])
            explained = validate.explain(self.ctx.con, self.ctx.source, parts, [[] for _ in parts], exc)
            raise IngestError(
                explained or f"{self.ctx.source}: the export files can not be read: {str(exc).strip().splitlines()[0]}"
            ) from None
        return {day: [int(n), newest, total] for day, n, newest, total in rows if day}

    def parts(self, days: list[str]) -> list[validate.Part]:
        return [
            export_part(
                "file",
                f,
                rel,
                sch,
                days,
                self.ctx.team_tag_keys,
                unit="line" if f.endswith((".json", ".jsonl", ".json.gz", ".jsonl.gz")) else "row",
            )
            for f, (rel, sch) in zip(self.files, self.relations())
        ]


class _BigQuery:
    """The export table in BigQuery: two queries per changed run (day fingerprints, then the days' rows)."""

    def __init__(self, ctx: IngestContext):
        opts: GcpBillingExportOptions = ctx.options  # validate() checked project, dataset and table ids
        self.ctx = ctx
        self.table = f"`{opts.project}.{opts.dataset}.{opts.table}`"
        self.client = gcp_common.bigquery_client(ctx.source, opts, str(opts.project))
        self.fingerprint = None
        self.jobs = self.bytes_processed = self.bytes_billed = 0  # what this run asked BigQuery to do
        self.rollup_rows: int | None = None

    def _query(self, what: str, sql: str, arrow: bool = False) -> Any:
        def call():
            job = self.client.query(sql, timeout=gcp_common.TIMEOUT_S)
            if arrow:
                what_on = f"BigQuery {what} on {self.table}"
                result = gcp_common.bounded_arrow(self.ctx.source, what_on, job, self.ctx.options.bounds())
            else:
                pages = paging.Pages(self.ctx.source, f"BigQuery {what} result pages on {self.table}")
                rows = job.result(timeout=gcp_common.TIMEOUT_S)
                result = [row for page in pages.each(rows.pages, lambda _page: rows.next_page_token) for row in page]
            self.jobs += 1
            self.bytes_processed += int(job.total_bytes_processed or 0)
            self.bytes_billed += int(job.total_bytes_billed or 0)
            return result

        return gcp_common.with_retries(self.ctx.source, f"BigQuery {what} on {self.table}", call, self.ctx.options)

    def marks(self, since: datetime | None) -> dict[str, list]:
        stamp = (since or datetime(1970, 1, 1, tzinfo=UTC)).strftime("%Y-%m-%d %H:%M:%S.%f")
        sql = MARKS_SQL.format(table=self.table, day="DATE(usage_start_time)", since=f"TIMESTAMP '{stamp}+00'")
        rows = self._query("day fingerprints", sql)
        return {r["day"]: [int(r["row_count"]), str(r["newest"]), str(r["total_cost"])] for r in rows if r["day"]}

    def parts(self, days: list[str]) -> list[validate.Part]:
        dates = ", ".join(f"DATE '{d}'" for d in days)
        arrow = self._query("rows", f"SELECT * FROM {self.table} WHERE DATE(usage_start_time) IN ({dates})", arrow=True)
        name = "_gcp_bq_" + hashlib.sha256(self.ctx.run_id.encode()).hexdigest()[:16]
        self.ctx.con.register(name, arrow)
        return [export_part("table", self.table.strip("`"), name, arrow.schema, days, self.ctx.team_tag_keys)]

    def rollup(self, days: list[str], tag_keys: tuple[str, ...]) -> str:
        """push_down: the days' FOCUS rows rolled up in BigQuery (:mod:`ingest.gcp.gcp_pushdown`); the result as SQL."""
        sql, self.rollup_rows = gcp_pushdown.fetch_rollup(self, days, tag_keys)
        return sql


class GcpBillingExport:
    meta = registry.IngestorMeta(
        name="gcp_billing_export",
        target_table="cost_line_items",
        key=(
            "x_Source",
            "BillingAccountId",
            "SubAccountId",
            "ChargePeriodStart",
            "ChargePeriodEnd",
            "SkuId",
            "ResourceId",
            "RegionId",
            "AvailabilityZone",
            "Tags",
            "ChargeCategory",
            "ConsumedQuantity",
            "BilledCost",
            "EffectiveCost",
        ),
        slice_expr="strftime(timezone('UTC', \"ChargePeriodStart\"), '%Y-%m-%d')",
        source_column="x_Source",
        cursor=registry.Cursor(
            remembers="export_time (per usage day: row count, newest export_time, total cost)", resume_item="watermark"
        ),
        lookback=timedelta(days=DEFAULT_LOOKBACK_DAYS),
        default_schedule="15 */6 * * *",
        options=GcpBillingExportOptions,
        description="the BigQuery standard or detailed usage cost export (`project`, `dataset`, `table`), or "
        "its extracts (`path`: JSONL, Parquet, flattened CSV)",
        time_range=False,
        provider="gcp",
        extra=registry.Extra(name="gcp", unless="path"),
        transport=registry.Transport(client="google", endpoint="endpoint", paged=True, unless="path"),
        freshness=registry.Freshness(kind="cost", lag_hours=24.0),
        doctor=doctor.gcp_billing_export,
        init=("bigquery_table", "gcp_billing_path"),
    )

    def _backend(self, ctx: IngestContext):
        opts: GcpBillingExportOptions = ctx.options
        if opts.path:
            path = opts.path
            if ctx.base_dir and isinstance(path, str) and not Path(path).expanduser().is_absolute():
                path = str(Path(ctx.base_dir) / path)
            ctx.options = dataclasses.replace(opts, path=path)
            return _Files(ctx)
        return _BigQuery(ctx)

    def fetch(self, ctx: IngestContext) -> FetchResult:
        push_down = ctx.options.push_down
        backend = self._backend(ctx)
        result = self._fetch(ctx, backend, push_down)
        if push_down:  # the ledger says what BigQuery was paid for, skipped runs included
            result.watermark = gcp_pushdown.ledger_note(result.watermark, backend, backend.rollup_rows)
        return result

    def _fetch(self, ctx: IngestContext, backend: Any, push_down: bool) -> FetchResult:
        state = ctx.state
        if (
            backend.fingerprint is not None
            and backend.fingerprint == state.get("files")
            and not ctx.window.full_refresh
        ):
            return FetchResult([], state, watermark=state.get("watermark"), skipped_reason="no export file changed")
        # BigQuery: the days with rows exported since the runner's window start (the watermark minus
        # lookback_days); exported files carry no export_time index, so every day's marks are read
        since = ctx.window.since if backend.fingerprint is None else None
        marks = backend.marks(since)
        old: dict[str, list] = state.get("days", {})
        changed = sorted(d for d, m in marks.items() if old.get(d) != m)
        vanished = sorted(set(old) - set(marks)) if backend.fingerprint is not None else []  # files removed
        newest = max(
            [m[1] for m in marks.values()] + ([state["watermark"]] if state.get("watermark") else []), default=None
        )
        watermark = _iso(newest) if newest else None
        days = {**old, **marks}
        for day in vanished:
            days.pop(day, None)
        new_state: dict[str, Any] = {"days": days, "watermark": watermark}
        if backend.fingerprint is not None:
            new_state["files"] = backend.fingerprint
        if not changed and not vanished:
            return FetchResult([], new_state, watermark=watermark, skipped_reason="no usage day changed")
        bad = [d for d in changed + vanished if not DAY.match(d)]
        if bad:
            raise IngestError(f"{ctx.source}: unexpected usage day value {bad[0]!r}")
        log.info(
            "%s: %d usage day(s) changed (%s … %s), %d withdrawn",
            ctx.source,
            len(changed),
            changed[0] if changed else "-",
            changed[-1] if changed else "-",
            len(vanished),
        )
        batches = []
        if changed:

            def finish(mapped: str) -> str:
                return (
                    f"SELECT *, {sql_literal(ctx.source)} AS x_Source, {sql_literal(ctx.run_id)} AS x_IngestRunId "
                    f"FROM ({mapped})"
                )

            if push_down:
                batches.append(Batch("cost_line_items", finish(backend.rollup(changed, ctx.team_tag_keys)), changed))
            else:
                sql, rejects, explain = validate.cost_rows(ctx, backend.parts(changed), finish)
                batches.append(Batch("cost_line_items", sql, changed, diagnose=explain))
                batches += [rejects] if rejects else []
        if vanished:
            batches.append(Batch("cost_line_items", None, vanished))
        return FetchResult(batches, new_state, watermark=watermark)


def export_part(
    kind: str, name: str, relation: str, source_schema, days: list[str], tag_keys: tuple[str, ...], unit: str = "row"
) -> validate.Part:
    """One export file's (or BigQuery answer's) rows of ``days``, for validation and loading."""
    listed = ", ".join(sql_literal(d) for d in days) or "NULL"

    def mapped(rel: str, carry: tuple[str, ...]) -> str:
        canonical = (
            f"SELECT * FROM ({conform_select(rel, source_schema, carry)}) "
            f"WHERE strftime(timezone('UTC', usage_start_time), '%Y-%m-%d') IN ({listed})"
        )
        return focus_select(canonical, tag_keys, carry=carry)

    return validate.Part(
        kind,
        name,
        relation,
        mapped,
        [validate.Cast(*c) for c in gcp_export_mapping.casts(source_schema)],
        dict(gcp_export_mapping.ORIGIN),
        unit,
    )


def _iso(text: str) -> str:
    """An export_time as printed by DuckDB or BigQuery → ISO-8601 UTC."""
    value = datetime.fromisoformat(text.replace(" UTC", "+00:00").replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


INGESTORS = [GcpBillingExport]
