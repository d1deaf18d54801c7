"""``gpufinops doctor``'s checks of the Google Cloud source types (``ingest.core.doctor``: each spec carries its
check)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from gpufinops.ingest.core.doctor import FAIL, OK, WARN, ConfiguredSource, Result, files, options

BILLING_EXPORT_COLUMNS = {"billing_account_id", "service", "sku", "usage_start_time", "cost", "export_time"}
COMPUTE_SERVICE = "services/6F81-5844-456A"


def _gcp_options(source: ConfiguredSource, base_dir: Path) -> Any:
    """The source's typed options (config validation checked them), credentials_file beside the config."""
    opts = options(source)
    if opts.credentials_file and not os.path.isabs(opts.credentials_file):
        opts = dataclasses.replace(opts, credentials_file=str(base_dir / opts.credentials_file))
    return opts


def gcp_billing_export(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    if options(source).path:
        return files(source, base_dir)
    from gpufinops.ingest.gcp import gcp_common

    opts = _gcp_options(source, base_dir)
    name = f"{opts.project}.{opts.dataset}.{opts.table}"
    client = gcp_common.bigquery_client(source.name, opts, str(opts.project))
    try:
        table = client.get_table(name, timeout=timeout, retry=None)
    except Exception as exc:
        status = gcp_common.status_of(exc)
        fix = (
            "grant roles/bigquery.dataViewer on the dataset and roles/bigquery.jobUser on the project"
            if status == 403
            else "check project, dataset and table (BigQuery → the billing export's table name)"
        )
        return FAIL, f"BigQuery {name}: {gcp_common.describe_error(source.name, 'tables.get', exc)}", fix
    columns = {f.name for f in table.schema}
    missing = sorted(BILLING_EXPORT_COLUMNS - columns)
    if missing:
        return (
            WARN,
            f"BigQuery {name} lacks {', '.join(missing)}: not a billing export table?",
            "use the gcp_billing_export_v1_… or gcp_billing_export_resource_v1_… table",
        )
    return OK, f"BigQuery {name}: {table.num_rows or 0:,} rows, a billing export schema", None


def gcp_catalog(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    from gpufinops.ingest.gcp import gcp_common

    client = gcp_common.catalog_client(source.name, _gcp_options(source, base_dir))
    from google.cloud.billing_v1 import ListSkusRequest

    pager = client.list_skus(request=ListSkusRequest(parent=COMPUTE_SERVICE, page_size=1), timeout=timeout, retry=None)
    first = next(iter(pager.skus), None)
    return (
        (OK, "Cloud Billing Catalog answers (Compute Engine SKUs)", None)
        if first is not None
        else (WARN, "Cloud Billing Catalog answered with no Compute Engine SKU", "check the endpoint")
    )


def gcp_price_history(source: ConfiguredSource, base_dir: Path, timeout: float) -> Result:
    return files(source, base_dir)
