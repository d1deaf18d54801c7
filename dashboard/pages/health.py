"""Data health: each source's last run, status, freshness and error; a stale source is obvious."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import streamlit as st

from dashboard.common import connection, page_header
from warehouse import queries


def with_freshness(status: pl.DataFrame, now: datetime, stale_after_hours: float) -> pl.DataFrame:
    """Hours since each source's last success, and whether it is stale (too old, failed, or never ran)."""
    age = ((pl.lit(now) - pl.col("last_success_at")).dt.total_seconds() / 3600).round(1)
    return status.with_columns(age.alias("hours_since_success")).with_columns(
        (pl.col("hours_since_success").is_null() | (pl.col("hours_since_success") > stale_after_hours)
         | (pl.col("last_status") == "failed")).alias("stale"))


def main() -> None:
    ctx = page_header("Data health")
    try:
        with connection() as con:
            sources = queries.ingest_status(con)
            jobs = queries.job_status(con)
    except FileNotFoundError as exc:
        st.error(str(exc))
        return
    if sources.is_empty():
        st.info("No ingest has run yet: `gpufinops ingest`.")
        return
    limit = ctx.settings.stale_after_hours
    view = with_freshness(sources, datetime.now(timezone.utc), limit)
    stale = view.filter(pl.col("stale"))
    if stale.is_empty():
        st.success(f"Every source succeeded within the last {limit:g} hours.")
    else:
        st.error(f"Stale or failing: {', '.join(stale['source'].to_list())} "
                 f"(no success in {limit:g} h, or the last run failed).")
    st.dataframe(view.select("source", "source_type", "stale", "last_status", "hours_since_success", "last_success_at",
                             "last_started_at", "last_rows", "watermark", "last_error"),
                 hide_index=True, width="stretch")
    st.subheader("Jobs")
    if jobs.is_empty():
        st.caption("No scheduled job has run yet (recommend, report, feed).")
    else:
        st.dataframe(jobs, hide_index=True, width="stretch")


main()
