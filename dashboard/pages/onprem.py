"""On-prem vs cloud: each node group's cost per *used* GPU-hour against the cheapest cloud option, its
break-even utilisation and the verdict (keep, shrink, burst). Facts, not recommendations: a verdict
that saves money is also on the Recommendations page; keeping the cluster is not a recommendation."""

from __future__ import annotations

import polars as pl
import streamlit as st

from dashboard.common import connection, money_columns, money_frame, page_header
from warehouse import queries

PATTERNS = {"keep_onprem": "keep on-prem", "shrink_cluster": "shrink, send the work to the cloud",
            "burst_to_spot": "keep, burst peaks to cloud spot"}


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
    view = facts.with_columns(pl.col("pattern").replace_strict(PATTERNS, default=pl.col("pattern")).alias("verdict"),
                              pl.col("team").fill_null("(whole group)"))
    st.caption("Cost per GPU-hour of work actually done (busy share of the hour) on each node group, against "
               "the cheapest cloud GPU that fits the same work; below the break-even utilisation the cloud is "
               "cheaper.")
    st.dataframe(money_frame(view.select("node_group", "team", "workload", "verdict", "util_mean_pct",
                                         "break_even_utilisation_pct", "onprem_usd_per_used_gpu_hour",
                                         "cloud_usd_per_used_gpu_hour", "cheapest_cloud_option",
                                         "monthly_savings_usd", "gpu_hours", "action"), "monthly_savings_usd"),
                 hide_index=True, width="stretch",
                 column_config={**money_columns("monthly_savings_usd"),
                                "util_mean_pct": st.column_config.NumberColumn("utilisation %", format="%.1f"),
                                "break_even_utilisation_pct": st.column_config.NumberColumn("break-even %",
                                                                                            format="%.1f"),
                                "onprem_usd_per_used_gpu_hour": st.column_config.NumberColumn(
                                    "on-prem $/used GPU-h", format="$%.2f"),
                                "cloud_usd_per_used_gpu_hour": st.column_config.NumberColumn(
                                    "cloud $/used GPU-h", format="$%.2f")})


main()
