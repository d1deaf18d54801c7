"""The value domain of every warehouse column a source loads, declared once; the check every batch passes.

``schema.py`` says what type a column has; this says which values of that type are facts: utilisation
is 0–100 %, an activity ratio 0–1, memory is within what one GPU carries (and the memory used within
the GPU's total), counts are not negative, money fits the ledger's DECIMAL, times lie in a plausible
window, and names that become labels or e-mail headers (a team, a GPU model, a host) hold no control
character and are not huge. The ingest runner checks every batch of every ingestor against these
declarations inside the load's own ``INSERT … SELECT`` (:func:`guard_sql`), before anything is
committed; ingestors that parse values in Python ask :func:`reason` with their own context (the
series, the API call). ``python -m gpufinops.warehouse.domains`` prints the table of docs/sources/loads.md.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
MAX_GPU_MEMORY_MIB = 1024.0 * 1024  # 1 TiB on one GPU: ~3.5× today's largest (a B300's 288 GB)
MAX_GPU_POWER_W = 5000.0
MAX_LINK_BPS = 1e13  # 10 TB/s: ~5x an NVLink 5 GPU's 1.8 TB/s, ~80x PCIe 6 x16
MAX_INT32 = 2**31 - 1
MAX_GPUS = 1024  # GPUs behind one billed resource
MAX_VOLUME_GIB = 1024.0 * 1024  # 1 PiB: 16× the largest EBS volume (64 TiB)
MAX_LABEL = 256  # characters of a name that becomes a label or a header
MONEY_LIMIT = 1e23  # DECIMAL(38,15) holds 23 integral digits
CONTROL = "[\\x00-\\x1f\\x7f]"  # RE2: C0 controls (CR, LF, tab, NUL, …) and DEL
MARKER = "gpufinops-domain#"
END = "#end"


@dataclass(frozen=True)
class Domain:
    """What values one column may hold. ``kind``: number | money | time | label."""

    kind: str
    low: float | None = None
    high: float | None = None
    unit: str = ""
    at_most: str | None = None  # another column of the row this one may not exceed (memory used ≤ total)
    future: timedelta = timedelta(days=400)  # time: how far after now a value may lie
    integer: bool = False

    def describe(self) -> str:
        if self.kind == "label":
            return f"no control character (CR, LF, tab, …), at most {int(self.high or MAX_LABEL)} characters"
        if self.kind == "time":
            return f"{EARLIEST:%Y-%m-%d} to {_days(self.future)} from now"
        if self.kind == "money":
            return f"finite, {'not negative, ' if self.low == 0 else ''}below 10^23 (the ledger's DECIMAL(38,15))"
        text = f"{_num(self.low)}–{_num(self.high)}" if self.high is not None else f"≥ {_num(self.low)}"
        text += f" {self.unit}" if self.unit else ""
        if self.at_most:
            text += f", ≤ {self.at_most}"
        return ("whole, " if self.integer else "finite, ") + text

    def reason(self, value: Any, row: dict[str, Any] | None = None) -> str | None:
        """Why ``value`` is outside the domain (a phrase), or None. NULL is always allowed (unknown)."""
        if value is None:
            return None
        if self.kind == "label":
            text = str(value)
            if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
                return "holds a control character (CR, LF, tab, …)"
            return (
                f"is longer than {int(self.high or MAX_LABEL)} characters"
                if len(text) > (self.high or MAX_LABEL)
                else None
            )
        if self.kind == "time":
            stamp = value if value.tzinfo else value.replace(tzinfo=UTC)
            return None if EARLIEST <= stamp <= datetime.now(UTC) + self.future else self._time_reason()
        number = float(value)
        if not math.isfinite(number):
            return "is not a finite number"
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
            return self._range_reason()
        if self.kind == "money" and abs(number) >= MONEY_LIMIT:
            return self._range_reason()
        other = (row or {}).get(self.at_most) if self.at_most else None
        if other is not None and math.isfinite(float(other)) and number > float(other):
            return f"is more than {self.at_most} {_num(float(other))}"
        return None

    def _range_reason(self) -> str:
        if self.kind == "money":
            return "is not an amount from 0 to 10^23" if self.low == 0 else "is not an amount below 10^23"
        if self.high is None:
            return f"is below {_num(self.low)}"
        return f"is outside {_num(self.low)}–{_num(self.high)}" + (f" {self.unit}" if self.unit else "")

    def _time_reason(self) -> str:
        return f"is not a plausible time (before {EARLIEST.year} or more than {_days(self.future)} in the future)"

    def violation_sql(self, col: str, now: datetime) -> list[tuple[str, str]]:
        """[(SQL true for a bad value of column ``col``, the reason as SQL text)]."""
        c = f'"{col}"'
        if self.kind == "label":
            limit = int(self.high or MAX_LABEL)
            return [
                (f"regexp_matches({c}, '{CONTROL}')", _lit("holds a control character (CR, LF, tab, …)")),
                (f"length({c}) > {limit}", _lit(f"is longer than {limit} characters")),
            ]
        if self.kind == "time":
            latest = (now + self.future).isoformat()
            return [
                (
                    f"{c} < TIMESTAMPTZ '{EARLIEST.isoformat()}' OR {c} > TIMESTAMPTZ '{latest}'",
                    _lit(self._time_reason()),
                )
            ]
        if self.kind == "money":  # finite and within range by its DECIMAL type; the sign is checked here
            return [(f"{c} < 0", _lit(self._range_reason()))] if self.low == 0 else []
        out = []
        if not self.integer:
            out.append((f"NOT isfinite(CAST({c} AS DOUBLE))", _lit("is not a finite number")))
        bounds = [f"{c} < {self.low!r}"] if self.low is not None else []
        bounds += [f"{c} > {self.high!r}"] if self.high is not None else []
        if bounds:
            out.append((" OR ".join(bounds), _lit(self._range_reason())))
        if self.at_most:
            out.append(
                (f'{c} > "{self.at_most}"', f"{_lit(f'is more than {self.at_most} ')} || {shown_sql(self.at_most)}")
            )
        return out

    def hostile(self) -> dict[str, str]:
        """Values outside the domain, by class, as SQL literals of the column's type (the conformance suite's)."""
        if self.kind == "label":
            return {
                "control characters": "'team' || chr(13) || chr(10) || 'Bcc: x@example.com'",
                "huge string": f"repeat('x', {int(self.high or MAX_LABEL) * 400})",
            }
        if self.kind == "time":
            return {
                "out of range": "TIMESTAMPTZ '1970-01-01 00:00:00+00'",
                "huge": "TIMESTAMPTZ '9999-12-31 00:00:00+00'",
            }
        if self.kind == "money":
            return {"huge": "1e300"}  # beyond the DECIMAL: the load's cast refuses it, named by the runner
        out: dict[str, str] = {}
        if not self.integer:
            out |= {"NaN": "'NaN'", "infinity": "'inf'", "-infinity": "'-inf'", "huge": "1e308"}
        if self.low is not None:
            out["negative"] = repr(self.low - 5)
        if self.high is not None and (not self.integer or self.high < MAX_INT32):
            out["out of range"] = repr(self.high * 2.5 if self.high else 1)
        return out


def _num(value: float | None) -> str:
    return f"{value:g}" if value is not None and abs(value) < 1e6 else f"{value:.0f}"


def _days(delta: timedelta) -> str:
    return f"{delta.days} day{'s' if delta.days != 1 else ''}"


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def percent() -> Domain:
    return Domain("number", 0, 100, "%")


def share() -> Domain:
    return Domain("number", 0, 1)


def memory_mib(at_most: str | None = None) -> Domain:
    return Domain("number", 0, MAX_GPU_MEMORY_MIB, "MiB", at_most=at_most)


def count(high: float = MAX_INT32) -> Domain:
    return Domain("number", 0, high, integer=True)


def amount(high: float | None = None, unit: str = "") -> Domain:
    return Domain("number", 0, high, unit)


def money(signed: bool = True) -> Domain:
    return Domain("money", None if signed else 0, MONEY_LIMIT)


def moment(future: timedelta = timedelta(days=400)) -> Domain:
    return Domain("time", future=future)


def label(longest: int = MAX_LABEL) -> Domain:
    return Domain("label", high=longest)


_HOUR = moment(timedelta(days=1))  # an hour of metrics is measured, not planned
_WORKLOAD = {"namespace": label(), "pod": label(), "container": label()}

DOMAINS: dict[str, dict[str, Domain]] = {
    "gpu_metrics_hourly": {
        "hour": _HOUR,
        "util_mean": percent(),
        "util_p95": percent(),
        "util_max": percent(),
        "mem_used_max_mib": memory_mib(at_most="mem_total_mib"),
        "mem_total_mib": memory_mib(),
        "sm_active_mean": share(),
        "tensor_active_mean": share(),
        "power_mean_w": amount(MAX_GPU_POWER_W, "W"),
        "samples": count(),
        **{c: share() for c in ("gr_active_mean", "gr_active_p95", "sm_occupancy_mean", "fp16_active_mean")},
        **{c: share() for c in ("fp32_active_mean", "fp64_active_mean", "dram_active_mean", "dram_active_p95")},
        **{c: amount(MAX_LINK_BPS, "B/s") for c in ("pcie_tx_mean_bps", "pcie_rx_mean_bps", "pcie_rx_idle_bps")},
        **{c: amount(MAX_LINK_BPS, "B/s") for c in ("nvlink_tx_mean_bps", "nvlink_rx_mean_bps")},
        "held_idle_minutes": amount(60, "min"),
        "idle_streak_minutes": amount(60, "min"),
        "idle_dips": count(60),
        "gpu_model": label(),
        "host": label(),
        "team": label(),
        **_WORKLOAD,
    },
    "gpu_workloads_hourly": {
        "hour": _HOUR,
        "samples": count(),
        "occupied_samples": count(),
        "pid": count(),
        "util_mean": percent(),
        "sm_active_mean": share(),
        "mem_used_max_mib": memory_mib(),
        "host": label(),
        "process": label(4096),
        **_WORKLOAD,
    },
    "serving_metrics_hourly": {
        "hour": _HOUR,
        "input_tokens": amount(unit="tokens"),
        "output_tokens": amount(unit="tokens"),
        "requests": amount(unit="requests"),
        "prefill_seconds": amount(unit="s"),
        "decode_seconds": amount(unit="s"),
        "counter_resets": count(),
        "samples": count(),
        "server": label(),
        "model": label(),
        "host": label(),
        "namespace": label(),
        "pod": label(),
    },
    "gpu_processes_hourly": {
        "hour": _HOUR,
        "pid": count(),
        "mem_used_max_mib": memory_mib(),
        "mem_used_mean_mib": memory_mib(),
        "samples": count(),
        "host": label(),
        "process_name": label(4096),
        "team": label(),
    },
    "cost_line_items": {
        **{c: moment() for c in ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd")},
        **{c: money() for c in ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")},
        "x_GpuCount": count(MAX_GPUS),
        "x_Team": label(),
        "x_GpuModel": label(),
        "ServiceName": label(),
        "ProviderName": label(),
    },
    "spot_prices": {"ts": moment(), "price_usd": money(signed=False), "instance_type": label()},
    "instance_types": {
        "gpu_count": count(MAX_GPUS),
        "gpu_memory_gib": amount(MAX_GPU_MEMORY_MIB, "GiB"),
        "vcpus": count(),
        "memory_gib": amount(unit="GiB"),
        "on_demand_usd_per_hour": money(signed=False),
        "updated_at": moment(),
        "instance_type": label(),
        "gpu_model": label(),
    },
    "spot_interruption_bands": {
        "band_index": count(4),
        "band_max_pct": count(100),
        "savings_pct": count(100),
        "updated_at": moment(),
    },
    "price_catalog": {"unit_price": money(), "start_usage_amount": money(signed=False), "gpu_model": label()},
    "price_history": {"effective_from": moment(), "price": money(signed=False), "instance_type": label()},
    # the storage inventory (ingest/storage): sizes, provisioned and measured rates, object counts, names
    "storage_volumes": {
        "size_gib": amount(MAX_VOLUME_GIB, "GiB"),
        "iops": amount(1e7),  # an io2 Block Express volume provisions at most 256,000
        "throughput_mibps": amount(1e6, "MiB/s"),
        **{c: moment() for c in ("last_attached_at", "detached_at", "created_at", "observed_at")},
        **{c: label() for c in ("region", "zone", "volume_type", "state", "team", "last_instance_type")},
        **{c: label() for c in ("volume_id", "attached_instance_id", "last_instance_id")},
    },
    "storage_snapshots": {
        "size_gib": amount(MAX_VOLUME_GIB, "GiB"),
        **{c: moment() for c in ("started_at", "observed_at")},
        **{c: label() for c in ("region", "snapshot_id", "volume_id", "team")},
    },
    "storage_objects": {
        **{c: count(2**62) for c in ("objects", "bytes")},
        **{c: moment() for c in ("oldest_at", "newest_at", "observed_at")},
        **{c: label() for c in ("bucket", "team", "storage_class")},
        **{c: label(4096) for c in ("prefix", "run", "checkpoint")},
    },
    "storage_volume_ops_hourly": {
        "hour": moment(),  # the inventory may be taken at a replayed clock (the models' "now")
        **{c: amount(1e12) for c in ("read_ops", "write_ops")},
        **{c: amount(1e18, "bytes") for c in ("read_bytes", "write_bytes")},
        "volume_id": label(),
    },
    "storage_prefix_reads_daily": {
        "day": moment(),
        "get_requests": amount(1e15),
        "bucket": label(),
        "prefix": label(4096),
    },
}


def shown_sql(col: str) -> str:
    """SQL text of a column's value as an error shows it: at most 40 characters, control characters as '?'."""
    text = f'CAST("{col}" AS VARCHAR)'
    return (
        f"COALESCE(regexp_replace(left({text}, 40), '{CONTROL}', '?', 'g') || "
        f"CASE WHEN length({text}) > 40 THEN '…' ELSE '' END, 'NULL')"
    )


