"""The gpufinops dashboard (Streamlit, multipage): GPU spend, waste and what to change, read-only.

Pages (dashboard/pages/) call ``warehouse.queries`` only, over a read-only connection opened per
render, so an ingest can write while the dashboard is open. Every page reads the viewer's scope
(finance: every team; lead: its teams) from ``dashboard.common.page_context``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard.common import page_context

PAGES = Path(__file__).resolve().parent / "pages"


def main() -> None:
    st.set_page_config(page_title="gpufinops", layout="wide")
    page_context()  # stops here for anyone without a role (each page also renders its banner)
    navigation = st.navigation([
        st.Page(PAGES / "overview.py", title="Overview", icon=":material/finance:", default=True),
        st.Page(PAGES / "team.py", title="Team", icon=":material/groups:"),
        st.Page(PAGES / "fleet.py", title="GPU fleet", icon=":material/memory:"),
        st.Page(PAGES / "recommendations.py", title="Recommendations", icon=":material/savings:"),
        st.Page(PAGES / "spot.py", title="Spot market", icon=":material/show_chart:"),
        st.Page(PAGES / "onprem.py", title="On-prem vs cloud", icon=":material/dns:"),
        st.Page(PAGES / "health.py", title="Data health", icon=":material/monitor_heart:"),
    ])
    navigation.run()


main()
