"""``dcgm_exporter``: scrapes DCGM exporter ``/metrics`` endpoints into hourly GPU rollups.

Each run fetches every target (``http(s)://…/metrics``, ``file://…``, or a local path or glob,
relative to the config's folder) with a timeout and a bounded retry, parses the Prometheus text
exposition with ``prometheus_client``'s parser (``dcgm_exposition.py``), and appends the samples to the day-partitioned
sample store (:mod:`gpufinops.ingest.metrics.metrics_store`). The hours the new samples span are rolled up again
from every file of their day and their ``gpu_metrics_hourly`` slices (one per hour) replaced; an
unchanged recorded exposition (same bytes, every sample timestamped) is not read again. A sample carrying a timestamp keeps it (a recorded
exposition replays its history); one without gets the time the scrape answered, as Prometheus does.

Fields: ``DCGM_FI_DEV_GPU_UTIL`` (%), ``DCGM_FI_DEV_FB_USED`` / ``_FB_FREE`` / ``_FB_RESERVED`` (MiB),
``DCGM_FI_DEV_POWER_USAGE`` (W), ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, ``_SM_ACTIVE``,
``_PIPE_TENSOR_ACTIVE``, ``_PIPE_FP16_ACTIVE``, ``_PIPE_FP32_ACTIVE``, ``_PIPE_FP64_ACTIVE``,
``_SM_OCCUPANCY``, ``_DRAM_ACTIVE`` (ratios 0–1), ``_PCIE_TX_BYTES`` / ``_RX_BYTES`` and
``_NVLINK_TX_BYTES`` / ``_RX_BYTES`` (bytes per second); other families are ignored. Besides their
hourly means (and p95s of the engine and DRAM), each hour keeps the engine's minute-level shape
(``ingest/metrics/rollup_shape.py``) that the busy-waste kinds read. Labels: ``UUID``, ``gpu``, ``modelName``, ``Hostname`` (else the
``instance`` label without its port, else the target's host), MIG ``GPU_I_PROFILE``/``GPU_I_ID``
(``mig_instance`` = ``"<profile>/<id>"``: each slice is its own row), ``namespace``/``pod``/
``container`` (``exported_*`` first; see ``metrics_attribution.workload_labels``) and ``vgpu`` (set by
``--kubernetes-virtual-gpus``: the GPU is shared, every sharing pod gets its own copy of the series,
kept as its own sample row), the configured ``resource_label`` (default ``instance_id``) and
``provider_id_label`` (default ``provider_id``, a Kubernetes node providerID). Each hour also yields
its workloads (``gpu_workloads_hourly``, :mod:`ingest.metrics.workloads`), in the same load.

A target that still fails after its retries fails the run (naming the target) after the other
targets' samples are stored; the next run rolls them up.
"""

from __future__ import annotations

import hashlib
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from gpufinops.ingest.core import registry, validate
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext, IngestError
from gpufinops.ingest.core.spec import ExporterOptions, option
from gpufinops.ingest.core.validate_metrics import rejects_table
from gpufinops.ingest.metrics import doctor, hourly_source, metrics_attribution, metrics_store, workloads
from gpufinops.ingest.metrics.dcgm_exposition import ExpositionParser
from gpufinops.ingest.metrics.scrape import display_url, expand_targets, fetch_bytes

log = logging.getLogger(__name__)


def _scrape(
    url: str, options: DcgmExporterOptions, seen: set[str]
) -> tuple[str, str, pa.Table | None, bool, list[dict]]:
    """(url, body digest, samples or None when unchanged, whether samples carry timestamps, lines refused)."""
    body = fetch_bytes(url, timeout_s=options.timeout_s, retries=options.retries, bounds=options.bounds())
    digest = hashlib.sha1(body).hexdigest()
    if digest in seen:
        return url, digest, None, True, []
    parser = ExpositionParser(options.resource_label, options.provider_id_label, options.on_invalid)
    host = urllib.parse.urlsplit(url).hostname or ""
    table, stamped = parser.parse(body, int(time.time() * 1000), host, display_url(url))
    return url, digest, table, stamped, parser.rejects


def _unique(tables: list[pa.Table]) -> pa.Table:
    """The targets' samples together; a GPU served by two targets keeps one sample per time."""
    combined = pa.concat_tables(tables)
    seen: set[str] = set()
    overlap = False
    for table in tables:
        uuids = set(pc.unique(table.column("gpu_uuid")).to_pylist())
        overlap |= bool(seen & uuids)
        seen |= uuids
    if not overlap:
        return combined  # each target's samples are unique by construction
    con = duckdb.connect()
    try:  # a time's metrics may be split between the targets: merged, as the rollup would
        con.register("samples", combined)
        return con.sql(metrics_store.merge_sql("samples")).to_arrow_table()
    finally:
        con.close()


@dataclass(frozen=True, kw_only=True)
class DcgmExporterOptions(ExporterOptions):
    targets: str | list[str] = option(doc="exporter URLs, file:// URLs or local paths/globs")