def guard_sql(
    table: str, select: str, columns: list[str], key: tuple[str, ...] = (), now: datetime | None = None
) -> str:
    """``select`` (rows of ``table`` with ``columns``) with every row checked against the table's domains:
    the first bad value raises ``error()`` with MARKER, the row's key, column, value and reason."""
    domains = {c: d for c, d in DOMAINS.get(table, {}).items() if c in columns}
    if not domains:
        return select
    now = now or datetime.now(UTC)
    row = " || ', ' || ".join(f"'{k} ' || {shown_sql(k)}" for k in key if k in columns) or "''"
    whens = []
    for col, domain in domains.items():
        for condition, reason in domain.violation_sql(col, now):
            if domain.at_most and domain.at_most not in columns and domain.at_most in condition:
                continue
            message = f"{_lit(f'column {col} value ')} || '''' || {shown_sql(col)} || ''' ' || {reason}"
            whens.append(f"WHEN {condition} THEN error({_lit(MARKER)} || ({row}) || '#' || {message} || {_lit(END)})")
    if not whens:
        return select
    return f"SELECT * FROM ({select}) AS __checked WHERE CASE {' '.join(whens)} ELSE true END"


def parse_violation(text: str) -> tuple[str, str] | None:
    """(the row's key text, 'column C value 'v' reason') from a guard's error, or None."""
    start = text.find(MARKER)
    if start < 0:
        return None
    body = text[start + len(MARKER) :]
    body = body[: body.find(END)] if END in body else body.splitlines()[0]
    row, _, what = body.partition("#")
    return row, what


