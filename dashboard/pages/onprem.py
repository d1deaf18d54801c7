"""On-prem vs cloud: each node group's cost per *used* GPU-hour against the cheapest cloud option, its
break-even utilisation and the verdict (keep, shrink, burst). Facts, not recommendations: a verdict
that saves money is also on the Recommendations page; keeping the cluster is not a recommendation."""

from __future__ import annotations

import polars as pl
import streamlit as st

from gpufinops.dashboard import charts, labels, spend_charts
from gpufinops.dashboard.common import connection, money_frame, page_header
from gpufinops.kernel.labels import PRICING
from gpufinops.kernel.labels import label as code_label
from gpufinops.warehouse import queries

PATTERNS = {
    "keep_onprem": "keep on-prem",
    "shrink_cluster": "shrink, send the work to the cloud",
    "burst_to_spot": "keep, burst peaks to cloud spot",
}


def option_text(option: str) -> str:
    """``gcp a2-ultragpu-1g on_demand (us-central1)`` with its pricing term as a label."""
    return " ".join(code_label(w, "pricing") if w in PRICING else w for w in option.split(" "))


def main() -> None:
    ctx = page_header("On-prem vs cloud")
    try:
        with connection() as con:
            facts = queries.onprem_comparison(con, team=ctx.teams)
    except FileNotFoundError as exc:
        st.error(str(exc))
        return
    if facts.is_empty():
        st.info("No on-prem cluster compared yet: configure an `onprem` source and run `gpufinops recommend`.")
        return
    view = facts.with_columns(
        pl.col("pattern").replace_strict(PATTERNS, default=pl.col("pattern")).alias("verdict"),
        pl.col("team").fill_null("(whole group)"),
        pl.col("cheapest_cloud_option").map_elements(option_text, return_dtype=pl.Utf8),
    )
    st.caption(
        "Cost per GPU-hour of work actually done (busy share of the hour) on each node group, against "
        "the cheapest cloud GPU that fits the same work; below the break-even utilisation the cloud is "
        "cheaper."
    )
    bars = (
        money_frame(view, "onprem_usd_per_used_gpu_hour", "cloud_usd_per_used_gpu_hour")
        .select(
            (pl.col("node_group") + " · " + pl.col("team")).alias("group"),
            pl.col("onprem_usd_per_used_gpu_hour").alias("On-prem"),
            pl.col("cloud_usd_per_used_gpu_hour").alias("Cheapest cloud"),
        )
        .unpivot(index="group", variable_name="where", value_name="usd_per_used_gpu_hour")
    )
    charts.draw(
        st,
        spend_charts.grouped_bars(
            bars,
            category="group",
            group="where",
            value="usd_per_used_gpu_hour",
            category_title="Node group · team",
            group_title="Cost of",
            value_title="USD per used GPU-hour",
            title="Cost per used GPU-hour: on-prem vs the cheapest cloud option",
        ),
    )
    labels.table(
        st,
        view.select(
            "node_group",
            "team",
            "workload",
            "verdict",
            "util_mean_pct",
            "break_even_utilisation_pct",
            "onprem_usd_per_used_gpu_hour",
            "cloud_usd_per_used_gpu_hour",
            "cheapest_cloud_option",
            "monthly_savings_usd",
            "gpu_hours",
            "action",
        ),
        overrides={
            "node_group": st.column_config.TextColumn("Node group"),
            "verdict": st.column_config.TextColumn("Verdict"),
            "util_mean_pct": st.column_config.NumberColumn("Utilisation", format="%.1f%%"),
            "break_even_utilisation_pct": st.column_config.NumberColumn("Break-even", format="%.1f%%"),
            "onprem_usd_per_used_gpu_hour": st.column_config.NumberColumn("On-prem per used GPU-hour", format="$%.2f"),
            "cloud_usd_per_used_gpu_hour": st.column_config.NumberColumn("Cloud per used GPU-hour", format="$%.2f"),
            "cheapest_cloud_option": st.column_config.TextColumn("Cheapest cloud option", width="large"),
            "action": st.column_config.TextColumn("Action", width="large"),
        },
    )


main()
