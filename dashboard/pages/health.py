"""Data health: how old each source's *data* is (not only its last run), failures, GPU counts that disagree.

A source can succeed every hour and still hold data that stopped weeks ago; so the page leads with
the newest charge period / metric hour each source holds against its expected lag
(``warehouse.freshness``), then each source's last run, then facts the sources disagree on.
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import streamlit as st

from gpufinops.dashboard import labels
from gpufinops.dashboard.common import cached_call, cached_query, connection, page_header
from gpufinops.kernel.labels import age
from gpufinops.warehouse import freshness, queries, stored_results


def with_run_health(status: pl.DataFrame, now: datetime, stale_after_hours: float) -> pl.DataFrame:
    """Hours since each source's last success, and whether its runs are failing (too old, failed, never)."""
    age = ((pl.lit(now) - pl.col("last_success_at")).dt.total_seconds() / 3600).round(1)
    return status.with_columns(age.alias("hours_since_success")).with_columns(
        (
            pl.col("hours_since_success").is_null()
            | (pl.col("hours_since_success") > stale_after_hours)
            | (pl.col("last_status") == "failed")
        ).alias("failing")
    )


def ages(frame: pl.DataFrame, hours: str) -> pl.Series:
    """An hours column as people say it (``31 days``, ``5 hours``), never ``740.5``."""
    return pl.Series(hours, [age(h) for h in frame[hours].to_list()], dtype=pl.Utf8)


def main() -> None:
    ctx = page_header("Data health")
    now = datetime.now(UTC)
    try:
        with connection() as con:
            sources = queries.ingest_status(con)
            fresh = freshness.source_freshness(con, now, newest_rows=cached_call(con, freshness.newest_by_source))
            counts = cached_query(con, "gpu_count_disagreements")  # every GPU-hour: stored by the load job
            jobs = queries.job_status(con)
            stored = stored_results.computed(con), stored_results.data_version(con)
    except FileNotFoundError as exc:
        st.error(str(exc))
        return
    if sources.is_empty():
        st.info("No ingest has run yet: `gpufinops ingest`.")
        return
    stale = fresh.filter(pl.col("stale"))
    if stale.is_empty():
        st.success("Every source's data is as recent as that kind of data can be.")
    else:
        st.error("Stale data: " + "; ".join(f"**{r['source']}** — {r['message']}" for r in stale.iter_rows(named=True)))
    labels.table(
        st,
        fresh.with_columns(
            ages(fresh, "age_hours").alias("age"), ages(fresh, "expected_lag_hours").alias("expected_lag")
        ).select("source", "source_type", "kind", "stale", "newest_data_at", "age", "expected_lag", "message"),
        overrides={
            "expected_lag": st.column_config.TextColumn("Expected within"),
            "message": st.column_config.TextColumn("Freshness", width="large"),
        },
    )
    limit = ctx.settings.stale_after_hours
    runs = with_run_health(sources, now, limit)
    failing = runs.filter(pl.col("failing"))
    st.subheader("Runs")
    if failing.is_empty():
        st.success(f"Every source ran successfully within the last {limit:g} hours.")
    else:
        st.error(
            f"Failing or not running: {', '.join(failing['source'].to_list())} "
            f"(no success in {limit:g} h, or the last run failed)."
        )
    labels.table(
        st,
        runs.with_columns(ages(runs, "hours_since_success").alias("since_success")).select(
            "source",
            "source_type",
            "failing",
            "last_status",
            "since_success",
            "last_success_at",
            "last_started_at",
            "last_rows",
            "watermark",
            "last_error",
        ),
        overrides={"since_success": st.column_config.TextColumn("Since the last success")},
    )
    st.subheader("GPU counts")
    if counts.is_empty():
        st.caption("Every resource's measured GPUs agree with the GPUs its instance type has.")
    else:
        st.warning(
            f"{counts.height} resource(s) report a different number of GPUs than their instance type has "
            "(nothing is resolved silently: check the exporter, the MIG setup or the inventory)."
        )
        labels.table(st, counts)
    st.subheader("Jobs")
    if jobs.is_empty():
        st.caption("No scheduled job has run yet (recommend, report, feed).")
    else:
        labels.table(st, jobs)
    (version, at, seconds, count), current = stored
    if count and version == current and at is not None and seconds is not None:
        st.caption(
            f"The forecast, the anomalies and the heaviest page figures were computed by the last load job "
            f"({count} results in {seconds:.1f} s, {at.astimezone(UTC):%Y-%m-%d %H:%M} UTC) on the data held now."
        )
    else:
        st.caption(
            "The forecast, the anomalies and the heaviest page figures are computed on the pages (the load job "
            "has not stored them for the data held now: `gpufinops ingest` stores them, even when no source has "
            "new data)."
        )


main()
