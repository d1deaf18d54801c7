"""``aws_cur``: AWS billing exports found through their manifests, in S3 or a local copy of the bucket.

Layouts (keys relative to ``bucket``/``prefix``, or to the local ``path``):

* CUR 2.0 and FOCUS Data Exports: ``<export>/metadata/BILLING_PERIOD=YYYY-MM/<export>-Manifest.json``
  listing ``dataFiles`` under ``<export>/data/BILLING_PERIOD=YYYY-MM/`` (Parquet);
* legacy CUR: ``<report>/<yyyymmdd-yyyymmdd>/<report>-Manifest.json`` (the period's newest delivery)
  with ``assemblyId`` and ``reportKeys`` (csv.gz or Parquet, slash or snake_case headers).

Each (export, billing period) is one delivery: the newest manifest wins, and a delivery whose
manifest and data objects are unchanged since the last load is skipped. A new delivery replaces
every billing period its rows hold (AWS restates a month for weeks), in one transaction. CUR files
go through :mod:`ingest.aws.cur_mapping`; FOCUS exports through ``focus_files``' own mapping. Files stream
through DuckDB straight into ``cost_line_items``; S3 objects are downloaded to a scratch folder first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import duckdb

from gpufinops.ingest.aws import aws_common, cur_columns, cur_mapping, cur_values, doctor
from gpufinops.ingest.aws.aws_cur2_format import period_start
from gpufinops.ingest.aws.aws_cur_store import LocalStore, S3Store, StoredObject, from_export_folder
from gpufinops.ingest.core import bucket_url, file_checks, focus_files, registry, validate
from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import OnInvalidOptions, OptionProblem, option
from gpufinops.warehouse import reference

log = logging.getLogger(__name__)

EXPORT_MANIFEST = re.compile(
    r"^(?P<anchor>(?:.*/)?[^/]+)/metadata/BILLING_PERIOD=(?P<period>\d{4}-\d{2})/(?:[^/]+/)?[^/]+-Manifest\.json$"
)
LEGACY_MANIFEST = re.compile(
    r"^(?P<anchor>(?:.*/)?[^/]+)/(?P<start>\d{4})(?P<month>\d{2})\d{2}-\d{8}/[^/]+-Manifest\.json$"
)


@dataclass
class Delivery:
    group: str  # "<export or report folder>|YYYY-MM"
    period: str  # YYYY-MM
    layout: str  # export | legacy
    manifest: StoredObject
    anchor: str
    next_part: str  # the folder after the anchor in a data key: "data" or the period folder
    data_keys: list[str] = field(default_factory=list)
    fingerprint: str = ""


def _source_relation(path: Path) -> str:
    name = path.name.lower()
    if ".parquet" in name or name.endswith(".pq"):
        return f"read_parquet({sql_literal(str(path))})"
    if ".csv" in name:
        return (
            f"read_csv({sql_literal(str(path))}, header = true, all_varchar = true, nullstr = [''], "
            f"quote = '\"', escape = '\"', auto_detect = true, strict_mode = true)"
        )
    raise IngestError(f"object {path.name}: unknown format (expected .parquet, .csv or .csv.gz)")


def _discover(objects: list[StoredObject], fmt: str) -> list[Delivery]:
    groups: dict[str, Delivery] = {}
    for obj in objects:
        m = EXPORT_MANIFEST.match(obj.key) if fmt in ("auto", "cur2", "focus") else None
        if m:
            period, layout, next_part = m["period"], "export", "data"
        else:
            m = LEGACY_MANIFEST.match(obj.key) if fmt in ("auto", "legacy") else None
            if not m:
                continue
            period, layout = f"{m['start']}-{m['month']}", "legacy"
            next_part = obj.key[len(m["anchor"]) + 1 :].split("/", 1)[0]
        group = f"{m['anchor']}|{period}"
        current = groups.get(group)
        if current is None or (obj.modified, obj.key) > (current.manifest.modified, current.manifest.key):
            groups[group] = Delivery(group, period, layout, obj, m["anchor"], next_part)
    return [groups[g] for g in sorted(groups)]


def _resolve(raw: str, delivery: Delivery, prefix: str) -> str:
    """A manifest's data key (full bucket key or s3:// URI) as a key relative to the store's root."""
    key = raw[5:].split("/", 1)[1] if raw.startswith("s3://") and "/" in raw[5:] else raw
    key = key.lstrip("/")
    parts = key.split("/")
    anchor_name = delivery.anchor.rsplit("/", 1)[-1]
    for i in range(len(parts) - 1):
        if parts[i] == anchor_name and parts[i + 1] == delivery.next_part:
            return "/".join([delivery.anchor, *parts[i + 1 :]])
    if prefix and key.startswith(prefix + "/"):
        return key[len(prefix) + 1 :]
    return key


def _read_manifest(store, delivery: Delivery, index: dict[str, StoredObject], prefix: str) -> None:
    name = store.name(delivery.manifest.key)
    try:
        manifest = json.loads(store.read(delivery.manifest.key))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IngestError(f"{store.source}: manifest {name} is not valid JSON ({exc})") from None
    keys = manifest.get("dataFiles") or manifest.get("reportKeys") if isinstance(manifest, dict) else None
    if not keys or not isinstance(keys, list):
        raise IngestError(f"{store.source}: manifest {name} lists no data files (no dataFiles or reportKeys)")
    delivery.data_keys = [_inside(store.source, name, str(k), _resolve(str(k), delivery, prefix)) for k in keys]
    digest = hashlib.sha256(delivery.manifest.tag.encode())
    for key in delivery.data_keys:
        digest.update(f"|{key}={index[key].tag if key in index else 'missing'}".encode())
    delivery.fingerprint = digest.hexdigest()


def _inside(source: str, manifest: str, raw: str, key: str) -> str:
    """A manifest's data key must stay under the configured prefix or path: no '..' segment."""
    if ".." in key.replace("\\", "/").split("/") or ".." in raw.replace("\\", "/").split("/"):
        raise IngestError(
            f"{source}: manifest {manifest} lists data key {raw!r}, which leaves the configured "
            f"prefix/path (a '..' segment); refused"
        )
    return key


