"""Row checks for GPU metric samples, in the pass that parses them (see ``ingest/core/validate.py``).

A sample's time is plausible (not before 2000, not more than a day in the future); every figure is
finite (``NaN``/``inf`` are refused, never stored) and in range: utilisation 0–100 %, activity ratios
0–1, memory and power not negative, memory used not above the total. The checks are SQL over the
sample columns (``nvidia_smi_csv`` parses in DuckDB) and vectorised Arrow over exposition lines
(``dcgm_exporter``) or plain Python over answer values (``prometheus``); all name the file or target,
the line, the column and the value.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from gpufinops.ingest.core import file_checks, validate
from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.core.registry import IngestContext, IngestError
from gpufinops.ingest.core.validate import EARLIEST, FUTURE_SLACK, Check, text_of

log = logging.getLogger(__name__)

# sample column -> (low, high) of its valid range; None: unbounded
RANGES: dict[str, tuple[float, float | None]] = {
    "util": (0, 100),
    "gr_active": (0, 1),
    "sm_active": (0, 1),
    "tensor_active": (0, 1),
    "fp16_active": (0, 1),
    "fp32_active": (0, 1),
    "dram_active": (0, 1),
    "sm_occupancy": (0, 1),
    "fp64_active": (0, 1),
    "pcie_tx_bps": (0, None),
    "pcie_rx_bps": (0, None),
    "nvlink_tx_bps": (0, None),
    "nvlink_rx_bps": (0, None),
    "mem_used_mib": (0, None),
    "mem_free_mib": (0, None),
    "mem_reserved_mib": (0, None),
    "mem_total_mib": (0, None),
    "power_w": (0, None),
}


def _range_text(low: float, high: float | None) -> str:
    return f"is outside {low:g}–{high:g}" if high is not None else f"is below {low:g}"


def latest(now: datetime | None = None) -> datetime:
    return (now or datetime.now(UTC)) + FUTURE_SLACK


def sample_checks(labels: dict[str, str], now: datetime | None = None) -> list[Check]:
    """Checks over sample columns; ``labels`` maps the columns present to the source's name for them,
    ``__unparsed_<column>`` ones (the raw text of a value that did not parse) included."""
    checks = [
        Check(labels[c], f"{c} IS NOT NULL", c, sql_literal("is not a number, a time or an N/A marker"))
        for c in labels
        if c.startswith("__unparsed_")
    ]
    if "ts" in labels:
        checks.append(
            Check(
                labels["ts"],
                f"ts < TIMESTAMPTZ {sql_literal(EARLIEST.isoformat())} OR ts > TIMESTAMPTZ "
                f"{sql_literal(latest(now).isoformat())}",
                text_of("ts"),
                sql_literal("is not a plausible time (before 2000 or more than a day in the future)"),
            )
        )
    for column, (low, high) in RANGES.items():
        if column not in labels:
            continue
        checks.append(
            Check(labels[column], f"NOT isfinite({column})", text_of(column), sql_literal("is not a finite number"))
        )
        bad = f"{column} < {low}" + (f" OR {column} > {high}" if high is not None else "")
        checks.append(Check(labels[column], bad, text_of(column), sql_literal(_range_text(low, high))))
    if "mem_used_mib" in labels and "mem_total_mib" in labels:
        checks.append(
            Check(
                labels["mem_used_mib"],
                "mem_used_mib > mem_total_mib",
                text_of("mem_used_mib"),
                f"{sql_literal('is more than ' + labels['mem_total_mib'] + ' ')} || {text_of('mem_total_mib')}",
            )
        )
    return checks


# ---- SQL: log samples written to the sample store ----------------------------------------------


@dataclass(frozen=True)
class SampleFile:
    """One log file read as samples: its path, the SELECT of its rows (``samples(numbered)``, one ``ts``
    column), the label each column is named by in messages, and what explains a value that does not parse."""

    path: str
    samples: Callable[[bool], str]
    labels: dict[str, str]
    diagnose: Callable[[], str | None]


def write_samples(
    con: duckdb.DuckDBPyConnection,
    source: str,
    read: SampleFile,
    out_path: Path,
    mode: str = validate.FAIL,
    run_id: str = "",
) -> tuple[dict[str, Any], int, str | None]:
    """Write the checked rows of ``read.samples(numbered)`` to ``out_path``; returns ({days (slice
    values), last sample time}, row count, the SELECT of rejected rows for ``ingest_rejects`` under
    skip_rows). A failure is one sentence naming the file, line, column and value."""
    path, samples, labels = read.path, read.samples, read.labels
    checks = sample_checks(labels)  # over the tolerant, numbered rows (values that did not parse included)
    parsed_only = sample_checks({k: v for k, v in labels.items() if not k.startswith("__unparsed_")})
    tmp_out = out_path.with_name(f"{out_path.name}.{os.getpid()}.tmp")
    rejects = None
    try:
        if mode == validate.SKIP_ROWS:
            table = f"_gf_samples_{run_id}_{hashlib.sha1(path.encode()).hexdigest()[:12]}"
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT *, ({validate.message_sql(checks)}) IS NOT NULL "
                f"AS __bad, {validate.part_of(checks, 'column')} AS __column, {validate.part_of(checks, 'value')} "
                f"AS __value, {validate.part_of(checks, 'reason')} AS __reason FROM ({samples(True)}) "
                f"WHERE ts IS NOT NULL OR __unparsed_ts IS NOT NULL"
            )
            kept = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall() if not r[0].startswith("__")]
            con.execute(
                f"COPY (SELECT {', '.join(kept)} FROM {table} WHERE NOT __bad) TO {sql_literal(str(tmp_out))} "
                f"(FORMAT parquet)"
            )
            rejects = (
                f"SELECT {sql_literal(source)} AS source, {sql_literal(run_id)} AS run_id, {sql_literal(path)} "
                f'AS file, CAST(__line AS BIGINT) AS row, __column AS "column", __value AS value, '
                f"__reason AS reason, now() AS rejected_at FROM {table} WHERE __bad"
            )
        else:
            checked = validate.guarded(f"SELECT * FROM ({samples(False)}) WHERE ts IS NOT NULL", 0, parsed_only)
            con.execute(f"COPY ({checked}) TO {sql_literal(str(tmp_out))} (FORMAT parquet)")
    except duckdb.Error as exc:
        tmp_out.unlink(missing_ok=True)
        raise IngestError(_explain(con, source, read, checks, exc)) from None
    days, last, rows = con.execute(
        f"SELECT list(DISTINCT CAST(date_trunc('day', ts) AS VARCHAR)), "
        f"CAST(max(ts) AS VARCHAR), count(*) FROM read_parquet({sql_literal(str(tmp_out))})"
    ).fetchall()[0]
    os.replace(tmp_out, out_path)
    log.info("%s: parsed %s: %d samples over %d day(s)", source, path, rows, len(days or []))
    return {"days": sorted(days or []), "last": last}, rows, rejects


def _explain(con: duckdb.DuckDBPyConnection, source: str, read: SampleFile, checks: list, exc: duckdb.Error) -> str:
    """The failure as one sentence: the first bad line (a row check), or the value that does not parse."""
    path, samples = read.path, read.samples
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    log.debug("%s: %s: %s", source, path, exc)
    try:
        if True:  # the first bad line: a row check, or a value that does not parse
            found = con.execute(
                f"SELECT __line, __m FROM (SELECT __line, {validate.message_sql(checks)} AS __m "
                f"FROM ({samples(True)}) WHERE ts IS NOT NULL) WHERE __m IS NOT NULL "
                f"ORDER BY __line LIMIT 1"
            ).fetchall()
            if found:
                return f"{source}: file {path} line {found[0][0]}: {found[0][1]}"
        explained = read.diagnose()
    except duckdb.Error as again:  # unreadable as text at all (e.g. not UTF-8): report the first error
        return file_checks.read_error(source, f"file {path}", again)
    if explained:
        return explained
    if file_checks.csv_error(str(exc)):
        return file_checks.read_error(source, f"file {path}", exc)
    return f"{source}: file {path} can not be read as an nvidia-smi CSV log: {first_line}"


# ---- Arrow: exposition lines ----------------------------------------------------------------------


def bad_lines(
    columns: pa.Array, values: pa.Array, stamps_ms: pa.Array, names: list[str], now: datetime | None = None
) -> tuple[pa.Array, pa.Array]:
    """(mask of lines that fail a check, the reason of each), for lines whose ``columns`` index into
    ``names`` (sample column names; null for families not read)."""
    reason = pa.nulls(len(values), pa.string())
    finite = pc.is_finite(values)
    for i, name in enumerate(names):
        low, high = RANGES.get(name, (None, None))
        mine = pc.fill_null(pc.equal(columns, i), False)
        out = pc.invert(finite)
        text = "is not a finite number"
        reason = pc.if_else(pc.and_(mine, pc.and_(out, pc.is_null(reason))), text, reason)
        if low is not None:
            outside = pc.less(values, low) if high is None else pc.or_(pc.less(values, low), pc.greater(values, high))
            reason = pc.if_else(
                pc.and_(pc.and_(mine, pc.fill_null(outside, False)), pc.is_null(reason)), _range_text(low, high), reason
            )
    earliest_ms = int(EARLIEST.timestamp() * 1000)
    latest_ms = int(latest(now).timestamp() * 1000)
    implausible = pc.fill_null(pc.or_(pc.less(stamps_ms, earliest_ms), pc.greater(stamps_ms, latest_ms)), False)
    reason = pc.if_else(
        pc.and_(pc.and_(implausible, pc.is_valid(columns)), pc.is_null(reason)),
        "has a timestamp that is not a plausible time (before 2000 or more than a day in the future)",
        reason,
    )
    return pc.is_valid(reason), reason


@dataclass(frozen=True)
class ExpositionLines:
    """An exposition's sample lines as Arrow arrays, one element per line: the text, its line number, the
    index of its sample column (null for a family not read), its value and its timestamp (ms, or null)."""

    lines: pa.Array
    numbers: pa.Array
    columns: pa.Array
    values: pa.Array
    stamps: pa.Array


def checked_lines(
    where: str, mode: str, exposition: ExpositionLines, names: list[str], rejects: list[dict]
) -> pa.Array | None:
    """Exposition lines (``dcgm_exporter``) against the sample checks: None when all pass; else a bad
    line fails the target (naming its line, metric and value) or, under skip_rows, the mask of lines
    to keep, the others recorded in ``rejects``."""
    lines, numbers, stamps = exposition.lines, exposition.numbers, exposition.stamps
    bad, reason = bad_lines(exposition.columns, exposition.values, stamps, names)
    if not pc.any(bad).as_py():
        return None
    positions = pc.indices_nonzero(bad).to_pylist()
    if mode != validate.SKIP_ROWS:
        at = positions[0]
        text = lines[at].as_py()
        shown = text.split()[-2] if stamps[at].is_valid else text.split()[-1]
        more = f" ({len(positions)} bad line(s) in all)" if len(positions) > 1 else ""
        raise IngestError(
            f"{where}: line {numbers[at].as_py()}: {text.split('{')[0].split(' ')[0]} value {shown!r} "
            f"{reason[at].as_py()}{more}"
        )
    for at in positions:
        text = lines[at].as_py()
        rejects.append(
            {
                "file": where,
                "row": numbers[at].as_py(),
                "column": text.split("{")[0].split(" ")[0],
                "value": text.rsplit("} ", 1)[-1][:200],
                "reason": reason[at].as_py(),
            }
        )
    return pc.invert(bad)


# ---- Python: answer values ------------------------------------------------------------------------


def bad_figure(figure: str, value: float) -> str | None:
    """Why an hourly figure from Prometheus is refused, or None. ``figure`` is a FIGURES name."""
    if not math.isfinite(value):
        return "is not a finite number"
    column = {
        "util_mean": "util",
        "util_p95": "util",
        "util_max": "util",
        "mem_used_max": "mem_used_mib",
        "mem_free_min": "mem_free_mib",
        "mem_reserved_max": "mem_reserved_mib",
        "mem_total_max": "mem_total_mib",
        "sm_mean": "sm_active",
        "gr_mean": "gr_active",
        "tensor_mean": "tensor_active",
        "power_mean": "power_w",
        "samples": "mem_used_mib",
        "gr_p95": "gr_active",
        "occupancy_mean": "sm_occupancy",
        "fp16_mean": "fp16_active",
        "fp32_mean": "fp32_active",
        "fp64_mean": "fp64_active",
        "dram_mean": "dram_active",
        "dram_p95": "dram_active",
        "pcie_tx_mean": "pcie_tx_bps",
        "pcie_rx_mean": "pcie_rx_bps",
        "nvlink_tx_mean": "nvlink_tx_bps",
        "nvlink_rx_mean": "nvlink_rx_bps",
    }.get(figure)
    if column is None:
        return None
    low, high = RANGES[column]
    if value < low or (high is not None and value > high):
        return _range_text(low, high)
    return None


def rejects_table(ctx: IngestContext, rejects: list[dict]) -> pa.Table:
    """``ingest_rejects`` rows (file, row, column, value, reason dicts) of this run."""
    from gpufinops.warehouse.runs_schema import INGEST_REJECTS

    now = datetime.now(UTC)
    return pa.Table.from_pylist(
        [{"source": ctx.source, "run_id": ctx.run_id, **r, "rejected_at": now} for r in rejects], schema=INGEST_REJECTS
    )
