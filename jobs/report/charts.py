"""The report's charts: altair specs rendered to PNG with vl-convert (no browser, no network).

Each function takes plain rows (money already cast to float: a Decimal column makes a
chart treat money as categories) and returns PNG bytes, or None when there is nothing to draw.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import polars as pl

from gpufinops.kernel.labels import NO_TEAM

WIDTH = 600
SCALE = 2  # sharp on high-density screens; the <img> tag shows it at WIDTH
PROVIDER_COLORS = {"AWS": "#ff9900", "Google Cloud": "#4285f4", "onprem": "#6b7280"}


def _png(chart: alt.TopLevelMixin) -> bytes:
    import vl_convert as vlc

    spec = (
        chart.configure_view(strokeWidth=0)
        .configure_axis(labelFontSize=11, titleFontSize=11, gridColor="#e5e7eb")
        .configure_legend(labelFontSize=11, titleFontSize=11, orient="bottom")
        .to_json()
    )
    return _shrink(vlc.vegalite_to_png(spec, scale=SCALE))


def _shrink(png: bytes) -> bytes:
    """A 64-colour palette PNG: flat chart colours survive, the mail gets ~9× smaller (a 2× chart is
    ~150 KB as RGBA, ~15 KB quantised). Pillow comes with streamlit; without it the PNG goes as is."""
    try:
        from PIL import Image
    except ImportError:
        return png
    import io

    out = io.BytesIO()
    Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(
        out, "PNG", optimize=True
    )
    return out.getvalue()


def spend_trend(rows: list[dict[str, Any]], report_week: str) -> bytes | None:
    """Weekly spend stacked by provider; the report's week is labelled."""
    frame = pl.DataFrame(rows, schema={"week": pl.Utf8, "provider": pl.Utf8, "usd": pl.Float64})
    if frame.is_empty() or frame["usd"].sum() == 0:
        return None
    providers = sorted(frame["provider"].unique().to_list())
    colors = [PROVIDER_COLORS.get(p, "#9ca3af") for p in providers]
    weeks = sorted(frame["week"].unique().to_list())
    base = alt.Chart(frame).encode(x=alt.X("week:O", title=None, sort=weeks, axis=alt.Axis(labelAngle=0)))
    bars = base.mark_bar(size=38).encode(
        y=alt.Y("sum(usd):Q", title="Spend (USD)", axis=alt.Axis(format="$,.0f")),
        color=alt.Color("provider:N", title="Provider", scale=alt.Scale(domain=providers, range=colors)),
        order=alt.Order("provider:N"),
        opacity=alt.condition(alt.datum.week == report_week, alt.value(1.0), alt.value(0.55)),
    )
    totals = frame.group_by("week").agg(pl.col("usd").sum())
    labels = (
        alt.Chart(totals)
        .mark_text(dy=-7, fontSize=10, color="#374151")
        .encode(x=alt.X("week:O", sort=weeks), y="usd:Q", text=alt.Text("usd:Q", format="$,.0f"))
    )
    return _png((bars + labels).properties(width=WIDTH, height=230))


def top_recommendations(rows: list[dict[str, Any]]) -> bytes | None:
    """Monthly savings of the largest open recommendations, one bar each."""
    if not rows:
        return None
    frame = pl.DataFrame(rows, schema={"label": pl.Utf8, "kind": pl.Utf8, "usd": pl.Float64})
    order = frame.sort("usd", descending=True)["label"].to_list()
    bars = (
        alt.Chart(frame)
        .mark_bar(color="#059669")
        .encode(
            y=alt.Y("label:N", title=None, sort=order, axis=alt.Axis(labelLimit=330)),
            x=alt.X("usd:Q", title="Savings per month (USD)", axis=alt.Axis(format="$,.0f")),
            tooltip=["kind", "usd"],
        )
    )
    text = bars.mark_text(align="left", dx=4, fontSize=10, color="#374151").encode(
        text=alt.Text("usd:Q", format="$,.0f")
    )
    return _png((bars + text).properties(width=WIDTH - 290, height=max(60, 24 * len(rows))))


def idle_cost(rows: list[dict[str, Any]], report_week: str) -> bytes | None:
    """Weekly cost of idle GPU-hours, stacked by team."""
    frame = pl.DataFrame(rows, schema={"week": pl.Utf8, "team": pl.Utf8, "usd": pl.Float64})
    if frame.is_empty() or frame["usd"].sum() == 0:
        return None
    weeks = sorted(frame["week"].unique().to_list())
    chart = (
        alt.Chart(frame.with_columns(pl.col("team").fill_null(NO_TEAM)))
        .mark_bar(size=38)
        .encode(
            x=alt.X("week:O", title=None, sort=weeks, axis=alt.Axis(labelAngle=0)),
            y=alt.Y("sum(usd):Q", title="Idle GPU cost (USD)", axis=alt.Axis(format="$,.0f")),
            color=alt.Color("team:N", title="Team", scale=alt.Scale(scheme="tableau10")),
            opacity=alt.condition(alt.datum.week == report_week, alt.value(1.0), alt.value(0.55)),
        )
    )
    return _png(chart.properties(width=WIDTH, height=200))
