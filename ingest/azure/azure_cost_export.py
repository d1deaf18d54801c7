"""``azure_cost_export``: Azure Cost Management exports of the ``FocusCost`` dataset (FOCUS 1.0, 1.0r2,
1.2-preview, 1.2; CSV, CSV.gz or Parquet), from Azure Blob Storage or a local copy of the container.

Every run is found through its ``manifest.json`` (ingest/azure/focuscost_manifest.py) and loaded only whole;
the newest run of a month is its restatement and replaces the month (the (source, billing period) slice),
exactly as a CUR 2.0 delivery does. The rows stream through DuckDB into ``cost_line_items`` with the FOCUS
mapping every FOCUS source shares (ingest/core/focus_files.py), each VM's size read from its SKU details or
meter per the export's dataset version (ingest/azure/focuscost.py), so the Azure GPU inventory gives its GPU
model and count.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from gpufinops.ingest.azure import doctor, focuscost
from gpufinops.ingest.azure import focuscost_manifest as manifests
from gpufinops.ingest.azure.azure_export_store import BlobStore, LocalStore
from gpufinops.ingest.core import focus_files, registry, validate
from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import OnInvalidOptions, OptionProblem, TransportOptions, option
from gpufinops.ingest.storage.options import WILDCARDS, unscoped
from gpufinops.kernel import ranges
from gpufinops.warehouse import reference

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class AzureCostExportOptions(OnInvalidOptions, TransportOptions):
    path: str | None = option(None, "local instead: a folder holding a copy of the container (e.g. made by azcopy)")
    account_url: str | None = option(None, "Blob Storage: the account's URL, https://<account>.blob.core.windows.net")
    container: str | None = option(None, "Blob Storage: the container the export writes to")
    prefix: str = option("", "the export's root folder in the container (or in path)")
    connection_string_env: str = option(
        "AZURE_STORAGE_CONNECTION_STRING", "the environment variable holding a storage connection string, if any"
    )
    sas_token_env: str = option("AZURE_STORAGE_SAS_TOKEN", "the environment variable holding a SAS token, if any")
    retries: int = option(
        3, "Blob Storage: retries of a call answered 5xx or a failed connection", range=ranges.NON_NEGATIVE
    )
    initial_backoff_s: float = option(
        15.0,
        "Blob Storage: seconds before the first retry (then 3^n more each time, Azure's default)",
        range=ranges.NON_NEGATIVE,
    )

    def validate(self) -> None:
        if any(c in self.prefix for c in WILDCARDS):  # List Blobs takes a literal prefix: a glob here is a mistake
            why = unscoped(self.prefix) or "List Blobs asks for a literal prefix"
            raise OptionProblem("prefix", f"the export's root folder is literal, without wildcards: {why}")
        if bool(self.path) == bool(self.container):
            raise OptionProblem("path", "set exactly one of container (Blob Storage) or path (a local copy of it)")


def open_store(ctx: IngestContext) -> LocalStore | BlobStore:
    opts = ctx.options
    if opts.path:
        root = Path(opts.path).expanduser()
        root = root if root.is_absolute() else ctx.base_dir / root
        return LocalStore(ctx.source, root / opts.prefix.strip("/") if opts.prefix.strip("/") else root)
    return BlobStore.connect(ctx.source, opts)


def _fingerprint(runs: list[manifests.Run]) -> list[list[str]]:
    return [[r.export, r.run_id, r.tag] for r in runs]


class AzureCostExport:
    meta = registry.IngestorMeta(
        name="azure_cost_export",
        target_table="cost_line_items",
        key=focus_files.FocusFiles.meta.key,
        slice_expr='CAST("BillingPeriodStart" AS VARCHAR)',
        source_column="x_Source",
        cursor=registry.Cursor(
            remembers="the newest export run per month (run id and manifest version)", resume_item=None
        ),
        lookback=timedelta(0),
        default_schedule="45 */6 * * *",
        options=AzureCostExportOptions,
        time_range=True,
        description="Azure Cost Management FocusCost exports (FOCUS 1.0, 1.0r2, 1.2-preview, 1.2; CSV, CSV.gz, "
        "Parquet) found through their `manifest.json` in Blob Storage (`container`) or a local copy (`path`)",
        provider="azure",
        extra=registry.Extra(name="azure", unless="path"),
        freshness=registry.Freshness(kind="cost", lag_hours=48.0),
        doctor=doctor.azure_cost_export,
        init=None,
        transport=registry.Transport(client="azure", endpoint="account_url", paged=True, unless="path"),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        store = open_store(ctx)
        objects = store.list()
        keys = {o.key for o in objects}
        runs = []
        for obj in objects:
            if manifests.is_manifest(obj.key):
                run = manifests.parse(ctx.source, store.name(obj.key), obj.key, obj.tag, store.read(obj.key), keys)
                if run is not None:
                    runs.append(run)
        if not runs:
            raise IngestError(f"{ctx.source}: no FocusCost export run (manifest.json) under {store.name('')}")
        months = manifests.newest(runs)
        for month_runs in months.values():
            for run in month_runs:
                manifests.check_whole(ctx.source, store.name(run.manifest), run, keys)
        loaded: dict[str, Any] = ctx.state.get("months", {})
        window = ctx.window
        changed = {
            m: rs
            for m, rs in months.items()
            if (window.ranged and _in_window(window, m)) or (not window.ranged and loaded.get(m) != _fingerprint(rs))
        }
        if not changed:
            return FetchResult.unchanged(ctx.state, "no new export run")
        scratch = Path(tempfile.mkdtemp(prefix="gpufinops-azure-export-"))
        try:
            return self._load(ctx, store, changed, loaded, scratch)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise

    def _load(
        self,
        ctx: IngestContext,
        store: LocalStore | BlobStore,
        changed: dict[str, list[manifests.Run]],
        loaded: dict[str, Any],
        scratch: Path,
    ) -> FetchResult:
        skip_rows = validate.on_invalid(ctx) == validate.SKIP_ROWS
        parts: list[validate.Part] = []
        slices: set[str] = set()
        for month, runs in sorted(changed.items()):
            for run in runs:
                rows: dict[str, int] = {}
                for blob in run.blobs:
                    path = str(store.local_file(blob.key, scratch))
                    part = _part(ctx, store.name(blob.key), path, run)
                    rows[blob.key] = _row_count(ctx, part)
                    slices.update(focus_files.billing_periods(ctx.con, ctx.source, part, skip_rows))
                    parts.append(part)
                manifests.check_whole(ctx.source, store.name(run.manifest), run, set(rows), rows)
                log.info("%s: %s run %s for %s: %d row(s)", ctx.source, run.export, run.run_id, month, run.row_count)
            # the month's slices before this run: a period the old run held and the new one does not is emptied
            slices.update(loaded.get(month + "|slices", []))
        new_state = dict(loaded)
        for month, runs in changed.items():
            new_state[month] = _fingerprint(runs)
            new_state[month + "|slices"] = sorted(s for s in slices if s.startswith(month))
        sql, rejects, explain = validate.cost_rows(ctx, parts, lambda union: _enrich(union, ctx))
        batch = Batch(table="cost_line_items", data=sql, slices=sorted(slices), diagnose=explain)
        weakref.finalize(batch, shutil.rmtree, str(scratch), True)  # scratch lives until the load is done
        batches = [batch] + ([rejects] if rejects else [])
        if ctx.window.ranged:
            return FetchResult(batches, ctx.state, watermark=ctx.state.get("watermark"))
        watermark = max((m for m in new_state if "|" not in m), default=None)
        return FetchResult(batches, {"months": new_state, "watermark": watermark}, watermark=watermark)


def _in_window(window: Any, month: str) -> bool:
    from datetime import UTC, datetime

    return bool(window.holds_period(datetime.fromisoformat(f"{month}-01T00:00:00").replace(tzinfo=UTC)))


def _part(ctx: IngestContext, name: str, path: str, run: manifests.Run) -> validate.Part:
    types = focus_files._describe(ctx.con, ctx.source, path, name)
    columns = list(types)
    missing = [c for c in focus_files.cost_schema.FOCUS_MANDATORY if c not in columns]
    if missing:
        raise IngestError(f"{ctx.source}: object {name} is missing mandatory FOCUS column(s) {', '.join(missing)}")
    layout = focuscost.LAYOUTS[run.data_version]
    relation, mapped_columns = focuscost.relation(focus_files._source_relation(path), layout, columns)
    types = {**types, "x_InstanceType": "VARCHAR"}
    return validate.Part(
        "object",
        name,
        relation,
        lambda rel, carry: focus_files._file_select(path, mapped_columns, ctx.team_tag_keys, relation=rel, carry=carry),
        focus_files.casts(types),
    )


def _row_count(ctx: IngestContext, part: validate.Part) -> int:
    row = ctx.con.execute(f"SELECT count(*) FROM {part.relation}").fetchone()
    return int(row[0]) if row else 0


def _enrich(union: str, ctx: IngestContext) -> str:
    """The rows, each VM's daily usage spread into hours (focuscost.hourly_sql), with the inventory's GPU model
    and count for their VM size, and the source and run."""
    return (
        f"SELECT u.* REPLACE (COALESCE(u.x_GpuModel, it.gpu_model) AS x_GpuModel, "
        f"COALESCE(u.x_GpuCount, it.gpu_count) AS x_GpuCount), "
        f"{sql_literal(ctx.source)} AS x_Source, {sql_literal(ctx.run_id)} AS x_IngestRunId "
        f"FROM ({focuscost.hourly_sql(union)}) u "
        f"LEFT JOIN {reference.INSTANCE_GPUS_SQL} it ON it.instance_type = u.x_InstanceType"
    )


INGESTORS = [AzureCostExport]
