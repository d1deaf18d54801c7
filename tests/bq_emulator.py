"""A real BigQuery API server on loopback: the ``bqemulator`` package (DuckDB inside), in its own venv.

``make .venv-bq/.installed`` (a prerequisite of ``make test``) builds ``.venv-bq`` with bqemulator
pinned to duckdb 1.5.5 and copies its bundled spatial extension where DuckDB looks for it, so the
emulator starts offline. The fixture starts ``bqemulator start`` on free ports, waits for its REST
API, creates the export table with the Cloud Billing export's schema, and stops the process at the
end. Rows go in through ``tabledata.insertAll`` (the emulator's multipart load upload is not usable).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from gpufinops.ingest.gcp.gcp_export_mapping import CANONICAL
from tests import cli_process
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent
BQ_VENV = Path(os.environ.get("GPUFINOPS_BQ_VENV", ROOT / ".venv-bq"))
EXECUTABLE = BQ_VENV / "bin" / "bqemulator"
DUCKDB_VERSION = "v1.5.5"
PROJECT = "test-billing"
DATASET = "billing"
START_TIMEOUT_S = 90


def _ensure_spatial_extension() -> None:
    """The emulator loads DuckDB's spatial extension; without a local copy it would download it."""
    target = Path.home() / ".duckdb" / "extensions" / DUCKDB_VERSION / "linux_amd64" / "spatial.duckdb_extension"
    if target.exists():
        return
    bundled = list(BQ_VENV.glob("lib/python3*/site-packages/duckdb_extension_spatial/**/spatial.duckdb_extension"))
    if bundled:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(bundled[0], target)


def bq_field(name: str, kind):
    from google.cloud import bigquery

    if isinstance(kind, tuple):
        return bigquery.SchemaField(
            name, "RECORD", mode="REPEATED", fields=[bq_field(k, v) for k, v in kind[1].items()]
        )
    if isinstance(kind, dict):
        return bigquery.SchemaField(name, "RECORD", fields=[bq_field(k, v) for k, v in kind.items()])
    if kind == "kv":
        return bigquery.SchemaField(
            name,
            "RECORD",
            mode="REPEATED",
            fields=[bigquery.SchemaField("key", "STRING"), bigquery.SchemaField("value", "STRING")],
        )
    return bigquery.SchemaField(name, {"s": "STRING", "t": "TIMESTAMP", "m": "FLOAT", "f": "FLOAT"}[kind])


EXPORT_SCHEMA_KINDS = {k: v for k, v in CANONICAL.items()}  # the detailed export (with resource, price)


def bq_time(text: str) -> datetime:
    """An export's time text (ISO, or BigQuery's "… UTC"), a naive one taken as UTC."""
    value = datetime.fromisoformat(str(text).replace(" UTC", "+00:00").replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def bq_record(row: dict, *, arrow: bool = False) -> dict:
    """An export row (text or JSON leaves) as BigQuery holds it: FLOAT money, TIMESTAMP times.

    ``arrow``: timestamps as datetimes (for an Arrow table), else ISO text (for insertAll / JSONL)."""

    def convert(value, kind):
        if value is None:
            return None
        if isinstance(kind, tuple):
            return [convert(v, kind[1]) for v in value]
        if isinstance(kind, dict):
            return {k: convert(value.get(k), v) for k, v in kind.items()}
        if kind == "kv":
            return [{"key": e["key"], "value": e["value"]} for e in value]
        if kind in ("m", "f"):
            return float(Decimal(str(value)))
        if kind == "t":
            return bq_time(value) if arrow else bq_time(value).isoformat()
        return str(value)

    return {k: convert(row.get(k), v) for k, v in CANONICAL.items()}


def bq_row(nested: dict) -> dict:
    """A canonical row with text leaves (gcp_export_files.read_flat_csv) as insertAll JSON and as the export's
    JSONL files write it: ``bq_record``'s values, its nulls left out."""

    def present(value):
        if isinstance(value, dict):
            return {k: present(v) for k, v in value.items() if v is not None}
        return [present(v) for v in value] if isinstance(value, list) else value

    return present(bq_record(nested))


@dataclass
class Emulator:
    endpoint: str
    process: subprocess.Popen
    log_path: Path

    def client(self):
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import bigquery

        return bigquery.Client(
            project=PROJECT,
            credentials=AnonymousCredentials(),
            client_options=ClientOptions(api_endpoint=self.endpoint),
        )

    def create_export_table(self, table: str):
        from google.cloud import bigquery

        client = self.client()
        client.create_dataset(DATASET, exists_ok=True)
        schema = [bq_field(name, kind) for name, kind in EXPORT_SCHEMA_KINDS.items()]
        client.delete_table(f"{PROJECT}.{DATASET}.{table}", not_found_ok=True)
        return client.create_table(bigquery.Table(f"{PROJECT}.{DATASET}.{table}", schema=schema))

    def insert(self, table: str, rows: list[dict]) -> None:
        errors = self.client().insert_rows_json(f"{PROJECT}.{DATASET}.{table}", [bq_row(r) for r in rows])
        assert not errors, errors


def _wait_ready(endpoint: str, process: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"bqemulator exited with {process.returncode}: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{endpoint}/bigquery/v2/projects/{PROJECT}/datasets", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.3)
    raise RuntimeError(f"bqemulator did not answer within {START_TIMEOUT_S}s: {log_path.read_text()[-2000:]}")


@pytest.fixture(scope="session")
def bq_emulator(tmp_path_factory) -> Iterator[Emulator]:
    if not EXECUTABLE.exists():
        pytest.skip(f"the BigQuery emulator is not installed ({EXECUTABLE}): run `make .venv-bq/.installed`")
    _ensure_spatial_extension()
    rest, grpc = free_port(), free_port()
    log_path = tmp_path_factory.mktemp("bqemulator") / "emulator.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [
                str(EXECUTABLE),
                "start",
                "--rest-port",
                str(rest),
                "--grpc-port",
                str(grpc),
                "--project",
                PROJECT,
                "--log-level",
                "warning",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    endpoint = f"http://127.0.0.1:{rest}"
    try:
        _wait_ready(endpoint, process, log_path)
        yield Emulator(endpoint, process, log_path)
    finally:
        cli_process.terminate(process, 15)