class DcgmExporter:
    meta = registry.IngestorMeta(
        **hourly_source.SCRAPED,
        name="dcgm_exporter",
        target_table="gpu_metrics_hourly",
        key=metrics_store.GPU_HOURLY_KEY,
        cursor=registry.Cursor(remembers="files of the sample store's day partitions", resume_item=None),
        default_schedule="* * * * *",
        options=DcgmExporterOptions,
        description="DCGM exporter `/metrics` (Prometheus text format): URLs, `file://` URLs or local "
        "paths/globs, scraped into a sample store and rolled up hourly",
        freshness=registry.Freshness(kind="metrics", lag_hours=1.0),
        doctor=doctor.dcgm_exporter,
        init=("dcgm_target",),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        options: DcgmExporterOptions = ctx.options
        targets = expand_targets(ctx.source, options.targets, ctx.base_dir)
        resource_map, namespace_teams = dict(options.resource_map), dict(options.namespace_teams)
        folder = metrics_store.samples_dir(ctx)
        seen = dict(ctx.state.get("stamped_bodies", {}))
        unchanged = set(seen.values())
        failures, new_tables, rejects = [], [], []
        with ThreadPoolExecutor(max_workers=min(4, len(targets))) as pool:
            futures = [pool.submit(_scrape, url, options, unchanged) for url in targets]
            for url, future in zip(targets, futures):
                try:
                    _, digest, table, stamped, refused = future.result()
                except IngestError as exc:
                    failures.append(str(exc))
                    continue
                except (OSError, ValueError) as exc:
                    failures.append(f"{display_url(url)}: {getattr(exc, 'reason', None) or exc}")
                    continue
                rejects += refused
                if table is not None:
                    new_tables.append(table)
                    if stamped:
                        seen[url] = digest
                    else:
                        seen.pop(url, None)
        written = metrics_store.write_samples(folder, _unique(new_tables), ctx.run_id) if new_tables else []
        log.info("%s: %d target(s) scraped, samples written for %d day(s)", ctx.source, len(targets), len(written))
        if failures:
            raise IngestError(
                f"{ctx.source}: {len(failures)} of {len(targets)} target(s) failed after retries "
                f"(the others' samples are stored): {'; '.join(failures)}"
            )
        metrics_store.compact(folder, written, ctx.run_id)
        result = self._rollup(ctx, folder, seen, resource_map, namespace_teams)
        if options.on_invalid == validate.SKIP_ROWS:  # each target scraped replaces its previous rejects
            result.batches.append(
                validate.rejects_batch(
                    rejects_table(ctx, rejects) if rejects else None, [display_url(t) for t in targets]
                )
            )
            result.skipped_reason = None if rejects else result.skipped_reason
        return result

    def _rollup(self, ctx: IngestContext, folder, seen, resource_map, namespace_teams) -> FetchResult:
        stored, plan = metrics_store.plan_rollup(folder, ctx.state.get("days", {}))
        watermark = max(stored, default=None)
        state = {"days": stored, "stamped_bodies": seen, "watermark": watermark}
        rules = metrics_attribution.rules_batches(ctx, resource_map, namespace_teams)
        if not plan:
            return FetchResult(rules, state, watermark=watermark, skipped_reason="no new samples")
        batches = list(rules)
        log.info("%s: rolling up %d hour(s) of %d day(s)", ctx.source, sum(map(len, plan.values())), len(plan))
        # The planned days' samples are grouped a few days a statement (up to metrics_store.BATCH_SAMPLES:
        # a month of a large fleet's minute samples in one aggregation spills tens of GB, the p95 keeping
        # every value of every GPU-hour), the hours whose samples are unique in one pass, the hours where
        # a day's files overlap (a re-scrape) grouped per time on their own (metrics_store.rollup_statements).
        # The statements' rows then make one table, loaded as one batch per table (one delete of the hours
        # replaced, one insert, one attribution), each day keeping its own GPU models.
        hourly, running = [], []
        for n, (statement, deduplicate) in enumerate(metrics_store.rollup_statements(folder, plan)):
            samples, _ = metrics_store.store_relation(folder, statement)
            # the workloads first: over unique samples their rows give the hours' labels (hourly_sql)
            running_table = workloads.rollup_table(
                ctx.con, samples, source=ctx.source, run_id=ctx.run_id, deduplicate=deduplicate, part=f"_{n}"
            )
            running.append(f"SELECT * FROM {running_table}")
            hourly.append(
                metrics_store.hourly_table(
                    ctx.con, samples, run_id=ctx.run_id, deduplicate=deduplicate, part=f"_{n}", workloads=running_table
                )
            )
        days = list(plan)
        where = f"the hourly rollup of the sample store's {days[0]}" + (f" to {days[-1]}" if len(days) > 1 else "")
        hours = [h for day_hours in plan.values() for h in day_hours]
        table = metrics_store.merge_tables(ctx.con, hourly)
        sql = metrics_store.attributed_days_sql(ctx.con, table, source=ctx.source, run_id=ctx.run_id)
        batches += [
            Batch(table="gpu_metrics_hourly", data=sql, slices=hours, context=where),
            Batch(table="gpu_workloads_hourly", data=" UNION ALL ".join(running), slices=hours, context=where),
        ]
        return FetchResult(batches, state, watermark=watermark)


INGESTORS = [DcgmExporter]
