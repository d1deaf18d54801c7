"""The gpufinops dashboard (Streamlit, multipage): GPU spend, waste and what to change.

Pages (dashboard/pages/) read through ``warehouse.queries``, over a read-only connection opened per
render, so an ingest can write while the dashboard is open. The one write is a person's decision on a
finding: the Recommendations page records it through ``warehouse.recommendation_store.record_decision``
on a short-lived writer, scoped to the viewer's teams. Every page reads the viewer's scope
(finance: every team; lead: its teams) from ``dashboard.common.page_context``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from gpufinops.dashboard.common import db_path, page_context, prepared
from gpufinops.warehouse import db

PAGES = Path(__file__).resolve().parent / "pages"


def main() -> None:
    st.set_page_config(page_title="gpufinops", layout="wide")
    try:
        prepared(str(db_path()))
    except db.WarehouseError:
        pass  # the page's own connection says what is wrong with the warehouse, and the next render retries
    page_context()  # stops here for anyone without a role (each page also renders its banner)
    navigation = st.navigation(
        [
            st.Page(PAGES / "overview.py", title="Overview", icon=":material/finance:", default=True),
            st.Page(PAGES / "team.py", title="Team", icon=":material/groups:"),
            st.Page(PAGES / "fleet.py", title="GPU fleet", icon=":material/memory:"),
            st.Page(PAGES / "unit_costs.py", title="Unit costs", icon=":material/toll:"),
            st.Page(PAGES / "recommendations.py", title="Recommendations", icon=":material/savings:"),
            st.Page(PAGES / "spot.py", title="Spot market", icon=":material/show_chart:"),
            st.Page(PAGES / "onprem.py", title="On-prem vs cloud", icon=":material/dns:"),
            st.Page(PAGES / "health.py", title="Data health", icon=":material/monitor_heart:"),
        ]
    )
    navigation.run()


main()
