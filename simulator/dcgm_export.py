"""The DCGM exporter's view of a host's samples: its ``/metrics`` exposition, written from the host's
nvidia-smi log (the same values), as a recorded history a ``dcgm_exporter`` source reads from files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The demo's exporter runs with a counters file (dcgm-exporter -f) of the fields the models read;
# help texts as dcgm-exporter's default-counters.csv words them. (field, help, nvidia-smi column)
DCGM_FAMILIES = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", 5),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", None),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", 8),
)
# Served by the exporters whose counters file lists it (the demo's cloud hosts: carbon from measured power;
# the on-prem cluster's does not, so its energy is costed by the TDP model and its carbon is withheld).
POWER_FAMILY = ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", 9)


def write_dcgm_exposition(smi_log: Path, host: str, out: Path, *, power: bool = False) -> None:
    """Write a host's samples to ``out`` as DCGM exporter's ``/metrics`` serves them, with timestamps.

    The values are the host's nvidia-smi log's, unchanged (``DCGM_FI_DEV_FB_FREE`` = total − used);
    the labels are the exporter's (``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``,
    ``Hostname``). A recorded history: each family lists its samples scrape by scrape, in Prometheus
    text format 0.0.4. DuckDB builds the lines from the log (a 60-day fleet is millions of lines).
    """
    import duckdb

    def number(i: int) -> str:
        return f"split_part(trim(c{i}), ' ', 1)"

    values = {
        5: number(5),
        8: number(8),
        9: number(9),
        None: f"CAST(CAST({number(7)} AS INTEGER) - CAST({number(8)} AS INTEGER) AS VARCHAR)",
    }
    columns = ", ".join(f"'c{i}': 'VARCHAR'" for i in range(10))
    con = duckdb.connect()
    chunks = []
    try:
        con.execute("SET preserve_insertion_order = true")
        con.execute(
            f"CREATE TEMP TABLE log AS SELECT *, 'gpu=\"' || trim(c4) || '\",UUID=\"' || trim(c3) || "
            f"'\",pci_bus_id=\"' || trim(c2) || '\",device=\"nvidia' || trim(c4) || '\",modelName=\"' || "
            f"trim(c1) || '\",Hostname=\"' || $host || '\"}} ' AS labels, "
            f"' ' || CAST(epoch_ms(strptime(trim(c0), '%Y/%m/%d %H:%M:%S.%g')) AS VARCHAR) AS ms "
            f"FROM read_csv($log, header = false, skip = 1, delim = ',', quote = '', escape = '', "
            f"auto_detect = false, columns = {{{columns}}})",
            {"host": host, "log": str(smi_log)},
        )
        for number_, (field, help_text, column) in enumerate(DCGM_FAMILIES + ((POWER_FAMILY,) if power else ())):
            part = out.with_name(f".{out.name}.{number_}")
            target = "'" + str(part).replace("'", "''") + "'"
            con.execute(
                f"COPY (SELECT '{field}{{' || labels || {values[column]} || ms FROM log) TO {target} "
                f"(FORMAT csv, HEADER false, QUOTE '', ESCAPE '', DELIMITER '\x1f')"
            )
            chunks.append(f"# HELP {field} {help_text}\n# TYPE {field} gauge\n".encode() + part.read_bytes())
            part.unlink()
    finally:
        con.close()
    out.write_bytes(b"".join(chunks))


def write_dcgm_exports(smi_dir: Path, out_dir: Path, power_hosts: frozenset[str] = frozenset()) -> list[Path]:
    """``out_dir/<host>.prom`` for every ``smi_dir/<host>.csv`` (with ``DCGM_FI_DEV_POWER_USAGE`` for the
    hosts in ``power_hosts``); a file is rewritten only when its log changed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for log in sorted(smi_dir.glob("*.csv")):
        path = out_dir / f"{log.stem}.prom"
        if not path.exists() or path.stat().st_mtime_ns < log.stat().st_mtime_ns:
            tmp = path.with_name(f".{path.name}.tmp")
            write_dcgm_exposition(log, log.stem, tmp, power=log.stem in power_hosts)
            if path.exists() and _same_bytes(tmp, path):
                tmp.unlink()
            else:
                tmp.replace(path)
        written.append(path)
    for stale in out_dir.glob("*.prom"):
        if stale not in written:
            stale.unlink()
    return written


def _same_bytes(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while chunk := fa.read(1 << 22):
            if chunk != fb.read(1 << 22):
                return False
    return True


def gauge_exposition(families: Sequence[tuple[str, str, Any, str]], labels: list[str], stamps: list[int]) -> str:
    """The ``/metrics`` text of gauge ``families`` (name, help, values as [sample][series], value format):
    one series per label set in ``labels``, one sample per millisecond stamp."""
    lines = []
    for name, help_text, values, fmt in families:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        rows = values.tolist()
        for i, ms in enumerate(stamps):
            lines += [f"{name}{{{labels[k]}}} {fmt.format(rows[i][k])} {ms}" for k in range(len(labels))]
    return "\n".join(lines) + "\n"


def write_host_exposition(out_dir: Path, host: str, exposition: str) -> Path:
    """``out_dir/<host>.prom`` (rewritten only when its bytes change); stale files of other hosts removed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{host}.prom"
    data = exposition.encode()
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)
    for stale in out_dir.glob("*.prom"):
        if stale != path:
            stale.unlink()
    return path