def reason(table: str, column: str, value: Any, row: dict[str, Any] | None = None) -> str | None:
    """Why ``value`` can not be ``table.column`` (a phrase), or None: the same domain the runner checks."""
    domain = DOMAINS.get(table, {}).get(column)
    return domain.reason(value, row) if domain else None


def markdown_table() -> str:
    """The docs' table (docs/sources/loads.md): per table, the columns sharing each domain."""
    lines = ["| table | columns | domain |", "| --- | --- | --- |"]
    for table, columns in DOMAINS.items():
        grouped: dict[str, list[str]] = {}
        for column, domain in columns.items():
            grouped.setdefault(domain.describe(), []).append(f"`{column}`")
        for text, names in grouped.items():
            lines.append(f"| `{table}` | {', '.join(names)} | {text} |")
    return "\n".join(lines)


def readme_block(text: str) -> str:
    """The domain table between a page's markers ('' when they are missing)."""
    if BEGIN_DOCS not in text or END_DOCS not in text:
        return ""
    return text.split(BEGIN_DOCS, 1)[1].split(END_DOCS, 1)[0].strip()


BEGIN_DOCS = "<!-- domain-table: generated by `.venv/bin/python -m gpufinops.warehouse.domains`, checked by tests/test_domains.py; do not edit -->"
END_DOCS = "<!-- /domain-table -->"


if __name__ == "__main__":
    sys.stdout.write(markdown_table() + "\n")
