"""Energy and emissions on the Team and GPU fleet pages: the carbon read model (docs/carbon.md)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from gpufinops.dashboard import labels, period
from gpufinops.warehouse.windows import Window


def render(
    frame: pl.DataFrame, sources: pl.DataFrame, *, heading: str = "Energy and emissions", window: Window | None = None
) -> None:
    """KPIs, the per-month table and where the factors came from; withheld hours said, never estimated.
    ``window``: the page's period; a month it covers only in part says which days (``2026-10 (02 – 31 Oct)``)."""
    st.subheader(heading)
    if window is not None and "month" in frame.columns:
        frame = frame.with_columns(
            pl.col("month").map_elements(lambda m: period.month_label(m, window), return_dtype=pl.Utf8)
        )
    if frame.is_empty():
        st.info("No energy figures in the window: they come from measured GPU power on billed resources.")
        return
    kg = float(frame["kg_co2e"].sum() or 0)
    kwh = float(frame["kwh"].sum() or 0)
    measured = float((frame["gpu_hours"] - frame["withheld_gpu_hours"]).sum() or 0)
    withheld = float(frame["withheld_gpu_hours"].sum() or 0)
    cols = st.columns(4)
    cols[0].metric("Emissions", f"{kg:,.1f} kg CO₂e", help="facility energy × the grid intensity of each region")
    cols[1].metric("Facility energy", f"{kwh:,.1f} kWh", help="(GPU + node) energy × PUE")
    cols[2].metric("Per GPU-hour", f"{kg / measured:,.3f} kg" if measured else "–")
    cols[3].metric("GPU-hours withheld", f"{withheld:,.0f}", help="billed GPU-hours without a power measurement")
    labels.table(st, frame)
    notes = [
        f"{r['grid_g_co2e_per_kwh']:.0f} gCO₂e/kWh from {r['intensity_source']}; PUE {r['pue']:g} ({r['pue_source']})"
        for r in sources.head(4).iter_rows(named=True)
    ]
    st.caption(
        "GPU energy is measured (DCGM, nvidia-smi, CloudWatch power); "
        + (f"node: {sources['node_basis'][0]}. " if not sources.is_empty() else "")
        + " · ".join(notes)
        + (f" · {withheld:,.0f} GPU-hours had no power measurement: withheld, not estimated." if withheld else "")
    )