@dataclass
class _File:
    name: str  # the object's name for messages (s3://… or the local path)
    path: Path
    relation: str
    columns: list[str]
    types: dict[str, str]
    dialect: str

    def part(self, tag_keys: tuple[str, ...]) -> validate.Part:
        """The object's rows for validation and loading (ingest/core/validate.py)."""
        if self.dialect == "focus":
            return focus_files.part(str(self.path), self.types, tag_keys, kind="object", name=self.name)
        return validate.Part(
            "object",
            self.name,
            self.relation,
            lambda relation, carry: cur_mapping.cur_select(relation, self.columns, self.types, tag_keys, carry=carry),
            [validate.Cast(*c) for c in cur_columns.casts(self.columns, self.types)],
            cur_columns.origin(self.columns),
        )


def _describe(con: duckdb.DuckDBPyConnection, source: str, name: str, path: Path, fmt: str) -> _File:
    if path.stat().st_size == 0:
        raise IngestError(f"{source}: object {name} is empty")
    try:
        relation = _source_relation(path)
    except IngestError as exc:
        raise IngestError(f"{source}: {str(exc).replace(path.name, name)}") from None
    kind = "parquet" if "read_parquet" in relation else "csv"
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
    except duckdb.Error as exc:
        if file_checks.csv_error(str(exc)) or "Error when sniffing" in str(exc):
            raise IngestError(file_checks.read_error(source, f"object {name}", exc, str(path))) from None
        first = str(exc).strip().splitlines()[0].replace(str(path), name) if str(exc).strip() else type(exc).__name__
        raise IngestError(f"{source}: object {name} can not be read as {kind}: {first}") from None
    columns = [r[0] for r in rows]
    header = file_checks.parquet_header(str(path)) if kind == "parquet" else file_checks.csv_header(str(path))
    file_checks.check_unique_columns(source, f"object {name}", header)
    dialect, _, _ = cur_columns.check_dialect(f"{source}: object {name}", columns, fmt)
    if dialect == "focus":
        focus_files._check_columns(source, name, columns)
    return _File(name, path, relation, columns, {r[0]: r[1] for r in rows}, dialect)


def _periods(
    con: duckdb.DuckDBPyConnection, source: str, f: _File, tag_keys: tuple[str, ...], skip_rows: bool = False
) -> list[str]:
    p = f.part(tag_keys)
    where = "" if not skip_rows else ' WHERE "BillingPeriodStart" IS NOT NULL'
    try:
        mapped = (
            p.mapped(p.relation, ())
            if not skip_rows
            else p.mapped(
                f"(SELECT * FROM {p.relation} WHERE NOT ({' OR '.join(c.bad() for c in p.casts) or 'false'}))", ()
            )
        )
        rows = con.execute(f'SELECT DISTINCT CAST("BillingPeriodStart" AS VARCHAR) FROM ({mapped}){where}').fetchall()
    except duckdb.Error as exc:
        explained = validate.explain(con, source, [p], [[]], exc)
        raise IngestError(
            explained or file_checks.read_error(source, p.where(), exc).replace(str(f.path), f.name)
        ) from None
    if not rows and not skip_rows:
        raise IngestError(f"{source}: object {f.name} holds no rows")
    if any(r[0] is None for r in rows):
        raise IngestError(f"{source}: object {f.name}: the billing period start is empty in some rows")
    return sorted(r[0] for r in rows)


