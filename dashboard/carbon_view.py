"""Energy and emissions on the Team and GPU fleet pages: the carbon read model (docs/carbon.md)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from gpufinops.dashboard import labels, period
from gpufinops.warehouse.coverage import Coverage
from gpufinops.warehouse.windows import Window

_ENERGY = ("gpu_kwh", "node_kwh", "kwh", "kg_co2e", "kg_co2e_per_gpu_hour", "embodied_kg_co2e")


def render(
    frame: pl.DataFrame,
    sources: pl.DataFrame,
    *,
    heading: str = "Energy and emissions",
    window: Window | None = None,
    cover: Coverage | None = None,
) -> None:
    """KPIs, the per-month table and where the factors came from; withheld hours said, never estimated.
    ``window``: the page's period; a month it covers only in part says which days (``2026-10 (02 – 31 Oct)``).
    ``cover`` (the emissions' coverage, warehouse/coverage.py) says why where no GPU-hour has a power reading."""
    st.subheader(heading)
    frame = frame.drop("withheld_resources", "withheld_days", strict=False)  # the coverage sentence says them
    if window is not None and "month" in frame.columns:
        frame = frame.with_columns(
            pl.col("month").map_elements(lambda m: period.month_label(m, window), return_dtype=pl.Utf8)
        )
    if frame.is_empty():
        st.info(
            labels.config_words(cover.sentence())
            if cover is not None and cover.sentence()
            else "No energy figures in the window: they come from measured GPU power on billed resources."
        )
        return
    if not float((frame["gpu_hours"] - frame["withheld_gpu_hours"]).sum() or 0):
        _unknown(frame, cover)
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


def _unknown(frame: pl.DataFrame, cover: Coverage | None) -> None:
    """No GPU-hour in the window has a power reading: every energy figure is unknown, not zero."""
    withheld = float(frame["withheld_gpu_hours"].sum() or 0)
    cols = st.columns(2)
    cols[0].metric("Emissions", "unknown", help="no billed GPU-hour in the window has a power measurement")
    cols[1].metric("GPU-hours without a power reading", f"{withheld:,.0f}")
    st.warning(
        labels.config_words(cover.sentence())
        if cover is not None and cover.sentence()
        else f"Emissions: unknown for all {withheld:,.0f} GPU-hours: no GPU power measurement."
    )
    labels.table(st, frame.drop([c for c in _ENERGY if c in frame.columns]))
