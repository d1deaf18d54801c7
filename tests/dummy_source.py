"""A dummy source type declared in this one spec module: tests/test_source_specs.py registers it and
shows the runner, doctor, init, freshness and the docs generator all take it from its spec alone.

It reads a CSV of spot interruption bands (tests/data/dummy_source/bands.csv): region,
instance_type, band_index, into ``spot_interruption_bands``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from gpufinops.ingest.core.registry import (
    Batch,
    Cursor,
    FetchResult,
    Freshness,
    IngestContext,
    IngestError,
    IngestorMeta,
    InitQuestion,
)
from gpufinops.ingest.core.spec import SourceOptions, option
from gpufinops.warehouse import schema


@dataclass(frozen=True, kw_only=True)
class DummyBandsOptions(SourceOptions):
    path: str = option(doc="a CSV of region, instance_type, band_index")


def _path(options: DummyBandsOptions, base_dir: str | Path | None) -> Path:
    path = Path(options.path)
    return path if path.is_absolute() or base_dir is None else Path(base_dir) / path


class DummyBands:
    meta = IngestorMeta(
        name="dummy_bands",
        target_table="spot_interruption_bands",
        key=("provider", "region", "os", "instance_type"),
        slice_expr="provider || '|' || region",
        source_column=None,
        cursor=Cursor(remembers="the file's size", resume_item=None),
        lookback=timedelta(0),
        default_schedule="0 6 * * *",
        options=DummyBandsOptions,
        description="a dummy CSV of spot interruption bands",
        time_range=False,
        provider="aws",
        extra=None,
        transport=None,
        freshness=Freshness(kind="prices", lag_hours=36.0),
        doctor="tests.dummy_source:check",
        init=InitQuestion(flag="dummy_bands_path", question="Dummy bands CSV (path)", option="path", section="dummy"),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        path = _path(ctx.options, ctx.base_dir)
        size = path.stat().st_size
        if ctx.state.get("size") == size:
            return FetchResult(batches=[], state=ctx.state, skipped_reason="the file is unchanged")
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            raise IngestError(f"{ctx.source}: {path} holds no rows")
        now = datetime.now(UTC)
        table = pa.Table.from_pylist(
            [
                {
                    "provider": "aws",
                    "region": r["region"],
                    "os": "Linux",
                    "instance_type": r["instance_type"],
                    "band_index": int(r["band_index"]),
                    "band_label": "<5%",
                    "band_max_pct": 5,
                    "savings_pct": 60,
                    "source": ctx.source,
                    "updated_at": now,
                }
                for r in rows
            ],
            schema=schema.TABLES["spot_interruption_bands"].schema,
        )
        slices = sorted({f"aws|{r['region']}" for r in rows})
        return FetchResult(batches=[Batch("spot_interruption_bands", table, slices)], state={"size": size})


def check(source, base_dir: Path, timeout: float) -> tuple[str, str, str | None]:
    """doctor's reachability check: the file is there (its own spec's typed options)."""
    path = _path(source.parsed, base_dir)
    if not path.is_file():
        return "FAIL", f"{path} does not exist", f"point sources.{source.name}.path at the CSV"
    return "ok", f"{path} is there", None


INGESTORS = [DummyBands]