def _enrich(mapped: str, ctx: IngestContext) -> str:
    """GPU model and count the bill leaves out from the instance type (the catalogue, else the shipped
    inventory, else the family's GPU model), plus source and run id."""
    return (
        f"SELECT u.* REPLACE (COALESCE(u.x_GpuModel, it.gpu_model, fam.gpu_model) AS x_GpuModel, "
        f"COALESCE(u.x_GpuCount, it.gpu_count) AS x_GpuCount), "
        f"{sql_literal(ctx.source)} AS x_Source, {sql_literal(ctx.run_id)} AS x_IngestRunId "
        f"FROM ({mapped}) u LEFT JOIN {reference.INSTANCE_GPUS_SQL} it "
        f"ON it.instance_type = u.x_InstanceType "
        f"LEFT JOIN (VALUES {cur_values.gpu_family_values()}) fam(family, gpu_model) "
        f"ON fam.family = split_part(u.x_InstanceType, '.', 1)"
    )


@dataclass(frozen=True, kw_only=True)
class AwsCurOptions(aws_common.AwsClientOptions, OnInvalidOptions):
    bucket: str | None = option(None, "S3: the bucket the export is delivered to")
    prefix: str = option("", "S3: the export's prefix in the bucket")
    region: str = option("us-east-1", "S3: the bucket's region")
    path: str | None = option(None, "local instead: a directory with the bucket's layout (e.g. made by aws s3 sync)")
    format: Literal["auto", "cur2", "legacy", "focus"] = option("auto", "the export's format (auto: from its manifest)")
    # engine = "athena": the rollup runs in Athena over the Glue table (ingest/aws/aws_athena.py)
    engine: Literal["local", "athena"] = option("local", "where the hourly rollup runs: here, or in Athena")
    database: str | None = option(None, "Athena: the Glue database of the Data Exports CUR 2.0 table")
    table: str | None = option(None, "Athena: the CUR 2.0 table")
    workgroup: str | None = option(None, "Athena: the work group the queries run in")
    output_location: str | None = option(None, "Athena: the S3 URL query results are written to")
    catalog: str = option("AwsDataCatalog", "Athena: the data catalog")
    lookback_months: int = option(2, "Athena: the newest billing periods re-read on every run (restatements)")
    poll_interval_s: float = option(1.0, "Athena: seconds between polls of a running query")
    query_timeout_s: float = option(1800.0, "Athena: seconds a query may run")

    def __post_init__(self) -> None:  # s3://bucket/prefix/, an ARN: the bucket and prefix (ingest/core/bucket_url.py)
        bucket_url.normalise(self, "s3")

    def validate(self) -> None:
        if self.engine == "athena":
            for key in ("database", "table"):
                if not getattr(self, key):
                    raise OptionProblem(key, f'engine = "athena" needs {key} (the Data Exports CUR 2.0 table in Glue)')
        elif bool(self.path) == bool(self.bucket):
            raise OptionProblem("path", "set exactly one of bucket (S3) or path (a local copy of the bucket)")
        if any(c in self.prefix for c in "*?["):  # S3 lists a literal prefix: a glob here is a mistake
            raise OptionProblem("prefix", f"the export's prefix is literal, without wildcards (got {self.prefix!r})")
        if problem := bucket_url.problem(self.bucket, "s3"):
            raise OptionProblem("bucket", problem)


