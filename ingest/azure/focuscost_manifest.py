"""A Cost Management export run, read from its ``manifest.json`` (manifestVersion 2024-04-01): the export,
the month it covers, when it ran, the dataset version and the blobs it wrote, with their row counts.

Cost Management writes ``{container}/{root folder}/{export}/{date range}/{run time}/{run id}/manifest.json``
beside the run's data partitions, and every run of a month re-exports the whole month: the newest run of a
month is its restatement. A run is loaded only whole: every blob the manifest lists must be there (and as many
as ``blobCount`` says), and the rows read must add up to ``dataRowCount``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpufinops.ingest.azure.focuscost import LAYOUTS
from gpufinops.ingest.core.registry import IngestError

MANIFEST = "manifest.json"
DATASET = "focuscost"


@dataclass(frozen=True)
class Blob:
    key: str  # the store's key of the partition
    rows: int | None  # the manifest's dataRowCount for it


@dataclass(frozen=True)
class Run:
    manifest: str  # the manifest's key in the store
    tag: str  # the manifest object's version tag
    export: str
    month: str  # YYYY-MM of runInfo.startDate
    submitted: str
    run_id: str
    data_version: str
    blob_count: int
    row_count: int
    blobs: tuple[Blob, ...]

    @property
    def order(self) -> tuple[str, str]:
        return (self.submitted, self.run_id)


def is_manifest(key: str) -> bool:
    """The current exports' ``manifest.json`` (the legacy ``_manifest.json`` has no exportConfig)."""
    return key.rsplit("/", 1)[-1] == MANIFEST


def parse(source: str, where: str, key: str, tag: str, body: bytes, keys: set[str]) -> Run | None:
    """The run a manifest describes; None for another dataset (a price sheet, a reservation export)."""
    try:
        doc = json.loads(body.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IngestError(f"{source}: manifest {where} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("exportConfig"), dict):
        raise IngestError(f"{source}: manifest {where} has no exportConfig object (not a Cost Management export)")
    config, info = doc["exportConfig"], doc.get("runInfo") or {}
    if str(config.get("type", "")).strip().lower() != DATASET:
        return None
    version = str(config.get("dataVersion", "")).strip()
    if version not in LAYOUTS:
        raise IngestError(
            f"{source}: manifest {where}: exportConfig.dataVersion {version!r} is not a FocusCost version this "
            f"reads ({', '.join(LAYOUTS)})"
        )
    start = str(info.get("startDate", ""))
    if len(start) < 7 or not start[:4].isdigit() or start[4] != "-" or not start[5:7].isdigit():
        raise IngestError(f"{source}: manifest {where}: runInfo.startDate {start!r} is not a date")
    folder = key.rsplit("/", 1)[0] + "/" if "/" in key else ""
    blobs = tuple(_blob(source, where, entry, keys, folder) for entry in _list(doc.get("blobs"), source, where))
    return Run(
        manifest=key,
        tag=tag,
        export=str(config.get("exportName") or config.get("resourceId") or folder),
        month=start[:7],
        submitted=str(info.get("submittedTime") or ""),
        run_id=str(info.get("runId") or key),
        data_version=version,
        blob_count=_count(doc, "blobCount", source, where),
        row_count=_count(doc, "dataRowCount", source, where),
        blobs=blobs,
    )


def _list(value: Any, source: str, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(b, dict) for b in value):
        raise IngestError(f"{source}: manifest {where}: blobs is not a list of objects")
    return value


def _count(doc: dict[str, Any], name: str, source: str, where: str) -> int:
    value = doc.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise IngestError(f"{source}: manifest {where}: {name} {value!r} is not a whole number")
    return value


def _blob(source: str, where: str, entry: dict[str, Any], keys: set[str], folder: str) -> Blob:
    name = str(entry.get("blobName") or "").strip().lstrip("/")
    rows = entry.get("dataRowCount")
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
        raise IngestError(f"{source}: manifest {where}: blob {name!r} dataRowCount {rows!r} is not a whole number")
    # blobName is container-relative; the store's keys are relative to its root (a prefix, or a copied folder)
    found = next((k for k in keys if name == k or name.endswith("/" + k)), None)
    if found is None and "/" in name and folder + name.rsplit("/", 1)[-1] in keys:
        found = folder + name.rsplit("/", 1)[-1]
    return Blob(found or name, rows)


def newest(runs: list[Run]) -> dict[str, list[Run]]:
    """month -> the newest run of each export for that month (an older run of a month is superseded)."""
    best: dict[tuple[str, str], Run] = {}
    for run in runs:
        held = best.get((run.export, run.month))
        if held is None or run.order > held.order:
            best[(run.export, run.month)] = run
    months: dict[str, list[Run]] = {}
    for (_, month), run in sorted(best.items()):
        months.setdefault(month, []).append(run)
    return months


def check_whole(source: str, where: str, run: Run, present: set[str], rows: dict[str, int] | None = None) -> None:
    """Refuse a partial run in one sentence: a blob missing, fewer blobs than blobCount, rows that do not add up."""
    what = f"{source}: export run {run.run_id} of {run.export} for {run.month} (manifest {where}) is partial"
    missing = [b.key for b in run.blobs if b.key not in present]
    if missing:
        raise IngestError(f"{what}: blob {missing[0]} it lists is not there ({len(missing)} missing); not loaded")
    if len(run.blobs) != run.blob_count:
        raise IngestError(f"{what}: blobCount is {run.blob_count} but it lists {len(run.blobs)} blob(s); not loaded")
    if rows is None:
        return
    for blob in run.blobs:
        if blob.rows is not None and rows[blob.key] != blob.rows:
            raise IngestError(
                f"{what}: blob {blob.key} holds {rows[blob.key]} row(s), its dataRowCount is {blob.rows}; not loaded"
            )
    if sum(rows.values()) != run.row_count:
        raise IngestError(
            f"{what}: its blobs hold {sum(rows.values())} row(s), dataRowCount is {run.row_count}; not loaded"
        )
