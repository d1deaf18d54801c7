"""Every cost ingestor's test fixture loaded into a warehouse, for the FOCUS conformance suite.

Each builder loads real (or, for CUR 2.0, which AWS publishes no sample of, built) input through
the ingestor the way a user's run would, into the warehouse at ``db``; ``export`` then writes the
warehouse as a FOCUS 1.2 file with ``gpufinops export focus``'s own code.
"""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Callable
from pathlib import Path

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.jobs.export import focus
from gpufinops.warehouse import db
from tests import aws_conformance, gcp_loopback, onprem_data
from tests import aws_cur_data as cur
from tests import azure_focuscost_data as azure
from tests.conftest import FOCUS_SAMPLE

REGISTRY = default_registry()
TAGS = ("team", "user_team", "k8s_label_team")


def _run(db_path: Path, source: str, source_type: str, options: dict) -> int:
    result = run_source(REGISTRY, db_path, source, source_type, options, team_tag_keys=TAGS)
    assert result.status == "succeeded", result.error
    assert result.rows > 0
    return result.rows


def focus_sample(tmp: Path, db_path: Path) -> int:
    """AWS's, Microsoft's and Oracle's own FOCUS 1.0 rows (tests/data/focus-sample)."""
    shutil.copy(FOCUS_SAMPLE, tmp / "focus.csv")
    return _run(db_path, "focus", "focus_files", {"path": str(tmp / "focus.csv")})


def cur2(tmp: Path, db_path: Path) -> int:
    """CUR 2.0 Parquet deliveries: every line item type, Savings Plans, RIs, EKS split cost."""
    options, _ = aws_conformance.aws_cur_input(tmp)
    return _run(db_path, "cur2", "aws_cur", options)


def legacy_cur(tmp: Path, db_path: Path) -> int:
    """Real legacy CUR: focus_converters' anonymised month (with tax) and both of koku's header dialects."""
    rows = 0
    cur.legacy_layout(tmp / "fc", cur.LEGACY_CSV, report="anon", prefix="cur")
    rows += _run(db_path, "legacy_fc", "aws_cur", {"path": str(tmp / "fc")})
    for name, period in (("2023-06-01.csv", "20230601-20230701"), ("2022-07-01-alt-columns.csv", "20220701-20220801")):
        gz = tmp / f"{name}.gz"
        with open(cur.AWS_DATA / "koku" / name, "rb") as src, gzip.open(gz, "wb") as dst:
            shutil.copyfileobj(src, dst)
        folder = tmp / name.split(".")[0]
        cur.legacy_layout(folder, gz, report="koku", period=period)
        rows += _run(
            db_path, f"koku_{folder.name.replace('-', '_')}", "aws_cur", {"path": str(folder), "format": "legacy"}
        )
    return rows


def gcp_export(tmp: Path, db_path: Path) -> int:
    """koku's real standard and detailed BigQuery export rows (flattened CSV extracts)."""
    options, _ = gcp_loopback.gcp_billing_export_input(tmp)
    return _run(db_path, "gcp", "gcp_billing_export", options)


def onprem(tmp: Path, db_path: Path) -> int:
    """A day of a real cluster's GPU occupancy (Helios), costed by the on-prem model."""
    onprem_data.load_metrics(db_path, tmp, onprem_data.START, onprem_data.START.replace(day=2))
    return _run(db_path, "dc", "onprem", onprem_data.cluster_options())


def azure_and_aws(tmp: Path, db_path: Path) -> int:
    """Azure Cost Management FocusCost runs (September as 1.2 Parquet, October as 1.0r2 CSV: an ND96isr_H100_v5,
    a Spot NC24ads_A100_v4 and an AKS pool's scale-set instances; tests/azure_focuscost_data.py) beside the CUR
    2.0 deliveries, in one warehouse: Microsoft's x_ columns ride along in x_ProviderColumns."""
    container = tmp / "azure"
    azure.write_run(container, "2026-09", azure.fleet_rows("1.2", "2026-09", 4), version="1.2", fmt="parquet")
    october = azure.fleet_rows("1.0r2") + azure.aks_rows("1.0r2")
    azure.write_run(container, "2026-10", october, version="1.0r2", run_id="7f2e5c1a-3b4d-4e6f-8a9b-0c1d2e3f4a5c")
    rows = _run(db_path, "azure", "azure_cost_export", {"path": str(container)})
    (tmp / "aws").mkdir()
    return rows + cur2(tmp / "aws", db_path)


FIXTURES: dict[str, Callable[[Path, Path], int]] = {
    "focus_files": focus_sample,
    "aws_cur CUR 2.0": cur2,
    "aws_cur legacy CUR": legacy_cur,
    "gcp_billing_export": gcp_export,
    "onprem": onprem,
    "azure_cost_export and aws_cur": azure_and_aws,
}


def export(db_path: Path, out: Path, fmt: str = "parquet", filters: focus.Filters = focus.Filters()) -> int:
    with db.reader(db_path) as con:
        return focus.export(con, out, fmt, filters)