class AwsCur:
    meta = registry.IngestorMeta(
        name="aws_cur",
        target_table="cost_line_items",
        key=(
            "x_Source",
            "BillingAccountId",
            "SubAccountId",
            "BillingPeriodStart",
            "ChargePeriodStart",
            "ResourceId",
            "ResourceName",
            "SkuPriceId",
            "ChargeCategory",
            "ChargeDescription",
            "CommitmentDiscountId",
            "PricingCategory",
            "x_InstanceType",
        ),
        slice_expr='CAST("BillingPeriodStart" AS VARCHAR)',
        source_column="x_Source",
        cursor=registry.Cursor(
            remembers="newest manifest per billing period (manifest and data object versions)", resume_item=None
        ),
        lookback=timedelta(0),
        default_schedule="30 */6 * * *",
        options=AwsCurOptions,
        time_range=True,
        description="CUR 2.0 Data Exports (Parquet), legacy CUR (csv.gz / Parquet, `lineItem/UnblendedCost` or "
        "`line_item_unblended_cost` headers) and AWS FOCUS 1.0–1.2 Data Exports, found through "
        "their manifests in S3 (`bucket`) or a local copy of the bucket (`path`); or rolled up in "
        'Athena (`engine = "athena"`, below)',
        provider="aws",
        extra=registry.Extra(name="aws", unless="path"),
        transport=registry.Transport(client="boto3", endpoint="endpoint_url", paged=True, unless="path"),
        freshness=registry.Freshness(kind="cost", lag_hours=24.0),
        doctor=doctor.aws_cur,
        init=("aws_cur_bucket", "aws_cur_path"),
    )

    def _store(self, ctx: IngestContext) -> tuple[Any, str]:
        opts: AwsCurOptions = ctx.options  # validate(): exactly one of path and bucket
        if opts.path:
            root = Path(opts.path).expanduser()
            if ctx.base_dir and not root.is_absolute():
                root = Path(ctx.base_dir) / root
            return LocalStore(ctx.source, root), ""
        return S3Store(ctx.source, opts, str(opts.bucket), opts.prefix), opts.prefix.strip("/")

    def fetch(self, ctx: IngestContext) -> FetchResult:
        if ctx.options.engine == "athena":
            from gpufinops.ingest.aws import aws_athena

            return aws_athena.fetch(ctx, lambda sql: _enrich(sql, ctx))
        fmt = ctx.options.format
        store, prefix = self._store(ctx)
        objects = store.list()
        deliveries = _discover(objects, fmt)
        if not deliveries:  # the prefix (or path) may be the export's own folder: read it from its parent
            store, prefix, objects = from_export_folder(store, prefix, objects)
            deliveries = _discover(objects, fmt)
        index = {o.key: o for o in objects}
        if not deliveries:
            raise IngestError(f"{ctx.source}: no export manifest (*-Manifest.json) found under {store.name('')}")
        # The cursor is each billing period's newest manifest, not a time: a run reloads every period
        # whose delivery changed (AWS restates a month for weeks). --since/--until (the runner's
        # window) reload the whole billing periods they touch instead, leaving the cursor alone.
        ranged = ctx.window.ranged
        if ranged:
            deliveries = [d for d in deliveries if ctx.window.holds_period(period_start(d.period))]
        for d in deliveries:
            _read_manifest(store, d, index, prefix)
        loaded: dict[str, Any] = ctx.state.get("deliveries", {})
        changed = [d for d in deliveries if ranged or loaded.get(d.group, {}).get("fingerprint") != d.fingerprint]
        watermark = ctx.state.get("watermark")
        if not changed:
            return FetchResult(
                [],
                ctx.state,
                watermark=watermark,
                skipped_reason="no new delivery" + (" in the requested range" if ranged else ""),
            )
        scratch = Path(tempfile.mkdtemp(prefix="gpufinops-aws-cur-"))
        try:
            return self._load(ctx, store, fmt, changed, loaded, scratch, ranged)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise

    def _load(
        self,
        ctx: IngestContext,
        store,
        fmt: str,
        changed: list[Delivery],
        loaded: dict[str, Any],
        scratch: Path,
        ranged: bool,
    ) -> FetchResult:
        files: list[_File] = []
        slices: set[str] = set()
        skip_rows = validate.on_invalid(ctx) == validate.SKIP_ROWS
        new_state = dict(loaded)
        for d in changed:
            periods: set[str] = set()
            for key in d.data_keys:
                path = store.local_file(key, scratch)
                f = _describe(ctx.con, ctx.source, store.name(key), path, fmt)
                periods.update(_periods(ctx.con, ctx.source, f, ctx.team_tag_keys, skip_rows))
                files.append(f)
            log.info(
                "%s: delivery %s (%s, %d object(s)) holds period(s) %s",
                ctx.source,
                d.group,
                d.layout,
                len(d.data_keys),
                ", ".join(sorted(periods)),
            )
            slices |= periods | set(loaded.get(d.group, {}).get("slices", []))
            new_state[d.group] = {"fingerprint": d.fingerprint, "manifest": d.manifest.key, "slices": sorted(periods)}
        sql, rejects, explain = validate.cost_rows(
            ctx, [f.part(ctx.team_tag_keys) for f in files], lambda union: _enrich(union, ctx)
        )
        batch = Batch(table="cost_line_items", data=sql, slices=sorted(slices), diagnose=explain)
        weakref.finalize(batch, shutil.rmtree, str(scratch), True)  # scratch lives until the load is done
        batches = [batch] + ([rejects] if rejects else [])
        if ranged:
            return FetchResult(batches, ctx.state, watermark=ctx.state.get("watermark"))
        watermark = max((g.split("|")[-1] for g in new_state), default=None)
        return FetchResult(batches, {"deliveries": new_state, "watermark": watermark}, watermark=watermark)


INGESTORS = [AwsCur]
